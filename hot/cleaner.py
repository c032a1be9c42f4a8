"""Log compaction (Kafka's LogCleaner): keep the latest record of every key.

A ``LogCleaner`` serves every log of a ``LogManager`` whose ``cleanup.policy`` includes
``compact``. One pass over a log:

1. Take the cleanable range: sealed segments (never the active one) entirely below the
   high watermark whose newest record is older than ``min.compaction.lag.ms``. Its head
   ``[first dirty offset, end)`` is dirty (not cleaned since it was written), the rest is
   clean. The first dirty offset is ``Log.first_dirty_offset`` (the partition's
   ``cleaner-offset-checkpoint`` file).
2. Clean only if dirty bytes / cleanable bytes >= ``min.cleanable.dirty.ratio``, or the
   oldest dirty record is older than ``max.compaction.lag.ms``, or (tiered logs) uploads
   wait for it (``Log.upload_waits_for_cleaner``).
3. Build the key -> latest offset map (``OffsetMap``) over the dirty segments, whole
   segments only; when the map is full the dirty prefix that fit is cleaned and the rest
   waits for the next pass (Kafka does the same).
4. Rewrite each group of consecutive segments (Kafka's groupSegmentsBySize: together no
   larger than ``segment.bytes``) into one segment, keeping a record unless the map holds
   a later offset for its key. In the dirty range the survivors of a batch are exactly
   the map's offsets inside it (counted by bisecting the sorted offsets), so a batch
   whose records all or none survive is decided from its header alone, never
   decompressed or scanned. Batches whose records all survive are copied byte for
   byte; others are re-encoded with the same base offset, last offset delta, producer
   id / epoch / base sequence, leader epoch and compression, so offsets keep their gaps
   and idempotent-producer metadata stays valid. A batch left without records is dropped,
   except that its header alone is kept (Kafka's rule) when it holds its producer's last
   sequence, and the group's last batch is kept so the segment still ends where it did.
   Control batches are kept. Keyless records (possible only if the policy changed after
   they were written) are dropped and counted, as Kafka does.
   Transactions (hot.txn_cleaning): only segments below the first unstable offset are
   cleanable; batches of aborted transactions (``Log.collect_aborted_transactions`` over
   the cleanable range) are neither mapped nor kept; markers are kept, and with them every
   transaction index entry of the sources.
5. Tombstones (null value) are dropped once the segment holding them was cleaned more
   than ``delete.retention.ms`` ago: a cleaned segment's mtime is the time it was first
   cleaned (re-cleaning keeps the sources' mtime).
6. ``Log.replace_segments`` swaps the cleaned segment in (crash-safe, see its docstring),
   then the first dirty offset moves to the end of the mapped range.

I/O is throttled to ``io_max_bytes_per_second`` (bytes read plus bytes written). The
offset map caps the number of keys at ``dedupe_buffer_size // 136``: a 16-byte MD5 digest
(or the key itself when shorter than 16 bytes) and an offset per key cost about 136 bytes
as a Python dict entry (Kafka's packed map needs 24), so the setting bounds the memory
actually used.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from crc32c import crc32c

from hot.batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, Compression
from hot.compression import compress, decompress
from hot.errors import CorruptRecordError, InvalidConfigError, StorageError, StrataError
from hot.log import CLEANED_SUFFIX, CleanerView, Log
from hot.offset_index import MAX_RELATIVE
from hot.segment import SUFFIXES, BatchInfo, Segment, segment_name
from hot.txn_cleaning import AbortedRanges

logger = logging.getLogger(__name__)

# What one key costs in the map: a 16-byte digest and an offset are 24 bytes in Kafka's
# SkimpyOffsetMap, but ~133 bytes as a Python dict entry (bytes object, int, hash slot;
# measured with tracemalloc), so the dedupe buffer size bounds real memory.
OFFSET_MAP_ENTRY_BYTES: Final = 136
DEFAULT_DEDUPE_BUFFER_SIZE: Final = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_BACKOFF_MS: Final = 15_000  # log.cleaner.backoff.ms
_CRC: Final = struct.Struct(">I")
_CRC_POS: Final = 17
_CONTROL_BIT: Final = 0x20
_TIMESTAMP_TYPE_BIT: Final = 0x08
_READ_CHUNK: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-wide cleaner settings (Kafka's ``log.cleaner.*``)."""

    enable: bool = True  # log.cleaner.enable
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE  # log.cleaner.dedupe.buffer.size
    io_max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int = DEFAULT_BACKOFF_MS  # log.cleaner.backoff.ms

    def __post_init__(self) -> None:
        if self.dedupe_buffer_size < OFFSET_MAP_ENTRY_BYTES:
            raise ValueError(f"log.cleaner.dedupe.buffer.size must be >= {OFFSET_MAP_ENTRY_BYTES}")
        if not self.io_max_bytes_per_second > 0:
            raise ValueError("log.cleaner.io.max.bytes.per.second must be > 0")
        if self.backoff_ms < 0:
            raise ValueError("log.cleaner.backoff.ms must be >= 0")


