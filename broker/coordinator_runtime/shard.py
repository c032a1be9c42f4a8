"""What a coordinator supplies to the runtime (broker.coordinator_runtime.runtime): its
state topic's settings and names, and the state of one partition (a CoordinatorShard
subclass), plus the runtime's mapping of replication failures to coordinator errors."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    NotCoordinatorError,
    NotLeaderError,
    ProducerFencedError,
    StorageError,
    StrataError,
)

if TYPE_CHECKING:
    from broker.coordinator_runtime.records import LogEntry
    from broker.partition_replica import PartitionReplica

OpT = TypeVar("OpT")

MAX_MESSAGE_BYTES: Final = 8 << 20  # our batches are cut at about 1 MiB

# A transactional write's producer: (producer id, producer epoch).
Producer = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Naming:
    """How the runtime's logs, errors and tasks name a coordinator's things (the group
    coordinator's in brackets)."""

    entities: str  # what a partition holds ("groups"): "loaded 3 groups", "loading the groups of ..."
    records: str  # what its records are ("offsets"): "offsets not replicated in time"
    coordinator: str  # "group coordinator": "the group coordinator is shutting down"
    replication_factor_setting: str  # "offsets.topic.replication.factor", in the capping warning
    task_prefix: str  # "groups": tasks groups-load-3, groups-acks-3, groups-compaction-3, ...
    watch_task: str  # the task following the partitions' leaders ("groups-offsets-leaders")


@dataclass(frozen=True, slots=True)
class StateTopic:
    """A coordinator's internal topic: its name, and the settings it is created with (the
    partition count is fixed once it exists: a key's partition is its hash modulo it)."""

    name: str
    partitions: int
    replication_factor: int  # capped at the live brokers at creation (with a warning)
    segment_bytes: int  # also the least size at which a partition is compacted
    commit_timeout_ms: int  # how long a write waits for acks=all
    naming: Naming
    # min.insync.replicas it is created with (capped at its replication factor); None:
    # two when it has three replicas or more, else one.
    min_isr: int | None = None


def state_topic_configs(
    replication_factor: int, segment_bytes: int, min_isr: int | None = None
) -> dict[str, str]:
    """Topic configs of a state topic: kept until compacted (no retention), never tiered,
    acks=all needing ``min_isr`` replicas (capped at the replication factor; None: two when
    there are three or more)."""
    isr = (2 if replication_factor >= 3 else 1) if min_isr is None else min(min_isr, replication_factor)
    return {
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "remote.storage.enable": "false",
        "segment.bytes": str(segment_bytes),
        "max.message.bytes": str(MAX_MESSAGE_BYTES),
        "min.insync.replicas": str(isr),
    }


def coordinator_error(exc: BaseException, records: str) -> StrataError:
    """A replication failure of a state write as the coordinator error Kafka answers:
    NOT_LEADER_OR_FOLLOWER and storage errors -> NOT_COORDINATOR; not enough replicas,
    timeouts and anything else -> COORDINATOR_NOT_AVAILABLE (``records`` names them). A
    transactional write's fenced producer keeps its own error (INVALID_PRODUCER_EPOCH), as
    in Kafka's GroupCoordinatorService."""
    if isinstance(
        exc,
        NotCoordinatorError
        | CoordinatorNotAvailableError
        | CoordinatorLoadInProgressError
        | InvalidProducerEpochError
        | ProducerFencedError,
    ):
        return exc
    if isinstance(exc, NotLeaderError | StorageError):
        return NotCoordinatorError(f"not the coordinator any more: {exc}")
    if isinstance(exc, TimeoutError):
        return CoordinatorNotAvailableError(f"{records} not replicated in time")
    return CoordinatorNotAvailableError(f"{records} not replicated: {exc}")


@dataclass(eq=False)
class Write(Generic[OpT]):
    """One append, pending until acknowledged (``ok``) or failed (``done`` alone)."""

    ops: list[OpT]
    done: bool = False
    ok: bool = False
    first_offset: int = -1  # the first op's record offset; op i is at first_offset + i
    end: int = -1  # the offset after the append: acknowledged once the high watermark is there
    producer: Producer | None = None  # a transactional write's producer


@dataclass(eq=False)
class CoordinatorShard(Generic[OpT]):
    """One partition of a state topic this broker leads (in ``epoch``, on ``rep``): the
    runtime's bookkeeping here, the coordinator's state in a subclass, which implements
    the protocol below over its own op type (an op: one record, decoded).

    Two states, as in Kafka's coordinator runtime: the *latest* one, in log order with the
    writes in flight included (``apply_latest`` at append: what a replay would rebuild,
    what a dump restates), and the *durable* one readers see (``apply_durable``, in log
    order as acknowledgements arrive; a failed write applies nothing there)."""

    number: int
    rep: PartitionReplica
    epoch: int
    pending: deque[Write[OpT]] = field(default_factory=deque)
    compaction: asyncio.Task[None] | None = None
    compactions: int = 0
    # After a failed compaction: not again before the log is this big (no dump per write).
    retry_above: int = 0

    # --- the protocol ----------------------------------------------------------------------

    def apply_latest(self, op: OpT) -> None:
        """Apply an op to the log-order state (at append; at replay)."""
        raise NotImplementedError

    def apply_durable(self, op: OpT) -> None:
        """Apply an acknowledged op to what readers see (in log order; at replay)."""
        raise NotImplementedError

    def decode(self, key: bytes, value: bytes | None) -> OpT:
        """A record read from the log as an op; a StrataError when it does not parse."""
        raise NotImplementedError

    def record(self, op: OpT) -> tuple[bytes, bytes | None]:
        """The record an op is written as: (key, value or None for a tombstone)."""
        raise NotImplementedError

    def dump(self) -> list[OpT]:
        """Every live key's latest record (log-order state), to append again (compaction)."""
        raise NotImplementedError

    def live_size(self) -> int:
        """About the size of a dump (compaction starts above twice this)."""
        raise NotImplementedError

    def count(self) -> int:
        """How many of the coordinator's entities (groups, ...) the partition holds (logs)."""
        raise NotImplementedError

    # --- transactional writes (a coordinator without them keeps these defaults) --------------

    def apply_latest_at(self, op: OpT, offset: int, producer: Producer | None) -> None:
        """``apply_latest`` of the op at record ``offset``, written in the transaction of
        ``producer`` (None: outside any transaction)."""
        self.apply_latest(op)

    def apply_durable_at(self, op: OpT, offset: int, producer: Producer | None) -> None:
        """``apply_durable`` of the op at record ``offset`` (``producer`` as above)."""
        self.apply_durable(op)

    def apply_marker(self, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` in the partition (replayed, or
        acknowledged after its append): complete that producer's transactional ops."""

    def dump_writes(self) -> list[tuple[Producer | None, list[OpT]]]:
        """The dump as consecutive writes, each outside a transaction (None) or in a
        producer's still open transaction, in an order that keeps what a replay rebuilds."""
        return [(None, self.dump())]

    def compactable(self) -> bool:
        """False while a dump would not restate the state faithfully (compaction waits)."""
        return True

    # --- given -----------------------------------------------------------------------------

    def replay(self, ops: Iterable[OpT]) -> None:
        """Apply committed records read from the log (loading), in log order."""
        for op in ops:
            self.apply_latest(op)
            self.apply_durable(op)

    def replay_entries(self, entries: Iterable[LogEntry[OpT]]) -> None:
        """Apply committed records and transaction markers read from the log (loading),
        in log order."""
        for e in entries:
            if e.op is None:
                self.apply_marker(e.producer_id, e.commit)
            else:
                producer = (e.producer_id, e.producer_epoch) if e.producer_id >= 0 else None
                self.apply_latest_at(e.op, e.offset, producer)
                self.apply_durable_at(e.op, e.offset, producer)

    def drain(self) -> None:
        """Apply acknowledged writes in log order (a failed one applies nothing)."""
        while self.pending and self.pending[0].done:
            w = self.pending.popleft()
            if w.ok:
                for i, op in enumerate(w.ops):
                    self.apply_durable_at(op, w.first_offset + i, w.producer)
