// The console's core: API calls, a DOM builder, formatting, and the hash router.
// Pages live in their own files and register themselves in NG.pages; each is a function
// (ctx, args, query) that fills ctx.root. Everything is built with DOM calls, never
// innerHTML, so topic names, keys and values from the broker cannot inject markup.
"use strict";

const NG = {
  pages: {},
  generation: 0,
};

// ---- API -------------------------------------------------------------------------

// Calls the admin API; resolves to the parsed JSON (or null for 204), rejects with an
// Error whose message is the server's {"error": ...} text or the HTTP status.
NG.api = async function (method, path, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new Error(`${method} ${path}: the broker did not answer (${e.message})`);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (_) {
      data = null;
    }
  }
  if (!res.ok) {
    const why = data && typeof data.error === "string" ? data.error : text.trim() || res.statusText;
    const err = new Error(`${method} ${path}: ${res.status} ${why}`);
    err.status = res.status;
    throw err;
  }
  if (text && data === null) {
    throw new Error(`${method} ${path}: the answer is not JSON`);
  }
  return data;
};

NG.get = (path) => NG.api("GET", path);

// ---- DOM -------------------------------------------------------------------------

// el("td", {class: "num", dataset: {x: 1}, onclick: fn}, "text", childNode, [more])
NG.el = function (tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "value") node.value = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  NG.append(node, children);
  return node;
};

NG.append = function (node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
};

NG.clear = function (node, ...children) {
  node.replaceChildren();
  return NG.append(node, children);
};

NG.errorBox = (err) =>
  NG.el("div", { class: "error", role: "alert" }, err instanceof Error ? err.message : String(err));

NG.link = (hash, text) => NG.el("a", { href: hash }, text);

// A hash for a route: NG.href("topics", name) -> "#/topics/<encoded name>".
NG.href = (...parts) => "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/");

NG.query = (params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
};

// A table: columns are {title, cell: row => node|text, num: bool, class}; rows data.
NG.table = function (columns, rows, opts = {}) {
  const head = NG.el("tr", {}, columns.map((c) => NG.el("th", { class: c.num ? "num" : null }, c.title)));
  const body = rows.map((r) =>
    NG.el(
      "tr",
      { dataset: opts.rowData ? opts.rowData(r) : undefined },
      columns.map((c) =>
        NG.el("td", { class: [c.num ? "num" : "", c.class || ""].join(" ").trim() || null }, c.cell(r)),
      ),
    ),
  );
  const table = NG.el(
    "table",
    { id: opts.id, class: "grid" },
    NG.el("thead", {}, head),
    NG.el("tbody", {}, body),
  );
  if (!rows.length) {
    return NG.el("div", {}, table, NG.el("p", { class: "empty" }, opts.empty || "Nothing here yet."));
  }
  return table;
};

// A section with a title and optional tools on the right of the title.
NG.section = (title, tools, ...body) =>
  NG.el("section", { class: "panel" }, NG.el("div", { class: "panel-head" }, NG.el("h2", {}, title), tools), body);