CLEANER_NAMES: Final = {
    "log.cleaner.enable": "enable",
    "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
    "log.cleaner.io.max.bytes.per.second": "io_max_bytes_per_second",
    "log.cleaner.backoff.ms": "backoff_ms",
    # Kafka's cleaner thread count: one thread serves every log here; only 0 (= disabled)
    # and 1 are accepted, so a Kafka config keeps working.
    "log.cleaner.threads": "threads",
}
# STRATA_LOG_CLEANER_ENABLE, ... (Kafka name upper-cased, dots as underscores)
CLEANER_ENV_NAMES: Final = {"STRATA_" + n.upper().replace(".", "_"): n for n in CLEANER_NAMES}


def cleaner_config_from_kafka(values: Mapping[str, object]) -> CleanerConfig:
    """A CleanerConfig from Kafka-named broker settings (TOML scalars or strings);
    InvalidConfigError names the setting at fault. Unknown names are refused."""
    changes: dict[str, object] = {}
    for name, raw in values.items():
        field_name = CLEANER_NAMES.get(name)
        if field_name is None:
            raise InvalidConfigError(f"unknown cleaner setting {name!r} (known: {', '.join(CLEANER_NAMES)})")
        text = str(raw).strip().lower() if not isinstance(raw, bool) else ("true" if raw else "false")
        try:
            if field_name == "enable":
                if text not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError
                changes["enable"] = text in ("true", "1", "yes", "on")
            elif field_name == "io_max_bytes_per_second":
                changes[field_name] = float(text)
            elif field_name == "threads":
                threads = int(text)
                if threads not in (0, 1):
                    raise InvalidConfigError(f"{name}: only 0 (off) or 1 are supported, got {threads}")
                if threads == 0:
                    changes["enable"] = False
            else:
                changes[field_name] = int(text)
        except ValueError:
            raise InvalidConfigError(f"{name}: bad value {raw!r}") from None
    try:
        return CleanerConfig(**changes)  # type: ignore[arg-type]
    except ValueError as e:
        raise InvalidConfigError(str(e)) from None


