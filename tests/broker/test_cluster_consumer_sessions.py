"""A consumer's fetch session on a leader of a real 2-broker cluster: when a partition's
leadership moves away (a reassignment off this broker: a role change), the session's
next incremental fetch answers that partition's error, though nothing appended to it
and the request does not name it (broker.consumer_marks: a role change marks it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from tests.broker.clusterlib import Cluster, started_cluster, wait_until

kafka_admin = pytest.importorskip("kafka.admin")

PARTS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # A walk of the whole session every replica.lag.time.max.ms would find the move too:
    # long enough here that only the mark can.
    env = {"STRATA_REPLICA_LAG_TIME_MAX_MS": "120000"}
    with started_cluster(tmp_path_factory.mktemp("cluster-consumer-sessions"), n=2, env=env) as c:
        yield c


def _walks(cluster: Cluster) -> float:
    import httpx

    text = httpx.get(f"{cluster.nodes[1].http_url}/metrics", timeout=10).text
    return next(
        float(x.split()[-1]) for x in text.splitlines() if x.startswith("strata_fetch_session_walks_total ")
    )


def _answered(resp: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


def test_a_leadership_moved_away_reaches_the_session(cluster: Cluster) -> None:
    from kafka import TopicPartition

    topic = f"csess-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, PARTS, min_isr=1, assignment=[[1, 2]] * PARTS)
    parts = tuple(
        FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 16) for p in range(PARTS)
    )

    def fetch(c: KafkaClient, sid: int, epoch: int, topics: tuple[FetchTopic, ...] = ()) -> Any:
        req = FetchRequest(max_wait_ms=0, min_bytes=1, session_id=sid, session_epoch=epoch, topics=topics)
        return c._call(ApiKey.FETCH, 12, req)

    with KafkaClient.connect(HostPort("127.0.0.1", cluster.nodes[1].kafka_port), timeout=30) as c:
        full = fetch(c, 0, 0, (FetchTopic(topic=topic, partitions=parts),))
        sid = full.session_id
        assert sid != 0 and {p.error_code for p in _answered(full).values()} == {E.NONE}
        epoch = 1
        assert _answered(fetch(c, sid, epoch)) == {}

        walks = _walks(cluster)
        admin = kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
        try:
            assert admin.alter_partition_reassignments({TopicPartition(topic, 5): [2]}) == {
                TopicPartition(topic, 5): None
            }
        finally:
            admin.close()
        wait_until(lambda: cluster.leader(topic, 5) == 2, "broker 2 leads partition 5")
        seen: dict[int, Any] = {}

        def moved() -> bool:
            nonlocal epoch
            epoch += 1
            seen.update(_answered(fetch(c, sid, epoch)))
            return 5 in seen

        wait_until(moved, "the session hears that partition 5 moved")
        assert list(seen) == [5], seen  # only the partition that moved
        assert seen[5].error_code in (E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH)
        assert _walks(cluster) == walks  # found by its mark, not by a walk of the session
