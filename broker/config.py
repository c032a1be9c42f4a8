"""Broker configuration: one typed place for every setting and its default.

Precedence, lowest to highest: built-in defaults < TOML file (``--config`` or
``STRATA_CONFIG``) < ``STRATA_*`` environment variables < command-line flags.

TOML layout::

    data_dir = "./strata-data"
    processes = 1                                    # broker processes of this node: a count, or "auto"
    kafka_listen = "127.0.0.1:9092"
    http_listen = "127.0.0.1:8080"
    advertised_listener = "broker1.example:9092"   # optional
    internal_listen = "10.0.0.5:9093"               # optional plaintext listener for replication
    external_listen = "0.0.0.0:19092"               # optional second client listener
    external_advertised_listener = "localhost:19092" # what clients of that listener are told
    metrics_listen = "10.0.0.5:9644"                # optional: /metrics without authentication
    http_allowed_origins = "https://console.example" # optional: other origins whose pages may write
    object_store = "s3://bucket/prefix"             # default file://<data_dir>/objects
    auto_create_topics = false
    num_partitions = 1                               # for auto-created topics
    max_request_bytes = 104857600
    [log]                                            # topic defaults, Kafka names
    "segment.bytes" = 1073741824
    "strata.flush.mode" = "fsync"
    [cleaner]                                        # log cleaner (hot.cleaner), Kafka names
    "log.cleaner.enable" = true
    "log.cleaner.backoff.ms" = 15000
    [tiering]                                        # tiering.config.TieringConfig fields
    upload_bytes_per_second = 0
    retention_check_interval_ms = 30000
    [groups]                                         # consumer groups, Kafka names
    "group.initial.rebalance.delay.ms" = 3000
    "offsets.retention.minutes" = 10080
    [transactions]                                   # transaction coordinator, Kafka names
    "transaction.max.timeout.ms" = 900000
    [cluster]                                        # cluster mode, broker.cluster_config names
    etcd = "127.0.0.1:2379"                          # set: a replicated cluster on etcd
    "replica.lag.time.max.ms" = 30000
    [tls]                                            # broker.security.config: TLS, mutual TLS
    cert = "server.pem"
    key = "server.key"
    [sasl]                                           # SASL on the Kafka listener
    mechanisms = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
    [authorization]                                  # ACLs (broker.security.acl)
    enabled = true
    super_users = "User:admin"

Environment: ``STRATA_DATA_DIR``, ``STRATA_PROCESSES``, ``STRATA_KAFKA_LISTEN``, ``STRATA_HTTP_LISTEN``,
``STRATA_ADVERTISED_LISTENER``, ``STRATA_INTERNAL_LISTEN``, ``STRATA_METRICS_LISTEN``,
``STRATA_SCHEMA_REGISTRY_LISTEN``,
``STRATA_EXTERNAL_LISTEN``, ``STRATA_EXTERNAL_ADVERTISED_LISTENER``, ``STRATA_HTTP_ALLOWED_ORIGINS``,
``STRATA_OBJECT_STORE``,
``STRATA_AUTO_CREATE_TOPICS``,
``STRATA_NUM_PARTITIONS``, ``STRATA_MAX_REQUEST_BYTES``, and topic defaults as
``STRATA_LOG_<NAME>`` with the Kafka name upper-cased and dots as underscores
(``STRATA_LOG_SEGMENT_BYTES``, ``STRATA_LOG_STRATA_FLUSH_MODE``), the log cleaner's
``log.cleaner.*`` settings as ``STRATA_`` + the Kafka name upper-cased with dots as
underscores (``STRATA_LOG_CLEANER_BACKOFF_MS``), and tiering settings
as ``STRATA_TIERING_<FIELD>`` (``STRATA_TIERING_UPLOAD_INTERVAL_MS``), and the group
settings of broker.groups.config as ``STRATA_`` + the Kafka name upper-cased with dots as
underscores (``STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS``), the transaction coordinator's settings of
broker.transactions.config likewise (``STRATA_TRANSACTION_MAX_TIMEOUT_MS``), and the cluster settings
of broker.cluster_config the same way (``STRATA_ETCD``, ``STRATA_REPLICA_LAG_TIME_MAX_MS``),
and the security settings as ``STRATA_TLS_<KEY>`` / ``STRATA_SASL_<KEY>`` /
``STRATA_AUTHORIZATION_<KEY>`` (``STRATA_TLS_CERT``, ``STRATA_SASL_MECHANISMS``,
``STRATA_AUTHORIZATION_ENABLED``; see broker.security.config), and the default quotas as
``STRATA_QUOTAS_PRODUCER_BYTE_RATE`` / ``STRATA_QUOTAS_CONSUMER_BYTE_RATE``, and the Iceberg
catalog (tiering.iceberg_config) as ``STRATA_ICEBERG_<FIELD>`` (``STRATA_ICEBERG_CATALOG``,
``STRATA_ICEBERG_URI``).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.cluster_config import ENV_NAMES as CLUSTER_ENV_NAMES
from broker.cluster_config import ClusterConfig
from broker.groups.config import ENV_NAMES as GROUP_ENV_NAMES
from broker.groups.config import GroupConfig
from broker.security.config import (
    AUTHZ_KEYS,
    SASL_KEYS,
    TLS_KEYS,
    AuthorizationConfig,
    SaslConfig,
    TlsConfig,
)
from broker.security.quotas import QUOTA_KEYS, QuotaConfig
from broker.transactions.config import ENV_NAMES as TXN_ENV_NAMES
from broker.transactions.config import TransactionConfig
from hot.cleaner import CLEANER_ENV_NAMES, CleanerConfig, cleaner_config_from_kafka
from hot.config import KAFKA_NAMES, LogConfig
from hot.errors import InvalidConfigError
from kwire.address import HostPort
from tiering.config import FIELDS as TIERING_FIELDS
from tiering.config import TieringConfig
from tiering.iceberg_config import FIELDS as ICEBERG_FIELDS
from tiering.iceberg_config import IcebergConfig


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    data_dir: Path = Path("./strata-data")
    # Broker processes of this node (api.supervisor): a count, or "auto" (the cores this
    # process may use). 1 by default: one process is what a laptop, README command 1 and
    # the tests need (each process holds its own ~100 MB of Python and caches); a server
    # that should use its cores sets "auto" (docs/operations.md, "Sizing").
    processes: str = "1"
    kafka_listen: HostPort = HostPort("127.0.0.1", 9092)
    http_listen: HostPort = HostPort("127.0.0.1", 8080)
    advertised_listener: HostPort | None = None
    # A second Kafka listener without TLS/SASL for followers (broker.fetcher speaks
    # plaintext); keep it on a private network. Unset: none.
    internal_listen: HostPort | None = None
    # A second client listener (Kafka's advertised.listeners with two client listeners):
    # the same security and ACLs as kafka_listen, but its clients are told every broker's
    # external address, so clients on two networks (containers and their host, a cluster
    # and the outside) each get addresses they can reach. Unset: none.
    external_listen: HostPort | None = None
    external_advertised_listener: HostPort | None = None
    # A plain-HTTP listener serving only /metrics, with no authentication or ACL check
    # (api.metrics_listener), for scrapers on a private network. Unset: none.
    metrics_listen: HostPort | None = None
    # The schema registry's listener (Confluent's REST API, api.schema_registry): TLS and
    # authentication as the HTTP listener's. "none" or empty: no registry listener (the
    # HTTP listener still serves it under /schema-registry).
    schema_registry_listen: HostPort | None = HostPort("127.0.0.1", 8081)
    # Origins besides the broker's own whose pages may send writes to the HTTP listener
    # (api.security.same_origin), as scheme://host[:port]; e.g. a console behind a proxy
    # under another name. Comma-separated in the environment, a string or list in TOML.
    http_allowed_origins: tuple[str, ...] = ()
    object_store: str | None = None
    auto_create_topics: bool = False
    num_partitions: int = 1
    max_request_bytes: int = 104857600
    broker_id: int = 0
    cluster_id: str = "strata-local"
    log: LogConfig = field(default_factory=LogConfig)
    tiering: TieringConfig = field(default_factory=TieringConfig)
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)  # log.cleaner.*
    groups: GroupConfig = field(default_factory=GroupConfig)
    transactions: TransactionConfig = field(default_factory=TransactionConfig)
    # Cluster mode (replication, metadata in etcd) when set; None: single node.
    cluster: ClusterConfig | None = None
    tls: TlsConfig = field(default_factory=TlsConfig)
    sasl: SaslConfig = field(default_factory=SaslConfig)
    authorization: AuthorizationConfig = field(default_factory=AuthorizationConfig)
    quotas: QuotaConfig = field(default_factory=QuotaConfig)
    iceberg: IcebergConfig = field(default_factory=IcebergConfig)  # [iceberg]: the catalog of Iceberg topics

    @property
    def object_store_url(self) -> str:
        if self.object_store:
            return self.object_store
        return f"file://{(self.data_dir / 'objects').resolve()}"

    @property
    def advertised(self) -> HostPort:
        """What clients are told to connect to (Metadata responses)."""
        return self.advertised_listener or self.kafka_listen

    @property
    def external_advertised(self) -> HostPort | None:
        """What clients of the external listener are told; None without one."""
        if self.external_listen is None:
            return None
        return self.external_advertised_listener or self.external_listen

    @property
    def security_protocol(self) -> str:
        """The Kafka listener's protocol in Kafka's names: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."""
        return ("SASL_" if self.sasl.enabled else "") + ("SSL" if self.tls.enabled else "PLAINTEXT")


_SCALARS: dict[str, str] = {
    "data_dir": "path",
    "processes": "processes",
    "kafka_listen": "hostport",
    "http_listen": "hostport",
    "advertised_listener": "hostport",
    "internal_listen": "hostport",
    "external_listen": "hostport",
    "external_advertised_listener": "hostport",
    "metrics_listen": "hostport",
    "schema_registry_listen": "hostport_or_none",
    "http_allowed_origins": "origins",
    "object_store": "str",
    "auto_create_topics": "bool",
    "num_partitions": "int",
    "max_request_bytes": "int",
    "broker_id": "int",
    "cluster_id": "str",
}


def _convert(name: str, value: Any) -> Any:
    kind = _SCALARS[name]
    if kind == "path":
        return Path(str(value))
    if kind == "hostport":
        return HostPort.parse(str(value), setting=name)
    if kind == "hostport_or_none":
        text = str(value).strip()
        return None if text.lower() in ("", "none") else HostPort.parse(text, setting=name)
    if kind == "origins":
        return _origins(name, value)
    if kind == "processes":
        text = str(value).strip().lower()
        if isinstance(value, bool) or not (text == "auto" or (text.isdigit() and 1 <= int(text) <= 256)):
            raise InvalidConfigError(
                f"{name}: expected a number of processes in [1, 256] or 'auto', got {value!r}"
            )
        return text
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise InvalidConfigError(f"{name}: expected a boolean, got {value!r}")
    if kind == "int":
        if isinstance(value, bool):
            raise InvalidConfigError(f"{name}: expected an integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise InvalidConfigError(f"{name}: expected an integer, got {value!r}") from None
        if name in ("num_partitions", "max_request_bytes") and number < 1:
            raise InvalidConfigError(f"{name}: must be at least 1, got {number}")
        if name == "broker_id" and number < 0:
            raise InvalidConfigError(f"broker_id: must be non-negative, got {number}")
        return number
    return str(value)


def _origins(name: str, value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value).split(",")
    out = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        scheme, sep, rest = item.partition("://")
        if scheme.lower() not in ("http", "https") or not sep or not rest or "/" in rest.rstrip("/"):
            raise InvalidConfigError(f"{name}: expected origins like https://host[:port], got {item!r}")
        out.append(item.rstrip("/"))
    return tuple(out)


def load_config(
    *,
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> BrokerConfig:
    """Build the effective config. ``overrides`` are command-line flags (None values are ignored)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    log_values: dict[str, str] = {}
    tiering_values: dict[str, object] = {}
    cleaner_values: dict[str, object] = {}
    group_values: dict[str, object] = {}
    txn_values: dict[str, object] = {}
    cluster_values: dict[str, object] = {}
    security_values: dict[str, dict[str, object]] = {"tls": {}, "sasl": {}, "authorization": {}, "quotas": {}}
    iceberg_values: dict[str, object] = {}

    path = config_file or env.get("STRATA_CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except OSError as exc:
            raise InvalidConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise InvalidConfigError(f"config file {path} is not valid TOML: {exc}") from None
        for key, value in doc.items():
            if key == "log":
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [log] must be a table")
                log_values.update({str(k): _scalar_text(v) for k, v in value.items()})
            elif key == "tiering":
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [tiering] must be a table")
                tiering_values.update({str(k): v for k, v in value.items()})
            elif key == "cleaner":
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [cleaner] must be a table")
                cleaner_values.update({str(k): v for k, v in value.items()})
            elif key == "groups":
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [groups] must be a table")
                group_values.update({str(k): v for k, v in value.items()})
            elif key == "transactions":
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [transactions] must be a table")
                txn_values.update({str(k): v for k, v in value.items()})
            elif key == "cluster":
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [cluster] must be a table")
                cluster_values.update({str(k): v for k, v in value.items()})
            elif key in security_values:
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [{key}] must be a table")
                security_values[key].update({str(k): v for k, v in value.items()})
            elif key == "iceberg":
                if not isinstance(value, dict):
                    raise InvalidConfigError(f"{path}: [iceberg] must be a table")
                iceberg_values.update({str(k): v for k, v in value.items()})
            elif key in _SCALARS:
                values[key] = _convert(key, value)
            else:
                raise InvalidConfigError(f"{path}: unknown setting {key!r}")

    for key in _SCALARS:
        env_value = env.get(f"STRATA_{key.upper()}")
        if env_value is not None and env_value != "":
            values[key] = _convert(key, env_value)
    env_log_names = {"STRATA_LOG_" + n.upper().replace(".", "_"): n for n in KAFKA_NAMES}
    for env_key, kafka_name in env_log_names.items():
        if env_key in env:
            log_values[kafka_name] = env[env_key]
    for name in TIERING_FIELDS:
        env_value = env.get(f"STRATA_TIERING_{name.upper()}")
        if env_value is not None and env_value != "":
            tiering_values[name] = env_value
    for env_key, kafka_name in CLEANER_ENV_NAMES.items():
        env_value = env.get(env_key)
        if env_value is not None and env_value != "":
            cleaner_values[kafka_name] = env_value
    for env_key, kafka_name in GROUP_ENV_NAMES.items():
        env_value = env.get(env_key)
        if env_value is not None and env_value != "":
            group_values[kafka_name] = env_value
    for env_key, kafka_name in TXN_ENV_NAMES.items():
        env_value = env.get(env_key)
        if env_value is not None and env_value != "":
            txn_values[kafka_name] = env_value

    for env_key, name in CLUSTER_ENV_NAMES.items():
        env_value = env.get(env_key)
        if env_value is not None and env_value != "":
            cluster_values[name] = env_value
    tables = (("tls", TLS_KEYS), ("sasl", SASL_KEYS), ("authorization", AUTHZ_KEYS), ("quotas", QUOTA_KEYS))
    for table, keys in tables:
        for name in keys:
            env_value = env.get(f"STRATA_{table.upper()}_{name.upper()}")
            if env_value is not None and env_value != "":
                security_values[table][name] = env_value

    for name in ICEBERG_FIELDS:
        env_value = env.get(f"STRATA_ICEBERG_{name.upper()}")
        if env_value is not None and env_value != "":
            iceberg_values[name] = env_value

    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key == "iceberg":
            iceberg_values.update({k: v for k, v in value.items() if v is not None})
        elif key == "log":
            log_values.update(value)
        elif key == "tiering":
            tiering_values.update(value)
        elif key == "cleaner":
            cleaner_values.update({k: v for k, v in value.items() if v is not None})
        elif key == "groups":
            group_values.update(value)
        elif key == "transactions":
            txn_values.update(value)
        elif key == "cluster":
            cluster_values.update({k: v for k, v in value.items() if v is not None})
        elif key in security_values:
            security_values[key].update({k: v for k, v in value.items() if v is not None})
        elif key in _SCALARS:
            values[key] = _convert(key, value)
        else:
            raise InvalidConfigError(f"unknown setting {key!r}")

    values["log"] = LogConfig.from_kafka(log_values) if log_values else LogConfig()
    values["tiering"] = TieringConfig.from_mapping(tiering_values)
    values["cleaner"] = cleaner_config_from_kafka(cleaner_values)
    values["groups"] = GroupConfig.from_kafka(group_values)
    values["transactions"] = TransactionConfig.from_kafka(txn_values)
    if cluster_values:
        cluster = ClusterConfig.from_kafka(cluster_values)
        if "broker_id" in values:  # given: fixed; absent: assigned through etcd
            cluster = dataclasses.replace(cluster, broker_id=values["broker_id"])
        values["cluster"] = cluster
    values["tls"] = TlsConfig.from_mapping(security_values["tls"])
    values["sasl"] = SaslConfig.from_mapping(security_values["sasl"])
    values["authorization"] = AuthorizationConfig.from_mapping(security_values["authorization"])
    values["quotas"] = QuotaConfig.from_mapping(security_values["quotas"])
    values["iceberg"] = IcebergConfig.from_mapping(iceberg_values)
    config = dataclasses.replace(BrokerConfig(), **values)
    if config.external_advertised_listener is not None and config.external_listen is None:
        raise InvalidConfigError("external_advertised_listener needs external_listen (the listener it names)")
    check_inter_broker_tls(config)
    inter = config.cluster.inter_broker_protocol if config.cluster is not None else "PLAINTEXT"
    client_protocol = config.security_protocol
    if config.cluster is not None and config.internal_listen is None and inter != client_protocol:
        # Followers must speak the listener's protocol (broker.inter_broker), or have their own.
        raise InvalidConfigError(
            f"[cluster] with a {client_protocol} Kafka listener needs internal_listen (a listener for"
            f" replication) or security.inter.broker.protocol={client_protocol}"
        )
    if (
        config.cluster is not None
        and config.authorization.enabled
        and config.internal_listen is None
        and inter == "PLAINTEXT"
    ):
        # Plaintext followers are anonymous: only the internal listener is the inter-broker
        # principal. Over SSL/SASL they are the broker's certificate or the inter-broker user,
        # which then needs CLUSTER_ACTION on the cluster (or to be a super user).
        raise InvalidConfigError(
            "[authorization] with [cluster] needs internal_listen (the inter-broker listener,"
            " not subject to ACLs) or an authenticated security.inter.broker.protocol"
        )
    return config


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_inter_broker_tls(config: BrokerConfig) -> None:
    """Inter-broker TLS needs this broker's certificate, key and CA (broker.inter_broker)."""
    cluster = config.cluster
    if cluster is None or not cluster.inter_broker_tls:
        return
    tls = config.tls
    if tls.cert is None or tls.key is None or tls.ca is None:
        raise InvalidConfigError(
            f"security.inter.broker.protocol={cluster.inter_broker_protocol} needs [tls] cert, key and ca"
            " (brokers authenticate each other with their certificates)"
        )
