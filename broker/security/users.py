"""The local credentials file of a single-node broker: ``<data_dir>/meta/users.json``.

    {"version": 1,
     "users": {"<name>": {"SCRAM-SHA-256": {"salt": b64, "iterations": int,
                                            "stored_key": b64, "server_key": b64},
                          "SCRAM-SHA-512": {...}}}}

Only SCRAM stored/server keys are kept (salted PBKDF2, RFC 5802); SASL/PLAIN verifies a
password against the SCRAM-SHA-512 credential. The file is written atomically (temp file,
fsync, rename, fsync of the directory) with mode 0600. The broker re-reads it when it
changes (new inode, mtime or size), so ``strata users add`` takes effect without a restart.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Any, Final

from api.client.scram import DEFAULT_ITERATIONS, HASHES, ScramCredential, make_credential
from broker.security.files import stat_version, write_atomic
from hot.errors import InvalidConfigError, InvalidRequestError, StorageError

MECHANISMS: Final[tuple[str, ...]] = tuple(HASHES)
_NAME = re.compile(r"^[A-Za-z0-9._@\-]{1,255}$")


def users_path(data_dir: Path) -> Path:
    return data_dir / "meta" / "users.json"


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


def _decode(path: Path | str, user: str, mech: str, raw: Any) -> ScramCredential:
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
    """Credentials per user and mechanism, and their JSON document (file or etcd alike)."""

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


class UserStore(UserTable):
    """The users of ``<data_dir>/meta/users.json``, re-read when the file changes."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._mtime: tuple[int, int, int] | None = None

    def _stat(self) -> tuple[int, int, int] | None:
        return stat_version(self.path)

    def reload(self) -> UserStore:
        """Re-read the file if it changed since the last read (absent: no users)."""
        mtime = self._stat()
        if mtime == self._mtime and (mtime is not None or not self._users):
            return self
        data = None
        if mtime is not None:
            try:
                data = self.path.read_bytes()
            except OSError as exc:
                raise StorageError(f"cannot read {self.path}: {exc.strerror}") from None
        self.load_document(data, str(self.path))
        self._mtime = mtime
        return self

    @property
    def version(self) -> tuple[int, int, int] | None:
        """Changes whenever the file does (inode, mtime, size as last read; None: no file)."""
        return self._mtime

    def set_password(self, user: str, password: str, *, iterations: int = DEFAULT_ITERATIONS) -> None:
        check_username(user)
        self.reload()
        self.put_password(user, password, iterations=iterations)
        self._save()

    def delete(self, user: str) -> bool:
        self.reload()
        if not self.remove(user):
            return False
        self._save()
        return True

    def _save(self) -> None:
        write_atomic(self.path, self.document())
        self._mtime = self._stat()
