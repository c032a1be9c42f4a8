"""value_schema_id_prefix mode: values in Confluent's wire format decoded by their schema.

Wire format: magic byte 0, the schema id as 4 bytes big-endian, then the encoded value
(Avro binary for an Avro schema; JSON text for a JSON Schema; message indexes and the
message for Protobuf, ``spark.iceberg.protobuf_values``). The schema comes from a
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
import pyarrow as pa

from spark.iceberg.protobuf_values import ProtobufSchema, ProtoValue

MAGIC: Final = 0
AVRO: Final = "AVRO"
JSON: Final = "JSON"
PROTOBUF: Final = "PROTOBUF"


class InvalidRecordValue(ValueError):
    """A value that is not in the wire format, names an unknown schema or does not decode."""


class SchemaSource(Protocol):
    def schema_by_id(self, schema_id: int) -> tuple[str, str]:
        """(format: "AVRO" | "JSON" | "PROTOBUF", schema text); KeyError for an unknown id."""
        ...

    def references(self, schema_id: int) -> list[tuple[str, str]]:
        """The schemas ``schema_id`` references, as (the name it imports them by, text),
        their own references first; empty for most schemas."""
        ...


class DictSchemaSource:
    """A fixed map of schemas (tests; a registry snapshot), with their references."""

    def __init__(
        self,
        schemas: Mapping[int, tuple[str, str]],
        references: Mapping[int, list[tuple[str, str]]] | None = None,
    ) -> None:
        self.schemas = dict(schemas)
        self.refs = dict(references or {})

    def schema_by_id(self, schema_id: int) -> tuple[str, str]:
        return self.schemas[schema_id]

    def references(self, schema_id: int) -> list[tuple[str, str]]:
        return self.refs.get(schema_id, [])


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
            if fmt not in (AVRO, JSON, PROTOBUF):
                raise InvalidRecordValue(f"schema id {schema_id}: format {fmt} is not supported")
            refs = self.source.references(schema_id)
            try:
                if fmt == AVRO:
                    # referenced named types parsed first, then inlined: the Arrow type and
                    # the reader both see one self-contained schema
                    named: dict[str, Any] = {}
                    for _, ref in refs:
                        fastavro.parse_schema(json.loads(ref), named_schemas=named)
                    got = (fmt, fastavro.parse_schema(json.loads(text), named_schemas=named, expand=True))
                elif fmt == PROTOBUF:
                    got = (fmt, ProtobufSchema(text, refs))
                else:
                    got = (fmt, _inline_json_refs(json.loads(text), {n: json.loads(t) for n, t in refs}))
            except (ValueError, TypeError, KeyError) as e:  # (ProtobufValueError is a ValueError)
                raise InvalidRecordValue(f"schema id {schema_id}: cannot use the schema: {e}") from None
            self._parsed[schema_id] = got
        return got

    def decode(self, value: bytes | None) -> tuple[int, Any]:
        """(schema id, decoded value: a dict for records, a ``ProtoValue`` for Protobuf)."""
        schema_id, body = split_wire(value)
        fmt, schema = self.schema(schema_id)
        try:
            if fmt == PROTOBUF:
                return schema_id, schema.decode(body)
            if fmt == AVRO:
                return schema_id, fastavro.schemaless_reader(io.BytesIO(body), schema, None)
            return schema_id, json.loads(body)
        except Exception as e:
            raise InvalidRecordValue(f"value does not decode with schema id {schema_id}: {e}") from None


def _inline_json_refs(schema: Any, refs: Mapping[str, Any], depth: int = 0) -> Any:
    """A JSON Schema with each ``{"$ref": <a reference's name>}`` replaced by the referenced
    schema (the registry's references are imported by name); other ``$ref``s stay (their
    column is JSON text)."""
    if depth > 32:
        raise ValueError("references nest deeper than 32")
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref in refs:
            return _inline_json_refs(refs[ref], refs, depth + 1)
        return {k: _inline_json_refs(v, refs, depth) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_inline_json_refs(v, refs, depth) for v in schema]
    return schema


# --- typed columns ----------------------------------------------------------------------------

_AVRO_PRIMITIVES: Final[dict[str, pa.DataType]] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_JSON_PRIMITIVES: Final[dict[str, pa.DataType]] = {
    "boolean": pa.bool_(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "string": pa.string(),
}


def avro_arrow_type(schema: Any) -> pa.DataType:
    """The Arrow type of a (parsed) Avro schema: records as structs, ``[null, T]`` as a
    nullable T, arrays as lists, enums as strings; other unions and maps as JSON text."""
    if isinstance(schema, str):
        return _AVRO_PRIMITIVES.get(schema, pa.string())
    if isinstance(schema, list):
        rest = [s for s in schema if s != "null"]
        return avro_arrow_type(rest[0]) if len(rest) == 1 else pa.string()
    kind = schema.get("type")
    if kind == "record":
        return pa.struct([pa.field(f["name"], avro_arrow_type(f["type"])) for f in schema["fields"]])
    if kind == "array":
        return pa.list_(avro_arrow_type(schema["items"]))
    if kind == "enum":
        return pa.string()
    if isinstance(kind, (str, list, dict)) and kind not in ("map", "fixed"):
        return avro_arrow_type(kind)
    return pa.binary() if kind == "fixed" else pa.string()


def json_arrow_type(schema: Any) -> pa.DataType:
    """The Arrow type of a JSON Schema: objects with properties as structs, arrays as lists,
    ``["T", "null"]`` as a nullable T; anything else as JSON text."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    if kind == "object" and isinstance(schema.get("properties"), dict):
        return pa.struct([pa.field(n, json_arrow_type(s)) for n, s in schema["properties"].items()])
    if kind == "array" and isinstance(schema.get("items"), dict):
        return pa.list_(json_arrow_type(schema["items"]))
    return _JSON_PRIMITIVES.get(str(kind), pa.string())


def _conform(value: Any, typ: pa.DataType) -> Any:
    """A decoded value shaped for ``typ`` (JSON text where the type says so)."""
    if value is None:
        return None
    if pa.types.is_struct(typ):
        if not isinstance(value, dict):
            return None
        return {
            typ.field(i).name: _conform(value.get(typ.field(i).name), typ.field(i).type)
            for i in range(typ.num_fields)
        }
    if pa.types.is_list(typ):
        return [_conform(v, typ.value_type) for v in value] if isinstance(value, list) else None
    if pa.types.is_string(typ) and not isinstance(value, str):
        return json.dumps(value, default=str)
    return value


class TypedValues:
    """Values of one pass, decoded into a struct column per schema id."""

    def __init__(self, decoder: ValueDecoder) -> None:
        self.decoder = decoder
        # the column type of every (schema id, Protobuf message indexes) decoded so far: a
        # Protobuf schema's file may hold several messages, each a type of its own
        self.types: dict[tuple[int, tuple[int, ...]], pa.DataType] = {}

    def value_type(self, schema_id: int) -> pa.DataType:
        fmt, schema = self.decoder.schema(schema_id)
        if fmt == PROTOBUF:  # the file's first message (values name theirs: ``types``)
            return schema.message((0,))[1]
        typ = avro_arrow_type(schema) if fmt == AVRO else json_arrow_type(schema)
        return typ if pa.types.is_struct(typ) else pa.struct([pa.field("value", typ)])

    def decode(self, values: list[bytes | None]) -> tuple[list[int | None], list[Any], list[str | None]]:
        """(schema id or None when invalid, decoded value, why it is invalid) per value."""
        ids: list[int | None] = []
        out: list[Any] = []
        reasons: list[str | None] = []
        for v in values:
            try:
                schema_id, decoded = self.decoder.decode(v)
            except InvalidRecordValue as e:
                ids.append(None)
                out.append(None)
                reasons.append(str(e))
                continue
            reasons.append(None)
            ids.append(schema_id)
            if isinstance(decoded, ProtoValue):  # shaped for its type already
                self.types.setdefault((schema_id, decoded.indexes), decoded.type)
                out.append(decoded.row)
                continue
            typ = self.value_type(schema_id)
            self.types.setdefault((schema_id, ()), typ)
            if not isinstance(decoded, dict) or (typ.names == ["value"] and "value" not in decoded):
                decoded = {"value": decoded}
            out.append(_conform(decoded, typ))
        return ids, out, reasons


def merge_struct(a: pa.DataType | None, b: pa.DataType) -> pa.DataType:
    """``a`` with the fields of ``b`` it lacks added (a compatible evolution adds fields;
    a field both have keeps ``a``'s type)."""
    if a is None:
        return b
    fields = [a.field(i) for i in range(a.num_fields)]
    for i in range(b.num_fields):
        f = b.field(i)
        j = a.get_field_index(f.name)
        if j < 0:
            fields.append(f)
        elif pa.types.is_struct(f.type) and pa.types.is_struct(fields[j].type):
            fields[j] = pa.field(f.name, merge_struct(fields[j].type, f.type))
    return pa.struct(fields)
