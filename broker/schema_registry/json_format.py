"""JSON Schema: ``jsonschema`` checks a schema against its draft's metaschema (the draft
its ``$schema`` names; draft 2020-12 otherwise); compatibility rules are ours, written
after the ones Confluent documents for JSON Schema (the library has no checker).

"Reader R can read writer W" means: every document valid under W is valid under R. What
is checked (each a Confluent error type in the message), recursively through
``properties``, ``items`` and ``additionalProperties``:

* TYPE_CHANGED / TYPE_NARROWED: R's types must include W's (``integer`` is in
  ``number``); a schema without ``type`` accepts every type.
* PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL: a property of W that R lacks while R
  allows no additional properties.
* PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL: a property of R that W lacks while W is open
  (W's documents may carry it with any value), unless R's property schema accepts
  everything (``{}`` / ``true``).
* ADDITIONAL_PROPERTIES_REMOVED / ADDITIONAL_PROPERTIES_NARROWED: W open, R closed; or
  both with schemas, checked recursively.
* REQUIRED_ATTRIBUTE_ADDED: a name R requires that W does not.
* ENUM_ARRAY_NARROWED: R has an ``enum`` missing a value of W's (or W has none).
* MAX_LENGTH_DECREASED / MIN_LENGTH_INCREASED / MAXIMUM_DECREASED / MINIMUM_INCREASED /
  MAX_ITEMS_DECREASED / MIN_ITEMS_INCREASED: R's bound tighter than W's (or W unbounded).
* COMBINED_TYPE_CHANGED: ``oneOf``/``anyOf``/``allOf`` where the two differ in kind;
  within the same kind, each alternative of W must be read by some alternative of R.
* ``$ref``: compared as written (the same reference is compatible; a changed one is
  REFERENCE_CHANGED)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import jsonschema.exceptions  # type: ignore[import-untyped]
import jsonschema.validators  # type: ignore[import-untyped]

from broker.schema_registry.errors import invalid_schema
from broker.schema_registry.schema_base import JSON, ParsedSchema, ReferencedText, compact_json, load_json

Doc = dict[str, Any] | bool

_BOUNDS = (
    # (keyword, True when a bigger value is looser), error type when R is tighter
    ("maxLength", True, "MAX_LENGTH_DECREASED"),
    ("minLength", False, "MIN_LENGTH_INCREASED"),
    ("maximum", True, "MAXIMUM_DECREASED"),
    ("minimum", False, "MINIMUM_INCREASED"),
    ("exclusiveMaximum", True, "EXCLUSIVE_MAXIMUM_DECREASED"),
    ("exclusiveMinimum", False, "EXCLUSIVE_MINIMUM_INCREASED"),
    ("maxItems", True, "MAX_ITEMS_DECREASED"),
    ("minItems", False, "MIN_ITEMS_INCREASED"),
    ("maxProperties", True, "MAX_PROPERTIES_DECREASED"),
    ("minProperties", False, "MIN_PROPERTIES_INCREASED"),
)


@dataclass(frozen=True, slots=True, eq=False)
class JsonSchema:
    schema_type: str
    canonical: str
    doc: Doc

    def reads(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"schema type changed from {writer.schema_type} to JSON"]
        out: list[str] = []
        _reads(self.doc, writer.doc, "#", out)
        return out


def parse_json_schema(text: str, refs: list[ReferencedText]) -> JsonSchema:
    for ref in refs:
        _check(load_json(ref.text, f"reference {ref.name}"), ref.text)
    doc = load_json(text, "the schema")
    _check(doc, text)
    return JsonSchema(JSON, compact_json(doc), doc)


def _check(doc: Any, text: str) -> None:
    if not isinstance(doc, dict | bool):
        raise invalid_schema(f"{text[:200]}, details: a JSON schema is an object or a boolean")
    try:
        cls = jsonschema.validators.validator_for(doc, default=jsonschema.Draft202012Validator)
        cls.check_schema(doc)
    except jsonschema.exceptions.SchemaError as exc:
        raise invalid_schema(f"{text[:200]}, details: {exc.message}") from None


def _types(doc: dict[str, Any]) -> set[str] | None:
    t = doc.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _accepts_all(doc: Doc) -> bool:
    return doc is True or doc == {}


def _reads(r: Doc, w: Doc, path: str, out: list[str]) -> None:
    if r is True or w is False or r == w:
        return
    if r is False:
        out.append(f"{path}: SCHEMA_NARROWED (the new schema accepts nothing)")
        return
    if w is True:
        w = {}
    assert isinstance(r, dict) and isinstance(w, dict)
    if "$ref" in r or "$ref" in w:
        if r.get("$ref") != w.get("$ref"):
            out.append(f"{path}: REFERENCE_CHANGED ({w.get('$ref')} -> {r.get('$ref')})")
        return
    rt, wt = _types(r), _types(w)
    if rt is not None:
        if wt is None:
            out.append(f"{path}: TYPE_NARROWED (to {sorted(rt)})")
        else:
            missing = {t for t in wt if t not in rt and not (t == "integer" and "number" in rt)}
            if missing:
                out.append(f"{path}: TYPE_CHANGED ({sorted(wt)} -> {sorted(rt)})")
                return
    _enum(r, w, path, out)
    _bounds(r, w, path, out)
    _object(r, w, path, out)
    if "items" in r and isinstance(r["items"], dict | bool):
        w_items = w.get("items", True)
        if isinstance(w_items, dict | bool):
            _reads(r["items"], w_items, f"{path}/items", out)
    _combined(r, w, path, out)


def _enum(r: dict[str, Any], w: dict[str, Any], path: str, out: list[str]) -> None:
    if "enum" not in r:
        return
    if "enum" not in w or any(v not in r["enum"] for v in w["enum"]):
        out.append(f"{path}: ENUM_ARRAY_NARROWED")


def _bounds(r: dict[str, Any], w: dict[str, Any], path: str, out: list[str]) -> None:
    for key, bigger_is_looser, error in _BOUNDS:
        rv = r.get(key)
        if not isinstance(rv, int | float) or isinstance(rv, bool):
            continue
        wv = w.get(key)
        if not isinstance(wv, int | float) or isinstance(wv, bool):
            out.append(f"{path}: {error.rsplit('_', 1)[0]}_ADDED ({key} {rv})")
        elif (rv < wv) if bigger_is_looser else (rv > wv):
            out.append(f"{path}: {error} ({key} {wv} -> {rv})")


def _object(r: dict[str, Any], w: dict[str, Any], path: str, out: list[str]) -> None:
    rp: dict[str, Doc] = r.get("properties", {}) if isinstance(r.get("properties"), dict) else {}
    wp: dict[str, Doc] = w.get("properties", {}) if isinstance(w.get("properties"), dict) else {}
    r_extra: Doc = r.get("additionalProperties", True)
    w_extra: Doc = w.get("additionalProperties", True)
    for name, wsub in wp.items():
        if name in rp:
            _reads(rp[name], wsub, f"{path}/properties/{name}", out)
        elif r_extra is False:
            out.append(f"{path}/properties/{name}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        elif isinstance(r_extra, dict):
            _reads(r_extra, wsub, f"{path}/properties/{name}", out)
    for name, rsub in rp.items():
        if name in wp:
            continue
        if w_extra is False:
            continue  # W never writes it
        if isinstance(w_extra, dict):
            _reads(rsub, w_extra, f"{path}/properties/{name}", out)
        elif not _accepts_all(rsub):
            out.append(f"{path}/properties/{name}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
    if w_extra is not False and r_extra is False:
        out.append(f"{path}: ADDITIONAL_PROPERTIES_REMOVED")
    elif isinstance(r_extra, dict) and w_extra is not False:
        before = len(out)
        _reads(r_extra, w_extra if isinstance(w_extra, dict) else {}, f"{path}/additionalProperties", out)
        if len(out) > before:
            out.append(f"{path}: ADDITIONAL_PROPERTIES_NARROWED")
    r_req = set(r.get("required", []) or [])
    w_req = set(w.get("required", []) or [])
    for name in sorted(r_req - w_req):
        out.append(f"{path}/required/{name}: REQUIRED_ATTRIBUTE_ADDED")


def _combined(r: dict[str, Any], w: dict[str, Any], path: str, out: list[str]) -> None:
    kinds = ("oneOf", "anyOf", "allOf")
    rk = [k for k in kinds if k in r]
    wk = [k for k in kinds if k in w]
    if not rk and not wk:
        return
    if rk != wk:
        out.append(f"{path}: COMBINED_TYPE_CHANGED ({wk} -> {rk})")
        return
    for kind in rk:
        ralts, walts = r[kind], w[kind]
        for i, walt in enumerate(walts):
            if not any(_ok(ralt, walt) for ralt in ralts):
                out.append(f"{path}/{kind}/{i}: COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _ok(r: Doc, w: Doc) -> bool:
    out: list[str] = []
    _reads(r, w, "#", out)
    return not out
