"""JSON Schema compatibility: can reader R read writer W, i.e. is every document valid
under W valid under R? ``jsonschema`` has no such checker, so these rules are ours,
written after the difference types Confluent documents for JSON Schema (each message
names one). Walked recursively through ``properties``, ``patternProperties``,
``additionalProperties``, ``items``, ``dependencies`` / ``dependentSchemas``, ``not``,
``if``/``then``/``else`` and ``oneOf``/``anyOf``/``allOf``, with ``$ref`` followed (into
the same document's ``#/definitions``/``#/$defs`` or any JSON pointer, or into a
referenced subject's schema by its reference name).

Where a rule cannot be decided exactly it errs towards "incompatible": two differently
spelled patterns are never assumed to match the same names, and a changed ``if`` is a
CONDITIONAL_CHANGED unless R's branches accept everything."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

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
_MAX_REF_HOPS = 32
_MAX_DEPTH = 256  # path segments: a recursive $ref whose siblings make a new dict each hop
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "id", "title", "description", "$comment", "examples", "default", "$anchor"}
)


@dataclass(frozen=True, slots=True)
class Side:
    """One schema as ``$ref`` needs it: the document a ``#`` pointer starts from and the
    referenced schemas by the name a reference imports them with."""

    root: Doc
    refs: dict[str, Doc] = field(default_factory=dict)

    def resolve(self, ref: str) -> tuple[Doc, Side] | None:
        """The schema ``ref`` points at and the side it lives in; None when it points
        nowhere we know (an absolute URL of no reference, a bad pointer)."""
        name, _, pointer = ref.partition("#")
        side = self
        if name:
            target = self.refs.get(name)
            if target is None:
                return None
            side = Side(target, self.refs)
        doc: Any = side.root
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(doc, dict) and part in doc:
                doc = doc[part]
            elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
                doc = doc[int(part)]
            else:
                return None
        return (doc, side) if isinstance(doc, dict | bool) else None


def incompatibilities(reader: Side, writer: Side) -> list[str]:
    out: list[str] = []
    _Checker(set()).reads(reader.root, reader, writer.root, writer, "#", out)
    return out


def _types(doc: dict[str, Any]) -> set[str] | None:
    t = doc.get("type")
    if t is None:
        values = _enum_values(doc)
        return None if values is None else {_type_of(v) for v in values}
    return {t} if isinstance(t, str) else set(t)


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _enum_values(doc: dict[str, Any]) -> list[Any] | None:
    if "const" in doc:
        return [doc["const"]]
    enum = doc.get("enum")
    return enum if isinstance(enum, list) else None


def _accepts_all(doc: Any) -> bool:
    if doc is True:
        return True
    return isinstance(doc, dict) and not (set(doc) - _ANNOTATIONS)


def _number(v: Any) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _matches(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


class _Checker:
    def __init__(self, seen: set[tuple[int, int]]) -> None:
        # Pairs of (reader, writer) schemas being compared: a recursive $ref meeting one
        # again is taken as compatible (the rest of the walk decides).
        self.seen = seen

    def ok(self, r: Doc, rs: Side, w: Doc, ws: Side) -> bool:
        out: list[str] = []
        self.reads(r, rs, w, ws, "#", out)
        return not out

    def reads(self, r: Doc, rs: Side, w: Doc, ws: Side, path: str, out: list[str]) -> None:
        r, rs = self._follow(r, rs)
        w, ws = self._follow(w, ws)
        if r is True or w is False or (r == w and not _has_ref(r)):
            return
        if r is False:
            out.append(f"{path}: SCHEMA_NARROWED (the new schema accepts nothing)")
            return
        if w is True:
            w = {}
        assert isinstance(r, dict) and isinstance(w, dict)
        if "$ref" in r or "$ref" in w:  # one we could not follow: compared as written
            if r.get("$ref") != w.get("$ref"):
                out.append(f"{path}: REFERENCE_CHANGED ({w.get('$ref')} -> {r.get('$ref')})")
            return
        key = (id(r), id(w))
        if key in self.seen or path.count("/") > _MAX_DEPTH:
            return
        self.seen.add(key)
        try:
            self._compare(r, rs, w, ws, path, out)
        finally:
            self.seen.discard(key)

    def _follow(self, doc: Doc, side: Side) -> tuple[Doc, Side]:
        for _ in range(_MAX_REF_HOPS):
            if not isinstance(doc, dict) or not isinstance(doc.get("$ref"), str):
                return doc, side
            found = side.resolve(doc["$ref"])
            if found is None:
                return doc, side
            target, side = found
            siblings = {k: v for k, v in doc.items() if k != "$ref" and k not in _ANNOTATIONS}
            # A $ref with sibling keywords (allowed from draft 2019-09) applies both: the
            # siblings are laid over the target.
            doc = {**target, **siblings} if siblings and isinstance(target, dict) else target
        return doc, side

    def _compare(
        self, r: dict[str, Any], rs: Side, w: dict[str, Any], ws: Side, path: str, out: list[str]
    ) -> None:
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
        _string_and_array(r, w, path, out)
        self._object(r, rs, w, ws, path, out)
        self._dependencies(r, rs, w, ws, path, out)
        if "items" in r and isinstance(r["items"], dict | bool):
            w_items = w.get("items", True)
            if isinstance(w_items, dict | bool):
                self.reads(r["items"], rs, w_items, ws, f"{path}/items", out)
        self._not(r, rs, w, ws, path, out)
        self._conditional(r, rs, w, ws, path, out)
        self._combined(r, rs, w, ws, path, out)

    # --- objects ----------------------------------------------------------------------

    def _object(
        self, r: dict[str, Any], rs: Side, w: dict[str, Any], ws: Side, path: str, out: list[str]
    ) -> None:
        rp: dict[str, Doc] = r["properties"] if isinstance(r.get("properties"), dict) else {}
        wp: dict[str, Doc] = w["properties"] if isinstance(w.get("properties"), dict) else {}
        rpat: dict[str, Doc] = r["patternProperties"] if isinstance(r.get("patternProperties"), dict) else {}
        wpat: dict[str, Doc] = w["patternProperties"] if isinstance(w.get("patternProperties"), dict) else {}
        r_extra: Doc = r.get("additionalProperties", True)
        w_extra: Doc = w.get("additionalProperties", True)
        for name, wsub in wp.items():
            where = f"{path}/properties/{name}"
            covering = [s for p, s in rpat.items() if _matches(p, name)]
            if name in rp:
                self.reads(rp[name], rs, wsub, ws, where, out)
                for rsub in covering:
                    self.reads(rsub, rs, wsub, ws, where, out)
            elif covering:  # R's partially open content model takes it: compared
                for rsub in covering:
                    self.reads(rsub, rs, wsub, ws, where, out)
            elif r_extra is False:
                kind = "NOT_COVERED_BY_PARTIALLY_OPEN" if rpat else "FROM_CLOSED"
                out.append(f"{where}: PROPERTY_REMOVED_{kind}_CONTENT_MODEL")
            elif isinstance(r_extra, dict):
                self.reads(r_extra, rs, wsub, ws, where, out)
        for name, rsub in rp.items():
            if name in wp:
                continue
            where = f"{path}/properties/{name}"
            w_covering = [s for p, s in wpat.items() if _matches(p, name)]
            if w_covering:  # W may have written it under its pattern's schema: compared
                for wsub in w_covering:
                    self.reads(rsub, rs, wsub, ws, where, out)
            elif w_extra is False:
                continue  # W never writes it
            elif isinstance(w_extra, dict):
                self.reads(rsub, rs, w_extra, ws, where, out)
            elif not _accepts_all(rsub):
                kind = "NOT_COVERED_BY_PARTIALLY_OPEN" if wpat else "TO_OPEN"
                out.append(f"{where}: PROPERTY_ADDED_{kind}_CONTENT_MODEL")
        self._patterns(r, rs, w, ws, path, out, rpat, wpat)
        if w_extra is not False and r_extra is False:
            out.append(f"{path}: ADDITIONAL_PROPERTIES_REMOVED")
        elif isinstance(r_extra, dict) and w_extra is not False:
            before = len(out)
            self.reads(r_extra, rs, w_extra, ws, f"{path}/additionalProperties", out)
            if len(out) > before:
                out.append(f"{path}: ADDITIONAL_PROPERTIES_NARROWED")
        r_req = set(r.get("required", []) or [])
        w_req = set(w.get("required", []) or [])
        for name in sorted(r_req - w_req):
            out.append(f"{path}/required/{name}: REQUIRED_ATTRIBUTE_ADDED")

    def _patterns(
        self,
        r: dict[str, Any],
        rs: Side,
        w: dict[str, Any],
        ws: Side,
        path: str,
        out: list[str],
        rpat: dict[str, Doc],
        wpat: dict[str, Doc],
    ) -> None:
        """Names matching a pattern, beyond the listed properties: a pattern of W's that R
        spells the same is compared; one R lacks falls to R's additionalProperties; one R
        adds must read whatever W writes there (W's other patterns and its extra)."""
        r_extra: Doc = r.get("additionalProperties", True)
        w_extra: Doc = w.get("additionalProperties", True)
        for pattern, wsub in wpat.items():
            where = f"{path}/patternProperties/{pattern}"
            if pattern in rpat:
                self.reads(rpat[pattern], rs, wsub, ws, where, out)
            elif r_extra is False:
                out.append(f"{where}: PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
            elif isinstance(r_extra, dict):
                self.reads(r_extra, rs, wsub, ws, where, out)
        for pattern, rsub in rpat.items():
            if pattern in wpat:
                continue
            where = f"{path}/patternProperties/{pattern}"
            sources: list[Doc] = [s for p, s in wpat.items() if p != pattern]
            if w_extra is not False:
                sources.append(w_extra)
            for wsub in sources:
                if wsub is True and not _accepts_all(rsub):
                    out.append(f"{where}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
                    break
                self.reads(rsub, rs, wsub, ws, where, out)

    def _dependencies(
        self, r: dict[str, Any], rs: Side, w: dict[str, Any], ws: Side, path: str, out: list[str]
    ) -> None:
        r_arrays, r_schemas = _split_dependencies(r)
        w_arrays, w_schemas = _split_dependencies(w)
        w_required = set(w.get("required", []) or [])
        for prop, names in r_arrays.items():
            where = f"{path}/dependencies/{prop}"
            if prop in w_arrays:
                if names - w_arrays[prop] - w_required:
                    out.append(f"{where}: DEPENDENCY_ARRAY_EXTENDED")
            elif names - w_required:
                out.append(f"{where}: DEPENDENCY_ARRAY_ADDED")
        for prop, rsub in r_schemas.items():
            where = f"{path}/dependencies/{prop}"
            if prop in w_schemas:
                self.reads(rsub, rs, w_schemas[prop], ws, where, out)
            elif not _accepts_all(rsub):
                out.append(f"{where}: DEPENDENCY_SCHEMA_ADDED")

    # --- not, if/then/else, combined --------------------------------------------------

    def _not(
        self, r: dict[str, Any], rs: Side, w: dict[str, Any], ws: Side, path: str, out: list[str]
    ) -> None:
        if "not" not in r or r["not"] is False:
            return
        # R refuses what r.not accepts; W refuses what w.not accepts. Every W document
        # is fine for R when whatever r.not accepts w.not accepts too.
        if "not" in w and self.ok(w["not"], ws, r["not"], rs):
            return
        out.append(f"{path}/not: NOT_TYPE_EXTENDED")

    def _conditional(
        self, r: dict[str, Any], rs: Side, w: dict[str, Any], ws: Side, path: str, out: list[str]
    ) -> None:
        if "if" not in r:
            return
        r_then, r_else = r.get("then", True), r.get("else", True)
        if _accepts_all(r_then) and _accepts_all(r_else):
            return
        if "if" not in w or not (self.ok(r["if"], rs, w["if"], ws) and self.ok(w["if"], ws, r["if"], rs)):
            kind = "CHANGED" if "if" in w else "ADDED"
            out.append(f"{path}/if: CONDITIONAL_{kind}")
            return
        self.reads(r_then, rs, w.get("then", True), ws, f"{path}/then", out)
        self.reads(r_else, rs, w.get("else", True), ws, f"{path}/else", out)

    def _combined(
        self, r: dict[str, Any], rs: Side, w: dict[str, Any], ws: Side, path: str, out: list[str]
    ) -> None:
        kinds = ("oneOf", "anyOf", "allOf")
        rk = [k for k in kinds if isinstance(r.get(k), list)]
        wk = [k for k in kinds if isinstance(w.get(k), list)]
        if not rk:
            return  # W's alternatives only narrow what W writes
        if not wk:
            # R adds alternatives: W as a whole must pass one of them (oneOf/anyOf) or
            # all of them (allOf).
            plain = {k: v for k, v in w.items() if k not in kinds}
            for kind in rk:
                passes = [self.ok(alt, rs, plain, ws) for alt in r[kind]]
                if not (all(passes) if kind == "allOf" else any(passes)):
                    out.append(f"{path}/{kind}: COMBINED_TYPE_CHANGED")
            return
        for kind in rk:
            wkind = kind if kind in wk else ("oneOf" if kind == "anyOf" and "oneOf" in wk else None)
            if wkind is None:
                out.append(f"{path}: COMBINED_TYPE_CHANGED ({wk} -> {rk})")
                continue
            ralts, walts = r[kind], w[wkind]
            if kind == "allOf":
                # every constraint R adds must hold for W's documents: each R part reads
                # some W part
                for i, ralt in enumerate(ralts):
                    if not any(self.ok(ralt, rs, walt, ws) for walt in walts):
                        error = (
                            "PRODUCT_TYPE_EXTENDED"
                            if len(ralts) > len(walts)
                            else "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
                        )
                        out.append(f"{path}/{kind}/{i}: {error}")
            else:
                for i, walt in enumerate(walts):
                    if not any(self.ok(ralt, rs, walt, ws) for ralt in ralts):
                        error = (
                            "SUM_TYPE_NARROWED"
                            if len(ralts) < len(walts)
                            else "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
                        )
                        out.append(f"{path}/{kind}/{i}: {error}")


def _has_ref(doc: Any) -> bool:
    """Whether ``$ref`` occurs anywhere in ``doc`` (equal text may then mean different
    targets, in two sides with different references)."""
    if isinstance(doc, dict):
        return "$ref" in doc or any(_has_ref(v) for v in doc.values() if isinstance(v, dict | list))
    if isinstance(doc, list):
        return any(_has_ref(v) for v in doc)
    return False


def _split_dependencies(doc: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, Doc]]:
    """``dependencies`` (drafts 4 to 7: a list of names or a schema per property),
    ``dependentRequired`` and ``dependentSchemas`` (2019-09 on) as (names, schemas)."""
    arrays: dict[str, set[str]] = {}
    schemas: dict[str, Doc] = {}
    for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
        deps = doc.get(keyword)
        if not isinstance(deps, dict):
            continue
        for prop, dep in deps.items():
            if isinstance(dep, list):
                arrays.setdefault(prop, set()).update(x for x in dep if isinstance(x, str))
            elif isinstance(dep, dict | bool):
                schemas[prop] = dep
    return arrays, schemas


def _enum(r: dict[str, Any], w: dict[str, Any], path: str, out: list[str]) -> None:
    r_values = _enum_values(r)
    if r_values is None:
        return
    w_values = _enum_values(w)
    if w_values is None:
        out.append(f"{path}: ENUM_ARRAY_CHANGED (an enum where there was none)")
    elif any(v not in r_values for v in w_values):
        out.append(f"{path}: ENUM_ARRAY_NARROWED")


def _bounds(r: dict[str, Any], w: dict[str, Any], path: str, out: list[str]) -> None:
    for key, bigger_is_looser, error in _BOUNDS:
        rv = r.get(key)
        if not _number(rv):
            continue
        wv = w.get(key)
        if not _number(wv):
            out.append(f"{path}: {error.rsplit('_', 1)[0]}_ADDED ({key} {rv})")
        elif (rv < wv) if bigger_is_looser else (rv > wv):
            out.append(f"{path}: {error} ({key} {wv} -> {rv})")


def _string_and_array(r: dict[str, Any], w: dict[str, Any], path: str, out: list[str]) -> None:
    if isinstance(r.get("pattern"), str) and r.get("pattern") != w.get("pattern"):
        kind = "CHANGED" if isinstance(w.get("pattern"), str) else "ADDED"
        out.append(f"{path}: PATTERN_{kind} ({r['pattern']})")
    rm, wm = r.get("multipleOf"), w.get("multipleOf")
    if _number(rm):
        if not _number(wm):
            out.append(f"{path}: MULTIPLE_OF_ADDED ({rm})")
        elif not _divides(rm, wm):
            kind = "EXPANDED" if _divides(wm, rm) else "CHANGED"
            out.append(f"{path}: MULTIPLE_OF_{kind} ({wm} -> {rm})")
    if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
        out.append(f"{path}: UNIQUE_ITEMS_ADDED")


def _divides(small: float, big: float) -> bool:
    """Whether every multiple of ``big`` is a multiple of ``small``."""
    if small == 0:
        return False
    q = big / small
    return abs(q - round(q)) < 1e-9
