"""value_schema_id_prefix mode: values in Confluent's wire format decoded by their schema.

Wire format: magic byte 0, the schema id as 4 bytes big-endian, then the encoded value
(Avro binary for an Avro schema; JSON text for a JSON Schema). The schema comes from a
``SchemaSource`` (schema id -> (format, schema text)); the broker's schema registry
(issue 37) is one, a dict is another (tests). Decoding failures raise
``InvalidRecordValue`` so the translator can apply ``iceberg.invalid.record.action``.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from typing import Any, Final, Protocol

import fastavro

MAGIC: Final = 0
AVRO: Final = "AVRO"
JSON: Final = "JSON"


class InvalidRecordValue(ValueError):
    """A value that is not in the wire format, names an unknown schema or does not decode."""


class SchemaSource(Protocol):
    def schema_by_id(self, schema_id: int) -> tuple[str, str]:
        """(format: "AVRO" | "JSON", schema text); KeyError for an unknown id."""
        ...


class DictSchemaSource:
    """A fixed map of schemas (tests; a registry snapshot)."""

    def __init__(self, schemas: Mapping[int, tuple[str, str]]) -> None:
        self.schemas = dict(schemas)

    def schema_by_id(self, schema_id: int) -> tuple[str, str]:
        return self.schemas[schema_id]


def split_wire(value: bytes | None) -> tuple[int, bytes]:
    if value is None or len(value) < 5 or value[0] != MAGIC:
        raise InvalidRecordValue("value is not in the schema registry wire format (magic byte 0, 4-byte id)")
    (schema_id,) = struct.unpack(">I", value[1:5])
    return schema_id, value[5:]


class ValueDecoder:
    """Decodes values by schema id, parsing each schema once."""

    def __init__(self, source: SchemaSource) -> None:
        self.source = source
        self._parsed: dict[int, tuple[str, Any]] = {}

    def schema(self, schema_id: int) -> tuple[str, Any]:
        got = self._parsed.get(schema_id)
        if got is None:
            try:
                fmt, text = self.source.schema_by_id(schema_id)
            except KeyError:
                raise InvalidRecordValue(f"schema id {schema_id} is not registered") from None
            fmt = fmt.upper()
            if fmt == AVRO:
                got = (fmt, fastavro.parse_schema(json.loads(text)))
            elif fmt == JSON:
                got = (fmt, json.loads(text))
            else:
                raise InvalidRecordValue(f"schema id {schema_id}: format {fmt} is not supported")
            self._parsed[schema_id] = got
        return got

    def decode(self, value: bytes | None) -> tuple[int, Any]:
        """(schema id, decoded value: a dict for records)."""
        schema_id, body = split_wire(value)
        fmt, schema = self.schema(schema_id)
        try:
            if fmt == AVRO:
                return schema_id, fastavro.schemaless_reader(io.BytesIO(body), schema, None)
            return schema_id, json.loads(body)
        except Exception as e:
            raise InvalidRecordValue(f"value does not decode with schema id {schema_id}: {e}") from None
