"""The bucket key layout: the one place that decides where every tiered object lives.

Keys are relative to the store's prefix (``s3://bucket/<prefix>/`` or ``file:///root/``)::

    topics/<topic>.json                                      topic manifest (name, id, partitions, configs)
    <h>/<topic>-<topic_id>/<partition>/manifest.json         partition manifest (JSON, compare-and-swap)
    <h>/<topic>-<topic_id>/<partition>/spillover/<base>-<last>-<digest>.json
                                                             immutable spillover manifest (older segments)
    <h>/<topic>-<topic_id>/<partition>/segments/<base>-<segment_id>.log
                                                  ... .index, .timeindex, .snapshot, .leader-epoch-checkpoint,
                                                      .txnindex (only where the segment has one),
                                                      .indexes (.index + .timeindex + .snapshot in one
                                                      object: segments uploaded since issue 39)

- ``<h>`` is the first ``HASH_PREFIX_LEN`` hex characters of
  ``sha256("<topic>-<topic_id>/<partition>")``. S3 partitions its key space by prefix,
  so a hash first spreads hot partitions over many key ranges (request-rate limits apply
  per prefix); the rest of the key stays human-readable.
- ``<topic_id>`` is the topic's UUID as 32 lowercase hex digits: a topic deleted and
  recreated under the same name never shares objects with its predecessor.
- ``<base>``/``<last>`` are offsets as 20 zero-padded decimal digits (Kafka's file
  naming), so lexicographic order is offset order.
- ``<segment_id>`` is a fresh UUID per upload attempt and per segment rewritten by remote
  compaction (tiering/compactor.py): a re-upload after a crash or a compacted rewrite of
  an offset range writes new keys and never overwrites an object that some manifest
  revision, an in-flight reader or the chunk cache (keyed by object key) may still use.
- ``<digest>`` is a short hash of the spillover manifest's content, so two writers racing
  to spill the same offset range never overwrite each other's (possibly different) object.

Topic names are Kafka-legal (``[a-zA-Z0-9._-]``, at most 249 characters), so they need
no escaping. ``<topic>-<topic_id>`` then has up to 282 bytes: S3 takes it (keys have up to
1,024), and the file:// store, where a segment becomes a file name of at most 255 bytes,
spans a longer segment over several directories (``hot.naming.key_to_path_parts``), so
this layout is the same for every name and every store. Everything here is pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from hot.errors import InvalidRequestError
from hot.topics import validate_topic_name

HASH_PREFIX_LEN: Final = 4  # hex chars: 65536 key ranges
TOPICS_PREFIX: Final = "topics/"
MANIFEST_NAME: Final = "manifest.json"
SEGMENTS_DIR: Final = "segments"
SPILLOVER_DIR: Final = "spillover"
_OFFSET_WIDTH: Final = 20
_MAX_OFFSET: Final = 10**_OFFSET_WIDTH - 1


class SegmentFileKind(StrEnum):
    """The objects uploaded for one segment; the value is the key's file extension."""

    LOG = "log"
    INDEX = "index"
    TIMEINDEX = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
    # Kafka's transaction index (hot.txn_index): uploaded only for a segment holding an
    # aborted transaction's marker (the manifest's ``txnindex_size`` says so).
    TXNINDEX = "txnindex"
    # The .index, .timeindex and producer snapshot in one object, in that order (the
    # manifest's ``indexes_size`` says a segment has one): one PUT per segment instead of
    # three, and one GET serves both indexes of a remote read.
    INDEXES = "indexes"


@dataclass(frozen=True, slots=True)
class SegmentKeys:
    log: str
    index: str
    timeindex: str
    producer_snapshot: str
    leader_epoch_checkpoint: str
    txnindex: str

    def all(self) -> tuple[str, ...]:
        """Every key the segment may have objects under (deletion: a missing one is fine)."""
        return (
            self.log,
            self.index,
            self.timeindex,
            self.producer_snapshot,
            self.leader_epoch_checkpoint,
            self.txnindex,
            self.indexes,
        )

    @property
    def indexes(self) -> str:
        """The ``.indexes`` key beside the ``.log`` key (derived, so no manifest stores it)."""
        return _sibling(self.log, SegmentFileKind.INDEXES)

    def for_kind(self, kind: SegmentFileKind) -> str:
        return {
            SegmentFileKind.LOG: self.log,
            SegmentFileKind.INDEX: self.index,
            SegmentFileKind.TIMEINDEX: self.timeindex,
            SegmentFileKind.PRODUCER_SNAPSHOT: self.producer_snapshot,
            SegmentFileKind.LEADER_EPOCH_CHECKPOINT: self.leader_epoch_checkpoint,
            SegmentFileKind.TXNINDEX: self.txnindex,
            SegmentFileKind.INDEXES: self.indexes,
        }[kind]


