// The console's shell: a client-side router over real URLs (the broker answers each page's
// URL with this app, so pages load directly and survive a reload), the theme toggle and
// the refresh loop. Each page polls ONE data endpoint (/console/api/...), whatever the
// cluster holds.
import { api, el, errorBox } from "./ui.js";
import * as cluster from "./views_cluster.js";
import * as topics from "./views_topics.js";
import * as groups from "./views_groups.js";
import * as schemas from "./views_schemas.js";

const REFRESH_MS = 5000;

// [pattern, view, nav section]; a view is {title(params), api(params), mount(root, params), update(state, data)}
const ROUTES = [
  [/^\/dashboard\/?$/, cluster.overview, "overview"],
  [/^\/dashboard\/topics\/?$/, topics.topicList, "topics"],
  [/^\/dashboard\/topics\/(.+)$/, topics.topicDetail, "topics"],
  [/^\/dashboard\/groups\/?$/, groups.groupList, "groups"],
  [/^\/dashboard\/groups\/(.+)$/, groups.groupDetail, "groups"],
  [/^\/dashboard\/brokers\/?$/, cluster.brokerList, "brokers"],
  [/^\/dashboard\/brokers\/(\d+)$/, cluster.brokerDetail, "brokers"],
  [/^\/dashboard\/tiering\/?$/, cluster.tiering, "tiering"],
  [/^\/dashboard\/security\/?$/, cluster.security, "security"],
  [/^\/dashboard\/schemas\/?$/, schemas.schemaList, "schemas"],
  [/^\/dashboard\/schemas\/(.+)$/, schemas.schemaDetail, "schemas"],
];

let current = null; // {view, params, state, timer, seq}
let seq = 0;

function resolve(path) {
  for (const [re, view, section] of ROUTES) {
    const m = path.match(re);
    if (m) return { view, section, params: m.slice(1).map(decodeURIComponent) };
  }
  return null;
}

async function refresh(ctx) {
  if (ctx !== current) return;
  ctx.inflight = true;
  const status = document.getElementById("status");
  try {
    const data = await api(ctx.view.api(...ctx.params));
    if (ctx !== current) return;
    ctx.view.update(ctx.state, data, ...ctx.params);
    ctx.error.replaceChildren();
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "status ok";
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
  } catch (e) {
    if (ctx !== current) return;
    ctx.error.replaceChildren(errorBox(e));
    status.textContent = e.status ? `error ${e.status}` : "unreachable";
    status.className = "status down";
  } finally {
    ctx.inflight = false;
    if (ctx === current) {
      const soon = ctx.again;
      ctx.again = false;
      ctx.timer = setTimeout(() => refresh(ctx), soon ? 0 : REFRESH_MS);
    }
  }
}

function route() {
  if (current) clearTimeout(current.timer);
  const main = document.getElementById("main");
  const found = resolve(location.pathname);
  document.querySelectorAll("nav a").forEach((a) => {
    if (found && a.dataset.section === found.section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  });
  document.body.dataset.refreshes = "0";
  if (!found) {
    current = null;
    main.replaceChildren(el("h1", {}, "Not found"), el("p", {}, `No console page at ${location.pathname}.`));
    return;
  }
  const { view, params } = found;
  const title = view.title(...params);
  document.title = `${title} · Strata console`;
  const error = el("div", { class: "view-error" });
  const body = el("div", { class: "view" });
  main.replaceChildren(el("h1", { "data-testid": "page-title" }, title), error, body);
  const ctx = { view, params, error, seq: ++seq, timer: null };
  ctx.state = view.mount(body, ...params);
  current = ctx;
  refresh(ctx);
}

export function navigate(href) {
  if (href !== location.pathname + location.search) history.pushState(null, "", href);
  route();
  document.getElementById("main").focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[href]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/dashboard") || url.pathname.startsWith("/dashboard/assets/")) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", route);
// A view that changed something asks for its data again at once.
window.addEventListener("console:refresh", () => {
  if (!current) return;
  if (current.inflight) { current.again = true; return; } // read again once this one is done
  clearTimeout(current.timer);
  refresh(current);
});

// Theme: follows the system (prefers-color-scheme) until the toggle picks one.
const THEMES = ["auto", "dark", "light"];
function applyTheme(t) {
  if (t === "auto") document.documentElement.removeAttribute("data-theme");
  else document.documentElement.dataset.theme = t;
  const btn = document.getElementById("theme");
  btn.textContent = { auto: "◐ auto", dark: "☾ dark", light: "☀ light" }[t];
  btn.setAttribute("aria-label", `colour theme: ${t} (change)`);
}
let theme = localStorage.getItem("strata-theme") || "auto";
applyTheme(theme);
document.getElementById("theme").addEventListener("click", () => {
  theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
  localStorage.setItem("strata-theme", theme);
  applyTheme(theme);
});
document.getElementById("menu").addEventListener("click", () => {
  const nav = document.querySelector("header nav");
  const open = nav.classList.toggle("open");
  document.getElementById("menu").setAttribute("aria-expanded", String(open));
});
document.querySelector("header nav").addEventListener("click", () => document.querySelector("header nav").classList.remove("open"));

route();
