// Consumer-group pages: the list (one request for every group) and one group with its
// members, lag per partition, lag in time, lag history and the offset reset; a share group
// (KIP-932) shows its share partitions instead: start offset, in flight, acquired, lag.
import { api, card, confirmDialog, dataTable, dl, duration, el, link, num, pill } from "./ui.js";
import { lineChart } from "./chart.js";

const enc = encodeURIComponent;
const STATE_KIND = { Stable: "ok", Empty: "idle", Dead: "down", PreparingRebalance: "warn", CompletingRebalance: "warn", Assigning: "warn", Reconciling: "warn" };

export const groupList = {
  title: () => "Consumer groups",
  api: () => "/console/api/groups",
  mount(root) {
    const table = dataTable({
      testid: "groups", search: "Search groups", rowId: (g) => `group-${g.group_id}`, sortKey: "total_lag", desc: true,
      columns: [
        { key: "group_id", label: "Group", render: (g) => link(`/dashboard/groups/${enc(g.group_id)}`, g.group_id) },
        { key: "state", label: "State", render: (g) => pill(g.state, STATE_KIND[g.state] || "idle") },
        { key: "type", label: "Type", render: (g) => g.type || "classic" },
        { key: "members", label: "Members", num: true },
        { key: "topics_text", label: "Topics" },
        { key: "partitions", label: "Partitions", num: true },
        { key: "total_lag", label: "Total lag", num: true, render: (g) => num(g.total_lag) },
      ],
      empty: "no consumer groups",
    });
    const note = el("p", { class: "warn-text", "data-testid": "unreachable" });
    root.append(note, card(null, table.node));
    return { table, note };
  },
  update(s, d) {
    s.note.textContent = d.unreachable && d.unreachable.length
      ? `Broker(s) ${d.unreachable.join(", ")} did not answer: the groups they coordinate are missing.` : "";
    s.table.setRows(d.groups.map((g) => ({ ...g, topics_text: g.topics.join(", ") })));
  },
};

function resetForm(group, topics, onDone) {
  const result = el("p", { class: "muted", "aria-live": "polite", "data-testid": "reset-result" });
  const form = el("form", { class: "reset-form", "data-testid": "reset-form" },
    el("label", {}, "Topic ", el("select", { name: "topic", "data-testid": "reset-topic" },
      el("option", { value: "" }, "all committed"), ...topics.map((t) => el("option", { value: t }, t)))),
    el("label", {}, "To ", el("select", { name: "to", "data-testid": "reset-to" },
      ...[["earliest", "earliest"], ["latest", "latest"], ["timestamp", "a time"], ["offset", "an offset"]].map(([v, t]) => el("option", { value: v }, t)))),
    el("label", { class: "reset-offset" }, "Offset ", el("input", { name: "offset", type: "number", min: 0, value: 0, "data-testid": "reset-offset" })),
    el("label", { class: "reset-time" }, "Time ", el("input", { name: "time", type: "datetime-local", step: 1, "data-testid": "reset-time" })),
    el("button", { type: "submit", class: "danger", "data-testid": "reset-go" }, "Reset offsets…"));
  const sync = () => {
    form.querySelector(".reset-offset").hidden = form.elements.to.value !== "offset";
    form.querySelector(".reset-time").hidden = form.elements.to.value !== "timestamp";
  };
  form.elements.to.addEventListener("change", sync);
  sync();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = form.elements;
    const body = { group, to: f.to.value };
    if (f.topic.value) body.topic = f.topic.value;
    if (f.to.value === "offset") body.value = Number(f.offset.value || 0);
    if (f.to.value === "timestamp") body.value = f.time.value ? new Date(f.time.value).getTime() : 0;
    const what = `${body.topic ? `topic ${body.topic}` : "every committed partition"} to ${f.to.value}${body.value !== undefined ? " " + (f.to.value === "timestamp" ? f.time.value : body.value) : ""}`;
    if (!(await confirmDialog("Reset offsets?", `Group ${group}: commit new offsets for ${what}. Its consumers will resume from there.`, "Reset"))) return;
    try {
      const r = await api("/console/api/groups/reset", { method: "POST", body: JSON.stringify(body) });
      result.textContent = `Reset ${r.offsets.length} partition(s): ` + r.offsets.map((o) => `${o.topic}-${o.partition} → ${o.offset}`).join(", ");
      onDone();
    } catch (err) {
      result.textContent = "Refused: " + err.message;
    }
  });
  return el("div", {}, form, result);
}

