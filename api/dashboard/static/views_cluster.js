// Cluster pages: overview, brokers, one broker, tiering, security.
import { api, bytes, card, confirmDialog, dataTable, dl, duration, el, link, num, pill, rate, stat } from "./ui.js";
import { lineChart } from "./chart.js";

function series(history, key) {
  return history.map((h) => [h.t, h[key]]);
}

function brokerCell(b) {
  return link(`/dashboard/brokers/${b.id}`, `broker ${b.id}`);
}

function historyCharts(container) {
  const charts = {
    msgs: lineChart({ title: "Messages/s", testid: "chart-msgs", format: (v) => rate(v, "") , series: [] }),
    bytes: lineChart({ title: "Bytes/s", testid: "chart-bytes", format: (v) => bytes(v), series: [], binary: true }),
    latency: lineChart({ title: "Request latency p99", testid: "chart-latency", format: (v) => `${num(v, 1)} ms`, series: [] }),
    lag: lineChart({ title: "Consumer lag (all groups)", testid: "chart-lag", format: (v) => num(v), series: [], logToggle: true, integer: true }),
  };
  container.append(...Object.values(charts).map((c) => c.node));
  return (history) => {
    charts.msgs.update([{ name: "produce", points: series(history, "produce_msgs") }, { name: "fetch", points: series(history, "fetch_msgs") }]);
    charts.bytes.update([{ name: "produce", points: series(history, "produce_bytes") }, { name: "fetch", points: series(history, "fetch_bytes") }]);
    charts.latency.update([{ name: "produce", points: series(history, "produce_p99_ms") },
      { name: "all but long polls", points: series(history, "latency_p99_ms") }]);
    charts.lag.update([{ name: "total lag", points: series(history, "lag") }]);
  };
}

export const overview = {
  title: () => "Overview",
  api: () => "/console/api/overview",
  mount(root) {
    const stats = el("div", { class: "stats", "data-testid": "overview-stats" });
    const brokers = dataTable({
      testid: "overview-brokers", rowId: (b) => `broker-${b.id}`,
      columns: [
        { key: "id", label: "Broker", num: true, render: brokerCell },
        { key: "address", label: "Address", render: (b) => b.host ? `${b.host}:${b.kafka_port}` : "–" },
        { key: "rack", label: "Rack", render: (b) => b.rack || "–" },
        { key: "role", label: "Role", render: (b) => (b.controller ? "controller" : "") + (b.self ? (b.controller ? ", " : "") + "serving this page" : "") || "–" },
        { key: "up", label: "Status", render: (b) => pill(b.up ? "up" : "down", b.up ? "ok" : "down") },
      ],
    });
    const health = el("div", { class: "kv-block" });
    const charts = el("div", { class: "charts" });
    const chartCard = card("Throughput and latency (last hour)", charts);
    root.append(stats, el("div", { class: "grid2" }, card("Brokers", brokers.node), card("Health", health)), chartCard);
    return { stats, brokers, health, chartTitle: chartCard.querySelector("h2"), drawCharts: historyCharts(charts) };
  },
  update(s, d) {
    const p = d.partitions;
    const up = d.brokers.filter((b) => b.up).length;
    s.stats.replaceChildren(
      stat("brokers up", `${up} / ${d.brokers.length}`, "stat-brokers", up < d.brokers.length ? "warn" : ""),
      stat("topics", num(d.topics), "stat-topics"),
      stat("partitions", num(p.total), "stat-partitions"),
      stat("under-replicated", num(p.under_replicated), "stat-urp", p.under_replicated ? "warn" : ""),
      stat("offline", num(p.offline), "stat-offline", p.offline ? "bad" : ""),
      stat("consumer groups", num(d.groups), "stat-groups"),
      stat("in the bucket", bytes(d.bucket.remote_bytes), "stat-bucket"),
    );
    s.brokers.setRows(d.brokers.map((b) => ({ ...b, address: b.host, role: b.controller ? 0 : 1 })));
    const disk = d.disk;
    const diskText = disk.free_bytes === null ? "unknown"
      : `${bytes(disk.used_bytes)} used of ${bytes(disk.total_bytes)} (${bytes(disk.free_bytes)} free)`;
    s.health.replaceChildren(dl([
      ["object store", el("span", { "data-testid": "store-health" }, pill(d.bucket.reachable ? "reachable" : "unreachable", d.bucket.reachable ? "ok" : "down"), " ", el("code", {}, d.bucket.url))],
      ["metadata", pill(`${d.metadata.kind}: ${d.metadata.healthy ? "healthy" : "unhealthy"}`, d.metadata.healthy ? "ok" : "down")],
      ["disk", el("span", { "data-testid": "disk" }, diskText, disk.full ? " FULL" : disk.high_water ? " (above the high-water mark)" : "")],
      ["bucket usage", bytes(d.bucket.remote_bytes)],
      ["cluster", d.cluster_id],
    ]));
    const n = d.history_brokers.length;
    s.chartTitle.textContent = `Throughput and latency (last hour, ${n === 1 ? "this broker" : `${n} brokers`})`;
    s.drawCharts(d.history);
  },
};

