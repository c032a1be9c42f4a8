"""Random interleavings of clients, writes, failures, timeouts, expiry and coordinator
failover never take the state machine through a transition it forbids, and no producer id's
epoch ever goes back, in the log or in what clients are given.

Two transactional ids, two client instances each (a zombie and its successor), a
coordinator whose writes may be left in flight, acknowledged or failed, and coordinator
failovers: each write in flight lands in the log or not, and the successor rebuilds its
cache from the log (``replay``), which must equal the old cache when nothing was in flight,
then finishes the transactions it found prepared. A fenced instance (timeout, a newer
instance) holds an epoch below the one its transaction was aborted with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.transactions.log_codec import encode_record
from broker.transactions.replay import replay
from broker.transactions.state import (
    NO_PRODUCER_EPOCH,
    TV_2,
    VALID_PREVIOUS,
    TransactionState,
    Transit,
)
from broker.transactions.transitions import (
    Answer,
    TransactionResult,
    abort_timed_out,
    add_offsets,
    add_partitions,
    begin_completion,
    end_txn,
    end_txn_answer,
    expire,
    expired,
    init_producer_id,
    timed_out,
    verify_partitions,
)
from hot.errors import StrataError
from tests.broker.transactions.txnlib import TP_A0, TP_A1, TP_B0, Sim

S = TransactionState
TIDS = ("t1", "t2")
EXPIRATION_MS = 50_000


@dataclass
class World:
    sim: Sim
    server_tv: int
    client_tv: int
    clients: dict[tuple[str, int], tuple[int, int] | None] = field(default_factory=dict)
    # what each in-flight write answers, and to whom
    pending: dict[str, tuple[str, int]] = field(default_factory=dict)
    given: dict[int, int] = field(default_factory=dict)  # producer id -> highest epoch handed out
    written: dict[int, int] = field(default_factory=dict)  # producer id -> highest epoch in the log
    last_state: dict[str, S | None] = field(default_factory=dict)  # tid -> last written state

    def hand_out(self, key: tuple[str, int], pid: int, epoch: int, *, new_instance: bool = False) -> None:
        # a new instance always gets an epoch above every one handed out for its producer id
        # (that fences the others); a recovery or a retried request may get the same again
        before = self.given.get(pid, NO_PRODUCER_EPOCH)
        assert epoch > before if new_instance else epoch >= before, (pid, epoch, self.given)
        self.given[pid] = epoch
        self.clients[key] = (pid, epoch)

    def start(self, transit: Transit, kind: str, client: int) -> None:
        self.sim.start(transit)
        self.pending[transit.before.transactional_id] = (kind, client)

    def check_log(self, first: int) -> None:
        for tid, meta in self.sim.replayed_values():
            if first > 0:
                first -= 1
                continue
            state = S.DEAD if meta is None else meta.state
            previous = self.last_state.get(tid)
            if previous is None:
                # the first record of an id is its InitProducerId; a tombstone may come first
                # when the id's first write failed and the id, known in memory only, expired
                assert state in (S.EMPTY, S.DEAD), (tid, state)
            else:
                assert previous in VALID_PREVIOUS[state], (tid, previous, state)
            self.last_state[tid] = None if state is S.DEAD else state
            if meta is not None:
                pid, epoch = meta.producer_id, meta.producer_epoch
                assert epoch >= self.written.get(pid, NO_PRODUCER_EPOCH), (pid, epoch, self.written)
                self.written[pid] = epoch


PARTITIONS = (TP_A0, TP_A1, TP_B0)
THEN = ("ack", "ack", "ack", "ack", "ack", "fail", "leave", "leave")  # the write a request prepared


def decode(kind: int, x: int) -> tuple[object, ...]:
    """One operation from two numbers (dense to generate and to shrink)."""
    tid, client, then = TIDS[x & 1], (x >> 1) & 1, THEN[(x >> 2) & 7]
    if kind < 20:
        return ("init", tid, client, bool((x >> 5) & 1), then)
    if kind < 40:
        return ("add", tid, client, PARTITIONS[(x >> 5) % 3], then)
    if kind < 45:
        return ("offsets", tid, client, None, then)
    if kind < 50:
        return ("verify", tid, client, None, then)
    if kind < 65:
        return ("end", tid, client, TransactionResult((x >> 5) & 1), then)
    if kind < 75:
        return ("ack", x)
    if kind < 78:
        return ("fail", x)
    if kind < 81:
        return ("resume", tid)
    if kind < 90:
        return ("tick", x % 70_000 + 1)
    if kind < 94:
        return ("timeouts",)
    if kind < 97:
        return ("expire",)
    return ("failover", x)


def step(w: World, op: tuple[object, ...]) -> None:
    sim = w.sim
    name = op[0]
    if name in ("init", "add", "offsets", "verify", "end"):
        tid = str(op[1])
        request(w, op)
        if tid in sim.in_flight and op[4] != "leave":
            write(w, tid, ok=op[4] == "ack")
    elif name == "ack" or name == "fail":
        if sim.in_flight:
            tid = sorted(sim.in_flight)[int(op[1]) % len(sim.in_flight)]  # type: ignore[call-overload]
            write(w, tid, ok=name == "ack")
    else:
        coordinator(w, op)


def request(w: World, op: tuple[object, ...]) -> None:
    sim = w.sim
    name = op[0]
    tid, c = str(op[1]), int(op[2])  # type: ignore[call-overload]
    if tid in sim.in_flight:
        # a request while a write is pending: the pending state refuses every transition
        assert sim.cache[tid].pending_state is not None
    me = w.clients.get((tid, c))
    try:
        if name == "init":
            expected = me if op[3] else None
            transit = init_producer_id(
                sim.get(tid),
                transactional_id=tid,
                timeout_ms=30_000,
                max_timeout_ms=900_000,
                now_ms=sim.now,
                new_producer_id=sim.new_pid,
                expected=expected,
                server_transaction_version=w.server_tv,
            )
            kind = "fence" if transit.epoch_fence else "recover" if expected else "init"
            w.start(transit, kind, c)
        elif me is None:
            return
        elif name == "add" or name == "offsets":
            if name == "add":
                out = add_partitions(
                    sim.get(tid),
                    producer_id=me[0],
                    producer_epoch=me[1],
                    partitions=[op[3]],  # type: ignore[list-item]
                    now_ms=sim.now,
                    client_transaction_version=w.client_tv,
                )
            else:
                out = add_offsets(
                    sim.get(tid),
                    producer_id=me[0],
                    producer_epoch=me[1],
                    group_id="g",
                    offsets_topic_partitions=3,
                    now_ms=sim.now,
                )
            meta = sim.cache[tid]
            assert (meta.producer_id, meta.producer_epoch) == me  # only the current instance adds
            if isinstance(out, Transit):
                w.start(out, "add", c)
        elif name == "verify":
            codes = verify_partitions(
                sim.get(tid), producer_id=me[0], producer_epoch=me[1], partitions=[TP_A0]
            )
            assert codes[TP_A0] == (0 if TP_A0 in sim.cache[tid].partitions else 120)
        else:
            out = end_txn(
                sim.get(tid),
                transactional_id=tid,
                producer_id=me[0],
                producer_epoch=me[1],
                result=op[3],  # type: ignore[arg-type]
                now_ms=sim.now,
                new_producer_id=sim.new_pid,
                client_transaction_version=w.client_tv,
            )
            if isinstance(out, Transit):
                w.start(out, "end", c)
            elif out != Answer():
                w.hand_out((tid, c), out.producer_id, out.producer_epoch)
    except StrataError:
        pass  # a Kafka error answered to the client: fine, as long as nothing illegal happened


def write(w: World, tid: str, *, ok: bool) -> None:
    """The in-flight write of ``tid`` is acknowledged (``ok``) or fails."""
    sim = w.sim
    kind, c = w.pending.pop(tid)
    n = len(sim.log)
    if not ok:
        sim.fail(tid)
        return
    transit = sim.in_flight[tid]
    sim.ack(tid)
    w.check_log(n)
    if kind == "fence":
        # every instance that had an epoch is fenced: none can add to or end a transaction
        after = transit.after
        for (t, _), held in w.clients.items():
            if t == tid and held is not None and held[0] == after.producer_id:
                assert held[1] < after.producer_epoch, (held, after)
    if kind in ("init", "recover"):
        w.hand_out((tid, c), transit.producer_id, transit.producer_epoch, new_instance=kind == "init")
    elif kind in ("end", "fence") and transit.after.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        completion = begin_completion(sim.cache[tid], sim.now)
        w.start(completion, "complete", c)
        answer = end_txn_answer(completion)
        if kind == "end" and answer != Answer():
            w.hand_out((tid, c), answer.producer_id, answer.producer_epoch)


def coordinator(w: World, op: tuple[object, ...]) -> None:
    sim = w.sim
    name = op[0]
    if name == "resume":  # a completion whose write failed is tried again
        tid = str(op[1])
        meta = sim.get(tid)
        if (
            meta is not None
            and meta.pending_state is None
            and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        ):
            w.start(begin_completion(meta, sim.now), "complete", -1)
    elif name == "tick":
        sim.now += int(op[1])  # type: ignore[call-overload]
    elif name == "timeouts":
        for tid in timed_out(sim.cache, sim.now):
            w.start(abort_timed_out(sim.cache[tid], sim.now, w.server_tv), "fence", -1)
    elif name == "expire":
        for tid in expired(sim.cache, sim.now, EXPIRATION_MS):
            w.start(expire(sim.cache[tid], sim.now, EXPIRATION_MS), "expire", -1)
    elif name == "failover":
        # the coordinator dies: each write in flight landed in the log or not, and the
        # successor rebuilds the cache from the log
        if not sim.in_flight:
            loaded = replay(sim.log, sim.now)
            for tid, meta in sim.cache.items():
                if tid not in loaded.transactions:
                    # only an id whose first write failed is known in memory alone
                    assert meta.producer_epoch == NO_PRODUCER_EPOCH and meta.state is S.EMPTY
                elif not meta.has_failed_epoch_fence:
                    assert loaded.transactions[tid].persisted() == meta.persisted()
        landed = int(op[1])  # type: ignore[call-overload]
        for i, tid in enumerate(sorted(sim.in_flight)):
            if landed >> i & 1:
                n = len(sim.log)
                sim.log.append(encode_record(sim.in_flight[tid].after, sim.value_version))
                w.check_log(n)
        sim.in_flight.clear()
        w.pending.clear()
        loaded = replay(sim.log, sim.now)
        sim.cache = dict(loaded.transactions)
        for completion in loaded.completions:
            w.pending[completion.before.transactional_id] = ("complete", -1)
            sim.in_flight[completion.before.transactional_id] = completion


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([(0, 0), (2, 0), (2, 2)]),
    st.lists(st.tuples(st.integers(0, 99), st.integers(0, 2**20)), min_size=10, max_size=120),
)
def test_random_operations_keep_the_state_machine_legal_and_epochs_monotonic(
    versions: tuple[int, int], script: list[tuple[int, int]]
) -> None:
    server_tv, client_tv = versions
    w = World(Sim(), server_tv, client_tv)
    assert client_tv <= server_tv and (server_tv in (0, TV_2))
    for kind, x in script:
        step(w, decode(kind, x))
        for tid, meta in w.sim.cache.items():
            assert (meta.pending_state is not None) == (tid in w.sim.in_flight)
