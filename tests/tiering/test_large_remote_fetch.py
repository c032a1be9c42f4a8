"""Large Fetch responses from the remote tier (record parts of megabytes, which the
listener sends straight from the chunk buffers: ``Connection._send_direct``) arrive whole,
byte-identical and in request order, also when pipelined behind small responses to a
client that reads slowly (the transport's own buffer is then non-empty when a large part
comes up, and must go out first)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from hot.records import decode_batches
from kwire import ApiKey, decode_response, encode_request
from kwire.messages.api_versions import ApiVersionsRequest
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.brokers import BrokerProcess, S3Endpoint, create_topic

TOPIC = "large-remote"
N = 3000
FETCH_VERSION = 12
MAX_BYTES = 6 << 20


def _value(i: int) -> bytes:
    return (b"%08d" % i) * 250  # 2000 bytes


def _produce(bootstrap: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"})
    errors: list[object] = []
    for i in range(N):
        p.produce(TOPIC, _value(i), b"k%d" % i, partition=0, on_delivery=lambda e, _m: e and errors.append(e))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert not errors


def _local_start(data_dir: Path) -> int:
    d = data_dir / "logs" / f"{TOPIC}-0"
    bases = sorted(int(p.name[:-4]) for p in d.glob("*.log"))
    return bases[0] if bases else 0


def _wait(what: str, cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 16384))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _fetch(offset: int, max_bytes: int = MAX_BYTES) -> FetchRequest:
    part = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)
    return FetchRequest(
        max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, topics=(FetchTopic(topic=TOPIC, partitions=(part,)),)
    )


def test_pipelined_large_remote_fetches_to_a_slow_reader(
    broker_factory: Callable[..., BrokerProcess], s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    env = {**s3_endpoint.env, "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100"}
    b = broker_factory("--object-store", f"s3://{s3_bucket}/strata", env=env)
    create_topic(b.bootstrap, TOPIC, 1, {"segment.bytes": str(1 << 20), "local.retention.bytes": "1"})
    _produce(b.bootstrap)
    _wait("most of the log to leave the local disk", lambda: _local_start(b.data_dir) > N * 3 // 4)
    remote_end = _local_start(b.data_dir)

    # Small, medium (written through the transport's buffer: parts under DIRECT_SEND_MIN)
    # and large responses interleaved, all sent before anything is read: with the socket
    # full, a medium response waits in the transport's buffer when a large one comes up.
    requests: list[tuple[int, int, object]] = [
        (ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")),
        (ApiKey.FETCH, FETCH_VERSION, _fetch(0)),
        (ApiKey.METADATA, 9, MetadataRequest(topics=(MetadataRequestTopic(name=TOPIC),))),
        (ApiKey.FETCH, FETCH_VERSION, _fetch(remote_end // 2, 150_000)),
        (ApiKey.FETCH, FETCH_VERSION, _fetch(remote_end // 3)),
        (ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")),
        (ApiKey.FETCH, FETCH_VERSION, _fetch(remote_end // 2, 150_000)),
        (ApiKey.FETCH, FETCH_VERSION, _fetch(0)),
    ]
    host, port = b.bootstrap.rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)  # before connect: a small window
    sock.settimeout(60)
    sock.connect((host, int(port)))
    try:
        for corr, (key, version, req) in enumerate(requests):
            payload = encode_request(key, version, corr, "large-fetch-test", req)
            sock.sendall(struct.pack(">i", len(payload)) + payload)
        time.sleep(1.0)  # the broker fills the socket and queues the rest
        fetched: list[tuple[int, list[tuple[int, bytes, bytes]]]] = []
        for corr, (key, version, req) in enumerate(requests):
            (n,) = struct.unpack(">i", _recv_exact(sock, 4))
            got_corr, resp = decode_response(key, version, _recv_exact(sock, n))
            assert got_corr == corr
            if key != ApiKey.FETCH:
                continue
            assert isinstance(resp, FetchResponse)
            pdata = resp.responses[0].partitions[0]
            assert pdata.error_code == 0
            assert pdata.records is not None
            assert len(pdata.records) > (1 << 20 if req.max_bytes == MAX_BYTES else 50_000)  # type: ignore[attr-defined]
            recs = [
                (r.offset, r.key or b"", r.value or b"")
                for batch in decode_batches(pdata.records)  # CRCs checked
                for r in batch.records
            ]
            fetched.append((recs[0][0], recs))
    finally:
        sock.close()

    assert len(fetched) == 5
    for _first, recs in fetched:
        offsets = [o for o, _, _ in recs]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        assert recs == [(o, b"k%d" % o, _value(o)) for o in offsets]
    assert fetched[0][0] == fetched[4][0] == 0 and fetched[0][1] == fetched[4][1]
    assert fetched[1][1] == fetched[3][1]
    for i, at in ((1, remote_end // 2), (2, remote_end // 3)):
        assert fetched[i][1][0][0] <= at <= fetched[i][1][-1][0]
