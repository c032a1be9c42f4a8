"""DeleteRecords on a partition's leader (KIP-107; Kafka's ReplicaManager.deleteRecords and
DelayedDeleteRecords).

The leader moves the partition's log start offset up to the requested offset (-1: the high
watermark) at once, under the log's lock (hot.log_start: the ``log-start-offset`` file is
written before any segment below it is deleted), then waits until every live replica's log
start offset reached it: followers learn it from the leader's Fetch answers and report
theirs in their next Fetch (``ReplicaManager.wait_for_low_watermark``). The answer's low
watermark is then the lowest of them.

What is below the new start is gone for readers at once (Fetch and ListOffsets EARLIEST
answer from it); its local segments are deleted by retention's next pass, and on a tiered
topic the uploader's total-retention pass advances the manifest's log start offset and
deletes the remote segments wholly below it (tiering.uploader), so Spark and restores no
longer see them either.

Errors as Kafka answers them: an internal topic is INVALID_TOPIC_EXCEPTION, a topic whose
``cleanup.policy`` is ``compact`` only POLICY_VIOLATION, an offset below -1 or above the high
watermark OFFSET_OUT_OF_RANGE, a broker that does not lead the partition
NOT_LEADER_OR_FOLLOWER, followers that do not catch up within the request's timeout
REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.admin import is_internal
from hot.errors import InvalidTopicError, OffsetOutOfRangeError, PolicyViolationError

if TYPE_CHECKING:
    from broker.broker import Broker


async def delete_records(broker: Broker, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
    """Move the partition's log start offset to ``offset`` (-1: the high watermark) and
    wait for its replicas (module docstring); returns the low watermark."""
    if is_internal(topic):
        raise InvalidTopicError(f"Cannot delete records of internal topic {topic}")
    replicas = broker.replicas
    rep = replicas.leader_replica(topic, partition)
    lg = rep.log
    if lg.config.compact and not lg.config.delete:
        raise PolicyViolationError(
            f"Records of partitions of topic {topic} with cleanup.policy=compact can't be deleted"
        )
    if offset < -1:
        raise OffsetOutOfRangeError(f"cannot delete records of {topic}-{partition} up to offset {offset}")
    epoch = rep.leader_epoch
    target = await asyncio.to_thread(lg.delete_records, offset)
    broker.reads.consumers.mark((topic, partition))  # consumer sessions answer the new log start
    return await replicas.wait_for_low_watermark(rep, epoch, target, max(timeout_ms, 0) / 1000)
