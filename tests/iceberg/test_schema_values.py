"""value_schema_id_prefix decoding: Confluent's wire format, Avro via fastavro and JSON
Schema values, Avro encoded by fastavro. (The registry's own serializers are exercised once
the schema registry of issue 37 is wired in as the SchemaSource.)"""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest

from spark.iceberg.schema_values import DictSchemaSource, InvalidRecordValue, ValueDecoder

AVRO_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
AVRO_V2 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}],
}


def _avro(schema_id: int, schema: dict[str, object], value: dict[str, object]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


def test_avro_and_json_values_decode_by_their_schema_id() -> None:
    source = DictSchemaSource(
        {
            1: ("AVRO", json.dumps(AVRO_V1)),
            2: ("AVRO", json.dumps(AVRO_V2)),
            3: ("JSON", json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}})),
        }
    )
    d = ValueDecoder(source)
    assert d.decode(_avro(1, AVRO_V1, {"id": 7})) == (1, {"id": 7})
    assert d.decode(_avro(2, AVRO_V2, {"id": 8, "note": "x"})) == (2, {"id": 8, "note": "x"})
    assert d.decode(b"\x00" + struct.pack(">I", 3) + b'{"n": 5}') == (3, {"n": 5})


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (None, "wire format"),
        (b"\x01\x00\x00\x00\x01{}", "wire format"),
        (b"\x00\x00\x00\x00\x09{}", "not registered"),
        (b"\x00\x00\x00\x00\x01\xff", "does not decode"),
    ],
)
def test_invalid_values_are_named(value: bytes | None, says: str) -> None:
    d = ValueDecoder(DictSchemaSource({1: ("AVRO", json.dumps(AVRO_V1))}))
    with pytest.raises(InvalidRecordValue, match=says):
        d.decode(value)


ADDRESS = {"type": "record", "name": "com.x.Address", "fields": [{"name": "city", "type": "string"}]}
WITH_REF = {
    "type": "record",
    "name": "Shipment",
    "fields": [{"name": "id", "type": "long"}, {"name": "to", "type": "com.x.Address"}],
}


def test_schemas_with_references_decode_into_nested_columns() -> None:
    """A schema that imports another (the registry's references: name and text): Avro's
    named type and JSON Schema's ``$ref`` by the reference's name become nested structs."""
    from spark.iceberg.schema_values import TypedValues

    json_ref = {"type": "object", "properties": {"n": {"type": "integer"}, "at": {"$ref": "place.json"}}}
    place = {"type": "object", "properties": {"city": {"type": "string"}}}
    source = DictSchemaSource(
        {1: ("AVRO", json.dumps(WITH_REF)), 2: ("JSON", json.dumps(json_ref))},
        {1: [("com.x.Address", json.dumps(ADDRESS))], 2: [("place.json", json.dumps(place))]},
    )
    named: dict[str, object] = {}
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    buf = io.BytesIO()
    writer = fastavro.parse_schema(WITH_REF, named_schemas=named)
    fastavro.schemaless_writer(buf, writer, {"id": 1, "to": {"city": "Oslo"}})
    values = TypedValues(ValueDecoder(source))
    ids, decoded, reasons = values.decode(
        [
            b"\x00" + struct.pack(">I", 1) + buf.getvalue(),
            b"\x00" + struct.pack(">I", 2) + b'{"n": 3, "at": {"city": "Rome"}}',
        ]
    )
    assert ids == [1, 2] and reasons == [None, None]
    assert decoded == [{"id": 1, "to": {"city": "Oslo"}}, {"n": 3, "at": {"city": "Rome"}}]
    assert str(values.value_type(1)) == "struct<id: int64, to: struct<city: string>>"
    assert str(values.value_type(2)) == "struct<n: int64, at: struct<city: string>>"


def test_protobuf_values_are_invalid_with_a_reason() -> None:
    d = ValueDecoder(DictSchemaSource({4: ("PROTOBUF", 'syntax = "proto3"; message M { int64 id = 1; }')}))
    with pytest.raises(InvalidRecordValue, match="Protobuf values are not decoded into columns"):
        d.decode(b"\x00\x00\x00\x00\x04\x00\x08\x01")
