"""The registry's writes, computed from its state: each returns its answer and the
``_schemas`` records that make it so (the store appends them; the state changes when
they are applied). Pure and synchronous: the store calls them on the event loop with
every schema they parse already in the parse cache (``warm``), so nothing here blocks."""

from __future__ import annotations

from broker.schema_registry import errors as err
from broker.schema_registry import records as rec
from broker.schema_registry.compat import LEVELS, MODES, check
from broker.schema_registry.formats import AVRO, SCHEMA_TYPES, ParsedSchema
from broker.schema_registry.records import Key, Reference, SchemaVersion
from broker.schema_registry.state import RegistryState, parse_cached, parse_version

Record = tuple[bytes, bytes | None]


def parse_new(
    state: RegistryState, schema_type: str | None, text: str, refs: list[Reference]
) -> ParsedSchema:
    st = (schema_type or AVRO).upper()
    if st not in SCHEMA_TYPES:
        raise err.RegistryError(422, 42201, f"Invalid schema type {schema_type}")
    return parse_cached(st, text, state.resolve(refs))


def warm(
    state: RegistryState, subject: str | None, schema_type: str | None, text: str, refs: list[Reference]
) -> None:
    """Parse (into the cache) the new schema and the subject's versions: off the loop."""
    parse_new(state, schema_type, text, refs)
    if subject is not None and state.has_subject(subject):
        for v in state.versions(subject):
            state.parsed(v)


def _same(state: RegistryState, v: SchemaVersion, new: ParsedSchema, refs: list[Reference]) -> bool:
    if v.schema_type != new.schema_type or list(v.references) != refs:
        return False
    return state.parsed(v).canonical == new.canonical


def lookup(
    state: RegistryState,
    subject: str,
    schema_type: str | None,
    text: str,
    refs: list[Reference],
    *,
    deleted: bool = False,
) -> SchemaVersion:
    """POST /subjects/{s}: the subject's version holding this schema; 40401 / 40403."""
    versions = state.versions(subject, deleted=deleted)
    new = parse_new(state, schema_type, text, refs)
    for v in reversed(versions):
        if _same(state, v, new, refs):
            return v
    raise err.schema_not_found("Schema not found")


def _writable(state: RegistryState, subject: str | None, *, importing: bool = False) -> None:
    mode = state.mode(subject)
    if mode == "READONLY":
        raise err.operation_not_permitted(f"Subject {subject} is in read-only mode")
    if importing and mode != "IMPORT":
        raise err.operation_not_permitted(f"Subject {subject} is not in import mode")


def register(
    state: RegistryState,
    subject: str,
    schema_type: str | None,
    text: str,
    refs: list[Reference],
    *,
    schema_id: int | None = None,
    version: int | None = None,
) -> tuple[int, list[Record]]:
    """POST /subjects/{s}/versions: the schema's id, and the records (none when the
    subject has it already). 409 when incompatible with the subject's live versions at
    its level; an explicit id or version only in IMPORT mode (42205 otherwise)."""
    importing = schema_id is not None and schema_id >= 0
    _writable(state, subject, importing=importing)
    new = parse_new(state, schema_type, text, refs)
    live = state.versions(subject) if state.has_subject(subject) else []
    if not importing:
        for v in reversed(live):
            if _same(state, v, new, refs):
                return v.id, []
        problems = check(state.compatibility(subject), new, [state.parsed(v) for v in live])
        if problems:
            raise err.incompatible(problems)
    every = state.subjects_.get(subject, {})
    next_version = max(every, default=0) + 1
    if version is not None and version > 0:
        if version in every:
            raise err.RegistryError(422, 42201, f"Version {version} of subject {subject} exists already")
        next_version = version
    if importing:
        assert schema_id is not None
        owner = state.by_id.get(schema_id)
        if owner is not None and schema_id in state.ids_in_use():
            same = owner.schema_type == new.schema_type and state.parsed(owner).canonical == new.canonical
            if not same:
                raise err.id_in_use(schema_id)
        new_id = schema_id
    else:
        new_id = _existing_id(state, new, refs) or state.max_id + 1
    v = SchemaVersion(subject, next_version, new_id, new.schema_type, text, list(refs))
    return new_id, [(rec.encode_key(Key(rec.SCHEMA, subject, next_version)), rec.encode_schema(v))]


def _existing_id(state: RegistryState, new: ParsedSchema, refs: list[Reference]) -> int | None:
    """The id already given to this schema (same type, canonical form and references) in
    any subject: Confluent gives one schema one id."""
    for sid in sorted(state.ids_in_use()):
        owner = state.by_id[sid]
        if owner.schema_type != new.schema_type or list(owner.references) != refs:
            continue
        try:
            if state.parsed(owner).canonical == new.canonical:
                return sid
        except err.RegistryError:
            continue
    return None


