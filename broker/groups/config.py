"""Broker-level consumer-group settings, under their Kafka names.

In the broker's TOML they form the ``[groups]`` table (keys are the Kafka names); in the
environment each is ``STRATA_`` + the Kafka name upper-cased with dots as underscores
(``STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS``). Unknown names and out-of-range values are
InvalidConfigError naming the setting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from hot.config import INT32_MAX, MIN_SEGMENT_BYTES
from hot.errors import InvalidConfigError


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's defaults (Kafka REST Proxy's for ``consumer_instance_timeout_ms``), except
    ``offsets_segment_bytes`` (see below)."""

    # How long the first rebalance of an empty group waits for more members (each new
    # member extends it, up to the rebalance timeout), so a fleet of consumers starting
    # together gets one rebalance instead of one per member.
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = INT32_MAX  # group.max.size
    # Committed offsets of a group without members are deleted this long after it became
    # empty (KIP-211); offsets of standalone consumers this long after their commit.
    offsets_retention_minutes: int = 10080  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    # How long an OffsetCommit waits for durability before answering REQUEST_TIMED_OUT.
    offsets_commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms
    # Segment size of the internal offsets log, and the least size at which it is compacted
    # (broker.groups.offsets). Kafka's is 100 MiB; smaller here because opening the log replays
    # every record from its start in Python.
    offsets_segment_bytes: int = 16 * 1024 * 1024  # offsets.topic.segment.bytes
    # Cluster mode only: the replicated ``__consumer_offsets`` topic, created on the first
    # FindCoordinator. Kafka's 50 partitions would mean 50 more replicated logs, fetches and
    # etcd states for a handful of groups here; 8 still spreads coordinators over brokers.
    # Fixed once the topic exists (a group's partition is hash % count).
    offsets_topic_num_partitions: int = 8  # offsets.topic.num.partitions
    # Capped at the live brokers when the topic is created (with a warning).
    offsets_topic_replication_factor: int = 3  # offsets.topic.replication.factor
    # REST Proxy v2 consumer instances unused this long are closed and leave their group
    # (Kafka REST Proxy's consumer.instance.timeout.ms, same default: 5 minutes).
    consumer_instance_timeout_ms: int = 300_000  # consumer.instance.timeout.ms
    # KIP-848 consumer groups (broker.groups.consumer_group): the session a member's
    # heartbeats keep alive and how often it is told to send them (Kafka's defaults).
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = INT32_MAX  # group.consumer.max.size
    # Whether a group with members may change protocol online (Kafka 4's default:
    # bidirectional). Strata converts only empty groups (as Kafka does under any policy):
    # a group with members is refused as under "disabled" (docs/operations.md).
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy

    def __post_init__(self) -> None:
        for name, (field, parse) in _SPEC.items():
            value = getattr(self, field)
            if field in _CHOICES:
                if not isinstance(value, str):
                    raise InvalidConfigError(f"{name}: expected a string, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfigError(f"{name}: expected an integer, got {value!r}")
            parse(str(value), name)
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise InvalidConfigError(
                f"group.min.session.timeout.ms {self.min_session_timeout_ms} exceeds "
                f"group.max.session.timeout.ms {self.max_session_timeout_ms}"
            )

    @classmethod
    def from_kafka(cls, values: Mapping[str, object], base: GroupConfig | None = None) -> GroupConfig:
        """``base`` (or the defaults) with the Kafka-named ``values`` (strings or TOML
        integers) applied, all validated."""
        changes: dict[str, int | str] = {}
        for name, raw in values.items():
            spec = _SPEC.get(name)
            if spec is None:
                raise InvalidConfigError(f"unknown group setting {name!r} (known: {', '.join(_SPEC)})")
            field, parse = spec
            if isinstance(raw, bool) or not isinstance(raw, int | str):
                raise InvalidConfigError(f"{name}: expected an integer, got {raw!r}")
            changes[field] = parse(str(raw), name)
        return dataclasses.replace(base if base is not None else cls(), **changes)  # type: ignore[arg-type]

    def to_kafka(self) -> dict[str, str]:
        return {name: str(getattr(self, field)) for name, (field, _) in _SPEC.items()}

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def upgrade_enabled(self) -> bool:
        """Whether the migration policy lets a classic group with members upgrade."""
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """Whether the migration policy lets a consumer group of classic members downgrade."""
        return self.consumer_migration_policy in ("bidirectional", "downgrade")


def _int(lo: int, hi: int = INT32_MAX) -> Callable[[str, str], int]:
    def parse(raw: str, name: str) -> int:
        text = raw.strip()
        try:
            value = int(text)
        except ValueError:
            raise InvalidConfigError(f"{name}: expected an integer, got {raw!r}") from None
        if not lo <= value <= hi:
            raise InvalidConfigError(f"{name}: must be in [{lo}, {hi}], got {value}")
        return value

    return parse


MIGRATION_POLICIES: Final = ("bidirectional", "upgrade", "downgrade", "disabled")


def _choice(options: tuple[str, ...]) -> Callable[[str, str], str]:
    """Kafka's case-insensitive string choice."""

    def parse(raw: str, name: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise InvalidConfigError(f"{name}: must be one of {', '.join(options)}, got {raw!r}")
        return value

    return parse


_CHOICES: Final = frozenset({"consumer_migration_policy"})

# Kafka name -> (GroupConfig field, parser of the string form).
_SPEC: Final[dict[str, tuple[str, Callable[[str, str], int | str]]]] = {
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", _int(0)),
    "group.min.session.timeout.ms": ("min_session_timeout_ms", _int(1)),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", _int(1)),
    "group.max.size": ("max_size", _int(1)),
    "offsets.retention.minutes": ("offsets_retention_minutes", _int(1)),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", _int(1)),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", _int(0)),
    "offsets.commit.timeout.ms": ("offsets_commit_timeout_ms", _int(1)),
    "offsets.topic.segment.bytes": ("offsets_segment_bytes", _int(MIN_SEGMENT_BYTES)),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _int(1, 1000)),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", _int(1, 32767)),
    "consumer.instance.timeout.ms": ("consumer_instance_timeout_ms", _int(1)),
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", _int(1)),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", _int(1)),
    "group.consumer.max.size": ("consumer_max_size", _int(1)),
    "group.consumer.migration.policy": ("consumer_migration_policy", _choice(MIGRATION_POLICIES)),
}

KAFKA_NAMES: Final[tuple[str, ...]] = tuple(_SPEC)
ENV_NAMES: Final[dict[str, str]] = {"STRATA_" + n.upper().replace(".", "_"): n for n in _SPEC}
