"""HTTP authentication for the REST API: basic auth against the same users as Kafka SASL,
and bearer tokens (broker.security.tokens).

An ASGI middleware: every HTTP request needs ``Authorization: Basic base64(user:password)``
naming a user of ``<data_dir>/meta/users.json``, or ``Authorization: Bearer <token>`` with
a token of ``<data_dir>/meta/tokens.json`` (whichever are enabled); otherwise 401 with a
``WWW-Authenticate`` challenge per enabled scheme (``error="invalid_token"`` for an
unknown, expired or revoked token, RFC 6750) and the REST error shape (error_code
40101). The password is checked like SASL/PLAIN, against the SCRAM-SHA-512 credential;
since that costs a PBKDF2 run, successful checks are remembered (as a keyed digest,
never the password) until the users file changes. Tokens and passwords are never logged.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import logging
import secrets

from starlette.types import ASGIApp, Receive, Scope, Send

from api.security.sasl import PLAIN_CREDENTIAL
from broker.security.tokens import TokenStore
from broker.security.users import UserTable
from kclient.scram import HASHES, verify_password

log = logging.getLogger("strata.rest")


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


def parse_bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class BasicAuthMiddleware:
    def __init__(self, app: ASGIApp, users: UserTable | None, tokens: TokenStore | None = None) -> None:
        self.app = app
        self.users = users  # None: basic auth not accepted
        self.tokens = tokens  # None: bearer tokens not accepted
        self._key = secrets.token_bytes(32)  # keys the cache digests; lives in memory only
        self._ok: set[bytes] = set()
        self._version: tuple[int, int, int] | None = None

    async def _check(self, user: str, password: str) -> bool:
        if self.users is None:
            return False
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
        creds = parse_basic(header) if self.users is not None else None
        bearer = parse_bearer(header) if self.tokens is not None else None
        if creds is not None and await self._check(*creds):
            scope["strata.principal"] = creds[0]
            await self.app(scope, receive, send)
            return
        if bearer is not None and self.tokens is not None:
            info = self.tokens.verify(bearer)
            if info is not None:
                scope["strata.principal"] = info.user
                await self.app(scope, receive, send)
                return
            # never the token itself: it is the credential
            log.warning(
                "REST bearer token refused (unknown, expired or revoked) from %s", scope.get("client")
            )
        if creds is not None:
            log.warning("REST basic authentication failed for user %r from %s", creds[0], scope.get("client"))
        if creds is not None:
            message = "invalid user name or password"
        elif bearer is not None:
            message = "invalid, expired or revoked token"
        else:
            message = "authentication required"
        challenges = []
        if self.users is not None:
            challenges.append((b"www-authenticate", b'Basic realm="strata", charset="UTF-8"'))
        if self.tokens is not None:
            value = b'Bearer realm="strata"' + (b', error="invalid_token"' if bearer is not None else b"")
            challenges.append((b"www-authenticate", value))
        body = json.dumps({"error_code": 40101, "message": message}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *challenges,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
