// Overview: /status every 2 s. Rates are the differences of the cumulative `traffic`
// totals between two polls, so they show "—" until the second answer.
"use strict";

NG.pages.overview = async function (ctx) {
  const { el } = NG;
  const body = el("div", { id: "overview" });
  NG.append(ctx.root, [el("h1", {}, "Overview"), body]);
  const history = [];

  const card = (label, value, sub, id) =>
    el("div", { class: "card", id }, el("div", { class: "label" }, label), el("div", { class: "value" }, value), sub ? el("div", { class: "sub" }, sub) : null);

  async function refresh() {
    let s;
    try {
      s = await NG.get("/status");
    } catch (e) {
      if (ctx.alive()) NG.clear(body, NG.errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    const t = s.traffic || {};
    const r = NG.rates("status", {
      bytes_in: t.bytes_in,
      bytes_out: t.bytes_out,
      records_in: t.records_in,
      records_out: t.records_out,
    });
    if (r.records_in !== null) {
      history.push(r);
      if (history.length > 60) history.shift();
    }
    const c = s.connections || {};
    const d = s.disk || {};
    const openConnections = Object.values(c).reduce((a, b) => a + (Number(b) || 0), 0);
    const cards = el(
      "div",
      { class: "cards" },
      card("Version", el("span", { id: "ov-version" }, s.version || "?"), s.commit ? `commit ${s.commit}` : null),
      card("Uptime", NG.duration(s.uptime_seconds), s.started_at_ms ? `since ${NG.time(s.started_at_ms)}` : null),
      card("In", el("span", { id: "ov-in" }, NG.rate(r.records_in, "msg")), NG.rate(r.bytes_in, "B")),
      card("Out", el("span", { id: "ov-out" }, NG.rate(r.records_out, "msg")), NG.rate(r.bytes_out, "B")),
      card(
        "Connections",
        NG.num(openConnections),
        Object.entries(c)
          .map(([k, v]) => `${k} ${v}`)
          .join(" · "),
      ),
      card(
        "Disk",
        NG.bytes(d.log_bytes),
        d.total_bytes ? `${NG.bytes(d.free_bytes)} free of ${NG.bytes(d.total_bytes)}` : null,
      ),
      card("Topics", NG.num(s.topics), `${NG.num(s.partitions)} partitions`),
      card("Groups · Queues", `${NG.num(s.groups)} · ${NG.num(s.queues)}`),
    );
    const listeners = NG.table(
      [
        { title: "Listener", cell: (l) => l.name },
        { title: "Protocol", cell: (l) => l.protocol },
        { title: "Address", cell: (l) => el("code", {}, l.address) },
        { title: "TLS", cell: (l) => (l.tls ? "yes" : "no") },
      ],
      s.listeners || [],
      { empty: "No listeners reported." },
    );
    const about = NG.table(
      [
        { title: "Node", cell: (x) => x[0] },
        { title: "", cell: (x) => el("code", {}, x[1]) },
      ],
      [
        ["node id", s.node_id],
        ["cluster id", s.cluster_id],
        ["data dir", s.data_dir],
      ].filter((x) => x[1] !== undefined && x[1] !== null),
    );
    NG.clear(
      body,
      cards,
      NG.section("Traffic, last 2 minutes", null, NG.chart(history)),
      el("div", { class: "columns" }, NG.section("Listeners", null, listeners), NG.section("Node", null, about)),
    );
  }

  await refresh();
  ctx.every(2000, refresh);
};

// A small SVG line chart of records in/out per second.
NG.chart = function (history) {
  const ns = "http://www.w3.org/2000/svg";
  const w = 600;
  const h = 120;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  const max = Math.max(1, ...history.map((r) => Math.max(r.records_in || 0, r.records_out || 0)));
  const line = (key, cls) => {
    if (history.length < 2) return;
    const step = w / 59;
    const x0 = w - step * (history.length - 1);
    const pts = history.map((r, i) => `${(x0 + i * step).toFixed(1)},${(h - 4 - ((r[key] || 0) / max) * (h - 16)).toFixed(1)}`);
    const p = document.createElementNS(ns, "polyline");
    p.setAttribute("points", pts.join(" "));
    p.setAttribute("class", cls);
    svg.append(p);
  };
  line("records_in", "in");
  line("records_out", "out");
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", "4");
  label.setAttribute("y", "12");
  label.textContent = history.length < 2 ? "collecting samples…" : `peak ${NG.rate(max, "msg")}`;
  svg.append(label);
  return NG.el(
    "div",
    {},
    svg,
    NG.el("div", { class: "legend" }, NG.el("span", { class: "in" }, "■ in"), " ", NG.el("span", { class: "out" }, "■ out")),
  );
};
