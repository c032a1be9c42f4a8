"""HTTP basic authentication for the REST API, against the same users as Kafka SASL.

An ASGI middleware: every HTTP request needs ``Authorization: Basic base64(user:password)``
naming a user of ``<data_dir>/meta/users.json``; otherwise 401 with
``WWW-Authenticate: Basic`` and the REST error shape (error_code 40101). The password is
checked like SASL/PLAIN, against the SCRAM-SHA-512 credential; since that costs a PBKDF2
run, successful checks are remembered (as a keyed digest, never the password) until the
users file changes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from api.security.sasl import PLAIN_CREDENTIAL
from api.security.scram import HASHES, verify_password
from api.security.users import UserTable

log = logging.getLogger("strata.rest")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """``(user, password)`` from an Authorization header value, None if absent or malformed."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, sep, password = text.partition(":")
    if not sep or not user:
        return None
    return user, password


class BasicAuthMiddleware:
    def __init__(self, app: ASGIApp, users: UserTable) -> None:
        self.app = app
        self.users = users
        self._key = secrets.token_bytes(32)  # keys the cache digests; lives in memory only
        self._ok: set[bytes] = set()
        self._version: tuple[int, int, int] | None = None

    async def _check(self, user: str, password: str) -> bool:
        store = self.users.reload()
        if store.version != self._version:  # users changed: forget every cached success
            self._ok.clear()
            self._version = store.version
        digest = hmac.digest(self._key, f"{user}\0{password}".encode(), "sha256")
        if digest in self._ok:
            return True
        cred = store.credential(user, PLAIN_CREDENTIAL)
        if cred is None:
            return False
        ok = await asyncio.to_thread(verify_password, HASHES[PLAIN_CREDENTIAL], cred, password)
        if ok:
            self._ok.add(digest)
        return ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = next(
            (v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"authorization"), None
        )
        creds = parse_basic(header)
        if creds is not None and await self._check(*creds):
            scope["strata.principal"] = creds[0]
            await self.app(scope, receive, send)
            return
        if creds is not None:
            log.warning("REST basic authentication failed for user %r from %s", creds[0], scope.get("client"))
        message = "authentication required" if creds is None else "invalid user name or password"
        body = json.dumps({"error_code": 40101, "message": message}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Basic realm="strata", charset="UTF-8"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
