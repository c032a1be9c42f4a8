"""What wakes whom on a leader: parked replica fetches, and the coordinators that load
and unload their partitions as this broker's replica roles change.

A parked replica fetch waits on one future per follower, not per partition: parking
costs the same for 10 partitions as for 10,000 (a follower fetches from a leader in one
session), and an append wakes only the fetches of that partition's followers. Role
changes are counted (``roles_seq``) and wake ``wait_roles_changed``.

It also keeps, per follower, the partitions to look at in its next incremental session
fetch (``dirty``): those appended to, whose high watermark moved, whose role or epoch
changed, or that a DeleteRecords waits on. An idle follower's fetch then looks at what
changed, not at every partition of its session (issue 35); ``walk_due`` asks for a walk
over the whole session after a change of every replica's role, and once every
``replica.lag.time.max.ms`` for what no mark reports (a log start moved by retention).

And, per follower, its fetch session and when it last fetched in it (``session_seen``):
every incremental fetch restates the partitions it leaves out at the offsets the session
holds, so ``stated_at`` tells the ISR bookkeeping when a quiet partition was last fetched
at its log end without recording each one on every fetch (``LeaderState.end_moved``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from broker.consumer_marks import ConsumerMarks
from broker.fetch_sessions import Session
from broker.metadata import ClusterView
from broker.partition_replica import PartitionReplica


class ReplicaWakeups:
    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self._fetch_waiters: dict[int, set[asyncio.Future[None]]] = {}
        self.roles_seq = 0  # bumped by every role or epoch change (role_changed)
        self._roles_event = asyncio.Event()
        self._dirty: dict[int, set[tuple[str, int]]] = {}
        self._walk_all_seq = 0  # bumped when every follower's next fetch must walk it all
        self._walked: dict[int, tuple[int, float]] = {}  # follower: (walk_all_seq, next walk at)
        self._seen: dict[int, tuple[Session, int]] = {}  # follower: (its session, last fetch ms)
        # Consumer fetch sessions hear of role changes too (set by broker.read_path).
        self.consumers: ConsumerMarks | None = None

    def session_seen(self, follower_id: int, session: Session, at_ms: int) -> None:
        """``follower_id`` sent an incremental fetch in ``session`` at ``at_ms`` (the
        LeaderState clock): it stated again every session partition it left out."""
        self._seen[follower_id] = (session, at_ms)

    def stated_at(self, follower_id: int, key: tuple[str, int], offset: int, epoch: int) -> int | None:
        """When ``follower_id`` last fetched ``key`` at ``offset`` in leader epoch
        ``epoch`` (or without an epoch) in its session, if its latest session fetch still
        held it there; None if unknown."""
        seen = self._seen.get(follower_id)
        if seen is None:
            return None
        session, at = seen
        sp = session.partitions.get(key)
        if sp is None or sp.fetch_offset != offset or sp.current_leader_epoch not in (-1, epoch):
            return None
        return at

    def data_waiter(self, follower_id: int) -> asyncio.Future[None]:
        """A future completed by the next append to a partition led here of which
        ``follower_id`` is a replica, or by a role change of one: a parked replica fetch.
        ``drop_data_waiter`` after."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._fetch_waiters.setdefault(follower_id, set()).add(fut)
        return fut

    def drop_data_waiter(self, follower_id: int, fut: asyncio.Future[None]) -> None:
        waiters = self._fetch_waiters.get(follower_id)
        if waiters is not None:
            waiters.discard(fut)

    def appended(self, rep: PartitionReplica) -> None:
        """Wake the parked fetches of ``rep``'s followers."""
        lead = rep.leader
        if lead is None:
            self._wake(list(self._fetch_waiters))
            return
        key = (rep.topic, rep.partition)
        for b in lead.replicas:
            self._dirty.setdefault(b, set()).add(key)
        self._wake(lead.replicas)

    def mark(self, rep: PartitionReplica) -> None:
        """Something a follower of ``rep`` must hear of changed (the high watermark, the
        log start a DeleteRecords waits on): look at it in their next fetch."""
        lead = rep.leader
        if lead is None:
            self._walk_all_seq += 1
            return
        key = (rep.topic, rep.partition)
        for b in lead.replicas:
            self._dirty.setdefault(b, set()).add(key)

    def remark(self, follower_id: int, keys: list[tuple[str, int]]) -> None:
        """Look at ``keys`` again in ``follower_id``'s next fetch (it is behind on them: an
        answer bounded by its byte budget, an error)."""
        if keys:
            self._dirty.setdefault(follower_id, set()).update(keys)

    def take_dirty(self, follower_id: int) -> set[tuple[str, int]]:
        """The partitions marked for ``follower_id`` since the last call (then forgotten)."""
        return self._dirty.pop(follower_id, None) or set()

    def walk_due(self, follower_id: int, now: float) -> bool:
        """Whether ``follower_id``'s fetch must look at its whole session now."""
        last = self._walked.get(follower_id)
        return last is None or last[0] != self._walk_all_seq or now >= last[1]

    def walked(self, follower_id: int, next_at: float) -> None:
        """``follower_id``'s fetch looks at its whole session; the next such walk at ``next_at``."""
        self._walked[follower_id] = (self._walk_all_seq, next_at)
        self._dirty.pop(follower_id, None)

    def role_changed(self, rep: PartitionReplica | None = None) -> None:
        """``rep``'s role or epoch changed (None: every replica's): wake the parked fetches
        of its replicas (a fetch parked on a partition this broker no longer leads must
        answer now) and every ``wait_roles_changed``. Not every follower's fetches: a
        thousand new leaderships would make each follower's session fetch spin through all
        its partitions a thousand times."""
        self.roles_seq += 1
        event, self._roles_event = self._roles_event, asyncio.Event()
        event.set()
        consumers = self.consumers
        if consumers is not None:
            if rep is None:
                consumers.mark_all()
            else:
                consumers.mark((rep.topic, rep.partition))
        va = self.view.topics.get(rep.topic) if rep is not None else None
        if rep is None or va is None or not 0 <= rep.partition < len(va.value.partitions):
            self._walk_all_seq += 1
            self._wake(list(self._fetch_waiters))
        else:
            replicas = va.value.partitions[rep.partition]
            key = (rep.topic, rep.partition)
            for b in replicas:
                self._dirty.setdefault(b, set()).add(key)
            self._wake(replicas)

    async def wait_roles_changed(self, view_seq: int, roles_seq: int, timeout: float) -> None:
        """Until the view changes after ``view_seq``, a replica's role after ``roles_seq``,
        or ``timeout`` seconds pass."""
        if self.view.seq != view_seq or self.roles_seq != roles_seq:
            return
        waits = {
            asyncio.ensure_future(self.view.wait_changed(view_seq, timeout)),
            asyncio.ensure_future(self._roles_event.wait()),
        }
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    def _wake(self, ids: Iterable[int]) -> None:
        for b in ids:
            waiters = self._fetch_waiters.pop(b, None)
            if waiters:
                for fut in waiters:
                    if not fut.done():
                        fut.set_result(None)
