"""An etcd lease kept alive from a thread of its own, apart from the event loop's backlog.

A broker's registration is a lease (``broker.session.timeout.ms``, 10 s): refreshed every
TTL/3 from the event loop, it was lost by any synchronous step longer than TTL - TTL/3 that
the loop ran meanwhile. At 100,000 partitions on a loaded machine, a starting broker's
listing and the controller's election pass were such steps (docs/cluster.md, "Scale", list
item 2): the broker was declared dead while it was only busy, and its partitions failed
over for nothing. Kafka's brokers heartbeat to the controller from a thread of their own
(``BrokerLifecycleManager``) for the same reason.

Here a thread refreshes the lease over a blocking gRPC channel of its own (the async
client's channel belongs to the loop), so the refresh waits for nothing but etcd and a
share of the GIL. Two rules keep it honest:

- A loop that has stopped altogether must not keep its broker registered forever, serving
  nothing while its partitions stay assigned to it. The loop marks itself alive every
  ``interval``; when it has not for ``max_loop_stall`` seconds (three TTLs by default), the
  thread stops refreshing, the lease runs out and the cluster fails the broker over, as
  it would have before. A loop that comes back then finds the lease gone (``lost``).
- ``alive_until`` is the send time of the last refresh etcd answered plus the TTL it
  returned, as with the loop's keeper: the fencing in ``ReplicaManager`` reads it, so a
  broker stops accepting writes at the moment its lease may have ended, never later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any, Final, Protocol

import grpc
from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

from broker.metadata_store import Lease
from hot.errors import MetadataStoreError


class Revoker(Protocol):
    """What the keeper uses of ``broker.etcd.EtcdClient`` (declared here, not imported:
    that module imports this one)."""

    timeout: float

    @property
    def closed(self) -> bool: ...

    async def revoke_lease(self, lease_id: int) -> bool: ...


log = logging.getLogger("strata.cluster.etcd")

# Loop silences up to this many TTLs still keep the lease: longer than any stall a busy
# broker has shown (10-15 s at 100,000 partitions under load 17), short enough that a
# wedged process is failed over within half a minute at the default 10 s TTL.
MAX_LOOP_STALL_TTLS: Final = 3.0


class ThreadLeaseKeeper:
    """Keeps one etcd lease alive from a daemon thread (see the module docstring).

    Refreshes every ``interval`` (TTL/3 by default), retrying failed refreshes faster. A
    failure to reach etcd is not a loss (etcd keeps the lease, and re-arms every lease's
    full TTL when it restarts); the lease is lost only when etcd answers that it no longer
    exists: then ``lost`` is set on the loop and the thread ends.
    """

    def __init__(
        self,
        client: Revoker,
        target: str,
        options: dict[str, Any],
        lease: Lease,
        *,
        interval: float | None = None,
        max_loop_stall: float | None = None,
    ) -> None:
        self.client = client
        self.lease = lease
        self.interval = interval if interval is not None else max(lease.ttl / 3.0, 0.1)
        self.max_loop_stall = (
            max_loop_stall if max_loop_stall is not None else MAX_LOOP_STALL_TTLS * lease.ttl
        )
        self.lost = asyncio.Event()
        self.alive_until = time.monotonic() + lease.ttl
        self._target = target
        self._options = list(options.items())
        self._timeout = client.timeout
        self._loop = asyncio.get_running_loop()
        self._loop_seen = time.monotonic()
        self._stopping = threading.Event()
        self._ended = False
        self._tick: asyncio.TimerHandle = self._loop.call_later(self.interval, self._mark)
        self._thread = threading.Thread(target=self._run, name=f"lease-keeper-{lease.id:x}", daemon=True)
        self._thread.start()

    def _mark(self) -> None:
        """On the loop: it is running (read by the thread without a lock: one float)."""
        self._loop_seen = time.monotonic()
        self._tick = self._loop.call_later(self.interval, self._mark)

    def _run(self) -> None:
        retry = max(min(self.interval / 2.0, 0.5), 0.05)
        request = rpc_pb2.LeaseKeepAliveRequest(ID=self.lease.id)
        stalled = False
        with grpc.insecure_channel(self._target, options=self._options) as channel:
            stub = rpc_pb2_grpc.LeaseStub(channel)
            while not self._stopping.is_set():
                silent = time.monotonic() - self._loop_seen
                if silent > self.max_loop_stall:
                    if not stalled:
                        log.warning(
                            "lease %x: the event loop has not run for %.1f s; no longer refreshing",
                            self.lease.id,
                            silent,
                        )
                    stalled = True
                    self._stopping.wait(retry)
                    continue
                stalled = False
                sent = time.monotonic()
                try:
                    ttl = self._refresh(stub, request)
                except MetadataStoreError as exc:
                    log.debug("lease %x: refresh failed (%s)", self.lease.id, exc)
                    self._stopping.wait(retry)
                    continue
                if ttl <= 0:
                    log.warning("lease %x is gone from etcd (expired or revoked)", self.lease.id)
                    self._ended = True  # before ``lost``: a waiter woken by it sees the end
                    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                        self._loop.call_soon_threadsafe(self.lost.set)
                    return
                self.alive_until = sent + ttl
                self._stopping.wait(self.interval)

    def _refresh(self, stub: Any, request: Any) -> int:
        """One keep-alive over the thread's channel: the renewed TTL, 0 if the lease is gone."""
        try:
            for reply in stub.LeaseKeepAlive(iter((request,)), timeout=self._timeout):
                return int(reply.TTL)
        except grpc.RpcError as exc:
            raise MetadataStoreError(f"etcd refresh_lease failed: {exc.code().name}") from exc
        raise MetadataStoreError("etcd refresh_lease failed: keep-alive stream closed without a reply")

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._ended

    async def stop(self, *, revoke: bool = False) -> None:
        """Stop refreshing; with ``revoke`` also end the lease now (deleting its keys)."""
        self._stopping.set()
        self._tick.cancel()
        # A refresh in flight ends within the client's timeout.
        await asyncio.to_thread(self._thread.join)
        if revoke and not self.client.closed:
            with contextlib.suppress(MetadataStoreError):
                await self.client.revoke_lease(self.lease.id)