// A button that needs a second click within 4 s: for destructive actions, without the
// modal dialogs that block a page (and a headless browser).
NG.armedButton = function (label, confirmLabel, action) {
  let armed = null;
  const button = NG.el("button", { type: "button", class: "danger" }, label);
  button.addEventListener("click", async () => {
    if (!armed) {
      button.textContent = confirmLabel;
      button.classList.add("armed");
      armed = setTimeout(() => {
        armed = null;
        button.textContent = label;
        button.classList.remove("armed");
      }, 4000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.disabled = true;
    button.textContent = label;
    button.classList.remove("armed");
    try {
      await action();
    } finally {
      button.disabled = false;
    }
  });
  return button;
};

// A line that shows the outcome of an action: NG.status(node, promise).
NG.outcome = async function (node, work) {
  NG.clear(node, NG.el("span", { class: "muted" }, "working…"));
  try {
    const msg = await work();
    NG.clear(node, NG.el("span", { class: "ok" }, msg || "done"));
    return true;
  } catch (e) {
    NG.clear(node, NG.errorBox(e));
    return false;
  }
};

// ---- formatting ---------------------------------------------------------------------

NG.num = (n) => (n === null || n === undefined || Number.isNaN(n) ? "—" : Number(n).toLocaleString("en-US"));

NG.bytes = function (n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = Number(n);
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? String(Math.round(v)) : v.toFixed(v < 10 ? 2 : 1)) + " " + units[i];
};

NG.rate = function (perSecond, unit) {
  if (perSecond === null || perSecond === undefined || !Number.isFinite(perSecond)) return "—";
  if (unit === "B") return NG.bytes(perSecond) + "/s";
  const digits = perSecond > 0 && perSecond < 10 ? 1 : 0;
  return perSecond.toLocaleString("en-US", { maximumFractionDigits: digits }) + " " + unit + "/s";
};

NG.duration = function (seconds) {
  if (seconds === null || seconds === undefined) return "—";
  let s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return `${d}d ${h}h ${m}m`;
  if (h) return `${h}h ${m}m ${s}s`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
};

// Local time with milliseconds: "2026-11-25 07:30:12.345".
NG.time = function (ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return (
    `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`
  );
};

// Differences of cumulative counters between two polls, per second. `key` names a
// sampler; `values` maps counter names to totals. Returns {name: rate|null}.
NG.rates = function (key, values) {
  const now = performance.now();
  const samples = (NG.rates.samples ||= {});
  const prev = samples[key];
  samples[key] = { at: now, values };
  const out = {};
  for (const name of Object.keys(values)) {
    if (!prev || prev.values[name] === undefined || now <= prev.at) {
      out[name] = null;
    } else {
      // A counter that went down (a restart, a deleted topic) has no meaningful rate.
      const delta = values[name] - prev.values[name];
      out[name] = delta < 0 ? null : (delta * 1000) / (now - prev.at);
    }
  }
  return out;
};

// ---- router ----------------------------------------------------------------------

// "#/topics/a%2Fb?x=1" -> {page: "topics", args: ["a/b"], query: URLSearchParams}
NG.route = function () {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search] = hash.split("?", 2);
  const parts = path.split("/").filter((p) => p !== "").map(decodeURIComponent);
  const page = parts.shift() || "overview";
  return { page, args: parts, query: new URLSearchParams(search || "") };
};

NG.render = function () {
  const { page, args, query } = NG.route();
  const gen = ++NG.generation;
  for (const stop of NG.stops || []) stop();
  NG.stops = [];
  const root = document.getElementById("main");
  root.dataset.page = page;
  root.dataset.state = "loading";
  root.replaceChildren();
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === page);
  }
  // What a page gets: where to draw, whether it is still the page shown (answers to
  // requests of a page the user left are dropped), and timers that stop on leaving.
  const ctx = {
    root,
    alive: () => gen === NG.generation,
    every(ms, fn) {
      const id = setInterval(() => {
        if (ctx.alive()) fn();
      }, ms);
      NG.stops.push(() => clearInterval(id));
    },
    ready() {
      if (ctx.alive()) root.dataset.state = "ready";
    },
  };
  const show = NG.pages[page];
  if (!show) {
    NG.clear(root, NG.errorBox(`No page ${JSON.stringify(page)}.`));
    ctx.ready();
    return;
  }
  document.title = `${page} · nagare`;
  Promise.resolve()
    .then(() => show(ctx, args, query))
    .catch((e) => {
      if (ctx.alive()) NG.append(root, [NG.errorBox(e)]);
    })
    .finally(() => ctx.ready());
};

// The version in the header, once (it is also on the overview).
NG.showBuild = async function () {
  try {
    const s = await NG.get("/status");
    const build = document.getElementById("build");
    build.textContent = `v${s.version}` + (s.commit ? ` (${s.commit})` : "");
  } catch (_) {
    // The overview shows the error; the header stays empty.
  }
};

window.addEventListener("hashchange", NG.render);
window.addEventListener("DOMContentLoaded", () => {
  NG.render();
  NG.showBuild();
});
