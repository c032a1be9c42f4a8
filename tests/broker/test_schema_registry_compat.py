"""The registry's own compatibility rules, one table row per rule: JSON Schema
(broker/schema_registry/json_compat.py) and Protobuf (protobuf_format.py), after the
difference types Confluent documents. Each row is (old, new, the error type expected when
``new`` follows ``old`` at BACKWARD, or None when it may); the reader is the new schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from broker.schema_registry.compat import check
from broker.schema_registry.formats import ReferencedText, parse

OBJ: dict[str, Any] = {"type": "object"}


def closed(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**OBJ, "properties": props, "additionalProperties": False, **extra}


S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}

JSON_ROWS: list[tuple[str, Any, Any, str | None]] = [
    # patternProperties: a partially open content model
    (
        "removed property covered by a pattern",
        closed({"s_a": S}, patternProperties={"^s_": S}),
        closed({}, patternProperties={"^s_": S}),
        None,
    ),
    (
        "removed property covered by a narrower pattern",
        closed({"s_a": N}, patternProperties={"^s_": N}),
        closed({}, patternProperties={"^s_": I}),
        "TYPE_CHANGED",
    ),
    (
        "removed property not covered by the patterns",
        closed({"x": S}, patternProperties={"^s_": S}),
        closed({}, patternProperties={"^s_": S}),
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
    (
        "added property covered by the writer's pattern",
        {**OBJ, "patternProperties": {"^n_": I}},
        {**OBJ, "properties": {"n_a": N}, "patternProperties": {"^n_": I}},
        None,
    ),
    (
        "added property narrower than the writer's pattern",
        {**OBJ, "patternProperties": {"^n_": N}},
        {**OBJ, "properties": {"n_a": I}, "patternProperties": {"^n_": N}},
        "TYPE_CHANGED",
    ),
    (
        "added property outside the writer's patterns, writer open",
        {**OBJ, "patternProperties": {"^n_": N}},
        {**OBJ, "properties": {"x": I}, "patternProperties": {"^n_": N}},
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
    (
        "pattern dropped by a closed reader",
        closed({}, patternProperties={"^n_": N}),
        closed({}),
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
    ("pattern added over an open writer", OBJ, {**OBJ, "patternProperties": {"^n_": N}}, "PROPERTY_ADDED"),
    (
        "pattern widened",
        {**OBJ, "patternProperties": {"^n_": I}},
        {**OBJ, "patternProperties": {"^n_": N}},
        None,
    ),
    # if / then / else
    (
        "then widened",
        {**OBJ, "if": {"required": ["a"]}, "then": {"properties": {"b": I}}},
        {**OBJ, "if": {"required": ["a"]}, "then": {"properties": {"b": N}}},
        None,
    ),
    (
        "else narrowed",
        {**OBJ, "if": {"required": ["a"]}, "else": {"properties": {"b": N}}},
        {**OBJ, "if": {"required": ["a"]}, "else": {"properties": {"b": I}}},
        "TYPE_CHANGED",
    ),
    (
        "condition added",
        OBJ,
        {**OBJ, "if": {"required": ["a"]}, "then": {"required": ["b"]}},
        "CONDITIONAL_ADDED",
    ),
    (
        "condition changed",
        {**OBJ, "if": {"required": ["a"]}, "then": {"required": ["b"]}},
        {**OBJ, "if": {"required": ["c"]}, "then": {"required": ["b"]}},
        "CONDITIONAL_CHANGED",
    ),
    ("condition removed", {**OBJ, "if": {"required": ["a"]}, "then": {"required": ["b"]}}, OBJ, None),
    # not
    ("not added", S, {**S, "not": {"enum": ["x"]}}, "NOT_TYPE_EXTENDED"),
    ("not extended", {**S, "not": {"enum": ["x"]}}, {**S, "not": {"enum": ["x", "y"]}}, "NOT_TYPE_EXTENDED"),
    ("not narrowed", {**S, "not": {"enum": ["x", "y"]}}, {**S, "not": {"enum": ["x"]}}, None),
    ("not removed", {**S, "not": {"enum": ["x"]}}, S, None),
    # $ref into the same document
    (
        "definitions widened through $ref",
        {"definitions": {"n": I}, **OBJ, "properties": {"a": {"$ref": "#/definitions/n"}}},
        {"definitions": {"n": N}, **OBJ, "properties": {"a": {"$ref": "#/definitions/n"}}},
        None,
    ),
    (
        "$defs narrowed through $ref",
        {"$defs": {"n": N}, **OBJ, "properties": {"a": {"$ref": "#/$defs/n"}}},
        {"$defs": {"n": I}, **OBJ, "properties": {"a": {"$ref": "#/$defs/n"}}},
        "TYPE_CHANGED",
    ),
    (
        "$ref target renamed, same schema",
        {"$defs": {"n": N}, **OBJ, "properties": {"a": {"$ref": "#/$defs/n"}}},
        {"$defs": {"num": N}, **OBJ, "properties": {"a": {"$ref": "#/$defs/num"}}},
        None,
    ),
    (
        "recursive schema, a node property narrowed",
        {
            "$defs": {
                "t": {
                    **OBJ,
                    "properties": {"v": N, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                }
            },
            "$ref": "#/$defs/t",
        },
        {
            "$defs": {
                "t": {
                    **OBJ,
                    "properties": {"v": I, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                }
            },
            "$ref": "#/$defs/t",
        },
        "TYPE_CHANGED",
    ),
    (
        "recursive schema unchanged but a new optional type",
        {
            "$defs": {
                "t": {**OBJ, "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}
            },
            "$ref": "#/$defs/t",
        },
        {
            "$defs": {
                "t": {
                    **OBJ,
                    "properties": {"kids": {"type": ["array", "null"], "items": {"$ref": "#/$defs/t"}}},
                }
            },
            "$ref": "#/$defs/t",
        },
        None,
    ),
    # dependencies / dependentRequired / dependentSchemas
    ("dependency array added", OBJ, {**OBJ, "dependencies": {"a": ["b"]}}, "DEPENDENCY_ARRAY_ADDED"),
    (
        "dependency array extended",
        {**OBJ, "dependentRequired": {"a": ["b"]}},
        {**OBJ, "dependentRequired": {"a": ["b", "c"]}},
        "DEPENDENCY_ARRAY_EXTENDED",
    ),
    (
        "dependency array narrowed",
        {**OBJ, "dependencies": {"a": ["b", "c"]}},
        {**OBJ, "dependencies": {"a": ["b"]}},
        None,
    ),
    ("dependency array removed", {**OBJ, "dependentRequired": {"a": ["b"]}}, OBJ, None),
    (
        "dependency on a name the writer always requires",
        {**OBJ, "required": ["b"]},
        {**OBJ, "required": ["b"], "dependentRequired": {"a": ["b"]}},
        None,
    ),
    (
        "dependency schema added",
        OBJ,
        {**OBJ, "dependentSchemas": {"a": {"required": ["b"]}}},
        "DEPENDENCY_SCHEMA_ADDED",
    ),
    (
        "dependency schema narrowed",
        {**OBJ, "dependencies": {"a": {"properties": {"b": N}}}},
        {**OBJ, "dependencies": {"a": {"properties": {"b": I}}}},
        "TYPE_CHANGED",
    ),
    ("dependency schema removed", {**OBJ, "dependentSchemas": {"a": {"required": ["b"]}}}, OBJ, None),
    # enums
    ("enum value added", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, None),
    ("enum value removed", {"enum": ["a", "b"]}, {"enum": ["a"]}, "ENUM_ARRAY_NARROWED"),
    ("enum added where there was none", S, {**S, "enum": ["a"]}, "ENUM_ARRAY_CHANGED"),
    ("enum removed", {**S, "enum": ["a"]}, S, None),
    ("const widened to an enum", {"const": "a"}, {"type": "string", "enum": ["a", "b"]}, None),
    # combined types, string and array keywords
    ("anyOf alternative added", {"anyOf": [S]}, {"anyOf": [S, I]}, None),
    ("oneOf alternative removed", {"oneOf": [S, I]}, {"oneOf": [S]}, "SUM_TYPE_NARROWED"),
    ("allOf part added", {"allOf": [S]}, {"allOf": [S, {"maxLength": 3}]}, "PRODUCT_TYPE_EXTENDED"),
    ("oneOf to anyOf", {"oneOf": [S, I]}, {"anyOf": [S, I]}, None),
    ("anyOf to allOf", {"anyOf": [S, I]}, {"allOf": [S, I]}, "COMBINED_TYPE_CHANGED"),
    ("a plain schema into a union", S, {"oneOf": [S, I]}, None),
    ("pattern added", S, {**S, "pattern": "^a"}, "PATTERN_ADDED"),
    ("pattern changed", {**S, "pattern": "^a"}, {**S, "pattern": "^b"}, "PATTERN_CHANGED"),
    ("multipleOf relaxed", {**I, "multipleOf": 4}, {**I, "multipleOf": 2}, None),
    ("multipleOf expanded", {**I, "multipleOf": 2}, {**I, "multipleOf": 4}, "MULTIPLE_OF_EXPANDED"),
    ("uniqueItems added", {"type": "array"}, {"type": "array", "uniqueItems": True}, "UNIQUE_ITEMS_ADDED"),
]


def _verdict(errors: list[str], expected: str | None) -> None:
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(
    ("old", "new", "expected"), [r[1:] for r in JSON_ROWS], ids=[r[0] for r in JSON_ROWS]
)
def test_json_schema_rule(old: Any, new: Any, expected: str | None) -> None:
    errors = check("BACKWARD", parse("JSON", json.dumps(new), []), [parse("JSON", json.dumps(old), [])])
    _verdict(errors, expected)


def test_json_schema_ref_into_a_referenced_subject() -> None:
    """A $ref naming a reference follows it into that subject's schema (as registered at
    the referenced version), pointer included."""
    main = json.dumps(
        {**OBJ, "properties": {"home": {"$ref": "address.json"}, "n": {"$ref": "defs.json#/$defs/n"}}}
    )
    address = {**OBJ, "properties": {"zip": N}}
    defs = {"$defs": {"n": N}}

    def schema(addr: Any, d: Any) -> Any:
        refs = [ReferencedText("address.json", json.dumps(addr)), ReferencedText("defs.json", json.dumps(d))]
        return parse("JSON", main, refs)

    v1 = schema(address, defs)
    assert (
        check("BACKWARD", schema({**OBJ, "properties": {"zip": {"type": ["number", "string"]}}}, defs), [v1])
        == []
    )
    narrowed = check("BACKWARD", schema({**OBJ, "properties": {"zip": I}}, defs), [v1])
    assert any("#/properties/home/properties/zip: TYPE_CHANGED" in e for e in narrowed), narrowed
    narrowed = check("BACKWARD", schema(address, {"$defs": {"n": I}}), [v1])
    assert any("#/properties/n: TYPE_CHANGED" in e for e in narrowed), narrowed


PROTO = 'syntax = "proto3";\npackage p;\n'
PROTO_ROWS: list[tuple[str, str, str, str | None]] = [
    (
        "enum value added",
        "enum E { A = 0; B = 1; } message M { E e = 1; }",
        "enum E { A = 0; B = 1; C = 2; } message M { E e = 1; }",
        None,
    ),
    (
        "enum value removed",
        "enum E { A = 0; B = 1; } message M { E e = 1; }",
        "enum E { A = 0; } message M { E e = 1; }",
        None,
    ),
    (
        "enum value renumbered",
        "enum E { A = 0; B = 1; } message M { E e = 1; }",
        "enum E { A = 0; B = 2; } message M { E e = 1; }",
        None,
    ),
    (
        "oneof field removed",
        "message M { oneof o { string a = 1; int32 b = 2; } }",
        "message M { oneof o { string a = 1; } }",
        "ONEOF_FIELD_REMOVED",
    ),
    (
        "oneof field moved to the top level",
        "message M { oneof o { string a = 1; int32 b = 2; } }",
        "message M { oneof o { string a = 1; } int32 b = 2; }",
        "ONEOF_FIELD_REMOVED",
    ),
    ("whole oneof removed", "message M { oneof o { string a = 1; int32 b = 2; } }", "message M { }", None),
    (
        "oneof field added",
        "message M { oneof o { string a = 1; } }",
        "message M { oneof o { string a = 1; int32 b = 2; } }",
        None,
    ),
    (
        "one field into a new oneof",
        "message M { string a = 1; }",
        "message M { oneof o { string a = 1; } }",
        None,
    ),
    (
        "two fields into a new oneof",
        "message M { string a = 1; int32 b = 2; }",
        "message M { oneof o { string a = 1; int32 b = 2; } }",
        "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
    ),
    (
        "a field into an existing oneof",
        "message M { oneof o { string a = 1; } int32 b = 2; }",
        "message M { oneof o { string a = 1; int32 b = 2; } }",
        "FIELD_MOVED_TO_EXISTING_ONEOF",
    ),
    ("int32 -> int64", "message M { int32 a = 1; }", "message M { int64 a = 1; }", None),
    ("uint32 -> bool", "message M { uint32 a = 1; }", "message M { bool a = 1; }", None),
    ("sint32 -> sint64", "message M { sint32 a = 1; }", "message M { sint64 a = 1; }", None),
    (
        "sint32 -> int32 (zigzag)",
        "message M { sint32 a = 1; }",
        "message M { int32 a = 1; }",
        "FIELD_SCALAR_KIND_CHANGED",
    ),
    ("fixed32 -> sfixed32", "message M { fixed32 a = 1; }", "message M { sfixed32 a = 1; }", None),
    (
        "fixed64 -> fixed32",
        "message M { fixed64 a = 1; }",
        "message M { fixed32 a = 1; }",
        "FIELD_SCALAR_KIND_CHANGED",
    ),
    ("string -> bytes", "message M { string a = 1; }", "message M { bytes a = 1; }", None),
    (
        "double -> float",
        "message M { double a = 1; }",
        "message M { float a = 1; }",
        "FIELD_SCALAR_KIND_CHANGED",
    ),
    (
        "string -> message",
        "message M { string a = 1; }",
        "message M { N a = 1; } message N { }",
        "FIELD_KIND_CHANGED",
    ),
    (
        "int32 -> enum",
        "message M { int32 a = 1; }",
        "enum E { A = 0; } message M { E a = 1; }",
        "FIELD_KIND_CHANGED",
    ),
    (
        "message type changed",
        "message M { N a = 1; } message N { } message O { }",
        "message M { O a = 1; } message N { } message O { }",
        "FIELD_NAMED_TYPE_CHANGED",
    ),
    ("string made repeated", "message M { string a = 1; }", "message M { repeated string a = 1; }", None),
    (
        "int32 made repeated",
        "message M { int32 a = 1; }",
        "message M { repeated int32 a = 1; }",
        "FIELD_NUMERIC_LABEL_CHANGED",
    ),
    (
        "optional field removed",
        "message M { string a = 1; int32 b = 2; }",
        "message M { string a = 1; }",
        None,
    ),
    ("field renamed", "message M { string a = 1; }", "message M { string b = 1; }", None),
    ("message removed", "message M { } message N { }", "message M { }", "MESSAGE_REMOVED"),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"), [r[1:] for r in PROTO_ROWS], ids=[r[0] for r in PROTO_ROWS]
)
def test_protobuf_rule(old: str, new: str, expected: str | None) -> None:
    errors = check("BACKWARD", parse("PROTOBUF", PROTO + new, []), [parse("PROTOBUF", PROTO + old, [])])
    _verdict(errors, expected)


def test_protobuf_required_fields() -> None:
    v1 = parse("PROTOBUF", 'syntax = "proto2";\nmessage M { optional string a = 1; }\n', [])
    v2 = parse(
        "PROTOBUF", 'syntax = "proto2";\nmessage M { optional string a = 1; required int32 b = 2; }\n', []
    )
    _verdict(check("BACKWARD", v2, [v1]), "REQUIRED_FIELD_ADDED")
    _verdict(check("FORWARD", v1, [v2]), "REQUIRED_FIELD_ADDED")
    _verdict(check("BACKWARD", v1, [v2]), "REQUIRED_FIELD_REMOVED")
