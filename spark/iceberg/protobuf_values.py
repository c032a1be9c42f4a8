"""value_schema_id_prefix mode, Protobuf: values decoded by their registered schema into
typed columns.

Wire format (Confluent's): magic byte 0, the schema id (4 bytes big-endian), the message
indexes (zig-zag varints: a count, then the path of the message in the schema's file, top
level first; a count of 0 alone means the file's first message), then the message. The
schema is a ``FileDescriptorProto``, base64, as confluent-kafka's ``ProtobufSerializer``
registers it (the broker's registry source compiles ``.proto`` text into one,
``api.iceberg_service.RegistrySchemaSource``); its references are the files it imports,
the same way. The well-known types (``google/protobuf/*.proto``, never sent as
references) are known here.

Columns (a message is a struct column; the field names are the ``.proto`` names):

- scalars: ``int32``/``sint32``/``sfixed32`` int, ``int64``/``sint64``/``sfixed64`` long,
  ``uint32``/``fixed32`` long, ``uint64``/``fixed64`` decimal(20, 0) (Iceberg has no
  unsigned types), ``float``, ``double``, ``bool``, ``string``, ``bytes`` binary;
- enums: the value's name as a string (a number the schema does not name: the number);
- ``repeated`` fields: lists; ``map`` fields: maps;
- fields with presence (messages, ``optional``, proto2 fields, members of a ``oneof``)
  null when not set; proto3 scalars without presence read as their default, as in the
  message;
- ``google.protobuf.Timestamp``: timestamptz (microseconds); the wrappers
  (``Int64Value`` ...): their nullable value; ``Struct``/``Value``/``ListValue`` and a
  message nested in itself (a recursive type): JSON text.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from google.protobuf import (  # type: ignore[import-untyped]
    any_pb2,
    api_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    json_format,
    message_factory,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

# dependencies first: the pool refuses a file before what it imports
_WELL_KNOWN: Final = tuple(
    m.DESCRIPTOR
    for m in (
        any_pb2,
        source_context_pb2,
        type_pb2,
        api_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )
)
_WELL_KNOWN_NAMES: Final = frozenset(d.name for d in _WELL_KNOWN)
_UNSIGNED_64: Final = pa.decimal128(20, 0)
_F = FieldDescriptor
_SCALARS: Final[dict[int, pa.DataType]] = {
    _F.TYPE_DOUBLE: pa.float64(),
    _F.TYPE_FLOAT: pa.float32(),
    _F.TYPE_INT64: pa.int64(),
    _F.TYPE_SINT64: pa.int64(),
    _F.TYPE_SFIXED64: pa.int64(),
    _F.TYPE_UINT64: _UNSIGNED_64,
    _F.TYPE_FIXED64: _UNSIGNED_64,
    _F.TYPE_INT32: pa.int32(),
    _F.TYPE_SINT32: pa.int32(),
    _F.TYPE_SFIXED32: pa.int32(),
    _F.TYPE_UINT32: pa.int64(),
    _F.TYPE_FIXED32: pa.int64(),
    _F.TYPE_BOOL: pa.bool_(),
    _F.TYPE_STRING: pa.string(),
    _F.TYPE_BYTES: pa.binary(),
}
_WRAPPERS: Final = frozenset(
    f"google.protobuf.{n}Value"
    for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
_AS_JSON: Final = frozenset(("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"))
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

Convert = Callable[[Any], Any]


class ProtobufValueError(ValueError):
    """The value or the schema cannot be used (the caller makes it an invalid record)."""


@dataclass(frozen=True, slots=True)
class ProtoValue:
    """One decoded value: the message's path in its file, its column type and its row."""

    indexes: tuple[int, ...]
    type: pa.DataType
    row: dict[str, Any]


def _descriptor_proto(text: str, what: str) -> descriptor_pb2.FileDescriptorProto:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        file = descriptor_pb2.FileDescriptorProto()
        file.ParseFromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        raise ProtobufValueError(
            f"{what} is not a base64 FileDescriptorProto (.proto text is compiled by the broker's "
            "schema registry source, not here)"
        ) from None
    return file


def _zigzag_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtobufValueError("truncated message indexes")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


