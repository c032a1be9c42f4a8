"""Which ``__transaction_state`` partition owns a transactional id.

As in Kafka: ``abs(String.hashCode(id)) % transaction.state.log.num.partitions``, the same
function as a group's ``__consumer_offsets`` partition (Kafka's ``Utils.abs`` is
``hash & 0x7fffffff``), so ids are placed as a Kafka cluster with the same partition count
places them. The partition's leader is the id's coordinator.
"""

from __future__ import annotations

from typing import Final

from broker.coordinator_runtime.records import partition_for as _java_hash_partition

TRANSACTION_STATE_TOPIC: Final = "__transaction_state"


def partition_for(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``."""
    if partitions <= 0:
        raise ValueError(f"{partitions} partitions")
    return _java_hash_partition(transactional_id, partitions)
