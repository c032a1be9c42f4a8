"""SaslHandshake and SaslAuthenticate: the SASL exchange of a connection (KIP-43, KIP-152).

The mechanisms (PLAIN, SCRAM-SHA-256/512) and the user store live in api.security.sasl;
this module only drives the connection's ``SaslSession``. A v0 SaslHandshake switches the
connection to bare size-prefixed tokens, which api.kafka_server reads; a failed
authentication is answered with SASL_AUTHENTICATION_FAILED and the connection closed.
Without SASL on the listener both answer ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hot.errors import StrataError
from kwire import RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kwire.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_sasl_handshake(
    conn: Connection, header: RequestHeader, req: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    if conn.sasl is None:
        return SaslHandshakeResponse(error_code=E.ILLEGAL_SASL_STATE)
    try:
        conn.sasl.handshake(req.mechanism)
    except StrataError as exc:
        return SaslHandshakeResponse(error_code=kafka_code(exc), mechanisms=conn.sasl.enabled)
    if header.api_version == 0:  # raw tokens follow (KIP-43), not SaslAuthenticate requests
        conn.raw_sasl = header
    return SaslHandshakeResponse(mechanisms=conn.sasl.enabled)


async def handle_sasl_authenticate(
    conn: Connection, header: RequestHeader, req: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    session = conn.sasl
    if session is None:
        return SaslAuthenticateResponse(
            error_code=E.ILLEGAL_SASL_STATE, error_message="SASL is not enabled on this listener"
        )
    try:
        answer = await session.authenticate(req.auth_bytes)
    except StrataError as exc:
        conn.authentication_failed(session.mechanism or "?", session.username, exc)
        return SaslAuthenticateResponse(
            error_code=kafka_code(exc), error_message=f"Authentication failed: {exc}"
        )
    if session.authenticated:
        conn.authenticated(session)
    return SaslAuthenticateResponse(auth_bytes=answer)
