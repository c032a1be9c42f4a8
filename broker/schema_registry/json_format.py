"""JSON Schema: ``jsonschema`` checks a schema against its draft's metaschema (the draft
its ``$schema`` names; draft 2020-12 otherwise). Compatibility rules are ours (the
library has no checker), in ``json_compat``: the referenced schemas go with the schema so
that a ``$ref`` into one of them is followed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import jsonschema.exceptions  # type: ignore[import-untyped]
import jsonschema.validators  # type: ignore[import-untyped]

from broker.schema_registry.errors import invalid_schema
from broker.schema_registry.json_compat import Doc, Side, incompatibilities
from broker.schema_registry.schema_base import JSON, ParsedSchema, ReferencedText, compact_json, load_json


@dataclass(frozen=True, slots=True, eq=False)
class JsonSchema:
    schema_type: str
    canonical: str
    doc: Doc
    refs: dict[str, Doc]  # the referenced schemas by reference name, for $ref

    def reads(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"schema type changed from {writer.schema_type} to JSON"]
        return incompatibilities(Side(self.doc, self.refs), Side(writer.doc, writer.refs))


def parse_json_schema(text: str, refs: list[ReferencedText]) -> JsonSchema:
    docs: dict[str, Doc] = {}
    for ref in refs:
        ref_doc = load_json(ref.text, f"reference {ref.name}")
        _check(ref_doc, ref.text)
        docs[ref.name] = ref_doc
    doc = load_json(text, "the schema")
    _check(doc, text)
    return JsonSchema(JSON, compact_json(doc), doc, docs)


def _check(doc: Any, text: str) -> None:
    if not isinstance(doc, dict | bool):
        raise invalid_schema(f"{text[:200]}, details: a JSON schema is an object or a boolean")
    try:
        cls = jsonschema.validators.validator_for(doc, default=jsonschema.Draft202012Validator)
        cls.check_schema(doc)
    except jsonschema.exceptions.SchemaError as exc:
        raise invalid_schema(f"{text[:200]}, details: {exc.message}") from None
