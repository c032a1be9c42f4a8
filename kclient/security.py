"""Client-side security settings of kclient.KafkaClient (CLI, Spark), librdkafka-named.

    security.protocol   PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl.mechanism      PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl.username, sasl.password
    ssl.ca.location            CA bundle the broker's certificate is checked against
    ssl.certificate.location   client certificate (mutual TLS), with ssl.key.location
    ssl.endpoint.identification.algorithm   https (default: check the host name) | none

The password is kept out of ``repr`` and never put in an error message.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from hot.errors import InvalidConfigError, TlsError

# The SASL mechanisms Strata speaks, client and server alike (the broker's [sasl] mechanisms
# setting is checked against these).
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KEYS: Final = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",  # librdkafka's older spelling
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.endpoint.identification.algorithm",
)


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, where: str = "client properties") -> ClientSecurity:
        """From librdkafka-style properties; unknown keys are left to the caller."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise InvalidConfigError(f"{where}: security.protocol must be one of {', '.join(PROTOCOLS)}")
        mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "PLAIN").strip().upper()
        if mechanism not in SASL_MECHANISMS:
            raise InvalidConfigError(f"{where}: sasl.mechanism must be one of {', '.join(SASL_MECHANISMS)}")
        sec = cls(
            protocol=protocol,
            mechanism=mechanism,
            username=props.get("sasl.username") or None,
            password=props.get("sasl.password") or None,
            cafile=_path(props.get("ssl.ca.location")),
            certfile=_path(props.get("ssl.certificate.location")),
            keyfile=_path(props.get("ssl.key.location")),
            check_hostname=props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
            != "none",
        )
        if sec.sasl and (not sec.username or sec.password is None):
            raise InvalidConfigError(f"{where}: {protocol} needs sasl.username and sasl.password")
        if (sec.certfile is None) != (sec.keyfile is None):
            raise InvalidConfigError(f"{where}: ssl.certificate.location and ssl.key.location go together")
        return sec

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.cafile) if self.cafile else None)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        try:
            if self.certfile is not None:
                ctx.load_cert_chain(self.certfile, self.keyfile)
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(f"cannot load client certificate {self.certfile}: {exc}") from None
        return ctx


def read_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines (``#`` comments), as Kafka's --command-config files."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise InvalidConfigError(f"cannot read {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise InvalidConfigError(f"{path}:{n}: expected key=value")  # not the line: it may hold a secret
        out[key.strip()] = value.strip()
    return out


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None
