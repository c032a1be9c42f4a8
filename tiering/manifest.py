"""Partition manifests, the model: the bucket's record of which segments of a partition are
remote, as frozen dataclasses with their JSON encoding, validation and pure transitions
(no I/O: loading, compare-and-swap and spillover objects are ``tiering.manifest_store``).

One JSON object per partition at ``tiering.keys.manifest_key(...)``, UTF-8, compact,
keys sorted::

    {"format_version": 1, "topic": "orders", "topic_id": "<32 hex>", "partition": 0,
     "revision": 7, "log_start_offset": 0,
     "segments": [{"segment_id": "<32 hex>", "base_offset": 0, "last_offset": 99,
                   "first_timestamp": 1700000000000, "max_timestamp": 1700000005000,
                   "size": 104857, "log_sha256": "<64 hex>", "log_crc32c": 2882464578,
                   "index_size": 80,
                   "timeindex_size": 120, "leader_epoch": 0, "state": "COPIED",
                   "keys": {"log": "...", "index": "...", "timeindex": "...",
                            "producer_snapshot": "...", "leader_epoch_checkpoint": "...",
                            "txnindex": "..."},
                   "created_ms": ..., "updated_ms": ..., "has_producer_snapshot": false,
                   "record_count": 100, "txnindex_size": 68}, ...],
     "leader_epoch": 4,
     "spillover": [{"base_offset": 0, "last_offset": 49999, "key": "...", "segment_count": 500,
                    "size": 524288000, "max_timestamp": 1699000000000}, ...]}

Reading is strict: an unknown ``format_version``, a missing or unknown field, a wrong
type, unsorted segments or overlapping COPIED ranges raise ``CorruptManifestError``
naming the object and what is wrong. Unknown fields are refused rather than ignored so
an older writer can never silently drop what a newer one recorded.

Checksums of a segment's ``.log``: ``log_sha256`` (hex) is its identity and upload
checksum; ``log_crc32c`` (CRC-32C of the whole object, unsigned 32-bit integer, the
checksum S3 itself offers as ``x-amz-checksum-crc32c``) is what the remote reader checks
a fetched object against (hardware CRC-32C is about 20 times faster than SHA-256 here).
Entries written before ``log_crc32c`` existed lack it (and are written back without it);
readers then check the SHA-256.

Transaction index (``.txnindex``, hot.txn_index): ``txnindex_size`` is the size of the
segment's uploaded index, a positive multiple of 34 bytes; absent when the segment holds no
aborted transaction's marker (then there is no object) and in entries written before the
index was tiered. ``keys.txnindex`` is absent in such older entries too: it is derived
from ``keys.log`` (``tiering.keys.txnindex_key_of``). Like the offset index, the object is
checked against its recorded size and parsed strictly by its readers
(``tiering.remote_txn``).

One object for the small files (``indexes_size``, issue 39): a segment uploaded since then
has its ``.index``, ``.timeindex`` and producer snapshot concatenated in that order in one
object, ``keys.indexes`` (derived from ``keys.log``, ``tiering.keys``); ``indexes_size`` is
its size, the snapshot being what follows the two indexes. Readers take each part by
``index_part()`` / ``timeindex_part()`` / ``snapshot_part()``, which name the separate
objects of older entries (no ``indexes_size``): both layouts stay readable. A broker older
than this cannot read the indexes of such segments.

Segment lifecycle (``SegmentState``): COPY_STARTED -> COPIED -> DELETE_STARTED -> DELETED,
plus COPY_STARTED -> DELETE_STARTED for an abandoned copy. The state is recorded
*before* the side effect it announces (upload, deletion), so after a crash the manifest
says which objects may exist and must be finished or cleaned up.

Leader epochs (cluster mode): ``leader_epoch`` is the highest leader epoch of any broker
that wrote the manifest (absent: written by a single node); ``tiering.manifest_store``
fences writers of older epochs with it.

Spillover: a manifest's oldest COPIED segments may live in immutable spillover objects
(same segment JSON, see ``spillover_to_json``/``parse_spillover``) named by
``SpilloverRef`` entries; spilled segments are all COPIED and lie below every COPIED
segment of the main manifest. When and how they are written: ``tiering.manifest_store``.

Topic manifests (``topics/<topic>.json``, what restore and Spark discover topics by):
``topic_manifest_to_json``/``topic_manifest_from_json``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from hot.errors import (
    InvalidRequestError,
    StrataError,
)
from hot.topics import validate_topic_name
from hot.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from tiering.keys import (
    SegmentKeys,
    txnindex_key_of,
)

if TYPE_CHECKING:
    from tiering.store_base import ObjectStore

_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")
_U32_MAX: Final = (1 << 32) - 1


class ManifestError(StrataError):
    """Base of the manifest errors."""


class CorruptManifestError(ManifestError):
    """A manifest object that fails validation; the message names the object and the problem."""


class InvalidStateTransitionError(ManifestError):
    """A segment state change not in VALID_TRANSITIONS."""


class InvalidSegmentError(ManifestError):
    """A segment record whose fields are inconsistent (negative size, last < base, ...)."""


class SegmentOverlapError(ManifestError):
    """A COPIED segment whose offsets overlap another COPIED (or spilled) segment."""


class CompactionConflictError(ManifestError):
    """Remote compaction's swap found the segments it rewrote changed (retention, another
    writer): the swap is abandoned and its new objects deleted."""


class SegmentState(StrEnum):
    COPY_STARTED = "COPY_STARTED"
    COPIED = "COPIED"
    DELETE_STARTED = "DELETE_STARTED"
    DELETED = "DELETED"


VALID_TRANSITIONS: Final[Mapping[SegmentState, frozenset[SegmentState]]] = MappingProxyType(
    {
        SegmentState.COPY_STARTED: frozenset({SegmentState.COPIED, SegmentState.DELETE_STARTED}),
        SegmentState.COPIED: frozenset({SegmentState.DELETE_STARTED}),
        SegmentState.DELETE_STARTED: frozenset({SegmentState.DELETED}),
        SegmentState.DELETED: frozenset(),
    }
)


def check_transition(old: SegmentState, new: SegmentState) -> None:
    if new not in VALID_TRANSITIONS[old]:
        allowed = ", ".join(sorted(s.value for s in VALID_TRANSITIONS[old])) or "none"
        raise InvalidStateTransitionError(
            f"segment state cannot change from {old.value} to {new.value} (allowed: {allowed})"
        )


# --- records ----------------------------------------------------------------------------------


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True, slots=True)
class ObjectPart:
    """Bytes ``[start, end)`` of the object ``key`` (``object_size`` bytes): one of a
    segment's indexes, alone or in its ``.indexes`` object. ``start``/``end``/``object_size``
    None: the whole object, size unknown. ``name``: unique per part (caches key on it)."""

    key: str
    start: int | None
    end: int | None
    object_size: int | None
    name: str

    async def get(self, store: ObjectStore) -> bytes:
        """The part's bytes: the whole object where the part is one (an older entry's
        index or snapshot, checked against the manifest by its parser), else a range."""
        if self.name == self.key:
            return await store.get(self.key)
        return await store.get(self.key, start=self.start, end=self.end)


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    segment_id: uuid.UUID
    base_offset: int
    last_offset: int
    first_timestamp: int
    max_timestamp: int
    size: int
    log_sha256: str
    index_size: int
    timeindex_size: int
    leader_epoch: int
    state: SegmentState
    keys: SegmentKeys
    created_ms: int
    updated_ms: int
    has_producer_snapshot: bool = False
    record_count: int | None = None
    log_crc32c: int | None = None  # None: an entry written before the field existed
    # Cleaned by the log cleaner (compacted topics): offsets may skip between batches.
    compacted: bool = False
    # Remote compaction (tiering/compactor.py): when this segment's records were first
    # cleaned remotely (its tombstones go delete.retention.ms later); None: never.
    cleaned_ms: int | None = None
    # A DELETE_STARTED entry that remote compaction replaced by a rewritten segment: its
    # objects stay readable until the replaced-object grace period has passed.
    replaced: bool = False
    # Bytes of the uploaded .txnindex; None: the segment has none (no aborted transaction).
    txnindex_size: int | None = None
    # The .index, .timeindex and producer snapshot went up as one object (``keys.indexes``:
    # index_size bytes of offset index, timeindex_size of time index, the rest the
    # snapshot) of this size; None: as objects of their own (entries written before it).
    indexes_size: int | None = None

    def __post_init__(self) -> None:
        sid = self.segment_id.hex if isinstance(self.segment_id, uuid.UUID) else repr(self.segment_id)
        if not isinstance(self.segment_id, uuid.UUID):
            raise InvalidSegmentError(f"segment_id must be a UUID, got {sid}")
        for name in (
            "base_offset",
            "last_offset",
            "first_timestamp",
            "max_timestamp",
            "size",
            "index_size",
            "timeindex_size",
            "leader_epoch",
            "created_ms",
            "updated_ms",
        ):
            if not _is_int(getattr(self, name)):
                raise InvalidSegmentError(f"segment {sid}: {name} must be an integer")
        for name in ("base_offset", "size", "index_size", "timeindex_size"):
            if getattr(self, name) < 0:
                raise InvalidSegmentError(f"segment {sid}: {name} is negative ({getattr(self, name)})")
        if self.last_offset < self.base_offset:
            raise InvalidSegmentError(
                f"segment {sid}: last_offset {self.last_offset} is below base_offset {self.base_offset}"
            )
        if self.leader_epoch < -1:
            raise InvalidSegmentError(f"segment {sid}: leader_epoch {self.leader_epoch} is below -1")
        if not isinstance(self.log_sha256, str) or not _SHA256_HEX.fullmatch(self.log_sha256):
            raise InvalidSegmentError(f"segment {sid}: log_sha256 must be 64 lowercase hex digits")
        if self.log_crc32c is not None and (
            not _is_int(self.log_crc32c) or not 0 <= self.log_crc32c <= _U32_MAX
        ):
            raise InvalidSegmentError(
                f"segment {sid}: log_crc32c must be an integer in [0, {_U32_MAX}], got {self.log_crc32c!r}"
            )
        if not isinstance(self.state, SegmentState):
            raise InvalidSegmentError(f"segment {sid}: state must be a SegmentState, got {self.state!r}")
        if not isinstance(self.keys, SegmentKeys) or not all(
            isinstance(k, str) and k for k in self.keys.all()
        ):
            raise InvalidSegmentError(f"segment {sid}: keys must be a SegmentKeys of non-empty strings")
        if not isinstance(self.has_producer_snapshot, bool):
            raise InvalidSegmentError(f"segment {sid}: has_producer_snapshot must be a boolean")
        if not isinstance(self.compacted, bool):
            raise InvalidSegmentError(f"segment {sid}: compacted must be a boolean")
        if self.cleaned_ms is not None and (not _is_int(self.cleaned_ms) or self.cleaned_ms < 0):
            raise InvalidSegmentError(f"segment {sid}: cleaned_ms must be a non-negative integer")
        if not isinstance(self.replaced, bool):
            raise InvalidSegmentError(f"segment {sid}: replaced must be a boolean")
        if self.replaced and self.state not in (SegmentState.DELETE_STARTED, SegmentState.DELETED):
            raise InvalidSegmentError(
                f"segment {sid}: only a DELETE_STARTED or DELETED entry can be replaced"
            )
        if self.txnindex_size is not None and (
            not _is_int(self.txnindex_size) or self.txnindex_size <= 0 or self.txnindex_size % TXN_ENTRY_SIZE
        ):
            raise InvalidSegmentError(
                f"segment {sid}: txnindex_size must be a positive multiple of {TXN_ENTRY_SIZE} "
                f"or absent, got {self.txnindex_size!r}"
            )
        if self.indexes_size is not None and (
            not _is_int(self.indexes_size) or self.indexes_size < self.index_size + self.timeindex_size
        ):
            raise InvalidSegmentError(
                f"segment {sid}: indexes_size must be an integer of at least index_size + "
                f"timeindex_size, or absent, got {self.indexes_size!r}"
            )
        if self.record_count is not None and (not _is_int(self.record_count) or self.record_count < 0):
            raise InvalidSegmentError(f"segment {sid}: record_count must be a non-negative integer or null")

    def with_state(self, new: SegmentState, now_ms: int) -> RemoteSegment:
        check_transition(self.state, new)
        return replace(self, state=new, updated_ms=now_ms)

    def contains(self, offset: int) -> bool:
        return self.base_offset <= offset <= self.last_offset

    def index_part(self) -> ObjectPart:
        """Where the segment's offset index is: its own object, or the head of ``.indexes``."""
        if self.indexes_size is None:
            return ObjectPart(self.keys.index, 0, self.index_size, self.index_size, self.keys.index)
        return ObjectPart(
            self.keys.indexes, 0, self.index_size, self.indexes_size, self.keys.indexes + "#index"
        )

    def timeindex_part(self) -> ObjectPart:
        if self.indexes_size is None:
            size = self.timeindex_size
            return ObjectPart(self.keys.timeindex, 0, size, size, self.keys.timeindex)
        start = self.index_size
        return ObjectPart(
            self.keys.indexes,
            start,
            start + self.timeindex_size,
            self.indexes_size,
            self.keys.indexes + "#timeindex",
        )

    def snapshot_part(self) -> ObjectPart | None:
        """Where the producer snapshot is (None: the segment has none); ``end`` None: the
        whole object (its size is not in the manifest)."""
        if not self.has_producer_snapshot:
            return None
        if self.indexes_size is None:
            return ObjectPart(self.keys.producer_snapshot, None, None, None, self.keys.producer_snapshot)
        start = self.index_size + self.timeindex_size
        return ObjectPart(
            self.keys.indexes, start, self.indexes_size, self.indexes_size, self.keys.indexes + "#snapshot"
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "segment_id": self.segment_id.hex,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "first_timestamp": self.first_timestamp,
            "max_timestamp": self.max_timestamp,
            "size": self.size,
            "log_sha256": self.log_sha256,
            "index_size": self.index_size,
            "timeindex_size": self.timeindex_size,
            "leader_epoch": self.leader_epoch,
            "state": self.state.value,
            "keys": {
                "log": self.keys.log,
                "index": self.keys.index,
                "timeindex": self.keys.timeindex,
                "producer_snapshot": self.keys.producer_snapshot,
                "leader_epoch_checkpoint": self.keys.leader_epoch_checkpoint,
                "txnindex": self.keys.txnindex,
            },
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "has_producer_snapshot": self.has_producer_snapshot,
            "record_count": self.record_count,
        }
        if self.log_crc32c is not None:  # absent in entries written before it existed
            out["log_crc32c"] = self.log_crc32c
        if self.compacted:  # absent (false) keeps every other entry as it was
            out["compacted"] = True
        if self.cleaned_ms is not None:
            out["cleaned_ms"] = self.cleaned_ms
        if self.replaced:
            out["replaced"] = True
        if self.txnindex_size is not None:
            out["txnindex_size"] = self.txnindex_size
        if self.indexes_size is not None:
            out["indexes_size"] = self.indexes_size
        return out

    @classmethod
    def from_dict(cls, d: object) -> RemoteSegment:
        """Parse one segment record; ManifestError (or ValueError) on anything malformed."""
        obj = _fields(
            d,
            _SEGMENT_FIELDS,
            "segment",
            optional=(
                "has_producer_snapshot",
                "record_count",
                "log_crc32c",
                "compacted",
                "cleaned_ms",
                "replaced",
                "txnindex_size",
                "indexes_size",
            ),
        )
        keys = _fields(obj["keys"], _KEY_FIELDS, "segment keys", optional=("txnindex",))
        try:
            sid = uuid.UUID(hex=_str(obj["segment_id"], "segment_id"))
        except ValueError:
            raise InvalidSegmentError(f"segment_id {obj['segment_id']!r} is not a UUID") from None
        try:
            state = SegmentState(obj["state"])
        except ValueError:
            raise InvalidSegmentError(f"segment {sid.hex}: unknown state {obj['state']!r}") from None
        return cls(
            segment_id=sid,
            base_offset=obj["base_offset"],
            last_offset=obj["last_offset"],
            first_timestamp=obj["first_timestamp"],
            max_timestamp=obj["max_timestamp"],
            size=obj["size"],
            log_sha256=obj["log_sha256"],
            index_size=obj["index_size"],
            timeindex_size=obj["timeindex_size"],
            leader_epoch=obj["leader_epoch"],
            state=state,
            keys=_segment_keys(keys),
            created_ms=obj["created_ms"],
            updated_ms=obj["updated_ms"],
            has_producer_snapshot=obj.get("has_producer_snapshot", False),
            record_count=obj.get("record_count"),
            log_crc32c=_crc32c_field(obj),
            compacted=obj.get("compacted", False),
            cleaned_ms=obj.get("cleaned_ms"),
            replaced=obj.get("replaced", False),
            txnindex_size=_optional_int(obj, "txnindex_size"),
            indexes_size=_optional_int(obj, "indexes_size"),
        )

    def _identity(self) -> tuple[int, int, SegmentKeys]:
        return self.base_offset, self.last_offset, self.keys


