"""Incremental fetch sessions (KIP-227), the leader's side: a pure state machine with an
injectable clock, apart from the Fetch handler that uses it (api.handlers.fetch).

A fetcher (a follower, or a consumer that asks for one) opens a session with a full
request (``session_epoch`` 0) and from then on sends only what changed: partitions it
adds or whose fetch position moved, and the partitions it no longer wants
(``forgotten_topics_data``). The leader keeps the session's partitions and their fetch
positions, fetches them all on every request, and answers only the partitions with
something new (records, an error, a moved high watermark, last stable offset or log start
offset). An idle follower of thousands of partitions then sends and receives almost
nothing, instead of every partition twice a second.

The request's ``(session_id, session_epoch)``:

* ``(0, -1)``: no session; a full fetch, answered in full with ``session_id`` 0.
* ``(0, 0)``: a new session of the request's partitions, answered in full with its id
  (0 when none is made: a consumer asking fewer than ``min_partitions``, whose full
  requests cost no more than a session would; or a cache full of newer sessions).
* ``(s, 0)``: session ``s`` closed, and a new one made as above.
* ``(s, -1)``: session ``s`` closed; a full fetch without session.
* ``(s, e > 0)``: an incremental fetch in session ``s``, which must exist
  (FETCH_SESSION_ID_NOT_FOUND) and expect epoch ``e`` (INVALID_FETCH_SESSION_EPOCH); it
  then expects ``e + 1`` (wrapping from 2^31 - 1 to 1).

Bounds, as Kafka's ``FetchSessionCache``: at most ``max_sessions`` sessions; a session
unused for ``eviction_ms`` may be evicted for a new one, followers' sessions after
consumers'; no new session when none can be evicted.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from kwire import error_table as E

INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
MAX_SESSIONS: Final = 1000  # max.incremental.fetch.session.cache.slots
EVICTION_MS: Final = 120_000  # min.incremental.fetch.session.eviction.ms
# A consumer asking for fewer partitions gets no session: its full requests are small, and
# they keep the Fetch fast path (api.handlers.fetch_fast), which answers no sessions.
MIN_CONSUMER_PARTITIONS: Final = 16

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class SessionPartition:
    """A partition of a session: the fetcher's last stated position, and the leader's
    marks last sent for it (-1: never sent, so it is in the next answer)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # the follower's
    high_watermark: int = -1
    last_stable_offset: int = -1
    leader_log_start: int = -1


@dataclass(slots=True)
class Session:
    session_id: int
    replica: bool
    epoch: int  # the epoch the next incremental request must carry
    partitions: dict[TopicPartition, SessionPartition] = field(default_factory=dict)
    last_used_ms: int = 0


