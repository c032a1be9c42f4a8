"""A same-origin policy for the HTTP listener's writes (REST v2/v3 and the console).

A page on any other site can make a browser send a "simple" cross-origin request, one
without a CORS preflight: a POST whose body is ``text/plain``, form-encoded or multipart,
from a ``<form>`` or a ``fetch(..., {mode: "no-cors"})``. The browser attaches the
operator's HTTP basic credentials (or cookies) to it, so without a check such a page could
create users, ACLs, quotas, reset groups or produce with the operator's rights (CSRF). The
page cannot read the answer, but the write would be done. This middleware refuses such
requests before any route runs, for the unsafe methods (POST, PUT, PATCH, DELETE):

* 403 (error_code 40301) when the request comes from another origin: its ``Origin``
  header, if present, is not the broker's own (its ``host[:port]`` differs from the
  request's ``Host``; the scheme is not compared, so a TLS-terminating proxy that keeps
  ``Host`` still works) nor one of ``http_allowed_origins``; or its ``Sec-Fetch-Site`` is
  ``cross-site`` or ``same-site`` (a sibling subdomain, or another port of the same host,
  is another origin too) and its ``Origin`` is not an allowed one. ``Origin: null``
  (sandboxed frames, ``file:`` and ``data:`` pages) is another origin.
* 415 (error_code 41500) when it carries a body, or a ``Content-Type``, that is not JSON:
  ``application/json`` or ``application/*+json`` (the Kafka REST media types
  ``application/vnd.kafka.*+json``). A browser cannot send those cross-origin without a
  preflight, which this listener never grants (it sends no CORS headers).

Requests without ``Origin`` or ``Sec-Fetch-Site`` (curl, the CLI, scripts, other brokers
relaying) pass the origin check: they are not made by a browser on behalf of a page, and
the credentials they carry are their own. Safe methods (GET, HEAD, OPTIONS) change nothing
and are never refused here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.rest.codec import V2, is_v2_path

UNSAFE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}
# Sec-Fetch-Site values that say the request was not started by the broker's own pages.
_OTHER_SITES: Final = frozenset({"cross-site", "same-site"})


def normalize_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-cased with the default port left out, None if ``origin``
    is not an http(s) origin (``null``, garbage)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in _DEFAULT_PORTS or not host or parts.path not in ("", "/") or parts.query:
        return None
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if port is None or str(port) == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return f"{scheme}://{netloc}"


def _netloc(origin: str) -> str:
    return origin.split("://", 1)[1]


def _host_netloc(host: str, scheme: str) -> str:
    """The ``Host`` header as ``host[:port]``, lower-cased, the scheme's default port left out."""
    host = host.strip().lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default is not None and host.endswith(f":{default}") and not host.endswith("]"):
        host = host[: -len(default) - 1]
    return host


def is_json_media(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _error(path: str, status: int, code: int, message: str) -> tuple[Message, Message]:
    body = json.dumps({"error_code": code, "message": message}).encode()
    media = V2 if is_v2_path(path) else "application/json"  # as api.rest.codec.error_response
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())],
    }
    return start, {"type": "http.response.body", "body": body}


class SameOriginWrites:
    """The ASGI middleware; ``allowed_origins`` are extra origins whose pages may write
    (a console served by a proxy under another name), as ``scheme://host[:port]``."""

    def __init__(self, app: ASGIApp, allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed: frozenset[str] = frozenset(
            o for o in (normalize_origin(a) for a in allowed_origins) if o is not None
        )

    def refusal(self, scope: Scope) -> tuple[int, int, str] | None:
        """(status, error_code, message) when the request must be refused, None otherwise."""
        headers: dict[str, str] = {}
        for k, v in scope.get("headers", ()):
            headers.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
        origin = headers.get("origin")
        own = _host_netloc(headers.get("host", ""), str(scope.get("scheme", "http")))
        allowed = False
        if origin is not None:
            normal = normalize_origin(origin)
            allowed = normal is not None and (normal in self.allowed or _netloc(normal) == own)
            if not allowed:
                return (
                    403,
                    40301,
                    f"cross-origin write refused: Origin {origin.strip()!r} is not this broker's "
                    f"({own or 'no Host'}) nor one of http_allowed_origins",
                )
        site = headers.get("sec-fetch-site", "").strip().lower()
        if site in _OTHER_SITES and not allowed:
            return 403, 40301, f"cross-origin write refused: Sec-Fetch-Site is {site!r}"
        content_type = headers.get("content-type")
        has_body = (
            headers.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in headers
        )
        if (content_type is not None or has_body) and not is_json_media(content_type or ""):
            return (
                415,
                41500,
                f"unsupported Content-Type {content_type or '(none)'!r}: writes take application/json "
                "(or the Kafka REST application/vnd.kafka.*+json types)",
            )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method", "GET").upper() in UNSAFE_METHODS:
            refused = self.refusal(scope)
            if refused is not None:
                start, body = _error(str(scope.get("path", "")), *refused)
                await send(start)
                await send(body)
                return
        await self.app(scope, receive, send)
