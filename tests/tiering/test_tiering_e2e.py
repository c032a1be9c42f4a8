"""A broker subprocess with ``--object-store s3://...`` (moto on loopback) tiers a topic
produced by a real client: segments are uploaded and local retention removes them; the
``[tiering]`` configuration reaches the broker from TOML and ``STRATA_TIERING_*``."""

from __future__ import annotations

import itertools
import json
import os
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.config import load_config
from hot.errors import InvalidConfigError
from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tiering.config import TieringConfig
from tiering.keys import manifest_key, topic_manifest_key

TOPIC = "tiered"
PREFIX = "p"
SEGMENT = 65536
LOCAL_RETENTION = 4 * SEGMENT


def _produce(bootstrap: str, total: int, size: int = 4000) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384})
    errors: list[object] = []

    def done(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)

    n = total // size
    for i in range(n):
        p.produce(TOPIC, os.urandom(size // 2).hex().encode(), b"k%d" % i, partition=0, on_delivery=done)
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    return n


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # local retention removed it meanwhile
        return 0


def _wait(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll a condition reached by the broker's background work (bounded; not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_broker_tiers_to_s3_and_deletes_uploaded_local_segments(
    broker_factory: Callable[..., BrokerProcess], s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    env = {
        **s3_endpoint.env,
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
        "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "500",
    }
    b = broker_factory("--object-store", f"s3://{s3_bucket}/{PREFIX}", env=env)
    create_topic(
        b.bootstrap, TOPIC, 1, {"segment.bytes": str(SEGMENT), "local.retention.bytes": str(LOCAL_RETENTION)}
    )
    n = _produce(b.bootstrap, 5 * 1024 * 1024)
    s3 = s3_endpoint.client()

    def get_json(key: str) -> dict[str, object] | None:
        try:
            body = s3.get_object(Bucket=s3_bucket, Key=f"{PREFIX}/{key}")["Body"].read()  # type: ignore[attr-defined]
        except Exception:
            return None
        doc = json.loads(body)
        assert isinstance(doc, dict)
        return doc

    _wait(lambda: get_json(topic_manifest_key(TOPIC)) is not None, "the topic manifest")
    topic_doc = get_json(topic_manifest_key(TOPIC))
    assert topic_doc is not None and topic_doc["partitions"] == 1
    mkey = manifest_key(TOPIC, uuid.UUID(str(topic_doc["topic_id"])), 0)
    log_dir = b.data_dir / "logs" / f"{TOPIC}-0"

    def local_logs() -> list[Path]:
        return sorted(log_dir.glob("*.log"))

    def settled() -> bool:
        man = get_json(mkey)
        if man is None:
            return False
        segs = man["segments"]
        assert isinstance(segs, list)
        copied = [s for s in segs if s["state"] == "COPIED"]
        uploaded = sum(int(s["size"]) for s in copied)
        local = sum(_size(p) for p in local_logs())
        return uploaded >= 4 * 1024 * 1024 and local <= LOCAL_RETENTION + 2 * SEGMENT

    _wait(settled, "uploads and local deletion")
    man = get_json(mkey)
    assert man is not None
    segs = man["segments"]
    assert isinstance(segs, list)
    # Contiguous from offset 0, each exactly once.
    assert segs[0]["base_offset"] == 0
    for a, c in itertools.pairwise(segs):
        assert c["base_offset"] == a["last_offset"] + 1
    first_local = int(local_logs()[0].stem)
    assert 0 < first_local <= segs[-1]["last_offset"] + 1  # local start is inside the uploaded range
    assert segs[-1]["last_offset"] < n
    with urllib.request.urlopen(f"{b.http_url}/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    assert "strata_tiering_uploaded_segments_total" in metrics
    assert "strata_tiering_upload_lag_bytes" in metrics
    assert b.stop() == 0
    assert "Traceback" not in b.output(), b.output()[-3000:]


def test_tiering_config_from_toml_and_env(tmp_path: Path) -> None:
    toml = tmp_path / "strata.toml"
    toml.write_text(
        "[tiering]\nupload_bytes_per_second = 1048576\ndisk_high_water_percent = 90\n"
        'cache_dir = "/var/cache/strata"\n'
    )
    cfg = load_config(config_file=toml, env={"STRATA_TIERING_UPLOAD_CONCURRENCY": "4"})
    assert cfg.tiering == TieringConfig(
        upload_bytes_per_second=1048576,
        disk_high_water_percent=90.0,
        cache_dir=Path("/var/cache/strata"),
        upload_concurrency=4,
    )
    assert load_config(env={}).tiering == TieringConfig()
    assert TieringConfig().cache_path(Path("/d")) == Path("/d/cache")
    with pytest.raises(InvalidConfigError, match="unknown tiering setting"):
        load_config(env={}, overrides={"tiering": {"nope": 1}})
    with pytest.raises(InvalidConfigError, match="upload_concurrency"):
        load_config(env={"STRATA_TIERING_UPLOAD_CONCURRENCY": "0"})
    with pytest.raises(InvalidConfigError, match="disk_high_water_percent"):
        load_config(env={"STRATA_TIERING_DISK_HIGH_WATER_PERCENT": "120"})
