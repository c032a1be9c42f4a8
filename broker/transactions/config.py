"""Broker-level transaction coordinator settings, under their Kafka names.

As ``broker.groups.config``: in the broker's TOML a table (keys are the Kafka names), in the
environment ``STRATA_`` + the name upper-cased with dots as underscores. Unknown names and
out-of-range values are InvalidConfigError naming the setting. The broker's
``[transactions]`` table, ``BrokerConfig.transactions``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from hot.config import INT32_MAX, MIN_SEGMENT_BYTES
from hot.errors import InvalidConfigError


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """Kafka's defaults, except the partition count of ``__transaction_state``."""

    # InitProducerId with a longer transaction.timeout.ms is INVALID_TRANSACTION_TIMEOUT.
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    # An id with no transaction open and no request this long is expired (a tombstone).
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    abort_timed_out_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    # Kafka's 50 would mean 50 more replicated logs for a handful of producers (the offsets
    # topic makes the same choice); fixed once the topic exists (an id's partition is
    # hash % count).
    state_log_num_partitions: int = 8  # transaction.state.log.num.partitions
    state_log_replication_factor: int = 3  # transaction.state.log.replication.factor
    state_log_min_isr: int = 2  # transaction.state.log.min.isr
    state_log_segment_bytes: int = 104_857_600  # transaction.state.log.segment.bytes
    # KIP-890: partition leaders ask the coordinator whether a transactional write's
    # partition was added to the transaction.
    partition_verification_enable: bool = True  # transaction.partition.verification.enable

    def __post_init__(self) -> None:
        for name, (attr, parse) in _SPEC.items():
            value = getattr(self, attr)
            parse(str(value).lower() if isinstance(value, bool) else str(value), name)

    @classmethod
    def from_kafka(
        cls, values: Mapping[str, object], base: TransactionConfig | None = None
    ) -> TransactionConfig:
        """``base`` (or the defaults) with the Kafka-named ``values`` applied, validated."""
        changes: dict[str, int | bool] = {}
        for name, raw in values.items():
            spec = _SPEC.get(name)
            if spec is None:
                raise InvalidConfigError(f"unknown transaction setting {name!r} (known: {', '.join(_SPEC)})")
            attr, parse = spec
            text = str(raw).lower() if isinstance(raw, bool) else str(raw)
            changes[attr] = parse(text, name)
        return dataclasses.replace(base if base is not None else cls(), **changes)  # type: ignore[arg-type]

    def to_kafka(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, (attr, _) in _SPEC.items():
            value = getattr(self, attr)
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def _int(lo: int, hi: int = INT32_MAX) -> Callable[[str, str], int | bool]:
    def parse(raw: str, name: str) -> int | bool:
        try:
            value = int(raw.strip())
        except ValueError:
            raise InvalidConfigError(f"{name}: expected an integer, got {raw!r}") from None
        if not lo <= value <= hi:
            raise InvalidConfigError(f"{name}: must be in [{lo}, {hi}], got {value}")
        return value

    return parse


def _bool(raw: str, name: str) -> int | bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"{name}: expected true or false, got {raw!r}")
    return text == "true"


_SPEC: Final[dict[str, tuple[str, Callable[[str, str], int | bool]]]] = {
    "transaction.max.timeout.ms": ("max_timeout_ms", _int(1)),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", _int(1)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("abort_timed_out_interval_ms", _int(1)),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("remove_expired_interval_ms", _int(1)),
    "transaction.state.log.num.partitions": ("state_log_num_partitions", _int(1, 1000)),
    "transaction.state.log.replication.factor": ("state_log_replication_factor", _int(1, 32767)),
    "transaction.state.log.min.isr": ("state_log_min_isr", _int(1)),
    "transaction.state.log.segment.bytes": ("state_log_segment_bytes", _int(MIN_SEGMENT_BYTES)),
    "transaction.partition.verification.enable": ("partition_verification_enable", _bool),
}

KAFKA_NAMES: Final[tuple[str, ...]] = tuple(_SPEC)
ENV_NAMES: Final[dict[str, str]] = {"STRATA_" + n.upper().replace(".", "_"): n for n in _SPEC}
