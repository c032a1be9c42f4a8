// Strata dashboard: polls the broker's REST API and redraws. Plain DOM + SVG, no framework.
"use strict";

const REFRESH_MS = 2000;
const HISTORY = 90; // lag samples kept per group (3 minutes at the default refresh)
const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = ["#3b6fd4", "#d4553b", "#2e8b57", "#8e44ad", "#d4a017", "#16a085", "#7f8c8d"];
const lagHistory = new Map(); // group -> [{t, lag}]

function el(tag, attrs, ...children) {
  const svg = ["svg", "rect", "line", "text", "polyline", "g", "title"].includes(tag);
  const node = svg ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function duration(s) {
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${m}m` : m ? `${m}m ${Math.floor(s % 60)}s` : `${s.toFixed(0)}s`;
}

async function getJSON(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  return resp.json();
}

function renderStatus(st) {
  const pill = document.getElementById("health");
  pill.textContent = st.status;
  pill.className = "pill " + st.status;
  const rows = [
    ["broker", st.broker_id], ["cluster", st.cluster_id],
    ["uptime", duration(st.uptime_seconds)], ["object store", st.object_store],
    ["store reachable", st.object_store_available ? "yes" : "NO"],
    ["topics / partitions", `${st.topics} / ${st.partitions}`],
    ["offline partitions", st.offline_partitions.length ? st.offline_partitions.join(", ") : "none"],
    ["disk free", st.disk.free_bytes === null ? "unknown" : bytes(st.disk.free_bytes)
      + (st.disk.full ? " (FULL)" : st.disk.high_water ? " (above the high-water mark)" : "")],
  ];
  if (st.degraded_reasons.length) rows.push(["degraded", st.degraded_reasons.join("; ")]);
  const dl = el("dl");
  for (const [k, v] of rows) dl.append(el("dt", {}, k), el("dd", {}, v));
  document.getElementById("broker").replaceChildren(dl);
}

// One partition's offsets as a bar: [log start .. log end], remote and local parts coloured.
function partitionBar(p, width) {
  const h = 22, svg = el("svg", { width, height: h + 14, "data-testid": "partition-bar" });
  if (p.log_end_offset === null) {
    svg.append(el("text", { x: 0, y: 14 }, "not hosted on this broker"));
    return svg;
  }
  const lso = p.log_start_offset, local = p.local_log_start_offset;
  const hw = p.high_watermark, leo = p.log_end_offset;
  const span = Math.max(leo - lso, 1);
  const x = (o) => ((Math.min(Math.max(o, lso), leo) - lso) / span) * width;
  const uploadedTo = Math.max(Math.min(p.remote_next_offset, hw), local);
  const parts = [
    ["remote", lso, local, "remote only"],
    ["both", local, uploadedTo, "local, already uploaded"],
    ["local", uploadedTo, hw, "local only, not uploaded yet"],
    ["uncommitted", hw, leo, "above the high watermark"],
  ];
  for (const [cls, a, b, what] of parts) {
    if (b <= a) continue;
    svg.append(el("rect", { class: cls, "data-part": cls, x: x(a), y: 0, width: Math.max(x(b) - x(a), 1), height: h },
      el("title", {}, `${what}: [${a}, ${b})`)));
  }
  svg.append(el("text", { x: 0, y: h + 12 }, `start ${lso}`));
  const mid = el("text", { x: width / 2, y: h + 12, "text-anchor": "middle" }, `local start ${local} · hw ${hw}`);
  svg.append(mid, el("text", { x: width, y: h + 12, "text-anchor": "end" }, `end ${leo}`));
  return svg;
}

function renderTopics(data) {
  const root = document.getElementById("topics");
  const blocks = [];
  for (const t of data.topics) {
    const table = el("table", {},
      el("tr", {}, ...["partition", "offsets", "log start", "local start", "high watermark", "log end",
        "local", "remote", "upload lag"].map((h) => el("th", {}, h))));
    for (const p of t.partitions) {
      table.append(el("tr", { "data-testid": `partition-${t.topic}-${p.partition}` },
        el("td", { class: "num" }, p.partition),
        el("td", {}, partitionBar(p, 360)),
        el("td", { class: "num", "data-field": "log_start_offset" }, p.log_start_offset ?? "–"),
        el("td", { class: "num", "data-field": "local_log_start_offset" }, p.local_log_start_offset ?? "–"),
        el("td", { class: "num", "data-field": "high_watermark" }, p.high_watermark ?? "–"),
        el("td", { class: "num", "data-field": "log_end_offset" }, p.log_end_offset ?? "–"),
        el("td", { class: "num" }, `${bytes(p.local_bytes)} (${p.local_segments} seg)`),
        el("td", { class: "num" }, `${bytes(p.remote_bytes)} (${p.remote_segments} seg)`),
        el("td", { class: "num", "data-field": "upload_lag" },
          `${bytes(p.upload_lag_bytes)} (${p.upload_lag_segments} seg)`)));
    }
    const title = el("h3", { "data-testid": "topic-name" }, t.topic);
    blocks.push(el("div", { class: "topic", "data-topic": t.topic }, title,
      el("p", { class: "muted" }, t.remote_storage ? "tiered to the object store" : "local only"), table));
  }
  if (!blocks.length) blocks.push(el("p", { class: "muted" }, "no topics"));
  root.replaceChildren(...blocks);
}

function renderGroups(lags, now) {
  for (const g of lags) {
    const h = lagHistory.get(g.group_id) || [];
    h.push({ t: now, lag: g.total_lag });
    if (h.length > HISTORY) h.shift();
    lagHistory.set(g.group_id, h);
  }
  const live = new Set(lags.map((g) => g.group_id));
  for (const gid of [...lagHistory.keys()]) if (!live.has(gid)) lagHistory.delete(gid);

  const table = document.getElementById("groups");
  table.replaceChildren(el("tr", {}, ...["group", "state", "members", "total lag"].map((h) => el("th", {}, h))));
  for (const g of lags) {
    table.append(el("tr", { "data-testid": `group-${g.group_id}` },
      el("td", {}, g.group_id), el("td", {}, g.state), el("td", { class: "num" }, g.members.length),
      el("td", { class: "num", "data-field": "total_lag" }, g.total_lag)));
  }
  drawLagChart(now);
}

function drawLagChart(now) {
  const svg = document.getElementById("lag-chart");
  const W = Number(svg.getAttribute("width")), H = Number(svg.getAttribute("height"));
  const left = 60, right = 150, top = 10, bottom = 24;
  const all = [...lagHistory.values()].flat();
  const maxLag = Math.max(1, ...all.map((s) => s.lag));
  // The x axis spans the samples we have (at least 20 s), so a fresh page draws a visible line.
  const oldest = Math.min(now, ...all.map((s) => s.t));
  const window = Math.min(HISTORY * REFRESH_MS, Math.max(now - oldest, 20000));
  const x = (t) => left + (1 - (now - t) / window) * (W - left - right);
  const y = (v) => top + (1 - v / maxLag) * (H - top - bottom);
  const nodes = [
    el("line", { class: "axis", x1: left, y1: top, x2: left, y2: H - bottom }),
    el("line", { class: "axis", x1: left, y1: H - bottom, x2: W - right, y2: H - bottom }),
    el("text", { x: left - 6, y: top + 8, "text-anchor": "end" }, maxLag),
    el("text", { x: left - 6, y: H - bottom, "text-anchor": "end" }, 0),
    el("text", { x: left, y: H - 6 }, `-${Math.round(window / 1000)}s`),
    el("text", { x: W - right, y: H - 6, "text-anchor": "end" }, "now"),
  ];
  let i = 0;
  for (const [gid, samples] of lagHistory) {
    const color = COLORS[i % COLORS.length];
    const pts = samples.map((s) => `${x(s.t).toFixed(1)},${y(s.lag).toFixed(1)}`).join(" ");
    nodes.push(el("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 2, "data-group": gid }));
    const last = samples[samples.length - 1];
    nodes.push(el("text", { x: W - right + 8, y: top + 12 + 16 * i, fill: color, "data-testid": "lag-legend" },
      `${gid}: ${last.lag}`));
    i++;
  }
  if (!i) nodes.push(el("text", { x: left + 10, y: top + 20 }, "no consumer groups"));
  svg.replaceChildren(...nodes);
}

async function refresh() {
  const now = Date.now();
  try {
    const [status, partitions, groups] = await Promise.all([
      getJSON("/v1/status"), getJSON("/v1/partitions"),
      // Groups are optional: a broker that coordinates none (cluster mode) still renders.
      getJSON("/v1/groups").catch(() => ({ groups: [] })),
    ]);
    // A group deleted between the listing and its lag request is simply skipped.
    const lags = (await Promise.all(groups.groups.map((g) =>
      getJSON(`/v1/groups/${encodeURIComponent(g.group_id)}/lag`).catch(() => null)))).filter(Boolean);
    renderStatus(status);
    renderTopics(partitions);
    renderGroups(lags, now);
    document.getElementById("error").textContent = "";
    document.getElementById("updated").textContent = "updated " + new Date(now).toLocaleTimeString();
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
  } catch (e) {
    const pill = document.getElementById("health");
    pill.textContent = "unreachable";
    pill.className = "pill down";
    document.getElementById("error").textContent = String(e);
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
