"""Broker-level tiered-storage settings (``[tiering]`` in the broker's TOML, ``STRATA_TIERING_*``).

Topic-level settings (``remote.storage.enable``, ``local.retention.*``,
``remote.copy.lag.ms``, ``remote.copy.max.lag.ms``) live in ``hot.config.LogConfig``; these
apply to the whole broker: how fast and how often to upload, what a clean stop uploads,
when to refuse produce because the disk is filling up while uploads are pending, and the
remote reader's cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hot.errors import InvalidConfigError

MIB: Final = 1 << 20
GIB: Final = 1 << 30


@dataclass(frozen=True, slots=True)
class TieringConfig:
    # Upload bandwidth cap over all partitions, bytes per second; 0 = unlimited.
    upload_bytes_per_second: int = 0
    # Partitions uploading at the same time (each uploads its segments in offset order).
    upload_concurrency: int = 2
    # Segments of one partition uploaded at once: one COPY_STARTED and one COPIED manifest
    # write cover them all, and their objects go up concurrently (bench_tiering: sequential
    # uploads, two manifest writes per segment, reached 0.37 of sequential put_object).
    upload_segments_in_flight: int = 4
    # Bytes of segment bodies being uploaded at once over all partitions (each PUT body is
    # read into memory); a segment larger than this goes up alone. Reported as
    # strata_tiering_upload_memory_bytes.
    upload_memory_bytes: int = 64 * MIB
    # Period of the scan for uploadable segments (every sealed segment is found by a scan,
    # not only by roll events: KAFKA-15272).
    upload_interval_ms: int = 1000
    # Period of total retention over remote + local data.
    retention_check_interval_ms: int = 30000
    # Produce fails (KAFKA_STORAGE_ERROR) above this fraction of the data dir's filesystem
    # in use, rather than local retention deleting data that was not uploaded. 0 = off.
    disk_high_water_percent: float = 95.0
    # Same, as a byte budget for all local logs of the broker; 0 = off.
    disk_high_water_bytes: int = 0
    # Remote objects no manifest references are deleted once older than this.
    orphan_grace_ms: int = 3_600_000
    # Period of the orphan sweep.
    orphan_sweep_interval_ms: int = 3_600_000
    # Remote compaction (compacted tiered topics): how often partitions are checked; a
    # partition is compacted when its remote dirty ratio reaches min.cleanable.dirty.ratio.
    remote_compaction_interval_ms: int = 60_000
    # Objects of segments remote compaction replaced are deleted this long after the swap,
    # so remote reads (and Spark tasks) already holding the old manifest can finish.
    remote_compaction_grace_ms: int = 600_000
    # Longest pause between retries while the object store is unreachable.
    max_backoff_ms: int = 5000
    # Remote reader's chunk cache; None = <data_dir>/cache.
    cache_dir: Path | None = None
    cache_max_bytes: int = GIB
    # One ranged GET per chunk. 4 MiB (within the 4-8 MiB S3 recommends for ranged GETs)
    # halves the cold-read time against 1 MiB in bench_tiering (fewer GET round trips);
    # 8 MiB gained little more and costs more per small, random read.
    cache_chunk_bytes: int = 4 * MIB
    # Chunks fetched ahead of the bytes a remote read served, across segment boundaries.
    # 3 x 4 MiB covers the next 8 MiB fetch plus the chunk it peeks into past a segment's
    # end, so a consumer catching up finds its next fetch's GETs already in flight.
    prefetch_chunks: int = 3
    # Memory of remote reads: bounds the chunk cache's in-memory LRU of recent chunks, the
    # bytes of prefetch GETs in flight, and the S3 store's pooled GET buffers kept for
    # reuse (each up to this much; strata_tiering_s3_read_buffer_bytes shows the last).
    read_memory_bytes: int = 64 * MIB
    # A clean stop (SIGTERM) seals every tiered partition's active segment and uploads what
    # the bucket lacks, for at most this long (tiering.upload_lag); 0 = not at all. Keep the
    # process manager's stop timeout above it (Kubernetes terminationGracePeriodSeconds,
    # docker stop -t).
    shutdown_upload_grace_ms: int = 30_000
    # The same in cluster mode, where the replicas already hold the tail: off by default.
    shutdown_upload_in_cluster: bool = False

    def __post_init__(self) -> None:
        for name, lo in _INT_MINIMUMS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfigError(f"tiering.{name}: expected an integer, got {value!r}")
            if value < lo:
                raise InvalidConfigError(f"tiering.{name}: must be at least {lo}, got {value}")
        pct = self.disk_high_water_percent
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 <= pct <= 100:
            raise InvalidConfigError(f"tiering.disk_high_water_percent: must be in [0, 100], got {pct!r}")
        if not isinstance(self.shutdown_upload_in_cluster, bool):
            value = self.shutdown_upload_in_cluster
            raise InvalidConfigError(
                f"tiering.shutdown_upload_in_cluster: expected true or false, got {value!r}"
            )
        if self.cache_dir is not None and not isinstance(self.cache_dir, Path):
            raise InvalidConfigError(f"tiering.cache_dir: expected a path, got {self.cache_dir!r}")

    def cache_path(self, data_dir: Path) -> Path:
        return self.cache_dir if self.cache_dir is not None else Path(data_dir) / "cache"

    @property
    def disk_high_water_fraction(self) -> float | None:
        return self.disk_high_water_percent / 100.0 if self.disk_high_water_percent > 0 else None

    @classmethod
    def from_mapping(cls, values: Mapping[str, object], base: TieringConfig | None = None) -> TieringConfig:
        """``base`` (or the defaults) with ``values`` applied; names are the field names,
        values may be strings (environment) or TOML scalars. Unknown names are refused."""
        changes: dict[str, object] = {}
        for name, raw in values.items():
            if name not in FIELDS:
                raise InvalidConfigError(f"unknown tiering setting {name!r} (known: {', '.join(FIELDS)})")
            changes[name] = _convert(name, raw)
        return dataclasses.replace(base if base is not None else cls(), **changes)  # type: ignore[arg-type]


_INT_MINIMUMS: Final[dict[str, int]] = {
    "upload_bytes_per_second": 0,
    "upload_concurrency": 1,
    "upload_segments_in_flight": 1,
    "upload_memory_bytes": 1,
    "upload_interval_ms": 1,
    "retention_check_interval_ms": 1,
    "disk_high_water_bytes": 0,
    "orphan_grace_ms": 0,
    "orphan_sweep_interval_ms": 1,
    "max_backoff_ms": 1,
    "remote_compaction_interval_ms": 1,
    "remote_compaction_grace_ms": 0,
    "cache_max_bytes": 0,
    "cache_chunk_bytes": 1,
    "prefetch_chunks": 0,
    "read_memory_bytes": 0,
    "shutdown_upload_grace_ms": 0,
}
FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in dataclasses.fields(TieringConfig))


def _convert(name: str, raw: object) -> object:
    if name == "cache_dir":
        if raw is None or raw == "":
            return None
        if isinstance(raw, str | Path):
            return Path(raw)
        raise InvalidConfigError(f"tiering.cache_dir: expected a path, got {raw!r}")
    if name == "shutdown_upload_in_cluster":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise InvalidConfigError(f"tiering.{name}: expected true or false, got {raw!r}")
    if isinstance(raw, bool):
        raise InvalidConfigError(f"tiering.{name}: expected a number, got {raw!r}")
    if name == "disk_high_water_percent":
        try:
            return float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidConfigError(f"tiering.{name}: expected a number, got {raw!r}") from None
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"tiering.{name}: expected an integer, got {raw!r}") from None
