"""The records of ``_schemas``, in Confluent Schema Registry's layout so that its tools
(and a Confluent registry pointed at the topic) read them. Keys and values are JSON:

* ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` ->
  ``{"subject":S,"version":V,"id":ID,"schemaType":T,"references":[...],"schema":TEXT,
  "deleted":B}`` (``schemaType`` left out for AVRO, ``references`` when empty); a
  tombstone is a permanent delete.
* ``{"keytype":"CONFIG","subject":S|null,"magic":0}`` -> ``{"compatibilityLevel":L}``
  (null subject: the global level); a tombstone removes the subject's level.
* ``{"keytype":"MODE","subject":S|null,"magic":0}`` -> ``{"mode":M}``.
* ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`` -> ``{"subject":S,"version":V}``
  (versions up to V soft-deleted: read, never written here, where every version's own
  record says ``deleted``), ``CLEAR_SUBJECT`` alike (permanently), ``NOOP`` ignored."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from broker.schema_registry.formats import AVRO

SCHEMA: Final = "SCHEMA"
CONFIG: Final = "CONFIG"
MODE: Final = "MODE"
DELETE_SUBJECT: Final = "DELETE_SUBJECT"
CLEAR_SUBJECT: Final = "CLEAR_SUBJECT"
NOOP: Final = "NOOP"


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(slots=True)
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: list[Reference] = field(default_factory=list)
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def encode_key(key: Key) -> bytes:
    if key.keytype == SCHEMA:
        return _dumps({"keytype": SCHEMA, "subject": key.subject, "version": key.version, "magic": 1})
    if key.keytype == NOOP:
        return _dumps({"keytype": NOOP, "magic": 0})
    return _dumps({"keytype": key.keytype, "subject": key.subject, "magic": 0})


def decode_key(raw: bytes) -> Key:
    """A key of ``_schemas``; ValueError when it is not one."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("keytype"), str):
        raise ValueError(f"not a _schemas key: {raw[:100]!r}")
    version = doc.get("version")
    return Key(doc["keytype"], doc.get("subject"), version if isinstance(version, int) else None)


def encode_schema(v: SchemaVersion) -> bytes:
    doc: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id}
    if v.schema_type != AVRO:
        doc["schemaType"] = v.schema_type
    if v.references:
        doc["references"] = [r.to_json() for r in v.references]
    doc["schema"] = v.schema
    doc["deleted"] = v.deleted
    return _dumps(doc)


def decode_schema(raw: bytes) -> SchemaVersion:
    doc = json.loads(raw)
    refs = [
        Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in doc.get("references") or []
    ]
    return SchemaVersion(
        str(doc["subject"]),
        int(doc["version"]),
        int(doc["id"]),
        str(doc.get("schemaType") or AVRO),
        str(doc["schema"]),
        refs,
        bool(doc.get("deleted", False)),
    )


def encode_config(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def decode_config(raw: bytes) -> str:
    doc = json.loads(raw)
    return str(doc.get("compatibilityLevel") or doc.get("compatibility"))


def encode_mode(mode: str) -> bytes:
    return _dumps({"mode": mode})


def decode_mode(raw: bytes) -> str:
    return str(json.loads(raw)["mode"])


def decode_delete_subject(raw: bytes) -> int:
    return int(json.loads(raw)["version"])
