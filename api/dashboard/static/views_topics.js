// Topic pages: the searchable list and one topic (partitions with the tier bar, configs,
// the message browser and the produce form).
import { HttpError, api, bytes, card, dataTable, dl, el, link, num, rate, time } from "./ui.js";

const enc = encodeURIComponent;

export const topicList = {
  title: () => "Topics",
  api: () => "/console/api/topics",
  mount(root) {
    const hide = el("input", { type: "checkbox", checked: true, "data-testid": "hide-internal" });
    const table = dataTable({
      testid: "topics", search: "Search topics", rowId: (t) => `topic-${t.topic}`,
      columns: [
        { key: "topic", label: "Topic", render: (t) => link(`/dashboard/topics/${enc(t.topic)}`, t.topic) },
        { key: "partitions", label: "Partitions", num: true },
        { key: "replication_factor", label: "Replicas", num: true },
        { key: "local_bytes", label: "Local", num: true, render: (t) => bytes(t.local_bytes) },
        { key: "remote_bytes", label: "Remote", num: true, render: (t) => bytes(t.remote_bytes) },
        { key: "messages", label: "Messages", num: true, render: (t) => num(t.messages) },
        { key: "produce_msgs", label: "In", num: true, render: (t) => rate(t.produce_msgs, " msg/s") },
        { key: "fetch_bytes", label: "Out", num: true, render: (t) => bytes(t.fetch_bytes) + "/s" },
        { key: "overrides_text", label: "Configs set", render: (t) => t.overrides_text ? el("code", { class: "small" }, t.overrides_text) : "–" },
      ],
    });
    const state = { table, hide, rows: [] };
    hide.addEventListener("change", () => topicList.update(state, null));
    root.append(card(null, el("label", { class: "inline" }, hide, " hide internal topics"), table.node));
    return state;
  },
  update(s, d) {
    if (d) s.rows = d.topics.map((t) => ({ ...t, overrides_text: Object.entries(t.overrides).map(([k, v]) => `${k}=${v}`).join(" ") }));
    s.table.setRows(s.hide.checked ? s.rows.filter((t) => !t.internal) : s.rows);
  },
};

// One partition's offsets as a bar: [log start .. log end], remote and local parts coloured.
export function tierBar(p) {
  const W = 100, h = 14;
  const svg = el("svg", { class: "tierbar", viewBox: `0 0 ${W} ${h}`, preserveAspectRatio: "none", "data-testid": "partition-bar", role: "img",
    "aria-label": "tiers of the partition's offsets" });
  if (p.log_end_offset === null) return el("span", { class: "muted" }, "not hosted here");
  const lso = p.log_start_offset, local = p.local_log_start_offset, hw = p.high_watermark, leo = p.log_end_offset;
  const span = Math.max(leo - lso, 1);
  const x = (o) => ((Math.min(Math.max(o, lso), leo) - lso) / span) * W;
  const uploadedTo = Math.max(Math.min(p.remote_next_offset, hw), local);
  for (const [cls, a, b, what] of [
    ["remote", lso, local, "in the bucket only"], ["both", local, uploadedTo, "local, also in the bucket"],
    ["local", uploadedTo, hw, "local only, not uploaded yet"], ["uncommitted", hw, leo, "above the high watermark"]]) {
    if (b <= a) continue;
    svg.append(el("rect", { class: cls, "data-part": cls, x: x(a), y: 0, width: Math.max(x(b) - x(a), 0.5), height: h },
      el("title", {}, `${what}: offsets [${a}, ${b})`)));
  }
  return svg;
}

const LEGEND = () => el("p", { class: "legend" },
  el("span", { class: "sw remote" }), " bucket only ", el("span", { class: "sw both" }), " local + bucket ",
  el("span", { class: "sw local" }), " local, not uploaded ", el("span", { class: "sw uncommitted" }), " above the high watermark");

