// Line charts drawn as SVG by hand: the width follows the container (a ResizeObserver
// redraws), the y scale is linear or logarithmic (log keeps small groups' lag visible next
// to a big one), the x axis spans the history the broker kept.
import { el } from "./ui.js";

const COLORS = ["var(--c1)", "var(--c2)", "var(--c3)", "var(--c4)", "var(--c5)", "var(--c6)", "var(--c7)"];
const HEIGHT = 190;

// Round steps: 1-2-2.5-5 x 10^k, or powers of two x 1024^k for byte axes (binary).
function niceTicks(max, count = 4, binary = false, integer = false) {
  if (max <= 0) return [0];
  const raw = integer ? Math.max(max / count, 1) : max / count;
  let step;
  if (binary) {
    const mag = 1024 ** Math.floor(Math.log(raw) / Math.log(1024));
    step = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024].map((m) => m * mag).find((s) => s >= raw) || raw;
  } else {
    const mag = 10 ** Math.floor(Math.log10(raw));
    step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  }
  const out = [];
  for (let v = 0; out.length < 2 || out[out.length - 1] < max; v += step) out.push(v);
  return out;
}

function clock(t, seconds) {
  const d = new Date(t * 1000), p = (n) => String(n).padStart(2, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}` + (seconds ? `:${p(d.getSeconds())}` : "");
}

// series: [{name, points: [[t (unix s), value|null]]}]; format(v) labels values.
export function lineChart({ title, series, format = String, log = false, testid, logToggle = false, empty, binary = false, integer = false }) {
  const svg = el("svg", { class: "chart", role: "img", "aria-label": title, "data-testid": testid });
  const legend = el("div", { class: "legend" });
  let useLog = log;
  const toggle = logToggle ? el("label", { class: "log-toggle" },
    el("input", { type: "checkbox", "data-testid": `${testid}-log`, checked: log || null,
      onchange: (e) => { useLog = e.target.checked; draw(); } }), " log scale") : null;
  const box = el("div", { class: "chart-box" }, el("div", { class: "chart-head" }, el("h3", {}, title), toggle), svg, legend);

  function draw() {
    const W = Math.max(240, Math.floor(svg.parentElement ? svg.parentElement.clientWidth : 600));
    const H = HEIGHT, left = 58, right = 12, top = 10, bottom = 22;
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const pts = series.flatMap((s) => s.points.filter((p) => p[1] !== null && p[1] !== undefined));
    const nodes = [];
    if (!pts.length) {
      nodes.push(el("text", { x: left, y: H / 2, class: "muted-text" }, empty || "no samples yet: the broker samples every 10 s"));
      svg.replaceChildren(...nodes);
      legend.replaceChildren();
      return;
    }
    const tMax = Math.max(...pts.map((p) => p[0])), tMin = Math.min(...pts.map((p) => p[0]), tMax - 60);
    const vMax = Math.max(...pts.map((p) => p[1]), 0);
    const f = useLog ? (v) => Math.log10(Math.max(v, 0) + 1) : (v) => v;
    let ticks;
    if (useLog) {
      ticks = [0];
      for (let v = 1; f(v) <= f(vMax) * 1.0001 || ticks.length < 2; v *= 10) ticks.push(v);
    } else {
      ticks = niceTicks(vMax || 1, 4, binary, integer);
    }
    const top_ = f(ticks[ticks.length - 1]) || 1;
    const x = (t) => left + ((t - tMin) / Math.max(tMax - tMin, 1)) * (W - left - right);
    const y = (v) => top + (1 - f(v) / top_) * (H - top - bottom);
    for (const v of ticks) {
      nodes.push(el("line", { class: "grid", x1: left, x2: W - right, y1: y(v), y2: y(v) }));
      nodes.push(el("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", class: "axis-text" }, format(v)));
    }
    const xt = W < 520 ? 2 : 4;
    for (let i = 0; i <= xt; i++) {
      const t = tMin + ((tMax - tMin) * i) / xt;
      nodes.push(el("text", { x: x(t), y: H - 6, "text-anchor": i === 0 ? "start" : i === xt ? "end" : "middle", class: "axis-text" }, clock(t, tMax - tMin < 600)));
    }
    const items = [];
    series.forEach((s, i) => {
      const color = s.color || COLORS[i % COLORS.length];
      const valid = s.points.filter((p) => p[1] !== null && p[1] !== undefined);
      if (!valid.length) return;
      const d = valid.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
      const last = valid[valid.length - 1][1];
      nodes.push(el("path", { d, fill: "none", stroke: color, "stroke-width": 2, "data-series": s.name },
        el("title", {}, `${s.name}: ${format(last)}`)));
      if (valid.length === 1) nodes.push(el("circle", { cx: x(valid[0][0]), cy: y(last), r: 3, fill: color }));
      items.push(el("span", { class: "legend-item", "data-testid": `${testid}-legend` },
        el("span", { class: "swatch", style: `background:${color}` }), `${s.name}: ${format(last)}`));
    });
    svg.replaceChildren(...nodes);
    legend.replaceChildren(...items);
  }

  const observer = new ResizeObserver(() => draw());
  queueMicrotask(() => { if (svg.parentElement) observer.observe(svg.parentElement); draw(); });
  return {
    node: box,
    update(newSeries) { series = newSeries; draw(); },
  };
}
