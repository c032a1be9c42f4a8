"""Cluster metadata records: frozen dataclasses with their JSON codecs (the watched view
of them and a broker's client are broker.metadata's).

Records are frozen dataclasses stored in etcd as UTF-8 JSON objects carrying
``"version": 1`` (the record format; a reader refuses versions it does not know):

    BrokerRegistration  {"version", "broker_id", "host", "kafka_port", "http_port", "rack", "start_time_ms",
                         "replica_listener", "external_listener", "machine"}  (host:port followers
                         fetch from, absent or null: host:kafka_port; the external client
                         listener's advertised host:port, absent or null: none; the machine of
                         a multi-process node, absent or null: a broker of its own)
    TopicAssignment     {"version", "topic_id", "replication_factor", "partitions", "configs",
                         "adding_replicas", "removing_replicas"}
                        (partitions: one list of replica ids per partition; the last two map
                        partitions being reassigned to broker ids, absent when none is)
    PartitionState      {"version", "leader", "leader_epoch", "isr", "controller_epoch", "partition_epoch"}
    ControllerRecord    {"version", "broker_id", "epoch"}

``partition_epoch`` counts every change of a partition's state (KIP-841's name; the
client bumps it on each write); ``leader_epoch`` only changes with the leader. etcd's
own ``mod_revision`` of a key is what a compare-and-swap compares; ``Versioned`` pairs a
record with it. A broker's epoch is the ``create_revision`` of its registration key: it
changes whenever the broker registers again.

A value that does not decode is a ``CorruptMetadataError``; the view logs it and treats
the key as absent rather than serving a half-understood record.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Generic, TypeVar

from broker.metadata_store import (
    KeyValue,
)
from broker.replication.reassignment import PartitionReplicas
from hot.errors import (
    InvalidConfigError,
    MetadataStoreError,
    UnknownTopicOrPartitionError,
)
from hot.topics import MAX_PARTITIONS

FORMAT_VERSION: Final = 1
NO_LEADER: Final = -1
_INT32_MAX: Final = 2**31 - 1

T = TypeVar("T")


class CorruptMetadataError(MetadataStoreError):
    """A value in etcd that is not a valid record of the kind its key names."""

    retriable = False


class BrokerIdInUseError(InvalidConfigError):
    """Another live broker holds the requested broker id."""


# --- records -------------------------------------------------------------------------------


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptMetadataError(f"{what}: not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise CorruptMetadataError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    version = obj.get("version")
    if version != FORMAT_VERSION:
        raise CorruptMetadataError(
            f"{what}: unsupported record version {version!r} (this build reads {FORMAT_VERSION})"
        )
    return obj


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps({"version": FORMAT_VERSION, **obj}, separators=(",", ":"), sort_keys=True).encode()


def _int(obj: Mapping[str, Any], name: str, what: str, lo: int = 0, hi: int = 2**63 - 1) -> int:
    v = obj.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise CorruptMetadataError(f"{what}: field {name!r} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _str(obj: Mapping[str, Any], name: str, what: str, *, optional: bool = False) -> str | None:
    v = obj.get(name)
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise CorruptMetadataError(f"{what}: field {name!r} must be a string, got {v!r}")
    return v


def _ids(v: object, name: str, what: str) -> tuple[int, ...]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
        raise CorruptMetadataError(f"{what}: field {name!r} must be a list of broker ids, got {v!r}")
    return tuple(v)


def _decode(cls_name: str, build: Callable[[], T]) -> T:
    # Constructors validate invariants with ValueError; from etcd that means corrupt data.
    try:
        return build()
    except ValueError as exc:
        raise CorruptMetadataError(f"{cls_name}: {exc}") from exc


def _check_ids(ids: Sequence[int], what: str, *, allow_empty: bool = False) -> None:
    if not ids and not allow_empty:
        raise ValueError(f"{what} is empty")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{what} {list(ids)} repeats a broker")
    if any(i < 0 for i in ids):
        raise ValueError(f"{what} {list(ids)} has a negative broker id")


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    host: str
    kafka_port: int
    http_port: int
    rack: str | None = None
    start_time_ms: int = 0
    replica_listener: str | None = None  # inter-broker "host:port"; None: host:kafka_port
    # The external client listener's advertised "host:port" (BrokerConfig.external_listen).
    external_listener: str | None = None
    # The machine (one node's data dir on one host) this broker is a process of, when the
    # node runs several (``strata serve --processes``); its processes share that data dir,
    # so two replicas of a partition are never placed on one machine (controller.place_replicas).
    # None: a broker of its own.
    machine: str | None = None

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError(f"broker id must be non-negative, got {self.broker_id}")
        for name in ("kafka_port", "http_port"):
            port = getattr(self, name)
            if not 0 <= port < 65536:
                raise ValueError(f"{name} must be in [0, 65535], got {port}")
        if not self.host:
            raise ValueError("host is empty")
        for what, listener in (("replica", self.replica_listener), ("external", self.external_listener)):
            if listener is not None:
                host, sep, port = listener.rpartition(":")
                if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                    raise ValueError(f"{what} listener {listener!r} is not host:port")

    @property
    def replica_address(self) -> tuple[str, int]:
        """Where followers reach this broker (its inter-broker listener)."""
        if self.replica_listener is None:
            return self.host, self.kafka_port
        host, _, port = self.replica_listener.rpartition(":")
        return host.strip("[]"), int(port)

    def client_address(self, external: bool) -> tuple[str, int]:
        """Where a client of the given listener reaches this broker. A broker with no
        external listener (a cluster part-way through enabling one) is named by its main
        address: listing it beats hiding its partitions' leaders."""
        if not external or self.external_listener is None:
            return self.host, self.kafka_port
        host, _, port = self.external_listener.rpartition(":")
        return host.strip("[]"), int(port)

    def to_json(self) -> bytes:
        return _dump(
            {
                "broker_id": self.broker_id,
                "host": self.host,
                "kafka_port": self.kafka_port,
                "http_port": self.http_port,
                "rack": self.rack,
                "start_time_ms": self.start_time_ms,
                "replica_listener": self.replica_listener,
                "external_listener": self.external_listener,
                "machine": self.machine,
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> BrokerRegistration:
        w = "broker registration"
        o = _load(data, w)
        return _decode(
            w,
            lambda: cls(
                broker_id=_int(o, "broker_id", w),
                host=_str(o, "host", w) or "",
                kafka_port=_int(o, "kafka_port", w, 0, 65535),
                http_port=_int(o, "http_port", w, 0, 65535),
                rack=_str(o, "rack", w, optional=True),
                start_time_ms=_int(o, "start_time_ms", w),
                replica_listener=_str(o, "replica_listener", w, optional=True),
                external_listener=_str(o, "external_listener", w, optional=True),
                machine=_str(o, "machine", w, optional=True),
            ),
        )


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """Where a topic's replicas live: ``partitions[p]`` is partition p's replica list, the
    first being the preferred leader. ``configs`` holds the topic's overrides only.

    ``adding[p]`` / ``removing[p]`` describe a reassignment of partition p in progress, as
    Kafka stores it (``broker.replication.reassignment``): ``partitions[p]`` is then the
    target plus the original replicas. ``replication_factor`` is the topic's at creation
    (updated when a completed reassignment leaves every partition with one same count);
    partitions may differ from it after reassignments, as in Kafka.
    """

    topic_id: str
    replication_factor: int
    partitions: tuple[tuple[int, ...], ...]
    configs: Mapping[str, str] = field(default_factory=dict)
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        uuid.UUID(self.topic_id)  # ValueError when malformed
        if not 1 <= len(self.partitions) <= MAX_PARTITIONS:
            raise ValueError(f"partition count must be in [1, {MAX_PARTITIONS}], got {len(self.partitions)}")
        if self.replication_factor < 1:
            raise ValueError(f"replication factor must be at least 1, got {self.replication_factor}")
        adding = {p: tuple(ids) for p, ids in self.adding.items() if ids}
        removing = {p: tuple(ids) for p, ids in self.removing.items() if ids}
        for p, replicas in enumerate(self.partitions):
            _check_ids(replicas, f"replicas of partition {p}")
        counts = {len(r) for r in self.partitions}
        # Counts may differ once a reassignment changed a partition's replication factor;
        # a uniform topic at rest must agree with its replication factor.
        if not adding and not removing and len(counts) == 1 and counts != {self.replication_factor}:
            raise ValueError(
                f"partitions have {counts.pop()} replicas; replication factor is {self.replication_factor}"
            )
        for p in {*adding, *removing}:
            if not 0 <= p < len(self.partitions):
                raise ValueError(f"reassignment of partition {p}, which does not exist")
            PartitionReplicas(self.partitions[p], adding.get(p, ()), removing.get(p, ()))
        object.__setattr__(self, "configs", dict(self.configs))
        object.__setattr__(self, "adding", adding)
        object.__setattr__(self, "removing", removing)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    def replicas(self, partition: int) -> tuple[int, ...]:
        if not 0 <= partition < len(self.partitions):
            raise UnknownTopicOrPartitionError(f"partition {partition} does not exist")
        return self.partitions[partition]

    def replica_set(self, partition: int) -> PartitionReplicas:
        """Partition ``partition``'s replicas with its reassignment, if one runs."""
        return PartitionReplicas(
            self.replicas(partition), self.adding.get(partition, ()), self.removing.get(partition, ())
        )

    @property
    def reassigning(self) -> tuple[int, ...]:
        """The partitions with a reassignment in progress."""
        return tuple(sorted({*self.adding, *self.removing}))

    def with_replica_set(self, partition: int, rs: PartitionReplicas) -> TopicAssignment:
        """This assignment with partition ``partition`` replaced by ``rs``."""
        parts = list(self.partitions)
        parts[partition] = rs.replicas
        adding, removing = dict(self.adding), dict(self.removing)
        adding[partition], removing[partition] = rs.adding, rs.removing
        rf = self.replication_factor
        if not rs.reassigning:
            counts = {
                len(PartitionReplicas(r, adding.get(q, ()), removing.get(q, ())).target)
                for q, r in enumerate(parts)
            }
            if len(counts) == 1:
                rf = counts.pop()
        return replace(self, replication_factor=rf, partitions=tuple(parts), adding=adding, removing=removing)

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "topic_id": self.topic_id,
            "replication_factor": self.replication_factor,
            "partitions": [list(r) for r in self.partitions],
            "configs": dict(self.configs),
        }
        # Only while something is being reassigned, so other records stay as they were.
        if self.adding:
            obj["adding_replicas"] = {str(p): list(ids) for p, ids in sorted(self.adding.items())}
        if self.removing:
            obj["removing_replicas"] = {str(p): list(ids) for p, ids in sorted(self.removing.items())}
        return _dump(obj)

    @classmethod
    def from_json(cls, data: bytes) -> TopicAssignment:
        w = "topic assignment"
        o = _load(data, w)
        parts = o.get("partitions")
        if not isinstance(parts, list):
            raise CorruptMetadataError(f"{w}: field 'partitions' must be a list, got {parts!r}")
        configs = o.get("configs", {})
        if not isinstance(configs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in configs.items()
        ):
            raise CorruptMetadataError(f"{w}: field 'configs' must map strings to strings, got {configs!r}")
        adding = _partition_ids(o.get("adding_replicas", {}), "adding_replicas", w)
        removing = _partition_ids(o.get("removing_replicas", {}), "removing_replicas", w)
        return _decode(
            w,
            lambda: cls(
                topic_id=_str(o, "topic_id", w) or "",
                replication_factor=_int(o, "replication_factor", w, 1, _INT32_MAX),
                partitions=tuple(_ids(r, "partitions", w) for r in parts),
                configs=configs,
                adding=adding,
                removing=removing,
            ),
        )


def _partition_ids(v: object, name: str, what: str) -> dict[int, tuple[int, ...]]:
    if not isinstance(v, dict):
        raise CorruptMetadataError(f"{what}: field {name!r} must map partitions to broker ids, got {v!r}")
    out: dict[int, tuple[int, ...]] = {}
    for k, ids in v.items():
        if not isinstance(k, str) or not k.isdigit():
            raise CorruptMetadataError(f"{what}: field {name!r} has a key {k!r} that is not a partition")
        out[int(k)] = _ids(ids, name, what)
    return out


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader, leader epoch and in-sync replicas of one partition.

    ``leader`` is ``NO_LEADER`` (-1) while the partition is offline; the ISR is then kept
    as it was (never emptied), so the last in-sync replica can return as a clean leader.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    partition_epoch: int = 0

    def __post_init__(self) -> None:
        if self.leader < NO_LEADER:
            raise ValueError(f"leader must be a broker id or {NO_LEADER}, got {self.leader}")
        if self.leader_epoch < 0 or self.controller_epoch < 0 or self.partition_epoch < 0:
            raise ValueError("epochs must be non-negative")
        _check_ids(self.isr, "ISR", allow_empty=True)
        if self.leader != NO_LEADER and self.leader not in self.isr:
            raise ValueError(f"leader {self.leader} is not in the ISR {list(self.isr)}")

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def to_json(self) -> bytes:
        return _dump(
            {
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "controller_epoch": self.controller_epoch,
                "partition_epoch": self.partition_epoch,
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> PartitionState:
        w = "partition state"
        o = _load(data, w)
        return _decode(
            w,
            lambda: cls(
                leader=_int(o, "leader", w, NO_LEADER, _INT32_MAX),
                leader_epoch=_int(o, "leader_epoch", w, 0, _INT32_MAX),
                isr=_ids(o.get("isr"), "isr", w),
                controller_epoch=_int(o, "controller_epoch", w, 0, _INT32_MAX),
                partition_epoch=_int(o, "partition_epoch", w, 0, _INT32_MAX),
            ),
        )


@dataclass(frozen=True, slots=True)
class ControllerRecord:
    broker_id: int
    epoch: int

    def to_json(self) -> bytes:
        return _dump({"broker_id": self.broker_id, "epoch": self.epoch})

    @classmethod
    def from_json(cls, data: bytes) -> ControllerRecord:
        w = "controller record"
        o = _load(data, w)
        return cls(_int(o, "broker_id", w), _int(o, "epoch", w, 1))


@dataclass(frozen=True, slots=True)
class ControllerToken:
    """Proof of being the controller: writes made with it also compare that the
    controller key still has ``create_revision``, so a deposed controller's writes fail
    (``StaleControllerEpochError``) instead of overwriting its successor's."""

    broker_id: int
    epoch: int
    create_revision: int


@dataclass(frozen=True, slots=True)
class Versioned(Generic[T]):
    """A record as read from etcd, with the revisions a compare-and-swap needs."""

    value: T
    mod_revision: int
    create_revision: int


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker. ``epoch`` (its key's create_revision) changes on re-registration."""

    registration: BrokerRegistration
    epoch: int
    lease: int

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id


class Conflict(enum.Enum):
    STALE_VERSION = "stale_version"  # changed since read, same leader epoch
    FENCED_LEADER_EPOCH = "fenced_leader_epoch"  # a newer leader epoch exists
    DELETED = "deleted"  # the partition (or its topic) no longer exists


@dataclass(frozen=True, slots=True)
class CasResult:
    """Outcome of a compare-and-swap: on success ``state`` is what was written; on a
    conflict it is what etcd holds now (None if deleted), to retry against."""

    ok: bool
    state: Versioned[PartitionState] | None
    conflict: Conflict | None = None


def initial_state(replicas: Sequence[int], controller_epoch: int = 0) -> PartitionState:
    """A new partition: the first replica leads, every replica is in sync (logs are empty)."""
    return PartitionState(
        leader=replicas[0], leader_epoch=0, isr=tuple(replicas), controller_epoch=controller_epoch
    )


def _versioned_state(kv: KeyValue) -> Versioned[PartitionState]:
    return Versioned(PartitionState.from_json(kv.value), kv.mod_revision, kv.create_revision)
