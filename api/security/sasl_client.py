"""The client side of SASL PLAIN and SCRAM (RFC 4616, RFC 5802), for broker-to-broker
connections (cluster.inter_broker): SaslHandshake v1, then SaslAuthenticate rounds.

Errors are AuthenticationError naming the failure, never the password or a proof.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from api.protocol import ApiKey
from api.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from api.protocol.messages.sasl_handshake import SaslHandshakeRequest
from api.security.scram import HASHES, salted_password
from hot.errors import AuthenticationError, error_for_code

# (api key, request) -> response
Call = Callable[[int, Any], Awaitable[Any]]


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str, *, nonce: str | None = None) -> None:
        self._hash = HASHES[mechanism]
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(user)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = dict(a.split("=", 1) for a in text.split(",") if "=" in a)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or not salt or not iterations.isdigit():
            raise AuthenticationError("SCRAM: malformed server-first message")
        salted = salted_password(self._hash, self._password, base64.b64decode(salt), int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:] or "=="), self._server_signature
        ):
            raise AuthenticationError("SCRAM: the server's signature does not match (not the real broker?)")


async def authenticate(call: Call, mechanism: str, user: str, password: str) -> None:
    """Authenticate a fresh connection; raises AuthenticationError (or the broker's error)."""
    hs = await call(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=mechanism))
    if hs.error_code:
        raise error_for_code(hs.error_code, f"SASL handshake for {mechanism}: enabled {list(hs.mechanisms)}")

    async def step(token: bytes) -> bytes:
        resp = await call(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token))
        if resp.error_code:
            raise AuthenticationError(
                f"SASL {mechanism} as {user!r}: {resp.error_message or resp.error_code}"
            )
        answer: bytes = resp.auth_bytes
        return answer

    if mechanism == "PLAIN":
        await step(f"\0{user}\0{password}".encode())
        return
    scram = ScramClient(mechanism, user, password)
    server_first = await step(scram.first())
    final = await asyncio.to_thread(scram.final, server_first)  # PBKDF2: off the loop
    scram.verify(await step(final))
