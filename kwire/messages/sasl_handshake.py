"""SaslHandshake (key 17), versions 0-1, never flexible.

    Request:  mechanism STRING
    Response: error_code INT16, mechanisms ARRAY(STRING)

v0 means the SASL tokens that follow are raw size-prefixed frames; v1 means they come
wrapped in SaslAuthenticate requests (KIP-152). Both are served (api.kafka_server:
``Connection.raw_sasl`` switches a connection to raw tokens after a v0 handshake).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslHandshakeRequest:
    mechanism: Annotated[str, W(STRING)]


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslHandshakeResponse:
    error_code: Annotated[int, W(INT16)] = 0
    mechanisms: Annotated[Sequence[str], W(ARRAY(STRING))] = ()
