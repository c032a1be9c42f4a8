"""REST bearer tokens: ``<data_dir>/meta/tokens.json``, managed with ``strata tokens``.

    {"version": 1,
     "tokens": {"<sha256 hex of the token>": {"user": str, "created": epoch s,
                                              "expires": epoch s or null}}}

A token is 32 random bytes, URL-safe base64, prefixed ``strata_`` (so it is recognisable
in a leaked file or a secret scanner). Only its SHA-256 is stored: a copy of the file
does not let anyone authenticate. The token's id, shown by ``list`` and taken by
``revoke``, is the first 12 hex digits of that digest. The file is written atomically
with mode 0600 and re-read by the broker when it changes, so ``create`` and ``revoke``
take effect without a restart. An HTTP request with ``Authorization: Bearer <token>``
acts as the token's user (the same principal as basic auth or SASL).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from broker.security.files import stat_version, write_atomic
from broker.security.users import check_username
from hot.errors import InvalidConfigError, InvalidRequestError, StorageError

PREFIX: Final = "strata_"
ID_LENGTH: Final = 12
_TTL = re.compile(r"^(\d+)([smhd]?)$")
_UNITS: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def tokens_path(data_dir: Path) -> Path:
    return data_dir / "meta" / "tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_ttl(text: str) -> float | None:
    """``90``, ``30m``, ``12h``, ``30d`` -> seconds; ``never`` -> None (no expiry)."""
    text = text.strip().lower()
    if text == "never":
        return None
    m = _TTL.match(text)
    if not m or int(m.group(1)) <= 0:
        raise InvalidRequestError(f"invalid ttl {text!r}: a positive number with s, m, h or d, or 'never'")
    return int(m.group(1)) * _UNITS[m.group(2)]


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: str
    user: str
    created: float
    expires: float | None

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires


class TokenStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._tokens: dict[str, TokenInfo] = {}  # by digest
        self._version: tuple[int, int, int] | None = None

    def reload(self) -> TokenStore:
        version = stat_version(self.path)
        if version == self._version:
            return self
        tokens: dict[str, TokenInfo] = {}
        if version is not None:
            try:
                doc = json.loads(self.path.read_text("utf-8"))
            except OSError as exc:
                raise StorageError(f"cannot read {self.path}: {exc.strerror}") from None
            except ValueError:
                raise InvalidConfigError(f"{self.path} is not valid JSON") from None
            if (
                not isinstance(doc, dict)
                or doc.get("version") != 1
                or not isinstance(doc.get("tokens"), dict)
            ):
                raise InvalidConfigError(f"{self.path}: expected {{'version': 1, 'tokens': {{...}}}}")
            for h, t in doc["tokens"].items():
                try:
                    expires = t["expires"]
                    tokens[h] = TokenInfo(
                        h[:ID_LENGTH],
                        str(t["user"]),
                        float(t["created"]),
                        None if expires is None else float(expires),
                    )
                except (KeyError, TypeError, ValueError):
                    raise InvalidConfigError(f"{self.path}: malformed token entry {h[:ID_LENGTH]}") from None
        self._tokens, self._version = tokens, version
        return self

    def infos(self) -> list[TokenInfo]:
        return sorted(self.reload()._tokens.values(), key=lambda t: (t.user, t.created))

    def create(self, user: str, ttl: float | None, *, now: float | None = None) -> tuple[str, TokenInfo]:
        """A new token for ``user``: the token itself (shown once, never stored) and its info."""
        check_username(user)
        now = time.time() if now is None else now
        token = PREFIX + secrets.token_urlsafe(32)
        h = digest(token)
        info = TokenInfo(h[:ID_LENGTH], user, now, None if ttl is None else now + ttl)
        self.reload()
        self._tokens[h] = info
        self._save()
        return token, info

    def revoke(self, *, token_id: str | None = None, user: str | None = None) -> list[TokenInfo]:
        """Delete the token with this id (or id prefix, if unambiguous), or every token of ``user``."""
        self.reload()
        if token_id is not None:
            hits = [h for h in self._tokens if h.startswith(token_id.lower())] if token_id else []
            if len(hits) > 1:
                raise InvalidRequestError(f"token id {token_id!r} is ambiguous; give more digits")
        else:
            hits = [h for h, t in self._tokens.items() if t.user == user]
        gone = [self._tokens.pop(h) for h in hits]
        if gone:
            self._save()
        return gone

    def verify(self, token: str, *, now: float | None = None) -> TokenInfo | None:
        """The token's info if it is known and not expired; None otherwise."""
        info = self.reload()._tokens.get(digest(token))
        if info is None or info.expired(time.time() if now is None else now):
            return None
        return info

    def _save(self) -> None:
        doc = {
            "version": 1,
            "tokens": {
                h: {"user": t.user, "created": t.created, "expires": t.expires}
                for h, t in sorted(self._tokens.items())
            },
        }
        write_atomic(self.path, json.dumps(doc, indent=1).encode())
        self._version = stat_version(self.path)
