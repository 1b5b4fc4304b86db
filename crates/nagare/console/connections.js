// Open connections (every protocol) and the forward routes with their counters; both
// refresh every 5 s, and the routes show rates by differencing their counters.
"use strict";

NG.pages.connections = async function (ctx) {
  const { el } = NG;
  const list = el("div", { id: "connection-list" });
  NG.append(ctx.root, [el("h1", {}, "Connections"), list]);
  async function refresh() {
    let conns;
    try {
      conns = await NG.get("/connections");
    } catch (e) {
      if (ctx.alive()) NG.clear(list, NG.errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    conns.sort((a, b) => a.protocol.localeCompare(b.protocol) || a.id - b.id);
    const counts = {};
    for (const c of conns) counts[c.protocol] = (counts[c.protocol] || 0) + 1;
    const now = Date.now();
    NG.clear(
      list,
      NG.section(
        `${conns.length} open`,
        el(
          "span",
          { class: "muted" },
          Object.entries(counts)
            .map(([p, n]) => `${p} ${n}`)
            .join(" · "),
        ),
        NG.table(
          [
            { title: "Id", num: true, cell: (c) => c.id },
            { title: "Protocol", cell: (c) => el("span", { class: "badge" }, c.protocol) },
            { title: "Listener", cell: (c) => c.listener || "—" },
            { title: "Peer", cell: (c) => el("code", {}, c.peer) },
            { title: "Client id", cell: (c) => c.client_id || el("span", { class: "muted" }, "—") },
            { title: "User", cell: (c) => c.user || el("span", { class: "muted" }, "—") },
            { title: "Open for", num: true, cell: (c) => (c.opened_at_ms ? NG.duration((now - c.opened_at_ms) / 1000) : "—") },
            { title: "Bytes in", num: true, cell: (c) => NG.bytes(c.bytes_in) },
            { title: "Bytes out", num: true, cell: (c) => NG.bytes(c.bytes_out) },
          ],
          conns,
          { id: "connections", rowData: (c) => ({ protocol: c.protocol }), empty: "No open connections." },
        ),
      ),
    );
  }
  await refresh();
  ctx.every(5000, refresh);
};

NG.pages.forward = async function (ctx) {
  const { el } = NG;
  const list = el("div", { id: "route-list" });
  NG.append(ctx.root, [
    el("h1", {}, "Forward routes"),
    el("p", { class: "muted" }, "Fluentd forward events by route: tag pattern → topic, with the events and bytes each route took."),
    list,
  ]);
  async function refresh() {
    let routes;
    try {
      routes = await NG.get("/forward/routes");
    } catch (e) {
      if (ctx.alive()) NG.clear(list, NG.errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    const counters = {};
    routes.forEach((r, i) => (counters[i + ":" + r.pattern] = r.events));
    const rates = NG.rates("routes", counters);
    NG.clear(
      list,
      NG.section(
        "Routes",
        el("span", { class: "muted" }, "refreshes every 5 s"),
        NG.table(
          [
            { title: "Pattern", cell: (r) => el("code", {}, r.pattern) },
            { title: "Topic", cell: (r) => NG.routeTopic(r) },
            { title: "Events", num: true, class: "events", cell: (r) => NG.num(r.events) },
            { title: "Rate", num: true, cell: (r) => NG.rate(rates[routes.indexOf(r) + ":" + r.pattern], "ev") },
            { title: "Bytes", num: true, cell: (r) => NG.bytes(r.bytes) },
            { title: "Dead-lettered", num: true, cell: (r) => NG.num(r.dead_lettered) },
          ],
          routes,
          { id: "routes", rowData: (r) => ({ pattern: r.pattern }), empty: "No forward listener." },
        ),
      ),
    );
  }
  await refresh();
  ctx.every(5000, refresh);
};

// A route's topic: a configured name, the event's tag (`""`: the tag is the topic, as for
// events no route matched), or nothing when the route drops its events.
NG.routeTopic = function (r) {
  const { el } = NG;
  if (r.drop || r.topic === null || r.topic === undefined) return el("span", { class: "muted" }, "dropped");
  if (r.topic === "") return el("span", { class: "muted" }, "the tag");
  return NG.link(NG.href("topics", r.topic), r.topic);
};
