"""Group settings: Kafka names in TOML ``[groups]``, STRATA_* environment and flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import load_config
from broker.groups.config import KAFKA_NAMES, GroupConfig
from hot.errors import InvalidConfigError


def test_defaults_are_kafkas() -> None:
    g = load_config(env={}).groups
    assert (g.initial_rebalance_delay_ms, g.min_session_timeout_ms, g.max_session_timeout_ms) == (
        3000,
        6000,
        1800000,
    )
    assert (g.max_size, g.offsets_retention_minutes, g.offset_metadata_max_bytes) == (2**31 - 1, 10080, 4096)
    assert g.offsets_retention_ms == 10080 * 60_000
    assert set(g.to_kafka()) == set(KAFKA_NAMES)


def test_toml_env_and_flags_in_that_precedence(tmp_path: Path) -> None:
    f = tmp_path / "strata.toml"
    f.write_text('[groups]\n"group.initial.rebalance.delay.ms" = 10\n"group.max.size" = 7\n')
    assert load_config(config_file=f, env={}).groups.initial_rebalance_delay_ms == 10
    env = {"STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "20", "STRATA_OFFSETS_RETENTION_MINUTES": "5"}
    g = load_config(config_file=f, env=env).groups
    assert (g.initial_rebalance_delay_ms, g.max_size, g.offsets_retention_minutes) == (20, 7, 5)
    g = load_config(
        config_file=f, env=env, overrides={"groups": {"group.initial.rebalance.delay.ms": "30"}}
    ).groups
    assert g.initial_rebalance_delay_ms == 30 and g.max_size == 7


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env": {"STRATA_GROUP_MAX_SIZE": "0"}}, r"group.max.size: must be in \[1"),
        (
            {"env": {"STRATA_OFFSET_METADATA_MAX_BYTES": "lots"}},
            "offset.metadata.max.bytes: expected an integer",
        ),
        ({"overrides": {"groups": {"group.bogus": "1"}}}, "unknown group setting 'group.bogus'"),
        (
            {
                "env": {
                    "STRATA_GROUP_MIN_SESSION_TIMEOUT_MS": "9000",
                    "STRATA_GROUP_MAX_SESSION_TIMEOUT_MS": "8000",
                }
            },
            "exceeds",
        ),
    ],
)
def test_bad_group_settings_are_clear_errors(kwargs: dict[str, object], message: str) -> None:
    kwargs.setdefault("env", {})
    with pytest.raises(InvalidConfigError, match=message):
        load_config(**kwargs)  # type: ignore[arg-type]


def test_bad_table_and_values(tmp_path: Path) -> None:
    f = tmp_path / "strata.toml"
    f.write_text('groups = "nope"\n')
    with pytest.raises(InvalidConfigError, match=r"\[groups\] must be a table"):
        load_config(config_file=f, env={})
    with pytest.raises(InvalidConfigError, match="expected an integer"):
        GroupConfig.from_kafka({"group.max.size": True})
    with pytest.raises(InvalidConfigError, match="expected an integer"):
        GroupConfig(max_size="3")  # type: ignore[arg-type]


def test_consumer_instance_timeout_is_a_group_setting(tmp_path: Path) -> None:
    # Kafka REST Proxy's name and default (5 minutes).
    assert load_config(env={}).groups.consumer_instance_timeout_ms == 300_000
    f = tmp_path / "strata.toml"
    f.write_text('[groups]\n"consumer.instance.timeout.ms" = 2000\n')
    assert load_config(config_file=f, env={}).groups.consumer_instance_timeout_ms == 2000
    env = {"STRATA_CONSUMER_INSTANCE_TIMEOUT_MS": "1500"}
    assert load_config(config_file=f, env=env).groups.consumer_instance_timeout_ms == 1500
    with pytest.raises(InvalidConfigError, match=r"consumer.instance.timeout.ms: must be in \[1"):
        load_config(env={"STRATA_CONSUMER_INSTANCE_TIMEOUT_MS": "0"})


def test_consumer_migration_policy() -> None:
    assert GroupConfig().consumer_migration_policy == "bidirectional"  # Kafka 4's default
    g = load_config(env={"STRATA_GROUP_CONSUMER_MIGRATION_POLICY": "DISABLED"}).groups
    assert g.consumer_migration_policy == "disabled" and not g.upgrade_enabled
    assert g.to_kafka()["group.consumer.migration.policy"] == "disabled"
    with pytest.raises(InvalidConfigError, match=r"group\.consumer\.migration\.policy: must be one of"):
        GroupConfig.from_kafka({"group.consumer.migration.policy": "sideways"})
