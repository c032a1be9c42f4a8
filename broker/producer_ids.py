"""Producer ids that are unique across the brokers of a cluster (KIP-98 in cluster mode).

Each broker's allocator (``hot.producer_ids``, ``<data_dir>/meta/producer-ids``) hands out
0, 1, 2, ... on its own, so without this every broker would give its first producer id 0:
two producers bootstrapped through different brokers would share an id, and a partition
would take one's batches for retries of the other's (dropped as duplicates, or refused as
out of order). Kafka allocates id blocks through its controller; here no coordination is
needed: broker ``b`` hands out ``local * 2**20 + b`` for its local ids, so the brokers'
ranges are disjoint as long as broker ids stay below 2**20 (ids given on the command line
are at most 1000, and etcd assigns them upwards from 1001). The local allocator's crash
behaviour carries over: a local id is never handed out twice, and after a lost allocator
file its floor (one past the largest id in any local partition's state) is above every
scoped id in use, so new ones are too.
"""

from __future__ import annotations

from typing import Final

from hot.errors import InvalidConfigError, StorageError
from hot.producer_ids import MAX_EPOCH, ProducerIdAllocator

BROKER_BITS: Final = 20
MAX_BROKER_ID: Final = (1 << BROKER_BITS) - 1
_MAX_PRODUCER_ID: Final = (1 << 63) - 1


def scoped_producer_id(local: int, broker_id: int) -> int:
    """The cluster-wide id of this broker's ``local`` producer id."""
    if not 0 <= broker_id <= MAX_BROKER_ID:
        raise InvalidConfigError(
            f"broker id {broker_id} is above {MAX_BROKER_ID}: producer ids would collide"
        )
    pid = (local << BROKER_BITS) | broker_id
    if pid > _MAX_PRODUCER_ID:
        raise StorageError("producer ids are exhausted")
    return pid


def init_producer(
    allocator: ProducerIdAllocator, broker_id: int, producer_id: int = -1, epoch: int = -1
) -> tuple[int, int]:
    """InitProducerId for a non-transactional producer: (id, epoch). A producer passing an
    id this broker issued and its epoch (KIP-360) keeps the id with the epoch bumped; any
    other gets a new id at epoch 0 (as ``ProducerIdAllocator.init_producer``)."""
    if (
        producer_id >= 0
        and producer_id & MAX_BROKER_ID == broker_id
        and producer_id >> BROKER_BITS < allocator.next_id
        and 0 <= epoch < MAX_EPOCH
    ):
        return producer_id, epoch + 1
    return scoped_producer_id(allocator.allocate(), broker_id), 0
