"""S3 throttling: a bucket answering 503 SlowDown is retried with botocore's backoff (a bounded
number of attempts), and the attempts are counted for ``/metrics``; a broker whose bucket
is slow and throttling still acknowledges produce and serves hot fetches.

The endpoint is moto's server behind a small forwarding proxy on loopback that answers the
next ``n`` requests with S3's own 503 SlowDown error instead of forwarding them, and can
hold every request for ``delay_s`` first.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from hot.errors import RetriableObjectStoreError
from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tiering.metrics import S3RequestCollector
from tiering.s3_store import S3Store
from tiering.store import open_store

_SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
_HOP_BY_HOP = frozenset({"host", "connection", "expect", "transfer-encoding", "content-length", "keep-alive"})


class ThrottlingProxy:
    """Forwards to ``target``; the next ``throttle(n)`` requests get 503 SlowDown."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._lock = threading.Lock()
        self._left = 0
        self.throttled = 0
        self.delay_s = 0.0
        self.seen: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                proxy.seen.append((self.command, self.path))
                if proxy.delay_s:
                    time.sleep(proxy.delay_s)
                if proxy._take():
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_SLOWDOWN)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(_SLOWDOWN)
                    return
                conn = http.client.HTTPConnection(*proxy.target, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP_BY_HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A client that gave up on a held request (its read timeout) is not a test failure.
        self.server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            self.throttled += 1
            return True

    def throttle(self, n: int) -> None:
        with self._lock:
            self._left = n

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(s3_endpoint: S3Endpoint) -> Iterator[ThrottlingProxy]:
    p = ThrottlingProxy(s3_endpoint.url)
    yield p
    p.close()


def _store(proxy: ThrottlingProxy, bucket: str, max_attempts: int) -> S3Store:
    store = open_store(
        f"s3://{bucket}/throttled",
        endpoint_url=proxy.url,
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        max_attempts=max_attempts,
    )
    assert isinstance(store, S3Store)
    return store


async def test_slowdown_is_retried_and_counted(
    proxy: ThrottlingProxy, s3_bucket: str, tmp_path: Path
) -> None:
    store = _store(proxy, s3_bucket, max_attempts=4)
    try:
        await store.connect(warm_up_wait=0)
        big = tmp_path / "big"
        big.write_bytes(bytes(range(256)) * (6 << 12))  # 6 MiB: the blocking client's PUT
        proxy.throttle(2)
        await store.put("small", b"x" * 100)  # the event loop's client
        proxy.throttle(2)
        await store.put_file("big", big)
        proxy.throttle(2)
        assert await store.get("big") == big.read_bytes()
        assert await store.get("small") == b"x" * 100
        assert proxy.throttled == 6
        assert store.requests.throttled >= 6 and store.requests.failed_attempts >= 6
        families = {m.name: m.samples[0].value for m in S3RequestCollector(store).collect()}
        assert families["strata_tiering_s3_throttled"] >= 6
    finally:
        await store.close()


async def test_retries_are_bounded(proxy: ThrottlingProxy, s3_bucket: str) -> None:
    store = _store(proxy, s3_bucket, max_attempts=2)
    try:
        proxy.throttle(1000)
        with pytest.raises(RetriableObjectStoreError, match="SlowDown"):
            await store.put("k", b"data")
        assert proxy.throttled == 2, proxy.seen  # max_attempts, then the error
        assert store.requests.throttled == 2
        proxy.throttle(0)
        await store.put("k", b"data")  # the bucket recovered: nothing sticks
    finally:
        await store.close()


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_a_slow_throttling_bucket_stalls_neither_produce_nor_hot_fetch(
    broker_factory: Callable[..., BrokerProcess],
    proxy: ThrottlingProxy,
    s3_endpoint: S3Endpoint,
    s3_bucket: str,
) -> None:
    from confluent_kafka import Consumer, Producer

    env = {
        **s3_endpoint.env,
        "AWS_ENDPOINT_URL": proxy.url,
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
        "STRATA_TIERING_SHUTDOWN_UPLOAD_GRACE_MS": "0",
    }
    b = broker_factory("--object-store", f"s3://{s3_bucket}/slow", env=env)
    create_topic(b.bootstrap, "t", 1, {"segment.bytes": "65536"})
    proxy.delay_s = 1.0  # every S3 request now takes a second, and some are refused
    proxy.throttle(20)
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 16384,
        }
    )
    n = 600
    for i in range(n):
        p.produce("t", b"v" * 2000, b"k%d" % i)
    assert p.flush(60) == 0
    del p
    # Acknowledged while the uploads of the sealed segments are still waiting on the bucket.
    sealed = len(list((b.data_dir / "logs" / "t-0").glob("*.log"))) - 1
    listed = s3_endpoint.client().list_objects_v2(Bucket=s3_bucket, Prefix="slow/")  # type: ignore[attr-defined]
    uploaded = [o["Key"] for o in listed.get("Contents", []) if o["Key"].endswith(".log")]
    assert sealed > 4 and len(uploaded) < sealed
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe(["t"])
        got = 0
        deadline = time.monotonic() + 60
        while got < n and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == n
    finally:
        c.close()
    deadline = time.monotonic() + 60
    while _metric(b.http_url, "strata_tiering_s3_throttled_total") == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _metric(b.http_url, "strata_tiering_s3_throttled_total") > 0
    proxy.delay_s = 0.0
    assert b.stop() == 0
    assert "Traceback" not in b.output(), b.output()[-3000:]
