"""The registry's state, rebuilt from ``_schemas`` records in log order (``apply``), and
its questions (``subjects``, ``version``, ``schema_by_id``, ...). Pure: no I/O, no
event loop; the store (``store``) keeps one per loaded partition and the operations
(``operations``) compute the records a write appends from it."""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass

from broker.schema_registry import records as rec
from broker.schema_registry.compat import DEFAULT_LEVEL, DEFAULT_MODE
from broker.schema_registry.errors import (
    RegistryError,
    invalid_schema,
    invalid_version,
    schema_not_found,
    subject_not_found,
    version_not_found,
)
from broker.schema_registry.formats import ParsedSchema, ReferencedText, parse
from broker.schema_registry.records import Key, Reference, SchemaVersion

log = logging.getLogger("strata.schema_registry")

MAX_VERSION = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class SchemaById:
    """What an id names (the same for every subject and version registered with it)."""

    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]


@functools.lru_cache(maxsize=4096)
def parse_cached(schema_type: str, text: str, refs: tuple[ReferencedText, ...]) -> ParsedSchema:
    return parse(schema_type, text, list(refs))


class RegistryState:
    def __init__(self) -> None:
        self.subjects_: dict[str, dict[int, SchemaVersion]] = {}
        self.by_id: dict[int, SchemaById] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.size = 0  # about the bytes of the live records (compaction)

    # --- replay / apply ------------------------------------------------------------------------

    def apply(self, key_raw: bytes, value: bytes | None) -> None:
        """One record of ``_schemas``, in log order. A record that does not parse is
        skipped with a warning (a foreign writer's; Confluent's reader does the same)."""
        try:
            key = rec.decode_key(key_raw)
            self._apply(key, value)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("_schemas: skipping a record that does not parse (%s): %r", exc, key_raw[:200])

    def _apply(self, key: Key, value: bytes | None) -> None:
        if key.keytype == rec.SCHEMA:
            if key.subject is None or key.version is None:
                raise ValueError("SCHEMA key without subject or version")
            versions = self.subjects_.setdefault(key.subject, {})
            if value is None:
                versions.pop(key.version, None)
                if not versions:
                    del self.subjects_[key.subject]
                return
            v = rec.decode_schema(value)
            versions[key.version] = v
            if v.id not in self.by_id:
                self.by_id[v.id] = SchemaById(v.id, v.schema_type, v.schema, tuple(v.references))
            self.max_id = max(self.max_id, v.id)
        elif key.keytype == rec.CONFIG:
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = rec.decode_config(value)
        elif key.keytype == rec.MODE:
            if value is None:
                self.modes.pop(key.subject, None)
            else:
                self.modes[key.subject] = rec.decode_mode(value)
        elif key.keytype in (rec.DELETE_SUBJECT, rec.CLEAR_SUBJECT) and value is not None and key.subject:
            upto = rec.decode_delete_subject(value)
            versions = self.subjects_.get(key.subject, {})
            for n in [n for n in versions if n <= upto]:
                if key.keytype == rec.DELETE_SUBJECT:
                    versions[n].deleted = True
                else:
                    del versions[n]
        # NOOP and unknown key types: nothing

    def live_records(self) -> list[tuple[bytes, bytes]]:
        """Every live key's latest record (the compaction's dump)."""
        out: list[tuple[bytes, bytes]] = []
        for subject, versions in self.subjects_.items():
            for n, v in sorted(versions.items()):
                out.append((rec.encode_key(Key(rec.SCHEMA, subject, n)), rec.encode_schema(v)))
        for s, level in self.configs.items():
            out.append((rec.encode_key(Key(rec.CONFIG, s)), rec.encode_config(level)))
        for s, mode in self.modes.items():
            out.append((rec.encode_key(Key(rec.MODE, s)), rec.encode_mode(mode)))
        return out

    def ids_in_use(self) -> set[int]:
        return {v.id for versions in self.subjects_.values() for v in versions.values()}

    # --- questions ------------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            s
            for s, versions in self.subjects_.items()
            if s.startswith(prefix) and any(deleted or not v.deleted for v in versions.values())
        )

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, oldest first; 40401 when it has none (live ones unless
        ``deleted``)."""
        found = [v for _, v in sorted(self.subjects_.get(subject, {}).items()) if deleted or not v.deleted]
        if not found:
            raise subject_not_found(subject)
        return found

    def has_subject(self, subject: str, *, deleted: bool = False) -> bool:
        return any(deleted or not v.deleted for v in self.subjects_.get(subject, {}).values())

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> SchemaVersion:
        """``version`` (a number, ``latest`` or -1) of ``subject``; 40401 / 40402 / 42202."""
        n = parse_version(version)
        versions = self.versions(subject, deleted=deleted)
        if n == -1:
            return versions[-1]
        for v in versions:
            if v.version == n:
                return v
        raise version_not_found(subject, n)

    def schema_by_id(self, schema_id: int) -> SchemaById:
        found = self.by_id.get(schema_id)
        if found is None or schema_id not in self.ids_in_use():
            raise schema_not_found(f"Schema {schema_id} not found")
        return found

    def subject_versions_of_id(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        self.schema_by_id(schema_id)
        return sorted(
            (s, v.version)
            for s, versions in self.subjects_.items()
            for v in versions.values()
            if v.id == schema_id and (deleted or not v.deleted)
        )

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas that reference ``subject`` ``version``."""
        return sorted(
            {
                v.id
                for versions in self.subjects_.values()
                for v in versions.values()
                if not v.deleted and any(r.subject == subject and r.version == version for r in v.references)
            }
        )

    def compatibility(self, subject: str | None) -> str:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, DEFAULT_LEVEL)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, DEFAULT_MODE)

    # --- parsing --------------------------------------------------------------------------------

    def resolve(self, references: list[Reference]) -> tuple[ReferencedText, ...]:
        """The texts of ``references`` and of theirs, dependencies first, each once;
        42201 when one names a version that does not exist."""
        out: list[ReferencedText] = []
        seen: set[tuple[str, int]] = set()

        def visit(ref: Reference, depth: int) -> None:
            if depth > 32:
                raise schema_not_found("references nest deeper than 32")
            if (ref.subject, ref.version) in seen:
                return
            seen.add((ref.subject, ref.version))
            try:
                v = self.version(ref.subject, ref.version)
            except Exception:
                raise invalid_schema(
                    f"reference {ref.name}: subject {ref.subject} version {ref.version} not found"
                ) from None
            for inner in v.references:
                visit(inner, depth + 1)
            out.append(ReferencedText(ref.name, v.schema))

        for ref in references:
            visit(ref, 0)
        return tuple(out)

    def parsed(self, v: SchemaVersion | SchemaById) -> ParsedSchema:
        return parse_cached(v.schema_type, v.schema, self.resolve(list(v.references)))


def parse_version(version: str | int) -> int:
    """A version as the API takes it: 1 to 2^31-1, ``latest`` or -1 (-> -1); 42202 otherwise."""
    if isinstance(version, int):
        n = version
    elif version == "latest":
        return -1
    else:
        try:
            n = int(version)
        except ValueError:
            raise invalid_version(version) from None
    if n == -1:
        return -1
    if not 1 <= n <= MAX_VERSION:
        raise invalid_version(version)
    return n


def references_from_json(doc: object) -> list[Reference]:
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise RegistryError(422, 42201, "Invalid schema: references must be a list")
    out = []
    for r in doc:
        try:
            out.append(Reference(str(r["name"]), str(r["subject"]), int(r["version"])))
        except (KeyError, TypeError, ValueError):
            raise RegistryError(
                422, 42201, f"Invalid schema: a reference needs name, subject and version: {json.dumps(r)}"
            ) from None
    return out
