"""REST v3 produce (``POST /v3/clusters/{id}/topics/{t}/records``, Confluent's shape) in process
against a real broker: one record, a stream of records (also cut anywhere by the transport),
per-record errors beside successes, the HTTP errors, and WRITE authorization."""

from __future__ import annotations

import base64
import datetime
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from broker.security.stored import StoredAcls
from kwire.acl import Operation, ResourceType
from tests.api.test_rest import assert_error, b64, create_topic, fetch
from tests.api.test_rest_v3 import C, allow, authorized, broker, client
from tests.brokers import BrokerProcess

__all__ = ["authorized", "broker", "client"]  # the fixtures


def reports(r: httpx.Response) -> list[dict[str, Any]]:
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    return [json.loads(line) for line in r.text.splitlines()]


async def test_one_record(client: httpx.AsyncClient) -> None:
    await create_topic(client, "v3p", 2)
    record = {
        "partition_id": 1,
        "headers": [{"name": "trace", "value": b64(b"\x00\x01")}, {"name": "empty", "value": None}],
        "key": {"type": "STRING", "data": "k-ü"},
        "value": {"type": "JSON", "data": {"n": 1, "s": "x"}},
        "timestamp": "2026-11-28T16:00:00.250Z",
    }
    [report] = reports(await client.post(f"{C}/topics/v3p/records", json=record))
    assert report == {
        "error_code": 200,
        "cluster_id": "strata-local",
        "topic_name": "v3p",
        "partition_id": 1,
        "offset": 0,
        "timestamp": "2026-11-28T16:00:00.250Z",
        "key": {"type": "STRING", "size": len("k-ü".encode())},
        "value": {"type": "JSON", "size": len(b'{"n":1,"s":"x"}')},
    }
    [got] = await fetch(client, "v3p", 1, 0)
    assert base64.b64decode(got["key"]) == "k-ü".encode()
    assert base64.b64decode(got["value"]) == b'{"n":1,"s":"x"}'
    assert got["headers"] == [{"key": "trace", "value": b64(b"\x00\x01")}, {"key": "empty", "value": None}]
    when = datetime.datetime(2026, 11, 28, 16, 0, 0, 250_000, tzinfo=datetime.UTC)
    assert got["timestamp"] == int(when.timestamp() * 1000)

    # binary, no key, null value, default type JSON; placement by key as the v2 produce
    body = {"key": {"type": "BINARY", "data": b64(b"\xff\x00")}, "value": {"data": [1, 2]}}
    [report] = reports(await client.post(f"{C}/topics/v3p/records", json=body))
    assert report["key"] == {"type": "BINARY", "size": 2}
    assert report["value"] == {"type": "JSON", "size": len(b"[1,2]")}
    [report] = reports(await client.post(f"{C}/topics/v3p/records", json={"partition_id": 0}))
    assert (report["key"], report["value"], report["partition_id"]) == (None, None, 0)
    [got] = [g for g in await fetch(client, "v3p", 0, 0) if g["offset"] == report["offset"]]
    assert (got["key"], got["value"]) == (None, None)


async def test_stream_of_records(client: httpx.AsyncClient) -> None:
    await create_topic(client, "stream", 1)
    records: list[Any] = [
        {"value": {"type": "STRING", "data": f"r{i}-é"}, "key": {"data": True}} for i in range(6)
    ]
    records[2] = {"value": {"type": "BINARY", "data": "not base64!"}}  # refused, the others go on
    records[4] = {"partition_id": 5, "value": {"data": 1}}
    body = "".join(json.dumps(r, ensure_ascii=False) + ("\n" if i % 2 else "") for i, r in enumerate(records))
    data = body.encode()

    async def chunks() -> AsyncIterator[bytes]:  # cut everywhere: inside strings, literals, characters
        for i in range(0, len(data), 7):
            yield data[i : i + 7]

    got = reports(
        await client.post(
            f"{C}/topics/stream/records", content=chunks(), headers={"Content-Type": "application/json"}
        )
    )
    assert [r["error_code"] for r in got] == [200, 200, 400, 200, 40402, 200]
    assert [r["offset"] for r in got if r["error_code"] == 200] == [0, 1, 2, 3]
    assert "base64" in got[2]["message"] and "partition 5" in got[4]["message"]
    stored = await fetch(client, "stream", 0, 0)
    assert [base64.b64decode(g["value"]).decode() for g in stored] == ["r0-é", "r1-é", "r3-é", "r5-é"]
    assert {base64.b64decode(g["key"]) for g in stored} == {b"true"}

    # a stream broken after good records: they are written, then one error ends it
    ct = {"Content-Type": "application/json"}
    r = await client.post(
        f"{C}/topics/stream/records", content=b'{"value": {"data": 1}} {"value": oops}', headers=ct
    )
    got = reports(r)
    assert [x["error_code"] for x in got] == [200, 400] and "not valid JSON" in got[1]["message"]
    r = await client.post(
        f"{C}/topics/stream/records", content=b'{"value": {"data": 1}} {"value": {"dat', headers=ct
    )
    assert [x["error_code"] for x in reports(r)] == [200, 400]


