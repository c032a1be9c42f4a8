"""Schemas by id, for the broker's own users (the Iceberg topics' schema mode, broker-side
validation, the console's message browser): ``schema_by_id(store, id)`` gives
``(format, schema text, references)`` with format ``AVRO`` / ``JSON`` / ``PROTOBUF`` and
the references as ``(name, subject, version)``; ``referenced_texts`` the references'
texts (dependencies first) to parse it with. Answered from this broker's state when it
leads ``_schemas``, else asked of the leader over HTTP; cached per id (a schema id never
changes meaning). RegistryError 40403 when the id is unknown."""

from __future__ import annotations

from typing import Any

from broker.schema_registry.errors import RegistryError
from broker.schema_registry.formats import ReferencedText
from broker.schema_registry.state import RegistryState
from broker.schema_registry.store import NotHere, SchemaStore

SchemaText = tuple[str, str, list[tuple[str, str, int]]]

_cache: dict[tuple[int, int], SchemaText] = {}


async def schema_by_id(store: SchemaStore, schema_id: int) -> SchemaText:
    """(format, schema text, references) of ``schema_id``."""
    hit = _cache.get((id(store), schema_id))
    if hit is not None:
        return hit
    try:

        def get(state: RegistryState) -> SchemaText:
            s = state.schema_by_id(schema_id)
            return s.schema_type, s.schema, [(r.name, r.subject, r.version) for r in s.references]

        found = await store.read(get)
    except NotHere as here:
        doc: Any = await store.forward_json(here.leader, f"/schemas/ids/{schema_id}")
        refs = [(str(r["name"]), str(r["subject"]), int(r["version"])) for r in doc.get("references", [])]
        found = (str(doc.get("schemaType", "AVRO")), str(doc["schema"]), refs)
    _cache[(id(store), schema_id)] = found
    return found


async def referenced_texts(store: SchemaStore, refs: list[tuple[str, str, int]]) -> list[ReferencedText]:
    """The texts of ``refs`` and of their own references, dependencies first."""
    out: list[ReferencedText] = []
    seen: set[tuple[str, int]] = set()

    async def visit(name: str, subject: str, version: int) -> None:
        if (subject, version) in seen:
            return
        seen.add((subject, version))
        try:

            def get(state: RegistryState) -> tuple[str, list[tuple[str, str, int]]]:
                v = state.version(subject, version)
                return v.schema, [(r.name, r.subject, r.version) for r in v.references]

            text, inner = await store.read(get)
        except NotHere as here:
            doc: Any = await store.forward_json(here.leader, f"/subjects/{subject}/versions/{version}")
            text = str(doc["schema"])
            inner = [
                (str(r["name"]), str(r["subject"]), int(r["version"])) for r in doc.get("references", [])
            ]
        for r in inner:
            await visit(*r)
        out.append(ReferencedText(name, text))

    for r in refs:
        await visit(*r)
    return out


async def subjects_of_id(store: SchemaStore, schema_id: int) -> list[str]:
    """The subjects a schema id is registered under (live versions); [] when unknown."""
    try:
        pairs = await store.read(lambda s: s.subject_versions_of_id(schema_id))
        return sorted({s for s, _ in pairs})
    except NotHere as here:
        try:
            doc: Any = await store.forward_json(here.leader, f"/schemas/ids/{schema_id}/versions")
        except RegistryError as exc:
            if exc.code == 40403:
                return []
            raise
        return sorted({str(d["subject"]) for d in doc})
    except RegistryError as exc:
        if exc.code == 40403:
            return []
        raise