class OffsetMap:
    """Key digest (MD5, 16 bytes) -> latest offset, at most ``memory // OFFSET_MAP_ENTRY_BYTES`` keys.

    Two keys with the same digest would make the older one's records disappear; with MD5
    that takes ~2^64 keys, the risk Kafka accepts too."""

    def __init__(self, memory: int) -> None:
        self.slots = max(1, memory // OFFSET_MAP_ENTRY_BYTES)
        self._map: dict[bytes, int] = {}
        self.keyless = 0  # keyless records met while mapping (a hint: never decreases)

    def __len__(self) -> int:
        return len(self._map)

    @staticmethod
    def digest(key: bytes) -> bytes:
        """The map's identity of ``key``: the key itself when shorter than 16 bytes (no
        hashing, no collision; costs no more memory than a digest), else its 16-byte MD5
        (the lengths keep the two kinds apart)."""
        if len(key) < 16:
            return key
        return hashlib.md5(key, usedforsecurity=False).digest()

    def sorted_offsets(self) -> list[int]:
        """Every offset in the map, ascending (``survivors`` counts records per batch)."""
        return sorted(self._map.values())

    def put(self, digest: bytes, offset: int) -> int | None:
        """Record ``offset`` as the latest for ``digest``; returns the previous offset (-1
        if none), or None if the map is full and ``digest`` is new."""
        prev = self._map.get(digest, -1)
        if prev < 0 and len(self._map) >= self.slots:
            return None
        self._map[digest] = offset
        return prev

    def undo(self, changes: Sequence[tuple[bytes, int]]) -> None:
        """Revert ``put``s, given (digest, previous offset) newest first."""
        for digest, prev in changes:
            if prev < 0:
                del self._map[digest]
            else:
                self._map[digest] = prev

    def get(self, digest: bytes) -> int:
        """The latest offset recorded for ``digest``, -1 if none."""
        return self._map.get(digest, -1)

    def clear(self) -> None:
        self._map.clear()
        self.keyless = 0


class Throttler:
    """Blocks the calling thread so that ``take`` is called for at most ``rate`` bytes/s."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._start = clock()
        self._taken = 0

    def take(self, n: int, stop: threading.Event | None = None) -> None:
        if self.rate == float("inf"):
            return
        self._taken += n
        ahead = self._taken / self.rate - (self._clock() - self._start)
        if ahead > 0:
            if stop is not None:
                stop.wait(ahead)
            else:
                time.sleep(ahead)


@dataclass(slots=True)
class CleanStats:
    """What one pass over one log did."""

    segments_in: int = 0
    segments_out: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    keyless_dropped: int = 0
    empty_batches_kept: int = 0
    aborted_records_dropped: int = 0  # records of aborted transactions removed
    first_dirty: int = 0
    cleaned_to: int = 0
    elapsed_s: float = 0.0
    aborted: bool = False
    groups: list[tuple[int, int]] = field(default_factory=list)  # (base, next offset) swapped in


# --- pure record scanning and batch rebuilding ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RawRecord:
    """Where one record sits in a batch's (decompressed) records payload, and what the
    cleaner needs of it. Deltas are relative to the batch's base offset / timestamp."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    tombstone: bool
    start: int
    end: int


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint/varlong at ``pos``: (value, position after it)."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    u = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= len(data) or shift > 63:
            raise CorruptRecordError(f"bad varint at byte {pos} of a records payload")
        b = data[pos]
        u |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return (u >> 1) ^ -(u & 1), pos
        shift += 7


def scan_records(data: bytes, count: int) -> list[RawRecord]:
    """The ``count`` records of a decompressed payload: key, tombstone flag and byte range
    only (values and headers are skipped, not decoded; one-byte varints decoded inline)."""
    out: list[RawRecord] = []
    append = out.append
    pos = 0
    n = len(data)
    try:
        for _ in range(count):
            start = pos
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # records of 64 to 8191 bytes
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = _varint(data, pos)
            end = pos + length
            if length < 0 or end > n:
                raise CorruptRecordError(f"record of {length} bytes at byte {start} overruns the payload")
            pos += 1  # record attributes
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = _varint(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = _varint(data, pos)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                klen, pos = _varint(data, pos)
            key = None
            if klen >= 0:
                key = data[pos : pos + klen]
                pos += klen
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                vlen, pos = _varint(data, pos)
            if pos > end:
                raise CorruptRecordError(f"record at byte {start} overruns its length")
            append(RawRecord(off_delta, ts_delta, key, vlen < 0, start, end))
            pos = end
    except IndexError:
        raise CorruptRecordError(f"truncated record at byte {pos} of a records payload") from None
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes after the last record of a payload")
    return out


def scan_keys(data: bytes, count: int) -> list[tuple[int, bytes | None]]:
    """(offset delta, key) of the ``count`` records of a decompressed payload: what the
    offset map needs, with the one-byte varints (most of them) decoded inline."""
    out: list[tuple[int, bytes | None]] = []
    append = out.append
    pos = 0
    n = len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # records of 64 to 8191 bytes
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = _varint(data, pos)
            end = pos + length
            if length < 0 or end > n:
                raise CorruptRecordError(f"record of {length} bytes at byte {pos} overruns the payload")
            p = pos + 1  # record attributes
            if data[p] < 0x80:  # timestamp delta
                p += 1
            else:
                p = _varint(data, p)[1]
            b = data[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                off_delta, p = _varint(data, p)
            b = data[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                klen, p = _varint(data, p)
            if p + max(klen, 0) > end:
                raise CorruptRecordError(f"record at byte {pos} overruns its length")
            append((off_delta, data[p : p + klen] if klen >= 0 else None))
            pos = end
    except IndexError:
        raise CorruptRecordError(f"truncated record at byte {pos} of a records payload") from None
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes after the last record of a payload")
    return out


def batch_records(raw: bytes) -> tuple[bytes, list[RawRecord]]:
    """The decompressed records payload of a (non-control) batch and its records."""
    h = HEADER.unpack_from(raw)
    payload = raw[HEADER_SIZE:]
    if h[12] == 0 and not payload:
        return b"", []
    data = decompress(h[5] & 0x07, payload) if h[5] & 0x07 else payload
    return data, scan_records(data, h[12])


def rebuild_batch(header: tuple[int, ...], data: bytes, kept: Sequence[RawRecord]) -> bytes:
    """A batch with ``header``'s fields (HEADER.unpack order) holding only the ``kept``
    records of its payload ``data``, copied as they are.

    baseOffset, lastOffsetDelta, baseTimestamp, producer fields, leader epoch and
    attributes (compression) are kept, so record offsets and sequence numbers stay what
    they were (record deltas are relative to the unchanged base); an empty ``kept`` gives
    a header-only batch (recordsCount 0, no payload), the form Kafka's cleaner writes to
    preserve producer state."""
    (base, _, epoch, magic, _, attrs, delta, base_ts, max_ts, pid, pepoch, bseq, _) = header
    if kept:
        body = b"".join(data[r.start : r.end] for r in kept)
        payload = compress(Compression(attrs & 0x07), body) if attrs & 0x07 else body
        if not attrs & _TIMESTAMP_TYPE_BIT:  # LogAppendTime keeps the broker's stamp
            max_ts = base_ts + max(r.timestamp_delta for r in kept)
    else:
        payload = b""
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        base,
        MIN_BATCH_LENGTH + len(payload),
        epoch,
        magic,
        0,
        attrs,
        delta,
        base_ts,
        max_ts,
        pid,
        pepoch,
        bseq,
        len(kept),
    )
    out += payload
    _CRC.pack_into(out, _CRC_POS, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def map_batch(
    raw: bytes,
    offset_map: OffsetMap,
    changes: list[tuple[bytes, int]],
    aborted: AbortedRanges | None = None,
) -> bool:
    """Record the keys of one batch in ``offset_map`` (control batches have none, and
    a batch of an ``aborted`` transaction is not recorded), appending (digest, previous
    offset) to ``changes`` for ``OffsetMap.undo``; False when the map is full (the batch
    is then only partly recorded: undo ``changes``)."""
    h = HEADER.unpack_from(raw)
    if h[5] & _CONTROL_BIT or h[12] == 0:
        return True
    if aborted and aborted.drops(h[5], h[9], h[0]):
        return True
    base = h[0]
    payload = raw[HEADER_SIZE:]
    data = decompress(h[5] & 0x07, payload) if h[5] & 0x07 else payload
    digest_of = OffsetMap.digest
    m = offset_map._map  # OffsetMap.put inlined: this loop runs once per record
    slots = offset_map.slots
    record = changes.append
    for off_delta, key in scan_keys(data, h[12]):
        if key is None:
            offset_map.keyless += 1
            continue
        digest = digest_of(key)
        prev = m.get(digest, -1)
        if prev < 0 and len(m) >= slots:
            return False
        m[digest] = base + off_delta
        record((digest, prev))
    return True


def filter_batch(
    raw: bytes,
    base_offset: int,
    last_offset: int,
    offset_map: OffsetMap,
    *,
    drop_tombstones: bool,
    producer_last_offsets: Mapping[int, int],
    last_group_batch: int,
    stats: CleanStats,
    mapped_offsets: Sequence[int] | None = None,
    aborted: AbortedRanges | None = None,
) -> bytes | None:
    """What cleaning keeps of one batch (shared by the local cleaner and the remote
    compaction of tiering/compactor.py): ``raw`` itself when every record survives, a
    rebuilt batch holding the survivors, a header-only batch when none survives but the
    batch holds its producer's last sequence (``producer_last_offsets``: producer id ->
    offset of its last batch) or is the group's last (``last_group_batch``), else None.
    A record survives unless ``offset_map`` holds a later offset for its key, it is
    keyless, or it is a tombstone and ``drop_tombstones``. Control batches are kept; a
    batch of an ``aborted`` transaction keeps no record (hot.txn_cleaning).

    ``mapped_offsets`` (``OffsetMap.sorted_offsets``), given only for a batch whose every
    key was mapped (the dirty range): the records surviving are exactly the map's offsets
    inside the batch, so a batch where all or none survive is decided from the header,
    without decompressing or scanning its records."""
    h = HEADER.unpack_from(raw)
    if h[5] & _CONTROL_BIT:
        return raw
    if aborted and aborted.drops(h[5], h[9], base_offset):
        stats.records_read += h[12]
        stats.aborted_records_dropped += h[12]
        return _emptied(h, last_offset, producer_last_offsets, last_group_batch, stats)
    if mapped_offsets is not None and not drop_tombstones:
        count = h[12]
        survivors = bisect.bisect_right(mapped_offsets, last_offset) - bisect.bisect_left(
            mapped_offsets, base_offset
        )
        if survivors == count:  # every record is its key's latest (so none is keyless)
            stats.records_read += count
            stats.records_kept += count
            return raw
        if survivors == 0:
            stats.records_read += count
            if count and offset_map.keyless:  # keyless records exist: count them
                stats.keyless_dropped += sum(1 for _, k in _keys_of(h, raw) if k is None)
            return _emptied(h, last_offset, producer_last_offsets, last_group_batch, stats)
    data, records = batch_records(raw)
    kept: list[RawRecord] = []
    for rec in records:
        if rec.key is None:
            stats.keyless_dropped += 1
            continue
        latest = offset_map.get(OffsetMap.digest(rec.key))
        if latest > base_offset + rec.offset_delta:
            continue
        if rec.tombstone and drop_tombstones:
            stats.tombstones_dropped += 1
            continue
        kept.append(rec)
    stats.records_read += len(records)
    stats.records_kept += len(kept)
    if len(kept) == len(records):
        return raw
    if kept:
        return rebuild_batch(h, data, kept)
    return _emptied(h, last_offset, producer_last_offsets, last_group_batch, stats)


def _emptied(
    h: tuple[int, ...],
    last_offset: int,
    producer_last_offsets: Mapping[int, int],
    last_group_batch: int,
    stats: CleanStats,
) -> bytes | None:
    """A batch none of whose records survive: its header alone when it holds its
    producer's last sequence or is the group's last batch, else nothing."""
    pid = h[9]
    holds_last_seq = pid >= 0 and producer_last_offsets.get(pid) == last_offset
    if holds_last_seq or last_offset == last_group_batch:
        stats.empty_batches_kept += 1
        return rebuild_batch(h, b"", ())
    return None


def _keys_of(h: tuple[int, ...], raw: bytes) -> list[tuple[int, bytes | None]]:
    payload = raw[HEADER_SIZE:]
    data = decompress(h[5] & 0x07, payload) if h[5] & 0x07 else payload
    return scan_keys(data, h[12])


def iter_file_batches(path: str, chunk: int = _READ_CHUNK) -> Iterator[tuple[int, int, bytes]]:
    """(base offset, last offset, bytes) of every batch of a segment file, read about
    ``chunk`` bytes at a time (the remote compaction's downloaded segments).
    CorruptRecordError on a truncated batch."""
    with open(path, "rb") as f:
        buf = b""
        pos = 0
        while True:
            if len(buf) - pos < HEADER_SIZE:
                more = f.read(chunk)
                buf = buf[pos:] + more
                pos = 0
                if not more:
                    if buf:
                        raise CorruptRecordError(f"{path}: {len(buf)} bytes of a truncated batch at the end")
                    return
                continue
            h = HEADER.unpack_from(buf, pos)
            size = LOG_OVERHEAD + h[1]
            if h[1] < MIN_BATCH_LENGTH:
                raise CorruptRecordError(f"{path}: batch of bad length {h[1]} at offset {h[0]}")
            if len(buf) - pos < size:
                more = f.read(max(chunk, size))
                if not more:
                    raise CorruptRecordError(f"{path}: truncated batch at offset {h[0]}")
                buf = buf[pos:] + more
                pos = 0
                continue
            yield h[0], h[0] + h[6], buf[pos : pos + size]
            pos += size


# --- the cleaner --------------------------------------------------------------------------------


def group_segments(segments: Sequence[Segment], max_bytes: int) -> list[list[Segment]]:
    """Consecutive runs whose total size fits ``max_bytes`` and whose offsets fit a
    segment's 32-bit relative offsets (Kafka's groupSegmentsBySize)."""
    groups: list[list[Segment]] = []
    for seg in segments:
        if groups:
            g = groups[-1]
            if (
                sum(s.size for s in g) + seg.size <= max_bytes
                and seg.next_offset - g[0].base_offset <= MAX_RELATIVE
            ):
                g.append(seg)
                continue
        groups.append([seg])
    return groups


class LogCleaner:
    """Compacts logs (one at a time, on the caller's thread or ``run``'s)."""

    def __init__(self, config: CleanerConfig | None = None) -> None:
        self.config = config if config is not None else CleanerConfig()
        self._map = OffsetMap(self.config.dedupe_buffer_size)
        self._mapped: list[int] = []  # the map's offsets, sorted (filter_batch's fast path)
        self._aborted = AbortedRanges()  # the aborted transactions of the pass in progress
        self.stop = threading.Event()

    # --- deciding ------------------------------------------------------------------------

    @staticmethod
    def dirty_ratio(view: CleanerView) -> float:
        total = sum(s.size for s in view.segments)
        dirty = sum(s.size for s in view.segments if s.base_offset >= view.first_dirty)
        return dirty / total if total else 0.0

    @staticmethod
    def _due(log: Log, view: CleanerView, now_ms: int) -> bool:
        dirty = [s for s in view.segments if s.base_offset >= view.first_dirty]
        if not dirty:
            return False
        if view.upload_waits:
            return True
        cfg = log.config
        if LogCleaner.dirty_ratio(view) >= cfg.min_cleanable_dirty_ratio:
            return True
        oldest = min(s.largest_timestamp() for s in dirty)
        return now_ms - oldest > cfg.max_compaction_lag_ms

    def needs_cleaning(self, log: Log, now_ms: int | None = None) -> bool:
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        if not log.config.compact or not log.is_online:
            return False
        return self._due(log, log.cleaner_view(now_ms), now_ms)

    # --- cleaning ------------------------------------------------------------------------

    def clean(self, log: Log, now_ms: int | None = None, *, force: bool = False) -> CleanStats | None:
        """One pass over ``log`` if it is due (or ``force``); None if nothing was done."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        if not log.config.compact or not log.is_online:
            return None
        view = log.cleaner_view(now_ms)
        if not (self._due(log, view, now_ms) if not force else view.segments):
            return None
        started = time.monotonic()
        stats = CleanStats(first_dirty=view.first_dirty)
        throttle = Throttler(self.config.io_max_bytes_per_second)
        self._map.clear()
        # Every transaction with data in the cleanable range is decided (the view stops at
        # the first unstable offset); the aborted ones are in the indexes from here on.
        self._aborted = AbortedRanges(
            log.collect_aborted_transactions(view.segments[0].base_offset, view.segments[-1].next_offset)
        )
        end = self._build_map(view, stats, throttle)
        if end is None:
            return None
        cleanable = [s for s in view.segments if s.next_offset <= end]
        self._mapped = self._map.sorted_offsets()
        cfg = log.config
        horizon = now_ms - cfg.delete_retention_ms
        # A replicated tiered log never merges segments: whichever replica leads next
        # uploads from where the last leader stopped, which must be one of its own segment
        # boundaries (followers roll where their leader did; merging would drop some).
        max_bytes = 0 if log.hw_managed_externally and cfg.remote_storage_enable else cfg.segment_bytes
        for group in group_segments(cleanable, max_bytes):
            if self.stop.is_set():
                stats.aborted = True
                break
            if not self._clean_group(log, view, group, horizon, now_ms, stats, throttle):
                stats.aborted = True
                break
        if not stats.aborted:
            log.set_first_dirty_offset(end)
            stats.cleaned_to = end
        stats.elapsed_s = time.monotonic() - started
        return stats

    def _build_map(self, view: CleanerView, stats: CleanStats, throttle: Throttler) -> int | None:
        """Map the dirty segments, whole segments only; returns the offset the map covers
        up to (exclusive), None if not even the first dirty segment fits."""
        # The clean section alone can be re-cleaned (forced: expired tombstones).
        end: int | None = view.first_dirty if view.segments[0].base_offset < view.first_dirty else None
        for seg in view.segments:
            if seg.base_offset < view.first_dirty:
                continue
            changes: list[tuple[bytes, int]] = []  # to roll back a segment that does not fit
            fits = True
            for _, batch_bytes in _read_batches(seg):
                throttle.take(len(batch_bytes), self.stop)
                stats.bytes_read += len(batch_bytes)
                if not map_batch(batch_bytes, self._map, changes, self._aborted):
                    fits = False
                    break
            if not fits:
                self._map.undo(changes[::-1])
                if end is None or end == view.first_dirty:
                    logger.warning(
                        "%s: the keys of segment %s do not fit the cleaner's offset map (%d keys); "
                        "raise log.cleaner.dedupe.buffer.size",
                        seg.log_path,
                        seg.log_path,
                        self._map.slots,
                    )
                break
            end = seg.next_offset
        return end

    def _clean_group(
        self,
        log: Log,
        view: CleanerView,
        group: list[Segment],
        horizon: int,
        now_ms: int,
        stats: CleanStats,
        throttle: Throttler,
    ) -> bool:
        base = group[0].base_offset
        was_clean = [s.base_offset < view.first_dirty for s in group]
        try:
            mtimes = [s.file.mtime_ms() for s in group]
        except StorageError:
            return False  # a source went away (retention, truncation): try again next pass
        # Tombstones go once their segment was cleaned longer than delete.retention.ms ago.
        drop_tombstones = [clean and mtime < horizon for clean, mtime in zip(was_clean, mtimes, strict=True)]
        stem = os.path.join(log.dir, segment_name(base))
        for suffix in SUFFIXES:  # leftovers of a pass that failed
            try:
                os.unlink(stem + suffix + CLEANED_SUFFIX)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise StorageError(f"cannot remove {stem}{suffix}{CLEANED_SUFFIX}: {e}") from e
        out = Segment(
            log.dir, base, index_interval_bytes=log.config.index_interval_bytes, suffix=CLEANED_SUFFIX
        )
        ok = False
        try:
            last_group_batch = group[-1].next_offset - 1
            for seg, tomb, clean in zip(group, drop_tombstones, was_clean, strict=True):
                # Every key of a dirty segment is in the map: filter_batch's fast path.
                mapped = None if clean else self._mapped
                for info, raw in _read_batches(seg):
                    throttle.take(len(raw), self.stop)
                    kept_bytes = self._filter_batch(info, raw, tomb, view, last_group_batch, stats, mapped)
                    if kept_bytes is None:
                        continue
                    h = HEADER.unpack_from(kept_bytes)
                    out.append(
                        [kept_bytes],
                        len(kept_bytes),
                        [(h[0], len(kept_bytes), h[8])],
                        info.next_offset,
                        now_ms,
                    )
                    stats.bytes_written += len(kept_bytes)
                    throttle.take(len(kept_bytes), self.stop)
            # Markers are always kept, so every aborted transaction of the sources still
            # ends inside the cleaned segment: its index keeps them (read_committed fetches
            # must go on filtering what the cleaner kept of them).
            for seg in group:
                for txn in seg.txn_index.entries():
                    out.txn_index.append(txn)
            out.seal()
            out.close()
            # First clean: the clean time; re-clean: keep the sources' (tombstone horizon).
            mtime = now_ms if not all(was_clean) else max(mtimes)
            os.utime(out.log_path, ns=(mtime * 1_000_000, mtime * 1_000_000))
            ok = log.replace_segments(group, out)
        except OSError as e:
            raise StorageError(f"cleaning {log.name} at {base} failed: {e}") from e
        finally:
            if not ok:
                out.close_quietly()
                for path in (out.log_path, out.index_path, out.timeindex_path, out.txnindex_path):
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
        if ok:
            stats.segments_in += len(group)
            stats.segments_out += 1
            stats.groups.append((base, group[-1].next_offset))
        return ok

    def _filter_batch(
        self,
        info: BatchInfo,
        raw: bytes,
        drop_tombstones: bool,
        view: CleanerView,
        last_group_batch: int,
        stats: CleanStats,
        mapped: Sequence[int] | None = None,
    ) -> bytes | None:
        return filter_batch(
            raw,
            info.base_offset,
            info.last_offset,
            self._map,
            drop_tombstones=drop_tombstones,
            producer_last_offsets=view.producer_last_offsets,
            last_group_batch=last_group_batch,
            stats=stats,
            mapped_offsets=mapped,
            aborted=self._aborted,
        )

    # --- the background thread -------------------------------------------------------------

    def run(self, logs: Callable[[], Sequence[Log]]) -> None:
        """Clean due logs until ``stop`` is set; sleep ``backoff_ms`` when none is due."""
        while not self.stop.is_set():
            cleaned = False
            for log in logs():
                if self.stop.is_set():
                    return
                try:
                    stats = self.clean(log)
                except StrataError as e:
                    logger.error("cleaning %s failed: %s", log.name, e)
                    continue
                if stats is not None and stats.segments_out:
                    cleaned = True
                    logger.info(
                        "cleaned %s: %d segments -> %d, %d -> %d bytes, %d of %d records kept in %.3fs",
                        log.name,
                        stats.segments_in,
                        stats.segments_out,
                        stats.bytes_read,
                        stats.bytes_written,
                        stats.records_kept,
                        stats.records_read,
                        stats.elapsed_s,
                    )
            if not cleaned:
                self.stop.wait(self.config.backoff_ms / 1000.0)


def _read_batches(seg: Segment) -> Iterator[tuple[BatchInfo, bytes]]:
    """Every batch of a sealed segment with its bytes (reads of about 1 MiB)."""
    infos = seg.batches()
    i = 0
    while i < len(infos):
        start = infos[i].position
        j = i
        while j < len(infos) and infos[j].position + infos[j].size - start <= _READ_CHUNK:
            j += 1
        j = max(j, i + 1)
        end = infos[j - 1].position + infos[j - 1].size
        data = seg.read_bytes(start, end - start)
        for info in infos[i:j]:
            yield info, data[info.position - start : info.position - start + info.size]
        i = j