export const groupDetail = {
  title: (g) => `Group ${g}`,
  api: (g) => `/console/api/groups/${enc(g)}`,
  mount(root, group) {
    const info = el("div");
    const members = dataTable({
      testid: "members", empty: "no members (the group is empty)",
      columns: [
        { key: "member_id", label: "Member", render: (m) => el("code", { class: "small" }, m.member_id) },
        { key: "client_id", label: "Client" }, { key: "host", label: "Host" },
        { key: "assignments", label: "Assigned partitions", render: (m) => m.assignments.join(", ") || "–" },
        { key: "member_epoch", label: "Epoch", num: true, render: (m) => (m.member_epoch ?? "–") },
        { key: "target", label: "Target (KIP-848)", render: (m) => (m.member_epoch == null ? "–" : m.target.join(", ") || "–") },
      ],
    });
    const lag = dataTable({
      testid: "group-partitions", search: "Filter partitions", rowId: (p) => `${p.topic}-${p.partition}`,
      columns: [
        { key: "topic", label: "Topic", render: (p) => link(`/dashboard/topics/${enc(p.topic)}`, p.topic) },
        { key: "partition", label: "Partition", num: true },
        { key: "committed_offset", label: "Committed", num: true },
        { key: "log_end_offset", label: "End", num: true },
        { key: "lag", label: "Lag", num: true, render: (p) => num(p.lag) },
        { key: "time_lag_ms", label: "Lag in time", num: true, render: (p) => duration(p.time_lag_ms) },
        { key: "client_id", label: "Consumer", render: (p) => p.client_id || "–" },
      ],
    });
    const shares = dataTable({
      testid: "share-partitions", search: "Filter partitions", rowId: (p) => `${p.topic}-${p.partition}`,
      columns: [
        { key: "topic", label: "Topic", render: (p) => link(`/dashboard/topics/${enc(p.topic)}`, p.topic) },
        { key: "partition", label: "Partition", num: true },
        { key: "start_offset", label: "Start offset", num: true, render: (p) => (p.start_offset < 0 ? "–" : num(p.start_offset)) },
        { key: "in_flight", label: "In flight", num: true, render: (p) => num(p.in_flight) },
        { key: "acquired", label: "Acquired", num: true, render: (p) => num(p.acquired) },
        { key: "log_end_offset", label: "End", num: true, render: (p) => num(p.log_end_offset) },
        { key: "lag", label: "Lag", num: true, render: (p) => num(p.lag) },
      ],
    });
    const chart = lineChart({ title: "Total lag (last hour)", testid: "chart-group-lag", format: (v) => num(v), series: [], logToggle: true, integer: true });
    const reset = el("div");
    const lagCard = card("Lag per partition", lag.node);
    const shareCard = card("Share partitions", shares.node);
    const chartCard = card(null, chart.node);
    const resetCard = card("Reset offsets", reset);
    shareCard.hidden = true;
    root.append(card(null, info), lagCard, shareCard, el("div", { class: "grid2" }, card("Members", members.node), chartCard),
      resetCard);
    return { group, info, members, lag, shares, chart, reset, lagCard, shareCard, chartCard, resetCard, topics: "" };
  },
  update(s, d) {
    const share = d.type === "share";
    s.shareCard.hidden = !share;
    s.lagCard.hidden = s.chartCard.hidden = s.resetCard.hidden = share;
    if (share) {
      s.info.replaceChildren(dl([
        ["state", pill(d.state, STATE_KIND[d.state] || "idle")],
        ["type", "share (KIP-932)"],
        ["lag", el("span", { "data-testid": "total-lag" }, num(d.total_lag))],
        ["in flight", el("span", { "data-testid": "total-in-flight" }, num(d.total_in_flight))],
        ["members", num(d.members.length)],
        ["assignor", d.protocol],
        ["group epoch", d.generation_id], ["assignment epoch", d.assignment_epoch],
      ]));
      s.members.setRows(d.members);
      s.shares.setRows(d.partitions);
      return;
    }
    s.info.replaceChildren(dl([
      ["state", pill(d.state, STATE_KIND[d.state] || "idle")],
      ["total lag", el("span", { "data-testid": "total-lag" }, num(d.total_lag))],
      ["lag in time", duration(d.max_time_lag_ms)],
      ["members", num(d.members.length)],
      ["protocol", d.protocol_type ? `${d.protocol_type} / ${d.protocol || "–"}` : "offsets only"],
      ...(d.type === "consumer"
        ? [["type", "consumer (KIP-848)"], ["group epoch", d.generation_id], ["assignment epoch", d.assignment_epoch]]
        : [["generation", d.generation_id]]),
    ]));
    s.members.setRows(d.members);
    s.lag.setRows(d.partitions);
    s.chart.update([{ name: d.group_id, points: d.history.map((h) => [h.t, h.lag]) }]);
    const topics = [...new Set(d.partitions.map((p) => p.topic))].sort();
    const key = `${d.may_reset}|${d.state}|${topics.join(",")}`;
    if (key !== s.topics) {
      s.topics = key;
      if (!d.may_reset) s.reset.replaceChildren(el("p", { class: "muted" }, "Resetting offsets needs READ on this group."));
      else if (d.members.length) s.reset.replaceChildren(el("p", { class: "muted", "data-testid": "reset-refused" }, `The group has ${d.members.length} member(s): offsets can be reset only while it is empty. Stop its consumers first.`));
      else s.reset.replaceChildren(resetForm(s.group, topics, () => window.dispatchEvent(new Event("console:refresh"))));
    }
  },
};
