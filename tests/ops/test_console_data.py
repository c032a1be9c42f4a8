"""The console's data endpoints over ASGI on an in-process broker (no listener): each page's
one endpoint answers with the broker's real figures, the SPA's URLs serve the app, the
message browser reads what the produce form wrote (by offset, newest first, by filter), and a
reset moves an empty group's committed offsets."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from api.rest import create_app
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.groups.types import OffsetCommitRequest, TopicPartition
from tests.inprocess import broker_of_one, create_topic

TOPIC = "console-orders"
GROUP = "console-billing"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with broker_of_one(BrokerConfig(data_dir=tmp_path / "data")) as b:
        await create_topic(b, TOPIC, 2, {"retention.ms": "3600000"})
        yield b


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(broker))
    async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as c:
        yield c


async def _produce(client: httpx.AsyncClient, partition: int, key: str, value: str) -> int:
    r = await client.post(
        f"/console/api/topics/{TOPIC}/messages",
        json={"partition": partition, "key": key, "value": value, "headers": [{"key": "h", "value": "v"}]},
    )
    assert r.status_code == 200, r.text
    assert r.json()["partition"] == partition
    offset: int = r.json()["offset"]
    return offset


async def test_pages_are_served_by_the_app_and_files_by_a_fixed_table(client: httpx.AsyncClient) -> None:
    for path in (
        "/dashboard",
        "/dashboard/",
        "/dashboard/topics",
        f"/dashboard/topics/{TOPIC}",
        "/dashboard/groups/a/b",
        "/dashboard/brokers/1",
        "/dashboard/tiering",
        "/dashboard/security",
    ):
        r = await client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), path
        assert '<script type="module" src="/dashboard/assets/app.js">' in r.text
    r = await client.get("/dashboard/assets/app.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    for path in (
        "/dashboard/..%2Fapp.py",
        "/dashboard/nope",
        "/dashboard/assets/routes.py",
        "/dashboard/tiering/x",
    ):
        r = await client.get(path)
        assert r.status_code == 404 and r.json()["error_code"] == 40400, path


async def test_every_view_answers_from_one_endpoint(client: httpx.AsyncClient, broker: Broker) -> None:
    await _produce(client, 0, "k", "v")
    overview = (await client.get("/console/api/overview")).json()
    assert [b["id"] for b in overview["brokers"]] == [broker.node_id]
    assert overview["brokers"][0]["up"] and overview["brokers"][0]["self"]
    assert overview["partitions"]["total"] >= 2 and overview["partitions"]["offline"] == 0
    assert overview["metadata"] == {"kind": "embedded", "healthy": True}
    assert isinstance(overview["history"], list)
    topics = {t["topic"]: t for t in (await client.get("/console/api/topics")).json()["topics"]}
    assert topics[TOPIC]["partitions"] == 2 and topics[TOPIC]["messages"] == 1
    assert topics[TOPIC]["overrides"] == {"retention.ms": "3600000"}
    topic = (await client.get(f"/console/api/topics/{TOPIC}")).json()
    assert [p["high_watermark"] for p in topic["partitions"]] == [1, 0]
    assert all(p["leader"] == broker.node_id and p["isr"] == [broker.node_id] for p in topic["partitions"])
    sources = {c["name"]: c["source"] for c in topic["configs"]}
    assert sources["retention.ms"] == "topic" and sources["segment.bytes"] == "default"
    assert topic["may_read"] and topic["may_write"]
    brokers = (await client.get("/console/api/brokers")).json()["brokers"]
    assert brokers[0]["leaders"] >= 2 and brokers[0]["disk"]["free_bytes"] > 0
    one = (await client.get(f"/console/api/brokers/{broker.node_id}")).json()
    assert {(p["topic"], p["partition"]) for p in one["partitions"]} >= {(TOPIC, 0), (TOPIC, 1)}
    assert (await client.get("/console/api/brokers/99")).status_code == 404
    tiering = (await client.get("/console/api/tiering")).json()
    assert tiering["tiering"] is False and TOPIC in {t["topic"] for t in tiering["topics"]}
    security = (await client.get("/console/api/security")).json()
    assert security["authorization"] is False and security["acls"] == []
    assert (await client.get("/console/api/topics/no-such")).status_code == 404


async def test_browse_what_the_form_produced(client: httpx.AsyncClient) -> None:
    offsets = [await _produce(client, 1, f"key-{i}", f'{{"n": {i}, "name": "rec-{i}"}}') for i in range(30)]
    assert offsets == list(range(30))
    base = f"/console/api/topics/{TOPIC}/messages"

    def values(doc: dict[str, object]) -> list[str]:
        return [base64.b64decode(r["value"]).decode() for r in doc["records"]]  # type: ignore[attr-defined]

    doc = (await client.get(base, params={"partition": 1, "mode": "offset", "offset": 7, "limit": 2})).json()
    assert [r["offset"] for r in doc["records"]] == [7, 8]
    assert doc["records"][0]["headers"] == [{"key": "h", "value": base64.b64encode(b"v").decode()}]
    assert base64.b64decode(doc["records"][0]["key"]) == b"key-7"
    doc = (await client.get(base, params={"mode": "newest", "limit": 3})).json()
    assert [r["offset"] for r in doc["records"]] == [29, 28, 27]
    doc = (await client.get(base, params={"mode": "newest", "filter": "rec-3", "limit": 50})).json()
    assert values(doc) == ['{"n": 3, "name": "rec-3"}']  # newest first: only one matches "rec-3"
    doc = (
        await client.get(base, params={"mode": "timestamp", "timestamp": 0, "partition": 1, "limit": 1})
    ).json()
    assert [r["offset"] for r in doc["records"]] == [0]
    r = await client.get(base, params={"mode": "sideways"})
    assert r.status_code == 422
    r = await client.get(base, params={"partition": 5})
    assert r.status_code == 404


async def test_groups_and_reset_of_an_empty_group(client: httpx.AsyncClient, broker: Broker) -> None:
    for i in range(10):
        await _produce(client, 0, "k", f"v{i}")
    assert broker.groups is not None
    tp = TopicPartition(TOPIC, 0)
    await broker.prepare_group(GROUP)
    res = await broker.groups.commit_offsets(OffsetCommitRequest(GROUP, ((tp, 4, -1, None),)))
    assert res == {tp: None}
    groups = (await client.get("/console/api/groups")).json()["groups"]
    [g] = [g for g in groups if g["group_id"] == GROUP]
    assert (g["state"], g["members"], g["total_lag"], g["topics"]) == ("Empty", 0, 6, [TOPIC])
    detail = (await client.get(f"/console/api/groups/{GROUP}")).json()
    [row] = detail["partitions"]
    assert (row["committed_offset"], row["log_end_offset"], row["lag"]) == (4, 10, 6)
    assert row["time_lag_ms"] is not None and row["time_lag_ms"] >= 0
    assert detail["may_reset"] is True
    for to, value, expected in (
        ("earliest", None, 0),
        ("offset", 7, 7),
        ("offset", 99, 10),
        ("latest", None, 10),
    ):
        r = await client.post("/console/api/groups/reset", json={"group": GROUP, "to": to, "value": value})
        assert r.status_code == 200, r.text
        assert r.json()["offsets"] == [{"topic": TOPIC, "partition": 0, "offset": expected}]
        assert broker.groups.committed_offsets(GROUP)[tp].offset == expected
    r = await client.post("/console/api/groups/reset", json={"group": GROUP, "to": "timestamp"})
    assert r.status_code == 422 and "needs a value" in r.json()["message"]
    r = await client.post("/console/api/groups/reset", json={"group": GROUP, "to": "timestamp", "value": 0})
    assert r.status_code == 200 and r.json()["offsets"][0]["offset"] == 0
    # A topic named: all of its partitions, committed or not.
    r = await client.post("/console/api/groups/reset", json={"group": GROUP, "topic": TOPIC, "to": "latest"})
    assert [o["offset"] for o in r.json()["offsets"]] == [10, 0]


def test_cluster_history_sums_rates_and_lag_and_keeps_the_worst_p99() -> None:
    from api.dashboard.data import SUMMED, merge_histories

    def row(t: float, msgs: float, p99: float | None, lag: int = 0) -> dict[str, object]:
        return {**dict.fromkeys(SUMMED, 0), "t": t, "produce_msgs": msgs, "lag": lag,
                "latency_p99_ms": p99, "produce_p99_ms": None}  # fmt: skip

    one = [row(100.5, 10, 2.0, 5), row(110.2, 20, 3.0, 5)]
    two = [row(103.0, 1, 9.0, 1), row(104.0, 3, None, 1), row(118.0, 4, 1.0, 2)]  # two rows in one bucket
    merged = merge_histories([one, two], 10.0)
    assert [(m["t"], m["produce_msgs"], m["latency_p99_ms"], m["lag"]) for m in merged] == [
        (104.0, 10 + 2, 9.0, 5 + 1),  # broker two's rows of the bucket are averaged
        (118.0, 20 + 4, 3.0, 5 + 2),
    ]
    assert merged[0]["produce_p99_ms"] is None
