"""Dead-letter topic of a share group (after KIP-1191): records archived by REJECT or by
the delivery-count limit are copied to the topic the group names in
``errors.deadletterqueue.topic.name``, with their key, value and headers, plus headers
naming where they came from: ``__dlq.errors.topic``, ``__dlq.errors.partition``,
``__dlq.errors.offset`` and ``__dlq.errors.delivery.count``.

The copy is written by the share partition's leader after the archiving was persisted,
to a partition of the dead-letter topic it leads (the source partition's index modulo the
topic's partition count when it leads that one, else the first it leads); when it leads
none, or the topic does not exist, the copy is skipped with a warning (the records stay
archived). At most once: a crash between archiving and copying loses the copy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from broker.read_path import FetchRequestPartition, ReadPath
from broker.share.partition import Archived
from hot.errors import StrataError
from hot.records import Header, RecordInput, build_batch, decode_batches

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20


def dlq_headers(topic: str, partition: int, offset: int, delivery_count: int) -> tuple[Header, ...]:
    return (
        Header("__dlq.errors.topic", topic.encode()),
        Header("__dlq.errors.partition", str(partition).encode()),
        Header("__dlq.errors.offset", str(offset).encode()),
        Header("__dlq.errors.delivery.count", str(delivery_count).encode()),
    )


async def read_records(
    reads: ReadPath, topic: str, partition: int, archived: Sequence[Archived]
) -> list[RecordInput]:
    """The archived records' copies (in offset order), read from the log or the bucket."""
    wanted = {a.offset: a.delivery_count for a in archived}
    out: list[RecordInput] = []
    offset = min(wanted)
    last = max(wanted)
    while offset <= last:
        fetched = (
            await reads.fetch(
                [FetchRequestPartition(topic, partition, offset, READ_BYTES)],
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=READ_BYTES,
            )
        )[0]
        if fetched.error is not None or not fetched.size:
            break
        nxt = offset
        for batch in decode_batches(fetched.read()):
            for r in batch.records:
                if r.offset in wanted:
                    out.append(
                        RecordInput(
                            key=r.key,
                            value=r.value,
                            headers=(*r.headers, *dlq_headers(topic, partition, r.offset, wanted[r.offset])),
                            timestamp=r.timestamp,
                        )
                    )
            nxt = max(nxt, batch.header.next_offset)
        if nxt <= offset:
            break
        offset = nxt
    return out


def build_copy(records: Sequence[RecordInput]) -> bytes:
    return build_batch(records, base_timestamp=int(time.time() * 1000))


def log_skipped(group_id: str, dlq: str, why: StrataError | str, n: int) -> None:
    log.warning(
        "share group %s: %d archived records not copied to dead-letter topic %s: %s", group_id, n, dlq, why
    )
