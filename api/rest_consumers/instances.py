"""REST Proxy v2 consumer instances (Confluent REST Proxy / Redpanda HTTP Proxy semantics).

Each instance is a real member of its group in this broker's GroupCoordinator, called
in-process (no Kafka connection): protocol type "consumer", offering the eager ``range``
and ``roundrobin`` protocols and then ``cooperative-sticky`` (KIP-429), so REST instances
and Kafka-protocol consumers, eager or cooperative, can share a group (a group of REST
instances alone picks ``range``). When an instance leads its group it computes the
assignment itself (api.rest_consumers.assignors) from every member's subscription.

Membership runs in one background task per subscribed instance: join (the subscription
names the partitions it owns and its generation), sync (as leader: assign), then
heartbeat every ``heartbeat_interval_ms``. A heartbeat answered REBALANCE_IN_PROGRESS
makes it rejoin: under an eager protocol after revoking every partition (after an
auto-commit when enabled); under a cooperative one it keeps its partitions, still served
to fetches, through the rebalance, and the new assignment says which to give up: those
are committed (auto-commit) and dropped, and the instance rejoins at once so that the
leader can hand them over in the next round. UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION (the
session was lost) make it forget its member id and positions and join afresh. A pattern
subscription is re-resolved against the topic list at every heartbeat; a change rejoins
with the new topics.

Positions: a newly assigned partition starts at the group's committed offset, else per
``auto.offset.reset`` (earliest: log start offset; latest: high watermark, or the last
stable offset under ``isolation.level`` read_committed; none: error). read_committed
instances read below the last stable offset and drop aborted transactions' records.
Positions of partitions kept across a rebalance (same or next generation) survive it.
Records returned by a fetch advance the positions only past records the caller could
convert (a record that cannot be represented in the instance's format ends the batch
before it and is an error when it comes first: never a silent loss), and only for
partitions still assigned and not seeked meanwhile. A stored batch that does not decode
(api.stored_batches) is treated the same way: a fetch returns what precedes it (and
nothing of the partitions after it in that fetch's rotation), and raises its
StoredBatchError (503, naming the offsets and ``strata check``) once it comes first, until
the instance seeks past it.

Commits follow Confluent's v2 API: an explicit offset names the last record processed
and the committed offset is that + 1 (the next to read, as Kafka stores it); an empty
body commits every assigned partition's position. Commits carry the member id and
generation, so a commit from a generation that a rebalance has ended is refused
(ILLEGAL_GENERATION / REBALANCE_IN_PROGRESS, as a Kafka consumer's CommitFailed).

Instances unused for ``consumer.instance.timeout.ms`` (the broker's ``[groups]`` setting,
``STRATA_CONSUMER_INSTANCE_TIMEOUT_MS``; default 5 minutes) are closed: auto-commit if
enabled, leave the group. Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeVar

from api.rest_consumers.assignors import COOPERATIVE, SUPPORTED, MemberSubscription, assign, group_partitions
from api.stored_batches import StoredBatchError, decode_stored
from broker.broker import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.group_lag import coordinator_of
from broker.groups.coordinator import GroupCoordinator
from broker.groups.types import (
    GroupProtocol,
    JoinGroupRequest,
    JoinGroupResult,
    MemberIdentity,
    MemberIdRequired,
    OffsetAndMetadata,
    OffsetCommitRequest,
    SyncGroupRequest,
    TopicPartition,
)
from broker.read_path import FetchedPartition, FetchRequestPartition
from hot.errors import (
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidRequestError,
    InvalidSessionTimeoutError,
    OffsetOutOfRangeError,
    RebalanceInProgressError,
    StrataError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from hot.records import Record, RecordBatch
from hot.txn_cleaning import AbortedRanges
from kwire.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_subscription,
)

if TYPE_CHECKING:
    from broker.broker import Broker

logger = logging.getLogger("strata.rest.consumers")

Format = Literal["binary", "json"]
OffsetReset = Literal["earliest", "latest", "none"]
FORMATS: Final = ("binary", "json")
OFFSET_RESETS: Final = ("earliest", "latest", "none")
IsolationLevel = Literal["read_uncommitted", "read_committed"]
ISOLATION_LEVELS: Final = ("read_uncommitted", "read_committed")
MAX_NAME_LENGTH: Final = 249
DEFAULT_REQUEST_TIMEOUT_MS: Final = 1_000  # Confluent's consumer.request.timeout.ms

T = TypeVar("T")


class ConsumerInstanceNotFoundError(UnknownMemberIdError):
    """No such consumer instance in the group (never created, deleted or expired)."""


class ConsumerInstanceExistsError(FencedInstanceIdError):
    """A consumer instance of that name already exists in the group."""


# Membership failures that retrying cannot fix until the subscription changes.
_FATAL: Final = (
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    GroupMaxSizeReachedError,
    InvalidGroupIdError,
)
# The coordinator no longer knows this member (or this generation): join afresh.
_LOST: Final = (UnknownMemberIdError, IllegalGenerationError, FencedInstanceIdError)


@dataclass(frozen=True, slots=True)
class ConsumerInstancesConfig:
    """Broker-side settings of REST consumer instances (Confluent's names in comments)."""

    instance_timeout_ms: int = 300_000  # consumer.instance.timeout.ms
    session_timeout_ms: int = 30_000
    rebalance_timeout_ms: int = 30_000
    heartbeat_interval_ms: int = 3_000
    auto_commit_interval_ms: int = 5_000  # auto.commit.interval.ms

    def __post_init__(self) -> None:
        for name in (
            "instance_timeout_ms",
            "session_timeout_ms",
            "rebalance_timeout_ms",
            "heartbeat_interval_ms",
            "auto_commit_interval_ms",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidRequestError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True, slots=True)
class InstanceSettings:
    """What POST /consumers/{group} chooses for one instance."""

    name: str
    format: Format = "binary"
    auto_offset_reset: OffsetReset = "latest"
    auto_commit: bool = True
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS  # default long-poll of a records GET
    fetch_min_bytes: int = 1  # fetch.min.bytes
    # read_committed: records below the last stable offset only, aborted transactions' dropped
    isolation_level: IsolationLevel = "read_uncommitted"

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > MAX_NAME_LENGTH or "/" in self.name:
            raise InvalidRequestError(
                f"consumer instance name must be 1-{MAX_NAME_LENGTH} characters without '/', "
                f"got {self.name[:60]!r}"
            )
        if self.format not in FORMATS:
            raise InvalidRequestError(f"format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if self.isolation_level not in ISOLATION_LEVELS:
            raise InvalidRequestError(
                f"isolation.level must be one of {', '.join(ISOLATION_LEVELS)}, got {self.isolation_level!r}"
            )
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise InvalidRequestError(
                f"auto.offset.reset must be one of {', '.join(OFFSET_RESETS)}, got {self.auto_offset_reset!r}"
            )


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    record: Record


def _decode(
    fetched: Sequence[FetchedPartition], positions: Sequence[int]
) -> list[list[RecordBatch] | StrataError]:
    """Decode each fetched partition's batches (blocking: runs in a worker thread): up to
    a stored batch that does not decode, which is StoredBatchError when it comes first."""
    out: list[list[RecordBatch] | StrataError] = []
    for fp, position in zip(fetched, positions, strict=True):
        if fp.error is not None or not fp.size:
            out.append([])
            continue
        try:
            out.append(decode_stored(fp.read(), fp.topic, fp.partition, position))
        except StrataError as exc:
            out.append(exc)
    return out


class ConsumerInstance:
    """One REST consumer instance (behaviour: module docstring)."""

    def __init__(
        self,
        group_id: str,
        settings: InstanceSettings,
        broker: Broker,
        coordinator: GroupCoordinator,
        config: ConsumerInstancesConfig,
        client_host: str = "",
    ) -> None:
        self.group_id = group_id
        self.settings = settings
        self.broker = broker
        self.coordinator = coordinator
        self.config = config
        self.client_id = settings.name
        self.client_host = client_host
        self.last_used = time.monotonic()
        self.in_flight = 0
        self._topics: tuple[str, ...] = ()
        self._pattern: re.Pattern[str] | None = None
        self._subscription_version = 0
        self._member_id = ""
        self._generation = -1
        self._protocol: str | None = None  # of the current generation
        self._assignment: tuple[TopicPartition, ...] = ()
        self._epoch = 0  # bumped whenever the assignment changes
        self._stable = asyncio.Event()  # the assignment is that of the current generation
        self._changed = asyncio.Event()  # replaced (after being set) at every assignment change
        self._positions: dict[TopicPartition, int] = {}
        self._auto_committed: dict[TopicPartition, int] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._fetch_lock = asyncio.Lock()
        self._error: StrataError | None = None
        # As leader: the partition counts the assignment was computed from (a change, such
        # as a subscribed topic created or grown, makes it rejoin to reassign, as Kafka's
        # leader does on a metadata change).
        self._planned: tuple[frozenset[str], dict[str, int]] | None = None
        self._closed = False
        self._rotation = 0

    # --- reading state ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def member_id(self) -> str:
        return self._member_id

    @property
    def generation_id(self) -> int:
        return self._generation

    @property
    def closed(self) -> bool:
        return self._closed

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def subscription(self) -> list[str]:
        """The subscribed topics (a pattern's current matches)."""
        return list(self._resolve_topics())

    @property
    def pattern(self) -> str | None:
        return self._pattern.pattern if self._pattern is not None else None

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: self._positions[tp] for tp in self._assignment if tp in self._positions}

    @property
    def error(self) -> StrataError | None:
        """The last membership failure, if the instance is not in its group because of it."""
        return self._error

    # --- subscription ----------------------------------------------------------------------

    def subscribe(self, topics: Sequence[str] = (), pattern: str | None = None) -> None:
        """Replace the subscription (a topic list, or a regular expression matched against
        whole topic names); the background task (re)joins the group."""
        self._check_open()
        if pattern is not None and topics:
            raise InvalidRequestError("subscribe to a topic list or a topic_pattern, not both")
        if pattern is not None:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise InvalidRequestError(
                    f"topic_pattern {pattern!r} is not a valid regular expression: {exc}"
                ) from None
            self._topics, self._pattern = (), compiled
        else:
            if not topics:
                raise InvalidRequestError("subscribe needs at least one topic or a topic_pattern")
            for t in topics:
                if not t:
                    raise InvalidRequestError("topic names must not be empty")
            self._topics, self._pattern = tuple(sorted(set(topics))), None
        self._error = None
        self._subscription_version += 1
        self._start()
        self._wake.set()

    async def unsubscribe(self) -> None:
        """Drop the subscription and the assignment (after an auto-commit, if enabled);
        the task leaves the group."""
        self._check_open()
        if self.settings.auto_commit:
            await self._auto_commit()
        self._topics, self._pattern = (), None
        self._subscription_version += 1
        self._set_assignment(())
        self._error = None
        self._wake.set()

    def _subscribed(self) -> bool:
        return bool(self._topics) or self._pattern is not None

    def _resolve_topics(self) -> tuple[str, ...]:
        if self._pattern is None:
            return self._topics
        pat = self._pattern
        return tuple(sorted(t.name for t in self.broker.topics() if pat.fullmatch(t.name)))

    # --- membership (background task) ---------------------------------------------------------

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"strata-rest-consumer-{self.group_id}-{self.name}"
            )

    def _set_assignment(self, assigned: tuple[TopicPartition, ...]) -> None:
        self._assignment = assigned
        self._epoch += 1
        if assigned or not self._subscribed():
            self._stable.set()
        else:
            self._stable.clear()
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_wake(self, timeout: float | None) -> bool:
        """Wait for a subscription change or close (True) or ``timeout`` seconds (False)."""
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            return False
        self._wake.clear()
        return True

    async def _run(self) -> None:
        backoff = 0.1
        while not self._closed:
            if not self._subscribed():
                await self._leave()
                await self._wait_wake(None)
                continue
            self._wake.clear()
            version = self._subscription_version
            topics = self._resolve_topics()
            try:
                revoked = await self._join(topics)
            except RebalanceInProgressError:
                continue
            except _LOST as exc:
                logger.info("rest consumer %s/%s: rejoining after %s", self.group_id, self.name, exc)
                self._forget_membership()
                continue
            except _FATAL as exc:
                logger.warning("rest consumer %s/%s cannot join: %s", self.group_id, self.name, exc)
                self._error = exc
                self._stable.set()  # fetches report the error instead of waiting
                await self._wait_wake(None)
                continue
            except StrataError as exc:  # loading, not available: retry
                self._error = exc
                await self._wait_wake(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            self._error = None
            if revoked:
                continue  # cooperative: partitions were revoked, rejoin at once (KIP-429)
            await self._heartbeat_until_rejoin(version, topics)

    @property
    def cooperative(self) -> bool:
        """Whether the current generation's protocol is cooperative (KIP-429): the
        assignment is kept through a rebalance, and only revoked partitions are given up."""
        return self._protocol in COOPERATIVE

    async def _join(self, topics: tuple[str, ...]) -> bool:
        """Join and sync one generation. True when the new assignment revoked partitions
        this instance kept through the join (cooperative): it must rejoin at once."""
        # Owned partitions and generation (v2): what a cooperative leader keeps in place.
        # Under an eager protocol the assignment was dropped before the join: nothing owned.
        owned = group_partitions(self._assignment)
        meta = encode_subscription(Subscription(2, topics, None, owned, self._generation))
        prev_generation = self._generation
        held = set(self._assignment)

        def request() -> JoinGroupRequest:
            return JoinGroupRequest(
                group_id=self.group_id,
                member_id=self._member_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=tuple(GroupProtocol(name, meta) for name in SUPPORTED),
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.rebalance_timeout_ms,
                client_id=self.client_id,
                client_host=self.client_host,
            )

        await self.broker.prepare_group(self.group_id)
        try:
            result = await self.coordinator.join_group(request())
        except MemberIdRequired as required:
            # KIP-394: knowing the id before the join parks lets close() leave cleanly
            # even while the join phase is still waiting for other members.
            self._member_id = required.member_id
            result = await self.coordinator.join_group(request())
        self._member_id = result.member_id
        self._generation = result.generation_id
        self._protocol = result.protocol_name
        plan: dict[str, bytes] = {}
        self._planned = None
        if result.is_leader and not result.skip_assignment:
            plan = self._plan(result)
        sync = await self.coordinator.sync_group(
            SyncGroupRequest(
                group_id=self.group_id,
                generation_id=result.generation_id,
                member_id=result.member_id,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=result.protocol_name,
                assignments=tuple(plan.items()),
            )
        )
        try:
            parts = decode_assignment(sync.assignment).partitions
        except ConsumerProtocolError as exc:
            logger.warning("rest consumer %s/%s: undecodable assignment: %s", self.group_id, self.name, exc)
            parts = ()
        assigned = tuple(sorted({TopicPartition(t.topic, p) for t in parts for p in t.partitions}))
        revoked = held - set(assigned)
        if revoked and self.settings.auto_commit:
            await self._auto_commit()  # the revoked partitions' positions, before letting go
        # Positions of partitions held in the previous generation too: nobody else could
        # consume them in between (eager protocols revoke everything before rejoining, and
        # a cooperative leader hands a partition over only once its owner revoked it).
        keep = prev_generation >= 0 and result.generation_id in (prev_generation, prev_generation + 1)
        self._positions = {tp: o for tp, o in self._positions.items() if keep and tp in assigned}
        self._auto_committed = {tp: o for tp, o in self._auto_committed.items() if tp in self._positions}
        self._set_assignment(assigned)
        self._stable.set()
        logger.info(
            "rest consumer %s/%s: generation %d, assigned %s",
            self.group_id,
            self.name,
            result.generation_id,
            ", ".join(f"{tp.topic}-{tp.partition}" for tp in assigned) or "nothing",
        )
        return bool(revoked)

    def _plan(self, result: JoinGroupResult) -> dict[str, bytes]:
        members = []
        for m in result.members:
            try:
                sub = decode_subscription(m.metadata)
            except ConsumerProtocolError as exc:
                logger.warning(
                    "group %s: member %s has an undecodable subscription: %s", self.group_id, m.member_id, exc
                )
                sub = Subscription(0, ())
            members.append(MemberSubscription(m.member_id, m.group_instance_id, sub))
        topics = frozenset(t for m in members for t in m.subscription.topics)
        counts = self._partition_counts(topics)
        self._planned = (topics, counts)
        assert result.protocol_name is not None
        return assign(result.protocol_name, members, counts)

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic in topics:
            try:
                counts[topic] = self.broker.topic(topic).partitions
            except UnknownTopicOrPartitionError:
                continue
        return counts

    async def _heartbeat_until_rejoin(self, version: int, topics: tuple[str, ...]) -> None:
        interval = self.config.heartbeat_interval_ms / 1000.0
        commit_every = self.config.auto_commit_interval_ms / 1000.0
        next_commit = time.monotonic() + commit_every
        while not self._closed:
            woke = await self._wait_wake(interval)
            if self._closed:
                return
            if woke and version != self._subscription_version:
                await self._revoke()
                return
            if self._resolve_topics() != topics:
                await self._revoke()
                return
            planned = self._planned
            if planned is not None and self._partition_counts(planned[0]) != planned[1]:
                logger.info("rest consumer %s/%s: topics changed: reassigning", self.group_id, self.name)
                await self._revoke()
                return
            if self.settings.auto_commit and time.monotonic() >= next_commit:
                next_commit = time.monotonic() + commit_every
                await self._auto_commit()
            try:
                self.coordinator.heartbeat(self.group_id, self._member_id, self._generation)
            except RebalanceInProgressError:
                if self.cooperative:
                    # Keep the partitions (and go on serving fetches of them) through the
                    # rebalance; the new assignment says which ones to give up.
                    if self.settings.auto_commit:
                        await self._auto_commit()
                else:
                    await self._revoke()
                return
            except _LOST as exc:
                logger.info("rest consumer %s/%s lost its session: %s", self.group_id, self.name, exc)
                self._forget_membership()
                return
            except StrataError as exc:
                logger.warning("rest consumer %s/%s heartbeat failed: %s", self.group_id, self.name, exc)

    async def _revoke(self) -> None:
        """Eager revocation before a rejoin: commit (if auto-commit), then drop the
        assignment so fetches wait for the next one."""
        if self.settings.auto_commit:
            await self._auto_commit()
        self._set_assignment(())

    def _forget_membership(self) -> None:
        self._member_id = ""
        self._generation = -1
        self._positions.clear()
        self._auto_committed.clear()
        self._set_assignment(())

    async def _leave(self) -> None:
        if not self._member_id:
            return
        member, self._member_id = self._member_id, ""
        self._generation = -1
        self._positions.clear()
        self._auto_committed.clear()
        try:
            self.coordinator.leave_group(self.group_id, [MemberIdentity(member, reason="rest consumer left")])
        except StrataError as exc:
            logger.info("rest consumer %s/%s: leave failed: %s", self.group_id, self.name, exc)

    async def _auto_commit(self) -> None:
        due = {tp: o for tp, o in self.positions().items() if self._auto_committed.get(tp) != o}
        if not due or not self._member_id:
            return
        try:
            await self._commit({tp: (o, None) for tp, o in due.items()})
        except StrataError as exc:
            logger.info("rest consumer %s/%s: auto-commit failed: %s", self.group_id, self.name, exc)
            return
        self._auto_committed.update(due)

    # --- positions -----------------------------------------------------------------------------

    async def _reset_offset(self, tp: TopicPartition) -> int:
        policy = self.settings.auto_offset_reset
        if policy == "none":
            raise OffsetOutOfRangeError(
                f"no valid offset for {tp.topic}-{tp.partition} and auto.offset.reset is none"
            )
        ts = EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP
        offset, _ = await self.broker.list_offset(
            tp.topic, tp.partition, ts, read_committed=self.settings.isolation_level == "read_committed"
        )
        return offset

    async def _init_positions(self, assigned: Sequence[TopicPartition]) -> None:
        missing = [tp for tp in assigned if tp not in self._positions]
        if not missing:
            return
        committed = self.coordinator.committed_offsets(self.group_id, missing)
        for tp in missing:
            c = committed.get(tp)
            if c is not None and c.offset >= 0:
                self._positions[tp] = c.offset
                continue
            try:
                self._positions[tp] = await self._reset_offset(tp)
            except UnknownTopicOrPartitionError:
                continue  # deleted since the assignment; the next rebalance drops it

    def _assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assignment:
            raise InvalidRequestError(
                f"partition {tp.topic}-{tp.partition} is not assigned to consumer instance {self.name!r}"
            )

    async def seek(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Set the next fetch position of assigned partitions."""
        self._check_open()
        self.touch()
        for tp, offset in offsets.items():
            self._assigned(tp)
            if offset < 0:
                raise InvalidRequestError(f"offset {offset} of {tp.topic}-{tp.partition} is negative")
        self._positions.update(offsets)

    async def seek_to(self, partitions: Sequence[TopicPartition], *, end: bool) -> None:
        """Move assigned partitions to their beginning (log start) or end (high watermark)."""
        self._check_open()
        self.touch()
        for tp in partitions:
            self._assigned(tp)
        ts = LATEST_TIMESTAMP if end else EARLIEST_TIMESTAMP
        for tp in partitions:
            offset, _ = await self.broker.list_offset(
                tp.topic, tp.partition, ts, read_committed=self.settings.isolation_level == "read_committed"
            )
            self._positions[tp] = offset

    # --- fetching ------------------------------------------------------------------------------

    async def fetch(self, timeout_ms: int, max_bytes: int, convert: Callable[[ConsumedRecord], T]) -> list[T]:
        """Records from the assigned partitions at their positions, long-polling up to
        ``timeout_ms`` (which includes waiting for an assignment after a (re)subscribe),
        about ``max_bytes`` of keys and values (at least one record). ``convert`` turns
        each into the caller's form; a record it refuses ends the batch before it, and
        if it is the first, the error propagates and no position moves."""
        self._check_open()
        if not self._subscribed():
            raise InvalidRequestError(f"consumer instance {self.name!r} is not subscribed to any topic")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        self.in_flight += 1
        self.touch()
        try:
            async with self._fetch_lock:
                return await self._fetch(deadline, max_bytes, convert)
        finally:
            self.in_flight -= 1
            self.touch()

    async def _fetch(
        self, deadline: float, max_bytes: int, convert: Callable[[ConsumedRecord], T]
    ) -> list[T]:
        loop = asyncio.get_running_loop()
        while True:  # wait (within the deadline) for an assignment with partitions
            if not self._stable.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await self._stable.wait()
            if self._error is not None and isinstance(self._error, _FATAL):
                raise self._error
            if self._assignment:
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await self._changed.wait()
        epoch = self._epoch
        assigned = self._assignment
        await self._init_positions(assigned)
        if epoch != self._epoch:
            return []
        n = len(assigned)
        start = self._rotation % n
        self._rotation += 1
        order = [tp for tp in assigned[start:] + assigned[:start] if tp in self._positions]
        used = {tp: self._positions[tp] for tp in order}
        wait_ms = max(0, int((deadline - loop.time()) * 1000))
        fetched = await self.broker.reads.fetch(
            [FetchRequestPartition(tp.topic, tp.partition, used[tp], max_bytes) for tp in order],
            max_wait_ms=wait_ms,
            min_bytes=self.settings.fetch_min_bytes,
            max_bytes=max_bytes,
            read_committed=self.settings.isolation_level == "read_committed",
        )
        if epoch != self._epoch:
            return []
        decoded = await asyncio.to_thread(_decode, fetched, [used[tp] for tp in order])
        if epoch != self._epoch:
            return []
        out: list[T] = []
        moves: dict[TopicPartition, int] = {}
        resets: list[TopicPartition] = []
        first_error: StrataError | None = None
        size = 0
        full = False
        for tp, fp, batches in zip(order, fetched, decoded, strict=True):
            error = batches if isinstance(batches, StrataError) else fp.error
            if error is not None:
                if isinstance(error, OffsetOutOfRangeError):
                    resets.append(tp)
                elif not isinstance(error, UnknownTopicOrPartitionError):
                    first_error = first_error or error
                if isinstance(error, StoredBatchError):
                    # Nothing from the partitions after it: with the rotation it comes
                    # first within as many fetches as there are partitions, and is raised.
                    full = True
                continue
            assert not isinstance(batches, StrataError)
            if full:
                continue
            pos = used[tp]
            aborted = AbortedRanges(fp.aborted) if fp.aborted else None
            for batch in batches:
                h = batch.header
                if aborted is not None and aborted.drops(h.attributes, h.producer_id, h.base_offset):
                    pos = max(pos, batch.next_offset)  # an aborted transaction's records
                    continue
                if not batch.is_control:
                    for rec in batch.records:
                        if rec.offset < pos:
                            continue
                        if out and size >= max_bytes:
                            full = True
                            break
                        try:
                            out.append(convert(ConsumedRecord(tp.topic, tp.partition, rec)))
                        except Exception:
                            if not out:
                                raise  # the next record itself cannot be returned: say so
                            full = True  # return what precedes it; the next fetch reports it
                            break
                        size += len(rec.key or b"") + len(rec.value or b"")
                        pos = rec.offset + 1
                if full:
                    break
                pos = max(pos, batch.next_offset)  # past control batches and compacted gaps
            moves[tp] = pos
        for tp in resets:
            if self._positions.get(tp) == used[tp]:
                self._positions[tp] = await self._reset_offset(tp)
        if epoch != self._epoch:
            return []
        for tp, pos in moves.items():
            if self._positions.get(tp) == used[tp]:  # not seeked meanwhile
                self._positions[tp] = pos
        if not out and first_error is not None:
            raise first_error
        return out

    # --- offsets -------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, tuple[int, str | None]] | None = None) -> None:
        """Commit ``offsets`` ((last processed offset, metadata) per partition: + 1 is
        stored), or every assigned partition's position when None."""
        self._check_open()
        self.touch()
        if offsets is None:
            await self._commit({tp: (o, None) for tp, o in self.positions().items()})
            return
        for tp, (offset, _) in offsets.items():
            if offset < -1:
                raise InvalidRequestError(f"offset {offset} of {tp.topic}-{tp.partition} is out of range")
        await self._commit({tp: (o + 1, md) for tp, (o, md) in offsets.items()})

    async def _commit(self, offsets: Mapping[TopicPartition, tuple[int, str | None]]) -> None:
        if not offsets:
            return
        member = bool(self._member_id)
        results = await self.coordinator.commit_offsets(
            OffsetCommitRequest(
                group_id=self.group_id,
                offsets=tuple((tp, o, -1, md) for tp, (o, md) in sorted(offsets.items())),
                generation_id=self._generation if member else -1,
                member_id=self._member_id,
            )
        )
        for error in results.values():
            if error is not None:
                raise error

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        self._check_open()
        self.touch()
        return self.coordinator.committed_offsets(self.group_id, partitions)

    # --- lifecycle -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerInstanceNotFoundError(f"consumer instance {self.name!r} was deleted")

    async def close(self) -> None:
        """Auto-commit (if enabled), leave the group, stop the task. Idempotent."""
        if self._closed:
            return
        if self.settings.auto_commit and self._assignment:
            await self._auto_commit()
        self._closed = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._leave()
        self._set_assignment(())


class ConsumerInstances:
    """The consumer instances of one broker, by (group, name), with idle expiry."""

    def __init__(self, broker: Broker, config: ConsumerInstancesConfig | None = None) -> None:
        """``config`` defaults to the broker's: ``consumer.instance.timeout.ms`` from its
        ``[groups]`` settings, the rest Kafka REST Proxy's defaults."""
        self.broker = broker
        if config is None:
            config = ConsumerInstancesConfig(
                instance_timeout_ms=broker.config.groups.consumer_instance_timeout_ms
            )
        self.config = config
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._instances)

    def create(self, group_id: str, settings: InstanceSettings, client_host: str = "") -> ConsumerInstance:
        if self._closed:
            raise InvalidRequestError("the broker is shutting down")
        if not group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        coordinator = coordinator_of(self.broker)
        key = (group_id, settings.name)
        if key in self._instances:
            raise ConsumerInstanceExistsError(
                f"consumer instance {settings.name!r} already exists in group {group_id!r}"
            )
        instance = ConsumerInstance(group_id, settings, self.broker, coordinator, self.config, client_host)
        self._instances[key] = instance
        self._ensure_sweeper()
        return instance

    @staticmethod
    def new_name() -> str:
        return f"rest-consumer-{uuid.uuid4()}"

    def get(self, group_id: str, name: str) -> ConsumerInstance:
        instance = self._instances.get((group_id, name))
        if instance is None:
            raise ConsumerInstanceNotFoundError(f"consumer instance {name!r} not found in group {group_id!r}")
        instance.touch()
        return instance

    def instances(self) -> list[ConsumerInstance]:
        return list(self._instances.values())

    async def delete(self, group_id: str, name: str) -> None:
        instance = self.get(group_id, name)
        self._instances.pop((group_id, name), None)
        await instance.close()

    def _ensure_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(
                self._sweep(), name="strata-rest-consumer-expiry"
            )

    async def _sweep(self) -> None:
        timeout = self.config.instance_timeout_ms / 1000.0
        interval = min(max(timeout / 4, 0.05), 5.0)
        while self._instances:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for key, inst in list(self._instances.items()):
                if (
                    inst.in_flight == 0
                    and now - inst.last_used >= timeout
                    and self._instances.get(key) is inst
                ):
                    del self._instances[key]
                    logger.info(
                        "rest consumer %s/%s expired after %d ms idle (consumer.instance.timeout.ms)",
                        key[0],
                        key[1],
                        self.config.instance_timeout_ms,
                    )
                    try:
                        await inst.close()
                    except StrataError as exc:
                        logger.warning("closing expired rest consumer %s/%s: %s", key[0], key[1], exc)

    async def close(self) -> None:
        """Close every instance (each leaves its group) and stop the expiry task."""
        self._closed = True
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        instances = list(self._instances.values())
        self._instances.clear()
        for inst in instances:
            try:
                await inst.close()
            except StrataError as exc:
                logger.warning("closing rest consumer %s/%s: %s", inst.group_id, inst.name, exc)
