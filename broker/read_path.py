"""The read half of the broker: consumer fetches (long-polled, across both tiers) and
follower fetches (Kafka's ``ReplicaManager.fetchMessages`` and its delayed fetch).

* consumer fetches are served by the leader only, below the high watermark (the last
  stable offset for ``read_committed``), from local segments or, below the local log
  start, from the bucket (tiering); a fetch long-polls until ``min_bytes`` or
  ``max_wait_ms``, woken by the high watermark (``log`` registers the waker);
* follower fetches (``replica_fetch``) read up to the log end, record the follower's
  progress (which moves the high watermark and the ISR) and long-poll for appends.

Nothing here knows about wire formats: it takes and returns the plain values below.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from broker.consumer_marks import ConsumerMarks
from broker.fetch_sessions import Session, SessionPartition, TopicPartition
from broker.log_manager import ClusterLogManager
from broker.metrics import BrokerMetrics
from broker.partition_replica import PartitionReplica, Role
from broker.replica_manager import ReplicaManager
from broker.replication.leader_state import monotonic_ms
from hot.errors import OffsetMovedToTieredStorageError, StrataError
from hot.log import Log
from hot.region import FileRegion
from hot.txn_index import AbortedTxn
from tiering.remote_read import RemoteReader, RemoteReadResult
from tiering.remote_txn import combine

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error: StrataError | None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    regions: tuple[FileRegion, ...] = ()
    size: int = 0
    # Whole batches read from the object store (offsets below the local log start), as views
    # of the chunk cache's buffers (never joined: the Fetch encoder sends each as a frame
    # part); a partition's data is either ``regions`` (local, sent with sendfile) or this.
    # Cache hits on chunk files come as file regions (sendfile), see RemoteReadResult.sendable.
    remote: tuple[bytes | memoryview | FileRegion, ...] = ()
    # Replica fetches (cluster mode): the leader's segment base offsets within the batches
    # returned, so the follower's segments begin where the leader's do.
    segment_bases: tuple[int, ...] = ()
    # read_committed fetches: the aborted transactions overlapping the batches returned
    # (None for read_uncommitted, which Kafka answers with a null list).
    aborted: tuple[AbortedTxn, ...] | None = None
    # Offsets the batches returned cover (next - first): the records served, counted from
    # batch headers already parsed (an upper bound where a compacted segment skips offsets).
    record_span: int = 0

    @property
    def records(self) -> tuple[FileRegion, ...] | tuple[bytes | memoryview | FileRegion, ...]:
        """What to put in a Fetch response: the file regions, or the remote bytes."""
        return self.regions if self.regions else self.remote

    def read(self) -> bytes:
        """The batches' bytes (REST, tests)."""
        if self.regions:
            return b"".join(r.read() for r in self.regions)
        return b"".join(p.read() if isinstance(p, FileRegion) else p for p in self.remote)


class RemoteTier(Protocol):
    """What the broker needs of tiered storage (``tiering.service.TieringService``)."""

    @property
    def reader(self) -> RemoteReader: ...

    def uploaded(self, topic: str, partition: int) -> int:
        """The remote next offset of the partition (0: nothing uploaded)."""
        ...


