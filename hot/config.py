"""Per-topic log configuration: Kafka topic-config names mapped onto one frozen dataclass.

Only the topic configs Strata implements are accepted; any other name is an
InvalidConfigError naming it, so a client never believes a setting took effect
when it did not. ``strata.flush.mode`` is Strata's own key:

* ``fsync`` (default): group commit. An append is acknowledged (the high watermark
  passes it) only after the segment holding it was fsynced.
* ``interval``: Kafka's behaviour. The high watermark follows the log end at once;
  data is fsynced every ``flush.messages`` messages / ``flush.ms`` milliseconds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from hot.errors import InvalidConfigError

INT32_MAX: Final = (1 << 31) - 1
INT64_MAX: Final = (1 << 63) - 1
INT64_MIN: Final = -(1 << 63)

FLUSH_FSYNC: Final = "fsync"
FLUSH_INTERVAL: Final = "interval"
CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"
ICEBERG_DISABLED: Final = "disabled"
ICEBERG_KEY_VALUE: Final = "key_value"
ICEBERG_SCHEMA_ID_PREFIX: Final = "value_schema_id_prefix"
# iceberg.partition.spec: comma-separated fields, each a transform of a table column
# (Iceberg's names), or "none" for an unpartitioned table.
ICEBERG_PARTITION_FIELDS: Final = (
    "hour(timestamp)",
    "day(timestamp)",
    "month(timestamp)",
    "year(timestamp)",
    "identity(partition)",
)

# Subject-name strategies (Confluent's class names; the short names are accepted too).
TOPIC_NAME_STRATEGY: Final = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
RECORD_NAME_STRATEGY: Final = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
TOPIC_RECORD_NAME_STRATEGY: Final = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
_STRATEGIES: Final = (TOPIC_NAME_STRATEGY, RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY)

# Smallest segment that still holds a few batches. Kafka's floor (14 bytes) only makes
# sense for its legacy formats; tests use segments of a few KiB.
MIN_SEGMENT_BYTES: Final = 1024

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configuration of one topic's logs (Kafka defaults unless overridden)."""

    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms
    retention_ms: int = 604800000  # retention.ms, -1 = infinite
    retention_bytes: int = -1  # retention.bytes, -1 = infinite
    max_message_bytes: int = 1048588  # max.message.bytes (largest batch)
    index_interval_bytes: int = 4096  # index.interval.bytes
    flush_mode: str = FLUSH_FSYNC  # strata.flush.mode
    flush_messages: int = INT64_MAX  # flush.messages (interval mode)
    flush_ms: int = INT64_MAX  # flush.ms (interval mode)
    message_timestamp_type: str = CREATE_TIME  # message.timestamp.type
    cleanup_policy: str = "delete"  # cleanup.policy
    min_insync_replicas: int = 1  # min.insync.replicas
    local_retention_ms: int = -2  # local.retention.ms, -2 = same as retention.ms
    local_retention_bytes: int = -2  # local.retention.bytes, -2 = same as retention.bytes
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    # Tiered storage (docs/tiering.md): on by default for every topic. Turning it off stops
    # new uploads and local retention; data already uploaded stays readable.
    remote_storage_enable: bool = True  # remote.storage.enable
    remote_copy_lag_ms: int = 0  # remote.copy.lag.ms: min age of a sealed segment before upload
    # remote.copy.max.lag.ms: the active segment of a tiered log is rolled (and so uploaded)
    # once its first record was appended this long ago; -1 = only segment.bytes/segment.ms
    # roll. Bounds how far the bucket trails a quiet log (docs/tiering.md, recovery points).
    remote_copy_max_lag_ms: int = 3_600_000
    # Log compaction (hot.cleaner), used when cleanup.policy includes compact.
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = INT64_MAX  # max.compaction.lag.ms
    delete_retention_ms: int = 86400000  # delete.retention.ms: how long tombstones survive cleaning
    # Broker-side schema validation (broker.schema_registry.validation), Confluent Server's
    # names (Redpanda's redpanda.*.schema.id.validation set the same): produced keys/values
    # must carry a registered schema id, of the subject the strategy names.
    value_schema_validation: bool = False  # confluent.value.schema.validation
    key_schema_validation: bool = False  # confluent.key.schema.validation
    value_subject_name_strategy: str = TOPIC_NAME_STRATEGY  # confluent.value.subject.name.strategy
    key_subject_name_strategy: str = TOPIC_NAME_STRATEGY  # confluent.key.subject.name.strategy

    # Iceberg topics (spark.iceberg, docs/iceberg.md): the topic projected into an Iceberg
    # table in the bucket. Strata's own keys; Redpanda names its own likewise.
    iceberg_mode: str = ICEBERG_DISABLED  # iceberg.mode
    iceberg_target_lag_ms: int = 60000  # iceberg.target.lag.ms: how far the table may trail the log
    iceberg_partition_spec: str = "hour(timestamp)"  # iceberg.partition.spec
    iceberg_invalid_record_action: str = "drop"  # iceberg.invalid.record.action: drop | dlq_table
    iceberg_delete: bool = False  # iceberg.delete: deleting the topic drops its table too

    # Derived from the settings above once, in __post_init__ (read on every append):
    # cleanup.policy includes compact; strata.flush.mode is fsync; LogAppendTime topic.
    compact: bool = dataclasses.field(init=False, repr=False, compare=False)
    fsync_mode: bool = dataclasses.field(init=False, repr=False, compare=False)
    log_append_time: bool = dataclasses.field(init=False, repr=False, compare=False)

    @property
    def schema_validation(self) -> bool:
        """Whether produced records are checked against the schema registry."""
        return self.value_schema_validation or self.key_schema_validation

    def __post_init__(self) -> None:
        for name, (field, parse) in _SPEC.items():
            value = getattr(self, field)
            try:
                checked = parse(_text(value))
            except InvalidConfigError as e:
                raise InvalidConfigError(f"invalid value {value!r} for {name}: {e}") from None
            if checked != value:
                raise InvalidConfigError(f"invalid value {value!r} for {name}")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"min.compaction.lag.ms {self.min_compaction_lag_ms} must not exceed max.compaction.lag.ms "
                f"{self.max_compaction_lag_ms}"
            )
        if (
            self.local_retention_ms != -2
            and self.retention_ms != -1
            and (self.local_retention_ms == -1 or self.local_retention_ms > self.retention_ms)
        ):
            raise InvalidConfigError(
                f"local.retention.ms {self.local_retention_ms} must not exceed retention.ms "
                f"{self.retention_ms}"
            )
        if (
            self.local_retention_bytes != -2
            and self.retention_bytes != -1
            and (self.local_retention_bytes == -1 or self.local_retention_bytes > self.retention_bytes)
        ):
            raise InvalidConfigError(
                f"local.retention.bytes {self.local_retention_bytes} must not exceed retention.bytes "
                f"{self.retention_bytes}"
            )
        object.__setattr__(self, "compact", "compact" in self.cleanup_policy.split(","))
        object.__setattr__(self, "fsync_mode", self.flush_mode == FLUSH_FSYNC)
        object.__setattr__(self, "log_append_time", self.message_timestamp_type == LOG_APPEND_TIME)

    # --- Kafka names ---------------------------------------------------------------------

    @classmethod
    def from_kafka(cls, configs: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """``base`` (or the defaults) with the Kafka-named ``configs`` applied, all validated."""
        changes: dict[str, object] = {}
        for name, raw in configs.items():
            spec = _SPEC.get(name)
            if spec is None:
                raise InvalidConfigError(f"unknown topic config {name!r}")
            field, parse = spec
            if not isinstance(raw, str):
                raise InvalidConfigError(f"value of {name} must be a string, got {type(raw).__name__}")
            try:
                changes[field] = parse(raw)
            except InvalidConfigError as e:
                raise InvalidConfigError(f"invalid value {raw!r} for {name}: {e}") from None
        return dataclasses.replace(base if base is not None else cls(), **changes)  # type: ignore[arg-type]

    def overrides(self, configs: Mapping[str, str]) -> LogConfig:
        """This configuration with the Kafka-named ``configs`` applied on top."""
        return LogConfig.from_kafka(configs, self)

    def to_kafka(self) -> dict[str, str]:
        """Every setting under its Kafka name, as strings (DescribeConfigs)."""
        return {name: _text(getattr(self, field)) for name, (field, _) in _SPEC.items()}

    def diff(self, base: LogConfig) -> dict[str, str]:
        """The Kafka-named settings whose value differs from ``base`` (i.e. the overrides)."""
        return {
            name: _text(getattr(self, field))
            for name, (field, _) in _SPEC.items()
            if getattr(self, field) != getattr(base, field)
        }

    # --- derived ---------------------------------------------------------------------------

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete (time/size retention applies)."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes


def _text(value: object) -> str:
    """A setting's Kafka string form (booleans as Kafka writes them: lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise InvalidConfigError("must be true or false")


def _int(lo: int, hi: int = INT64_MAX) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        text = raw.strip()
        if not _INT_RE.fullmatch(text):
            raise InvalidConfigError("not an integer")
        value = int(text)
        if not lo <= value <= hi:
            raise InvalidConfigError(f"must be in [{lo}, {hi}]")
        return value

    return parse


def _off_or_positive(raw: str) -> int:
    value = _int(-1)(raw)
    if value == 0:
        raise InvalidConfigError("must be -1 (off) or at least 1")
    return value


def _ratio(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise InvalidConfigError("not a number") from None
    if not 0.0 <= value <= 1.0:
        raise InvalidConfigError("must be in [0, 1]")
    return value


def _enum(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        text = raw.strip()
        if text not in allowed:
            raise InvalidConfigError(f"must be one of {', '.join(allowed)}")
        return text

    return parse


def _cleanup_policy(raw: str) -> str:
    parts = [p.strip() for p in raw.split(",")]
    if not parts or any(p not in ("delete", "compact") for p in parts) or len(set(parts)) != len(parts):
        raise InvalidConfigError("must be a list of delete, compact")
    return ",".join(sorted(parts, key=("compact", "delete").index))


_STRATEGY_ALIASES: Final = {
    "topic_name": TOPIC_NAME_STRATEGY,
    "record_name": RECORD_NAME_STRATEGY,
    "topic_record_name": TOPIC_RECORD_NAME_STRATEGY,
}


def _strategy(raw: str) -> str:
    """A subject-name strategy: Confluent's class name, its last part, or Redpanda's name."""
    text = raw.strip()
    for full in _STRATEGIES:
        if text in (full, full.rsplit(".", 1)[1]):
            return full
    found = _STRATEGY_ALIASES.get(text)
    if found is not None:
        return found
    raise InvalidConfigError("must be TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy")


def _partition_spec(raw: str) -> str:
    text = raw.strip()
    if text.startswith("(") and text.endswith(")"):  # Redpanda's spelling: "(hour(ts))"
        text = text[1:-1]
    fields = [f.strip().replace(" ", "") for f in text.split(",")] if text.strip() else []
    if fields == ["none"]:
        return "none"
    unknown = any(f not in ICEBERG_PARTITION_FIELDS for f in fields)
    if not fields or unknown or len(set(fields)) != len(fields):
        raise InvalidConfigError(
            f"must be none or a comma-separated list of distinct {', '.join(ICEBERG_PARTITION_FIELDS)}"
        )
    return ",".join(fields)


# Kafka name -> (LogConfig field, parser/validator of the string form).
_SPEC: Final[dict[str, tuple[str, Callable[[str], object]]]] = {
    "segment.bytes": ("segment_bytes", _int(MIN_SEGMENT_BYTES, INT32_MAX)),
    "segment.ms": ("segment_ms", _int(1)),
    "retention.ms": ("retention_ms", _int(-1)),
    "retention.bytes": ("retention_bytes", _int(-1)),
    "max.message.bytes": ("max_message_bytes", _int(0, INT32_MAX)),
    "index.interval.bytes": ("index_interval_bytes", _int(0, INT32_MAX)),
    "strata.flush.mode": ("flush_mode", _enum(FLUSH_FSYNC, FLUSH_INTERVAL)),
    "flush.messages": ("flush_messages", _int(1)),
    "flush.ms": ("flush_ms", _int(0)),
    "message.timestamp.type": ("message_timestamp_type", _enum(CREATE_TIME, LOG_APPEND_TIME)),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "min.insync.replicas": ("min_insync_replicas", _int(1, INT32_MAX)),
    "local.retention.ms": ("local_retention_ms", _int(-2)),
    "local.retention.bytes": ("local_retention_bytes", _int(-2)),
    "file.delete.delay.ms": ("file_delete_delay_ms", _int(0)),
    "remote.storage.enable": ("remote_storage_enable", _bool),
    "remote.copy.lag.ms": ("remote_copy_lag_ms", _int(0)),
    "remote.copy.max.lag.ms": ("remote_copy_max_lag_ms", _off_or_positive),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int(0)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _int(1)),
    "delete.retention.ms": ("delete_retention_ms", _int(0)),
    "confluent.value.schema.validation": ("value_schema_validation", _bool),
    "confluent.key.schema.validation": ("key_schema_validation", _bool),
    "redpanda.value.schema.id.validation": ("value_schema_validation", _bool),
    "redpanda.key.schema.id.validation": ("key_schema_validation", _bool),
    "confluent.value.subject.name.strategy": ("value_subject_name_strategy", _strategy),
    "confluent.key.subject.name.strategy": ("key_subject_name_strategy", _strategy),
    "redpanda.value.subject.name.strategy": ("value_subject_name_strategy", _strategy),
    "redpanda.key.subject.name.strategy": ("key_subject_name_strategy", _strategy),
    "iceberg.mode": ("iceberg_mode", _enum(ICEBERG_DISABLED, ICEBERG_KEY_VALUE, ICEBERG_SCHEMA_ID_PREFIX)),
    "iceberg.target.lag.ms": ("iceberg_target_lag_ms", _int(1000)),
    "iceberg.partition.spec": ("iceberg_partition_spec", _partition_spec),
    "iceberg.invalid.record.action": ("iceberg_invalid_record_action", _enum("drop", "dlq_table")),
    "iceberg.delete": ("iceberg_delete", _bool),
}

KAFKA_NAMES: Final[tuple[str, ...]] = tuple(_SPEC)
