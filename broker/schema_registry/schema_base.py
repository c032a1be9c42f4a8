"""What the three schema formats share (``formats`` parses Avro and picks the format;
``json_format`` and ``protobuf_format`` the other two): the format names, the parsed
schema's interface, a referenced schema's text and the JSON helpers. A module of its own
so that each format imports it and ``formats`` imports each format, with no cycle."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Protocol

from broker.schema_registry.errors import invalid_schema

AVRO: Final = "AVRO"
JSON: Final = "JSON"
PROTOBUF: Final = "PROTOBUF"
SCHEMA_TYPES: Final = (JSON, PROTOBUF, AVRO)  # GET /schemas/types, in Confluent's order


@dataclass(frozen=True, slots=True)
class ReferencedText:
    """A referenced schema as the parser needs it: the name it is imported by and its text
    (its own references come before it in the list handed to ``parse``)."""

    name: str
    text: str


class ParsedSchema(Protocol):
    @property
    def schema_type(self) -> str: ...

    @property
    def canonical(self) -> str: ...

    def reads(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema (empty: it can)."""
        ...


def compact_json(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise invalid_schema(f"{text[:200]}, details: {what} is not JSON: {exc}") from None