class ReadPath:
    """One broker's fetches over its replicas (module docstring)."""

    def __init__(
        self,
        manager: ClusterLogManager,
        replicas: ReplicaManager,
        metrics: BrokerMetrics,
        tiering: RemoteTier | None,
    ) -> None:
        self.manager = manager
        self.replicas = replicas
        self.metrics = metrics
        # How often an incremental follower fetch looks at its whole session (ReplicaWakeups):
        # a safety net for what no mark reports (a log start moved by retention). The ISR
        # bookkeeping does not depend on it (``ReplicaWakeups.session_seen``, issue 35).
        self.walk_s = replicas.config.replica_lag_time_max_ms / 1000
        self.tiering = tiering
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._waiters: dict[int, set[asyncio.Future[None]]] = {}
        self._listening: weakref.WeakSet[Log] = weakref.WeakSet()
        # Consumer fetch sessions' marks: their incremental fetches look at what changed.
        # Their own HW listener, gated by the logs they watch: ``_waiters`` gates the
        # parked fetches' listener and loses a key when its last waiter goes, which a
        # session's watch, held between fetches, must not.
        self.consumers = ConsumerMarks(self.walk_s)
        replicas.wakeups.consumers = self.consumers

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on ``loop``'s thread: parked fetches live there."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def wake_all(self) -> None:
        """Wake every parked fetch (a topic was deleted: its fetches answer now)."""
        for key in list(self._waiters):
            self._wake_key(key)
        self.consumers.mark_all()

    def park(self, fut: asyncio.Future[None], logs: Iterable[Log]) -> list[int]:
        """Wake ``fut`` when the high watermark of any of ``logs`` (each had from ``log``,
        so listened to) moves, or a topic is deleted: a parked long poll. Register before
        reading, or check the marks again after: a move in between wakes nobody. Undone
        by ``unpark`` with the keys returned."""
        keys = []
        waiters = self._waiters
        for lg in logs:
            key = id(lg)
            waiting = waiters.get(key)
            if waiting is None:
                waiters[key] = {fut}
            else:
                waiting.add(fut)
            keys.append(key)
        return keys

    def unpark(self, fut: asyncio.Future[None], keys: Iterable[int]) -> None:
        waiters = self._waiters
        for key in keys:
            waiting = waiters.get(key)
            if waiting is not None:
                waiting.discard(fut)
                if not waiting:
                    del waiters[key]

    def at_end(self, lg: Log, offset: int, read_committed: bool) -> tuple[int, int, int] | None:
        """(high watermark, last stable offset, log start offset) when ``offset`` is the end
        of what the reader may see of ``lg`` (the HW, or the LSO for ``read_committed``)
        in its local tier, so that ``lg.read`` would answer nothing: what an idle
        consumer asks of every partition, answered without the read's lock, segment
        lookup and result. None: read it."""
        lso = lg.last_stable_offset
        hw = lg.high_watermark
        start = lg.log_start_offset
        if (
            offset == (lso if read_committed else hw)
            and start <= offset
            and lg.local_log_start_offset <= offset
            and lg.is_online
        ):
            return hw, lso, start
        return None

    def log(self, topic: str, partition: int) -> Log:
        """The partition's log, its high-watermark advances waking the fetches parked on it."""
        lg = self.manager.get_log(topic, partition)
        if lg not in self._listening:
            lg.add_hw_listener(self._on_hw_advance, gate=self._waiters)
            lg.add_hw_listener(self._on_watched_hw, gate=self.consumers.gate)
            self._listening.add(lg)
        return lg

    def _on_watched_hw(self, lg: Log) -> None:
        """Mark ``lg``'s partition for the consumer sessions watching it (its high
        watermark moved, or it went offline or closed), on the loop's thread."""
        if id(lg) in self.consumers.gate:
            self._on_loop(self.consumers.mark, (lg.topic, lg.partition))

    def _on_hw_advance(self, lg: Log) -> None:
        """Wake the fetches parked on ``lg``. Runs on whichever thread moved the high
        watermark: the event loop for an append in interval mode (once per append), the
        group-commit thread after an fsync, a REST worker thread.

        Cheap when nobody waits: a fetch registers its waiter before it reads, so one
        registered after this membership test (a dict lookup, atomic under the GIL)
        reads the data that moved the high watermark anyway. On the loop's own thread
        the waiters are woken in place (no self-pipe write); elsewhere the wake hops
        onto the loop before touching futures."""
        key = id(lg)
        if key in self._waiters:
            self._on_loop(self._wake_key, key)

    def _on_loop(self, fn: Callable[[_T], None], arg: _T) -> None:
        """``fn(arg)`` on the event loop's thread: in place when called there (no self-pipe
        write), else handed over; dropped once the loop is closed or closing."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            fn(arg)
            return
        try:
            loop.call_soon_threadsafe(fn, arg)
        except RuntimeError:
            pass  # loop shutting down

    def _wake_key(self, key: int) -> None:
        waiters = self._waiters.pop(key, None)
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def remote_bound(self, lg: Log, offset: int) -> int | None:
        """The offset where the local tier starts if ``offset`` must be read remotely, else None."""
        if self.tiering is None:
            return None
        local_start = min(lg.local_log_start_offset, lg.high_watermark)
        if lg.log_start_offset <= offset < local_start:
            return local_start
        return None

    async def _read_remote(
        self, lg: Log, offset: int, max_bytes: int, bound: int, *, min_one: bool
    ) -> RemoteReadResult:
        assert self.tiering is not None
        topic_id = self.manager.topic(lg.topic).topic_id
        return await self.tiering.reader.read(
            lg.topic, topic_id, lg.partition, offset, max_bytes, min_one=min_one, max_offset=bound
        )

    async def _read_all(
        self, parts: Sequence[FetchRequestPartition], max_bytes: int, *, read_committed: bool = False
    ) -> list[FetchedPartition]:
        """Read every partition, filling ``max_bytes`` in request order (whole batches; the
        first partition with data gets at least one batch, KIP-74). ``read_committed``
        (isolation level 1): only below the last stable offset, with the aborted
        transactions of the range.

        Partitions whose offset is below the local log start are read from the object
        store first, all at once (one slow GET delays none of the others, and never a
        produce); their results are then cut to the budget left at their turn.
        """
        remote: dict[int, asyncio.Future[RemoteReadResult]] = {}
        if self.tiering is not None:
            for i, p in enumerate(parts):
                try:
                    lg = self.log(p.topic, p.partition)
                except StrataError:
                    continue
                bound = self.remote_bound(lg, p.offset)
                if bound is not None:
                    if read_committed:
                        bound = min(bound, lg.last_stable_offset)
                    limit = max(0, min(p.max_bytes, max_bytes))
                    remote[i] = asyncio.ensure_future(
                        self._read_remote(lg, p.offset, limit, bound, min_one=True)
                    )
            if remote:
                try:
                    await asyncio.wait(remote.values())
                except BaseException:
                    for t in remote.values():
                        t.cancel()
                    raise
                for t in remote.values():
                    t.exception()  # retrieved here; raised per partition below
        out: list[FetchedPartition] = []
        budget = max_bytes
        first_with_data = True
        for i, p in enumerate(parts):
            try:
                lg = self.log(p.topic, p.partition)
                limit = max(0, min(p.max_bytes, budget))
                task = remote.get(i)
                if task is not None:
                    r = task.result().truncate(limit, min_one=first_with_data)
                    fp = await self._remote_fetched(p, lg, r, read_committed)
                else:
                    end = self.at_end(lg, p.offset, read_committed)
                    if end is not None:
                        out.append(
                            FetchedPartition(
                                p.topic,
                                p.partition,
                                None,
                                high_watermark=end[0],
                                last_stable_offset=end[1],
                                log_start_offset=end[2],
                                aborted=() if read_committed else None,
                            )
                        )
                        continue
                    lso = lg.last_stable_offset
                    try:
                        result = lg.read(
                            p.offset,
                            limit,
                            min_one=first_with_data,
                            max_offset=lso if read_committed else None,
                        )
                    except OffsetMovedToTieredStorageError:
                        # local retention removed the segment since the first pass
                        bound = self.remote_bound(lg, p.offset)
                        if bound is None:
                            raise
                        if read_committed:
                            bound = min(bound, lso)
                        r = await self._read_remote(lg, p.offset, limit, bound, min_one=first_with_data)
                        fp = await self._remote_fetched(p, lg, r, read_committed)
                    else:
                        fp = FetchedPartition(
                            p.topic,
                            p.partition,
                            None,
                            high_watermark=lg.high_watermark,
                            last_stable_offset=lso,
                            log_start_offset=lg.log_start_offset,
                            regions=result.regions,
                            size=result.size,
                            aborted=self._aborted(lg, p.offset, result.next_offset, result.size)
                            if read_committed
                            else None,
                            record_span=result.next_offset - result.first_offset if result.size else 0,
                        )
            except StrataError as exc:
                fp = FetchedPartition(p.topic, p.partition, exc)
            if fp.size:
                first_with_data = False
                budget -= fp.size
            out.append(fp)
        return out

    @staticmethod
    def _aborted(lg: Log, start: int, next_offset: int, size: int) -> tuple[AbortedTxn, ...]:
        """The aborted transactions a read_committed client needs to drop the aborted
        records among the batches returned (Kafka: those overlapping [fetch offset, the
        offset after the last batch))."""
        if not size:
            return ()
        return tuple(lg.collect_aborted_transactions(start, next_offset))

    async def _remote_fetched(
        self, p: FetchRequestPartition, lg: Log, r: RemoteReadResult, read_committed: bool = False
    ) -> FetchedPartition:
        aborted: tuple[AbortedTxn, ...] | None = None
        if read_committed:
            aborted = await self._remote_aborted(lg, p.offset, r.next_offset) if r.size else ()
        return FetchedPartition(
            p.topic,
            p.partition,
            None,
            high_watermark=lg.high_watermark,
            last_stable_offset=lg.last_stable_offset,
            log_start_offset=lg.log_start_offset,
            remote=r.sendable(),
            size=r.size,
            aborted=aborted,
            record_span=r.next_offset - r.first_offset if r.size else 0,
        )

    async def _remote_aborted(self, lg: Log, start: int, next_offset: int) -> tuple[AbortedTxn, ...]:
        """The aborted transactions of a read_committed fetch served from the bucket: the
        tiered transaction indexes (Kafka's stop rule), continued in the local segments
        when the remote search could not settle it (a transaction whose marker is local)."""
        assert self.tiering is not None
        topic_id = self.manager.topic(lg.topic).topic_id
        remote = await self.tiering.reader.search_aborted_transactions(
            lg.topic, topic_id, lg.partition, start, next_offset
        )
        local = () if remote.complete else lg.collect_aborted_transactions(start, next_offset)
        return tuple(combine(remote, local))

    async def fetch(
        self,
        parts: Sequence[FetchRequestPartition],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        read_committed: bool = False,
        leaders_checked: bool = False,
    ) -> list[FetchedPartition]:
        """Consumer fetch: leaders only, below the high watermark (below the last stable
        offset for ``read_committed``); long-polls, and the HW listener wakes it when the HW
        (and so the LSO) moves. ``leaders_checked``: the caller has just checked that this
        broker leads every partition (the Fetch handler, with the request's leader epochs)."""
        if leaders_checked:
            return await self._fetch_led(
                parts,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                read_committed=read_committed,
            )
        errors: dict[int, FetchedPartition] = {}
        ok: list[FetchRequestPartition] = []
        for i, p in enumerate(parts):
            try:
                self.replicas.leader_replica(p.topic, p.partition, getattr(p, "current_leader_epoch", -1))
                ok.append(p)
            except StrataError as exc:
                errors[i] = FetchedPartition(p.topic, p.partition, exc)
        if errors:
            max_wait_ms = 0  # an error is answered at once, as Kafka does
        fetched = iter(
            await self._fetch_led(
                ok,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                read_committed=read_committed,
            )
            if ok
            else []
        )
        return [errors[i] if i in errors else next(fetched) for i in range(len(parts))]

    async def _fetch_led(
        self,
        parts: Sequence[FetchRequestPartition],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        read_committed: bool = False,
    ) -> list[FetchedPartition]:
        """Read every (led) partition; long-poll until ``min_bytes`` are available or ``max_wait_ms`` passes.

        Waiters are registered before each read, so an append landing between the read
        and the wait still wakes us. A wait that expires unwoken answers what was read
        before it (the log start offsets in it as of that read).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            logs = []
            for p in parts:
                try:
                    logs.append(self.log(p.topic, p.partition))
                except StrataError:
                    continue
            keys = self.park(fut, logs)
            try:
                results = await self._read_all(parts, max_bytes, read_committed=read_committed)
                total = sum(r.size for r in results)
                remaining = deadline - loop.time()
                if (
                    total >= max(min_bytes, 1)
                    or remaining <= 0
                    or any(r.error is not None for r in results)
                    or not keys
                ):
                    self.served(results)
                    return results
                try:
                    await asyncio.wait_for(fut, timeout=remaining)
                except TimeoutError:
                    # Nothing woke it: no high watermark (so no LSO) of these partitions
                    # moved and no topic went, so reading them all again would answer the
                    # same (an idle consumer's long poll reads its partitions once, not twice).
                    return results
            finally:
                self.unpark(fut, keys)

    async def read_once(
        self, parts: Sequence[FetchRequestPartition], max_bytes: int, *, read_committed: bool = False
    ) -> list[FetchedPartition]:
        """One read of (led) partitions, no waiting and nothing counted: a consumer session
        fetch's look (api.handlers.fetch), which waits on its session's marks instead
        and counts what it answers with ``served``."""
        return await self._read_all(parts, max_bytes, read_committed=read_committed)

    def served(self, results: Iterable[FetchedPartition]) -> None:
        """Count the records and bytes a consumer fetch answers (per topic)."""
        for r in results:
            if r.size:
                totals = self.metrics.fetched(r.topic)
                totals[0] += r.record_span
                totals[1] += r.size

    async def replica_fetch(
        self,
        follower_id: int,
        parts: Sequence[tuple[TopicPartition, SessionPartition]],
        *,
        max_wait_ms: int,
        max_bytes: int,
        incremental: bool = False,
        session: Session | None = None,
        asked: Sequence[TopicPartition] = (),
    ) -> list[FetchedPartition]:
        """A follower's fetch: whole batches up to the log end, in request order within
        ``max_bytes`` (the first partition with data gets at least one batch); waits up to
        ``max_wait_ms`` for an append when there is nothing to send.

        ``incremental`` (a fetch session's incremental request, KIP-227): a partition with
        nothing to say is left out of the answer, and one that is *quiet* (the follower at
        the log end, already recorded there recently, and the marks last sent to it still
        the log's: ``SessionPartition``) is not even recorded (``LeaderState.quiet_fetch``):
        an idle follower's fetch costs a few attribute reads per partition.

        With the incremental request's ``session``, not even that: only the partitions
        the request states (``asked``) and those marked for this follower since its last
        fetch (``ReplicaWakeups.dirty``: appended, high watermark moved, role changed) are
        looked at, and the whole session every ``walk_s`` (``walk_due``). The fetch's time
        is noted for the session (``ReplicaWakeups.session_seen``): it restates every
        partition left out, which is when a quiet one was last caught up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        replicas = self.replicas
        by_key = replicas.replicas
        wakeups = replicas.wakeups
        if incremental and session is not None:
            in_session = session.partitions
            wakeups.session_seen(follower_id, session, monotonic_ms())

            def pick(extra: Sequence[TopicPartition] = ()) -> list[tuple[TopicPartition, SessionPartition]]:
                now = loop.time()
                if wakeups.walk_due(follower_id, now):
                    wakeups.walked(follower_id, now + self.walk_s)
                    return list(in_session.items())
                keys = wakeups.take_dirty(follower_id)
                keys.update(extra)
                return [(tp, sp) for tp in keys if (sp := in_session.get(tp)) is not None]

            parts = pick(asked)
        while True:
            out: list[FetchedPartition] = []
            served: list[PartitionReplica] = []
            quiet: list[tuple[TopicPartition, SessionPartition, Log]] = []
            budget = max_bytes
            failed = False
            behind: list[TopicPartition] = []  # had something to read, or failed: look again
            for (topic, partition), sp in parts:
                if incremental:
                    rep = by_key.get((topic, partition))
                    lead = rep.leader if rep is not None else None
                    if (
                        rep is not None
                        and lead is not None
                        and rep.role is Role.LEADER
                        and sp.current_leader_epoch in (-1, rep.leader_epoch)
                        and not rep.low_watermark_waiters
                    ):
                        lg = rep.log
                        hw = lg.high_watermark
                        if (
                            sp.fetch_offset == lg.log_end_offset
                            and sp.high_watermark == hw
                            and sp.last_stable_offset == hw
                            and sp.leader_log_start == lg.log_start_offset
                            and lead.quiet_fetch(follower_id, sp.fetch_offset, sp.log_start_offset)
                        ):
                            quiet.append(((topic, partition), sp, lg))
                            continue
                try:
                    rep = replicas.leader_replica(topic, partition, sp.current_leader_epoch)
                    replicas.follower_fetch(rep, follower_id, sp.fetch_offset, sp.log_start_offset)
                    lg = rep.log
                    hw = lg.high_watermark
                    if sp.fetch_offset == lg.log_end_offset:
                        # Caught up (an idle follower's every partition): nothing to read.
                        out.append(
                            FetchedPartition(
                                topic,
                                partition,
                                None,
                                high_watermark=hw,
                                last_stable_offset=hw,
                                log_start_offset=lg.log_start_offset,
                            )
                        )
                        served.append(rep)
                        continue
                    behind.append((topic, partition))
                    r = lg.read(
                        sp.fetch_offset,
                        max(0, min(sp.max_bytes, budget)),
                        max_offset=lg.log_end_offset,
                        min_one=budget == max_bytes,
                    )
                    out.append(
                        FetchedPartition(
                            topic,
                            partition,
                            None,
                            high_watermark=hw,
                            last_stable_offset=hw,
                            log_start_offset=lg.log_start_offset,
                            regions=r.regions,
                            size=r.size,
                            segment_bases=_segment_bases(lg, r.first_offset, r.next_offset) if r.size else (),
                        )
                    )
                    budget -= r.size
                    served.append(rep)
                except StrataError as exc:
                    failed = True
                    behind.append((topic, partition))
                    out.append(FetchedPartition(topic, partition, exc))
            # Nothing to wait for: no partition (an empty session's look at what changed
            # finds none, yet waits like any idle session).
            empty = not (served or quiet) and not (incremental and session is not None and session.partitions)
            if failed or budget < max_bytes or empty or loop.time() >= deadline:
                wakeups.remark(follower_id, behind)
                return out
            waiter = replicas.wakeups.data_waiter(follower_id)
            try:
                await asyncio.wait_for(waiter, deadline - loop.time())
                if incremental and session is not None:
                    # Woken by an append (or a role change): what was looked at, and what
                    # was marked since.
                    parts = _again(in_session, quiet, served, pick())
            except TimeoutError:
                if incremental and session is not None:
                    marked = pick()
                    if marked:
                        # Marks moved meanwhile (a high watermark, by another follower's
                        # fetch): one more look at those and at what was looked at, then
                        # the answer (the deadline has passed).
                        parts = _again(in_session, quiet, served, marked)
                        continue
                # Nothing was appended to any of them: the answer is the one read above,
                # with the offsets that may have moved meanwhile (not a second pass over
                # every partition, which doubled an idle follower's cost), and the quiet
                # partitions whose marks moved (the high watermark, by another follower).
                out = [_marks_now(f, rep.log) for f, rep in zip(out, served, strict=True)]
                for (topic, partition), sp, lg in quiet:
                    hw, lso = lg.high_watermark, lg.log_start_offset
                    if sp.high_watermark != hw or sp.leader_log_start != lso:
                        out.append(
                            FetchedPartition(
                                topic,
                                partition,
                                None,
                                high_watermark=hw,
                                last_stable_offset=hw,
                                log_start_offset=lso,
                            )
                        )
                return out
            finally:
                replicas.wakeups.drop_data_waiter(follower_id, waiter)


def _again(
    in_session: dict[TopicPartition, SessionPartition],
    quiet: list[tuple[TopicPartition, SessionPartition, Log]],
    served: list[PartitionReplica],
    marked: list[tuple[TopicPartition, SessionPartition]],
) -> list[tuple[TopicPartition, SessionPartition]]:
    """A session fetch's partitions for another look: those looked at, then those marked
    since, each once (a partition twice in an answer would be appended twice)."""
    keys = dict.fromkeys(tp for tp, _, _ in quiet)
    keys.update(dict.fromkeys((rep.topic, rep.partition) for rep in served))
    keys.update(dict.fromkeys(tp for tp, _ in marked))
    return [(tp, sp) for tp in keys if (sp := in_session.get(tp)) is not None]


def _marks_now(f: FetchedPartition, lg: Log) -> FetchedPartition:
    hw, lso = lg.high_watermark, lg.log_start_offset
    if hw == f.high_watermark and lso == f.log_start_offset:
        return f
    return replace(f, high_watermark=hw, last_stable_offset=hw, log_start_offset=lso)


def _segment_bases(lg: Log, first: int, end: int) -> tuple[int, ...]:
    """Base offsets of ``lg``'s segments that begin within [first, end) (a replica read):
    where the follower must start new segments. Read on the event loop right after the
    read, with no append (hence no roll) in between."""
    return tuple(b for b in (s.base_offset for s in lg.segments()) if first <= b < end)