async def test_errors(client: httpx.AsyncClient) -> None:
    await create_topic(client, "e", 1)
    ok = {"value": {"data": 1}}
    assert_error(await client.post(f"{C}/topics/nope/records", json=ok), 404, 40401)
    assert_error(await client.post("/v3/clusters/x/topics/e/records", json=ok), 404, 404)
    r = await client.post(
        f"{C}/topics/e/records", content=json.dumps(ok), headers={"Content-Type": "text/plain"}
    )
    assert_error(r, 415, 415)
    for bad, fragment in (
        (b"", "no record"),
        (b"   ", "no record"),
        (b'{"value": ', "ends inside"),
        (b"[1, 2", "ends inside"),
        (b"{oops}", "not valid JSON"),
        (b"\xff\xfe", "UTF-8"),
        (b'{"value": NaN}', "not valid JSON"),
    ):
        r = await client.post(
            f"{C}/topics/e/records", content=bad, headers={"Content-Type": "application/json"}
        )
        assert_error(r, 400, 400, fragment)
    for record, code, fragment in (
        ({"value": {"type": "AVRO", "data": 1}}, 400, "value.type"),
        ({"value": {"schema_id": 3, "data": 1}}, 400, "schema registry"),
        ({"key": {"type": "STRING", "data": 5}}, 400, "STRING"),
        ({"timestamp": "yesterday"}, 400, "ISO 8601"),
        ({"headers": [{"name": "h", "value": "%%"}]}, 400, "headers[0]"),
        ([1], 400, ""),
        ({"records": [{"value": 1}]}, 400, "records"),  # a v2 body: not an empty record
    ):
        [report] = reports(await client.post(f"{C}/topics/e/records", json=record))
        assert report["error_code"] == code and fragment in report["message"], report
    assert await fetch(client, "e", 0, 0) == []


async def test_needs_write(authorized: tuple[httpx.AsyncClient, StoredAcls]) -> None:
    http, acls = authorized
    ok = {"value": {"data": 1}}
    assert_error(await http.post(f"{C}/topics/seen/records", json=ok), 403, 40301)
    assert_error(await http.post(f"{C}/topics/nope/records", json=ok), 403, 40301)
    await acls.create([allow(ResourceType.TOPIC, "seen", Operation.WRITE)])
    [report] = reports(await http.post(f"{C}/topics/seen/records", json=ok))
    assert report["error_code"] == 200


def test_streamed_over_http(tmp_path: Path) -> None:
    """Over a real server (uvicorn), chunked: each report comes back while the request is
    still open, so a client can stream records and read their reports as it goes."""
    b = BrokerProcess(tmp_path / "data").start()
    try:
        with httpx.Client(base_url=b.http_url, timeout=30) as http:
            r = http.post(f"{C}/topics", json={"topic_name": "live", "partitions_count": 1})
            assert r.status_code == 201, r.text
        host, port = b.http_url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            head = (
                f"POST {C}/topics/live/records HTTP/1.1\r\nHost: {host}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            sock.sendall(head.encode())
            received = b""
            for i in range(3):
                record = json.dumps({"value": {"data": i}}).encode()
                sock.sendall(b"%x\r\n%s\r\n" % (len(record), record))
                while b'"offset":%d' % i not in received:  # its report, before the next record
                    data = sock.recv(65536)
                    assert data, received
                    received += data
            sock.sendall(b"0\r\n\r\n")
            while not received.endswith(b"0\r\n\r\n"):
                data = sock.recv(65536)
                assert data, received
                received += data
        assert received.startswith(b"HTTP/1.1 200")
        assert b"transfer-encoding: chunked" in received.lower()
        # a client that goes away mid-stream: what it sent is written, the broker carries on
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(head.encode())
            record = json.dumps({"value": {"data": "last"}}).encode()
            sock.sendall(b"%x\r\n%s\r\n" % (len(record), record))
            received = b""
            while b'"offset":3' not in received:
                data = sock.recv(65536)
                assert data, received
                received += data
        with httpx.Client(base_url=b.http_url, timeout=30) as http:
            r = http.get("/topics/live/partitions/0/offsets")
            assert r.json()["end_offset"] == 4
        assert "Traceback" not in b.output()
    finally:
        b.kill()
