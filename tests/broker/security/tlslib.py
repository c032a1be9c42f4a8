"""A throwaway PKI for tests: one CA, a server certificate for 127.0.0.1/localhost, and a
client certificate, written as PEM files with ``cryptography``."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing of ours (clients trusting it must fail)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    cn: str,
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            # a broker's certificate is also its client certificate towards other brokers
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                if server
                else [ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _ca("strata-test-ca")
    other, _ = _ca("strata-other-ca")
    server, server_key = _leaf("localhost", ca, ca_key, server=True)
    client, client_key = _leaf("test-client", ca, ca_key, server=False)
    pem = serialization.Encoding.PEM
    pki = Pki(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        other_ca=directory / "other-ca.pem",
    )
    pki.ca.write_bytes(ca.public_bytes(pem))
    pki.other_ca.write_bytes(other.public_bytes(pem))
    pki.server_cert.write_bytes(server.public_bytes(pem))
    pki.client_cert.write_bytes(client.public_bytes(pem))
    _write_key(pki.server_key, server_key)
    _write_key(pki.client_key, client_key)
    return pki


def server_env(pki: Pki, client_auth: str = "none") -> dict[str, str]:
    """The broker environment for TLS on both listeners with this PKI."""
    env = {
        "STRATA_TLS_CERT": str(pki.server_cert),
        "STRATA_TLS_KEY": str(pki.server_key),
        "STRATA_TLS_CLIENT_AUTH": client_auth,
    }
    if client_auth != "none":
        env["STRATA_TLS_CA"] = str(pki.ca)
    return env
