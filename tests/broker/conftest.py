"""Fixtures of the cluster-metadata tests: real etcd servers and clients of them.

``etcd_server`` is one etcd shared by the whole session; each test gets its own cluster
name (key prefix), so tests never see each other's keys. Tests that crash, stop or
freeze etcd use ``etcd_factory`` for a server of their own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from broker.etcd import EtcdClient
from broker.keys import KeyLayout
from broker.metadata import MetadataClient
from tests.broker.etcdlib import EtcdProcess

# Short enough to keep expiry tests fast, long enough that a loaded 2-core machine
# does not miss a keep-alive (refreshed every TTL/3).
LEASE_TTL = 2
# Per-call deadline of the clients in tests: small, so outage tests finish quickly.
CALL_TIMEOUT = 2.0


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    server = EtcdProcess(tmp_path_factory.mktemp("etcd-shared") / "data").start()
    yield server
    server.kill()


@pytest.fixture
def etcd_factory(tmp_path: Path) -> Iterator[Callable[[], EtcdProcess]]:
    started: list[EtcdProcess] = []

    def make() -> EtcdProcess:
        server = EtcdProcess(tmp_path / f"etcd{len(started)}").start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.kill()


@pytest.fixture
def layout() -> KeyLayout:
    return KeyLayout(f"t-{uuid.uuid4().hex[:12]}")


@pytest.fixture
async def clients() -> AsyncIterator[Callable[[EtcdProcess], EtcdClient]]:
    """Connected EtcdClients, closed at the end of the test."""
    made: list[EtcdClient] = []

    def make(server: EtcdProcess) -> EtcdClient:
        c = EtcdClient(server.endpoint, timeout=CALL_TIMEOUT)
        made.append(c)
        return c

    yield make
    for c in made:
        await c.close()


@pytest.fixture
async def metadata_clients(
    layout: KeyLayout,
) -> AsyncIterator[Callable[..., MetadataClient]]:
    """Started MetadataClients (each with its own etcd connection), closed at the end."""
    made: list[tuple[MetadataClient, EtcdClient]] = []

    async def make(server: EtcdProcess, **kwargs: object) -> MetadataClient:
        etcd = await EtcdClient(server.endpoint, timeout=CALL_TIMEOUT).connect()
        kwargs.setdefault("lease_ttl", LEASE_TTL)
        mc = MetadataClient(etcd, layout, **kwargs)  # type: ignore[arg-type]
        made.append((mc, etcd))
        return await mc.start()

    yield make  # type: ignore[misc]
    for mc, etcd in made:
        await mc.close(deregister=False)
        await etcd.close()
