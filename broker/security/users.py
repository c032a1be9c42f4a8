"""SASL credentials: the users document of the metadata store (broker.security.stored keeps
it at ``<prefix>security/users``, in etcd or a single node's embedded store):

    {"version": 1,
     "users": {"<name>": {"SCRAM-SHA-256": {"salt": b64, "iterations": int,
                                            "stored_key": b64, "server_key": b64},
                          "SCRAM-SHA-512": {...}}}}

Only SCRAM stored/server keys are kept (salted PBKDF2, RFC 5802); SASL/PLAIN verifies a
password against the SCRAM-SHA-512 credential. Brokers watch the key, so ``strata users
add`` takes effect without a restart.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Final

from hot.errors import InvalidConfigError, InvalidRequestError
from kclient.scram import DEFAULT_ITERATIONS, HASHES, ScramCredential, make_credential

MECHANISMS: Final[tuple[str, ...]] = tuple(HASHES)
_NAME = re.compile(r"^[A-Za-z0-9._@\-]{1,255}$")


def check_username(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidRequestError(
            f"invalid user name {name!r}: 1-255 characters of letters, digits, '.', '_', '@', '-'"
        )
    return name


def _encode(cred: ScramCredential) -> dict[str, Any]:
    return {
        "salt": base64.b64encode(cred.salt).decode(),
        "iterations": cred.iterations,
        "stored_key": base64.b64encode(cred.stored_key).decode(),
        "server_key": base64.b64encode(cred.server_key).decode(),
    }


def _decode(path: str, user: str, mech: str, raw: Any) -> ScramCredential:
    try:
        return ScramCredential(
            salt=base64.b64decode(raw["salt"], validate=True),
            iterations=int(raw["iterations"]),
            stored_key=base64.b64decode(raw["stored_key"], validate=True),
            server_key=base64.b64decode(raw["server_key"], validate=True),
        )
    except (KeyError, TypeError, ValueError, binascii.Error):
        raise InvalidConfigError(f"{path}: malformed {mech} credential of user {user!r}") from None


class UserTable:
    """Credentials per user and mechanism, and their JSON document."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def reload(self) -> UserTable:
        """Bring the table up to date with where it lives; in memory only: nothing to do."""
        return self

    @property
    def version(self) -> tuple[int, int, int] | None:
        """Changes whenever the stored users do (what REST basic auth's cache keys on)."""
        return None

    def load_document(self, data: bytes | None, where: str) -> None:
        users: dict[str, dict[str, ScramCredential]] = {}
        if data is not None:
            try:
                doc = json.loads(data)
            except ValueError:
                raise InvalidConfigError(f"{where} is not valid JSON") from None
            if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("users"), dict):
                raise InvalidConfigError(f"{where}: expected {{'version': 1, 'users': {{...}}}}")
            for name, mechs in doc["users"].items():
                if not isinstance(mechs, dict):
                    raise InvalidConfigError(f"{where}: user {name!r} must map mechanisms to credentials")
                users[name] = {m: _decode(where, name, m, c) for m, c in mechs.items() if m in HASHES}
        self._users = users

    def document(self) -> bytes:
        doc = {
            "version": 1,
            "users": {
                u: {m: _encode(c) for m, c in sorted(mechs.items())}
                for u, mechs in sorted(self._users.items())
            },
        }
        return json.dumps(doc, indent=1).encode()

    def names(self) -> list[str]:
        return sorted(self._users)

    def mechanisms(self, user: str) -> list[str]:
        return sorted(self._users.get(user, {}))

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def put_password(self, user: str, password: str, *, iterations: int = DEFAULT_ITERATIONS) -> None:
        """In memory: salted SCRAM keys of every mechanism for ``password``."""
        check_username(user)
        if not password:
            raise InvalidRequestError("the password must not be empty")
        self._users[user] = {
            m: make_credential(h, password, iterations=iterations) for m, h in HASHES.items()
        }

    def remove(self, user: str) -> bool:
        return self._users.pop(user, None) is not None

    def put_credential(self, user: str, mechanism: str, cred: ScramCredential) -> None:
        """In memory: one mechanism's credential (AlterUserScramCredentials' upsertion)."""
        self._users.setdefault(check_username(user), {})[mechanism] = cred

    def remove_credential(self, user: str, mechanism: str) -> bool:
        """In memory: drop one mechanism's credential (the user too when it was the last)."""
        mechs = self._users.get(user)
        if mechs is None or mechs.pop(mechanism, None) is None:
            return False
        if not mechs:
            del self._users[user]
        return True
