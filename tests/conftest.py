"""Shared fixtures: real brokers started as subprocesses on free loopback ports."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess, S3Endpoint

# Brokers the tests start (subprocesses inherit this) serve no schema registry listener:
# its default port, 8081, would collide between brokers. Registry tests pass
# --schema-registry-listen 127.0.0.1:0 (tests/brokers.py reads the port back).
os.environ.setdefault("STRATA_SCHEMA_REGISTRY_LISTEN", "none")


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def make(*args: str, data_dir: Path | None = None, env: dict[str, str] | None = None) -> BrokerProcess:
        b = BrokerProcess(data_dir or tmp_path / f"broker{len(started)}", *args, env=env)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.kill()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a test module (each test uses its own topics)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker")).start()
    yield b
    b.kill()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    ep = S3Endpoint()
    yield ep
    ep.stop()


@pytest.fixture
def s3_bucket(s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket; the AWS chain variables of this process point at the endpoint."""
    import uuid

    for k, v in s3_endpoint.env.items():
        monkeypatch.setenv(k, v)
    return s3_endpoint.create_bucket(f"strata-test-{uuid.uuid4().hex[:12]}")
