"""SaslAuthenticate (key 36), versions 0-2, flexible 2+.

    Request:  auth_bytes BYTES
    Response: error_code INT16, error_message NULLABLE_STRING, auth_bytes BYTES,
              session_lifetime_ms INT64 (v1+)

One SASL token each way per round trip (KIP-152); SCRAM takes two round trips, PLAIN one.
"""

from dataclasses import dataclass
from typing import Annotated

from kwire.schema import BYTES, INT16, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslAuthenticateRequest:
    auth_bytes: Annotated[bytes, W(BYTES)] = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslAuthenticateResponse:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    auth_bytes: Annotated[bytes, W(BYTES)] = b""
    session_lifetime_ms: Annotated[int, W(INT64, "1+")] = 0
