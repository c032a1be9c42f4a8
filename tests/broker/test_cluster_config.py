"""Cluster mode in the broker's configuration: ``--etcd`` (or ``[cluster]`` / ``STRATA_ETCD``)
turns it on, the broker id is fixed when given and assigned through etcd otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import load_config
from hot.errors import InvalidConfigError


def test_single_node_without_etcd() -> None:
    assert load_config(env={}).cluster is None


def test_cluster_from_flags_env_and_toml(tmp_path: Path) -> None:
    cfg = load_config(
        env={}, overrides={"cluster": {"etcd": "127.0.0.1:2379", "inter.broker.listener": None}}
    )
    assert cfg.cluster is not None and cfg.cluster.etcd == "127.0.0.1:2379"
    assert cfg.cluster.broker_id is None  # assigned through etcd
    cfg = load_config(
        env={"STRATA_ETCD": "e1:2379,e2:2379", "STRATA_REPLICA_LAG_TIME_MAX_MS": "5000"},
        overrides={"broker_id": 7},
    )
    assert cfg.cluster is not None
    assert (cfg.cluster.etcd, cfg.cluster.replica_lag_time_max_ms, cfg.cluster.broker_id) == (
        "e1:2379,e2:2379",
        5000,
        7,
    )
    assert cfg.broker_id == 7
    toml = tmp_path / "strata.toml"
    toml.write_text('[cluster]\netcd = "h:2379"\n"replica.fetch.wait.max.ms" = 100\n')
    cfg = load_config(config_file=toml, env={})
    assert cfg.cluster is not None and cfg.cluster.replica_fetch_wait_max_ms == 100


def test_cluster_settings_without_etcd_are_refused() -> None:
    with pytest.raises(InvalidConfigError, match="without 'etcd'"):
        load_config(env={"STRATA_REPLICA_LAG_TIME_MAX_MS": "5000"})


def test_a_worker_on_a_store_socket(tmp_path: Path) -> None:
    """A multi-process node's worker: the supervisor's store socket instead of etcd."""
    sock = tmp_path / "meta" / "store.sock"
    cfg = load_config(env={}, overrides={"cluster": {"metadata.store.socket": str(sock)}, "broker_id": 2})
    assert cfg.cluster is not None and cfg.cluster.store_socket == sock and cfg.cluster.etcd is None
    assert cfg.cluster.broker_id == 2 and not cfg.cluster.embedded
    env = {"STRATA_METADATA_STORE_SOCKET": str(sock), "STRATA_BROKER_SESSION_TIMEOUT_MS": "3000"}
    cfg = load_config(env=env)
    assert cfg.cluster is not None and cfg.cluster.store_socket == sock and cfg.cluster.lease_ttl_s == 3
    with pytest.raises(InvalidConfigError, match="exclude each other"):
        both = {"etcd": "127.0.0.1:2379", "metadata.store.socket": str(sock)}
        load_config(env={}, overrides={"cluster": both})
    assert load_config(env={}).cluster is None  # a single node: still its own embedded store
