"""Follower fetching: one task per leader broker pulls every partition this broker follows
from it, over the Kafka protocol, as Kafka's replica fetcher threads do.

Per partition, after every change of leader or epoch (``broker.replication.follower``):

1. truncate by leader epoch (KIP-101/279): OffsetForLeaderEpoch for the log's latest
   epoch, ``truncation_for`` the answer, repeated while the answer names an epoch this
   replica lacks; a log without epochs truncates to its high watermark;
2. fetch from the log end with ``replica_id`` = this broker and the epoch from etcd as
   ``current_leader_epoch``; append the batches unchanged (``append_as_follower``);
   in ``fsync`` flush mode flush them before the next fetch (whose offset tells the
   leader they are safe here); take ``min(leader HW, log end)`` as high watermark, and
   move the log start offset up to the leader's (bounded by that high watermark);
3. on an error, do what ``fetch_error_action`` says: OFFSET_OUT_OF_RANGE asks the
   leader's log start / end (ListOffsets) for ``on_offset_out_of_range``; errors
   meaning "stale metadata" wait until etcd shows a new leader or epoch.

Every await is followed by a check that the replica still follows this leader in this
epoch (``ReplicaManager.following``): a role change in between wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker.inter_broker import InterBrokerClient
from broker.replication.follower import (
    Backoff,
    FetchFrom,
    ResolveOutOfRange,
    Truncate,
    TruncateFully,
    fetch_error_action,
    on_offset_out_of_range,
    truncation_for,
    truncation_without_epochs,
)
from hot.batch import peek_size
from hot.errors import InvalidRecordError, StrataError
from hot.log import Log
from hot.tasks import cancel_and_wait
from kclient.sasl import authenticate
from kwire import ApiKey, ProtocolError, decode_response, encode_request
from kwire.apis import APIS
from kwire.error_table import NONE
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kwire.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kwire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)

if TYPE_CHECKING:
    from broker.cluster_config import ClusterConfig
    from broker.partition_replica import PartitionReplica

log = logging.getLogger("strata.cluster.fetcher")


class FollowerHost(Protocol):
    """What a fetcher needs of the replicas it follows for (``broker.replica_manager``'s
    ReplicaManager, which owns the fetchers)."""

    @property
    def config(self) -> ClusterConfig: ...

    @property
    def broker_id(self) -> int: ...

    @property
    def security(self) -> InterBrokerClient | None: ...

    def following(self, rep: PartitionReplica, leader_id: int, epoch: int) -> bool: ...

    def address_of(self, broker_id: int) -> tuple[str, int] | None: ...


EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405: the first offset on the leader's local disk
_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 1 << 30


class FetchConnectionError(StrataError):
    """The connection to the leader failed (closed, timed out, or a malformed answer)."""

    retriable = True


# Followers fetch by topic name: Fetch v12, the last version that carries names (v13+
# name topics by id, which a follower would have to map back for nothing).
REPLICA_FETCH_VERSION = 12


class BrokerConnection:
    """One Kafka protocol connection to another broker; one request at a time."""

    def __init__(
        self, host: str, port: int, client_id: str, security: InterBrokerClient | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security  # TLS and/or SASL towards the leader (broker.inter_broker)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    async def open(self, timeout: float) -> None:
        sec = self.security
        tls: dict[str, Any] = {}
        if sec is not None and sec.ssl_context is not None:
            tls = {"ssl": sec.ssl_context, "server_hostname": self.host, "ssl_handshake_timeout": timeout}
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20, **tls), timeout
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise FetchConnectionError(f"cannot connect to {self.host}:{self.port}: {exc!r}") from exc
        self._reader, self._writer = reader, writer
        if sec is not None and sec.sasl_mechanism is not None:
            assert sec.sasl_username is not None and sec.sasl_password is not None
            try:
                await authenticate(
                    lambda key, req: self.call(key, req, timeout),
                    sec.sasl_mechanism,
                    sec.sasl_username,
                    sec.sasl_password,
                )
            except StrataError as exc:
                await self.close()
                raise FetchConnectionError(f"{self.host}:{self.port}: {exc}") from exc
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Without it Nagle holds back a fetch behind the previous one's unacknowledged
            # bytes until the peer's delayed ACK (~40 ms): every acks=all write pays it.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def call(self, api_key: int, request: Any, timeout: float, *, version: int | None = None) -> Any:
        """One request at ``version`` (default: the newest this codec speaks; every broker of
        a cluster runs the same code)."""
        reader, writer = self._reader, self._writer
        if reader is None or writer is None:
            raise FetchConnectionError("not connected")
        if version is None:
            version = APIS[api_key].max_version
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        payload = encode_request(api_key, version, self._correlation, self.client_id, request)
        try:
            writer.write(_SIZE.pack(len(payload)) + payload)
            async with asyncio.timeout(timeout):
                await writer.drain()
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if not 0 <= size <= _MAX_RESPONSE:
                    raise FetchConnectionError(f"response of {size} bytes from {self.host}:{self.port}")
                frame = await reader.readexactly(size)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, RuntimeError) as exc:
            # RuntimeError: uvloop's write on a transport the peer has already reset
            raise FetchConnectionError(f"{APIS[api_key].name} to {self.host}:{self.port}: {exc!r}") from exc
        try:
            correlation, response = decode_response(api_key, version, frame)
        except ProtocolError as exc:
            raise FetchConnectionError(f"undecodable {APIS[api_key].name} response: {exc}") from exc
        if correlation != self._correlation:
            raise FetchConnectionError(f"correlation id {correlation}, expected {self._correlation}")
        return response

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)


def _append_at_leader_bases(lg: Log, records: memoryview, bases: Sequence[int]) -> None:
    """Append fetched batches, starting a new segment before each batch at which one of
    the leader's segments begins (``bases``, sent by the leader with the batches) and
    nowhere else: this replica never rolls on its own size or clock (``segment.ms``), so
    its segment boundaries are the leader's, whatever the two clocks or the moments each
    applied a ``segment.bytes`` change."""
    cuts = set(bases)
    start = pos = 0
    n = len(records)
    roll_first = False
    while pos < n:
        batch = peek_size(records, pos)
        if batch is None or pos + batch > n:
            break  # a partial batch at the end: append_as_follower refuses it below
        base = int.from_bytes(records[pos : pos + 8], "big", signed=True)
        if base in cuts:
            if pos > start:
                lg.append_as_follower(records[start:pos], roll=roll_first)
            start, roll_first = pos, True
        pos += batch
    lg.append_as_follower(records[start:], roll=roll_first)


def _append_aligned(lg: Log, records: memoryview) -> None:
    """Append fetched batches so that this replica's segments roll where the leader's did.

    The leader decides to roll per produce request (in practice one batch per partition):
    before a batch that would take its active segment past ``segment.bytes``. Appending a
    whole fetch at once would roll before the fetch instead, at another offset; with
    matching boundaries, a follower that becomes leader continues uploading to the bucket
    where the old leader stopped (tiered segments are whole local segments). So batches go
    in groups, each cut before a batch that would cross the limit.
    """
    limit = lg.config.segment_bytes
    size = lg.active_segment.size  # of the active segment once the batches so far are in
    start = pos = 0
    n = len(records)
    while pos < n:
        batch = peek_size(records, pos)
        if batch is None or pos + batch > n:
            break  # a partial batch at the end: append_as_follower refuses it below
        if size > 0 and size + batch > limit:  # the leader rolled before this batch
            if pos > start:
                lg.append_as_follower(records[start:pos])
            start, size = pos, 0  # the append starting here rolls first
        size += batch
        pos += batch
    lg.append_as_follower(records[start:])


@dataclass(eq=False)
class _Fetching:
    rep: PartitionReplica
    epoch: int
    truncated: bool = False
    retry_at: float = 0.0  # loop time before which the partition is not fetched (back-off)


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, manager: FollowerHost, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.config = manager.config
        self._parts: dict[tuple[str, int], _Fetching] = {}
        # The fetch session with this leader (KIP-227; broker.fetch_sessions is the
        # leader's side): its id (0: none yet, the next request is full and asks for
        # one), the epoch the next incremental request carries, and what the leader's
        # session holds for each partition (fetch offset, leader epoch, log start).
        self._session_id = 0
        self._session_epoch = 0
        self._in_session: dict[tuple[str, int], tuple[int, int, int]] = {}
        self._changed = asyncio.Event()
        # What an incremental fetch looks at (issue 35: an idle follower's fetch costs what
        # changed, not what it follows): partitions whose stated position may have moved
        # (appended, truncated, added, removed, backed off or back), those still to be
        # truncated, those backing off (until when); and, every ``walk_s``
        # (replica.lag.time.max.ms: a safety net, nothing waits on it), all of them.
        self._dirty: set[tuple[str, int]] = set()
        self._untruncated: set[tuple[str, int]] = set()
        self._backing: dict[tuple[str, int], float] = {}
        self.walk_s = self.config.replica_lag_time_max_ms / 1000
        self._walk_at = 0.0
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"fetcher-{leader_id}")
        self.fetches = 0

    @property
    def idle(self) -> bool:
        return not self._parts

    def add(self, rep: PartitionReplica, epoch: int) -> None:
        tp = (rep.topic, rep.partition)
        self._parts[tp] = _Fetching(rep, epoch)
        self._untruncated.add(tp)
        self._backing.pop(tp, None)
        self._dirty.add(tp)
        self._changed.set()

    def remove(self, rep: PartitionReplica) -> None:
        tp = (rep.topic, rep.partition)
        f = self._parts.get(tp)
        if f is not None and f.rep is rep:
            del self._parts[tp]
            self._untruncated.discard(tp)
            self._backing.pop(tp, None)
            self._dirty.add(tp)  # forgotten in the next incremental request

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await cancel_and_wait(self._task)

    def _live(self, f: _Fetching) -> bool:
        return self._parts.get((f.rep.topic, f.rep.partition)) is f and self.manager.following(
            f.rep, self.leader_id, f.epoch
        )

    # --- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.config.replica_fetch_backoff_ms / 1000.0
        conn: BrokerConnection | None = None
        try:
            while True:
                if not self._ready():
                    self._changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), self._next_retry())
                    continue
                address = self.manager.address_of(self.leader_id)
                if address is None:
                    await asyncio.sleep(backoff)
                    continue
                try:
                    if conn is None or (conn.host, conn.port) != address:
                        if conn is not None:
                            await conn.close()
                        conn = BrokerConnection(
                            address[0],
                            address[1],
                            f"strata-replica-fetcher-{self.manager.broker_id}",
                            self.manager.security,
                        )
                        await conn.open(self.config.etcd_timeout_s)
                    await self._truncate_all(conn)
                    await self._fetch_once(conn)
                except FetchConnectionError as exc:
                    log.info("fetcher from broker %d: %s; retrying", self.leader_id, exc)
                    if conn is not None:
                        await conn.close()
                    conn = None
                    await asyncio.sleep(backoff)
        finally:
            if conn is not None:
                await conn.close()

    def _ready(self) -> bool:
        now = asyncio.get_running_loop().time()
        for tp, at in list(self._backing.items()):
            if at <= now:  # back in the session
                del self._backing[tp]
                self._dirty.add(tp)
        return len(self._parts) > len(self._backing)

    def _next_retry(self) -> float | None:
        now = asyncio.get_running_loop().time()
        waits = [at - now for at in self._backing.values() if at > now]
        return max(min(waits), 0.001) if waits else None

    def _retry_later(self, f: _Fetching) -> None:
        f.retry_at = asyncio.get_running_loop().time() + self.config.replica_fetch_backoff_ms / 1000.0
        tp = (f.rep.topic, f.rep.partition)
        if self._parts.get(tp) is f:
            self._backing[tp] = f.retry_at
            self._dirty.add(tp)  # forgotten in the next request, stated again once back

    def _back_off(self, f: _Fetching, action: Backoff) -> None:
        # With refresh_metadata the answer changes once etcd shows a new leader or epoch,
        # which re-adds the partition (no back-off); until then retrying is harmless.
        self._retry_later(f)
        log.info("%s: fetch from broker %d backs off: %s", f.rep.name, self.leader_id, action.reason)

    def _set_truncated(self, f: _Fetching, done: bool) -> None:
        f.truncated = done
        tp = (f.rep.topic, f.rep.partition)
        self._dirty.add(tp)
        if done:
            self._untruncated.discard(tp)
        elif self._parts.get(tp) is f:
            self._untruncated.add(tp)

    # --- truncation ---------------------------------------------------------------------------

    async def _truncate_all(self, conn: BrokerConnection) -> None:
        for _ in range(64):  # one round per epoch the leader lacks; a bound, never reached
            now = asyncio.get_running_loop().time()
            pending = [
                f
                for tp in list(self._untruncated)
                if (f := self._parts.get(tp)) is not None and not f.truncated and f.retry_at <= now
            ]
            if not pending:
                return
            ask: list[_Fetching] = []
            for f in pending:
                lg = f.rep.log
                if lg.latest_epoch < 0:
                    t = truncation_without_epochs(lg.high_watermark, lg.log_end_offset)
                    self._truncate(f, t.offset)
                    self._set_truncated(f, True)
                else:
                    ask.append(f)
            if not ask:
                return
            by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
            for f in ask:
                by_topic.setdefault(f.rep.topic, []).append(
                    OffsetForLeaderPartition(
                        partition=f.rep.partition,
                        current_leader_epoch=f.epoch,
                        leader_epoch=f.rep.log.latest_epoch,
                    )
                )
            req = OffsetForLeaderEpochRequest(
                replica_id=self.manager.broker_id,
                topics=tuple(
                    OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
            resp = await conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, req, self.config.etcd_timeout_s + 5.0)
            answers = {(t.topic, p.partition): p for t in resp.topics for p in t.partitions}
            for f in ask:
                a = answers.get((f.rep.topic, f.rep.partition))
                if a is None or not self._live(f):
                    continue
                if a.error_code != NONE:
                    action = fetch_error_action(a.error_code)
                    if isinstance(action, Backoff):
                        self._back_off(f, action)
                    continue
                lg = f.rep.log
                t = truncation_for(
                    a.leader_epoch, a.end_offset, lg.leader_epochs(), lg.log_end_offset, lg.high_watermark
                )
                self._truncate(f, t.offset)
                self._set_truncated(f, t.complete)

    def _truncate(self, f: _Fetching, offset: int) -> None:
        lg = f.rep.log
        self._dirty.add((f.rep.topic, f.rep.partition))
        if offset < lg.log_end_offset:
            log.info(
                "%s: truncating from %d to %d (leader %d, epoch %d)",
                f.rep.name,
                lg.log_end_offset,
                offset,
                self.leader_id,
                f.epoch,
            )
        # Also at the log end: that drops an epoch entry this replica took as leader
        # without writing in it, so the next OffsetForLeaderEpoch round asks an older one.
        lg.truncate_to(offset)

    # --- fetching --------------------------------------------------------------------------------

    async def _fetch_once(self, conn: BrokerConnection) -> None:
        cfg = self.config
        now = asyncio.get_running_loop().time()
        full = self._session_id == 0
        # A full request, or every ``walk_s``: every partition followed. Otherwise only the
        # marked ones; the leader's session holds the others where they were.
        if full or now >= self._walk_at:
            self._walk_at = now + self.walk_s
            self._dirty.clear()
            looked = list(self._parts.items())
            gone = [tp for tp in self._in_session if tp not in self._parts] if not full else []
        else:
            marked, self._dirty = self._dirty, set()
            looked = [(tp, f) for tp in marked if (f := self._parts.get(tp)) is not None]
            gone = [tp for tp in marked if tp not in self._parts and tp in self._in_session]
        by_topic: dict[str, list[FetchPartition]] = {}
        # In a session only those whose position changed go in the request, the leader
        # has the others; one that cannot be fetched now (backing off, to be truncated)
        # leaves the session until it can.
        stated: dict[tuple[str, int], tuple[int, int, int]] = {}
        forgotten: dict[str, list[int]] = {}
        for topic, partition in gone:
            forgotten.setdefault(topic, []).append(partition)
        fetching = 0
        for tp, f in looked:
            if not f.truncated or f.retry_at > now:
                if not full and tp in self._in_session:
                    forgotten.setdefault(tp[0], []).append(tp[1])
                continue
            fetching += 1
            lg = f.rep.log
            offset = lg.log_end_offset
            state = (offset, f.epoch, lg.log_start_offset)
            if not full and self._in_session.get(tp) == state:
                continue
            stated[tp] = state
            by_topic.setdefault(f.rep.topic, []).append(
                FetchPartition(
                    partition=f.rep.partition,
                    current_leader_epoch=f.epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=lg.latest_epoch,
                    log_start_offset=lg.log_start_offset,
                    partition_max_bytes=cfg.replica_fetch_max_bytes,
                )
            )
        if full and not fetching:
            return
        req = FetchRequest(
            replica_id=self.manager.broker_id,
            max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=1,
            max_bytes=cfg.replica_fetch_response_max_bytes,
            session_id=self._session_id,
            session_epoch=self._session_epoch,
            topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(
                ForgottenTopic(topic=t, partitions=tuple(ps)) for t, ps in forgotten.items()
            ),
        )
        try:
            timeout = cfg.replica_fetch_wait_max_ms / 1000.0 + 30.0
            resp = await conn.call(ApiKey.FETCH, req, timeout, version=REPLICA_FETCH_VERSION)
        except BaseException:
            self._dirty.update(tp for tp, _ in looked)  # not stated after all: next time
            self._dirty.update(gone)
            raise
        self.fetches += 1
        if resp.error_code != NONE:
            # FETCH_SESSION_ID_NOT_FOUND (the leader restarted or evicted it),
            # INVALID_FETCH_SESSION_EPOCH: start over with a full request.
            log.info(
                "fetcher from broker %d: fetch session error %d; a full fetch next",
                self.leader_id,
                resp.error_code,
            )
            self._reset_session()
            return
        if resp.session_id == 0:
            self._reset_session()  # none made (or closed): the next request is full again
        else:
            self._session_id = resp.session_id
            self._session_epoch = 1 if full or self._session_epoch >= 0x7FFFFFFF else self._session_epoch + 1
            if full:
                self._in_session = stated
            else:
                for topic, ps in forgotten.items():
                    for p in ps:
                        self._in_session.pop((topic, p), None)
                self._in_session.update(stated)
        flush: list[_Fetching] = []
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                f = self._parts.get(tp)
                held = self._in_session.get(tp) if resp.session_id != 0 else stated.get(tp)
                if f is None or held is None or held[1] != f.epoch:
                    continue  # not fetched (any more) in this epoch
                offset = held[0]  # where the leader read it from
                self._dirty.add(tp)  # its position or marks move: state it next time
                if not self._live(f) or f.rep.log.log_end_offset != offset:
                    continue  # role changed or truncated meanwhile: this answer is stale
                if p.error_code != NONE:
                    await self._on_error(conn, f, p.error_code)
                    continue
                lg = f.rep.log
                records = p.records
                if records is not None and len(records) > 0:
                    try:
                        if p.segment_bases is not None:
                            _append_at_leader_bases(lg, memoryview(records), p.segment_bases)
                        else:  # a leader that does not send its bases: its size rule
                            _append_aligned(lg, memoryview(records))
                    except InvalidRecordError as exc:
                        log.warning(
                            "%s: cannot append fetched batches (%s); truncating again", f.rep.name, exc
                        )
                        self._set_truncated(f, False)
                        continue
                    except StrataError as exc:
                        log.error("%s: follower append failed: %s", f.rep.name, exc)
                        self._retry_later(f)
                        continue
                    if lg.config.fsync_mode:
                        flush.append(f)
                if p.high_watermark >= 0:
                    with contextlib.suppress(StrataError):
                        lg.set_high_watermark(min(p.high_watermark, lg.log_end_offset))
                if p.log_start_offset > lg.log_start_offset:
                    await self._follow_log_start(f, p.log_start_offset)
        # The next fetch offset tells the leader these records are here: in fsync mode
        # they must be on disk by then.
        for f in flush:
            with contextlib.suppress(StrataError):
                await asyncio.to_thread(f.rep.log.flush)

    def _reset_session(self) -> None:
        self._session_id = 0
        self._session_epoch = 0
        self._in_session = {}

    async def _follow_log_start(self, f: _Fetching, leader_log_start: int) -> None:
        """Move the log start offset up with the leader's (its total retention, or
        DeleteRecords), as Kafka's followers do; never past this replica's high watermark.
        Local segments left entirely below it go with the next retention pass."""
        lg = f.rep.log
        target = min(leader_log_start, lg.high_watermark)
        if target <= lg.log_start_offset:
            return
        try:
            await asyncio.to_thread(lg.advance_log_start_offset, target)
        except StrataError as exc:
            log.warning("%s: cannot follow the leader's log start %d: %s", f.rep.name, target, exc)

    async def _on_error(self, conn: BrokerConnection, f: _Fetching, code: int) -> None:
        action = fetch_error_action(code)
        if isinstance(action, Backoff):
            self._back_off(f, action)
            return
        assert isinstance(action, ResolveOutOfRange)
        lg = f.rep.log
        offsets = await self._leader_offsets(conn, f)
        if offsets is None or not self._live(f):
            return
        end, start, local_start = offsets
        decision = on_offset_out_of_range(lg.log_end_offset, end, start, local_start)
        if isinstance(decision, Truncate):
            self._truncate(f, decision.offset)
        elif isinstance(decision, TruncateFully):
            log.info(
                "%s: restarting empty at %d (leader's log start %d)",
                f.rep.name,
                decision.start_offset,
                decision.log_start_offset,
            )
            lg.truncate_fully_and_start_at(decision.start_offset, log_start_offset=decision.log_start_offset)
        else:
            assert isinstance(decision, FetchFrom)

    async def _leader_offsets(self, conn: BrokerConnection, f: _Fetching) -> tuple[int, int, int] | None:
        """The leader's (log end, log start, local log start) for ``f``, or None."""
        parts = tuple(
            ListOffsetsPartition(partition_index=f.rep.partition, current_leader_epoch=f.epoch, timestamp=ts)
            for ts in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)
        )
        out: list[int] = []
        for part in parts:
            req = ListOffsetsRequest(
                replica_id=self.manager.broker_id,
                topics=(ListOffsetsTopic(name=f.rep.topic, partitions=(part,)),),
            )
            resp = await conn.call(ApiKey.LIST_OFFSETS, req, self.config.etcd_timeout_s + 5.0)
            answer = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
            if answer is None or answer.error_code != NONE:
                code = answer.error_code if answer is not None else -1
                self._back_off(f, Backoff(False, f"ListOffsets failed with error code {code}"))
                return None
            out.append(answer.offset)
        return out[0], out[1], out[2]