export const brokerList = {
  title: () => "Brokers",
  api: () => "/console/api/brokers",
  mount(root) {
    const table = dataTable({
      testid: "brokers", rowId: (b) => `broker-${b.id}`, search: "Filter brokers",
      columns: [
        { key: "id", label: "Broker", num: true, render: brokerCell },
        { key: "host", label: "Address", render: (b) => b.host ? `${b.host}:${b.kafka_port}` : "–" },
        { key: "rack", label: "Rack", render: (b) => b.rack || "–" },
        { key: "up", label: "Status", sort: (b) => (b.up ? 1 : 0), render: (b) => pill(b.up ? "up" : "down", b.up ? "ok" : "down") },
        { key: "controller", label: "Controller", sort: (b) => (b.controller ? 1 : 0), render: (b) => (b.controller ? "yes" : "") },
        { key: "leaders", label: "Leads", num: true },
        { key: "replicas", label: "Replicas", num: true },
        { key: "disk", label: "Disk free", num: true, sort: (b) => (b.disk ? b.disk.free_bytes : -1), render: (b) => (b.disk ? bytes(b.disk.free_bytes) : "–") },
        { key: "rates", label: "Produce", num: true, sort: (b) => (b.rates ? b.rates.produce_msgs : -1), render: (b) => (b.rates ? rate(b.rates.produce_msgs, " msg/s") : "–") },
      ],
    });
    const note = el("p", { class: "warn-text", "data-testid": "unreachable" });
    root.append(note, card(null, table.node, el("p", { class: "muted" }, "Disk and rates are each broker's own, asked of it by the broker serving this page (– when it did not answer).")));
    return { table, note };
  },
  update(s, d) {
    s.note.textContent = d.unreachable && d.unreachable.length ? `Broker(s) ${d.unreachable.join(", ")} did not answer.` : "";
    s.table.setRows(d.brokers);
  },
};

export const brokerDetail = {
  title: (id) => `Broker ${id}`,
  api: (id) => `/console/api/brokers/${encodeURIComponent(id)}`,
  mount(root) {
    const info = el("div");
    const charts = el("div", { class: "charts" });
    const parts = dataTable({
      testid: "broker-partitions", search: "Filter partitions", rowId: (p) => `${p.topic}-${p.partition}`,
      columns: [
        { key: "topic", label: "Topic", render: (p) => link(`/dashboard/topics/${encodeURIComponent(p.topic)}`, p.topic) },
        { key: "partition", label: "Partition", num: true },
        { key: "leader", label: "Leader", num: true },
        { key: "replicas", label: "Replicas", render: (p) => p.replicas.join(", ") },
        { key: "isr", label: "ISR", render: (p) => p.isr.join(", ") },
      ],
    });
    const chartCard = card("Throughput and latency (last hour)", charts);
    root.append(card("Broker", info), chartCard, card("Partitions", parts.node));
    return { info, parts, chartCard, drawCharts: historyCharts(charts) };
  },
  update(s, d) {
    const b = d.broker;
    const rows = [
      ["status", pill(b.up ? "up" : "down", b.up ? "ok" : "down")],
      ["address", b.host ? `${b.host}:${b.kafka_port} (http ${b.http_port})` : "not registered"],
      ["rack", b.rack || "–"],
      ["controller", b.controller ? "yes" : "no"],
      ["partitions led", num(d.partitions.filter((p) => p.leader === b.id).length)],
      ["replicas", num(d.partitions.length)],
    ];
    if (d.disk) rows.push(["disk", `${bytes(d.disk.used_bytes)} used, ${bytes(d.disk.free_bytes)} free`]);
    if (!b.self && b.host && b.up) {
      rows.push(["console", el("a", { href: `${location.protocol}//${b.host}:${b.http_port}/dashboard/brokers/${b.id}` }, "this broker's own console (disk, rates)")]);
    }
    s.info.replaceChildren(dl(rows));
    s.parts.setRows(d.partitions);
    s.chartCard.hidden = !d.history;
    if (d.history) s.drawCharts(d.history);
  },
};

