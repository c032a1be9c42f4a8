"""Share-group settings: the broker's (``group.share.*``, Kafka's names and defaults) and
each group's own (``share.*``, set with IncrementalAlterConfigs on the GROUP resource,
KIP-932), validated against the broker's bounds as Kafka does.

The broker's come from the environment as ``STRATA_`` + the Kafka name upper-cased with
dots as underscores (``STRATA_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS``), as the
consumer-group settings do (broker.groups.config).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from hot.errors import InvalidConfigError

# The share coordinator's internal topic (broker.share.state_store).
SHARE_STATE_TOPIC: Final = "__share_group_state"

AUTO_OFFSET_RESET: Final = "share.auto.offset.reset"
LOCK_DURATION: Final = "share.record.lock.duration.ms"
DELIVERY_LIMIT: Final = "share.delivery.count.limit"
ISOLATION_LEVEL: Final = "share.isolation.level"
SESSION_TIMEOUT: Final = "share.session.timeout.ms"
HEARTBEAT_INTERVAL: Final = "share.heartbeat.interval.ms"
# KIP-1191 proposes dead-letter queues for share groups; this is its topic-name setting.
DLQ_TOPIC: Final = "errors.deadletterqueue.topic.name"


@dataclass(frozen=True, slots=True)
class ShareBrokerConfig:
    """Kafka 4.2's broker defaults for share groups."""

    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    min_record_lock_duration_ms: int = 15_000  # group.share.min.record.lock.duration.ms
    max_record_lock_duration_ms: int = 60_000  # group.share.max.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    min_delivery_count_limit: int = 2  # group.share.min.delivery.count.limit
    max_delivery_count_limit: int = 10  # group.share.max.delivery.count.limit
    partition_max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    min_session_timeout_ms: int = 45_000  # group.share.min.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    min_heartbeat_interval_ms: int = 5_000  # group.share.min.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    max_share_sessions: int = 2_000  # group.share.max.share.sessions

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ShareBrokerConfig:
        env = os.environ if env is None else env
        changes: dict[str, int] = {}
        for f in dataclasses.fields(cls):
            name = "group.share." + f.name.replace("_", ".")
            raw = env.get("STRATA_" + name.upper().replace(".", "_"))
            if raw is None:
                continue
            try:
                changes[f.name] = int(raw)
            except ValueError:
                raise InvalidConfigError(f"{name}: expected an integer, got {raw!r}") from None
            if changes[f.name] < 1:
                raise InvalidConfigError(f"{name}: must be at least 1, got {raw}")
        return dataclasses.replace(cls(), **changes)


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """One group's effective settings (its own, else the broker's)."""

    auto_offset_reset: str
    lock_ms: int
    delivery_limit: int
    read_committed: bool
    session_timeout_ms: int
    heartbeat_interval_ms: int
    dlq_topic: str | None


def group_config_names() -> tuple[str, ...]:
    return (
        AUTO_OFFSET_RESET,
        LOCK_DURATION,
        DELIVERY_LIMIT,
        ISOLATION_LEVEL,
        SESSION_TIMEOUT,
        HEARTBEAT_INTERVAL,
        DLQ_TOPIC,
    )


def defaults(broker: ShareBrokerConfig) -> dict[str, str]:
    return {
        AUTO_OFFSET_RESET: "latest",
        LOCK_DURATION: str(broker.record_lock_duration_ms),
        DELIVERY_LIMIT: str(broker.delivery_count_limit),
        ISOLATION_LEVEL: "read_uncommitted",
        SESSION_TIMEOUT: str(broker.session_timeout_ms),
        HEARTBEAT_INTERVAL: str(broker.heartbeat_interval_ms),
        DLQ_TOPIC: "",
    }


def validate(broker: ShareBrokerConfig, name: str, value: str) -> str:
    """The value as stored, or InvalidConfigError naming the setting and its bounds."""

    def bounded(lo: int, hi: int) -> str:
        try:
            n = int(value.strip())
        except ValueError:
            raise InvalidConfigError(f"{name}: expected an integer, got {value!r}") from None
        if not lo <= n <= hi:
            raise InvalidConfigError(f"{name}: must be in [{lo}, {hi}], got {n}")
        return str(n)

    if name == AUTO_OFFSET_RESET:
        v = value.strip().lower()
        if v not in ("latest", "earliest"):
            raise InvalidConfigError(f"{name}: must be latest or earliest, got {value!r}")
        return v
    if name == ISOLATION_LEVEL:
        v = value.strip().lower()
        if v not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"{name}: must be read_uncommitted or read_committed, got {value!r}")
        return v
    if name == LOCK_DURATION:
        return bounded(broker.min_record_lock_duration_ms, broker.max_record_lock_duration_ms)
    if name == DELIVERY_LIMIT:
        return bounded(broker.min_delivery_count_limit, broker.max_delivery_count_limit)
    if name == SESSION_TIMEOUT:
        return bounded(broker.min_session_timeout_ms, 2**31 - 1)
    if name == HEARTBEAT_INTERVAL:
        return bounded(broker.min_heartbeat_interval_ms, 2**31 - 1)
    if name == DLQ_TOPIC:
        return value.strip()
    raise InvalidConfigError(
        f"unknown share group config {name!r} (known: {', '.join(group_config_names())})"
    )


def settings(broker: ShareBrokerConfig, own: Mapping[str, str]) -> ShareGroupSettings:
    values = {**defaults(broker), **own}
    return ShareGroupSettings(
        auto_offset_reset=values[AUTO_OFFSET_RESET],
        lock_ms=int(values[LOCK_DURATION]),
        delivery_limit=int(values[DELIVERY_LIMIT]),
        read_committed=values[ISOLATION_LEVEL] == "read_committed",
        session_timeout_ms=int(values[SESSION_TIMEOUT]),
        heartbeat_interval_ms=int(values[HEARTBEAT_INTERVAL]),
        dlq_topic=values[DLQ_TOPIC] or None,
    )
