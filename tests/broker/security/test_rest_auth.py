"""REST basic auth over HTTPS on a real broker, against users made with ``strata users``."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpx
import pytest

from tests.broker.security.test_sasl import strata_users
from tests.broker.security.tlslib import Pki, make_pki, server_env
from tests.brokers import BrokerProcess

PW = "Rest-pw-93c1d7"
WRONG = "Rest-wrong-1a2b3c"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def rest_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("rest-auth")
    assert strata_users(data, "add", "carol", "--password-stdin", stdin=PW + "\n").returncode == 0
    b = BrokerProcess(data, env={**server_env(pki), "STRATA_SASL_REST_BASIC_AUTH": "true"}).start()
    yield b
    b.kill()
    assert PW not in b.output() and WRONG not in b.output()


def test_basic_auth(rest_broker: BrokerProcess, pki: Pki) -> None:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with httpx.Client(base_url=f"https://127.0.0.1:{rest_broker.http_port}", verify=ctx, timeout=30) as http:
        r = http.get("/topics")
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Basic")
        assert r.json() == {"error_code": 40101, "message": "authentication required"}
        for user, pw in (("carol", WRONG), ("nobody", PW), ("carol", "")):
            r = http.get("/topics", auth=(user, pw))
            assert r.status_code == 401, (user, r.text)
            assert r.json()["message"] == "invalid user name or password"
            assert PW not in r.text and WRONG not in r.text
        r = http.get("/topics", headers={"Authorization": "Basic !!notbase64"})
        assert r.status_code == 401
        for _ in range(2):  # the second is served from the success cache
            assert http.get("/topics", auth=("carol", PW)).status_code == 200
        # a deleted user is refused at once, cache or not
        assert strata_users(rest_broker.data_dir, "delete", "carol").returncode == 0
        assert http.get("/topics", auth=("carol", PW)).status_code == 401
    assert "REST basic authentication failed for user 'carol'" in rest_broker.output()
