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
  answers, and this check holds no credentials);
- ``--ready``: ``GET /v1/status`` must say ``ok`` (not ``degraded``: object store
  unavailable, partitions offline, disk high water); with REST authentication on, the
  liveness answer stands in for it.

Prints one line and exits 0 (healthy) or 1; never a traceback.
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 3.0
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}


def _target() -> tuple[str, ssl.SSLContext | None]:
    """The base URL of the HTTP listener and the TLS context to reach it with."""
    from broker.config import load_config

    cfg = load_config()
    host = _WILDCARDS.get(cfg.http_listen.host, cfg.http_listen.host)
    if ":" in host:
        host = f"[{host}]"
    tls = cfg.tls
    if not tls.enabled:
        return f"http://{host}:{cfg.http_listen.port}", None
    if tls.ca is not None:
        ctx = ssl.create_default_context(cafile=str(tls.ca))
        ctx.check_hostname = False
    else:  # nothing to check the server with: the question is only whether it answers
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.client_auth != "none" and tls.cert is not None and tls.key is not None:
        ctx.load_cert_chain(str(tls.cert), str(tls.key))
    return f"https://{host}:{cfg.http_listen.port}", ctx


def _get(url: str, ctx: ssl.SSLContext | None) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S, context=ctx) as resp:
            return int(resp.status), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None


def check(ready: bool) -> tuple[bool, str]:
    """(healthy, the line to print)."""
    base, ctx = _target()
    status, body = _get(f"{base}/healthz", ctx)
    if status == 401:
        return True, f"ok: {base} answers (REST authentication is on)"
    if status != 200:
        return False, f"unhealthy: {base}/healthz answered HTTP {status}"
    broker = body.get("broker_id") if isinstance(body, dict) else None
    if not ready:
        return True, f"ok: broker {broker} at {base}"
    status, body = _get(f"{base}/v1/status", ctx)
    if status == 401:
        return True, f"ok: broker {broker} at {base} (REST authentication is on: status not read)"
    if status != 200 or not isinstance(body, dict):
        return False, f"not ready: {base}/v1/status answered HTTP {status}"
    if body.get("status") != "ok":
        reasons = ", ".join(str(r) for r in body.get("degraded_reasons") or ())
        return False, f"not ready: broker {broker} is {body.get('status')}: {reasons}"
    return True, f"ready: broker {broker} at {base}"


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
