"""REST bearer tokens (``strata tokens``) and the TLS/SASL flags of ``strata serve``, on a
real broker started by the CLI with flags only, with httpx and confluent-kafka."""

from __future__ import annotations

import json
import ssl
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from broker.security.tokens import TokenStore, parse_ttl, tokens_path
from hot.errors import InvalidRequestError
from tests.broker.security.test_sasl import strata_users
from tests.broker.security.test_tls import produce_consume
from tests.broker.security.tlslib import Pki, make_pki
from tests.brokers import ROOT, BrokerProcess

PW = "Tok-pw-0c4f7e"


def strata_tokens(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", "tokens", *args, "--data-dir", str(data_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def create_token(data_dir: Path, user: str, ttl: str = "1h") -> dict[str, str]:
    r = strata_tokens(data_dir, "create", "--user", user, "--ttl", ttl, "-o", "json")
    assert r.returncode == 0, r.stderr
    row: dict[str, str] = json.loads(r.stdout)
    return row


def test_token_store_unit(tmp_path: Path) -> None:
    store = TokenStore(tokens_path(tmp_path))
    token, info = store.create("dave", 60, now=1000.0)
    assert token.startswith("strata_") and len(token) > 40
    assert store.verify(token, now=1059.0) == info
    assert store.verify(token, now=1060.0) is None  # expired
    assert store.verify(token + "x", now=1000.0) is None
    text = tokens_path(tmp_path).read_text()
    assert token not in text and info.id in text
    assert stat.S_IMODE(tokens_path(tmp_path).stat().st_mode) == 0o600
    assert parse_ttl("30m") == 1800 and parse_ttl("2d") == 172800 and parse_ttl("never") is None
    for bad in ("0", "-1h", "1w", ""):
        with pytest.raises(InvalidRequestError):
            parse_ttl(bad)
    assert [t.id for t in store.revoke(user="dave")] == [info.id]
    assert store.verify(token, now=1000.0) is None


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def flag_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("tokens")
    assert strata_users(data, "add", "erin", "--password-stdin", stdin=PW + "\n").returncode == 0
    # The environment says otherwise; the flags win (flag > env > TOML).
    env = {
        "STRATA_SASL_MECHANISMS": "PLAIN",
        "STRATA_TLS_CLIENT_AUTH": "required",
        "STRATA_TLS_CA": str(pki.ca),
    }
    b = BrokerProcess(
        data,
        "--auto-create-topics",
        "--tls-cert",
        str(pki.server_cert),
        "--tls-key",
        str(pki.server_key),
        "--tls-client-auth",
        "none",
        "--sasl-mechanisms",
        "SCRAM-SHA-512",
        "--rest-auth",
        "basic,bearer",
        env=env,
    ).start()
    yield b
    b.kill()


def test_serve_flags_set_tls_and_sasl(flag_broker: BrokerProcess, pki: Pki) -> None:
    out = flag_broker.output()
    assert "SASL_SSL" in out and "SASL mechanisms SCRAM-SHA-512," in out
    assert "client certificates none" in out
    conf = {
        "bootstrap.servers": flag_broker.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "erin",
        "sasl.password": PW,
    }
    assert produce_consume(conf, "flags-topic", n=3) == [b"v0", b"v1", b"v2"]


def test_bearer_tokens(flag_broker: BrokerProcess, pki: Pki) -> None:
    data = flag_broker.data_dir
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with httpx.Client(base_url=f"https://127.0.0.1:{flag_broker.http_port}", verify=ctx, timeout=30) as http:
        r = http.get("/topics")
        assert r.status_code == 401
        schemes = r.headers.get_list("www-authenticate")
        assert any(s.startswith("Basic") for s in schemes) and 'Bearer realm="strata"' in schemes
        assert http.get("/topics", auth=("erin", PW)).status_code == 200  # basic still works

        row = create_token(data, "erin")
        token = row["token"]
        assert stat.S_IMODE(tokens_path(data).stat().st_mode) == 0o600
        assert token not in tokens_path(data).read_text()
        bearer = {"Authorization": f"Bearer {token}"}
        assert http.get("/topics", headers=bearer).status_code == 200
        r = http.post(
            "/topics/tok-topic",
            json={"records": [{"value": "aGk="}]},
            headers={**bearer, "Content-Type": "application/vnd.kafka.binary.v2+json"},
        )
        assert r.status_code == 200, r.text

        listed = strata_tokens(data, "list", "-o", "json")
        assert listed.returncode == 0 and token not in listed.stdout
        assert [(t["id"], t["user"]) for t in json.loads(listed.stdout)] == [(row["id"], "erin")]

        for bad in ("Bearer strata_nope", f"Bearer {token[:-2]}"):
            r = http.get("/topics", headers={"Authorization": bad})
            assert r.status_code == 401
            assert 'Bearer realm="strata", error="invalid_token"' in r.headers.get_list("www-authenticate")
            assert r.json()["message"] == "invalid, expired or revoked token"

        revoked = strata_tokens(data, "revoke", row["id"])
        assert revoked.returncode == 0, revoked.stderr
        assert http.get("/topics", headers=bearer).status_code == 401  # at once, no restart

        short = create_token(data, "erin", ttl="1s")
        time.sleep(1.2)
        r = http.get("/topics", headers={"Authorization": f"Bearer {short['token']}"})
        assert r.status_code == 401
        assert "(expired)" in strata_tokens(data, "list").stdout
    assert token not in flag_broker.output() and short["token"] not in flag_broker.output()
    assert "REST bearer token refused" in flag_broker.output()


def test_rest_auth_flag_rejects_unknown_scheme(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "api.cli", "serve", "--data-dir", str(tmp_path), "--rest-auth", "digest"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0 and "--rest-auth" in r.stderr
