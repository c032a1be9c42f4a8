"""Values in Confluent's wire format (magic byte 0, a 4-byte schema id, the encoded data)
decoded by their schema, for the console's message browser: Avro with ``fastavro``
(schemaless, the writer's schema), JSON Schema as the JSON it is, Protobuf with the
``protobuf`` library after the message-index list (zig-zag varints; an empty list means
the file's first message) and ``json_format``. ``decode`` gives ``{"schema_id",
"schema_type", "decoded"}``, or ``{"schema_id", "error"}`` when the id is unknown or the
bytes do not decode, or None when the value is not in the wire format."""

from __future__ import annotations

import asyncio
import base64
import datetime
import decimal
import io
import json
import uuid
from collections.abc import Callable
from typing import Any, Final

import fastavro
from google.protobuf import descriptor_pool, json_format, message_factory  # type: ignore[import-untyped]

from broker.schema_registry.errors import RegistryError
from broker.schema_registry.formats import AVRO, JSON, PROTOBUF
from broker.schema_registry.lookup import referenced_texts, schema_by_id
from broker.schema_registry.protobuf_format import ProtobufSchema
from broker.schema_registry.state import parse_cached
from broker.schema_registry.store import SchemaStore

HEADER: Final = 5
Decoder = Callable[[bytes], Any]

_decoders: dict[tuple[int, int], tuple[str, Decoder]] = {}


def jsonable(value: Any) -> Any:
    """Avro's decoded values as JSON: bytes as base64, decimals, dates and UUIDs as text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal | datetime.date | datetime.time | uuid.UUID):
        return str(value)
    return value


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated message index")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos  # zig-zag


async def _decoder(store: SchemaStore, schema_id: int) -> tuple[str, Decoder]:
    hit = _decoders.get((id(store), schema_id))
    if hit is not None:
        return hit
    fmt, text, refs = await schema_by_id(store, schema_id)
    deps = await referenced_texts(store, refs)
    decoder: Decoder
    if fmt == AVRO:
        named: dict[str, Any] = {}
        for d in deps:
            fastavro.parse_schema(json.loads(d.text), named_schemas=named)
        parsed = fastavro.parse_schema(json.loads(text), named_schemas=named)

        def decoder(body: bytes) -> Any:
            return jsonable(fastavro.schemaless_reader(io.BytesIO(body), parsed, None))

    elif fmt == JSON:

        def decoder(body: bytes) -> Any:
            return json.loads(body)

    elif fmt == PROTOBUF:
        schema = await asyncio.to_thread(parse_cached, fmt, text, tuple(deps))
        assert isinstance(schema, ProtobufSchema)
        pool = descriptor_pool.DescriptorPool()
        for f in (*schema.deps, schema.file):
            pool.Add(f)
        file = schema.file

        def decoder(body: bytes) -> Any:
            count, pos = _varint(body, 0)
            indexes = [0]
            if count:
                indexes = []
                for _ in range(count):
                    i, pos = _varint(body, pos)
                    indexes.append(i)
            msgs = file.message_type
            names = []
            for i in indexes:
                names.append(msgs[i].name)
                msgs = msgs[i].nested_type
            full = ".".join(([file.package] if file.package else []) + names)
            cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
            msg = cls()
            msg.ParseFromString(body[pos:])
            return json_format.MessageToDict(msg)

    else:
        raise ValueError(f"unknown schema type {fmt}")
    _decoders[(id(store), schema_id)] = (fmt, decoder)
    return fmt, decoder


async def decode(store: SchemaStore | None, value: bytes | None) -> dict[str, Any] | None:
    if store is None or value is None or len(value) < HEADER or value[0] != 0:
        return None
    schema_id = int.from_bytes(value[1:HEADER], "big")
    try:
        fmt, decoder = await _decoder(store, schema_id)
    except RegistryError as exc:
        return {"schema_id": schema_id, "error": exc.message}
    except (ValueError, TypeError, KeyError) as exc:
        return {"schema_id": schema_id, "error": f"cannot use the schema: {exc}"}
    try:
        return {"schema_id": schema_id, "schema_type": fmt, "decoded": decoder(value[HEADER:])}
    except Exception as exc:  # any decoder failure is the record's, shown next to it
        return {"schema_id": schema_id, "schema_type": fmt, "error": f"does not decode: {exc}"}
