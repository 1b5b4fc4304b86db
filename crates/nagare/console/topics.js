// Topics: the list (polled every 2 s for rates: differences of the summed log end
// offsets and sizes), the create form, and a topic's page (partitions, configs, delete).
"use strict";

NG.topicTotals = function (t) {
  let messages = 0;
  let end = 0;
  let size = 0;
  for (const p of t.partitions) {
    messages += p.log_end_offset - p.log_start_offset;
    end += p.log_end_offset;
    size += p.size_bytes;
  }
  return { messages, end, size };
};

NG.pages.topics = async function (ctx, args) {
  if (args.length) return NG.topicPage(ctx, args[0]);
  const { el } = NG;
  const list = el("div", { id: "topic-list" });
  NG.append(ctx.root, [
    el("h1", {}, "Topics"),
    NG.section("All topics", el("span", { class: "muted" }, "refreshes every 2 s"), list),
    NG.section("Create a topic", null, createForm()),
  ]);

  async function refresh() {
    let topics;
    try {
      topics = await NG.get("/topics");
    } catch (e) {
      if (ctx.alive()) NG.clear(list, NG.errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    topics.sort((a, b) => a.name.localeCompare(b.name));
    const totals = new Map(topics.map((t) => [t.name, NG.topicTotals(t)]));
    const counters = {};
    for (const [name, t] of totals) {
      counters["r:" + name] = t.end;
      counters["b:" + name] = t.size;
    }
    const rates = NG.rates("topics", counters);
    NG.clear(
      list,
      NG.table(
        [
          { title: "Topic", cell: (t) => NG.link(NG.href("topics", t.name), t.name) },
          { title: "Partitions", num: true, cell: (t) => t.partitions.length },
          { title: "Messages", num: true, class: "messages", cell: (t) => NG.num(totals.get(t.name).messages) },
          { title: "End offsets", num: true, cell: (t) => NG.num(totals.get(t.name).end) },
          { title: "Size", num: true, cell: (t) => NG.bytes(totals.get(t.name).size) },
          { title: "In", num: true, cell: (t) => NG.rate(rates["r:" + t.name], "msg") },
          { title: "Bytes in", num: true, cell: (t) => NG.rate(rates["b:" + t.name], "B") },
          { title: "", cell: (t) => NG.link(NG.href("messages") + NG.query({ topic: t.name, tail: 20 }), "browse") },
        ],
        topics,
        { id: "topics", rowData: (t) => ({ topic: t.name }), empty: "No topics (or none you may describe)." },
      ),
    );
  }

  function createForm() {
    const name = el("input", { name: "name", required: true, placeholder: "orders", pattern: "[A-Za-z0-9._\\-]+" });
    const partitions = el("input", { name: "partitions", type: "number", min: 1, placeholder: "default" });
    const config = el("textarea", { name: "config", rows: 3, placeholder: "retention.ms=604800000\ncleanup.policy=delete" });
    const out = el("div", { class: "outcome" });
    const form = el(
      "form",
      { class: "form", id: "create-topic" },
      el("label", {}, "Name", name),
      el("label", {}, "Partitions", partitions),
      el("label", { class: "wide" }, "Config (key=value per line)", config),
      el("div", { class: "actions" }, el("button", { type: "submit" }, "Create"), out),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { name: name.value.trim(), config: {} };
      if (partitions.value) body.partitions = Number(partitions.value);
      for (const line of config.value.split("\n")) {
        const l = line.trim();
        if (!l || l.startsWith("#")) continue;
        const i = l.indexOf("=");
        if (i < 1) {
          NG.clear(out, NG.errorBox(`config line ${JSON.stringify(l)} is not key=value`));
          return;
        }
        body.config[l.slice(0, i).trim()] = l.slice(i + 1).trim();
      }
      const ok = await NG.outcome(out, async () => {
        await NG.api("POST", "/topics", body);
        return `created ${body.name}`;
      });
      if (ok) {
        form.reset();
        refresh();
      }
    });
    return form;
  }

  await refresh();
  ctx.every(2000, refresh);
};

NG.topicPage = async function (ctx, name) {
  const { el } = NG;
  const t = await NG.get("/topics/" + encodeURIComponent(name));
  if (!ctx.alive()) return;
  const totals = NG.topicTotals(t);
  const out = el("div", { class: "outcome" });
  const del = NG.armedButton("Delete topic", `Click again to delete ${t.name}`, () =>
    NG.outcome(out, async () => {
      await NG.api("DELETE", "/topics/" + encodeURIComponent(t.name));
      location.hash = "#/topics";
      return "deleted";
    }),
  );
  NG.append(ctx.root, [
    el("p", { class: "crumbs" }, NG.link("#/topics", "Topics"), " / "),
    el("h1", {}, t.name),
    el(
      "p",
      { class: "muted" },
      `id ${t.id} · ${t.partitions.length} partitions · ${NG.num(totals.messages)} messages · ${NG.bytes(totals.size)}`,
    ),
    NG.section(
      "Partitions",
      null,
      NG.table(
        [
          { title: "Partition", num: true, cell: (p) => p.partition },
          { title: "Log start", num: true, cell: (p) => NG.num(p.log_start_offset) },
          { title: "Log end", num: true, cell: (p) => NG.num(p.log_end_offset) },
          { title: "Messages", num: true, class: "messages", cell: (p) => NG.num(p.log_end_offset - p.log_start_offset) },
          { title: "Size", num: true, cell: (p) => NG.bytes(p.size_bytes) },
          {
            title: "",
            cell: (p) =>
              NG.link(NG.href("messages") + NG.query({ topic: t.name, partition: p.partition, tail: 20 }), "browse"),
          },
        ],
        t.partitions,
        { id: "partitions" },
      ),
    ),
    NG.section(
      "Configuration",
      null,
      NG.table(
        [
          { title: "Key", cell: (kv) => el("code", {}, kv[0]) },
          { title: "Value", cell: (kv) => el("code", {}, kv[1]) },
        ],
        Object.entries(t.config || {}).sort(),
        { id: "topic-config" },
      ),
    ),
    NG.section("Danger zone", null, el("div", { class: "actions" }, del, out)),
  ]);
};
