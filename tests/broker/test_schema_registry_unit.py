"""The schema registry's pure parts: formats, compatibility rules, the _schemas record
layout and the state rebuilt from it, the write operations."""

from __future__ import annotations

import json

import pytest

from broker.schema_registry import operations as ops
from broker.schema_registry import records as rec
from broker.schema_registry.compat import check
from broker.schema_registry.errors import RegistryError
from broker.schema_registry.formats import parse
from broker.schema_registry.records import Key, Reference, SchemaVersion
from broker.schema_registry.state import RegistryState


def avro(fields: list[dict[str, object]]) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": fields})


def js(doc: dict[str, object]) -> str:
    return json.dumps(doc)


def test_avro_levels() -> None:
    v1 = parse("AVRO", avro([{"name": "a", "type": "int"}]), [])
    added_default = parse(
        "AVRO", avro([{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}]), []
    )
    added_plain = parse("AVRO", avro([{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]), [])
    assert check("BACKWARD", added_default, [v1]) == []
    assert check("BACKWARD", added_plain, [v1]) != []
    assert check("FORWARD", added_plain, [v1]) == []
    assert check("FULL", added_default, [v1]) == []
    assert check("FULL", added_plain, [v1]) != []
    assert check("NONE", added_plain, [v1]) == []
    # Transitive: against every version, not only the latest.
    v2 = parse("AVRO", avro([]), [])
    v3 = parse("AVRO", avro([{"name": "a", "type": "string", "default": ""}]), [])
    assert check("BACKWARD", v3, [v1, v2]) == []
    assert check("BACKWARD_TRANSITIVE", v3, [v1, v2]) != []


def test_invalid_schemas_are_42201() -> None:
    for st, text in [
        ("AVRO", '{"type": "nope"}'),
        ("JSON", '{"type": 5}'),
        ("PROTOBUF", "message {"),
        ("AVRO", "{x"),
    ]:
        with pytest.raises(RegistryError) as info:
            parse(st, text, [])
        assert info.value.code == 42201


def test_json_schema_rules() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    v1 = parse("JSON", js(closed), [])
    wider = parse(
        "JSON", js({**closed, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}), []
    )
    assert v1.reads(v1) == []
    assert wider.reads(v1) == []  # v1 never writes b
    assert any("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in m for m in v1.reads(wider))
    open_ = parse("JSON", js({"type": "object", "properties": {"a": {"type": "string"}}}), [])
    assert any("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in m for m in wider.reads(open_))
    req = parse("JSON", js({**closed, "required": ["a"]}), [])
    assert any("REQUIRED_ATTRIBUTE_ADDED" in m for m in req.reads(v1))
    num = parse("JSON", js({"type": "number"}), [])
    integer = parse("JSON", js({"type": "integer"}), [])
    assert num.reads(integer) == [] and integer.reads(num) != []
    short = parse("JSON", js({"type": "string", "maxLength": 5}), [])
    long = parse("JSON", js({"type": "string", "maxLength": 10}), [])
    assert long.reads(short) == [] and any("MAX_LENGTH_DECREASED" in m for m in short.reads(long))
    e1 = parse("JSON", js({"enum": ["x", "y"]}), [])
    e2 = parse("JSON", js({"enum": ["x"]}), [])
    assert e1.reads(e2) == [] and e2.reads(e1) != []


def test_protobuf_rules_and_forms() -> None:
    base = 'syntax = "proto3";\npackage p;\nmessage M { int32 a = 1; string s = 2; }\n'
    m = parse("PROTOBUF", base, [])
    widened = parse("PROTOBUF", base.replace("int32 a", "int64 a"), [])
    assert widened.reads(m) == []  # one wire-compatible group
    changed = parse("PROTOBUF", base.replace("int32 a", "string a"), [])
    assert any("FIELD_SCALAR_KIND_CHANGED" in x for x in changed.reads(m))
    moved = parse("PROTOBUF", base.replace("package p", "package q"), [])
    assert any("PACKAGE_CHANGED" in x for x in moved.reads(m))
    gone = parse("PROTOBUF", 'syntax = "proto3";\npackage p;\nmessage N { int32 a = 1; }\n', [])
    assert any("MESSAGE_REMOVED" in x for x in gone.reads(m))
    # A base64 descriptor and its text are one schema.
    from broker.schema_registry.protobuf_format import ProtobufSchema

    assert isinstance(m, ProtobufSchema)
    assert parse("PROTOBUF", m.serialized(), []).canonical == m.canonical
    # A descriptor rendered as .proto text compiles back to the same schema.
    from broker.schema_registry.protobuf_format import text_form

    rich = (
        'syntax = "proto3";\npackage s.v1;\nimport "google/protobuf/timestamp.proto";\n'
        "message O { string id = 1; repeated int32 q = 2; map<string, int64> c = 3;\n"
        "  oneof pay { string card = 4; string iban = 5; } optional bool gift = 6;\n"
        "  google.protobuf.Timestamp at = 7; L line = 8; message L { K k = 1; } enum K { A = 0; } }\n"
    )
    parsed = parse("PROTOBUF", rich, [])
    assert isinstance(parsed, ProtobufSchema)
    text = text_form(parsed.serialized())
    assert "map<string, int64> c = 3;" in text and "oneof pay {" in text
    assert parse("PROTOBUF", text, []).canonical == parsed.canonical
    assert text_form(base) == base


def test_record_layout_is_confluents() -> None:
    v = SchemaVersion("orders-value", 2, 7, "JSON", "{}", [Reference("r", "other", 1)])
    assert rec.encode_key(Key(rec.SCHEMA, "orders-value", 2)) == (
        b'{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}'
    )
    assert rec.encode_key(Key(rec.CONFIG, None)) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert json.loads(rec.encode_schema(v)) == {
        "subject": "orders-value",
        "version": 2,
        "id": 7,
        "schemaType": "JSON",
        "references": [{"name": "r", "subject": "other", "version": 1}],
        "schema": "{}",
        "deleted": False,
    }
    assert rec.decode_schema(rec.encode_schema(v)) == v
    assert "schemaType" not in json.loads(rec.encode_schema(SchemaVersion("s", 1, 1, "AVRO", '"int"')))


def apply_all(state: RegistryState, records: list[ops.Record]) -> None:
    for k, v in records:
        state.apply(k, v)


def test_operations_over_the_state() -> None:
    st = RegistryState()
    s1 = avro([{"name": "a", "type": "int"}])
    sid, out = ops.register(st, "a-value", None, s1, [])
    apply_all(st, out)
    assert sid == 1 and st.version("a-value", "latest").id == 1
    # Same schema, same subject: the same id, nothing written.
    assert ops.register(st, "a-value", "AVRO", s1, []) == (1, [])
    # Same schema in another subject: the same id (one schema, one id).
    sid2, out = ops.register(st, "b-value", None, json.dumps(json.loads(s1)), [])
    apply_all(st, out)
    assert sid2 == 1
    with pytest.raises(RegistryError) as info:
        ops.register(st, "a-value", None, avro([{"name": "z", "type": "string"}]), [])
    assert info.value.status == 409
    _, out = ops.set_config(st, "a-value", "none")
    apply_all(st, out)
    sid3, out = ops.register(st, "a-value", None, avro([{"name": "z", "type": "string"}]), [])
    apply_all(st, out)
    assert sid3 == 2 and [v.version for v in st.versions("a-value")] == [1, 2]
    # Soft delete, then permanent; a replay of the live records gives the same state.
    _, out = ops.delete_subject(st, "a-value", permanent=False)
    apply_all(st, out)
    assert st.subjects() == ["b-value"] and st.subjects(deleted=True) == ["a-value", "b-value"]
    _, out = ops.delete_subject(st, "a-value", permanent=True)
    apply_all(st, out)
    assert st.subjects(deleted=True) == ["b-value"]
    again = RegistryState()
    apply_all(again, list(st.live_records()))
    assert again.subjects() == st.subjects() and again.compatibility("a-value") == "BACKWARD"
    with pytest.raises(RegistryError) as info:
        st.schema_by_id(2)
    assert info.value.code == 40403
    # A foreign record is skipped, not fatal.
    st.apply(b"not json", b"{}")
