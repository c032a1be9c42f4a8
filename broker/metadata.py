"""The watched in-memory view of the cluster metadata (``ClusterView``), and a broker's
client of it (``MetadataClient``: registration, topics, partition states, the controller's
office, by compare-and-swap on etcd's ``mod_revision``).

The records (``BrokerRegistration``, ``TopicAssignment``, ``PartitionState``,
``ControllerRecord``: their JSON layout, versions and decode errors) are
broker.metadata_records'; they stay importable from here. A value that does not decode
is a ``CorruptMetadataError``; the view logs it and treats the key as absent rather than
serving a half-understood record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Final

from broker.keys import BrokerKey, ControllerKey, KeyLayout, PartitionStateKey, QuotasKey, TopicKey
from broker.metadata_records import (
    FORMAT_VERSION,
    NO_LEADER,
    BrokerIdInUseError,
    BrokerRegistration,
    CasResult,
    Conflict,
    ControllerRecord,
    ControllerToken,
    CorruptMetadataError,
    LiveBroker,
    PartitionState,
    TopicAssignment,
    Versioned,
    _versioned_state,
    initial_state,
)
from broker.metadata_store import (
    Compare,
    Delete,
    Get,
    KeyValue,
    LeaseKeeping,
    MetadataStore,
    Op,
    Put,
    WatchEvent,
    WatchEventType,
    WatchReset,
    WatchUpdate,
)
from hot.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    MetadataStoreError,
    StaleControllerEpochError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.tasks import cancel_and_wait
from hot.topics import MAX_PARTITIONS, check_topic_collision, validate_topic_name

# The records are broker.metadata_records'; importable from here as before.
__all__ = [
    "DEFAULT_MAX_TXN_OPS",
    "FORMAT_VERSION",
    "LOAD_CHUNK_KEYS",
    "NO_LEADER",
    "RESERVED_BROKER_MAX_ID",
    "BrokerIdInUseError",
    "BrokerRegistration",
    "CasResult",
    "ClusterView",
    "Conflict",
    "ControllerRecord",
    "ControllerToken",
    "CorruptMetadataError",
    "LiveBroker",
    "MetadataClient",
    "PartitionState",
    "TopicAssignment",
    "Versioned",
    "initial_state",
]

log = logging.getLogger("strata.cluster.metadata")

# Kafka's reserved.broker.max.id: ids given on the command line stay at or below it and
# ids assigned through etcd start above it, so the two never collide.
RESERVED_BROKER_MAX_ID: Final = 1000
# etcd's default --max-txn-ops is 128: a topic whose creation needs more operations is
# created in steps (see MetadataClient.create_topic).
DEFAULT_MAX_TXN_OPS: Final = 128
# Keys a listing's decode takes between two hand-backs of the event loop (ClusterView.load).
LOAD_CHUNK_KEYS: Final = 2048


# --- the in-memory view --------------------------------------------------------------------------


class ClusterView:
    """Brokers, topics, partition states and controller as last seen through the watch.

    ``apply`` is pure bookkeeping (no I/O) so it can be tested on its own. Readers get a
    consistent picture between awaits: one etcd transaction's events are applied without
    yielding to the event loop, and ``revision`` says how recent the view is.
    """

    def __init__(self, layout: KeyLayout) -> None:
        self.layout = layout
        self.brokers: dict[int, LiveBroker] = {}
        self.topics: dict[str, Versioned[TopicAssignment]] = {}
        self.partitions: dict[tuple[str, int], Versioned[PartitionState]] = {}
        self.controller: Versioned[ControllerRecord] | None = None
        self.quotas: KeyValue | None = None  # raw: parsed by broker.security.stored
        self.revision = 0
        self.ready = False
        self.seq = 0  # bumped by every applied update
        self._changed = asyncio.Event()
        self._names_by_id: dict[uuid.UUID, str] = {}
        self._ids_by_name: dict[str, uuid.UUID] = {}
        self._names_seq = -1  # the seq _names_by_id was built at

    def apply(self, update: WatchUpdate) -> None:
        if isinstance(update, WatchReset):
            fresh = ClusterView(self.layout)
            for kv in update.kvs:
                fresh._put(kv)
            self._take(fresh, update.revision)
        elif isinstance(update, WatchEvent):
            if update.type is WatchEventType.PUT:
                self._put(update.kv)
            else:
                self._delete(update.kv.key)
            self.revision = max(self.revision, update.kv.mod_revision)
        self._bump()

    def _bump(self) -> None:
        self.seq += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def load(self, reset: WatchReset, *, chunk: int = LOAD_CHUNK_KEYS) -> None:
        """``apply(reset)`` decoded ``chunk`` keys at a time into a view of its own, handing
        the loop back between chunks (100,000 partition states are seconds of CPU, and the
        lease keeper shares the loop), then taken over at once: readers never see a
        half-loaded view."""
        fresh = ClusterView(self.layout)
        for i in range(0, len(reset.kvs), chunk):
            for kv in reset.kvs[i : i + chunk]:
                fresh._put(kv)
            await asyncio.sleep(0)
        self._take(fresh, reset.revision)
        self._bump()

    def _take(self, fresh: ClusterView, revision: int) -> None:
        """Become ``fresh`` (a listing decoded at ``revision``), in place: holders of these
        dicts keep seeing the view."""
        self.brokers.clear()
        self.brokers.update(fresh.brokers)
        self.topics.clear()
        self.topics.update(fresh.topics)
        self.partitions.clear()
        self.partitions.update(fresh.partitions)
        self.controller, self.quotas = fresh.controller, fresh.quotas
        self.revision = revision
        self.ready = True

    def _put(self, kv: KeyValue) -> None:
        parsed = self.layout.parse(kv.key)
        try:
            if isinstance(parsed, BrokerKey):
                reg = BrokerRegistration.from_json(kv.value)
                if reg.broker_id != parsed.broker_id:
                    raise CorruptMetadataError(f"registration of broker {reg.broker_id} under key {kv.key!r}")
                self.brokers[parsed.broker_id] = LiveBroker(reg, kv.create_revision, kv.lease)
            elif isinstance(parsed, TopicKey):
                topic = TopicAssignment.from_json(kv.value)
                self.topics[parsed.topic] = Versioned(topic, kv.mod_revision, kv.create_revision)
            elif isinstance(parsed, PartitionStateKey):
                state = PartitionState.from_json(kv.value)
                self.partitions[(parsed.topic, parsed.partition)] = Versioned(
                    state, kv.mod_revision, kv.create_revision
                )
            elif isinstance(parsed, ControllerKey):
                self.controller = Versioned(
                    ControllerRecord.from_json(kv.value), kv.mod_revision, kv.create_revision
                )
            elif isinstance(parsed, QuotasKey):
                self.quotas = kv
        except CorruptMetadataError as exc:
            log.warning("ignoring %r: %s", kv.key, exc)
            self._delete(kv.key)

    def _delete(self, key: bytes) -> None:
        parsed = self.layout.parse(key)
        if isinstance(parsed, BrokerKey):
            self.brokers.pop(parsed.broker_id, None)
        elif isinstance(parsed, TopicKey):
            self.topics.pop(parsed.topic, None)
        elif isinstance(parsed, PartitionStateKey):
            self.partitions.pop((parsed.topic, parsed.partition), None)
        elif isinstance(parsed, ControllerKey):
            self.controller = None
        elif isinstance(parsed, QuotasKey):
            self.quotas = None

    # --- queries ------------------------------------------------------------------------------

    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self.brokers)

    def _id_index(self) -> None:
        # Rebuilt on the first lookup after the view changed (every fetch of a v13+ client asks).
        if self._names_seq != self.seq:
            self._ids_by_name = {name: uuid.UUID(v.value.topic_id) for name, v in self.topics.items()}
            self._names_by_id = {i: name for name, i in self._ids_by_name.items()}
            self._names_seq = self.seq

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The topic with this id (KIP-516: Fetch v13+ names topics by id), None if none."""
        self._id_index()
        return self._names_by_id.get(topic_id)

    def topic_id(self, name: str) -> uuid.UUID | None:
        self._id_index()
        return self._ids_by_name.get(name)

    def is_whole(self, topic: str) -> bool:
        """Whether every partition of ``topic`` has its state (a topic above one transaction
        is created in steps; False while that is under way, or for an unknown topic)."""
        va = self.topics.get(topic)
        return va is not None and all((topic, p) in self.partitions for p in range(va.value.partition_count))

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        v = self.partitions.get((topic, partition))
        return None if v is None else v.value

    def leader_of(self, topic: str, partition: int) -> LiveBroker | None:
        """The partition's leader if it has one and that broker is registered."""
        state = self.partition_state(topic, partition)
        if state is None or not state.has_leader:
            return None
        return self.brokers.get(state.leader)

    # --- waiting ------------------------------------------------------------------------------

    async def wait_changed(self, seq: int, timeout: float | None = None) -> int:
        """Wait until an update after ``seq`` is applied (or ``timeout``); returns ``self.seq``."""
        if self.seq == seq:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
        return self.seq

    async def wait_for(self, predicate: Callable[[ClusterView], bool], timeout: float) -> None:
        """Wait until ``predicate(view)`` holds; TimeoutError after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            while not predicate(self):
                await self._changed.wait()

    async def wait_for_revision(self, revision: int, timeout: float) -> None:
        """Wait until the view reflects every change up to ``revision`` (read-your-writes)."""
        await self.wait_for(lambda v: v.ready and v.revision >= revision, timeout)


# --- the client ----------------------------------------------------------------------------------


class MetadataClient:
    """A broker's access to the cluster metadata.

    ``start`` begins watching the whole cluster prefix into ``view`` (for fast metadata
    answers); reads named ``get_*``/``live_brokers`` go to etcd itself. ``register`` puts
    this broker's registration under a lease kept alive in the background; when etcd
    reports that lease gone (it expired, e.g. this broker could not reach etcd for longer
    than the TTL, or it was revoked) the client registers again with a new lease and sets
    ``reregistered``. The client does not own the store.
    """

    def __init__(
        self,
        etcd: MetadataStore,
        layout: KeyLayout,
        *,
        lease_ttl: int = 10,
        max_txn_ops: int = DEFAULT_MAX_TXN_OPS,
    ) -> None:
        if lease_ttl < 1:
            raise InvalidConfigError(f"lease TTL must be at least 1 s, got {lease_ttl}")
        if max_txn_ops < 2:
            raise InvalidConfigError(f"max_txn_ops must be at least 2, got {max_txn_ops}")
        self.etcd = etcd
        self.layout = layout
        self.lease_ttl = lease_ttl
        self.max_txn_ops = max_txn_ops
        self.view = ClusterView(layout)
        self.reregistered = asyncio.Event()
        self.reregistrations = 0
        self._watch_task: asyncio.Task[None] | None = None
        self._registration: BrokerRegistration | None = None
        self._keeper: LeaseKeeping | None = None
        self._broker_epoch = 0
        self._supervisor: asyncio.Task[None] | None = None

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self, *, timeout: float | None = None) -> MetadataClient:
        """Start the watch and wait for the first full listing (MetadataStoreError if etcd
        does not answer within ``timeout``, default the etcd client's timeout)."""
        if self._watch_task is None:
            self._watch_task = asyncio.get_running_loop().create_task(self._watch(), name="metadata-watch")
        try:
            await self.view.wait_for(lambda v: v.ready, timeout if timeout is not None else self.etcd.timeout)
        except TimeoutError:
            raise MetadataStoreError("etcd did not answer the initial metadata listing in time") from None
        return self

    async def _watch(self) -> None:
        async with contextlib.aclosing(self.etcd.watch_prefix(self.layout.prefix)) as updates:
            async for update in updates:
                if isinstance(update, WatchReset) and len(update.kvs) > LOAD_CHUNK_KEYS:
                    await self.view.load(update)
                else:
                    self.view.apply(update)

    async def close(self, *, deregister: bool = True) -> None:
        """Stop. ``deregister`` revokes the lease so the broker leaves the live set now;
        without it (a crash, as far as the cluster can tell) it leaves when the TTL runs out."""
        if self._supervisor is not None:
            await cancel_and_wait(self._supervisor)
            self._supervisor = None
        if self._keeper is not None:
            await self._keeper.stop(revoke=deregister)
            self._keeper = None
        if self._watch_task is not None:
            await cancel_and_wait(self._watch_task)
            self._watch_task = None

    # --- registration --------------------------------------------------------------------------

    @property
    def registration(self) -> BrokerRegistration | None:
        return self._registration

    @property
    def broker_id(self) -> int:
        if self._registration is None:
            raise InvalidRequestError("broker is not registered")
        return self._registration.broker_id

    @property
    def broker_epoch(self) -> int:
        """create_revision of this broker's current registration (0 before registering)."""
        return self._broker_epoch

    @property
    def lease_id(self) -> int | None:
        """The current registration lease, None while not registered."""
        keeper = self._keeper
        return None if keeper is None or keeper.lost.is_set() else keeper.lease.id

    @property
    def keeper(self) -> LeaseKeeping | None:
        return self._keeper

    async def allocate_broker_id(self) -> int:
        """A fresh broker id above ``RESERVED_BROKER_MAX_ID`` from the etcd counter; ids a
        live broker holds already are skipped."""
        counter = self.layout.broker_id_counter
        for _ in range(100):
            kv = await self.etcd.get(counter)
            last = RESERVED_BROKER_MAX_ID
            if kv is not None:
                try:
                    last = max(int(kv.value), RESERVED_BROKER_MAX_ID)
                except ValueError:
                    raise CorruptMetadataError(f"broker id counter holds {kv.value!r}") from None
            candidate = last + 1
            # Claim the id by advancing the counter; a lost race just reads it again.
            res = await self.etcd.txn(
                [Compare.mod_revision(counter, kv.mod_revision if kv is not None else 0)],
                [Put(counter, str(candidate).encode())],
            )
            if res.succeeded and await self.etcd.get(self.layout.broker(candidate)) is None:
                return candidate
        raise MetadataStoreError("could not allocate a broker id after 100 attempts (heavy contention)")

    async def register(
        self,
        host: str,
        kafka_port: int,
        http_port: int,
        *,
        broker_id: int | None = None,
        rack: str | None = None,
        wait: float | None = None,
        replica_listener: str | None = None,
        external_listener: str | None = None,
        machine: str | None = None,
    ) -> BrokerRegistration:
        """Register this broker (assigning an id when ``broker_id`` is None).
        ``replica_listener`` (host:port) is where followers fetch from, if not the Kafka
        listener.

        If the id is registered already (e.g. this broker's previous run, whose lease has
        not expired yet) this waits up to ``wait`` seconds (default: the lease TTL + 1 s)
        for it to go, then raises ``BrokerIdInUseError``.
        """
        if self._registration is not None:
            raise InvalidRequestError(f"already registered as broker {self._registration.broker_id}")
        if broker_id is not None and broker_id < 0:
            raise InvalidConfigError(f"broker id must be non-negative, got {broker_id}")
        bid = broker_id if broker_id is not None else await self.allocate_broker_id()
        try:
            reg = BrokerRegistration(
                bid,
                host,
                kafka_port,
                http_port,
                rack,
                int(time.time() * 1000),
                replica_listener,
                external_listener,
                machine,
            )
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc
        await self._register_once(reg, wait=self.lease_ttl + 1.0 if wait is None else wait)
        self._registration = reg
        self._supervisor = asyncio.get_running_loop().create_task(
            self._keep_registered(), name=f"broker-{bid}"
        )
        return reg

    async def _register_once(self, reg: BrokerRegistration, *, wait: float) -> None:
        key = self.layout.broker(reg.broker_id)
        deadline = time.monotonic() + wait
        lease = await self.etcd.grant_lease(self.lease_ttl)
        keeper = self.etcd.keep_alive(lease)
        registered = False
        try:
            while True:
                res = await self.etcd.txn(
                    [Compare.absent(key)], [Put(key, reg.to_json(), lease.id)], [Get(key)]
                )
                if res.succeeded:
                    registered = True
                    self._keeper = keeper
                    self._broker_epoch = res.revision
                    return
                if keeper.lost.is_set():
                    raise MetadataStoreError(f"registration lease {lease.id:x} was lost while registering")
                if time.monotonic() >= deadline:
                    holder = res.reads[0][0].lease if res.reads and res.reads[0] else 0
                    raise BrokerIdInUseError(
                        f"broker id {reg.broker_id} is registered by another live broker (lease {holder:x})"
                    )
                await asyncio.sleep(min(0.2, self.lease_ttl / 4.0))
        finally:
            if not registered:
                await keeper.stop(revoke=True)

    async def _keep_registered(self) -> None:
        assert self._registration is not None
        while True:
            keeper = self._keeper
            assert keeper is not None
            await keeper.lost.wait()
            log.warning(
                "broker %d lost its registration lease; registering again", self._registration.broker_id
            )
            delay = 0.05
            while True:
                try:
                    await self._register_once(self._registration, wait=self.lease_ttl + 1.0)
                    break
                except (MetadataStoreError, BrokerIdInUseError) as exc:
                    log.warning("broker %d: re-registration failed: %s", self._registration.broker_id, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)
            self.reregistrations += 1
            self.reregistered.set()

    # --- reads (from etcd) ---------------------------------------------------------------------

    async def live_brokers(self) -> dict[int, LiveBroker]:
        kvs, _ = await self.etcd.get_prefix(self.layout.brokers_prefix)
        out: dict[int, LiveBroker] = {}
        for kv in kvs:
            parsed = self.layout.parse(kv.key)
            if isinstance(parsed, BrokerKey):
                try:
                    out[parsed.broker_id] = LiveBroker(
                        BrokerRegistration.from_json(kv.value), kv.create_revision, kv.lease
                    )
                except CorruptMetadataError as exc:
                    log.warning("ignoring %r: %s", kv.key, exc)
        return out

    async def get_topic(self, name: str) -> Versioned[TopicAssignment] | None:
        kv = await self.etcd.get(self.layout.topic(name))
        return (
            None
            if kv is None
            else Versioned(TopicAssignment.from_json(kv.value), kv.mod_revision, kv.create_revision)
        )

    async def get_partition_state(self, topic: str, partition: int) -> Versioned[PartitionState] | None:
        kv = await self.etcd.get(self.layout.partition_state(topic, partition))
        return None if kv is None else _versioned_state(kv)

    async def get_controller(self) -> Versioned[ControllerRecord] | None:
        kv = await self.etcd.get(self.layout.controller)
        return (
            None
            if kv is None
            else Versioned(ControllerRecord.from_json(kv.value), kv.mod_revision, kv.create_revision)
        )

    # --- writes --------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        replicas: Sequence[Sequence[int]],
        configs: Mapping[str, str] | None = None,
        *,
        topic_id: str | None = None,
        controller_epoch: int = 0,
    ) -> Versioned[TopicAssignment]:
        """Create a topic with an explicit replica assignment (placement is the caller's:
        ``broker.controller.create_topic`` places replicas across live brokers).

        The topic and every partition's initial state (leader = first replica, ISR = all
        replicas, epochs 0) are written in one transaction that requires the topic key to
        be absent. A topic needing more than ``max_txn_ops`` operations is created in
        steps: the topic key first (the atomic claim), then the partition states in
        batches, each requiring the topic key unchanged and the state absent; partition
        states missing after a crash are filled in by the controller.
        """
        validate_topic_name(name)
        # Against this broker's view: two brokers creating colliding names at the same
        # moment can both pass (the exact-name claim below is what is atomic).
        check_topic_collision(name, self.view.topics)
        if not 1 <= len(replicas) <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"number of partitions must be in [1, {MAX_PARTITIONS}], got {len(replicas)}"
            )
        rf = len(replicas[0])
        try:
            assignment = TopicAssignment(
                topic_id or str(uuid.uuid4()), rf, tuple(tuple(r) for r in replicas), dict(configs or {})
            )
        except ValueError as exc:
            raise InvalidReplicationFactorError(f"bad replica assignment for {name!r}: {exc}") from exc
        topic_key = self.layout.topic(name)
        states = [
            Put(self.layout.partition_state(name, p), initial_state(r, controller_epoch).to_json())
            for p, r in enumerate(assignment.partitions)
        ]
        one_txn = len(states) + 1 <= self.max_txn_ops
        res = await self.etcd.txn(
            [Compare.absent(topic_key)],
            [Put(topic_key, assignment.to_json()), *(states if one_txn else [])],
            [Get(topic_key)],
        )
        if not res.succeeded:
            raise TopicExistsError(f"topic {name!r} already exists")
        created = Versioned(assignment, res.revision, res.revision)
        if not one_txn:
            await self._create_states_in_steps(topic_key, res.revision, states)
        return created

    async def _create_states_in_steps(
        self, topic_key: bytes, topic_revision: int, states: Sequence[Put]
    ) -> None:
        step = self.max_txn_ops - 1  # etcd also caps the compares: one is the topic's
        for i in range(0, len(states), step):
            batch = states[i : i + step]
            compares = [Compare.mod_revision(topic_key, topic_revision)]
            compares += [Compare.absent(s.key) for s in batch]
            res = await self.etcd.txn(compares, list(batch))
            if not res.succeeded:
                # The topic was deleted or changed meanwhile, or a state exists already
                # (written by the controller's repair): fill only what is missing.
                for put in batch:
                    r = await self.etcd.txn(
                        [Compare.mod_revision(topic_key, topic_revision), Compare.absent(put.key)], [put]
                    )
                    if not r.succeeded and (await self.etcd.get(topic_key)) is None:
                        return

    async def create_partition_state_if_absent(
        self,
        topic: str,
        partition: int,
        assignment: Versioned[TopicAssignment],
        state: PartitionState,
        token: ControllerToken,
    ) -> bool:
        """The controller's repair of a partition state missing after an interrupted
        multi-step topic creation. False if the state exists or the topic changed."""
        key = self.layout.partition_state(topic, partition)
        res = await self.etcd.txn(
            [
                Compare.absent(key),
                Compare.mod_revision(self.layout.topic(topic), assignment.mod_revision),
                Compare.create_revision(self.layout.controller, token.create_revision),
            ],
            [Put(key, state.to_json())],
            [Get(self.layout.controller)],
        )
        if not res.succeeded:
            self._check_controller(res.reads[0] if res.reads else (), token)
        return res.succeeded

    async def create_partition_states_if_absent(
        self,
        topic: str,
        states: Sequence[tuple[int, PartitionState]],
        assignment: Versioned[TopicAssignment],
        token: ControllerToken,
    ) -> bool:
        """``create_partition_state_if_absent`` for several partitions in one transaction
        (at most ``max_txn_ops - 2``): all written, or none (False) if one exists, the topic
        changed or the controller did."""
        keys = [self.layout.partition_state(topic, p) for p, _ in states]
        res = await self.etcd.txn(
            [
                Compare.mod_revision(self.layout.topic(topic), assignment.mod_revision),
                Compare.create_revision(self.layout.controller, token.create_revision),
                *(Compare.absent(k) for k in keys),
            ],
            [Put(k, st.to_json()) for k, (_, st) in zip(keys, states, strict=True)],
            [Get(self.layout.controller)],
        )
        if not res.succeeded:
            self._check_controller(res.reads[0] if res.reads else (), token)
        return res.succeeded

    async def update_topic(
        self,
        name: str,
        expected: Versioned[TopicAssignment],
        new: TopicAssignment,
        *,
        controller_epoch: int = 0,
    ) -> Versioned[TopicAssignment] | None:
        """Replace the topic's assignment (admin changes: configs, added partitions) if its
        key is still exactly ``expected`` (compare of its mod_revision); None when it is
        not (the caller re-reads and retries). Partitions ``new`` adds get their initial
        state in the same transaction (or, above ``max_txn_ops``, in steps afterwards,
        which the controller completes should this broker crash in between). The topic
        id and the existing partitions' replicas must not change."""
        old = expected.value
        if new.topic_id != old.topic_id or new.partitions[: old.partition_count] != old.partitions:
            raise InvalidRequestError(f"topic {name!r}: an update may only add partitions and change configs")
        topic_key = self.layout.topic(name)
        states = [
            Put(
                self.layout.partition_state(name, p),
                initial_state(new.partitions[p], controller_epoch).to_json(),
            )
            for p in range(old.partition_count, new.partition_count)
        ]
        one_txn = len(states) + 1 <= self.max_txn_ops
        res = await self.etcd.txn(
            [Compare.mod_revision(topic_key, expected.mod_revision)],
            [Put(topic_key, new.to_json()), *(states if one_txn else [])],
        )
        if not res.succeeded:
            return None
        if not one_txn:
            await self._create_states_in_steps(topic_key, res.revision, states)
        return Versioned(new, res.revision, expected.create_revision)

    async def delete_topic(self, name: str) -> int:
        """Delete the topic and all its partition states in one transaction; the etcd
        revision of the deletion."""
        key = self.layout.topic(name)
        res = await self.etcd.txn(
            [Compare.version(key, 0, ">")],
            [Delete(key), Delete(self.layout.topic_partitions(name), prefix=True)],
        )
        if not res.succeeded:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return res.revision

    async def update_partition_state(
        self,
        topic: str,
        partition: int,
        expected: Versioned[PartitionState],
        new: PartitionState,
        *,
        controller: ControllerToken | None = None,
    ) -> CasResult:
        """Replace ``expected`` by ``new`` if the state is still exactly ``expected``
        (compare of its mod_revision). ``partition_epoch`` is set to expected's + 1 here.

        A leader epoch can never go backwards (``InvalidRequestError``). With
        ``controller`` the write also requires that controller to still be in office, and
        raises ``StaleControllerEpochError`` when it is not. Any other conflict is returned,
        with the current state, as ``CasResult(ok=False, ...)``.
        """
        if new.leader_epoch < expected.value.leader_epoch:
            raise InvalidRequestError(
                f"{topic}-{partition}: leader epoch cannot go back "
                f"from {expected.value.leader_epoch} to {new.leader_epoch}"
            )
        new = replace(new, partition_epoch=expected.value.partition_epoch + 1)
        key = self.layout.partition_state(topic, partition)
        compares = [Compare.mod_revision(key, expected.mod_revision)]
        failure: list[Op] = [Get(key)]
        if controller is not None:
            compares.append(Compare.create_revision(self.layout.controller, controller.create_revision))
            failure.append(Get(self.layout.controller))
        res = await self.etcd.txn(compares, [Put(key, new.to_json())], failure)
        if res.succeeded:
            return CasResult(True, Versioned(new, res.revision, expected.create_revision))
        if controller is not None:
            self._check_controller(res.reads[1], controller)
        current = _versioned_state(res.reads[0][0]) if res.reads[0] else None
        if current is None:
            return CasResult(False, None, Conflict.DELETED)
        if current.value.leader_epoch > expected.value.leader_epoch:
            return CasResult(False, current, Conflict.FENCED_LEADER_EPOCH)
        return CasResult(False, current, Conflict.STALE_VERSION)

    async def update_partition_states(
        self,
        changes: Sequence[tuple[str, int, Versioned[PartitionState], PartitionState]],
        *,
        controller: ControllerToken | None,
    ) -> int | None:
        """Many partitions' ``update_partition_state`` in one transaction (the controller's
        elections after a broker died: one etcd write and one view update for all of them,
        not one per partition): every state must still be exactly its ``expected`` and the
        controller still in office. The revision written, or None on any conflict (the
        caller then writes them one by one, which says which and why);
        ``StaleControllerEpochError`` when the controller was deposed. Without
        ``controller``: a leader's own writes (new epochs after its restart)."""
        compares: list[Compare] = []
        if controller is not None:
            compares.append(Compare.create_revision(self.layout.controller, controller.create_revision))
        puts: list[Op] = []
        for topic, partition, expected, new in changes:
            if new.leader_epoch < expected.value.leader_epoch:
                raise InvalidRequestError(
                    f"{topic}-{partition}: leader epoch cannot go back "
                    f"from {expected.value.leader_epoch} to {new.leader_epoch}"
                )
            key = self.layout.partition_state(topic, partition)
            compares.append(Compare.mod_revision(key, expected.mod_revision))
            new = replace(new, partition_epoch=expected.value.partition_epoch + 1)
            puts.append(Put(key, new.to_json()))
        if controller is None:
            res = await self.etcd.txn(compares, puts)
            return res.revision if res.succeeded else None
        res = await self.etcd.txn(compares, puts, [Get(self.layout.controller)])
        if res.succeeded:
            return res.revision
        self._check_controller(res.reads[0], controller)
        return None

    async def update_replica_sets(
        self, name: str, expected: Versioned[TopicAssignment], new: TopicAssignment
    ) -> Versioned[TopicAssignment] | None:
        """Replace the topic's assignment, replica sets included, if its key is still at
        ``expected``'s mod_revision (a reassignment request); None when it changed or is
        gone. Admin changes that must not touch replicas use ``update_topic``."""
        res = await self.etcd.txn(
            [Compare.mod_revision(self.layout.topic(name), expected.mod_revision)],
            [Put(self.layout.topic(name), new.to_json())],
        )
        return Versioned(new, res.revision, expected.create_revision) if res.succeeded else None

    async def complete_reassignment(
        self,
        topic: str,
        partition: int,
        expected_topic: Versioned[TopicAssignment],
        new_topic: TopicAssignment,
        expected_state: Versioned[PartitionState],
        new_state: PartitionState,
        token: ControllerToken,
    ) -> bool:
        """The controller's switch to a reassignment's target: the topic's assignment and
        the partition's state in one transaction, comparing both keys' mod_revisions and
        the controller key (``StaleControllerEpochError`` when deposed). False when
        either record changed meanwhile (the controller re-examines the partition)."""
        if new_state.leader_epoch < expected_state.value.leader_epoch:
            raise InvalidRequestError(f"{topic}-{partition}: leader epoch cannot go back")
        new_state = replace(new_state, partition_epoch=expected_state.value.partition_epoch + 1)
        topic_key = self.layout.topic(topic)
        state_key = self.layout.partition_state(topic, partition)
        res = await self.etcd.txn(
            [
                Compare.mod_revision(topic_key, expected_topic.mod_revision),
                Compare.mod_revision(state_key, expected_state.mod_revision),
                Compare.create_revision(self.layout.controller, token.create_revision),
            ],
            [Put(topic_key, new_topic.to_json()), Put(state_key, new_state.to_json())],
            [Get(self.layout.controller)],
        )
        if not res.succeeded:
            self._check_controller(res.reads[0] if res.reads else (), token)
        return res.succeeded

    @staticmethod
    def _check_controller(controller_kvs: Iterable[KeyValue], token: ControllerToken) -> None:
        kv = next(iter(controller_kvs), None)
        if kv is None or kv.create_revision != token.create_revision:
            holder = "none" if kv is None else ControllerRecord.from_json(kv.value)
            raise StaleControllerEpochError(
                f"controller epoch {token.epoch} (broker {token.broker_id}) has been replaced; "
                f"controller now: {holder}"
            )