class ProtobufSchema:
    """One registered Protobuf schema: its file (and the files it imports) in a descriptor
    pool of its own; message classes, column types and converters made once per message."""

    def __init__(self, text: str, references: Sequence[tuple[str, str]]) -> None:
        self.pool = descriptor_pool.DescriptorPool()
        for d in _WELL_KNOWN:
            self.pool.AddSerializedFile(d.serialized_pb)
        try:
            for name, ref in references:
                dep = _descriptor_proto(ref, f"reference {name}")
                if not dep.name:
                    dep.name = name
                if dep.name not in _WELL_KNOWN_NAMES:
                    self.pool.Add(dep)
            self.file = _descriptor_proto(text, "the schema")
            if not self.file.message_type:
                raise ProtobufValueError("the schema declares no message")
            if not self.file.name:
                self.file.name = "schema.proto"
            self.pool.Add(self.file)
        except TypeError as e:  # the pool's word for a file it cannot link (a missing import)
            raise ProtobufValueError(f"cannot load the schema: {e}") from None
        self._messages: dict[tuple[int, ...], tuple[Any, pa.DataType, Convert]] = {}

    def message(self, indexes: tuple[int, ...]) -> tuple[Any, pa.DataType, Convert]:
        """(message class, column type, message -> row) of the message at ``indexes``."""
        got = self._messages.get(indexes)
        if got is None:
            msgs = self.file.message_type
            names = []
            for i in indexes:
                if not 0 <= i < len(msgs):
                    raise ProtobufValueError(f"message index {list(indexes)} names no message of the schema")
                names.append(msgs[i].name)
                msgs = msgs[i].nested_type
            package = [self.file.package] if self.file.package else []
            desc = self.pool.FindMessageTypeByName(".".join(package + names))
            typ, convert = _message(desc, ())
            if not pa.types.is_struct(typ):  # a wrapper or Struct as the value: one column
                typ, inner = pa.struct([pa.field("value", typ)]), convert
                convert = lambda m: {"value": inner(m)}  # noqa: E731
            got = (message_factory.GetMessageClass(desc), typ, convert)
            self._messages[indexes] = got
        return got

    def decode(self, body: bytes) -> ProtoValue:
        count, pos = _zigzag_varint(body, 0)
        indexes: list[int] = []
        for _ in range(count):
            i, pos = _zigzag_varint(body, pos)
            indexes.append(i)
        key = tuple(indexes) if indexes else (0,)
        cls, typ, convert = self.message(key)
        try:
            msg = cls.FromString(body[pos:])
        except DecodeError as e:
            raise ProtobufValueError(f"the message does not parse: {e}") from None
        return ProtoValue(key, typ, convert(msg))


def _is_repeated(fd: Any) -> bool:
    flag = getattr(fd, "is_repeated", None)  # protobuf 7 dropped ``label``
    return bool(flag) if flag is not None else fd.label == _F.LABEL_REPEATED


def _element(fd: Any, stack: tuple[str, ...]) -> tuple[pa.DataType, Convert | None]:
    """Type and converter of one value of the field (None: the value as it is)."""
    if fd.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        return _message(fd.message_type, stack)
    if fd.type == _F.TYPE_ENUM:
        names = {v.number: v.name for v in fd.enum_type.values}
        return pa.string(), lambda n: names.get(n, str(n))
    typ = _SCALARS[fd.type]
    return typ, (decimal.Decimal if typ == _UNSIGNED_64 else None)


def _message(desc: Descriptor, stack: tuple[str, ...]) -> tuple[pa.DataType, Convert]:
    full = desc.full_name
    if full == "google.protobuf.Timestamp":
        return pa.timestamp("us", tz="UTC"), _timestamp
    if full in _WRAPPERS:
        typ, unwrap = _element(desc.fields_by_name["value"], stack)
        if unwrap is None:
            return typ, lambda m: m.value
        return typ, lambda m: unwrap(m.value)
    if full in _AS_JSON or full in stack:
        # no fixed columns: JSON text (proto field names, as the rest of the row)
        return pa.string(), lambda m: json.dumps(
            json_format.MessageToDict(m, preserving_proto_field_name=True), separators=(",", ":")
        )
    inner = (*stack, full)
    fields: list[pa.Field] = []
    plan: list[tuple[str, bool, Convert | None]] = []
    for fd in desc.fields:
        entry = fd.message_type if fd.type == _F.TYPE_MESSAGE else None
        if entry is not None and entry.GetOptions().map_entry:
            kt, kc = _element(entry.fields_by_name["key"], inner)
            vt, vc = _element(entry.fields_by_name["value"], inner)
            fields.append(pa.field(fd.name, pa.map_(kt, vt)))
            plan.append((fd.name, False, _map_items(kc, vc)))
        elif _is_repeated(fd):
            et, ec = _element(fd, inner)
            fields.append(pa.field(fd.name, pa.list_(et)))
            plan.append((fd.name, False, _each(ec)))
        else:
            t, c = _element(fd, inner)
            fields.append(pa.field(fd.name, t))
            plan.append((fd.name, bool(fd.has_presence), c))

    def convert(m: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, presence, c in plan:
            if presence and not m.HasField(name):
                out[name] = None
                continue
            v = getattr(m, name)
            out[name] = v if c is None else c(v)
        return out

    return pa.struct(fields), convert


def _timestamp(m: Any) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(seconds=m.seconds, microseconds=m.nanos // 1000)


def _each(c: Convert | None) -> Convert:
    if c is None:
        return list
    return lambda values: [c(v) for v in values]


def _map_items(kc: Convert | None, vc: Convert | None) -> Convert:
    def items(container: Any) -> list[tuple[Any, Any]]:
        pairs = sorted(container.items(), key=lambda kv: kv[0])  # (a map's order is none)
        return [(k if kc is None else kc(k), v if vc is None else vc(v)) for k, v in pairs]

    return items
