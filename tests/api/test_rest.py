"""The REST API in process (httpx over ASGI) against a real broker and log files in tmp_path."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.partitioner import partition_for_key
from api.rest import V2_BINARY, V2_JSON, create_app, dumps_compact
from api.rest.codec import V2
from api.security.same_origin import SameOriginWrites
from broker.broker import Broker
from broker.config import BrokerConfig
from tests.inprocess import broker_of_one

JSON_CT = {"Content-Type": V2_JSON}
BIN_CT = {"Content-Type": V2_BINARY}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = BrokerConfig(data_dir=tmp_path / "data", max_request_bytes=64 * 1024)
    async with broker_of_one(config) as b:
        yield b


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(broker))
    async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as c:
        yield c


async def create_topic(
    client: httpx.AsyncClient, name: str, partitions: int, **configs: str
) -> dict[str, Any]:
    body = {
        "topic_name": name,
        "partitions_count": partitions,
        "replication_factor": 1,
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
    }
    r = await client.post("/v3/clusters/strata-local/topics", json=body)
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def assert_error(r: httpx.Response, status: int, error_code: int, fragment: str = "") -> None:
    assert r.status_code == status, r.text
    # Confluent's v2 error bodies are application/vnd.kafka.v2+json; v3's (and ours) JSON
    v2 = r.request.url.path.lstrip("/").split("/", 1)[0] in ("topics", "consumers", "brokers")
    assert r.headers["content-type"] == ("application/vnd.kafka.v2+json" if v2 else "application/json")
    body = r.json()
    assert set(body) == {"error_code", "message"}
    # Every error body carries a five-digit code: Confluent's, else the HTTP status times 100.
    assert 10000 <= body["error_code"] <= 99999, body
    assert body["error_code"] == (error_code * 100 if error_code < 1000 else error_code), body
    assert isinstance(body["message"], str) and body["message"]
    assert fragment.lower() in body["message"].lower(), body


async def fetch(
    client: httpx.AsyncClient, topic: str, partition: int, offset: int, *, fmt: str = V2_BINARY, **params: int
) -> list[dict[str, Any]]:
    r = await client.get(
        f"/topics/{topic}/partitions/{partition}/records",
        params={"offset": offset, "timeout": 0, **params},
        headers={"Accept": fmt},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == fmt
    return r.json()  # type: ignore[no-any-return]


# --- v3 topic admin -------------------------------------------------------------------------


async def test_v3_cluster_and_topic_lifecycle(client: httpx.AsyncClient) -> None:
    r = await client.get("/v3/clusters")
    assert r.status_code == 200
    clusters = r.json()
    assert clusters["kind"] == "KafkaClusterList"
    [cluster] = clusters["data"]
    assert cluster["kind"] == "KafkaCluster"
    assert cluster["cluster_id"] == "strata-local"
    assert cluster["topics"]["related"] == "http://strata.test/v3/clusters/strata-local/topics"
    assert (await client.get("/v3/clusters/strata-local")).json() == cluster

    created = await create_topic(client, "orders", 3, retention_ms="3600000")
    assert created["kind"] == "KafkaTopic"
    assert created["topic_name"] == "orders"
    assert created["partitions_count"] == 3
    assert created["replication_factor"] == 1
    assert created["cluster_id"] == "strata-local"
    assert created["metadata"]["self"] == "http://strata.test/v3/clusters/strata-local/topics/orders"

    listed = (await client.get("/v3/clusters/strata-local/topics")).json()
    assert listed["kind"] == "KafkaTopicList"
    assert [t["topic_name"] for t in listed["data"]] == ["orders"]
    assert (await client.get("/v3/clusters/strata-local/topics/orders")).json() == created

    assert (await client.get("/topics")).json() == ["orders"]
    r = await client.get("/topics/orders")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/vnd.kafka.v2+json"
    topic = r.json()
    assert topic["name"] == "orders"
    assert topic["configs"]["retention.ms"] == "3600000"
    assert topic["partitions"] == [
        {"partition": p, "leader": 0, "replicas": [{"broker": 0, "leader": True, "in_sync": True}]}
        for p in range(3)
    ]
    assert (await client.get("/topics/orders/partitions")).json() == topic["partitions"]
    assert (await client.get("/topics/orders/partitions/2")).json() == topic["partitions"][2]
    assert (await client.get("/brokers")).json() == {"brokers": [0]}

    r = await client.post(
        "/v3/clusters/strata-local/topics", json={"topic_name": "orders", "partitions_count": 1}
    )
    assert_error(r, 400, 40002, "orders")  # Confluent REST v3: a duplicate topic

    r = await client.delete("/v3/clusters/strata-local/topics/orders")
    assert r.status_code == 204
    assert r.content == b""
    assert_error(await client.get("/topics/orders"), 404, 40401, "orders")
    assert_error(await client.delete("/v3/clusters/strata-local/topics/orders"), 404, 40401)
    assert (await client.get("/topics")).json() == []


async def test_v3_create_defaults_and_validate_only(client: httpx.AsyncClient) -> None:
    r = await client.post("/v3/clusters/strata-local/topics", json={"topic_name": "dflt"})
    assert r.status_code == 201, r.text
    assert r.json()["partitions_count"] == 1  # BrokerConfig.num_partitions

    r = await client.post(
        "/v3/clusters/strata-local/topics",
        json={"topic_name": "dry", "partitions_count": 4, "validate_only": True},
    )
    assert r.status_code == 201, r.text
    assert r.json()["partitions_count"] == 4
    assert (await client.get("/topics")).json() == ["dflt"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"topic_name": "p0", "partitions_count": 0}, 400, 40002),
        ({"topic_name": "rf3", "partitions_count": 1, "replication_factor": 3}, 400, 40002),
        ({"topic_name": "cfg", "configs": [{"name": "no.such.config", "value": "1"}]}, 400, 40002),
        ({"topic_name": "cfg2", "configs": [{"name": "retention.ms", "value": "soon"}]}, 400, 40002),
        ({"topic_name": "bad name!"}, 400, 40002),
        ({"topic_name": ""}, 400, 40002),
        # a body that does not fit: 400 / 400 on v3, as Confluent's v3 answers
        ({"partitions_count": 1}, 400, 400),
        ({"topic_name": 5}, 400, 400),
        ({"topic_name": "big", "partitions_count": 10**9}, 400, 400),
        ([], 400, 400),
    ],
)
async def test_v3_create_rejects_bad_input(
    client: httpx.AsyncClient, body: Any, status: int, code: int
) -> None:
    r = await client.post("/v3/clusters/strata-local/topics", json=body)
    assert_error(r, status, code)
    assert (await client.get("/topics")).json() == []


async def test_unknown_cluster(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v3/clusters/nope"), 404, 404, "nope")
    assert_error(await client.get("/v3/clusters/nope/topics"), 404, 404)
    r = await client.post("/v3/clusters/nope/topics", json={"topic_name": "t", "partitions_count": 1})
    assert_error(r, 404, 404)
    assert_error(await client.delete("/v3/clusters/nope/topics/t"), 404, 404)
    assert (await client.get("/topics")).json() == []


# --- produce and fetch ------------------------------------------------------------------------


JSON_VALUES: list[Any] = [
    {"id": 1, "tags": ["a", "b"], "nested": {"x": None, "y": True}},
    "plain string with unicode: zażółć 🙂",
    12345678901234567890123,
    -0.5,
    [],
    False,
    None,
]


async def test_json_round_trip(client: httpx.AsyncClient) -> None:
    await create_topic(client, "js", 1)
    records = [
        {"key": {"user": i}, "value": v, "headers": [{"key": "h", "value": b64(b"\x00\xff")}]}
        for i, v in enumerate(JSON_VALUES)
    ]
    records.append({"value": "unkeyed"})
    r = await client.post("/topics/js", json={"records": records}, headers=JSON_CT)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/vnd.kafka.v2+json"
    body = r.json()
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    assert body["offsets"] == [
        {"partition": 0, "offset": i, "error_code": None, "error": None} for i in range(len(records))
    ]

    got = await fetch(client, "js", 0, 0, fmt=V2_JSON)
    assert [g["offset"] for g in got] == list(range(len(records)))
    for rec, g in zip(records, got, strict=True):
        assert g["topic"] == "js" and g["partition"] == 0
        assert isinstance(g["timestamp"], int) and g["timestamp"] > 0
        assert g["key"] == rec.get("key")
        assert g["value"] == rec.get("value")
        assert g["headers"] == rec.get("headers", [])

    # what is stored is the compact UTF-8 JSON encoding (null stays a null value)
    raw = await fetch(client, "js", 0, 0)
    for rec, g in zip(records, raw, strict=True):
        key = rec.get("key")
        assert g["key"] == (None if key is None else b64(dumps_compact(key)))
        value = rec.get("value")
        assert g["value"] == (None if value is None else b64(dumps_compact(value)))
    assert base64.b64decode(raw[1]["value"]) == '"plain string with unicode: zażółć 🙂"'.encode()


async def test_json_lone_surrogates_stay_escaped(client: httpx.AsyncClient) -> None:
    await create_topic(client, "sur", 1)
    body = b'{"records": [{"key": "\\ud800", "value": {"s": "a\\udfffb"}}]}'
    r = await client.post("/topics/sur", content=body, headers=JSON_CT)
    assert r.status_code == 200, r.text
    [rec] = await fetch(client, "sur", 0, 0, fmt=V2_JSON)
    assert rec["key"] == "\ud800"
    assert rec["value"] == {"s": "a\udfffb"}
    [raw] = await fetch(client, "sur", 0, 0)
    assert base64.b64decode(raw["key"]) == b'"\\ud800"'  # not UTF-8-encodable, so stored escaped


async def test_binary_round_trip(client: httpx.AsyncClient) -> None:
    await create_topic(client, "bin", 2)
    payloads = [bytes(range(256)), b"", b"\x00", "ü".encode()]
    records = [
        {
            "key": b64(b"k%d" % i),
            "value": b64(p),
            "partition": 1,
            "headers": [{"key": "trace", "value": b64(b"t%d" % i)}, {"key": "nullh", "value": None}],
        }
        for i, p in enumerate(payloads)
    ]
    records.append({"key": None, "value": None, "partition": 1})
    r = await client.post("/topics/bin", json={"records": records}, headers=BIN_CT)
    assert r.status_code == 200, r.text
    assert [o["offset"] for o in r.json()["offsets"]] == [0, 1, 2, 3, 4]
    assert {o["partition"] for o in r.json()["offsets"]} == {1}

    got = await fetch(client, "bin", 1, 0)
    assert [g["offset"] for g in got] == [0, 1, 2, 3, 4]
    for rec, g in zip(records, got, strict=True):
        assert g["key"] == rec["key"]
        assert g["value"] == rec["value"]
        assert g["headers"] == rec.get("headers", [])
    assert await fetch(client, "bin", 0, 0) == []

    # a second request continues the offsets; fetching inside a batch drops the earlier records
    r = await client.post(
        "/topics/bin/partitions/1", json={"records": [{"value": b64(b"x")}] * 3}, headers=BIN_CT
    )
    assert [o["offset"] for o in r.json()["offsets"]] == [5, 6, 7]
    assert [g["offset"] for g in await fetch(client, "bin", 1, 6)] == [6, 7]
    assert [g["offset"] for g in await fetch(client, "bin", 1, 3)] == [3, 4, 5, 6, 7]


async def test_plain_json_content_type_means_binary(client: httpx.AsyncClient) -> None:
    await create_topic(client, "plain", 1)
    r = await client.post("/topics/plain", json={"records": [{"value": b64(b"raw")}]})
    assert r.status_code == 200, r.text
    assert (await fetch(client, "plain", 0, 0))[0]["value"] == b64(b"raw")


async def test_keyed_placement_is_murmur2(client: httpx.AsyncClient) -> None:
    await create_topic(client, "keyed", 7)
    keys = [f"customer-{i}".encode() for i in range(60)]
    records = [{"key": b64(k), "value": b64(b"v%d" % i)} for i, k in enumerate(keys)]
    r = await client.post("/topics/keyed", json={"records": records}, headers=BIN_CT)
    assert r.status_code == 200, r.text
    offsets = r.json()["offsets"]
    expected = [partition_for_key(k, 7) for k in keys]
    assert [o["partition"] for o in offsets] == expected
    assert len(set(expected)) > 1

    # per partition, offsets follow request order from 0 and fetch returns exactly those records
    for p in range(7):
        mine = [(o["offset"], records[i]) for i, o in enumerate(offsets) if o["partition"] == p]
        assert [off for off, _ in mine] == list(range(len(mine)))
        got = await fetch(client, "keyed", p, 0)
        assert [(g["offset"], g["key"], g["value"]) for g in got] == [
            (off, rec["key"], rec["value"]) for off, rec in mine
        ]

    # json keys hash over their stored JSON encoding
    json_keys: list[Any] = ["alice", 42, {"id": "bob"}, [1, 2]]
    r = await client.post(
        "/topics/keyed", json={"records": [{"key": k, "value": 1} for k in json_keys]}, headers=JSON_CT
    )
    assert [o["partition"] for o in r.json()["offsets"]] == [
        partition_for_key(dumps_compact(k), 7) for k in json_keys
    ]


async def test_unkeyed_records_stick_to_one_partition(client: httpx.AsyncClient) -> None:
    await create_topic(client, "sticky", 5)
    seen = set()
    for _ in range(5):
        r = await client.post("/topics/sticky", json={"records": [{"value": b64(b"x")}] * 4}, headers=BIN_CT)
        parts = {o["partition"] for o in r.json()["offsets"]}
        assert len(parts) == 1
        seen |= parts
    assert len(seen) > 1  # rotates between requests
    r = await client.post(
        "/topics/sticky",
        json={"records": [{"value": b64(b"a"), "partition": 3}, {"value": b64(b"b"), "partition": 0}]},
        headers=BIN_CT,
    )
    assert [o["partition"] for o in r.json()["offsets"]] == [3, 0]


async def test_partial_failure_keeps_200(client: httpx.AsyncClient) -> None:
    await create_topic(client, "small", 2, max_message_bytes="1024")
    records = [
        {"value": b64(b"x" * 4000), "partition": 0},
        {"value": b64(b"ok"), "partition": 1},
    ]
    r = await client.post("/topics/small", json={"records": records}, headers=BIN_CT)
    assert r.status_code == 200, r.text
    failed, ok = r.json()["offsets"]
    assert failed["partition"] == 0 and failed["offset"] is None
    assert failed["error_code"] == 50002  # MESSAGE_TOO_LARGE: not retriable (Confluent)
    assert isinstance(failed["error"], str) and failed["error"]
    assert ok == {"partition": 1, "offset": 0, "error_code": None, "error": None}
    assert await fetch(client, "small", 0, 0) == []


async def test_fetch_limits_and_long_poll(client: httpx.AsyncClient) -> None:
    await create_topic(client, "poll", 1)
    r = await client.post(
        "/topics/poll", json={"records": [{"value": b64(b"x" * 100)} for _ in range(10)]}, headers=BIN_CT
    )
    assert r.status_code == 200
    few = await fetch(client, "poll", 0, 0, max_bytes=250)
    assert [g["offset"] for g in few] == [0, 1, 2]
    assert [g["offset"] for g in await fetch(client, "poll", 0, 4, max_bytes=0)] == [4]
    assert await fetch(client, "poll", 0, 10) == []  # at the end: empty after the (zero) wait

    # a fetch waiting at the end is woken by a produce
    waiting = asyncio.create_task(
        client.get(
            "/topics/poll/partitions/0/records",
            params={"offset": 10, "timeout": 20000},
            headers={"Accept": V2_BINARY},
        )
    )
    await asyncio.sleep(0)
    r = await client.post("/topics/poll", json={"records": [{"value": b64(b"late")}]}, headers=BIN_CT)
    assert r.json()["offsets"][0]["offset"] == 10
    got = (await waiting).json()
    assert [(g["offset"], g["value"]) for g in got] == [(10, b64(b"late"))]


# --- errors -------------------------------------------------------------------------------


async def test_produce_errors(client: httpx.AsyncClient, broker: Broker) -> None:
    await create_topic(client, "t", 2)
    ok = {"records": [{"value": b64(b"v")}]}
    assert_error(await client.post("/topics/missing", json=ok, headers=BIN_CT), 404, 40401, "missing")
    assert_error(
        await client.post("/topics/t/partitions/2", json=ok, headers=BIN_CT), 404, 40402, "partition 2"
    )
    r = await client.post(
        "/topics/t", json={"records": [{"value": b64(b"v"), "partition": 9}]}, headers=BIN_CT
    )
    assert_error(r, 404, 40402)
    r = await client.post(
        "/topics/t", json={"records": [{"value": b64(b"v"), "partition": -1}]}, headers=BIN_CT
    )
    assert_error(r, 422, 422, "partition")
    assert_error(await client.post("/topics/t/partitions/-1", json=ok, headers=BIN_CT), 422, 422)

    r = await client.post("/topics/t", json={"records": [{"value": "not base64!"}]}, headers=BIN_CT)
    assert_error(r, 422, 422, "records[0].value is not valid base64")
    r = await client.post("/topics/t", json={"records": [{"key": "QQ="}]}, headers=BIN_CT)
    assert_error(r, 422, 422, "records[0].key")
    r = await client.post(
        "/topics/t",
        json={"records": [{"value": None, "headers": [{"key": "h", "value": "%%"}]}]},
        headers=BIN_CT,
    )
    assert_error(r, 422, 422, "headers[0].value")
    r = await client.post("/topics/t", json={"records": [{"value": 5}]}, headers=BIN_CT)
    assert_error(r, 422, 422, "records.0.value")

    for bad in (b'{"records": [', b"", b"\xff\xfe", b'{"records": [{"value": NaN}]}', b"[1e999]"):
        r = await client.post("/topics/t", content=bad, headers=JSON_CT)
        assert_error(r, 422, 422, "not valid JSON")
    assert_error(await client.post("/topics/t", json={"records": []}, headers=JSON_CT), 422, 422)
    assert_error(await client.post("/topics/t", json={"recs": []}, headers=JSON_CT), 422, 422, "records")
    assert_error(await client.post("/topics/t", json=[1], headers=JSON_CT), 422, 422)
    deep = b"[" * 30_000 + b"]" * 30_000
    assert_error(await client.post("/topics/t", content=deep, headers=JSON_CT), 422, 422)

    for ct in ("text/plain", "application/vnd.kafka.avro.v2+json", "application/x-www-form-urlencoded"):
        r = await client.post("/topics/t", content=json.dumps(ok), headers={"Content-Type": ct})
        assert_error(r, 415, 415, ct)
    assert_error(await client.post("/topics/t", content=json.dumps(ok)), 415, 415)

    limit = broker.config.max_request_bytes
    big = {"records": [{"value": b64(b"x" * limit)}]}
    assert_error(await client.post("/topics/t", json=big, headers=BIN_CT), 413, 413, str(limit))

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the stream is counted
        for _ in range(limit // 1000 + 2):
            yield b" " * 1000

    r = await client.post("/topics/t", content=chunked(), headers=BIN_CT)
    assert_error(r, 413, 413)

    # nothing above was written
    assert await fetch(client, "t", 0, 0) == []
    assert await fetch(client, "t", 1, 0) == []


async def test_fetch_errors(client: httpx.AsyncClient) -> None:
    await create_topic(client, "f", 1)
    r = await client.post("/topics/f", json={"records": [{"value": b64(b"\xff not json")}]}, headers=BIN_CT)
    assert r.status_code == 200

    url = "/topics/f/partitions/0/records"
    assert_error(await client.get("/topics/nope/partitions/0/records", params={"offset": 0}), 404, 40401)
    assert_error(await client.get("/topics/f/partitions/1/records", params={"offset": 0}), 404, 40402)
    assert_error(await client.get(url), 422, 422, "offset")
    assert_error(await client.get(url, params={"offset": "x"}), 422, 422, "offset")
    assert_error(await client.get(url, params={"offset": -1}), 422, 422, "offset")
    assert_error(await client.get(url, params={"offset": 0, "timeout": 10**9}), 422, 422, "timeout")
    assert_error(await client.get(url, params={"offset": 5, "timeout": 0}), 416, 416)
    r = await client.get(url, params={"offset": 0, "timeout": 0}, headers={"Accept": V2_JSON})
    assert_error(r, 406, 40601, V2_BINARY)
    r = await client.get(url, params={"offset": 0, "timeout": 0}, headers={"Accept": "text/html"})
    assert_error(r, 406, 406)
    # without a preference the embedded format is binary
    r = await client.get(url, params={"offset": 0, "timeout": 0})
    assert r.status_code == 200 and r.headers["content-type"] == V2_BINARY


async def test_unknown_route_and_method(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/nothing/here"), 404, 404)
    r = await client.put("/topics")
    assert_error(r, 405, 405)
    assert "GET" in r.headers["allow"]


# --- operations -----------------------------------------------------------------------------


async def test_healthz_and_metrics(client: httpx.AsyncClient) -> None:
    r = await client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "broker_id": 0, "cluster_id": "strata-local", "topics": 0}

    await create_topic(client, "m", 1)
    r = await client.post("/topics/m", json={"records": [{"value": 1}, {"value": 2}]}, headers=JSON_CT)
    assert r.status_code == 200
    await client.get("/topics/nope")

    r = await client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'strata_produce_messages_total{topic="m"} 2.0' in text
    assert 'strata_http_requests_total{route="/topics/{topic}",status="200"} 1.0' in text
    assert 'strata_http_requests_total{route="/topics/{topic}",status="404"} 1.0' in text
    assert 'strata_http_latency_seconds_count{route="/healthz"} 1.0' in text


async def test_openapi_describes_bodies(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    produce = spec["paths"]["/topics/{topic}"]["post"]
    assert set(produce["requestBody"]["content"]) == {V2_JSON, V2_BINARY}
    assert "4XX" in produce["responses"]
    fetch_op = spec["paths"]["/topics/{topic}/partitions/{partition}/records"]["get"]
    assert set(fetch_op["responses"]["200"]["content"]) == {V2_JSON, V2_BINARY}
    for name in ("ErrorResponse", "JsonProduceRequest", "BinaryProduceRequest", "CreateTopicRequest"):
        assert name in spec["components"]["schemas"]
    # every reference resolves (Redoc refuses to render a spec with one that does not)
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(spec)))
    assert refs - set(spec["components"]["schemas"]) == set()


async def test_openapi_names_strata_and_no_internal_module(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    # Redoc shows "title (version)": the version is Strata's, not the "2" of REST Proxy v2
    assert spec["info"]["title"] == "Strata REST API" and spec["info"]["version"] != "2"
    internal = re.findall(r"\b(?:api|broker|hot|tiering|core|spark)\.[a-z_][a-z_.]*", json.dumps(spec))
    assert internal == []


async def test_root_redirects_to_the_console(client: httpx.AsyncClient) -> None:
    r = await client.get("/")
    assert r.status_code == 307 and r.headers["location"] == "/dashboard"


async def test_writes_only_from_this_origin_and_only_json(client: httpx.AsyncClient) -> None:
    """The same-origin policy for writes (api.security.same_origin): a browser's request from
    another origin is 403 / 40301, a write body that is not JSON 415 / 41500, before any route
    runs; this broker's own pages, clients without Origin and allowed origins pass."""
    await create_topic(client, "so", 1)
    body = json.dumps({"records": [{"value": b64(b"v")}]})
    refused = [
        ({"Origin": "http://evil.example", **JSON_CT}, 403, 40301),
        ({"Origin": "null", **JSON_CT}, 403, 40301),
        ({"Origin": "http://strata.test:8080", **JSON_CT}, 403, 40301),  # another port
        ({"Sec-Fetch-Site": "cross-site", **JSON_CT}, 403, 40301),
        ({"Sec-Fetch-Site": "same-site", **JSON_CT}, 403, 40301),
        ({"Origin": "http://strata.test", "Content-Type": "text/plain"}, 415, 41500),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415, 41500),
        ({"Content-Type": ""}, 415, 41500),
    ]
    for headers, status, code in refused:
        r = await client.post("/topics/so", content=body, headers=headers)
        assert (r.status_code, r.json()["error_code"]) == (status, code), (headers, r.text)
        assert r.headers["content-type"] == V2, headers  # v2's error media type
    r = await client.delete("/v3/clusters/strata-local/topics/so", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403, r.text
    accepted = [
        JSON_CT,
        {"Origin": "http://strata.test", "Sec-Fetch-Site": "same-origin", **JSON_CT},
        {"Origin": "HTTP://Strata.Test:80", **JSON_CT},
        {"Sec-Fetch-Site": "none", "Content-Type": V2_BINARY},
    ]
    for headers in accepted:
        r = await client.post("/topics/so", content=body, headers=headers)
        assert r.status_code == 200, (headers, r.text)
    assert len(await fetch(client, "so", 0, 0)) == len(accepted)

    # an origin named in http_allowed_origins (a console behind a proxy) may write too
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not called")

    policy = SameOriginWrites(app, allowed_origins=["https://console.example/"])

    def scope(**headers: str) -> dict[str, Any]:
        raw = [(k.lower().replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
        return {"type": "http", "method": "POST", "scheme": "http", "headers": [(b"host", b"b:8080"), *raw]}

    ok = {"content_type": "application/json"}
    assert (
        policy.refusal(scope(origin="https://console.example:443", sec_fetch_site="cross-site", **ok)) is None
    )
    assert policy.refusal(scope(origin="http://b:8080", sec_fetch_site="same-origin", **ok)) is None
    assert policy.refusal(scope(origin="https://console.example.evil", **ok)) is not None


async def test_records_the_broker_refuses(client: httpx.AsyncClient) -> None:
    # issue 18: a header key that cannot be encoded is the request's fault (4xx, nothing stored);
    # a record a compacted topic cannot keep is refused per partition, as MESSAGE_TOO_LARGE is.
    await create_topic(client, "hk", 1)
    body = b'{"records": [{"value": "AA==", "headers": [{"key": "\\ud800", "value": null}]}]}'
    r = await client.post("/topics/hk", content=body, headers=BIN_CT)
    assert 400 <= r.status_code < 500, r.text
    assert "header key" in r.json()["message"]
    assert await fetch(client, "hk", 0, 0) == []
    await create_topic(client, "keyed", 1, cleanup_policy="compact")
    r = await client.post("/topics/keyed", json={"records": [{"value": b64(b"v")}]}, headers=BIN_CT)
    assert r.status_code == 200, r.text
    [refused] = r.json()["offsets"]
    assert refused["offset"] is None and refused["error_code"] == 50002  # INVALID_RECORD
    assert "without a key" in refused["error"]


async def test_produce_auto_creates_the_topic_when_enabled(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path / "data", auto_create_topics=True, num_partitions=2)
    async with broker_of_one(config) as b:
        transport = httpx.ASGITransport(app=create_app(b))
        async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as c:
            r = await c.post("/topics/auto", json={"records": [{"value": 1}]}, headers=JSON_CT)
            assert r.status_code == 200, r.text
            assert r.json()["offsets"][0]["error_code"] is None
        assert b.topic("auto").partitions == 2


async def test_v2_partition_offsets(client: httpx.AsyncClient, broker: Broker) -> None:
    """REST Proxy v2 ``GET /topics/{t}/partitions/{p}/offsets``: the log start offset and the
    high watermark; a partition or topic that does not exist is 404."""
    await create_topic(client, "offs", 2)
    r = await client.post(
        "/topics/offs/partitions/1", json={"records": [{"value": i} for i in range(5)]}, headers=JSON_CT
    )
    assert r.status_code == 200, r.text
    r = await client.get("/topics/offs/partitions/1/offsets")
    assert r.status_code == 200 and r.headers["content-type"] == "application/vnd.kafka.v2+json"
    assert r.json() == {"beginning_offset": 0, "end_offset": 5}
    assert (await client.get("/topics/offs/partitions/0/offsets")).json() == {
        "beginning_offset": 0,
        "end_offset": 0,
    }
    assert (await client.get("/topics/offs/partitions/7/offsets")).status_code == 404
    assert (await client.get("/topics/nope/partitions/0/offsets")).status_code == 404
