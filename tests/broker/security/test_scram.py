"""SCRAM server state machine against the RFC test vectors, the users file, SASL sessions."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
from pathlib import Path

import pytest

from api.security.sasl import SaslSession
from broker.embedded_store import EmbeddedMetadataStore
from broker.keys import KeyLayout
from broker.security.config import SaslConfig, TlsConfig
from broker.security.stored import delete_user, read_users, set_password
from broker.security.users import UserTable
from hot.errors import (
    AuthenticationError,
    IllegalSaslStateError,
    InvalidConfigError,
    InvalidRequestError,
    UnsupportedSaslMechanismError,
)
from kclient.scram import ScramCredential, ScramServer, make_credential, verify_password


def _server(hash_name: str, mech: str, salt_b64: str, server_nonce: str) -> ScramServer:
    cred = make_credential(hash_name, "pencil", salt=base64.b64decode(salt_b64), iterations=4096)
    return ScramServer(
        mech, lambda u: cred if u == "user" else None, hash_name=hash_name, server_nonce=server_nonce
    )


def test_rfc5802_sha1_vector() -> None:
    s = _server("sha1", "SCRAM-SHA-1", "QSXCR+Q6sek8bf92", "3rfcNHYJY1ZVvWVs7j")
    first = s.first(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL")
    assert first == b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    final = s.final(b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    assert final == b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
    assert s.username == "user" and s.done


def test_rfc7677_sha256_vector() -> None:
    s = _server("sha256", "SCRAM-SHA-256", "W22ZaJ0SNY7soEsUEjb6gQ==", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = s.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = s.final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_wrong_proof_and_unknown_user_fail_alike() -> None:
    wrong = (
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="
        + base64.b64encode(b"\0" * 32).decode()
    )
    s = _server("sha256", "SCRAM-SHA-256", "W22ZaJ0SNY7soEsUEjb6gQ==", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    s.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(AuthenticationError) as a:
        s.final(wrong.encode())
    s2 = _server("sha256", "SCRAM-SHA-256", "W22ZaJ0SNY7soEsUEjb6gQ==", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = s2.first(b"n,,n=nobody,r=rOprNGfwEbeRWgbNEkqO")
    assert first.startswith(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=")  # no early tell
    with pytest.raises(AuthenticationError) as b:
        s2.final(wrong.encode())
    assert str(a.value) == str(b.value) == "invalid user name or password"


@pytest.mark.parametrize(
    "message",
    [
        b"p=tls-unique,,n=user,r=abc",  # channel binding
        b"n,,r=abc",  # no user
        b"n,,n=user",  # no nonce
        b"n,,n=us=er,r=abc",  # bad escape
        b"n,a=other,n=user,r=abc",  # authzid of someone else
        b"\xff\xfe",
    ],
)
def test_malformed_client_first(message: bytes) -> None:
    s = ScramServer("SCRAM-SHA-256", lambda u: None)
    with pytest.raises(AuthenticationError):
        s.first(message)


def test_malformed_client_final() -> None:
    s = _server("sha256", "SCRAM-SHA-256", "W22ZaJ0SNY7soEsUEjb6gQ==", "SN")
    s.first(b"n,,n=user,r=CN")
    for bad in (b"c=biws,r=CNSN", b"c=eSws,r=CNSN,p=AAAA", b"c=biws,r=other,p=AAAA", b"c=biws,r=CNSN,p=!!"):
        with pytest.raises(AuthenticationError):
            s.final(bad)


def test_escaped_names() -> None:
    cred = make_credential("sha256", "pw")
    seen: list[str] = []

    def lookup(u: str) -> ScramCredential | None:
        seen.append(u)
        return cred

    ScramServer("SCRAM-SHA-256", lookup).first(b"n,,n=a=3Db=2Cc,r=x")
    assert seen == ["a=b,c"]


def test_users_in_the_store(tmp_path: Path) -> None:
    layout = KeyLayout("strata-local")

    async def run() -> None:
        async with EmbeddedMetadataStore(tmp_path / "meta") as store:
            assert await set_password(store, layout, "alice", "s3cret-Pa55") is False
            path = tmp_path / "meta" / "metadata.journal"
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert b"s3cret-Pa55" not in path.read_bytes()
            kv = await store.get(layout.users)
            assert kv is not None
            doc = json.loads(kv.value)
            assert set(doc["users"]["alice"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        async with EmbeddedMetadataStore(tmp_path / "meta") as store:  # after a restart
            other = await read_users(store, layout)
            assert other.names() == ["alice"]
            cred = other.credential("alice", "SCRAM-SHA-512")
            assert cred is not None and verify_password("sha512", cred, "s3cret-Pa55")
            assert not verify_password("sha512", cred, "wrong")
            assert await delete_user(store, layout, "alice") and not await delete_user(store, layout, "alice")
            assert (await read_users(store, layout)).names() == []
            with pytest.raises(InvalidRequestError):
                await set_password(store, layout, "bad name", "x")
            with pytest.raises(InvalidRequestError):
                await set_password(store, layout, "bob", "")
            await store.put(layout.users, b"{")
            with pytest.raises(InvalidConfigError):
                await read_users(store, layout)

    asyncio.run(run())


def test_sasl_session_states(tmp_path: Path) -> None:
    store = UserTable()
    store.put_password("alice", "pw-alice")
    sess = SaslSession(("PLAIN",), store)
    with pytest.raises(IllegalSaslStateError):
        asyncio.run(sess.authenticate(b"\0alice\0pw-alice"))
    with pytest.raises(UnsupportedSaslMechanismError):
        sess.handshake("SCRAM-SHA-256")
    sess.handshake("PLAIN")
    with pytest.raises(IllegalSaslStateError):
        sess.handshake("PLAIN")
    with pytest.raises(AuthenticationError) as info:
        asyncio.run(sess.authenticate(b"\0alice\0wrong-pw"))
    assert "wrong-pw" not in str(info.value)
    asyncio.run(sess.authenticate(b"\0alice\0pw-alice"))
    assert sess.principal == "alice"


def test_security_config_validation() -> None:
    assert SaslConfig.from_mapping({"mechanisms": "scram-sha-256, PLAIN"}).mechanisms == (
        "SCRAM-SHA-256",
        "PLAIN",
    )
    with pytest.raises(InvalidConfigError):
        SaslConfig.from_mapping({"mechanisms": "GSSAPI"})
    with pytest.raises(InvalidConfigError):
        TlsConfig.from_mapping({"cert": "a.pem"})
    with pytest.raises(InvalidConfigError):
        TlsConfig.from_mapping({"cert": "a.pem", "key": "a.key", "client_auth": "required"})
    with pytest.raises(InvalidConfigError):
        TlsConfig.from_mapping({"cert": "a.pem", "key": "a.key", "client_auth": "maybe"})
    with pytest.raises(InvalidConfigError):
        TlsConfig.from_mapping({"certfile": "a.pem"})


def test_load_config_security_tables(tmp_path: Path) -> None:
    from broker.config import load_config

    toml = tmp_path / "s.toml"
    toml.write_text('[tls]\ncert = "s.pem"\nkey = "s.key"\n[sasl]\nmechanisms = ["PLAIN"]\n')
    cfg = load_config(
        config_file=toml, env={"STRATA_TLS_CLIENT_AUTH": "requested", "STRATA_TLS_CA": "ca.pem"}
    )
    assert cfg.tls == TlsConfig(Path("s.pem"), Path("s.key"), Path("ca.pem"), "requested")
    assert cfg.sasl.mechanisms == ("PLAIN",)
    assert load_config(env={}).tls.enabled is False
    cluster = {"STRATA_SASL_MECHANISMS": "PLAIN", "STRATA_ETCD": "127.0.0.1:2379"}
    with pytest.raises(InvalidConfigError, match="needs internal_listen"):
        load_config(env=cluster)
    cfg = load_config(env={**cluster, "STRATA_INTERNAL_LISTEN": "127.0.0.1:0"})
    assert cfg.internal_listen is not None and cfg.internal_listen.port == 0