export const tiering = {
  title: () => "Tiering",
  api: () => "/console/api/tiering",
  mount(root) {
    const stats = el("div", { class: "stats" });
    const cache = el("div");
    const charts = el("div", { class: "charts" });
    const upBytes = lineChart({ title: "Uploaded bytes/s", testid: "chart-uploads", format: bytes, series: [], binary: true });
    const segs = lineChart({ title: "Segments uploaded and deleted per sample", testid: "chart-segments", format: (v) => num(v), series: [], integer: true });
    charts.append(upBytes.node, segs.node);
    const topics = dataTable({
      testid: "tiering-topics", search: "Filter topics", sortKey: "remote_bytes", desc: true, rowId: (t) => t.topic,
      columns: [
        { key: "topic", label: "Topic", render: (t) => link(`/dashboard/topics/${encodeURIComponent(t.topic)}`, t.topic) },
        { key: "remote_storage", label: "Tiered", sort: (t) => (t.remote_storage ? 1 : 0), render: (t) => (t.remote_storage ? "yes" : "no") },
        { key: "remote_bytes", label: "Remote", num: true, render: (t) => bytes(t.remote_bytes) },
        { key: "remote_segments", label: "Remote segs", num: true },
        { key: "local_bytes", label: "Local", num: true, render: (t) => bytes(t.local_bytes) },
        { key: "upload_lag_bytes", label: "Upload lag", num: true, render: (t) => `${bytes(t.upload_lag_bytes)} (${t.upload_lag_segments} seg)` },
        // the Iceberg table this broker commits for the topic: committed offset and lag
        { key: "iceberg", label: "Iceberg", sort: (t) => (t.iceberg ? t.iceberg.lag_records : -1),
          render: (t) => (t.iceberg ? `${t.iceberg.table} @ ${num(t.iceberg.committed_offset)}, lag ${num(t.iceberg.lag_records)} (${duration(t.iceberg.lag_seconds * 1000)})${t.iceberg.error ? " — " + t.iceberg.error : ""}` : "") },
      ],
    });
    root.append(stats, el("div", { class: "grid2" }, card("Read cache", cache), card("Uploads and deletes (last hour)", charts)),
      card("Remote bytes per topic", topics.node));
    return { stats, cache, topics, upBytes, segs };
  },
  update(s, d) {
    const lag = d.upload_lag;
    s.stats.replaceChildren(
      stat("tiering", d.tiering ? (d.reachable ? "on" : "store unreachable") : "off", "stat-tiering", d.reachable ? "" : "bad"),
      stat("upload lag", bytes(lag.bytes), "stat-upload-lag", lag.bytes ? "warn" : ""),
      stat("segments waiting", num(lag.segments), "stat-upload-segments"),
      stat("oldest waiting", duration(lag.oldest_seconds * 1000), "stat-upload-age"),
      stat("in the bucket", bytes(d.topics.reduce((a, t) => a + t.remote_bytes, 0)), "stat-remote"),
    );
    const c = d.cache;
    s.cache.replaceChildren(c ? dl([
      ["size", `${bytes(c.size_bytes)} of ${bytes(c.max_bytes)} (${num(c.entries)} chunks)`],
      ["hit ratio", c.hit_ratio === null ? "no reads yet" : `${(c.hit_ratio * 100).toFixed(1)} %`],
      ["hits / misses", `${num(c.hits)} / ${num(c.misses)}`],
      ["GETs", `${num(c.gets)} (${bytes(c.fetched_bytes)})`],
      ["evictions", num(c.evictions)],
      ["topics being deleted", d.pending_topic_deletes.length ? d.pending_topic_deletes.join(", ") : "none"],
      ["restore at start-up", el("span", { "data-testid": "startup-restore" }, d.startup_restore
        ? `${d.startup_restore.topics.length} topic(s) restored from the bucket (${d.startup_restore.topics.join(", ")}) in ${d.startup_restore.seconds.toFixed(1)} s, at ${new Date(d.startup_restore.finished_ms).toLocaleString()}`
        : "none: this broker started on its own data dir")],
      ["object store", el("code", {}, d.object_store)],
    ]) : el("p", { class: "muted" }, "This broker does not tier."));
    s.topics.setRows(d.topics);
    s.upBytes.update([{ name: "uploaded", points: series(d.history, "uploaded_bytes") }]);
    s.segs.update([{ name: "uploaded", points: series(d.history, "uploaded_segments") }, { name: "deleted", points: series(d.history, "deleted_segments") }]);
  },
};

const OPERATIONS = ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
  "ALTER_CONFIGS", "IDEMPOTENT_WRITE"];