@dataclass(frozen=True, slots=True)
class ParsedPartitionKey:
    """A key under a partition root, split into its parts; ``rest`` is what follows the root."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    rest: str


@dataclass(frozen=True, slots=True)
class ParsedSegmentKey:
    topic: str
    topic_id: uuid.UUID
    partition: int
    base_offset: int
    segment_id: uuid.UUID
    kind: SegmentFileKind


def _check_partition(partition: int) -> None:
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise InvalidRequestError(f"partition must be a non-negative integer, got {partition!r}")


def _check_offset(name: str, offset: int) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= _MAX_OFFSET:
        raise InvalidRequestError(f"{name} must be an integer in [0, {_MAX_OFFSET}], got {offset!r}")


def hash_prefix(topic: str, topic_id: uuid.UUID, partition: int) -> str:
    body = f"{topic}-{topic_id.hex}/{partition}"
    return hashlib.sha256(body.encode("ascii")).hexdigest()[:HASH_PREFIX_LEN]


def partition_root(topic: str, topic_id: uuid.UUID, partition: int) -> str:
    """``<h>/<topic>-<topic_id hex>/<partition>`` (no trailing slash)."""
    validate_topic_name(topic)
    _check_partition(partition)
    if not isinstance(topic_id, uuid.UUID):
        raise InvalidRequestError(f"topic_id must be a UUID, got {topic_id!r}")
    return f"{hash_prefix(topic, topic_id, partition)}/{topic}-{topic_id.hex}/{partition}"


def manifest_key(topic: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{partition_root(topic, topic_id, partition)}/{MANIFEST_NAME}"


def spillover_prefix(topic: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{partition_root(topic, topic_id, partition)}/{SPILLOVER_DIR}/"


def spillover_manifest_key(
    topic: str,
    topic_id: uuid.UUID,
    partition: int,
    base_offset: int,
    last_offset: int,
    *,
    digest: str = "",
) -> str:
    """``.../spillover/<base>-<last>[-<digest>].json``; ``digest`` (hex) names the content."""
    _check_offset("base_offset", base_offset)
    _check_offset("last_offset", last_offset)
    if last_offset < base_offset:
        raise InvalidRequestError(f"spillover range [{base_offset}, {last_offset}] is empty")
    if digest and not re.fullmatch(r"[0-9a-f]{1,64}", digest):
        raise InvalidRequestError(f"spillover digest must be lowercase hex, got {digest!r}")
    tail = f"-{digest}" if digest else ""
    return (
        f"{spillover_prefix(topic, topic_id, partition)}"
        f"{base_offset:0{_OFFSET_WIDTH}d}-{last_offset:0{_OFFSET_WIDTH}d}{tail}.json"
    )


def segments_prefix(topic: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{partition_root(topic, topic_id, partition)}/{SEGMENTS_DIR}/"


def segment_keys(
    topic: str, topic_id: uuid.UUID, partition: int, base_offset: int, segment_id: uuid.UUID
) -> SegmentKeys:
    _check_offset("base_offset", base_offset)
    if not isinstance(segment_id, uuid.UUID):
        raise InvalidRequestError(f"segment_id must be a UUID, got {segment_id!r}")
    stem = f"{segments_prefix(topic, topic_id, partition)}{base_offset:0{_OFFSET_WIDTH}d}-{segment_id.hex}"
    return SegmentKeys(
        log=f"{stem}.{SegmentFileKind.LOG.value}",
        index=f"{stem}.{SegmentFileKind.INDEX.value}",
        timeindex=f"{stem}.{SegmentFileKind.TIMEINDEX.value}",
        producer_snapshot=f"{stem}.{SegmentFileKind.PRODUCER_SNAPSHOT.value}",
        leader_epoch_checkpoint=f"{stem}.{SegmentFileKind.LEADER_EPOCH_CHECKPOINT.value}",
        txnindex=f"{stem}.{SegmentFileKind.TXNINDEX.value}",
    )


def txnindex_key_of(log_key: str) -> str:
    """The ``.txnindex`` key beside a segment's ``.log`` key: for manifest entries written
    before the transaction index was tiered, whose ``keys`` lack it."""
    return _sibling(log_key, SegmentFileKind.TXNINDEX)


def _sibling(log_key: str, kind: SegmentFileKind) -> str:
    suffix = f".{SegmentFileKind.LOG.value}"
    if not log_key.endswith(suffix):
        raise InvalidRequestError(f"segment log key {log_key!r} does not end with {suffix}")
    return f"{log_key[: -len(suffix)]}.{kind.value}"


def topic_manifest_key(topic: str) -> str:
    validate_topic_name(topic)
    return f"{TOPICS_PREFIX}{topic}.json"


def parse_topic_manifest_key(key: str) -> str | None:
    """The topic name of a ``topics/<topic>.json`` key; None for anything else."""
    if not key.startswith(TOPICS_PREFIX) or not key.endswith(".json"):
        return None
    name = key[len(TOPICS_PREFIX) : -len(".json")]
    if "/" in name:
        return None
    try:
        validate_topic_name(name)
    except Exception:
        return None
    return name


_PARTITION_KEY: Final = re.compile(
    rf"(?P<h>[0-9a-f]{{{HASH_PREFIX_LEN}}})/(?P<topic>[a-zA-Z0-9._-]+)-(?P<tid>[0-9a-f]{{32}})"
    r"/(?P<partition>0|[1-9][0-9]*)/(?P<rest>.+)"
)
_SEGMENT_NAME: Final = re.compile(
    rf"{SEGMENTS_DIR}/(?P<base>[0-9]{{{_OFFSET_WIDTH}}})-(?P<sid>[0-9a-f]{{32}})\.(?P<kind>[a-z-]+)"
)


def parse_partition_key(key: str) -> ParsedPartitionKey | None:
    """Split a key under some partition root; None when the key is not in this layout.

    The hash prefix must match, so an unrelated object that merely looks similar is not
    mistaken for Strata's."""
    m = _PARTITION_KEY.fullmatch(key)
    if m is None:
        return None
    topic = m["topic"]
    try:
        validate_topic_name(topic)
    except Exception:
        return None
    topic_id = uuid.UUID(hex=m["tid"])
    partition = int(m["partition"])
    if hash_prefix(topic, topic_id, partition) != m["h"]:
        return None
    return ParsedPartitionKey(topic, topic_id, partition, m["rest"])


