"""Typed broker configuration: defaults, TOML file, STRATA_* env and flags, in that precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig, load_config
from hot.errors import InvalidConfigError
from kwire.address import HostPort


def test_defaults_are_the_documented_embedded_ones() -> None:
    cfg = load_config(env={})
    assert cfg.data_dir == Path("./strata-data")
    assert cfg.kafka_listen == HostPort("127.0.0.1", 9092)
    assert cfg.http_listen == HostPort("127.0.0.1", 8080)
    assert cfg.advertised == cfg.kafka_listen
    assert cfg.auto_create_topics is False
    assert cfg.object_store_url == f"file://{Path('./strata-data/objects').resolve()}"
    assert cfg.log.flush_mode == "fsync"


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    f = tmp_path / "strata.toml"
    f.write_text(
        'data_dir = "/srv/a"\nkafka_listen = "0.0.0.0:9093"\nauto_create_topics = true\n'
        '[log]\n"segment.bytes" = 1048576\n"retention.ms" = 1000\n'
    )
    cfg = load_config(config_file=f, env={})
    assert cfg.data_dir == Path("/srv/a") and cfg.kafka_listen.port == 9093 and cfg.auto_create_topics
    assert cfg.log.segment_bytes == 1048576 and cfg.log.retention_ms == 1000

    env = {"STRATA_KAFKA_LISTEN": "127.0.0.2:9094", "STRATA_LOG_SEGMENT_BYTES": "2097152"}
    cfg = load_config(config_file=f, env=env)
    assert cfg.kafka_listen == HostPort("127.0.0.2", 9094)
    assert cfg.log.segment_bytes == 2097152 and cfg.log.retention_ms == 1000

    cfg = load_config(config_file=f, env=env, overrides={"kafka_listen": "127.0.0.3:1", "data_dir": None})
    assert cfg.kafka_listen == HostPort("127.0.0.3", 1)
    assert cfg.data_dir == Path("/srv/a")  # None flag = not given

    cfg = load_config(env={"STRATA_CONFIG": str(f)})
    assert cfg.data_dir == Path("/srv/a")


def test_advertised_listener_and_object_store() -> None:
    cfg = load_config(
        env={}, overrides={"advertised_listener": "broker1.example:19092", "object_store": "s3://b/p"}
    )
    assert cfg.advertised == HostPort("broker1.example", 19092)
    assert cfg.object_store_url == "s3://b/p"
    assert isinstance(cfg, BrokerConfig)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"overrides": {"kafka_listen": "nohost"}}, "HOST:PORT"),
        ({"overrides": {"kafka_listen": "h:99999"}}, "out of range"),
        ({"overrides": {"kafka_listen": "h:abc"}}, "not a number"),
        ({"overrides": {"num_partitions": "0"}}, "at least 1"),
        ({"overrides": {"auto_create_topics": "maybe"}}, "boolean"),
        ({"overrides": {"bogus": 1}}, "unknown setting"),
        ({"env": {"STRATA_LOG_SEGMENT_BYTES": "lots"}}, "segment.bytes"),
        ({"env": {"STRATA_LOG_STRATA_FLUSH_MODE": "sometimes"}}, "strata.flush.mode"),
    ],
)
def test_bad_settings_are_clear_errors(kwargs: dict[str, object], message: str) -> None:
    kwargs.setdefault("env", {})
    with pytest.raises(InvalidConfigError, match=message):
        load_config(**kwargs)  # type: ignore[arg-type]


def test_bad_config_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("data_dir = [unclosed")
    with pytest.raises(InvalidConfigError, match="not valid TOML"):
        load_config(config_file=bad, env={})
    with pytest.raises(InvalidConfigError, match="cannot read config file"):
        load_config(config_file=tmp_path / "missing.toml", env={})
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("colour = 'blue'\n")
    with pytest.raises(InvalidConfigError, match="unknown setting 'colour'"):
        load_config(config_file=unknown, env={})


def test_log_cleaner_settings_file_env_flags(tmp_path: Path) -> None:
    """log.cleaner.* (Kafka's broker names) in [cleaner], STRATA_LOG_CLEANER_*, --log-cleaner."""
    from hot.cleaner import CleanerConfig

    assert load_config(env={}).cleaner == CleanerConfig()
    f = tmp_path / "strata.toml"
    f.write_text(
        '[cleaner]\n"log.cleaner.backoff.ms" = 500\n"log.cleaner.dedupe.buffer.size" = 1048576\n'
        '"log.cleaner.io.max.bytes.per.second" = 1e6\n"log.cleaner.enable" = true\n'
    )
    cfg = load_config(config_file=f, env={"STRATA_LOG_CLEANER_BACKOFF_MS": "250"})
    assert cfg.cleaner == CleanerConfig(
        enable=True, backoff_ms=250, dedupe_buffer_size=1048576, io_max_bytes_per_second=1e6
    )
    off = load_config(config_file=f, env={}, overrides={"cleaner": {"log.cleaner.enable": False}})
    assert not off.cleaner.enable
    assert not load_config(env={"STRATA_LOG_CLEANER_THREADS": "0"}).cleaner.enable
    for env, message in (
        ({"STRATA_LOG_CLEANER_BACKOFF_MS": "-1"}, "backoff"),
        ({"STRATA_LOG_CLEANER_ENABLE": "maybe"}, "log.cleaner.enable"),
        ({"STRATA_LOG_CLEANER_THREADS": "4"}, "log.cleaner.threads"),
        ({"STRATA_LOG_CLEANER_DEDUPE_BUFFER_SIZE": "10"}, "dedupe"),
    ):
        with pytest.raises(InvalidConfigError, match=message):
            load_config(env=env)
    bad = tmp_path / "bad.toml"
    bad.write_text('[cleaner]\n"log.cleaner.nope" = 1\n')
    with pytest.raises(InvalidConfigError, match="unknown cleaner setting"):
        load_config(config_file=bad, env={})


def test_http_allowed_origins(tmp_path: Path) -> None:
    cfg = load_config(env={"STRATA_HTTP_ALLOWED_ORIGINS": "https://console.example, http://10.0.0.5:8080/"})
    assert cfg.http_allowed_origins == ("https://console.example", "http://10.0.0.5:8080")
    path = tmp_path / "strata.toml"
    path.write_text('http_allowed_origins = ["https://a.example"]\n')
    assert load_config(config_file=path, env={}).http_allowed_origins == ("https://a.example",)
    assert load_config(env={}).http_allowed_origins == ()
    for bad in ("console.example", "ftp://x", "https://x/path"):
        with pytest.raises(InvalidConfigError, match="http_allowed_origins"):
            load_config(env={"STRATA_HTTP_ALLOWED_ORIGINS": bad})
