"""Group list and lag over REST, and the group metrics, against a real broker process with
real confluent-kafka group members committing real offsets."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.api.groups.helpers import MEMBER_CONFIG, produce, rest, wait_for
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)


def group_metrics(text: str, group: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The strata_group_* samples of ``group``: (name, other labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("strata_group_") and s.labels.get("group") == group:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "group"))
                out[(s.name, labels)] = s.value
    return out


def consumer(bootstrap: str, group: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **MEMBER_CONFIG,
        }
    )


def test_group_list_lag_and_metrics(gbroker: BrokerProcess) -> None:
    topic, group = "lag-t", "lag-g"
    create_topic(gbroker.bootstrap, topic, 2)
    produce(gbroker.bootstrap, topic, [(None, b"v%d" % i, i % 2) for i in range(20)])
    c1, c2 = consumer(gbroker.bootstrap, group), consumer(gbroker.bootstrap, group)
    http = rest(gbroker.http_url)
    try:
        c1.subscribe([topic])
        c2.subscribe([topic])

        def both_assigned() -> bool:
            c1.poll(0.05)
            c2.poll(0.05)
            return len(c1.assignment()) == 1 and len(c2.assignment()) == 1

        wait_for("both members to own a partition", both_assigned)
        owners = {c.assignment()[0].partition: c for c in (c1, c2)}
        # Each member commits an exact offset of its own partition.
        owners[0].commit(offsets=[CkTopicPartition(topic, 0, 7)], asynchronous=False)
        owners[1].commit(offsets=[CkTopicPartition(topic, 1, 3)], asynchronous=False)

        listed = {g["group_id"]: g for g in http.get("/v1/groups").json()["groups"]}
        g = listed[group]
        summary = (g["state"], g["protocol_type"], g["protocol"], g["members"])
        assert summary == ("Stable", "consumer", "range", 2)
        assert g["generation_id"] >= 1

        r = http.get(f"/v1/groups/{group}/lag")
        assert r.status_code == 200, r.text
        lag = r.json()
        assert (lag["group_id"], lag["state"], lag["total_lag"]) == (group, "Stable", 10)
        assert sorted(m["member_id"] for m in lag["members"]) == sorted(c.memberid() for c in (c1, c2))
        assert all(m["partitions"] == 1 and m["host"] == "/127.0.0.1" for m in lag["members"])
        rows = {p["partition"]: p for p in lag["partitions"]}
        assert set(rows) == {0, 1}
        for p, (committed, end) in {0: (7, 10), 1: (3, 10)}.items():
            row = rows[p]
            assert row["topic"] == topic
            got = (row["committed_offset"], row["log_end_offset"], row["lag"])
            assert got == (committed, end, end - committed)
            assert row["member_id"] == owners[p].memberid()
            assert row["client_id"] == "rdkafka"
            assert row["host"] == "/127.0.0.1"

        m = group_metrics(http.get("/metrics").text, group)
        assert m[("strata_group_lag_offsets", (("partition", "0"), ("topic", topic)))] == 3
        assert m[("strata_group_lag_offsets", (("partition", "1"), ("topic", topic)))] == 7
        assert m[("strata_group_committed_offset", (("partition", "0"), ("topic", topic)))] == 7
        assert m[("strata_group_total_lag_offsets", ())] == 10
        assert m[("strata_group_members", ())] == 2
        assert m[("strata_group_state", (("state", "Stable"),))] == 1

        # New records raise the lag, at the next scrape.
        produce(gbroker.bootstrap, topic, [(None, b"more", 0)] * 5)
        rows = {p["partition"]: p for p in http.get(f"/v1/groups/{group}/lag").json()["partitions"]}
        assert (rows[0]["lag"], rows[1]["lag"]) == (8, 7)
        m = group_metrics(http.get("/metrics").text, group)
        assert m[("strata_group_lag_offsets", (("partition", "0"), ("topic", topic)))] == 8
    finally:
        c1.close()
        c2.close()

    # Members gone: the group is Empty, its committed offsets and lag remain.
    wait_for("an empty group", lambda: http.get(f"/v1/groups/{group}/lag").json()["state"] == "Empty")
    lag = http.get(f"/v1/groups/{group}/lag").json()
    assert lag["members"] == []
    assert [(p["partition"], p["committed_offset"], p["lag"], p["member_id"]) for p in lag["partitions"]] == [
        (0, 7, 8, None),
        (1, 3, 7, None),
    ]
    m = group_metrics(http.get("/metrics").text, group)
    assert m[("strata_group_members", ())] == 0
    assert m[("strata_group_state", (("state", "Empty"),))] == 1
    assert ("strata_group_state", (("state", "Stable"),)) not in m


def test_unknown_group_is_404(gbroker: BrokerProcess) -> None:
    r = rest(gbroker.http_url).get("/v1/groups/no-such-group/lag")
    assert r.status_code == 404
    assert r.json() == {"error_code": 40400, "message": "group 'no-such-group' does not exist"}


def test_offsets_only_group_lag(gbroker: BrokerProcess) -> None:
    """A group that only commits (assign(), no subscription) has lag but no members."""
    topic, group = "lag-simple", "lag-simple-g"
    create_topic(gbroker.bootstrap, topic, 1)
    produce(gbroker.bootstrap, topic, [(None, b"x", 0)] * 4)
    c = consumer(gbroker.bootstrap, group)
    try:
        c.commit(offsets=[CkTopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()
    http = rest(gbroker.http_url)
    lag = http.get(f"/v1/groups/{group}/lag").json()
    assert (lag["state"], lag["protocol_type"], lag["members"], lag["total_lag"]) == ("Empty", "", [], 3)
    assert [(p["committed_offset"], p["log_end_offset"], p["lag"]) for p in lag["partitions"]] == [(1, 4, 3)]
    listed = {g["group_id"]: g for g in http.get("/v1/groups").json()["groups"]}
    assert (listed[group]["state"], listed[group]["members"]) == ("Empty", 0)
