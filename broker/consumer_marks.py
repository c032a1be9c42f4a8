"""What an incremental consumer fetch session (KIP-227) must look at: the partitions whose
answer may have changed since its last fetch, not every partition of the session.

A consumer of 1,000 partitions polls about twice a second; looking at each of them on
every fetch (authorization, leadership, the log's marks) costs the broker per partition
per poll even when nothing moves. Here, per session, the partitions to look at in its
next incremental fetch (``dirty``), marked by what can change an answer:

* a high watermark advance (so a last stable offset move: the LSO only moves when the
  HW does or is already past it), a log start offset raised (DeleteRecords, total or
  remote retention: ``hot.log_start``), a log going offline or closing: the read path's
  HW listener (``broker.read_path``), gated by ``gate`` (an ``id(log)`` is in it while
  some session watches that log);
* a log start moved by DeleteRecords, once more (``broker.delete_records``);
* a role or leader epoch change, a partition dropped here (``ReplicaWakeups.role_changed``);
  a topic deleted, or every role changed at once: ``mark_all`` (a walk of every session).

The partitions a request names are always looked at too, and those that were behind in
the last answer (an error, data not all sent) are marked again (``remark``). A session
waits for a mark with one future (``waiter``), not one per partition.

A safety walk over the whole session every ``walk_s`` catches what a mark could miss (a
move between a session's look and its watch being registered); it also re-registers
every partition's log, so a log replaced under the same partition is watched again.
Not thread-safe: the event loop's (the HW listener hops onto it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.fetch_sessions import Session, TopicPartition


@dataclass(slots=True)
class SessionMarks:
    """One consumer session's marks."""

    session: Session
    dirty: set[TopicPartition] = field(default_factory=set)
    waiter: asyncio.Future[None] | None = None
    walk_seq: int = -1  # ConsumerMarks.walk_all_seq at the last walk (-1: never walked)
    next_walk: float = 0.0
    # Session order of the partitions (for the answer's order, which decides who gets the
    # byte budget first): rebuilt on every walk, extended as partitions join.
    order: dict[TopicPartition, int] = field(default_factory=dict)
    # The cached READ answers per topic, valid while (ACL generation, principal) is the
    # key: an ACL change or another principal asks again (api.handlers.fetch).
    authz_key: tuple[object, object] | None = None
    readable: dict[str, bool] = field(default_factory=dict)
    watched: set[TopicPartition] = field(default_factory=set)


class ConsumerMarks:
    """The marks of every consumer session (module docstring)."""

    def __init__(self, walk_s: float) -> None:
        self.walk_s = walk_s
        self.walk_all_seq = 0
        self._states: dict[int, SessionMarks] = {}  # session id: marks
        self._by_tp: dict[TopicPartition, set[int]] = {}  # partition: watching session ids
        # The HW listener's gate: id(log) -> partition, while some session watches it.
        self.gate: dict[int, TopicPartition] = {}
        self._log_key: dict[TopicPartition, int] = {}
        # Partitions looked at by incremental consumer session fetches, and walks (metrics,
        # and the tests' proof that an idle partition is not looked at).
        self.looked = 0
        self.walks = 0

    def state(self, session: Session) -> SessionMarks:
        st = self._states.get(session.session_id)
        if st is None or st.session is not session:
            if st is not None:
                self.forget(st.session)
            st = self._states[session.session_id] = SessionMarks(session)
        return st

    def forget(self, session: Session) -> None:
        """``session`` is gone (closed, evicted, replaced): drop its marks and watches."""
        st = self._states.get(session.session_id)
        if st is None or st.session is not session:
            return
        del self._states[session.session_id]
        sid = session.session_id
        for tp in st.watched:
            ids = self._by_tp.get(tp)
            if ids is None:
                continue
            ids.discard(sid)
            if not ids:
                del self._by_tp[tp]
                key = self._log_key.pop(tp, None)
                if key is not None:
                    self.gate.pop(key, None)
        if st.waiter is not None and not st.waiter.done():
            st.waiter.set_result(None)

    def watch(self, st: SessionMarks, tp: TopicPartition, log_key: int | None) -> None:
        """Mark ``st`` when ``tp``'s log (``id(log)``: ``log_key``; None: no log here)
        moves, or ``tp`` is marked. Call it before reading the partition: a move in
        between marks it again (a spare look)."""
        ids = self._by_tp.get(tp)
        if ids is None:
            ids = self._by_tp[tp] = set()
        ids.add(st.session.session_id)
        st.watched.add(tp)
        old = self._log_key.get(tp)
        if log_key is not None and old != log_key:
            if old is not None:
                self.gate.pop(old, None)
            self._log_key[tp] = log_key
            self.gate[log_key] = tp

    def mark(self, tp: TopicPartition) -> None:
        """Something about ``tp`` that an answer carries may have changed: the sessions
        watching it look at it in their next fetch, and a parked one wakes."""
        ids = self._by_tp.get(tp)
        if not ids:
            return
        states = self._states
        for sid in ids:
            st = states.get(sid)
            if st is not None:
                st.dirty.add(tp)
                self._wake(st)

    def mark_all(self) -> None:
        """Every session walks all its partitions in its next fetch (a topic deleted,
        every role changed); parked ones wake."""
        self.walk_all_seq += 1
        for st in self._states.values():
            self._wake(st)

    def remark(self, st: SessionMarks, keys: Iterable[TopicPartition]) -> None:
        """Look at ``keys`` again in the next fetch (errors, data not all sent)."""
        st.dirty.update(keys)

    def pick(
        self, st: SessionMarks, asked: Iterable[TopicPartition], now: float, *, walk: bool = False
    ) -> tuple[bool, list[TopicPartition]]:
        """The partitions the session's fetch looks at now, in session order, and whether
        that is a walk over all of them (due, asked for by ``walk`` or ``mark_all``)."""
        session = st.session
        if walk or st.walk_seq != self.walk_all_seq or now >= st.next_walk:
            st.walk_seq = self.walk_all_seq
            st.next_walk = now + self.walk_s
            st.dirty.clear()
            st.order = {tp: i for i, tp in enumerate(session.partitions)}
            self.walks += 1
            self.looked += len(st.order)
            return True, list(st.order)
        keys, st.dirty = st.dirty, set()
        order = st.order
        for tp in asked:
            keys.add(tp)
            if tp not in order:
                order[tp] = len(order)
        in_session = session.partitions
        picked = sorted((tp for tp in keys if tp in in_session), key=lambda tp: order.get(tp, len(order)))
        self.looked += len(picked)
        return False, picked

    def waiter(self, st: SessionMarks) -> asyncio.Future[None]:
        """A future completed by the session's next mark (or ``mark_all``). Take it
        before looking: a mark in between completes it."""
        fut = st.waiter
        if fut is None or fut.done():
            fut = st.waiter = asyncio.get_running_loop().create_future()
        return fut

    @staticmethod
    def _wake(st: SessionMarks) -> None:
        fut = st.waiter
        if fut is not None:
            st.waiter = None
            if not fut.done():
                fut.set_result(None)

    def __len__(self) -> int:
        return len(self._states)
