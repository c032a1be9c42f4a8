"""What a bucket-only read leaves out: the records a broker holds above the archived end.

Shared by the data source (a warning per topic, batch and stream) and ``strata export``
(a note on stderr): both read only the bucket unless told to read the not-yet-tiered
tail from a broker (``includeHot``, ``kafka.bootstrap.servers``, ``--include-hot``), and
the bucket lags the brokers until a segment rolls and is uploaded (``segment.bytes``,
``segment.ms``, ``remote.copy.max.lag.ms``; ``strata tier sync`` makes it current now).

``unarchived`` asks a broker for the high watermarks once (a single ListOffsets) and
counts, per partition, the offsets above the archived end; ``None`` when no broker
answers. Without any broker address, the data source can only tell an empty bucket
(``empty_topics``): docs/spark.md says why it does not guess one.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from hot.errors import StrataError
from kclient.security import ClientSecurity
from spark.options import TopicPartition

logger = logging.getLogger("spark.source")

HINT_OPTION = 'option("kafka.bootstrap.servers", "HOST:PORT") reads them from a broker'
HINT_SYNC = "`strata tier sync {topic}` uploads them now"


class Archived(Protocol):
    """A partition's range as planned (``spark.plan.PartitionRange``): ``archived_end`` is
    the first offset the bucket does not hold; ``start``, the first one read."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def archived_end(self) -> int: ...


def unarchived(
    ranges: Sequence[Archived], address: str, security: ClientSecurity | None = None, timeout: float = 5.0
) -> dict[TopicPartition, int] | None:
    """Per partition, how many records the broker at ``address`` holds above the archived
    end (partitions it does not know are left out); None when it does not answer."""
    from kclient import KafkaClient
    from kwire.address import HostPort

    if not ranges:
        return {}
    try:
        addr = HostPort.parse(address, setting="broker")
        with KafkaClient.connect(addr, timeout=timeout, security=security) as client:
            hw = client.list_offsets([(r.topic, r.partition) for r in ranges], -1)
    except (OSError, StrataError):
        return None
    return {
        (r.topic, r.partition): max(0, hw[(r.topic, r.partition)] - max(r.archived_end, r.start))
        for r in ranges
        if (r.topic, r.partition) in hw
    }


def per_topic(counts: Mapping[TopicPartition, int]) -> dict[str, tuple[int, int]]:
    """Per topic with missing records: (records, partitions)."""
    out: dict[str, tuple[int, int]] = {}
    for (topic, _), n in sorted(counts.items()):
        if n > 0:
            records, parts = out.get(topic, (0, 0))
            out[topic] = (records + n, parts + 1)
    return out


def empty_topics(ranges: Iterable[Archived]) -> list[str]:
    """Topics of which the bucket holds none of the records read (every partition's
    archived end at or below its start)."""
    holds: dict[str, bool] = {}
    for r in ranges:
        holds[r.topic] = holds.get(r.topic, False) or r.archived_end > r.start
    return sorted(t for t, any_rows in holds.items() if not any_rows)


def warn_unarchived(
    ranges: Sequence[Archived], broker: str | None, security: ClientSecurity | None = None
) -> list[str]:
    """Log (and return) one WARNING per topic whose read leaves records out because the
    bucket is behind: with a ``broker`` address, by its high watermarks (how many records,
    and the option that adds them); without one, when the bucket holds none of the topic."""
    lines: list[str] = []
    counts = unarchived(ranges, broker, security) if broker else None
    if counts is not None:
        for topic, (records, parts) in per_topic(counts).items():
            lines.append(
                f"topic {topic}: the bucket is behind broker {broker} by {records:,} record(s) in "
                f"{parts} partition(s), not tiered yet and not read; "
                f"{HINT_OPTION} (includeHot), or {HINT_SYNC.format(topic=topic)}"
            )
    else:
        why = f" (broker {broker} did not answer)" if broker else ""
        for topic in empty_topics(ranges):
            lines.append(
                f"topic {topic}: the bucket holds none of the records read{why}; records not tiered "
                f"yet (until a segment rolls or remote.copy.max.lag.ms passes) are not read: "
                f"{HINT_OPTION}, or {HINT_SYNC.format(topic=topic)}"
            )
    for line in lines:
        if logger.hasHandlers():
            logger.warning("%s", line)
        else:
            # a Spark Python worker configures no logging: Spark relays its stderr to the driver's
            print(f"WARN strata: {line}", file=sys.stderr, flush=True)
    return lines


__all__ = ["Archived", "empty_topics", "per_topic", "unarchived", "warn_unarchived"]
