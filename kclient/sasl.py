"""The client side of SASL PLAIN and SCRAM (RFC 4616, RFC 5802), for broker-to-broker
connections (broker.inter_broker): SaslHandshake v1, then SaslAuthenticate rounds.

Errors are AuthenticationError naming the failure, never the password or a proof.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from hot.errors import AuthenticationError
from kclient.scram import ScramClient
from kwire import ApiKey
from kwire.error_table import error_for_code
from kwire.messages.sasl_authenticate import SaslAuthenticateRequest
from kwire.messages.sasl_handshake import SaslHandshakeRequest

# (api key, request) -> response
Call = Callable[[int, Any], Awaitable[Any]]


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
