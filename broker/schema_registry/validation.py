"""Broker-side schema validation (Confluent Server's ``confluent.value.schema.validation``
/ ``confluent.key.schema.validation``, Redpanda's ``redpanda.*.schema.id.validation``):
every record of a produced batch for such a topic must start with the wire format's
magic byte 0 and a 4-byte schema id the registry knows, registered under the subject the
topic's subject-name strategy names (TopicNameStrategy: ``<topic>-value`` /
``<topic>-key``; RecordNameStrategy: the schema's record name, Avro's full name,
Protobuf's first message, JSON Schema's ``title``; TopicRecordNameStrategy:
``<topic>-<record name>``). Otherwise the whole batch is refused with INVALID_RECORD and
one RecordError per refused record (its index in the batch and why), as Kafka reports
them (KIP-467); nothing of it is stored. A null key or value is not checked (a tombstone,
an unkeyed record).

Only topics with validation on come here (``LogConfig.schema_validation``, checked by the
produce path before anything else; the fast path leaves them to the general one). A
verdict (schema id, subject) found valid is remembered for ``CACHE_S``: a deleted
subject stops being accepted after at most that."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Final

from broker.schema_registry.errors import RegistryError
from broker.schema_registry.formats import AVRO, JSON, PROTOBUF
from broker.schema_registry.lookup import referenced_texts, schema_by_id, subjects_of_id
from broker.schema_registry.state import parse_cached
from broker.schema_registry.store import SchemaStore
from hot.config import RECORD_NAME_STRATEGY, TOPIC_NAME_STRATEGY, LogConfig
from hot.errors import CorruptRecordError, InvalidRecordError, RecordError, StrataError
from hot.records import decode_batches

CACHE_S: Final = 30.0
MAGIC: Final = 0
_ID = struct.Struct(">bI")

_valid: dict[tuple[int, int, str], float] = {}  # (store, id, subject) -> when found valid


async def record_name(store: SchemaStore, schema_id: int) -> str:
    """The name the record strategies use for a schema."""
    fmt, text, refs = await schema_by_id(store, schema_id)
    deps = tuple(await referenced_texts(store, refs))
    parsed = await asyncio.to_thread(parse_cached, fmt, text, deps)
    if fmt == AVRO:
        name = getattr(getattr(parsed, "parsed", None), "fullname", None)
        return str(name or "")
    if fmt == PROTOBUF:
        file = getattr(parsed, "file", None)
        if file is not None and len(file.message_type):
            first = file.message_type[0].name
            return f"{file.package}.{first}" if file.package else str(first)
        return ""
    if fmt == JSON:
        doc = getattr(parsed, "doc", None)
        return str(doc.get("title", "")) if isinstance(doc, dict) else ""
    return ""


async def _check_id(store: SchemaStore, topic: str, schema_id: int, strategy: str, part: str) -> str | None:
    """Why ``schema_id`` is not acceptable for ``part`` (key/value) of ``topic``; None if it is."""
    if strategy == TOPIC_NAME_STRATEGY:
        subject = f"{topic}-{part}"
    else:
        try:
            name = await record_name(store, schema_id)
        except RegistryError as exc:
            if exc.code == 40403:
                return f"schema id {schema_id} is not registered"
            raise
        subject = name if strategy == RECORD_NAME_STRATEGY else f"{topic}-{name}"
    key = (id(store), schema_id, subject)
    seen = _valid.get(key)
    if seen is not None and time.monotonic() - seen < CACHE_S:
        return None
    subjects = await subjects_of_id(store, schema_id)
    if not subjects:
        return f"schema id {schema_id} is not registered"
    if subject not in subjects:
        return f"schema id {schema_id} is not registered under subject {subject}"
    _valid[key] = time.monotonic()
    return None


async def validate(
    store: SchemaStore | None, topic: str, data: bytes | bytearray | memoryview, config: LogConfig
) -> StrataError | None:
    """The error refusing this produced data, or None when every record passes."""
    if store is None:
        return InvalidRecordError(f"{topic} has schema validation on but this broker runs no schema registry")
    try:
        batches = decode_batches(data, allow_partial_tail=False)
    except StrataError as exc:
        return exc if isinstance(exc, CorruptRecordError) else CorruptRecordError(str(exc))
    problems: list[RecordError] = []
    checks = []
    if config.key_schema_validation:
        checks.append(("key", config.key_subject_name_strategy))
    if config.value_schema_validation:
        checks.append(("value", config.value_subject_name_strategy))
    for batch in batches:
        if batch.is_control:
            continue
        for index, rec in enumerate(batch):
            for part, strategy in checks:
                payload = rec.key if part == "key" else rec.value
                if payload is None:
                    continue
                why: str | None
                if len(payload) < _ID.size or payload[0] != MAGIC:
                    why = f"its {part} does not start with the schema registry's magic byte and a schema id"
                else:
                    schema_id = _ID.unpack_from(payload)[1]
                    try:
                        why = await _check_id(store, topic, schema_id, strategy, part)
                    except RegistryError as exc:
                        why = f"the schema registry cannot check schema id {schema_id}: {exc.message}"
                if why is not None:
                    problems.append(RecordError(index, f"record {index} of the batch: {why}"))
                    break
    if not problems:
        return None
    store.validation_refused += 1
    first = problems[0].message
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return InvalidRecordError(
        f"{topic}: schema validation refused the batch: {first}{more}", record_errors=problems
    )
