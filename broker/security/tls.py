"""Server TLS contexts for the Kafka and HTTP listeners, built from ``TlsConfig``.

ssl and OSError failures while loading files become ``TlsError`` naming the file and the
reason (never key material). TLS 1.2 is the floor, as in current Kafka defaults.
"""

from __future__ import annotations

import os
import ssl
from typing import Any

from broker.security.config import TlsConfig
from hot.errors import TlsError

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def load_identity(ctx: ssl.SSLContext, cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> None:
    """``ctx.load_cert_chain``, failing with one clear TlsError (every context that
    presents the broker's certificate: listeners, and clients forwarding to peers)."""
    try:
        ctx.load_cert_chain(cert, key)
    except FileNotFoundError as exc:
        raise TlsError(f"tls: cannot read {exc.filename or cert}: {exc.strerror}") from None
    except (ssl.SSLError, OSError) as exc:
        # the reason string comes from OpenSSL: it names the failure, not the key bytes
        raise TlsError(f"tls: cannot load certificate {cert} with key {key}: {_reason(exc)}") from None


def server_context(cfg: TlsConfig) -> ssl.SSLContext:
    if cfg.cert is None or cfg.key is None:
        raise TlsError("TLS needs a certificate and a key")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    load_identity(ctx, cfg.cert, cfg.key)
    if cfg.ca is not None:
        try:
            ctx.load_verify_locations(cafile=cfg.ca)
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(f"tls: cannot load CA file {cfg.ca}: {_reason(exc)}") from None
    ctx.verify_mode = _VERIFY[cfg.client_auth]
    return ctx


def uvicorn_options(cfg: TlsConfig) -> dict[str, Any]:
    """uvicorn.Config keyword arguments for the same certificate and client-auth policy."""
    if not cfg.enabled:
        return {}
    server_context(cfg)  # fail early, with our error, on unreadable files
    opts: dict[str, Any] = {
        "ssl_certfile": str(cfg.cert),
        "ssl_keyfile": str(cfg.key),
        "ssl_cert_reqs": _VERIFY[cfg.client_auth],
    }
    if cfg.ca is not None:
        opts["ssl_ca_certs"] = str(cfg.ca)
    return opts


def peer_principal(ssl_object: Any) -> str | None:
    """The client certificate's subject as ``CN=...`` (Kafka's default SSL principal), if any."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C"}
    return ",".join(f"{short.get(k, k)}={v}" for rdn in cert.get("subject", ()) for k, v in rdn) or None


def describe_handshake_error(exc: BaseException) -> str:
    """One line for the log: what went wrong in a client's TLS handshake."""
    if isinstance(exc, ssl.SSLError):
        return _reason(exc)
    if isinstance(exc, TimeoutError):
        return "handshake timed out"
    return str(exc) or type(exc).__name__


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).lower().replace("_", " ")
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
