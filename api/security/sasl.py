"""The SASL state of one Kafka connection: handshake, then PLAIN or SCRAM tokens.

States: start -> (SaslHandshake) mechanism chosen -> (SaslAuthenticate x1 for PLAIN,
x2 for SCRAM) authenticated. Anything else out of order is IllegalSaslStateError. A
failed authentication is final for the connection (the server answers and closes).

PLAIN token (RFC 4616): ``[authzid] NUL authcid NUL passwd``; the password is checked
against the user's SCRAM-SHA-512 credential (PBKDF2 in a worker thread: it costs
milliseconds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from broker.security.users import UserTable
from hot.errors import AuthenticationError, IllegalSaslStateError, UnsupportedSaslMechanismError
from kclient.scram import HASHES, ScramServer, make_credential, verify_password

PLAIN_CREDENTIAL = "SCRAM-SHA-512"
FAILED = "invalid user name or password"
# checked for unknown PLAIN users so both failures cost the same
_DUMMY = make_credential(HASHES[PLAIN_CREDENTIAL], "strata-no-such-user", salt=b"\0" * 32)


class SaslSession:
    def __init__(self, mechanisms: Sequence[str], users: UserTable) -> None:
        self.enabled = tuple(mechanisms)
        self.users = users
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.username: str | None = None  # who the client claims to be (for logs)
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> None:
        if self.mechanism is not None:
            raise IllegalSaslStateError("SASL handshake already done on this connection")
        if mechanism not in self.enabled:
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {mechanism!r} is not enabled (enabled: {', '.join(self.enabled)})"
            )
        self.mechanism = mechanism

    async def authenticate(self, token: bytes) -> bytes:
        """The server's answer to one client token; sets ``principal`` when complete."""
        if self.mechanism is None or self.authenticated:
            raise IllegalSaslStateError("SaslAuthenticate without a SaslHandshake, or after success")
        if self.mechanism == "PLAIN":
            await self._plain(token)
            return b""
        if self._scram is None:
            users = self.users.reload()
            mech = self.mechanism
            self._scram = ScramServer(mech, lambda u: users.credential(u, mech))
            answer = self._scram.first(token)
            self.username = self._scram.username
            return answer
        answer = self._scram.final(token)
        self.principal = self._scram.username
        return answer

    async def _plain(self, token: bytes) -> None:
        parts = token.split(b"\0")
        if len(parts) != 3 or not parts[1]:
            raise AuthenticationError("PLAIN: malformed token (expected authzid NUL user NUL password)")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationError("PLAIN: token is not UTF-8") from None
        self.username = user
        if authzid and authzid != user:
            raise AuthenticationError("PLAIN: authorization identity differs from the user name")
        cred = self.users.reload().credential(user, PLAIN_CREDENTIAL)
        hash_name = HASHES[PLAIN_CREDENTIAL]
        ok = await asyncio.to_thread(verify_password, hash_name, cred or _DUMMY, password)
        if not ok or cred is None:
            raise AuthenticationError(FAILED)
        self.principal = user
