"""The one broker in process, for tests that drive it without a listener (REST apps over
ASGI, broker calls): a cluster of one on the embedded metadata store, built as
``strata serve`` builds it (``api.server``), with the same controller and replica manager."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from broker.broker import Broker
from broker.cluster_config import ClusterConfig
from broker.config import BrokerConfig
from broker.groups.config import GroupConfig
from broker.node import ClusterNode
from broker.read_path import RemoteTier
from broker.transactions.config import TransactionConfig
from broker.transactions.coordinator import MarkerSink
from hot.config import LogConfig
from hot.errors import StrataError
from hot.topics import TopicInfo

LEAD_TIMEOUT_S = 30.0
T = TypeVar("T")
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


@contextlib.asynccontextmanager
async def broker_of_one(
    config: BrokerConfig,
    *,
    log: LogConfig | None = None,
    groups: GroupConfig | None = None,
    transactions: TransactionConfig | None = None,
    tiering: RemoteTier | None = None,
    markers: MarkerSink | None = None,
) -> AsyncIterator[Broker]:
    """A started broker over ``config.data_dir``; stopped and closed on exit. ``markers``:
    where the transaction coordinator sends its markers instead of the broker's own
    marker writer (tests of the coordinator alone)."""
    if log is not None:
        config = dataclasses.replace(config, log=log)
    if groups is not None:
        config = dataclasses.replace(config, groups=groups)
    if transactions is not None:
        config = dataclasses.replace(config, transactions=transactions)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    node = await ClusterNode.connect(config, ClusterConfig.of_one(config.broker_id))
    try:
        node.manager.open()
        await node.adopt_local_topics()
        coordinator = node.make_groups(node.config)
        await coordinator.start()
        txn_coordinator = node.make_transactions(node.config)
        txn_coordinator.start()
        try:
            broker = node.make_broker(node.config, tiering=tiering, groups=coordinator)
            if markers is None:
                node.attach_marker_writer(broker)
            else:
                txn_coordinator.attach_markers(markers)
            broker.bind_loop(asyncio.get_running_loop())
            # The registration's addresses are only what Metadata would advertise.
            await node.start("127.0.0.1", 9092, 8080)
            yield broker
        finally:
            await coordinator.close()
            await txn_coordinator.close()
            await node.stop()
    finally:
        await node.close()
        node.manager.close()


async def create_topic(
    broker: Broker, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> TopicInfo:
    """Create a topic and wait until this broker leads every partition (writable)."""
    info = await broker.admin_create_topic(name, partitions, 1, configs)
    await wait_led(broker, name, partitions)
    return info


async def wait_led(broker: Broker, name: str, partitions: int) -> None:
    replicas = broker.replicas  # type: ignore[attr-defined]
    deadline = asyncio.get_running_loop().time() + LEAD_TIMEOUT_S
    for p in range(partitions):
        while True:
            try:
                replicas.writable_leader(name, p, 1)
                break
            except StrataError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.01)


class ThreadedBroker:
    """``broker_of_one`` on an event loop of its own thread, for synchronous fixtures
    (schemathesis drives an ASGI app from its own loop). ``app(create)`` wraps the ASGI app
    ``create(broker)`` builds so that each request runs on the broker's loop while the
    caller's loop only relays the ASGI messages."""

    def __init__(self, config: BrokerConfig, **options: Any) -> None:
        self._config = config
        self._options = options
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="inprocess-broker", daemon=True)
        self._stop: asyncio.Event | None = None
        self._done: concurrent.futures.Future[None] | None = None
        self.broker: Broker | None = None

    def __enter__(self) -> ThreadedBroker:
        self._thread.start()
        ready: concurrent.futures.Future[Broker] = concurrent.futures.Future()

        async def run() -> None:
            self._stop = asyncio.Event()
            try:
                async with broker_of_one(self._config, **self._options) as broker:
                    ready.set_result(broker)
                    await self._stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        self._done = asyncio.run_coroutine_threadsafe(run(), self.loop)
        self.broker = ready.result(timeout=LEAD_TIMEOUT_S)
        return self

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the broker's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=LEAD_TIMEOUT_S)

    def app(self, create: Callable[[Broker], ASGIApp]) -> ASGIApp:
        assert self.broker is not None
        inner = self.call(_build(create, self.broker))
        loop = self.loop

        async def relay(scope: Any, receive: Any, send: Any) -> None:
            caller = asyncio.get_running_loop()

            def there(coro: Any, on: asyncio.AbstractEventLoop) -> Awaitable[Any]:
                return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, on))

            async def receive_there() -> Any:
                return await there(receive(), caller)

            async def send_there(message: Any) -> None:
                await there(send(message), caller)

            await there(inner(scope, receive_there, send_there), loop)

        return relay

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self._done is not None:
            self._done.result(timeout=LEAD_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=LEAD_TIMEOUT_S)
        self.loop.close()


async def _build(create: Callable[[Broker], ASGIApp], broker: Broker) -> ASGIApp:
    return create(broker)  # on the broker's loop: the app binds to the running loop
