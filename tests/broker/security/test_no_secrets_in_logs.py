"""No secret in the broker's log at any level: a broker at DEBUG, clients authenticating
with right and wrong passwords (SASL PLAIN, SCRAM-SHA-256/512 with SaslAuthenticate and
raw after SaslHandshake v0, REST basic auth) and right, wrong and revoked bearer tokens;
then neither a password, a token, nor a SCRAM proof or signature is in its output."""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
from pathlib import Path

import httpx

from broker.fetcher import BrokerConnection
from kclient.scram import ScramClient
from kwire import ApiKey
from kwire.messages.sasl_authenticate import SaslAuthenticateRequest
from kwire.messages.sasl_handshake import SaslHandshakeRequest
from tests.broker.security.test_sasl import strata_users
from tests.broker.security.test_tokens import create_token, strata_tokens
from tests.brokers import BrokerProcess

PW = "Secret-pw-5f1e9a"
WRONG = "Wrong-pw-c7d204"
MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


async def _scram_exchange(port: int, mech: str, password: str) -> list[bytes]:
    """A SCRAM login through SaslAuthenticate; every token both ways, for the grep."""
    conn = BrokerConnection("127.0.0.1", port, "secrets-test")
    await conn.open(30)
    seen: list[bytes] = []
    try:
        await conn.call(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=mech), 30)
        client = ScramClient(mech, "gina", password)
        first = await conn.call(
            ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=client.first()), 30
        )
        final = client.final(first.auth_bytes)
        seen += [final, final.rpartition(b",p=")[2]]
        last = await conn.call(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=final), 30)
        if last.auth_bytes:
            seen += [last.auth_bytes, last.auth_bytes[2:]]
    finally:
        await conn.close()
    return seen


def _raw_v0_plain(port: int, password: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        body = struct.pack(">h", 5) + b"PLAIN"
        payload = struct.pack(">hhih", 17, 0, 1, 1) + b"t" + body
        s.sendall(struct.pack(">i", len(payload)) + payload)
        s.recv(4096)
        token = b"\0gina\0" + password.encode()
        s.sendall(struct.pack(">i", len(token)) + token)
        s.recv(4096)


def _confluent_login(b: BrokerProcess, mech: str, password: str) -> bool:
    """Whether a confluent-kafka client gets metadata with this password (bounded)."""
    from confluent_kafka import KafkaException, Producer

    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mech,
            "sasl.username": "gina",
            "sasl.password": password,
            "error_cb": lambda _: None,
            "log_level": 0,
        }
    )
    try:
        p.list_topics(timeout=5)
        return True
    except KafkaException:
        return False


def test_no_secret_in_debug_logs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert strata_users(data, "add", "gina", "--password-stdin", stdin=PW + "\n").returncode == 0
    b = BrokerProcess(
        data,
        "--log-level",
        "DEBUG",
        "--sasl-mechanisms",
        ",".join(MECHS),
        "--rest-auth",
        "basic,bearer",
    ).start()
    secrets: list[bytes] = [PW.encode(), WRONG.encode()]
    try:
        for mech in MECHS:
            for pw in (PW, WRONG):
                assert _confluent_login(b, mech, pw) == (pw == PW)
                _raw_v0_plain(b.kafka_port, pw)
                if mech != "PLAIN":
                    secrets += asyncio.run(_scram_exchange(b.kafka_port, mech, pw))
        token = create_token(data, "gina")["token"]
        revoked = create_token(data, "gina")
        assert strata_tokens(data, "revoke", revoked["id"]).returncode == 0
        secrets += [token.encode(), revoked["token"].encode()]
        with httpx.Client(base_url=b.http_url, timeout=30) as http:
            assert http.get("/topics", auth=("gina", PW)).status_code == 200
            assert http.get("/topics", auth=("gina", WRONG)).status_code == 401
            assert http.get("/topics", headers={"Authorization": f"Bearer {token}"}).status_code == 200
            for bad in (revoked["token"], token + "x"):
                assert http.get("/topics", headers={"Authorization": f"Bearer {bad}"}).status_code == 401
    finally:
        b.stop()
    out = b.output()
    assert "authentication failed" in out and "authenticated as 'gina'" in out
    assert " DEBUG " in out, "the broker did not log at DEBUG"
    for secret in secrets:
        for form in (secret, base64.b64encode(secret)):
            assert form.decode("latin-1") not in out, form