function decode(b64) {
  if (b64 === null || b64 === undefined) return null;
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

export function render(b64, mode) {
  const data = decode(b64);
  if (data === null) return el("span", { class: "muted" }, "null");
  if (mode === "hex") {
    const hex = [...data.slice(0, 4096)].map((b) => b.toString(16).padStart(2, "0"));
    const lines = [];
    for (let i = 0; i < hex.length; i += 16) lines.push(i.toString(16).padStart(6, "0") + "  " + hex.slice(i, i + 16).join(" "));
    return el("pre", { class: "hex" }, lines.join("\n"));
  }
  const text = new TextDecoder("utf-8", { fatal: false }).decode(data);
  if (mode === "json") {
    try { return el("pre", { class: "json" }, JSON.stringify(JSON.parse(text), null, 2)); } catch { /* not JSON: shown as text */ }
  }
  return el("pre", { class: "text" }, text);
}

// A value with a schema id (Confluent's wire format) shows decoded by its schema, unless hex is asked for.
function renderValue(r, fmt) {
  const s = r.value_schema;
  if (!s || fmt === "hex") return render(r.value, fmt);
  const badge = el("span", { class: "pill", "data-testid": "value-schema" }, `schema id ${s.schema_id}${s.schema_type ? " · " + s.schema_type : ""}`);
  if (s.error) return el("div", {}, badge, el("span", { class: "muted" }, " " + s.error), render(r.value, fmt));
  return el("div", {}, badge, el("pre", { class: "json", "data-testid": "value-decoded" }, JSON.stringify(s.decoded, null, 2)));
}

function messageBrowser(topic, partitions) {
  const sel = (name, opts, label) => el("label", {}, label, el("select", { name, "data-testid": `browse-${name}` },
    ...opts.map(([v, t]) => el("option", { value: v }, t))));
  const partOpts = [["", "all"], ...Array.from({ length: partitions }, (_, i) => [String(i), String(i)])];
  const form = el("form", { class: "browse-form", "data-testid": "browse-form" },
    sel("partition", partOpts, "Partition "),
    sel("mode", [["newest", "newest first"], ["offset", "from offset"], ["timestamp", "from time"]], "Start "),
    el("label", { class: "offset-field" }, "Offset ", el("input", { name: "offset", type: "number", min: 0, value: 0, "data-testid": "browse-offset" })),
    el("label", { class: "ts-field" }, "Time ", el("input", { name: "timestamp", type: "datetime-local", step: 1, "data-testid": "browse-timestamp" })),
    el("label", {}, "Limit ", el("input", { name: "limit", type: "number", min: 1, max: 500, value: 50, "data-testid": "browse-limit" })),
    el("label", {}, "Key/value contains ", el("input", { name: "filter", type: "search", "data-testid": "browse-filter" })),
    sel("format", [["text", "text"], ["json", "JSON"], ["hex", "hex"]], "Show as "),
    el("button", { type: "submit", class: "primary", "data-testid": "browse-go" }, "Read"));
  const summary = el("p", { class: "muted", "data-testid": "browse-summary", "aria-live": "polite" });
  const list = el("div", { class: "messages", "data-testid": "messages" });
  let last = null;
  let reads = 0; // the latest read's number: an older read that answers later is dropped

  // The filter lives in the page's URL (?partition=&mode=&offset=&timestamp=&limit=&filter=
  // &format=, defaults left out), so a link or a reload opens the same view.
  function restore() {
    const q = new URLSearchParams(location.search);
    const f = form.elements;
    for (const name of ["partition", "mode", "format"]) {
      const v = q.get(name);
      if (v !== null && [...f[name].options].some((o) => o.value === v)) f[name].value = v;
    }
    for (const name of ["offset", "limit", "filter"]) {
      const v = q.get(name);
      if (v !== null) f[name].value = v;
    }
    const ts = q.get("timestamp");
    if (ts !== null && /^\d+$/.test(ts)) {
      const local = new Date(Number(ts) - new Date(Number(ts)).getTimezoneOffset() * 60000);
      f.timestamp.value = local.toISOString().slice(0, 19);
    }
  }
  function query() {
    const f = form.elements;
    const q = new URLSearchParams();
    if (f.partition.value !== "") q.set("partition", f.partition.value);
    if (f.mode.value !== "newest") q.set("mode", f.mode.value);
    if (f.mode.value === "offset") q.set("offset", f.offset.value || "0");
    if (f.mode.value === "timestamp") q.set("timestamp", String(f.timestamp.value ? new Date(f.timestamp.value).getTime() : 0));
    if (f.limit.value && f.limit.value !== "50") q.set("limit", f.limit.value);
    if (f.filter.value) q.set("filter", f.filter.value);
    return q;
  }
  function reflect() {
    const q = query();
    if (form.elements.format.value !== "text") q.set("format", form.elements.format.value);
    const qs = q.toString();
    const href = location.pathname + (qs ? `?${qs}` : "");
    if (href !== location.pathname + location.search) history.replaceState(history.state, "", href);
  }

  function sync() {
    const mode = form.elements.mode.value;
    form.querySelector(".offset-field").hidden = mode !== "offset";
    form.querySelector(".ts-field").hidden = mode !== "timestamp";
  }
  function draw() {
    if (!last) return;
    const fmt = form.elements.format.value;
    list.replaceChildren(...last.records.map((r) => el("article", { class: "message", "data-testid": "message", "data-offset": r.offset, "data-partition": r.partition },
      el("div", { class: "message-meta" },
        el("span", { "data-testid": "message-position" }, `partition ${r.partition} · offset ${r.offset}`),
        el("span", {}, time(r.timestamp)), r.truncated ? el("span", { class: "pill warn" }, "cut at 64 KiB") : null),
      el("div", { class: "message-body" },
        el("div", {}, el("div", { class: "label" }, `key (${bytes(r.key_size)})`), render(r.key, fmt)),
        el("div", { "data-testid": "message-value" }, el("div", { class: "label" }, `value (${bytes(r.value_size)})`), renderValue(r, fmt))),
      r.headers.length ? el("div", { class: "headers" }, el("div", { class: "label" }, "headers"),
        dl(r.headers.map((h) => [h.key, h.value === null ? "null" : new TextDecoder().decode(decode(h.value))]))) : null)));
    if (!last.records.length) list.replaceChildren(el("p", { class: "muted" }, "No record found."));
  }
  form.elements.mode.addEventListener("change", sync);
  form.elements.format.addEventListener("change", () => { reflect(); draw(); });
  async function read() {
    const f = form.elements;
    const q = query();
    q.set("mode", f.mode.value);
    q.set("limit", f.limit.value || "50");
    reflect();
    summary.textContent = "reading…";
    const n = ++reads;
    try {
      const got = await api(`/console/api/topics/${enc(topic)}/messages?${q}`);
      if (n !== reads) return;
      last = got;
      summary.textContent = `${last.records.length} record(s); scanned ${num(last.scanned_records)} in ${last.elapsed_ms} ms`
        + (last.truncated ? " — the scan bound was reached, more may match further on" : "");
      draw();
    } catch (err) {
      if (n !== reads) return;
      last = null;
      list.replaceChildren();
      summary.textContent = (err instanceof HttpError && err.status === 403 ? "Not authorized: " : "Error: ") + err.message;
    }
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); read(); });
  restore();
  sync();
  // Open with a read (the newest records unless the URL says otherwise), as Redpanda Console does.
  read();
  return el("div", {}, form, summary, list);
}

