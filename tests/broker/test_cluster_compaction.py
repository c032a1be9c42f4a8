"""Log compaction of a replicated topic: real etcd, three real brokers, confluent-kafka.

A compacted topic (RF 3, min.insync.replicas 2, 1 KiB segments) is written with repeated
keys while one follower is down. The leader's cleaner compacts its log (offset gaps);
the follower, restarted, catches up from the cleaned leader and copies the gaps; every
replica's own cleaner runs (leader and followers alike). Then the leader is killed with
SIGKILL: a new leader serves, and a consumer from offset 0 finds every acknowledged
record's latest value per key at its original offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hot.records import decode_batches
from tests.broker.clusterlib import Cluster, started_cluster, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(300)

TOPIC = "compacted"
KEYS = 16
ROUNDS = 16
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "3600000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-compaction")
    with started_cluster(root, env={"STRATA_LOG_CLEANER_BACKOFF_MS": "200"}) as c:
        yield c


def _replica_dir(cluster: Cluster, broker: int) -> Path:
    return cluster.nodes[broker].data_dir / "logs" / f"{TOPIC}-0"


def _cleaned_to(cluster: Cluster, broker: int) -> int:
    try:
        return int((_replica_dir(cluster, broker) / "cleaner-offset-checkpoint").read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _replica_offsets(cluster: Cluster, broker: int, upto: int) -> list[int]:
    for _ in range(50):
        try:
            data = cluster.log_bytes(broker, TOPIC, 0, upto)
        except FileNotFoundError:  # the replica's cleaner swapped segments meanwhile
            time.sleep(0.05)
            continue
        return [r.offset for b in decode_batches(data) for r in b.records if r.offset < upto]
    raise AssertionError(f"broker {broker}'s segment files kept changing")


def _produce(bootstrap: str, written: dict[int, tuple[bytes, bytes]], rounds: range) -> None:
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0}
    )
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            written[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    for r in rounds:
        for k in range(KEYS):
            p.produce(
                TOPIC, key=b"key-%d" % k, value=b"value-%d-%d-" % (k, r) + b"y" * 40, on_delivery=report
            )
        p.flush(30)
    assert p.flush(30) == 0 and not errors, errors


def _consume(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out: list[tuple[int, bytes, bytes]] = []
    try:
        c.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return out
                continue  # leader moving: librdkafka retries
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError("no end of partition within 60 s")
    finally:
        c.close()


def test_replicated_compaction_follower_catch_up_and_leader_kill(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, rf=3, min_isr=2, configs=CONFIGS)
    s = cluster.state(TOPIC, 0)
    leader = s.leader
    lagging = next(b for b in s.isr if b != leader)
    cluster.nodes[lagging].kill()
    written: dict[int, tuple[bytes, bytes]] = {}
    _produce(cluster.bootstrap, written, range(ROUNDS))
    end = max(written) + 1

    # The leader cleans its log: below its cleaner checkpoint offsets now skip.
    wait_until(lambda: _cleaned_to(cluster, leader) > end // 2, "the leader's cleaner", timeout=60)
    leader_offsets = _replica_offsets(cluster, leader, end)
    assert len(leader_offsets) < end

    # The lagging follower catches up from the cleaned leader, gaps and all.
    cluster.nodes[lagging].start()
    cluster.wait_fully_replicated(TOPIC)
    wait_until(lambda: _replica_offsets(cluster, lagging, end)[-1:] == [end - 1], "the follower caught up")
    follower_offsets = _replica_offsets(cluster, lagging, end)
    assert len(follower_offsets) < end, "the follower did not copy any gap"
    assert follower_offsets == sorted(set(follower_offsets))
    # Every replica's own cleaner runs, followers included.
    for b in cluster.nodes:
        wait_until(lambda b=b: _cleaned_to(cluster, b) > 0, f"broker {b}'s cleaner", timeout=60)  # type: ignore[misc]

    # More acknowledged writes, then the leader dies by SIGKILL.
    _produce(cluster.bootstrap, written, range(ROUNDS, ROUNDS + 2))
    s = cluster.state(TOPIC, 0)
    cluster.nodes[s.leader].kill()
    new = cluster.wait_new_leader(TOPIC, 0, s.leader, s.leader_epoch)
    assert new != s.leader

    latest: dict[bytes, int] = {}
    for o in sorted(written):
        latest[written[o][0]] = o
    records = _consume(cluster.bootstrap)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets))
    for o, k, v in records:
        assert written[o] == (k, v), f"offset {o}"
    assert set(latest.values()) <= set(offsets), "an acknowledged latest value is gone"
    assert {k: v for _, k, v in records} == {k: written[o][1] for k, o in latest.items()}
    cluster.nodes[s.leader].start()