@dataclass(frozen=True, slots=True)
class Asked:
    """One partition as a request states it."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchContext:
    """What one Fetch request fetches and answers, once resolved against the cache."""

    error: int  # a top-level error code: nothing is fetched
    session_id: int  # the answer's session_id (0: none)
    incremental: bool
    # What to fetch; None: every partition of ``session``, listed when first asked for
    # (``fetch``). A follower's incremental fetch never asks: its read path looks at what
    # changed (broker.replica_wakeups), and listing thousands of partitions per fetch was
    # a third of an idle follower's CPU at 10,000 partitions (issue 35).
    _fetch: list[tuple[TopicPartition, SessionPartition]] | None
    session: Session | None = None
    asked: tuple[TopicPartition, ...] = ()  # an incremental request's stated partitions

    @property
    def fetch(self) -> list[tuple[TopicPartition, SessionPartition]]:
        if self._fetch is None:
            self._fetch = list(self.session.partitions.items()) if self.session is not None else []
        return self._fetch

    def include(
        self,
        tp: TopicPartition,
        sp: SessionPartition,
        *,
        has_data: bool,
        error: bool,
        high_watermark: int,
        last_stable_offset: int,
        log_start_offset: int,
    ) -> bool:
        """Whether the answer carries this partition (always, outside an incremental
        fetch), and remember the marks sent. Call it for every fetched partition."""
        changed = (
            sp.high_watermark != high_watermark
            or sp.last_stable_offset != last_stable_offset
            or sp.leader_log_start != log_start_offset
        )
        if self.session is not None:
            sp.high_watermark = high_watermark
            sp.last_stable_offset = last_stable_offset
            sp.leader_log_start = log_start_offset
        if error:
            # Sent again next time, whatever the marks say.
            sp.high_watermark = -1
        return not self.incremental or has_data or error or changed


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


class FetchSessionCache:
    """The leader's sessions (see the module docstring). Not thread-safe: the event loop's."""

    def __init__(
        self,
        *,
        max_sessions: int = MAX_SESSIONS,
        eviction_ms: int = EVICTION_MS,
        min_consumer_partitions: int = MIN_CONSUMER_PARTITIONS,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self.min_consumer_partitions = min_consumer_partitions
        self._clock = clock
        self._rng = rng or random.Random()
        self._sessions: dict[int, Session] = {}
        self.created = itertools.count()  # metrics: sessions made, evicted
        self.evictions = 0
        # Told of every session dropped (closed, replaced, evicted): a consumer session's
        # marks (broker.consumer_marks) go with it.
        self.on_drop: Callable[[Session], None] | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[Session]:
        """The sessions held now (a copy: for metrics)."""
        return list(self._sessions.values())

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def begin(
        self,
        session_id: int,
        session_epoch: int,
        asked: Iterable[Asked],
        forgotten: Iterable[TopicPartition],
        *,
        replica: bool,
    ) -> FetchContext:
        now = self._now_ms()
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != 0:
                self._drop(self._sessions.pop(session_id, None))
            # Without a session the request is fetched as it is, a partition named twice
            # included (as sessionless Fetch always was); a session holds each once.
            fetch = [((a.topic, a.partition), _partition(a)) for a in asked]
            parts = dict(fetch)
            if session_epoch == FINAL_EPOCH or (not replica and len(parts) < self.min_consumer_partitions):
                return FetchContext(E.NONE, 0, False, fetch)
            session = self._create(parts, replica, now)
            if session is None:
                return FetchContext(E.NONE, 0, False, fetch)
            return FetchContext(E.NONE, session.session_id, False, list(session.partitions.items()), session)
        session = self._sessions.get(session_id) if session_id != 0 else None
        if session is None or session.replica != replica:
            return FetchContext(E.FETCH_SESSION_ID_NOT_FOUND, 0, True, [])
        if session_epoch != session.epoch:
            return FetchContext(E.INVALID_FETCH_SESSION_EPOCH, 0, True, [])
        session.epoch = _next_epoch(session.epoch)
        session.last_used_ms = now
        for tp in forgotten:
            session.partitions.pop(tp, None)
        stated: list[TopicPartition] = []
        for a in asked:
            tp = (a.topic, a.partition)
            stated.append(tp)
            sp = session.partitions.get(tp)
            if sp is None:
                session.partitions[tp] = _partition(a)
            else:
                sp.fetch_offset = a.fetch_offset
                sp.max_bytes = a.max_bytes
                sp.current_leader_epoch = a.current_leader_epoch
                sp.log_start_offset = a.log_start_offset
        return FetchContext(E.NONE, session.session_id, True, None, session, tuple(stated))

    def _create(
        self, parts: dict[TopicPartition, SessionPartition], replica: bool, now: int
    ) -> Session | None:
        if len(self._sessions) >= self.max_sessions and not self._evict_one(replica, now):
            return None
        while True:
            sid = self._rng.randint(1, 0x7FFFFFFF)
            if sid not in self._sessions:
                break
        session = Session(sid, replica, _next_epoch(INITIAL_EPOCH), parts, now)
        self._sessions[sid] = session
        next(self.created)
        return session

    def _evict_one(self, replica: bool, now: int) -> bool:
        """Evict the least recently used stale session, a consumer's before a follower's
        (a consumer never evicts a follower's)."""
        stale = [s for s in self._sessions.values() if now - s.last_used_ms >= self.eviction_ms]
        stale.sort(key=lambda s: (s.replica, s.last_used_ms))
        for s in stale:
            if s.replica and not replica:
                break
            del self._sessions[s.session_id]
            self._drop(s)
            self.evictions += 1
            return True
        return False

    def _drop(self, session: Session | None) -> None:
        if session is not None and self.on_drop is not None:
            self.on_drop(session)

    def close_all(self) -> None:
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for s in sessions:
            self._drop(s)


def _partition(a: Asked) -> SessionPartition:
    return SessionPartition(a.fetch_offset, a.max_bytes, a.current_leader_epoch, a.log_start_offset)
