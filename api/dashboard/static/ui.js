// Small DOM helpers shared by the console's views: element building, formatting, the JSON
// fetch, sortable/searchable tables and a confirmation dialog. No framework: the console
// ships as plain ES modules from the broker (nothing from another host).

const SVG_NS = "http://www.w3.org/2000/svg";
const SVG_TAGS = new Set(["svg", "rect", "line", "text", "polyline", "path", "g", "title", "circle"]);

export function el(tag, attrs, ...children) {
  const node = SVG_TAGS.has(tag) ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// A link inside the console: the router handles the click, the URL is real.
export function link(href, ...children) {
  return el("a", { href, "data-link": true }, ...children);
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : Math.round(n)) + " " + units[i];
}

export function num(n, digits = 0) {
  if (n === null || n === undefined) return "–";
  return Number(n).toLocaleString("en-US", { maximumFractionDigits: digits });
}

export function rate(n, unit = "/s") {
  if (n === null || n === undefined) return "–";
  const abs = Math.abs(n);
  const s = abs >= 1e6 ? (n / 1e6).toFixed(1) + "M" : abs >= 1e3 ? (n / 1e3).toFixed(1) + "k"
    : abs >= 10 || abs === 0 ? Math.round(n) : n.toFixed(1);
  return s + unit;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  const s = ms / 1000;
  if (s < 1) return `${Math.round(ms)} ms`;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (d) return `${d}d ${h % 24}h`;
  if (h) return `${h}h ${m % 60}m`;
  return `${m}m ${Math.floor(s % 60)}s`;
}

export function time(ms) {
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "").slice(0, 23);
}

export class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function api(path, options = {}) {
  const resp = await fetch(path, {
    ...options,
    headers: { Accept: "application/json", ...(options.body ? { "Content-Type": "application/json" } : {}) },
  });
  let body = null;
  try { body = await resp.json(); } catch { body = null; }
  if (!resp.ok) {
    const msg = body && body.message ? body.message : `HTTP ${resp.status}`;
    throw new HttpError(resp.status, msg);
  }
  return body;
}

export function pill(text, kind) {
  return el("span", { class: `pill ${kind}` }, text);
}

export function card(title, ...children) {
  return el("section", { class: "card" }, title ? el("h2", {}, title) : null, ...children);
}

export function stat(label, value, testid, kind) {
  return el("div", { class: "stat" + (kind ? " " + kind : ""), "data-testid": testid },
    el("div", { class: "stat-value" }, value), el("div", { class: "stat-label" }, label));
}

export function dl(rows) {
  const node = el("dl", { class: "kv" });
  for (const [k, v] of rows) node.append(el("dt", {}, k), el("dd", {}, v));
  return node;
}

// A table whose rows the caller replaces on every refresh; the sort column and the search
// text survive refreshes. columns: [{key, label, num, render(row) -> node|string, sort(row)}]
export function dataTable({ columns, rowId, testid, search, empty = "nothing to show", sortKey, desc = false }) {
  let rows = [];
  let sort = { key: sortKey || columns[0].key, desc };
  const input = search ? el("input", {
    type: "search", placeholder: search, "aria-label": search, class: "search", "data-testid": `${testid}-search`,
  }) : null;
  const table = el("table", { "data-testid": testid });
  const wrap = el("div", { class: "table-wrap" }, table);
  const node = el("div", { class: "table-block" }, input, wrap);
  if (input) input.addEventListener("input", draw);

  function value(c, r) { return c.sort ? c.sort(r) : r[c.key]; }

  function draw() {
    const q = input ? input.value.trim().toLowerCase() : "";
    const col = columns.find((c) => c.key === sort.key) || columns[0];
    let shown = q ? rows.filter((r) => columns.some((c) => String(r[c.key] ?? "").toLowerCase().includes(q))) : rows;
    shown = [...shown].sort((a, b) => {
      const x = value(col, a), y = value(col, b);
      const cmp = typeof x === "number" && typeof y === "number" ? x - y : String(x ?? "").localeCompare(String(y ?? ""));
      return sort.desc ? -cmp : cmp;
    });
    const head = el("tr", {}, ...columns.map((c) => {
      const active = c.key === sort.key;
      const btn = el("button", {
        class: "sort", type: "button", "data-sort": c.key,
        onclick: () => { sort = { key: c.key, desc: active ? !sort.desc : !!c.num }; draw(); },
      }, c.label, active ? (sort.desc ? " ▾" : " ▴") : "");
      return el("th", { class: c.num ? "num" : "", "aria-sort": active ? (sort.desc ? "descending" : "ascending") : null }, btn);
    }));
    const body = shown.map((r) => el("tr", { "data-row": rowId ? rowId(r) : null },
      ...columns.map((c) => el("td", { class: c.num ? "num" : "", "data-field": c.key, "data-label": c.label },
        c.render ? c.render(r) : (r[c.key] ?? "–")))));
    if (!shown.length) body.push(el("tr", {}, el("td", { colspan: columns.length, class: "muted" }, empty)));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
  }

  return { node, setRows(r) { rows = r; draw(); } };
}

// A modal confirmation (the native <dialog>: focus is trapped, Escape cancels).
export function confirmDialog(title, message, confirmLabel) {
  return new Promise((resolve) => {
    const ok = el("button", { type: "button", class: "danger", "data-testid": "confirm-ok" }, confirmLabel);
    const cancel = el("button", { type: "button", "data-testid": "confirm-cancel" }, "Cancel");
    const dialog = el("dialog", { class: "confirm", "data-testid": "confirm" },
      el("h2", {}, title), el("p", {}, message), el("div", { class: "actions" }, cancel, ok));
    const done = (v) => { dialog.close(); dialog.remove(); resolve(v); };
    ok.addEventListener("click", () => done(true));
    cancel.addEventListener("click", () => done(false));
    dialog.addEventListener("cancel", (e) => { e.preventDefault(); done(false); });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

export function errorBox(e) {
  const forbidden = e instanceof HttpError && (e.status === 403 || e.status === 401);
  return el("div", { class: "error", role: "alert", "data-testid": "view-error" },
    forbidden ? `Not authorized: ${e.message}` : String(e.message || e));
}
