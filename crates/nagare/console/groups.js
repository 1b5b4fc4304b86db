// Consumer groups: the list (state, members, total lag) and a group's page (members
// with their assignments, committed offsets with lag per partition, reset offsets,
// delete). Resetting and deleting are refused by the broker unless the group is empty.
"use strict";

NG.pages.groups = async function (ctx, args) {
  if (args.length) return NG.groupPage(ctx, args[0]);
  const { el } = NG;
  const list = el("div", { id: "group-list" });
  NG.append(ctx.root, [el("h1", {}, "Consumer groups"), NG.section("Groups", el("span", { class: "muted" }, "refreshes every 5 s"), list)]);
  async function refresh() {
    let groups;
    try {
      groups = await NG.get("/groups");
    } catch (e) {
      if (ctx.alive()) NG.clear(list, NG.errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    groups.sort((a, b) => a.group_id.localeCompare(b.group_id));
    NG.clear(
      list,
      NG.table(
        [
          { title: "Group", cell: (g) => NG.link(NG.href("groups", g.group_id), g.group_id) },
          { title: "State", cell: (g) => NG.stateBadge(g.state) },
          { title: "Protocol", cell: (g) => g.protocol_type || "—" },
          { title: "Members", num: true, cell: (g) => NG.num(g.members) },
          { title: "Lag", num: true, class: "lag", cell: (g) => NG.num(g.lag) },
        ],
        groups,
        { id: "groups", rowData: (g) => ({ group: g.group_id }), empty: "No consumer groups." },
      ),
    );
  }
  await refresh();
  ctx.every(5000, refresh);
};

NG.stateBadge = (state) => NG.el("span", { class: "badge state-" + String(state || "").toLowerCase() }, state || "?");

NG.groupPage = async function (ctx, id) {
  const { el } = NG;
  const path = "/groups/" + encodeURIComponent(id);
  const g = await NG.get(path);
  if (!ctx.alive()) return;
  const offsets = (g.offsets || []).slice().sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition);
  const totalLag = offsets.reduce((s, o) => s + (Number(o.lag) || 0), 0);
  const members = NG.table(
    [
      { title: "Member", cell: (m) => el("code", {}, m.member_id) },
      { title: "Instance", cell: (m) => m.group_instance_id || "—" },
      { title: "Client id", cell: (m) => m.client_id || "—" },
      { title: "Host", cell: (m) => m.client_host || "—" },
      {
        title: "Assignment",
        cell: (m) =>
          (m.assignment || []).length
            ? (m.assignment || []).map((a) => el("div", {}, `${a.topic}: ${a.partitions.join(", ")}`))
            : el("span", { class: "muted" }, "none"),
      },
    ],
    g.members || [],
    { id: "members", empty: "No members (the group is empty)." },
  );
  const lagTable = NG.table(
    [
      { title: "Topic", cell: (o) => NG.link(NG.href("topics", o.topic), o.topic) },
      { title: "Partition", num: true, cell: (o) => o.partition },
      { title: "Committed", num: true, cell: (o) => NG.num(o.committed_offset) },
      { title: "Log end", num: true, cell: (o) => NG.num(o.log_end_offset) },
      { title: "Lag", num: true, class: "lag", cell: (o) => NG.num(o.lag) },
      { title: "Metadata", cell: (o) => o.metadata || "" },
    ],
    offsets,
    { id: "offsets", rowData: (o) => ({ topic: o.topic, partition: o.partition }), empty: "No committed offsets." },
  );
  const deleteOut = el("div", { class: "outcome" });
  const del = NG.armedButton("Delete group", `Click again to delete ${g.group_id}`, () =>
    NG.outcome(deleteOut, async () => {
      await NG.api("DELETE", path);
      location.hash = "#/groups";
      return "deleted";
    }),
  );
  NG.append(ctx.root, [
    el("p", { class: "crumbs" }, NG.link("#/groups", "Groups"), " / "),
    el("h1", {}, g.group_id),
    el(
      "p",
      {},
      NG.stateBadge(g.state),
      " ",
      el("span", { class: "muted" }, `${g.protocol_type || "no protocol"}${g.protocol_name ? " · " + g.protocol_name : ""} · total lag `),
      el("strong", { id: "group-lag" }, NG.num(totalLag)),
    ),
    NG.section("Members", null, members),
    NG.section("Offsets and lag", null, lagTable),
    NG.section("Reset offsets", null, resetForm(offsets)),
    NG.section("Danger zone", null, el("div", { class: "actions" }, del, deleteOut)),
  ]);

  function resetForm(offsets) {
    const topics = [...new Set(offsets.map((o) => o.topic))];
    const topic = el("input", { name: "topic", required: true, list: "reset-topics", value: topics[0] || "" });
    const to = el(
      "select",
      { name: "to" },
      [
        ["earliest", "Earliest"],
        ["latest", "Latest"],
        ["offset", "Offset"],
        ["timestamp", "Time"],
      ].map(([v, l]) => el("option", { value: v }, l)),
    );
    const value = el("input", { name: "value", placeholder: "offset or time", disabled: true });
    to.addEventListener("change", () => {
      value.disabled = to.value === "earliest" || to.value === "latest";
      value.type = to.value === "timestamp" ? "datetime-local" : "number";
      if (to.value === "timestamp") value.step = "1";
    });
    const partitions = el("input", { name: "partitions", placeholder: "all, or 0,1,2" });
    const out = el("div", { class: "outcome" });
    const form = el(
      "form",
      { class: "form", id: "reset-offsets" },
      el("datalist", { id: "reset-topics" }, topics.map((t) => el("option", { value: t }))),
      el("label", {}, "Topic", topic),
      el("label", {}, "To", to),
      el("label", {}, "Offset / time", value),
      el("label", {}, "Partitions", partitions),
      el("div", { class: "actions" }, el("button", { type: "submit" }, "Reset"), out),
      el("p", { class: "muted wide" }, "The broker refuses while the group has members (stop the consumers first)."),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { topic: topic.value.trim() };
      if (to.value === "earliest" || to.value === "latest") body.to = to.value;
      else if (to.value === "offset") body.to = { offset: Number(value.value) };
      else body.to = { timestamp_ms: new Date(value.value).getTime() };
      const parts = partitions.value
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      if (parts.length) body.partitions = parts.map(Number);
      const ok = await NG.outcome(out, async () => {
        const now = await NG.api("POST", path + "/offsets", body);
        const n = Array.isArray(now) ? now.length : Array.isArray(now && now.offsets) ? now.offsets.length : "the";
        return `reset ${n} partition offsets`;
      });
      if (ok) setTimeout(() => ctx.alive() && NG.render(), 800);
    });
    return form;
  }
};
