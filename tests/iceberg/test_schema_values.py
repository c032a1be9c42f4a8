"""value_schema_id_prefix decoding: Confluent's wire format, Avro via fastavro and JSON
Schema values, Avro encoded by fastavro; Protobuf values into typed columns (the registry's
own serializers: tests/iceberg/test_iceberg_schema_mode.py)."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from spark.iceberg.schema_values import DictSchemaSource, InvalidRecordValue, TypedValues, ValueDecoder

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


SHOP_PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
enum Kind { KIND_UNKNOWN = 0; BOOK = 1; FOOD = 2; }
message Order {
  int64 id = 1;
  string name = 2;
  repeated string tags = 3;
  map<string, int32> counts = 4;
  Kind kind = 5;
  Line first = 6;
  repeated Line lines = 7;
  oneof pay { string card = 8; int64 voucher = 9; }
  optional int32 priority = 10;
  google.protobuf.Timestamp at = 11;
  google.protobuf.Int64Value stock = 12;
  uint64 big = 13;
  Node tree = 14;
  google.protobuf.Struct extra = 15;
  bytes blob = 16;
  message Line { string sku = 1; double price = 2; }
}
message Node { string name = 1; repeated Node children = 2; }
"""


def _compiled(text: str) -> tuple[str, Any]:
    from tests.iceberg.icelib import compiled_proto

    schema, pool = compiled_proto(text)
    return schema.serialized(), pool


def test_protobuf_values_become_typed_columns() -> None:
    """Messages as structs, repeated as lists, maps, enums as names, oneof members and
    optional fields null when unset, Timestamp as a timestamp, a wrapper as its value,
    uint64 as decimal(20,0), a recursive message and Struct as JSON text; the message
    indexes choose the message (count 0: the first; [1]: the second top-level one)."""
    import datetime
    import decimal

    from google.protobuf import message_factory  # type: ignore[import-untyped]

    text, pool = _compiled(SHOP_PROTO)
    order_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    node_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Node"))
    o = order_cls(id=7, name="a", tags=["x", "y"], kind=1, card="visa", big=2**64 - 1, blob=b"\x01")
    o.counts["b"] = 2
    o.counts["a"] = 1
    o.first.sku = "s1"
    o.lines.add(sku="s2", price=1.5)
    o.at.seconds, o.at.nanos = 1_700_000_000, 123_456_000
    o.stock.value = 5
    o.tree.name = "root"
    o.tree.children.add(name="leaf")
    o.extra.update({"k": "v"})
    bare = order_cls(id=8)
    node = node_cls(name="n")
    values = TypedValues(ValueDecoder(DictSchemaSource({5: ("PROTOBUF", text)})))
    wire = b"\x00" + struct.pack(">I", 5)
    ids, decoded, reasons = values.decode(
        [
            wire + b"\x00" + o.SerializeToString(),
            wire + b"\x00" + bare.SerializeToString(),
            wire + b"\x02\x02" + node.SerializeToString(),  # indexes [1]: zig-zag 1 count, 1
            wire + b"\x02\x08" + b"",  # index [4]: no such message
        ]
    )
    assert ids == [5, 5, 5, None] and reasons[:3] == [None, None, None]
    assert "names no message" in str(reasons[3])
    first = decoded[0]
    assert first["id"] == 7 and first["tags"] == ["x", "y"] and first["counts"] == [("a", 1), ("b", 2)]
    assert first["kind"] == "BOOK" and first["first"] == {"sku": "s1", "price": 0.0}
    assert first["lines"] == [{"sku": "s2", "price": 1.5}]
    assert (first["card"], first["voucher"], first["priority"]) == ("visa", None, None)
    assert first["at"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=datetime.UTC)
    assert first["stock"] == 5 and first["big"] == decimal.Decimal(2**64 - 1)
    assert json.loads(first["tree"]["children"][0]) == {"name": "leaf"}  # Node in Node: JSON text
    assert json.loads(first["extra"]) == {"k": "v"} and first["blob"] == b"\x01"
    assert decoded[1]["first"] is None and decoded[1]["at"] is None and decoded[1]["stock"] is None
    assert decoded[1]["name"] == "" and decoded[1]["kind"] == "KIND_UNKNOWN"  # proto3 defaults
    assert decoded[2] == {"name": "n", "children": []}
    order_type, node_type = values.types[(5, (0,))], values.types[(5, (1,))]
    assert str(node_type) == "struct<name: string, children: list<item: string>>"
    assert str(order_type.field("counts").type) == "map<string, int32>"
    assert order_type.field("big").type == pa.decimal128(20, 0)
    assert str(order_type.field("at").type) == "timestamp[us, tz=UTC]"
    # every row converts into the column type (what the translator builds)
    arr = pa.array(decoded[:2], type=order_type)
    assert arr.field("lines").to_pylist()[0] == [{"sku": "s2", "price": 1.5}]


def test_protobuf_schema_as_proto_text_is_refused_per_value() -> None:
    d = ValueDecoder(DictSchemaSource({4: ("PROTOBUF", 'syntax = "proto3"; message M { int64 id = 1; }')}))
    with pytest.raises(InvalidRecordValue, match="not a base64 FileDescriptorProto"):
        d.decode(b"\x00\x00\x00\x00\x04\x00\x08\x01")
