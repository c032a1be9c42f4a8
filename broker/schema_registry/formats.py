"""The three schema formats behind one interface: parse a schema's text (with the texts of
the schemas it references) into a ``ParsedSchema`` that knows its identity (``canonical``:
two registrations with the same canonical form are the same schema, one id) and whether
it can read data written with another version (``reads``: the incompatibilities found,
none when compatible). Avro here; JSON Schema in ``json_format``, Protobuf in
``protobuf_format``.

Avro: ``avro`` parses (names and references resolved in one ``Names`` scope, as
Confluent's AvroSchema does) and decides compatibility with its reader/writer checker
(the Avro specification's schema resolution, the same rules Confluent applies: nothing
of ours). The canonical form is the schema's compact JSON as written (Confluent's
identity: the text less insignificant whitespace)."""

from __future__ import annotations

from dataclasses import dataclass

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from broker.schema_registry.errors import invalid_schema
from broker.schema_registry.json_format import parse_json_schema
from broker.schema_registry.protobuf_format import parse_protobuf
from broker.schema_registry.schema_base import (
    AVRO,
    JSON,
    PROTOBUF,
    SCHEMA_TYPES,
    ParsedSchema,
    ReferencedText,
    compact_json,
    load_json,
)

# The shared names stay importable from here, where the rest of the registry takes them.
__all__ = [
    "AVRO",
    "JSON",
    "PROTOBUF",
    "SCHEMA_TYPES",
    "AvroSchema",
    "ParsedSchema",
    "ReferencedText",
    "compact_json",
    "load_json",
    "parse",
    "parse_avro",
]


@dataclass(frozen=True, slots=True, eq=False)
class AvroSchema:
    schema_type: str
    canonical: str
    parsed: avro.schema.Schema

    def reads(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"schema type changed from {writer.schema_type} to AVRO"]
        result = ReaderWriterCompatibilityChecker().get_compatibility(  # type: ignore[no-untyped-call]
            self.parsed, writer.parsed
        )
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        kinds = [k.name.upper() for k in result.incompatibilities]
        locations = sorted(result.locations)
        messages = sorted(result.messages)
        out = []
        for i, kind in enumerate(kinds):
            where = locations[i] if i < len(locations) else "/"
            what = messages[i] if i < len(messages) else ""
            out.append(f"{{errorType:'{kind}', description:'{what}' at path '{where}'}}")
        return out or ["incompatible"]


def parse_avro(text: str, refs: list[ReferencedText]) -> AvroSchema:
    names = avro.name.Names()
    try:
        for ref in refs:
            avro.schema.make_avsc_object(load_json(ref.text, f"reference {ref.name}"), names)
        doc = load_json(text, "the schema")
        parsed = avro.schema.make_avsc_object(doc, names)
    except (avro.errors.AvroException, TypeError, KeyError, AttributeError) as exc:
        raise invalid_schema(f"{text[:200]}, details: {exc}") from None
    return AvroSchema(AVRO, compact_json(doc), parsed)


def parse(schema_type: str, text: str, refs: list[ReferencedText]) -> ParsedSchema:
    """``text`` parsed as ``schema_type`` (AVRO, JSON or PROTOBUF); RegistryError 42201
    (invalid schema) when it does not parse or names a reference it was not given."""
    if schema_type == AVRO:
        return parse_avro(text, refs)
    if schema_type == JSON:
        return parse_json_schema(text, refs)
    if schema_type == PROTOBUF:
        return parse_protobuf(text, refs)
    raise invalid_schema(f"of unknown type {schema_type!r} (AVRO, JSON or PROTOBUF)")