_SEGMENT_FIELDS: Final = (
    "segment_id",
    "base_offset",
    "last_offset",
    "first_timestamp",
    "max_timestamp",
    "size",
    "log_sha256",
    "index_size",
    "timeindex_size",
    "leader_epoch",
    "state",
    "keys",
    "created_ms",
    "updated_ms",
    "has_producer_snapshot",
    "record_count",
    "log_crc32c",
    "compacted",
    "cleaned_ms",
    "replaced",
    "txnindex_size",
    "indexes_size",
)
_KEY_FIELDS: Final = (
    "log",
    "index",
    "timeindex",
    "producer_snapshot",
    "leader_epoch_checkpoint",
    "txnindex",
)


def _segment_keys(keys: Mapping[str, Any]) -> SegmentKeys:
    """The segment's keys; ``txnindex`` is derived from ``log`` in entries older than it."""
    named = {k: _str(keys[k], f"keys.{k}") for k in _KEY_FIELDS if k in keys}
    if "txnindex" not in named:
        try:
            named["txnindex"] = txnindex_key_of(named["log"])
        except InvalidRequestError as e:
            raise InvalidSegmentError(str(e)) from None
    return SegmentKeys(**named)


def _optional_int(obj: Mapping[str, Any], name: str) -> Any:
    """An optional field: absent is None, present it must be a value (never null)."""
    if name not in obj:
        return None
    v = obj[name]
    if v is None:
        raise InvalidSegmentError(f"{name} must be an integer, got null")
    return v  # its type and range are checked by RemoteSegment


