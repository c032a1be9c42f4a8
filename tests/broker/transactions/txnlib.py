"""A coordinator's cache and log around the pure transitions, for the tests.

``Sim`` does what the coordinator will: install ``transit.before`` at once, write the
record (here: append it to a list), then install ``complete`` (or ``abandon`` when the
write fails). A write may be left in flight to test what happens meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator

from broker.groups.types import TopicPartition
from broker.transactions.log_codec import decode_key, decode_value, encode_record
from broker.transactions.state import TransactionMetadata, TransactionState, Transit, abandon, complete
from broker.transactions.transitions import Answer, begin_completion

TP_A0 = TopicPartition("a", 0)
TP_A1 = TopicPartition("a", 1)
TP_B0 = TopicPartition("b", 0)


class Sim:
    def __init__(self, *, first_producer_id: int = 1000, value_version: int = 1) -> None:
        self.cache: dict[str, TransactionMetadata] = {}
        self.log: list[tuple[bytes, bytes | None]] = []
        self.in_flight: dict[str, Transit] = {}
        self._next_pid = first_producer_id
        self.value_version = value_version
        self.now = 1_000_000

    def new_pid(self) -> int:
        pid = self._next_pid
        self._next_pid += 1
        return pid

    def get(self, tid: str) -> TransactionMetadata | None:
        return self.cache.get(tid)

    def start(self, outcome: Transit | Answer) -> Transit:
        """Install a transit's pending metadata; its write is in flight."""
        assert isinstance(outcome, Transit), outcome
        tid = outcome.before.transactional_id
        assert tid not in self.in_flight
        self.cache[tid] = outcome.before
        self.in_flight[tid] = outcome
        return outcome

    def ack(self, tid: str) -> TransactionMetadata | None:
        """The in-flight write of ``tid`` is acknowledged."""
        transit = self.in_flight.pop(tid)
        self.log.append(encode_record(transit.after, self.value_version))
        if transit.after.state is TransactionState.DEAD:
            del self.cache[tid]
            return None
        self.cache[tid] = complete(self.cache[tid], transit)
        return self.cache[tid]

    def fail(self, tid: str) -> TransactionMetadata:
        transit = self.in_flight.pop(tid)
        self.cache[tid] = abandon(self.cache[tid], transit)
        return self.cache[tid]

    def apply(self, outcome: Transit | Answer) -> TransactionMetadata | None:
        """Write a transit at once (an Answer writes nothing)."""
        if isinstance(outcome, Answer):
            return None
        tid = self.start(outcome).before.transactional_id
        return self.ack(tid)

    def complete_markers(self, tid: str) -> TransactionMetadata | None:
        """PrepareX -> CompleteX: prepare the completion, write every marker, write it."""
        meta = self.cache[tid]
        return self.apply(begin_completion(meta, self.now))

    def replayed_values(self) -> Iterator[tuple[str, TransactionMetadata | None]]:
        for key, value in self.log:
            tid = decode_key(key)
            assert isinstance(tid, str)
            yield tid, None if value is None else decode_value(tid, value)
