"""S3 throttling: a bucket answering 503 SlowDown is retried with botocore's backoff (a bounded
number of attempts), and the attempts are counted for ``/metrics``.

The endpoint is moto's server behind a small forwarding proxy on loopback that answers the
next ``n`` requests with S3's own 503 SlowDown error instead of forwarding them.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from hot.errors import RetriableObjectStoreError
from tests.brokers import S3Endpoint
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