def _crc32c_field(obj: Mapping[str, Any]) -> int | None:
    """``log_crc32c``: absent in older entries; present, it must be a value (never null)."""
    if "log_crc32c" not in obj:
        return None
    v = obj["log_crc32c"]
    if v is None:
        raise InvalidSegmentError("log_crc32c must be an integer in [0, 4294967295], got null")
    return int(v) if _is_int(v) else v  # a wrong type is refused by RemoteSegment


def _str(v: object, name: str) -> str:
    if not isinstance(v, str):
        raise InvalidSegmentError(f"{name} must be a string, got {type(v).__name__}")
    return v


def _fields(d: object, names: Sequence[str], what: str, optional: Sequence[str] = ()) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise CorruptManifestError(f"{what} must be a JSON object, got {type(d).__name__}")
    missing = [n for n in names if n not in d and n not in optional]
    if missing:
        raise CorruptManifestError(f"{what} is missing field(s) {', '.join(missing)}")
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise CorruptManifestError(
            f"{what} has unknown field(s) {', '.join(unknown)} (written by a newer Strata?)"
        )
    return d


@dataclass(frozen=True, slots=True)
class SpilloverRef:
    """An immutable spillover manifest holding COPIED segments [base_offset, last_offset]."""

    base_offset: int
    last_offset: int
    key: str
    segment_count: int
    size: int
    max_timestamp: int = -1

    def __post_init__(self) -> None:
        for name in ("base_offset", "last_offset", "segment_count", "size", "max_timestamp"):
            if not _is_int(getattr(self, name)):
                raise InvalidSegmentError(f"spillover {self.key!r}: {name} must be an integer")
        if self.base_offset < 0 or self.last_offset < self.base_offset:
            raise InvalidSegmentError(
                f"spillover {self.key!r}: bad range [{self.base_offset}, {self.last_offset}]"
            )
        if self.segment_count < 1 or self.size < 0:
            raise InvalidSegmentError(f"spillover {self.key!r}: bad segment_count or size")
        if not isinstance(self.key, str) or not self.key:
            raise InvalidSegmentError("spillover key must be a non-empty string")

    def contains(self, offset: int) -> bool:
        return self.base_offset <= offset <= self.last_offset

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "key": self.key,
            "segment_count": self.segment_count,
            "size": self.size,
            "max_timestamp": self.max_timestamp,
        }

    @classmethod
    def from_dict(cls, d: object) -> SpilloverRef:
        obj = _fields(d, _SPILL_FIELDS, "spillover reference")
        return cls(**obj)