def parse_segment_key(key: str) -> ParsedSegmentKey | None:
    """The parts of a segment object key (any of its kinds); None for other keys."""
    p = parse_partition_key(key)
    if p is None:
        return None
    m = _SEGMENT_NAME.fullmatch(p.rest)
    if m is None:
        return None
    try:
        kind = SegmentFileKind(m["kind"])
    except ValueError:
        return None
    return ParsedSegmentKey(p.topic, p.topic_id, p.partition, int(m["base"]), uuid.UUID(hex=m["sid"]), kind)


ICEBERG_PREFIX: Final = "iceberg/"


def iceberg_table_root(topic: str, topic_id: uuid.UUID) -> str:
    """``iceberg/<topic>-<topic_id hex>``: the location of the topic's Iceberg table
    (spark.iceberg), with Iceberg's own ``metadata/`` and ``data/`` below it. No hash
    prefix: one table per topic, written about once a minute, is no request-rate hot spot,
    and engines list it by this path. The topic id keeps a recreated topic's table apart."""
    validate_topic_name(topic)
    if not isinstance(topic_id, uuid.UUID):
        raise InvalidRequestError(f"topic_id must be a UUID, got {topic_id!r}")
    return f"{ICEBERG_PREFIX}{topic}-{topic_id.hex}"


def iceberg_dlq_root(topic: str, topic_id: uuid.UUID) -> str:
    """``<table root>~dlq``: the topic's dead-letter table (``iceberg.invalid.record.action
    = dlq_table``). A sibling of the table, never inside it: an engine's orphan-file
    cleanup of the table lists everything under its location. No topic name has a ``~``."""
    return f"{iceberg_table_root(topic, topic_id)}~dlq"


def iceberg_data_key(
    topic: str, topic_id: uuid.UUID, partition_path: str, file_id: uuid.UUID, *, dead_letters: bool = False
) -> str:
    """A data file of the topic's table (or of its dead-letter table):
    ``<root>/data/[<partition path>/]<file_id>.parquet``; a fresh ``file_id`` per write, so
    a rewrite after a crash never overwrites a file some snapshot references."""
    path = f"{partition_path.strip('/')}/" if partition_path.strip("/") else ""
    root = iceberg_dlq_root(topic, topic_id) if dead_letters else iceberg_table_root(topic, topic_id)
    return f"{root}/data/{path}{file_id.hex}.parquet"
