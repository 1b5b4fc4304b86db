// The message browser: pick a topic and partition and where to start (the last N
// records, an offset, a time, or the log start); the choice lives in the URL hash
// (#/messages?topic=t&partition=0&tail=20) so a view can be bookmarked and paged.
"use strict";

NG.pages.messages = async function (ctx, _args, query) {
  const { el } = NG;
  const topics = await NG.get("/topics");
  if (!ctx.alive()) return;
  topics.sort((a, b) => a.name.localeCompare(b.name));

  const want = {
    topic: query.get("topic") || (topics[0] && topics[0].name) || "",
    partition: query.get("partition") || "0",
    limit: query.get("limit") || "",
  };
  let mode = "tail";
  let from = "20";
  if (query.has("offset")) [mode, from] = ["offset", query.get("offset")];
  else if (query.has("timestamp_ms")) [mode, from] = ["time", query.get("timestamp_ms")];
  else if (query.has("start")) [mode, from] = ["start", ""];
  else if (query.has("tail")) from = query.get("tail");

  const topicSel = el(
    "select",
    { name: "topic", id: "mb-topic" },
    topics.map((t) => el("option", { value: t.name, selected: t.name === want.topic }, t.name)),
  );
  const partSel = el("select", { name: "partition", id: "mb-partition" });
  const fillPartitions = () => {
    const t = topics.find((x) => x.name === topicSel.value);
    NG.clear(
      partSel,
      (t ? t.partitions : []).map((p) =>
        el("option", { value: p.partition, selected: String(p.partition) === want.partition }, String(p.partition)),
      ),
    );
  };
  fillPartitions();
  topicSel.addEventListener("change", fillPartitions);
  const modeSel = el(
    "select",
    { name: "mode", id: "mb-mode" },
    [
      ["tail", "Last N messages"],
      ["offset", "From offset"],
      ["time", "From time"],
      ["start", "From the log start"],
    ].map(([v, label]) => el("option", { value: v, selected: v === mode }, label)),
  );
  const fromInput = el("input", { name: "from", id: "mb-from" });
  const setFromInput = () => {
    const m = modeSel.value;
    fromInput.disabled = m === "start";
    if (m === "time") {
      fromInput.type = "datetime-local";
      fromInput.step = "1";
      const ms = mode === "time" ? Number(from) : Date.now() - 3600 * 1000;
      fromInput.value = NG.localInputValue(ms);
    } else {
      fromInput.type = "number";
      fromInput.min = "0";
      fromInput.value = m === mode ? from : m === "tail" ? "20" : "0";
    }
  };
  setFromInput();
  modeSel.addEventListener("change", setFromInput);
  const limitInput = el("input", { name: "limit", type: "number", min: 1, max: 500, placeholder: "50", value: want.limit });

  const form = el(
    "form",
    { class: "form", id: "browse" },
    el("label", {}, "Topic", topicSel),
    el("label", {}, "Partition", partSel),
    el("label", {}, "Start", modeSel),
    el("label", {}, "N / offset / time", fromInput),
    el("label", {}, "Limit", limitInput),
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Show")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = { topic: topicSel.value, partition: partSel.value, limit: limitInput.value };
    const m = modeSel.value;
    if (m === "tail") q.tail = fromInput.value || "20";
    else if (m === "offset") q.offset = fromInput.value || "0";
    else if (m === "time") q.timestamp_ms = fromInput.value ? new Date(fromInput.value).getTime() : Date.now();
    else q.start = "1";
    const hash = "#/messages" + NG.query(q);
    // Same query again: show it again (fresh records), as a reload would.
    if (location.hash === hash) NG.render();
    else location.hash = hash;
  });

  const results = el("div", { id: "messages" });
  NG.append(ctx.root, [el("h1", {}, "Messages"), NG.section("Browse a partition", null, form), results]);
  if (!topics.length) {
    NG.clear(results, el("p", { class: "empty" }, "No topics to browse."));
    return;
  }
  if (!query.has("topic")) return;

  const api = { partition: want.partition, limit: want.limit };
  if (mode === "tail") api.tail = from;
  else if (mode === "offset") api.offset = from;
  else if (mode === "time") api.timestamp_ms = from;
  const page = await NG.get(`/topics/${encodeURIComponent(want.topic)}/messages${NG.query(api)}`);
  if (!ctx.alive()) return;
  NG.clear(results, NG.messageList(page, want));
};

// "2026-11-25T07:30:00" in local time, what a datetime-local input holds.
NG.localInputValue = function (ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
};

NG.messageList = function (page, want) {
  const { el } = NG;
  const msgs = page.messages || [];
  const first = msgs.length ? msgs[0].offset : page.next_offset;
  const limit = Number(want.limit) || 50;
  const base = { topic: page.topic, partition: page.partition, limit: want.limit };
  const older = Math.max(page.log_start_offset, first - limit);
  const nav = el(
    "div",
    { class: "pager" },
    first > page.log_start_offset
      ? NG.link("#/messages" + NG.query({ ...base, offset: older }), "← older")
      : el("span", { class: "muted" }, "← older"),
    el(
      "span",
      { class: "muted" },
      `${msgs.length} messages · partition offsets ${NG.num(page.log_start_offset)} – ${NG.num(page.log_end_offset)}`,
    ),
    page.next_offset < page.log_end_offset
      ? NG.link("#/messages" + NG.query({ ...base, offset: page.next_offset }), "newer →")
      : el("span", { class: "muted" }, "newer →"),
  );
  const table = NG.table(
    [
      { title: "Offset", num: true, class: "offset", cell: (m) => m.offset },
      { title: "Timestamp", class: "ts", cell: (m) => NG.time(m.timestamp_ms) },
      { title: "Key", class: "key", cell: (m) => NG.renderBytes(m.key) },
      { title: "Value", class: "value-cell", cell: (m) => NG.renderValue(m.value) },
      {
        title: "Headers",
        class: "headers",
        cell: (m) =>
          (m.headers || []).length
            ? el(
                "dl",
                { class: "kv" },
                m.headers.map((h) => [el("dt", {}, h.key), el("dd", {}, NG.renderBytes(h.value))]),
              )
            : el("span", { class: "muted" }, "—"),
      },
    ],
    msgs,
    { id: "message-table", rowData: (m) => ({ offset: m.offset }), empty: "No messages from there." },
  );
  return NG.section(`${page.topic} / ${page.partition}`, null, nav, table);
};

// A key or header value: {"text"} or {"base64"} or null.
NG.renderBytes = function (v) {
  const { el } = NG;
  if (v === null || v === undefined) return el("span", { class: "muted" }, "null");
  if ("text" in v) return el("code", {}, v.text);
  return el("span", {}, el("span", { class: "badge" }, "base64"), " ", el("code", {}, v.base64));
};

// A value: JSON and msgpack pretty-printed, text as is, binary as base64.
NG.renderValue = function (v) {
  const { el } = NG;
  if (v === null || v === undefined) return el("span", { class: "muted" }, "null (tombstone)");
  let kind;
  let text;
  if ("json" in v) [kind, text] = ["JSON", JSON.stringify(v.json, null, 2)];
  else if ("msgpack" in v) [kind, text] = ["msgpack", JSON.stringify(v.msgpack, null, 2)];
  else if ("text" in v) [kind, text] = ["text", v.text];
  else [kind, text] = ["base64", v.base64];
  return el(
    "div",
    {},
    el("span", { class: "badge kind-" + kind.toLowerCase() }, kind),
    el("pre", { class: "value", dataset: { kind: kind.toLowerCase() } }, text),
  );
};