function produceForm(topic, partitions) {
  const out = el("p", { class: "muted", "aria-live": "polite", "data-testid": "produce-result" });
  const form = el("form", { class: "produce-form", "data-testid": "produce-form" },
    el("label", {}, "Partition ", el("select", { name: "partition" }, el("option", { value: "" }, "by key"),
      ...Array.from({ length: partitions }, (_, i) => el("option", { value: i }, String(i))))),
    el("label", {}, "Key ", el("input", { name: "key", "data-testid": "produce-key" })),
    el("label", { class: "wide" }, "Value ", el("textarea", { name: "value", rows: 3, "data-testid": "produce-value" })),
    el("label", { class: "wide" }, "Headers (one key=value a line) ", el("textarea", { name: "headers", rows: 2 })),
    el("button", { type: "submit", class: "primary", "data-testid": "produce-go" }, "Produce"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = form.elements;
    const headers = f.headers.value.split("\n").filter((l) => l.trim()).map((l) => {
      const i = l.indexOf("=");
      return i < 0 ? { key: l.trim(), value: null } : { key: l.slice(0, i).trim(), value: l.slice(i + 1) };
    });
    const body = { key: f.key.value || null, value: f.value.value, headers };
    if (f.partition.value !== "") body.partition = Number(f.partition.value);
    try {
      const r = await api(`/console/api/topics/${enc(topic)}/messages`, { method: "POST", body: JSON.stringify(body) });
      out.textContent = `Written to partition ${r.partition} at offset ${r.offset}.`;
    } catch (err) {
      out.textContent = "Error: " + err.message;
    }
  });
  return el("div", {}, form, out);
}