_SPILL_FIELDS: Final = ("base_offset", "last_offset", "key", "segment_count", "size", "max_timestamp")
_MANIFEST_FIELDS: Final = (
    "format_version",
    "topic",
    "topic_id",
    "partition",
    "revision",
    "log_start_offset",
    "segments",
    "spillover",
    "leader_epoch",
    "cleaned_offset",
)


@dataclass(frozen=True, slots=True)
class PartitionManifest:
    FORMAT_VERSION: ClassVar[int] = 1

    topic: str
    topic_id: uuid.UUID
    partition: int
    revision: int
    log_start_offset: int
    segments: tuple[RemoteSegment, ...]
    spillover: tuple[SpilloverRef, ...] = field(default=())
    leader_epoch: int = -1  # highest writer's leader epoch; -1: single node (not written)
    # Remote compaction: remote offsets below it were compacted against every key of the
    # remote records below it (Kafka's cleaner checkpoint, for the bucket); 0: never.
    cleaned_offset: int = 0

    def __post_init__(self) -> None:
        validate_topic_name(self.topic)
        if not _is_int(self.cleaned_offset) or self.cleaned_offset < 0:
            raise InvalidSegmentError(
                f"cleaned_offset must be a non-negative integer, got {self.cleaned_offset!r}"
            )
        if not _is_int(self.leader_epoch) or self.leader_epoch < -1:
            raise InvalidSegmentError(f"leader_epoch must be an integer >= -1, got {self.leader_epoch!r}")
        if not isinstance(self.topic_id, uuid.UUID):
            raise InvalidSegmentError(f"topic_id must be a UUID, got {self.topic_id!r}")
        for name in ("partition", "revision", "log_start_offset"):
            v = getattr(self, name)
            if not _is_int(v) or v < 0:
                raise InvalidSegmentError(f"{name} must be a non-negative integer, got {v!r}")
        if not isinstance(self.segments, tuple) or not isinstance(self.spillover, tuple):
            raise InvalidSegmentError("segments and spillover must be tuples")
        _check_layout(self.segments, self.spillover)

    @classmethod
    def empty(cls, topic: str, topic_id: uuid.UUID, partition: int) -> PartitionManifest:
        return cls(topic, topic_id, partition, revision=0, log_start_offset=0, segments=())

    # -- serialization --

    def to_dict(self) -> dict[str, Any]:
        d = {
            "format_version": self.FORMAT_VERSION,
            "topic": self.topic,
            "topic_id": self.topic_id.hex,
            "partition": self.partition,
            "revision": self.revision,
            "log_start_offset": self.log_start_offset,
            "segments": [s.to_dict() for s in self.segments],
            "spillover": [r.to_dict() for r in self.spillover],
        }
        if self.leader_epoch >= 0:  # single-node manifests stay exactly as before
            d["leader_epoch"] = self.leader_epoch
        if self.cleaned_offset > 0:  # manifests never compacted remotely stay as before
            d["cleaned_offset"] = self.cleaned_offset
        return d

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, source: str = "manifest") -> PartitionManifest:
        """Parse and validate; CorruptManifestError names ``source`` and the problem."""
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptManifestError(f"{source}: not valid JSON: {e}") from None
        try:
            obj = _fields(doc, _MANIFEST_FIELDS, "manifest", optional=("leader_epoch", "cleaned_offset"))
            if obj["format_version"] != cls.FORMAT_VERSION:
                raise CorruptManifestError(
                    f"unsupported format_version {obj['format_version']!r} "
                    f"(this build reads {cls.FORMAT_VERSION})"
                )
            if not isinstance(obj["segments"], list) or not isinstance(obj["spillover"], list):
                raise CorruptManifestError("segments and spillover must be JSON arrays")
            segments = []
            for i, s in enumerate(obj["segments"]):
                try:
                    segments.append(RemoteSegment.from_dict(s))
                except (StrataError, ValueError, TypeError) as e:
                    raise CorruptManifestError(f"segments[{i}]: {e}") from None
            spillover = []
            for i, r in enumerate(obj["spillover"]):
                try:
                    spillover.append(SpilloverRef.from_dict(r))
                except (StrataError, ValueError, TypeError) as e:
                    raise CorruptManifestError(f"spillover[{i}]: {e}") from None
            try:
                topic_id = uuid.UUID(hex=_str(obj["topic_id"], "topic_id"))
            except ValueError:
                raise CorruptManifestError(f"topic_id {obj['topic_id']!r} is not a UUID") from None
            return cls(
                topic=_str(obj["topic"], "topic"),
                topic_id=topic_id,
                partition=obj["partition"],
                revision=obj["revision"],
                log_start_offset=obj["log_start_offset"],
                segments=tuple(segments),
                spillover=tuple(spillover),
                leader_epoch=obj.get("leader_epoch", -1),
                cleaned_offset=obj.get("cleaned_offset", 0),
            )
        except CorruptManifestError as e:
            raise CorruptManifestError(f"{source}: {e}") from None
        except (StrataError, ValueError, TypeError) as e:
            raise CorruptManifestError(f"{source}: {e}") from None

    # -- queries --

    def copied(self) -> list[RemoteSegment]:
        """Readable segments of this manifest (not spilled ones), by base offset."""
        return [s for s in self.segments if s.state is SegmentState.COPIED]

    def find(self, offset: int) -> RemoteSegment | None:
        """The COPIED segment of this manifest containing ``offset`` (see ``spillover_for``)."""
        for s in self.segments:
            if s.state is SegmentState.COPIED and s.contains(offset):
                return s
        return None

    def spillover_for(self, offset: int) -> SpilloverRef | None:
        for r in self.spillover:
            if r.contains(offset):
                return r
        return None

    def get(self, segment_id: uuid.UUID) -> RemoteSegment | None:
        for s in self.segments:
            if s.segment_id == segment_id:
                return s
        return None

    def first_offset(self) -> int | None:
        """Lowest offset held remotely (spilled or COPIED), or None."""
        if self.spillover:
            return self.spillover[0].base_offset
        copied = self.copied()
        return copied[0].base_offset if copied else None

    def next_offset(self) -> int:
        """The offset after the last remote one; ``log_start_offset`` when nothing is remote."""
        last = -1
        copied = self.copied()
        if copied:
            last = copied[-1].last_offset
        elif self.spillover:
            last = self.spillover[-1].last_offset
        return max(last + 1, self.log_start_offset)

    def remote_size(self) -> int:
        """Bytes of COPIED segments, spilled ones included."""
        return sum(s.size for s in self.copied()) + sum(r.size for r in self.spillover)

    # -- changes (pure: each returns a new manifest; revision is set by ManifestStore) --

    def add_or_update(self, seg: RemoteSegment) -> PartitionManifest:
        """Record ``seg``. Idempotent, so a replayed change is harmless:

        - unknown segment_id: must be COPY_STARTED (a DELETE_STARTED/DELETED one was already
          removed: no change);
        - known segment_id, same state: no change if equal up to ``updated_ms``; a
          COPY_STARTED entry may be refreshed with new metadata, other states may not;
        - known segment_id, new state: must be a valid transition, with the same offsets
          and keys;
        - a COPIED segment overlapping another COPIED or a spilled range: SegmentOverlapError.
        """
        old = self.get(seg.segment_id)
        if old is None:
            if seg.state in (SegmentState.DELETE_STARTED, SegmentState.DELETED):
                return self
            if seg.state is not SegmentState.COPY_STARTED:
                raise InvalidStateTransitionError(
                    f"segment {seg.segment_id.hex} is new: it must start in COPY_STARTED, "
                    f"not {seg.state.value}"
                )
            segments = [*self.segments, seg]
        else:
            if old._identity() != seg._identity():
                raise InvalidSegmentError(
                    f"segment {seg.segment_id.hex}: offsets and keys cannot change "
                    f"([{old.base_offset}, {old.last_offset}] -> [{seg.base_offset}, {seg.last_offset}])"
                )
            if old.state is seg.state:
                if replace(old, updated_ms=seg.updated_ms) == seg:
                    return self
                if old.state is not SegmentState.COPY_STARTED:
                    raise InvalidStateTransitionError(
                        f"segment {seg.segment_id.hex} is {old.state.value}: its metadata cannot change"
                    )
            else:
                check_transition(old.state, seg.state)
            segments = [seg if s.segment_id == seg.segment_id else s for s in self.segments]
        if seg.state is SegmentState.COPIED:
            for other in self.segments:
                if (
                    other.segment_id != seg.segment_id
                    and other.state is SegmentState.COPIED
                    and other.base_offset <= seg.last_offset
                    and seg.base_offset <= other.last_offset
                ):
                    raise SegmentOverlapError(
                        f"segment {seg.segment_id.hex} [{seg.base_offset}, {seg.last_offset}] overlaps "
                        f"COPIED segment {other.segment_id.hex} [{other.base_offset}, {other.last_offset}]"
                    )
            for r in self.spillover:
                if r.base_offset <= seg.last_offset and seg.base_offset <= r.last_offset:
                    raise SegmentOverlapError(
                        f"segment {seg.segment_id.hex} [{seg.base_offset}, {seg.last_offset}] overlaps "
                        f"spilled range [{r.base_offset}, {r.last_offset}]"
                    )
        return replace(self, segments=sorted_segments(segments))

    def remove_deleted(self) -> PartitionManifest:
        kept = tuple(s for s in self.segments if s.state is not SegmentState.DELETED)
        return self if len(kept) == len(self.segments) else replace(self, segments=kept)

    def advance_log_start(self, offset: int) -> PartitionManifest:
        """Raise ``log_start_offset`` (never lowers it)."""
        if not _is_int(offset) or offset < 0:
            raise InvalidRequestError(f"log start offset must be a non-negative integer, got {offset!r}")
        return self if offset <= self.log_start_offset else replace(self, log_start_offset=offset)

    def swap_compacted(
        self,
        old: Sequence[RemoteSegment],
        new: Sequence[RemoteSegment],
        now_ms: int,
        *,
        cleaned_offset: int,
    ) -> PartitionManifest:
        """Remote compaction's swap, applied in one compare-and-swap: the COPIED entries
        ``old`` become DELETE_STARTED (``replaced``; their objects stay readable for a
        grace period), the COPIED entries ``new`` (rewritten from them, under new keys)
        take their place, and ``cleaned_offset`` rises to ``cleaned_offset``.

        ``old`` must still be in the manifest exactly as the compactor read them (COPIED,
        unchanged), else CompactionConflictError: retention, a newer leader or another
        compaction changed them, and the swap is abandoned. ``new`` must cover exactly the
        offsets of ``old``, run by run: every run of consecutive ``old`` entries is replaced
        by entries spanning the same [base, last]. Idempotent: a manifest that already holds
        ``new`` is returned unchanged (a replayed write whose response was lost)."""
        new_ids = {s.segment_id for s in new}
        if new_ids and all(self.get(i) is not None for i in new_ids):
            return self
        if any(self.get(i) is not None for i in new_ids):
            raise CompactionConflictError("some rewritten segments are already in the manifest")
        for s in new:
            if s.state is not SegmentState.COPIED or s.replaced:
                raise InvalidSegmentError(f"rewritten segment {s.segment_id.hex} must be COPIED")
        for s in old:
            cur = self.get(s.segment_id)
            if cur is None or cur != s or cur.state is not SegmentState.COPIED:
                raise CompactionConflictError(
                    f"segment {s.segment_id.hex} [{s.base_offset}, {s.last_offset}] changed since the "
                    "compaction read it"
                )
        if _spans(old) != _spans(new):
            raise InvalidSegmentError("rewritten segments must cover exactly the offsets they replace")
        old_ids = {s.segment_id for s in old}
        segments = [
            replace(s.with_state(SegmentState.DELETE_STARTED, now_ms), replaced=True)
            if s.segment_id in old_ids
            else s
            for s in self.segments
        ]
        segments.extend(new)
        return replace(
            self,
            segments=sorted_segments(segments),
            cleaned_offset=max(self.cleaned_offset, cleaned_offset),
        )

    def replaced_due(self, now_ms: int, grace_ms: int) -> list[RemoteSegment]:
        """``replaced`` entries whose grace period has passed (their objects may go)."""
        return [
            s
            for s in self.segments
            if s.replaced and s.state is SegmentState.DELETE_STARTED and now_ms - s.updated_ms >= grace_ms
        ]

    def drop_spillover(self, key: str) -> PartitionManifest:
        """Forget a spillover manifest (after retention deleted its segments); idempotent."""
        kept = tuple(r for r in self.spillover if r.key != key)
        return self if len(kept) == len(self.spillover) else replace(self, spillover=kept)


