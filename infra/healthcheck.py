#!/usr/bin/env python3
"""Health check of the Strata broker in this container (infra/Dockerfile's HEALTHCHECK, the
Kubernetes readiness probe): it asks the broker's HTTP listener where the broker's own
configuration puts it.

The configuration is read as ``strata serve`` reads it (broker.config.load_config): the
``STRATA_CONFIG`` TOML file under the ``STRATA_*`` variables. Flags given to ``serve`` on
the command line are not visible here, which is why the image sets its listeners with
``STRATA_*`` variables: override those (``-e STRATA_HTTP_LISTEN=0.0.0.0:9000``), not
flags, and the check follows.

- the address: ``http_listen``, with a wildcard host (``0.0.0.0``, ``::``) asked on
  loopback;
- TLS: with ``tls.cert`` set the listener speaks HTTPS; the server certificate is checked
  against ``tls.ca`` when there is one (not its host name: the check dials loopback, the
  certificate names the broker), and with ``tls.client_auth`` on the broker's own
  certificate and key are presented as the client's;
- ``GET /healthz``: 200 is healthy; 401 is too (REST authentication is on: the broker
  answers, and this check holds no credentials); 503 ``{"status": "starting"}`` is a
  broker still starting (api.startup_gate), reported as such;
- ``--ready`` (the Kubernetes readiness probe): besides, the Kafka listener
  (``kafka_listen``, TLS as configured) must answer an ApiVersions request, which Kafka
  serves before SASL authentication: the broker takes Kafka clients. A degraded broker
  (object store out, disk at its high-water mark) stays ready: it still serves what it
  can, and taking every broker out of the bootstrap Service during an object-store
  outage would help nobody.

Prints one line and exits 0 (healthy) or 1; never a traceback.
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.security.config import TlsConfig

TIMEOUT_S = 3.0
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}


def _loopback(host: str) -> str:
    return _WILDCARDS.get(host, host)


def _tls_context(tls: TlsConfig) -> ssl.SSLContext:
    if tls.ca is not None:
        ctx = ssl.create_default_context(cafile=str(tls.ca))
    else:  # nothing to check the server with: the question is only whether it answers
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.check_hostname = False  # loopback is dialled; the certificate names the broker
    if tls.client_auth != "none" and tls.cert is not None and tls.key is not None:
        ctx.load_cert_chain(str(tls.cert), str(tls.key))
    return ctx


def _get(url: str, ctx: ssl.SSLContext | None) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S, context=ctx) as resp:
            return int(resp.status), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:  # a 503 during the start says so: {"status": "starting"}
            return exc.code, json.loads(exc.read() or b"null")
        except (OSError, ValueError):
            return exc.code, None


def _kafka_answers(host: str, port: int, ctx: ssl.SSLContext | None) -> str | None:
    """None when the Kafka listener answers ApiVersions without an error, else why not."""
    from kwire import ApiKey, ApiVersionsRequest, decode_response, encode_request, frame_bytes

    version = 3
    request = ApiVersionsRequest(client_software_name="strata-healthcheck", client_software_version="1")
    frame = frame_bytes(encode_request(ApiKey.API_VERSIONS, version, 1, "strata-healthcheck", request))
    with socket.create_connection((host, port), timeout=TIMEOUT_S) as raw:
        sock = ctx.wrap_socket(raw, server_hostname=host) if ctx is not None else raw
        with sock:
            sock.sendall(frame)
            data = b""
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                chunk = sock.recv(65536)
                if not chunk:
                    return "the Kafka listener closed the connection without answering"
                data += chunk
    _, body = decode_response(ApiKey.API_VERSIONS, version, data[4:])
    return None if body.error_code == 0 else f"ApiVersions answered error code {body.error_code}"


def check(ready: bool) -> tuple[bool, str]:
    """(healthy, the line to print)."""
    from broker.config import load_config

    cfg = load_config()
    ctx = _tls_context(cfg.tls) if cfg.tls.enabled else None
    host = _loopback(cfg.http_listen.host)
    url_host = f"[{host}]" if ":" in host else host
    base = f"{'https' if ctx is not None else 'http'}://{url_host}:{cfg.http_listen.port}"
    try:
        status, body = _get(f"{base}/healthz", ctx)
    except OSError as exc:  # refused, timed out, a TLS failure (URLError is one)
        return False, f"unhealthy: cannot reach {base}/healthz: {getattr(exc, 'reason', None) or exc}"
    if status == 401:
        alive = f"{base} answers (REST authentication is on)"
    elif status == 200:
        alive = f"broker {body.get('broker_id') if isinstance(body, dict) else None} at {base}"
    elif status == 503 and isinstance(body, dict) and body.get("status") == "starting":
        return False, f"starting: {base} answers once the broker is ready"  # api.startup_gate
    else:
        return False, f"unhealthy: {base}/healthz answered HTTP {status}"
    if not ready:
        return True, f"ok: {alive}"
    kafka = cfg.kafka_listen
    try:
        problem = _kafka_answers(_loopback(kafka.host), kafka.port, ctx)
    except OSError as exc:  # refused, timed out, a TLS failure
        problem = f"the Kafka listener does not answer: {exc.strerror or exc}"
    if problem is not None:
        return False, f"not ready: {problem} ({_loopback(kafka.host)}:{kafka.port})"
    return True, f"ready: {alive}, Kafka on {_loopback(kafka.host)}:{kafka.port}"


def main(argv: list[str]) -> int:
    args = argv[1:]
    if args not in ([], ["--ready"]):
        print("usage: healthcheck.py [--ready]", file=sys.stderr)
        return 2
    try:
        ok, line = check(ready=bool(args))
    except Exception as exc:  # a config error, a refused connection, a TLS failure: one line
        reason = getattr(exc, "reason", None) or exc
        ok, line = False, f"unhealthy: {type(exc).__name__}: {reason}"
    print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