function aclForm(onDone) {
  const sel = (name, values, label) => el("label", {}, label, el("select", { name, "data-testid": `acl-${name}` },
    ...values.map((v) => el("option", { value: v }, v))));
  const result = el("p", { class: "muted", "aria-live": "polite", "data-testid": "acl-result" });
  const form = el("form", { class: "reset-form", "data-testid": "acl-form" },
    el("label", {}, "Principal ", el("input", { name: "principal", value: "User:", required: true, "data-testid": "acl-principal" })),
    el("label", {}, "Host ", el("input", { name: "host", value: "*", required: true, size: 10 })),
    sel("resource_type", ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"], "Resource "),
    el("label", {}, "Name ", el("input", { name: "resource_name", required: true, "data-testid": "acl-name" })),
    sel("pattern_type", ["LITERAL", "PREFIXED"], "Pattern "),
    sel("operation", OPERATIONS, "Operation "),
    sel("permission", ["ALLOW", "DENY"], "Permission "),
    el("button", { type: "submit", class: "primary", "data-testid": "acl-add" }, "Add ACL"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = Object.fromEntries(new FormData(form).entries());
    try {
      await api("/console/api/acls", { method: "POST", body: JSON.stringify(body) });
      result.textContent = `Added: ${body.permission} ${body.principal} ${body.operation} on ${body.resource_type} ${body.resource_name}.`;
      onDone();
    } catch (err) {
      result.textContent = "Refused: " + err.message;
    }
  });
  return el("div", {}, form, result);
}

function adminForm(testid, fields, submitLabel, send) {
  const result = el("p", { class: "muted", "aria-live": "polite", "data-testid": `${testid}-result` });
  const form = el("form", { class: "reset-form", "data-testid": `${testid}-form` }, ...fields,
    el("button", { type: "submit", class: "primary", "data-testid": `${testid}-submit` }, submitLabel));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const values = Object.fromEntries(new FormData(form).entries());
    try {
      result.textContent = await send(values);
      form.querySelectorAll("input[type=password]").forEach((i) => { i.value = ""; });
    } catch (err) {
      result.textContent = "Refused: " + err.message;
    }
  });
  return el("div", {}, form, result);
}

const MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"];

function userForm(onDone) {
  return adminForm("user", [
    el("label", {}, "User ", el("input", { name: "name", required: true, "data-testid": "user-name", autocomplete: "off" })),
    el("label", {}, "Mechanism ", el("select", { name: "mechanism", "data-testid": "user-mechanism" },
      ...MECHANISMS.map((m) => el("option", { value: m }, m)))),
    el("label", {}, "Password ", el("input", { name: "password", type: "password", required: true,
      "data-testid": "user-password", autocomplete: "new-password" })),
  ], "Set password", async (v) => {
    await api("/console/api/users", { method: "POST", body: JSON.stringify(v) });
    onDone();
    return `Saved ${v.mechanism} credential of ${v.name}.`;
  });
}

function quotaForm(onDone) {
  return adminForm("quota", [
    el("label", {}, "User ", el("input", { name: "user", placeholder: "(default user)", "data-testid": "quota-user" })),
    el("label", {}, "Quota ", el("select", { name: "key", "data-testid": "quota-key" },
      el("option", { value: "producer_byte_rate" }, "producer_byte_rate"),
      el("option", { value: "consumer_byte_rate" }, "consumer_byte_rate"))),
    el("label", {}, "Bytes/s ", el("input", { name: "value", type: "number", min: "1", placeholder: "(remove)",
      "data-testid": "quota-value" })),
  ], "Set quota", async (v) => {
    const body = { user: v.user || null, key: v.key, value: v.value === "" ? null : Number(v.value) };
    await api("/console/api/quotas", { method: "POST", body: JSON.stringify(body) });
    onDone();
    const who = body.user ? `user ${body.user}` : "the default user";
    return body.value === null ? `Removed ${body.key} of ${who}.` : `Set ${body.key} of ${who} to ${bytes(body.value)}/s.`;
  });
}

async function removeUser(u, mechanism, onDone) {
  if (!(await confirmDialog("Remove this credential?", `${mechanism} credential of ${u.name}`, "Remove"))) return;
  try {
    await api("/console/api/users/delete", { method: "POST", body: JSON.stringify({ name: u.name, mechanism }) });
    onDone();
  } catch (err) {
    alert("Refused: " + err.message);
  }
}

