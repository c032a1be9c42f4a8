"""SCRAM (RFC 5802, RFC 7677): stored credentials and the server side of one exchange. Pure.

Messages (RFC 5802 section 7), UTF-8, no channel binding (gs2 flag "n" or "y"):

    client-first:  gs2-header client-first-bare   gs2-header = "n,," | "n,a=<authzid>,"
                   client-first-bare = "n=<user>,r=<client nonce>[,ext...]"
    server-first:  "r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>"
    client-final:  "c=<base64 gs2-header>,r=<nonce>[,ext...],p=<base64 proof>"
    server-final:  "v=<base64 server signature>"

The server keeps only StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"), never the password. An unknown user gets
a made-up credential, so the exchange fails at the proof exactly like a wrong password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from hot.errors import AuthenticationError, InvalidConfigError

# mechanism -> hashlib name. SHA-1 is only here for RFC 5802's own test vector.
HASHES: Final[dict[str, str]] = {
    "SCRAM-SHA-256": "sha256",
    "SCRAM-SHA-512": "sha512",
}
MIN_ITERATIONS: Final = 4096  # Kafka's minimum
DEFAULT_ITERATIONS: Final = 4096


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def make_credential(
    hash_name: str, password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    if iterations < MIN_ITERATIONS and salt is None:
        raise InvalidConfigError(f"SCRAM iterations must be at least {MIN_ITERATIONS}, got {iterations}")
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = salted_password(hash_name, password, salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", hash_name),
    )


def verify_password(hash_name: str, cred: ScramCredential, password: str) -> bool:
    """True if ``password`` yields ``cred`` (SASL/PLAIN checks against the SCRAM credential)."""
    salted = salted_password(hash_name, password, cred.salt, cred.iterations)
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), cred.stored_key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise AuthenticationError(f"SCRAM: {what} is not valid base64") from None


def _decode_name(text: str) -> str:
    # RFC 5802: "=" and "," in names travel as "=3D" and "=2C"; any other "=" is illegal.
    out = text.replace("=2C", ",").replace("=3D", "=")
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationError("SCRAM: malformed user name")
    return out


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    attrs = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise AuthenticationError(f"SCRAM: malformed {what}")
        attrs.append((part[0], part[2:]))
    return attrs


class ScramServer:
    """One SCRAM exchange: ``first`` answers client-first, ``final`` answers client-final.

    Raises AuthenticationError on malformed messages and on a wrong proof; the messages
    name the failure but never any secret.
    """

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        *,
        hash_name: str | None = None,
        server_nonce: str | None = None,
    ) -> None:
        if hash_name is None:
            if mechanism not in HASHES:
                raise InvalidConfigError(f"unknown SCRAM mechanism {mechanism!r}")
            hash_name = HASHES[mechanism]
        self.mechanism = mechanism
        self._hash = hash_name
        self._lookup = lookup
        self._server_nonce = server_nonce or secrets.token_urlsafe(24)
        self.username: str | None = None
        self._cred: ScramCredential | None = None
        self._known = False
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.done = False

    def first(self, message: bytes) -> bytes:
        if self._cred is not None:
            raise AuthenticationError("SCRAM: client-first message sent twice")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("SCRAM: client-first message is not UTF-8") from None
        flag, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or flag not in ("n", "y"):
            raise AuthenticationError("SCRAM: channel binding is not supported, or malformed gs2 header")
        if authzid and not authzid.startswith("a="):
            raise AuthenticationError("SCRAM: malformed authorization identity")
        attrs = _attributes(bare, "client-first message")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise AuthenticationError("SCRAM: client-first message must start with n= and r=")
        if bare.startswith("m="):
            raise AuthenticationError("SCRAM: mandatory extensions are not supported")
        username = _decode_name(attrs[0][1])
        if authzid and _decode_name(authzid[2:]) != username:
            raise AuthenticationError("SCRAM: authorization identity differs from the user name")
        cred = self._lookup(username)
        self._known = cred is not None
        if cred is None:  # a made-up credential: fail at the proof, as for a wrong password
            cred = ScramCredential(
                salt=hashlib.new(self._hash, b"strata-unknown-user:" + username.encode()).digest()[:32],
                iterations=DEFAULT_ITERATIONS,
                stored_key=secrets.token_bytes(hashlib.new(self._hash).digest_size),
                server_key=secrets.token_bytes(hashlib.new(self._hash).digest_size),
            )
        self.username = username
        self._cred = cred
        self._gs2 = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._nonce = attrs[1][1] + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(cred.salt)},i={cred.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        cred = self._cred
        if cred is None or self.done:
            raise AuthenticationError("SCRAM: client-final message out of order")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("SCRAM: client-final message is not UTF-8") from None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise AuthenticationError("SCRAM: client-final message has no proof")
        attrs = _attributes(without_proof, "client-final message")
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise AuthenticationError("SCRAM: client-final message must start with c= and r=")
        if _unb64(attrs[0][1], "channel binding") != self._gs2.encode():
            raise AuthenticationError("SCRAM: channel binding does not match the gs2 header")
        # Kafka's server checks endsWith, and librdkafka 2.0 repeats the client nonce in
        # front of the combined one; the proof covers the message as sent either way.
        if not attrs[1][1].endswith(self._nonce):
            raise AuthenticationError("SCRAM: nonce does not match")
        proof = _unb64(proof_b64, "proof")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(cred.stored_key, auth_message, self._hash)
        if len(proof) != len(signature):
            raise AuthenticationError("SCRAM: proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not self._known or not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), cred.stored_key
        ):
            raise AuthenticationError("invalid user name or password")
        self.done = True
        return f"v={_b64(hmac.digest(cred.server_key, auth_message, self._hash))}".encode()


class ScramClient:
    """The client side of one exchange (what kclient speaks to a SASL listener).

    ``first()`` -> client-first; ``final(server_first)`` -> client-final (the proof);
    ``verify(server_final)`` checks the server's signature, so a server that does not know
    the password cannot pass for the broker.
    """

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        if mechanism not in HASHES:
            raise InvalidConfigError(f"unknown SCRAM mechanism {mechanism!r}")
        self._hash = HASHES[mechanism]
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            text = server_first.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("SCRAM: server-first message is not UTF-8") from None
        attrs = dict(_attributes(text, "server-first message"))
        nonce, salt_b64, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt_b64 is None or not iterations.isdigit():
            raise AuthenticationError("SCRAM: malformed server-first message")
        if int(iterations) < MIN_ITERATIONS:
            raise AuthenticationError(f"SCRAM: server asks for only {iterations} iterations")
        salted = salted_password(self._hash, self._password, _unb64(salt_b64, "salt"), int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise AuthenticationError(f"SCRAM: server refused: {text[2:]}")
        attrs = dict(_attributes(text, "server-final message"))
        if not hmac.compare_digest(_unb64(attrs.get("v", ""), "server signature"), self._server_signature):
            raise AuthenticationError(
                "SCRAM: the server's signature is wrong (it does not know the password)"
            )