def _spans(segments: Sequence[RemoteSegment]) -> list[tuple[int, int]]:
    """Runs of contiguous offsets [base, last] covered by ``segments``."""
    out: list[tuple[int, int]] = []
    for s in sorted(segments, key=lambda s: s.base_offset):
        if out and s.base_offset == out[-1][1] + 1:
            out[-1] = (out[-1][0], s.last_offset)
        else:
            out.append((s.base_offset, s.last_offset))
    return out


def sorted_segments(segments: Sequence[RemoteSegment]) -> tuple[RemoteSegment, ...]:
    return tuple(sorted(segments, key=lambda s: (s.base_offset, s.created_ms, s.segment_id.hex)))


def _check_layout(segments: tuple[RemoteSegment, ...], spillover: tuple[SpilloverRef, ...]) -> None:
    seen: set[uuid.UUID] = set()
    prev_base = -1
    prev_copied: RemoteSegment | None = None
    for s in segments:
        if not isinstance(s, RemoteSegment):
            raise InvalidSegmentError(f"segments must hold RemoteSegment values, got {type(s).__name__}")
        if s.segment_id in seen:
            raise InvalidSegmentError(f"segment {s.segment_id.hex} appears twice")
        seen.add(s.segment_id)
        if s.base_offset < prev_base:
            raise InvalidSegmentError(f"segments are not sorted by base offset at segment {s.segment_id.hex}")
        prev_base = s.base_offset
        if s.state is SegmentState.COPIED:
            if prev_copied is not None and s.base_offset <= prev_copied.last_offset:
                raise SegmentOverlapError(
                    f"COPIED segments {prev_copied.segment_id.hex} [{prev_copied.base_offset}, "
                    f"{prev_copied.last_offset}] and {s.segment_id.hex} "
                    f"[{s.base_offset}, {s.last_offset}] overlap"
                )
            prev_copied = s
    prev_last = -1
    for r in spillover:
        if not isinstance(r, SpilloverRef):
            raise InvalidSegmentError(f"spillover must hold SpilloverRef values, got {type(r).__name__}")
        if r.base_offset <= prev_last:
            raise SegmentOverlapError(f"spillover ranges overlap or are unsorted at {r.key!r}")
        prev_last = r.last_offset
    if spillover:
        for s in segments:
            if s.state is SegmentState.COPIED and s.base_offset <= prev_last:
                raise SegmentOverlapError(
                    f"COPIED segment {s.segment_id.hex} starts at {s.base_offset}, inside the spilled "
                    f"offsets (up to {prev_last})"
                )