async function removeAcl(a, onDone) {
  const what = `${a.permission} ${a.principal} ${a.operation} on ${a.resource_type} ${a.resource_name} (${a.pattern_type}, host ${a.host})`;
  if (!(await confirmDialog("Remove this ACL?", what, "Remove"))) return;
  try {
    await api("/console/api/acls/delete", { method: "POST", body: JSON.stringify(a) });
    onDone();
  } catch (err) {
    alert("Refused: " + err.message);
  }
}

export const security = {
  title: () => "Security",
  api: () => "/console/api/security",
  mount(root) {
    const head = el("div");
    const state = { mayAlter: false };
    const acls = dataTable({
      testid: "acls", search: "Filter ACLs",
      columns: [
        { key: "principal", label: "Principal" }, { key: "host", label: "Host" },
        { key: "resource_type", label: "Resource" }, { key: "resource_name", label: "Name" },
        { key: "pattern_type", label: "Pattern" }, { key: "operation", label: "Operation" },
        { key: "permission", label: "Permission", render: (a) => pill(a.permission, a.permission === "ALLOW" ? "ok" : "down") },
        { key: "remove", label: "", render: (a) => (state.mayAlter ? el("button", { type: "button", class: "small-button", "data-testid": "acl-remove",
          "aria-label": `remove ACL ${a.principal} ${a.operation} ${a.resource_name}`, onclick: () => removeAcl(a, () => state.refresh()) }, "Remove") : "") },
      ],
      empty: "no ACLs",
    });
    const editor = el("div");
    const users = dataTable({
      testid: "users", columns: [
        { key: "name", label: "User" },
        { key: "mechanisms", label: "SCRAM mechanisms", render: (u) => u.mechanisms.join(", ") },
        { key: "remove", label: "", render: (u) => (state.mayAlterUsers ? el("span", {}, ...u.mechanisms.map((m) =>
          el("button", { type: "button", class: "small-button", "data-testid": "user-remove",
            "aria-label": `remove ${m} credential of ${u.name}`, title: `remove the ${m} credential`, onclick: () => removeUser(u, m, () => state.refresh()) },
            `Remove ${m.replace("SCRAM-SHA-", "")}`))) : "") },
      ],
      empty: "no SCRAM users",
    });
    const userEditor = el("div");
    const quotaEditor = el("div");
    const quotas = dataTable({
      testid: "quotas", columns: [
        { key: "entity", label: "Entity" }, { key: "source", label: "Source" },
        { key: "quotas", label: "Quotas", render: (q) => Object.entries(q.quotas).map(([k, v]) => `${k} = ${bytes(v)}/s`).join(", ") },
      ],
      empty: "no quotas",
    });
    root.append(head, card("ACLs", editor, acls.node),
      el("div", { class: "grid2" }, card("Users", userEditor, users.node), card("Quotas", quotaEditor, quotas.node)));
    state.refresh = () => window.dispatchEvent(new Event("console:refresh"));
    return Object.assign(state, { head, acls, users, quotas, editor, userEditor, quotaEditor });
  },
  update(s, d) {
    const may = d.may_alter && d.authorization;
    if (may !== s.mayAlter || !s.editor.childNodes.length) {
      s.mayAlter = may;
      s.editor.replaceChildren(may ? aclForm(() => s.refresh()) : el("p", { class: "muted" },
        d.authorization ? "Changing ACLs needs ALTER on the cluster." : ""));
    }
    if (d.may_alter !== s.mayAlterUsers || !s.userEditor.childNodes.length) {
      s.mayAlterUsers = d.may_alter;
      s.userEditor.replaceChildren(d.may_alter ? userForm(() => s.refresh())
        : el("p", { class: "muted" }, "Changing users needs ALTER on the cluster."));
    }
    if (d.may_alter_configs !== s.mayAlterQuotas || !s.quotaEditor.childNodes.length) {
      s.mayAlterQuotas = d.may_alter_configs;
      s.quotaEditor.replaceChildren(d.may_alter_configs ? quotaForm(() => s.refresh())
        : el("p", { class: "muted" }, "Changing quotas needs ALTER_CONFIGS on the cluster."));
    }
    s.head.replaceChildren(el("p", { class: "muted" },
      d.authorization ? `Authorization is on; super users: ${d.super_users.join(", ") || "none"}.` : "Authorization is off: every principal may do everything.",
      " Changes here apply to the whole cluster, as ", el("code", {}, "strata acl"), ", ", el("code", {}, "strata users"),
      " and ", el("code", {}, "strata quotas"), " make them: ACLs and users need ALTER on the cluster, quotas ALTER_CONFIGS."));
    s.acls.setRows(d.acls);
    s.users.setRows(d.users);
    s.quotas.setRows(d.quotas);
  },
};
