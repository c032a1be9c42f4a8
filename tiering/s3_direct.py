"""Direct GETs: an S3 ``GetObject`` signed and sent with botocore's own parts, without the
client's per-request machinery. The fast path of ``S3Store``'s blocking GETs.

Why: ``client.get_object`` costs 2.3-3 ms of CPU per call on the benchmark VM before any
body byte is read, nearly all of it Python with the GIL held (endpoint rule set, event
hooks, the user-agent string, parameter validation, response parsing). A cold remote read
makes one GET per segment, in worker threads that share the GIL with the event loop
serving the fetches; in ``bench_tiering`` botocore was a third of the broker's GIL-held
time. The same GET built here costs about 1.3 ms.

What is botocore's and what is not: the request is signed by ``botocore.auth.S3SigV4Auth``
with the client's credentials (refreshed by them as usual) and region, and sent by the
client's own HTTP session (connection pool, TLS verification, proxies, timeouts), as the
client would send it with path-style addressing. This module only builds the URL and the
``Range`` header.

Only success is handled here: a 200 or 206 with a Content-Length. Anything else (any
other status, any exception before the response) returns None, and ``S3Store`` repeats the
request through the client, which owns retries, redirects, error parsing and our
conversion of its errors; so error behaviour is exactly the client's. A 403 that the
client's own request then does not get means this module signs differently from botocore
on that endpoint: the direct path turns itself off for the store's lifetime (logged once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

logger = logging.getLogger(__name__)

_SIGNING_NAME = "s3"
_DEFAULT_REGION = "us-east-1"  # what botocore signs S3 requests with when no region is set


class DirectGet:
    """Direct GETs through ``client``'s session (see the module docstring). Thread-safe."""

    def __init__(self, http_session: Any, endpoint_url: str, region: str, credentials: Any) -> None:
        self._http = http_session
        self._endpoint = endpoint_url.rstrip("/")
        self._region = region
        self._credentials = credentials
        self._lock = threading.Lock()
        self.enabled = True
        self.served = 0  # GETs answered here (tests, metrics)
        self.puts = 0  # small PUTs answered here (tests, metrics)
        self.passed_on = 0  # GETs handed to the client (any non-success)
        self._last = threading.local()  # .forbidden: this thread's last pass-on was a 403
        # Told the status of every answer that is not a success (metrics: throttling).
        self.on_failure: Callable[[int], None] | None = None

    @classmethod
    def for_client(cls, client: Any, session: Any) -> DirectGet | None:
        """A direct path for a botocore S3 ``client`` made by boto3 ``session``, or None when
        this botocore's client lacks the parts it reuses, or signs other than SigV4."""
        http = getattr(getattr(client, "_endpoint", None), "http_session", None)
        if http is None or not hasattr(http, "send"):
            return None
        meta = client.meta
        if meta.config.signature_version not in (None, "s3v4"):
            return None
        credentials = session.get_credentials()
        if credentials is None:
            return None  # the client raises NoCredentialsError itself
        region = meta.region_name
        if not region or region == "aws-global":
            region = _DEFAULT_REGION
        return cls(http, meta.endpoint_url, region, credentials)

    def get(self, bucket: str, key: str, range_header: str | None = None) -> tuple[int, Any] | None:
        """(Content-Length, botocore ``StreamingBody``) of a successful GET, or None: ask
        the client. The caller reads or closes the body."""
        if not self.enabled:
            return None
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.response import StreamingBody

        headers = {"Range": range_header} if range_header else {}
        # Path-style, the key encoded as botocore's rest-xml serializer encodes ``{Key+}``.
        url = f"{self._endpoint}/{bucket}/{quote(key, safe='/~')}"
        request = AWSRequest(method="GET", url=url, headers=headers, stream_output=True)
        try:
            S3SigV4Auth(self._credentials.get_frozen_credentials(), _SIGNING_NAME, self._region).add_auth(
                request
            )
            response = self._http.send(request.prepare())
        except Exception as e:  # connection refused, timeouts, credential refresh: the client's to retry
            logger.debug("direct GET of %s failed (%s); the client retries it", key, e)
            self._pass_on(forbidden=False)
            return None
        raw = response.raw
        length = response.headers.get("Content-Length")
        if response.status_code not in (200, 206) or length is None or not length.isdigit():
            raw.close()  # its body is not read: the connection must not serve another request
            raw.release_conn()
            if self.on_failure is not None and response.status_code >= 300:
                self.on_failure(response.status_code)
            self._pass_on(forbidden=response.status_code == 403)
            return None
        self._last.forbidden = False
        with self._lock:
            self.served += 1
        return int(length), StreamingBody(raw, int(length))

    def put(self, bucket: str, key: str, body: bytes, checksum_crc32c: str) -> str | None:
        """The ETag of a successful unconditional PUT of ``body`` (with its
        ``x-amz-checksum-crc32c``), or None: ask the client. For small bodies (index
        files), whose ``put_object`` would cost the client's per-request Python more than
        the upload itself; signed like the GETs (the small body's SHA-256 included)."""
        if not self.enabled:
            return None
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest

        url = f"{self._endpoint}/{bucket}/{quote(key, safe='/~')}"
        headers = {"x-amz-checksum-crc32c": checksum_crc32c, "Content-Type": "binary/octet-stream"}
        request = AWSRequest(method="PUT", url=url, data=body, headers=headers)
        try:
            S3SigV4Auth(self._credentials.get_frozen_credentials(), _SIGNING_NAME, self._region).add_auth(
                request
            )
            response = self._http.send(request.prepare())
        except Exception as e:
            logger.debug("direct PUT of %s failed (%s); the client retries it", key, e)
            self._pass_on(forbidden=False)
            return None
        etag = response.headers.get("ETag")
        if response.status_code != 200 or not etag:
            if self.on_failure is not None:
                self.on_failure(response.status_code)
            self._pass_on(forbidden=response.status_code == 403)
            return None
        self._last.forbidden = False
        with self._lock:
            self.puts += 1
        return str(etag)

    def client_succeeded(self) -> None:
        """Called by the thread whose ``get`` passed on, when the client's request then
        succeeded: if this path got a 403, that was a signing difference, not a denial;
        stop using the direct path."""
        if not getattr(self._last, "forbidden", False):
            return
        self._last.forbidden = False
        with self._lock:
            if not self.enabled:
                return
            self.enabled = False
        logger.warning(
            "direct S3 GETs got 403 where the client's did not: using the client for every GET "
            "from now on (endpoint %s)",
            self._endpoint,
        )

    def _pass_on(self, *, forbidden: bool) -> None:
        self._last.forbidden = forbidden
        with self._lock:
            self.passed_on += 1
