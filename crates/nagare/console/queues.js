// STOMP queues: depth, unacked, consumers and redeliveries, with a purge button (it
// drops every message not yet delivered: the queue's log is trimmed to its end).
"use strict";

NG.pages.queues = async function (ctx, args) {
  if (args.length) return NG.queuePage(ctx, args[0]);
  const { el } = NG;
  const list = el("div", { id: "queue-list" });
  const out = el("div", { class: "outcome" });
  NG.append(ctx.root, [el("h1", {}, "STOMP queues"), NG.section("Queues", el("span", { class: "muted" }, "refreshes every 5 s"), out, list)]);
  async function refresh() {
    let queues;
    try {
      queues = await NG.get("/queues");
    } catch (e) {
      if (ctx.alive()) NG.clear(list, NG.errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    queues.sort((a, b) => a.name.localeCompare(b.name));
    NG.clear(list, NG.queueTable(queues, out, refresh));
  }
  await refresh();
  // A purge button armed for its second click must not be redrawn under the pointer.
  ctx.every(5000, () => {
    if (!list.querySelector("button.armed")) refresh();
  });
};

NG.queueTable = function (queues, out, after) {
  const { el } = NG;
  return NG.table(
    [
      { title: "Queue", cell: (q) => NG.link(NG.href("queues", q.name), q.name) },
      { title: "Topic", cell: (q) => (q.topic ? NG.link(NG.href("topics", q.topic), q.topic) : "—") },
      { title: "Depth", num: true, class: "depth", cell: (q) => NG.num(q.depth) },
      { title: "Unacked", num: true, class: "unacked", cell: (q) => NG.num(q.unacked) },
      { title: "Consumers", num: true, cell: (q) => NG.num(q.consumers) },
      { title: "Redeliveries", num: true, cell: (q) => NG.num(q.redeliveries) },
      {
        title: "",
        cell: (q) =>
          NG.armedButton("Purge", "Click again to purge", () =>
            NG.outcome(out, async () => {
              const r = await NG.api("POST", `/queues/${encodeURIComponent(q.name)}/purge`);
              after();
              return `purged ${NG.num(r && r.purged)} messages from ${q.name}`;
            }),
          ),
      },
    ],
    queues,
    { id: "queues", rowData: (q) => ({ queue: q.name }), empty: "No queues." },
  );
};

NG.queuePage = async function (ctx, name) {
  const { el } = NG;
  const q = await NG.get("/queues/" + encodeURIComponent(name));
  if (!ctx.alive()) return;
  const out = el("div", { class: "outcome" });
  const about = NG.table(
    [
      { title: "", cell: (x) => x[0] },
      { title: "", num: true, cell: (x) => x[1] },
    ],
    [
      ["log start offset", NG.num(q.log_start_offset)],
      ["log end offset", NG.num(q.log_end_offset)],
    ],
  );
  NG.append(ctx.root, [
    el("p", { class: "crumbs" }, NG.link("#/queues", "Queues"), " / "),
    el("h1", {}, q.name),
    NG.section("Queue", null, out, NG.queueTable([q], out, () => setTimeout(() => ctx.alive() && NG.render(), 300))),
    NG.section("Log", null, about),
    q.topic ? el("p", {}, NG.link(NG.href("messages") + NG.query({ topic: q.topic, tail: 20 }), "Browse the queue's messages")) : null,
  ]);
};
