"""Broker-level replication settings of cluster mode, under Kafka's names where Kafka has one.

Cluster mode is on when ``etcd`` is set (``strata serve --etcd host:port,...``); without
it a broker runs single-node with local metadata and none of this applies. In the
broker's TOML these form the ``[cluster]`` table (keys are the names below); in the
environment each is ``STRATA_`` + the name upper-cased with dots as underscores
(``STRATA_ETCD``, ``STRATA_REPLICA_LAG_TIME_MAX_MS``).

    etcd                                          etcd endpoints, host:port[,host:port...]
    etcd.timeout.ms                               deadline of each etcd call (5000)
    etcd.compaction.interval.ms                   the controller compacts etcd's history this
                                                  often, to the revision of one interval
                                                  before (Strata's; 300000; 0: never)
    broker.session.timeout.ms                     registration lease TTL, whole seconds (10000)
    replica.lag.time.max.ms                       ISR shrink after this long out of sync (30000)
    replica.fetch.wait.max.ms                     follower long-poll (500)
    replica.fetch.max.bytes                       per partition and fetch (1048576)
    replica.fetch.response.max.bytes              per fetch (10485760)
    replica.fetch.backoff.ms                      pause after a failed fetch (1000)
    replica.high.watermark.checkpoint.interval.ms HW checkpoint period (5000)
    default.replication.factor                    for CreateTopics with -1 and auto-creation (1)
    inter.broker.listener                         host:port followers connect to; default the
                                                  advertised Kafka listener (Strata's)
    security.inter.broker.protocol                PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
                                                  of follower connections (PLAINTEXT); SSL is
                                                  mutual: a broker's [tls] certificate is its
                                                  client certificate, checked against [tls] ca
    sasl.mechanism.inter.broker.protocol          SASL mechanism of followers (SCRAM-SHA-512)
    inter.broker.sasl.username                    the user followers authenticate as (Strata's)
    inter.broker.sasl.password                    its password (Strata's; a secret, never logged)
    metadata.store.socket                         internal (Strata's): instead of etcd, the local
                                                  store socket of a multi-process node's
                                                  supervisor (broker.store_socket); its workers
                                                  are brokers of a cluster on it

The cluster's name (etcd key prefix) is the broker's ``cluster_id``; the broker id is
the broker's ``broker_id`` when given, else assigned through etcd (``broker_id`` None).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from broker.etcd import parse_endpoints
from hot.config import INT32_MAX
from hot.errors import InvalidConfigError

INTER_BROKER_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    etcd: str | None  # None: a cluster of one on the embedded store (broker.embedded_store)
    broker_id: int | None = None  # None: assigned through etcd
    etcd_timeout_ms: int = 5000  # etcd.timeout.ms
    compaction_interval_ms: int = 300_000  # etcd.compaction.interval.ms (broker.etcd_compaction)
    session_timeout_ms: int = 10_000  # broker.session.timeout.ms
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    replica_fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    replica_fetch_max_bytes: int = 1 << 20  # replica.fetch.max.bytes
    replica_fetch_response_max_bytes: int = 10 << 20  # replica.fetch.response.max.bytes
    replica_fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms
    hw_checkpoint_interval_ms: int = 5000  # replica.high.watermark.checkpoint.interval.ms
    default_replication_factor: int = 1  # default.replication.factor
    inter_broker_listener: str | None = None  # inter.broker.listener (host:port)
    inter_broker_protocol: str = "PLAINTEXT"  # security.inter.broker.protocol
    inter_broker_sasl_mechanism: str = "SCRAM-SHA-512"  # sasl.mechanism.inter.broker.protocol
    inter_broker_sasl_username: str | None = None  # inter.broker.sasl.username
    inter_broker_sasl_password: str | None = field(default=None, repr=False)  # never in a repr
    # A worker of a multi-process node: the supervisor's store socket stands in for etcd.
    store_socket: Path | None = None  # metadata.store.socket

    def __post_init__(self) -> None:
        if self.etcd is not None:
            _endpoints(self.etcd)
        if self.store_socket is not None:
            if not isinstance(self.store_socket, Path):
                raise InvalidConfigError(f"metadata.store.socket: expected a path, got {self.store_socket!r}")
            if self.etcd is not None:
                raise InvalidConfigError("etcd and metadata.store.socket exclude each other: give one")
        if self.broker_id is not None and (isinstance(self.broker_id, bool) or self.broker_id < 0):
            raise InvalidConfigError(f"broker id must be non-negative, got {self.broker_id!r}")
        for name, (attr, parse) in _SPEC.items():
            if attr in _NOT_INTS:
                continue
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfigError(f"{name}: expected an integer, got {value!r}")
            parse(str(value), name)
        if self.inter_broker_listener is not None:
            parse_host_port(self.inter_broker_listener, "inter.broker.listener")
        if self.inter_broker_protocol not in INTER_BROKER_PROTOCOLS:
            raise InvalidConfigError(
                f"security.inter.broker.protocol: one of {', '.join(INTER_BROKER_PROTOCOLS)},"
                f" got {self.inter_broker_protocol!r}"
            )
        credentials = self.inter_broker_sasl_username and self.inter_broker_sasl_password
        if self.inter_broker_sasl and not credentials:
            raise InvalidConfigError(
                f"security.inter.broker.protocol={self.inter_broker_protocol} needs"
                " inter.broker.sasl.username and inter.broker.sasl.password"
            )

    @classmethod
    def of_one(cls, broker_id: int) -> ClusterConfig:
        """A single node: a cluster of one broker on the embedded metadata store."""
        return cls(None, broker_id=broker_id)

    @property
    def embedded(self) -> bool:
        """A cluster of one on its own embedded store (not a worker on a store socket)."""
        return self.etcd is None and self.store_socket is None

    @property
    def inter_broker_tls(self) -> bool:
        return self.inter_broker_protocol in ("SSL", "SASL_SSL")

    @property
    def inter_broker_sasl(self) -> bool:
        return self.inter_broker_protocol.startswith("SASL_")

    @property
    def lease_ttl_s(self) -> int:
        """The registration lease TTL: the session timeout rounded up to whole seconds."""
        return max(1, -(-self.session_timeout_ms // 1000))

    @property
    def etcd_timeout_s(self) -> float:
        return self.etcd_timeout_ms / 1000.0

    @classmethod
    def from_kafka(cls, values: Mapping[str, object], base: ClusterConfig | None = None) -> ClusterConfig:
        """``base`` with the named ``values`` (strings or TOML scalars) applied; without a
        base, ``etcd`` must be among them. Unknown names are InvalidConfigError."""
        changes: dict[str, object] = {}
        for name, raw in values.items():
            spec = _SPEC.get(name)
            if spec is None:
                raise InvalidConfigError(f"unknown cluster setting {name!r} (known: {', '.join(_SPEC)})")
            field, parse = spec
            if isinstance(raw, bool) or not isinstance(raw, int | str):
                raise InvalidConfigError(f"{name}: expected a string or an integer, got {raw!r}")
            changes[field] = parse(str(raw), name)
        if base is None:
            etcd = changes.pop("etcd", None)
            if not isinstance(etcd, str) and "store_socket" not in changes:
                raise InvalidConfigError("cluster settings given without 'etcd' endpoints")
            base = cls(etcd if isinstance(etcd, str) else None)
        return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _endpoints(text: str) -> None:
    parse_endpoints(text)


def parse_host_port(text: str, setting: str) -> tuple[str, int]:
    host, sep, port_s = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise InvalidConfigError(f"{setting}: expected HOST:PORT with a port in 1-65535, got {text!r}")
    return host, int(port_s)


def _int(lo: int, hi: int = INT32_MAX) -> Callable[[str, str], object]:
    def parse(raw: str, name: str) -> object:
        text = raw.strip()
        if not text.lstrip("-").isdigit():
            raise InvalidConfigError(f"{name}: expected an integer, got {raw!r}")
        value = int(text)
        if not lo <= value <= hi:
            raise InvalidConfigError(f"{name}: must be in [{lo}, {hi}], got {value}")
        return value

    return parse


def _protocol(raw: str, name: str) -> object:
    text = raw.strip().upper()
    if text not in INTER_BROKER_PROTOCOLS:
        raise InvalidConfigError(f"{name}: one of {', '.join(INTER_BROKER_PROTOCOLS)}, got {raw!r}")
    return text


def _mechanism(raw: str, name: str) -> object:
    text = raw.strip().upper()
    if text not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise InvalidConfigError(f"{name}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got {raw!r}")
    return text


def _secret(raw: str, name: str) -> object:
    if not raw:
        raise InvalidConfigError(f"{name}: must not be empty")
    return raw


def _path(raw: str, name: str) -> object:
    text = raw.strip()
    if not text:
        raise InvalidConfigError(f"{name}: must not be empty")
    return Path(text)


def _text(raw: str, name: str) -> object:
    text = raw.strip()
    if not text:
        raise InvalidConfigError(f"{name}: must not be empty")
    if name == "etcd":
        _endpoints(text)
    else:
        parse_host_port(text, name)
    return text


_SPEC: Final[dict[str, tuple[str, Callable[[str, str], object]]]] = {
    "etcd": ("etcd", _text),
    "etcd.timeout.ms": ("etcd_timeout_ms", _int(100, 600_000)),
    "etcd.compaction.interval.ms": ("compaction_interval_ms", _int(0)),
    "broker.session.timeout.ms": ("session_timeout_ms", _int(1000, 3_600_000)),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", _int(1)),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", _int(0)),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", _int(1024)),
    "replica.fetch.response.max.bytes": ("replica_fetch_response_max_bytes", _int(1024)),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", _int(0)),
    "replica.high.watermark.checkpoint.interval.ms": ("hw_checkpoint_interval_ms", _int(1)),
    "default.replication.factor": ("default_replication_factor", _int(1, 32767)),
    "inter.broker.listener": ("inter_broker_listener", _text),
    "security.inter.broker.protocol": ("inter_broker_protocol", _protocol),
    "sasl.mechanism.inter.broker.protocol": ("inter_broker_sasl_mechanism", _mechanism),
    "inter.broker.sasl.username": ("inter_broker_sasl_username", _secret),
    "inter.broker.sasl.password": ("inter_broker_sasl_password", _secret),
    "metadata.store.socket": ("store_socket", _path),
}
_NOT_INTS: Final = frozenset(
    {
        "etcd",
        "inter_broker_listener",
        "inter_broker_protocol",
        "inter_broker_sasl_mechanism",
        "inter_broker_sasl_username",
        "inter_broker_sasl_password",
        "store_socket",
    }
)
KAFKA_NAMES: Final[tuple[str, ...]] = tuple(_SPEC)
ENV_NAMES: Final[dict[str, str]] = {"STRATA_" + n.upper().replace(".", "_"): n for n in _SPEC}
