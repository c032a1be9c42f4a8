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