export const topicDetail = {
  title: (topic) => topic,
  api: (topic) => `/console/api/topics/${enc(topic)}`,
  mount(root, topic) {
    const info = el("div");
    const parts = dataTable({
      testid: "partitions", rowId: (p) => `partition-${topic}-${p.partition}`,
      columns: [
        { key: "partition", label: "Partition", num: true },
        { key: "leader", label: "Leader", num: true, render: (p) => (p.leader < 0 ? "none" : link(`/dashboard/brokers/${p.leader}`, String(p.leader))) },
        { key: "replicas", label: "Replicas", render: (p) => p.replicas.join(", ") },
        { key: "isr", label: "ISR", render: (p) => el("span", { class: p.under_replicated ? "warn-text" : "" }, p.isr.join(", ")) },
        { key: "bar", label: "Tiers", render: tierBar },
        { key: "log_start_offset", label: "Start", num: true },
        { key: "local_log_start_offset", label: "Local start", num: true },
        { key: "high_watermark", label: "High watermark", num: true },
        { key: "log_end_offset", label: "End", num: true },
        { key: "local_bytes", label: "Local", num: true, render: (p) => bytes(p.local_bytes) },
        { key: "remote_bytes", label: "Remote", num: true, render: (p) => bytes(p.remote_bytes) },
        { key: "upload_lag_bytes", label: "Upload lag", num: true, render: (p) => `${bytes(p.upload_lag_bytes)} (${p.upload_lag_segments} seg)` },
      ],
    });
    const configs = dataTable({
      testid: "configs", search: "Filter configs", sortKey: "source", desc: true,
      columns: [{ key: "name", label: "Name" }, { key: "value", label: "Value", render: (c) => el("code", {}, c.value) },
        { key: "source", label: "Source", render: (c) => (c.source === "topic" ? el("strong", {}, "topic") : "default") }],
    });
    const browser = el("div");
    const producer = el("div");
    root.append(card(null, info), card("Partitions", LEGEND(), parts.node),
      card("Messages", browser), el("div", { class: "produce-card" }, producer), card("Configuration", configs.node));
    return { topic, info, parts, configs, browser, producer, mounted: false };
  },
  update(s, d) {
    s.info.replaceChildren(dl([
      ["partitions", num(d.partitions.length)], ["replication factor", d.replication_factor],
      ["tiered storage", d.remote_storage ? "on" : "off"],
      ["messages", num(d.partitions.reduce((a, p) => a + Math.max(0, (p.high_watermark ?? 0) - (p.log_start_offset ?? 0)), 0))],
      ["produce rate", d.rates ? `${rate(d.rates.produce_msgs, " msg/s")} · ${bytes(d.rates.produce_bytes)}/s` : "–"],
      ["topic id", el("code", {}, d.topic_id)],
    ]));
    s.parts.setRows(d.partitions);
    s.configs.setRows(d.configs);
    if (!s.mounted) {
      s.mounted = true;
      s.browser.replaceChildren(d.may_read ? messageBrowser(s.topic, d.partitions.length)
        : el("p", { class: "muted" }, "Reading messages needs READ on this topic."));
      if (d.may_write) s.producer.replaceChildren(card("Produce a message", produceForm(s.topic, d.partitions.length)));
    }
  },
};