def delete_version(
    state: RegistryState, subject: str, version: str | int, *, permanent: bool
) -> tuple[int, list[Record]]:
    """DELETE /subjects/{s}/versions/{v}: the version number and the records."""
    _writable(state, subject)
    v = state.version(subject, version, deleted=True)
    if parse_version(version) == -1 and permanent:
        v = state.version(subject, version, deleted=True)
    if permanent:
        if not v.deleted:
            raise err.version_not_soft_deleted(subject, v.version)
    elif v.deleted:
        raise err.version_soft_deleted(subject, v.version)
    users = state.referenced_by(subject, v.version)
    if users:
        raise err.reference_exists(subject, v.version)
    key = rec.encode_key(Key(rec.SCHEMA, subject, v.version))
    if permanent:
        return v.version, [(key, None)]
    soft = SchemaVersion(v.subject, v.version, v.id, v.schema_type, v.schema, list(v.references), True)
    return v.version, [(key, rec.encode_schema(soft))]


def delete_subject(state: RegistryState, subject: str, *, permanent: bool) -> tuple[list[int], list[Record]]:
    """DELETE /subjects/{s}: the versions deleted and the records."""
    _writable(state, subject)
    every = state.versions(subject, deleted=True)
    live = [v for v in every if not v.deleted]
    if permanent and live:
        raise err.subject_not_soft_deleted(subject)
    if not permanent and not live:
        raise err.subject_soft_deleted(subject)
    for v in live if not permanent else every:
        if state.referenced_by(subject, v.version):
            raise err.reference_exists(subject, v.version)
    out: list[Record] = []
    for v in every if permanent else live:
        key = rec.encode_key(Key(rec.SCHEMA, subject, v.version))
        if permanent:
            out.append((key, None))
        else:
            soft = SchemaVersion(
                v.subject, v.version, v.id, v.schema_type, v.schema, list(v.references), True
            )
            out.append((key, rec.encode_schema(soft)))
    if permanent:
        if subject in state.configs:
            out.append((rec.encode_key(Key(rec.CONFIG, subject)), None))
        if subject in state.modes:
            out.append((rec.encode_key(Key(rec.MODE, subject)), None))
    return [v.version for v in (every if permanent else live)], out


def set_config(state: RegistryState, subject: str | None, level: object) -> tuple[str, list[Record]]:
    name = str(level).upper() if isinstance(level, str) else ""
    if name not in LEVELS:
        raise err.invalid_compatibility(level)
    return name, [(rec.encode_key(Key(rec.CONFIG, subject)), rec.encode_config(name))]


def delete_config(state: RegistryState, subject: str | None) -> tuple[str, list[Record]]:
    if subject is not None and subject not in state.configs:
        if not state.has_subject(subject, deleted=True):
            raise err.subject_not_found(subject)
        raise err.subject_compat_not_configured(subject)
    old = state.compatibility(subject)
    if subject is None and None not in state.configs:
        return old, []
    return old, [(rec.encode_key(Key(rec.CONFIG, subject)), None)]


def set_mode(
    state: RegistryState, subject: str | None, mode: object, *, force: bool = False
) -> tuple[str, list[Record]]:
    name = str(mode).upper() if isinstance(mode, str) else ""
    if name not in MODES:
        raise err.invalid_mode(mode)
    if name == "IMPORT" and not force:
        has = state.has_subject(subject, deleted=True) if subject is not None else bool(state.subjects_)
        if has:
            raise err.operation_not_permitted(
                "Cannot import since found existing subjects; use force=true to change the mode"
            )
    return name, [(rec.encode_key(Key(rec.MODE, subject)), rec.encode_mode(name))]


def delete_mode(state: RegistryState, subject: str) -> tuple[str, list[Record]]:
    if subject not in state.modes:
        if not state.has_subject(subject, deleted=True):
            raise err.subject_not_found(subject)
        raise err.subject_mode_not_configured(subject)
    return state.mode(subject), [(rec.encode_key(Key(rec.MODE, subject)), None)]


def test_compatibility(
    state: RegistryState,
    subject: str,
    version: str | int | None,
    schema_type: str | None,
    text: str,
    refs: list[Reference],
) -> list[str]:
    """POST /compatibility/subjects/{s}/versions[/{v}]: why the schema would be refused
    (empty: compatible). Without a version, against the subject's live versions at its
    level (Confluent's form without {v}); with one, against that version."""
    new = parse_new(state, schema_type, text, refs)
    level = state.compatibility(subject)
    if not state.has_subject(subject):
        if version is None:
            return []
        raise err.subject_not_found(subject)
    if version is None:
        return check(level, new, [state.parsed(v) for v in state.versions(subject)])
    old = state.version(subject, version)
    base = level.removesuffix("_TRANSITIVE")
    return check(base, new, [state.parsed(old)])
