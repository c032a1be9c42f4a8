"""``/metrics`` of a node of several processes (api.supervisor): the whole node's series.

Each process of a node has its own registry (its partitions, its requests, its disk
figures); a scraper of the node's address reaches whichever process accepted its
connection. So a process answering ``/metrics`` on a node listener asks the other live
processes of its machine (registrations with the same ``machine``) for their own
exposition, over their HTTP listeners, and returns every process's series with a
``broker`` label naming the process they came from (``sum without (broker) (...)`` in
PromQL gives the node's figure). A process that does not answer within ``TIMEOUT_S`` is
left out, and ``strata_node_process_up{broker=...}`` says 0 for it.

The peers answer with their own exposition only when the request carries the node's
token (``X-Strata-Node``; ``STRATA_NODE_TOKEN``, a random secret the supervisor puts in
its processes' environment, readable only by the node's user), which also stands for
the DESCRIBE-on-cluster check of the HTTP listener's ``/metrics``: the scraper was
checked by the process it reached.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import ssl
import urllib.request
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from core.prom_text import exposition

if TYPE_CHECKING:
    from broker.broker import Broker

TOKEN_ENV: Final = "STRATA_NODE_TOKEN"
TOKEN_HEADER: Final = "X-Strata-Node"
TIMEOUT_S: Final = 5.0


def node_token() -> str | None:
    return os.environ.get(TOKEN_ENV) or None


def from_node(headers: Iterable[tuple[str, str]] | object) -> bool:
    """Whether a request carries this node's token (another process of the node asks)."""
    token = node_token()
    get = getattr(headers, "get", None)
    given = get(TOKEN_HEADER) if get is not None else None
    return token is not None and isinstance(given, str) and hmac.compare_digest(given, token)


def _labelled(text: str, broker_id: int) -> Iterator[Metric]:
    for family in text_string_to_metric_families(text):
        samples = [s._replace(labels={**s.labels, "broker": str(broker_id)}) for s in family.samples]
        family.samples = samples
        yield family


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


class NodeMetrics:
    """The node-wide exposition for one process (``broker``) of a node."""

    def __init__(self, broker: Broker, local: object) -> None:
        self.broker = broker
        self._local = local  # BrokerMetrics: .exposition() -> bytes
        tls = broker.config.tls
        self._context: ssl.SSLContext | None = None
        if tls.enabled and tls.cert is not None and tls.key is not None:
            ctx = ssl.create_default_context(cafile=str(tls.ca) if tls.ca is not None else None)
            ctx.load_cert_chain(str(tls.cert), str(tls.key))
            self._context = ctx

    def own(self) -> bytes:
        return self._local.exposition()  # type: ignore[attr-defined,no-any-return]

    def _peers(self) -> list[tuple[int, str, int]]:
        client = self.broker.replicas.client
        reg = client.registration
        if reg is None or reg.machine is None:
            return []
        return sorted(
            (lb.broker_id, lb.registration.host, lb.registration.http_port)
            for lb in client.view.brokers.values()
            if lb.registration.machine == reg.machine and lb.broker_id != reg.broker_id
        )

    def _fetch(self, host: str, port: int) -> bytes:
        scheme = "https" if self._context is not None else "http"
        url = f"{scheme}://{host}:{port}/metrics"
        req = urllib.request.Request(url, headers={TOKEN_HEADER: node_token() or ""})
        with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=self._context) as resp:
            return resp.read()  # type: ignore[no-any-return]

    async def exposition(self) -> bytes:
        peers = self._peers()
        if not peers or node_token() is None:
            return self.own()
        answers = await asyncio.gather(
            *(asyncio.to_thread(self._fetch, host, port) for _, host, port in peers), return_exceptions=True
        )
        me = self.broker.node_id
        merged: dict[str, Metric] = {}
        up = GaugeMetricFamily(
            "strata_node_process_up", "Whether the node's process answered", labels=["broker"]
        )
        up.add_metric([str(me)], 1)
        texts = [(me, self.own())]
        for (bid, _, _), answer in zip(peers, answers, strict=True):
            ok = isinstance(answer, bytes)
            up.add_metric([str(bid)], 1 if ok else 0)
            if isinstance(answer, bytes):
                texts.append((bid, answer))
        for bid, data in texts:
            for family in _labelled(data.decode("utf-8", "replace"), bid):
                have = merged.get(family.name)
                if have is None:
                    merged[family.name] = family
                else:
                    have.samples.extend(family.samples)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families([*merged.values(), up]))
        return exposition(registry)
