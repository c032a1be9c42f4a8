"""Security settings: the ``[tls]`` and ``[sasl]`` tables of the broker's TOML.

    [tls]                         # set cert and key: TLS on the Kafka and HTTP listeners
    cert = "/etc/strata/server.pem"      # PEM certificate chain, leaf first
    key = "/etc/strata/server.key"       # PEM private key (unencrypted)
    ca = "/etc/strata/ca.pem"            # CA bundle client certificates are checked against
    client_auth = "none"                 # none | requested | required (mutual TLS)
    [sasl]                        # SASL on the Kafka listener (SASL_SSL with [tls], else SASL_PLAINTEXT)
    mechanisms = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"   # empty: no authentication
    rest_basic_auth = false       # true: the HTTP server requires basic auth by the same users
    rest_bearer_auth = false      # true: it accepts bearer tokens (strata tokens create)
    [authorization]               # ACLs (broker.security.acl) on the Kafka and HTTP listeners
    enabled = false
    super_users = "User:admin,User:CN=ops"   # allowed everything, ACLs or not
    allow_everyone_if_no_acl_found = false   # Kafka's default: deny what no ACL names

Environment: ``STRATA_TLS_CERT``, ``STRATA_TLS_KEY``, ``STRATA_TLS_CA``,
``STRATA_TLS_CLIENT_AUTH``, ``STRATA_SASL_MECHANISMS``, ``STRATA_SASL_REST_BASIC_AUTH``,
``STRATA_AUTHORIZATION_ENABLED``, ``STRATA_AUTHORIZATION_SUPER_USERS``,
``STRATA_AUTHORIZATION_ALLOW_EVERYONE_IF_NO_ACL_FOUND``, ``STRATA_SASL_REST_BEARER_AUTH``;
``strata serve`` flags ``--tls-cert`` ... ``--rest-auth``.
With both REST schemes on, a request may use either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from broker.security.acl import parse_principals
from hot.errors import InvalidConfigError
from kclient.security import SASL_MECHANISMS
from kwire.acl import AclError

CLIENT_AUTH: Final = ("none", "requested", "required")
TLS_KEYS: Final = ("cert", "key", "ca", "client_auth")
AUTHZ_KEYS: Final = ("enabled", "super_users", "allow_everyone_if_no_acl_found")
SASL_KEYS: Final = ("mechanisms", "rest_basic_auth", "rest_bearer_auth")


@dataclass(frozen=True, slots=True)
class TlsConfig:
    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None
    client_auth: str = "none"

    @property
    def enabled(self) -> bool:
        return self.cert is not None

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> TlsConfig:
        for k in values:
            if k not in TLS_KEYS:
                raise InvalidConfigError(f"unknown tls setting {k!r} (known: {', '.join(TLS_KEYS)})")
        paths = {k: _path(values.get(k), f"tls.{k}") for k in ("cert", "key", "ca")}
        client_auth = str(values.get("client_auth", "none")).strip().lower()
        if client_auth not in CLIENT_AUTH:
            raise InvalidConfigError(
                f"tls.client_auth: expected one of {', '.join(CLIENT_AUTH)}, got {client_auth!r}"
            )
        if (paths["cert"] is None) != (paths["key"] is None):
            raise InvalidConfigError("tls: cert and key must be given together")
        if client_auth != "none" and paths["ca"] is None:
            raise InvalidConfigError(
                f"tls.client_auth={client_auth} needs tls.ca to check client certificates"
            )
        if paths["cert"] is None and (paths["ca"] is not None or client_auth != "none"):
            raise InvalidConfigError("tls.ca and tls.client_auth need tls.cert and tls.key")
        return cls(paths["cert"], paths["key"], paths["ca"], client_auth)


@dataclass(frozen=True, slots=True)
class SaslConfig:
    mechanisms: tuple[str, ...] = ()
    rest_basic_auth: bool = False
    rest_bearer_auth: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.mechanisms)

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> SaslConfig:
        for k in values:
            if k not in SASL_KEYS:
                raise InvalidConfigError(f"unknown sasl setting {k!r} (known: {', '.join(SASL_KEYS)})")
        raw = values.get("mechanisms", "")
        items = raw if isinstance(raw, list) else str(raw).split(",")
        mechs: list[str] = []
        for item in items:
            name = str(item).strip().upper()
            if not name:
                continue
            if name not in SASL_MECHANISMS:
                raise InvalidConfigError(
                    f"sasl.mechanisms: unsupported mechanism {name!r}"
                    f" (supported: {', '.join(SASL_MECHANISMS)})"
                )
            if name not in mechs:
                mechs.append(name)
        return cls(
            tuple(mechs),
            _bool(values.get("rest_basic_auth", False), "sasl.rest_basic_auth"),
            _bool(values.get("rest_bearer_auth", False), "sasl.rest_bearer_auth"),
        )


@dataclass(frozen=True, slots=True)
class AuthorizationConfig:
    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> AuthorizationConfig:
        for k in values:
            if k not in AUTHZ_KEYS:
                raise InvalidConfigError(
                    f"unknown authorization setting {k!r} (known: {', '.join(AUTHZ_KEYS)})"
                )
        raw = values.get("super_users", "")
        try:
            supers = parse_principals([str(i) for i in raw] if isinstance(raw, list) else str(raw))
        except AclError as exc:
            raise InvalidConfigError(f"authorization.super_users: {exc}") from None
        return cls(
            _bool(values.get("enabled", False), "authorization.enabled"),
            supers,
            _bool(
                values.get("allow_everyone_if_no_acl_found", False),
                "authorization.allow_everyone_if_no_acl_found",
            ),
        )


def _bool(value: object, setting: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise InvalidConfigError(f"{setting}: expected a boolean, got {value!r}")


def _path(value: object, setting: str) -> Path | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str | Path):
        raise InvalidConfigError(f"{setting}: expected a file path, got {value!r}")
    return Path(value)