# --- spillover objects ------------------------------------------------------------------------

_SPILL_DOC_FIELDS: Final = (
    "format_version",
    "topic",
    "topic_id",
    "partition",
    "base_offset",
    "last_offset",
    "segments",
)


def spillover_to_json(m: PartitionManifest, segs: Sequence[RemoteSegment]) -> bytes:
    doc = {
        "format_version": PartitionManifest.FORMAT_VERSION,
        "topic": m.topic,
        "topic_id": m.topic_id.hex,
        "partition": m.partition,
        "base_offset": segs[0].base_offset,
        "last_offset": segs[-1].last_offset,
        "segments": [s.to_dict() for s in segs],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def parse_spillover(data: bytes, ref: SpilloverRef) -> tuple[RemoteSegment, ...]:
    """The segments of a spillover object, checked against the reference that named it."""
    try:
        obj = _fields(json.loads(data), _SPILL_DOC_FIELDS, "spillover manifest")
        if obj["format_version"] != PartitionManifest.FORMAT_VERSION:
            raise CorruptManifestError(f"unsupported format_version {obj['format_version']!r}")
        if not isinstance(obj["segments"], list):
            raise CorruptManifestError("segments must be a JSON array")
        segs = tuple(RemoteSegment.from_dict(s) for s in obj["segments"])
        if (
            len(segs) != ref.segment_count
            or obj["base_offset"] != ref.base_offset
            or obj["last_offset"] != ref.last_offset
            or any(s.state is not SegmentState.COPIED for s in segs)
        ):
            raise CorruptManifestError("content does not match the reference in the partition manifest")
        _check_layout(segs, ())
        return segs
    except CorruptManifestError as e:
        raise CorruptManifestError(f"{ref.key}: {e}") from None
    except (StrataError, ValueError, TypeError) as e:
        raise CorruptManifestError(f"{ref.key}: {e}") from None


# A pure change to a manifest: the new one, or None for "no change"; what
# ``tiering.manifest_store.ManifestStore.update`` applies by compare-and-swap.
Mutation = Callable[[PartitionManifest], PartitionManifest | None]


# --- topic manifests --------------------------------------------------------------------------


def topic_manifest_to_json(topic_json: Mapping[str, Any]) -> tuple[str, bytes]:
    """(topic name, bytes) of ``topics/<name>.json`` for ``{"name", "topic_id", "partitions",
    "configs"}`` (``topic_id`` as a UUID string; ``format_version`` is added).
    InvalidRequestError names what is wrong."""
    doc = _check_topic_doc(dict(topic_json), InvalidRequestError, "topic manifest")
    doc["format_version"] = PartitionManifest.FORMAT_VERSION
    return doc["name"], json.dumps(doc, sort_keys=True, indent=1).encode("utf-8")


def topic_manifest_from_json(data: bytes, key: str, topic: str) -> dict[str, Any]:
    """The topic manifest document stored at ``key`` for ``topic`` (without
    ``format_version``); CorruptManifestError naming ``key`` if it is not one."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptManifestError(f"{key}: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise CorruptManifestError(f"{key}: must be a JSON object")
    version = doc.pop("format_version", None)
    if version != PartitionManifest.FORMAT_VERSION:
        raise CorruptManifestError(f"{key}: unsupported format_version {version!r}")
    doc = _check_topic_doc(doc, CorruptManifestError, key)
    if doc["name"] != topic:
        raise CorruptManifestError(f"{key}: names topic {doc['name']!r}")
    return doc


def _check_topic_doc(doc: dict[str, Any], error: type[StrataError], where: str) -> dict[str, Any]:
    allowed = {"name", "topic_id", "partitions", "configs"}
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise error(f"{where}: unknown field(s) {', '.join(unknown)}")
    name = doc.get("name")
    try:
        validate_topic_name(name)  # type: ignore[arg-type]
    except StrataError as e:
        raise error(f"{where}: {e}") from None
    tid = doc.get("topic_id")
    try:
        parsed = uuid.UUID(str(tid)) if isinstance(tid, str | uuid.UUID) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise error(f"{where}: topic_id {tid!r} is not a UUID")
    partitions = doc.get("partitions")
    if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
        raise error(f"{where}: partitions must be a positive integer, got {partitions!r}")
    configs = doc.get("configs", {})
    if not isinstance(configs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in configs.items()
    ):
        raise error(f"{where}: configs must map strings to strings")
    return {"name": name, "topic_id": str(parsed), "partitions": partitions, "configs": dict(configs)}
