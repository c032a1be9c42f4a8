"""The etcd key layout of a Strata cluster: the one module that spells keys.

Every key of cluster ``<name>`` lives under ``<root>/<name>/`` (root ``/strata`` by
default), so several clusters can share one etcd:

    <root>/<name>/brokers/<id>                    BrokerRegistration JSON, bound to the broker's lease
    <root>/<name>/broker-ids                      last automatically assigned broker id (decimal)
    <root>/<name>/controller                      ControllerRecord JSON, bound to the controller's lease
    <root>/<name>/controller-epoch                last controller epoch (decimal), never deleted
    <root>/<name>/topics/<topic>                  TopicAssignment JSON
    <root>/<name>/partitions/<topic>/<p>/state    PartitionState JSON
    <root>/<name>/security/acls                   ACL bindings JSON (broker.security.stored)
    <root>/<name>/security/users                  SASL credentials JSON: salted SCRAM keys
    <root>/<name>/quotas                          runtime client quotas JSON (broker.security.quotas)

Broker ids and partition numbers are written in decimal without padding; readers parse
them rather than relying on key order. Topic names are Kafka-legal (letters, digits,
``.``, ``_``, ``-``), so they never contain ``/`` and a topic's partition prefix
(``.../partitions/<topic>/``, with the trailing slash) never matches another topic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from hot.errors import InvalidConfigError
from hot.topics import validate_topic_name

DEFAULT_ROOT: Final = "/strata"
_CLUSTER_NAME: Final = re.compile(r"[a-zA-Z0-9._-]{1,128}")


@dataclass(frozen=True, slots=True)
class KeyLayout:
    cluster: str
    root: str = DEFAULT_ROOT

    def __post_init__(self) -> None:
        if not _CLUSTER_NAME.fullmatch(self.cluster) or self.cluster in (".", ".."):
            raise InvalidConfigError(
                f"cluster name {self.cluster!r} is illegal: 1-128 ASCII letters, digits, '.', '_' or '-'"
            )
        if not self.root.startswith("/") or (self.root.endswith("/") and self.root != "/"):
            raise InvalidConfigError(f"etcd key root {self.root!r} must start with '/' and not end with one")

    @property
    def prefix(self) -> bytes:
        """Everything of this cluster (what a broker watches)."""
        root = "" if self.root == "/" else self.root
        return f"{root}/{self.cluster}/".encode()

    # --- brokers --------------------------------------------------------------------------

    @property
    def brokers_prefix(self) -> bytes:
        return self.prefix + b"brokers/"

    def broker(self, broker_id: int) -> bytes:
        if broker_id < 0:
            raise InvalidConfigError(f"broker id must be non-negative, got {broker_id}")
        return self.brokers_prefix + str(broker_id).encode()

    @property
    def broker_id_counter(self) -> bytes:
        return self.prefix + b"broker-ids"

    # --- controller -------------------------------------------------------------------------

    @property
    def controller(self) -> bytes:
        return self.prefix + b"controller"

    @property
    def controller_epoch(self) -> bytes:
        return self.prefix + b"controller-epoch"

    # --- topics and partitions ---------------------------------------------------------------

    @property
    def topics_prefix(self) -> bytes:
        return self.prefix + b"topics/"

    def topic(self, name: str) -> bytes:
        validate_topic_name(name)
        return self.topics_prefix + name.encode()

    @property
    def partitions_prefix(self) -> bytes:
        return self.prefix + b"partitions/"

    def topic_partitions(self, name: str) -> bytes:
        """Prefix of every partition key of one topic."""
        validate_topic_name(name)
        return self.partitions_prefix + name.encode() + b"/"

    def partition_state(self, name: str, partition: int) -> bytes:
        if partition < 0:
            raise InvalidConfigError(f"partition must be non-negative, got {partition}")
        return self.topic_partitions(name) + str(partition).encode() + b"/state"

    # --- security (broker.security.stored) ------------------------------------------------------------------

    @property
    def security_prefix(self) -> bytes:
        return self.prefix + b"security/"

    @property
    def acls(self) -> bytes:
        return self.security_prefix + b"acls"

    @property
    def users(self) -> bytes:
        return self.security_prefix + b"users"

    # --- client quotas ----------------------------------------------------------------------

    @property
    def quotas(self) -> bytes:
        return self.prefix + b"quotas"

    # --- parsing (keys seen in listings and watches) ---------------------------------------------

    def parse(self, key: bytes) -> ParsedKey | None:
        """What a key of this cluster names; None for keys outside the layout."""
        if not key.startswith(self.prefix):
            return None
        try:
            rest = key[len(self.prefix) :].decode("ascii")
        except UnicodeDecodeError:
            return None
        parts = rest.split("/")
        if parts[0] == "brokers" and len(parts) == 2 and _is_decimal(parts[1]):
            return BrokerKey(int(parts[1]))
        if parts[0] == "topics" and len(parts) == 2 and parts[1]:
            return TopicKey(parts[1])
        if parts[0] == "partitions" and len(parts) == 4 and parts[3] == "state" and _is_decimal(parts[2]):
            return PartitionStateKey(parts[1], int(parts[2]))
        if rest == "controller":
            return ControllerKey()
        if rest == "quotas":
            return QuotasKey()
        return None


def _is_decimal(text: str) -> bool:
    return text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))


@dataclass(frozen=True, slots=True)
class BrokerKey:
    broker_id: int


@dataclass(frozen=True, slots=True)
class TopicKey:
    topic: str


@dataclass(frozen=True, slots=True)
class PartitionStateKey:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class ControllerKey:
    pass


@dataclass(frozen=True, slots=True)
class QuotasKey:
    pass


ParsedKey = BrokerKey | TopicKey | PartitionStateKey | ControllerKey | QuotasKey
