// Schema registry pages: the subjects with their versions, and one subject's versions with
// a diff between two of them (from/to in the page's query, so a reload keeps them).
import { card, dataTable, el, link, pill } from "./ui.js";

const enc = encodeURIComponent;

export const schemaList = {
  title: () => "Schemas",
  api: () => "/console/api/schemas",
  mount(root) {
    const summary = el("p", { class: "muted", "data-testid": "schemas-defaults" });
    const table = dataTable({
      testid: "schemas", search: "Search subjects", rowId: (s) => `subject-${s.subject}`, sortKey: "subject",
      columns: [
        { key: "subject", label: "Subject", render: (s) => link(`/dashboard/schemas/${enc(s.subject)}`, s.subject) },
        { key: "schema_type", label: "Format", render: (s) => pill(s.schema_type, "idle") },
        { key: "versions_text", label: "Versions" },
        { key: "latest_id", label: "Latest id", num: true },
      ],
      empty: "no subjects (register one with a serializer, `strata schemas register` or the API on port 8081)",
    });
    root.append(summary, card(null, table.node));
    return { table, summary };
  },
  update(s, d) {
    s.summary.textContent = `Global compatibility ${d.compatibility}, mode ${d.mode}.`;
    s.table.setRows(d.subjects.map((x) => ({ ...x, versions_text: x.versions.join(", ") })));
  },
};

function diffView(lines) {
  if (!lines.length) return el("p", { class: "muted" }, "No difference (or a single version).");
  return el("pre", { class: "diff", "data-testid": "schema-diff" }, ...lines.map((l) => {
    const kind = l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : "";
    return el("span", { class: kind ? `diff-${kind}` : "" }, l + "\n");
  }));
}

export const schemaDetail = {
  title: (subject) => `Subject ${subject}`,
  api: (subject) => `/console/api/schemas/${enc(subject)}${location.search}`,
  mount(root) {
    const meta = el("p", { class: "muted", "data-testid": "subject-meta" });
    const pick = (name) => el("select", { name, "data-testid": `diff-${name}` });
    const form = el("form", { class: "browse-form" }, el("label", {}, "Diff from ", pick("from")), el("label", {}, " to ", pick("to")));
    const diff = el("div", {});
    const versions = el("div", { "data-testid": "schema-versions" });
    form.addEventListener("change", () => {
      const q = new URLSearchParams({ from: form.elements.from.value, to: form.elements.to.value });
      history.replaceState(null, "", `${location.pathname}?${q}`);
      window.dispatchEvent(new Event("console:refresh"));
    });
    root.append(meta, card("Diff", form, diff), card("Versions", versions));
    return { meta, form, diff, versions };
  },
  update(s, d) {
    s.meta.textContent = `Compatibility ${d.compatibility} · ${d.versions.length} version(s)`;
    const options = (sel, chosen) => {
      sel.replaceChildren(...d.versions.map((v) => el("option", { value: v.version }, `version ${v.version} (id ${v.id})`)));
      if (chosen !== null) sel.value = String(chosen);
    };
    options(s.form.elements.from, d.diff.from);
    options(s.form.elements.to, d.diff.to);
    s.diff.replaceChildren(diffView(d.diff.lines));
    s.versions.replaceChildren(...[...d.versions].reverse().map((v) => el("article", { class: "message", "data-testid": "schema-version" },
      el("div", { class: "message-meta" }, el("span", {}, `version ${v.version} · id ${v.id}`), pill(v.schema_type, "idle"),
        v.references.length ? el("span", {}, "references: " + v.references.map((r) => `${r.name} → ${r.subject} v${r.version}`).join(", ")) : null),
      el("pre", { class: "json" }, v.schema))));
  },
};
