"""The metrics listener: ``GET /metrics`` alone, on an address of its own, for Prometheus.

With authorization on, ``/metrics`` on the HTTP listener needs a user with DESCRIBE on the
cluster (api.rest.app): every topic's and group's series name them. A scraper that cannot
authenticate reads this listener instead (``metrics_listen = "10.0.0.5:9644"``, or
``STRATA_METRICS_LISTEN``): the same exposition, plain HTTP, no authentication and no ACL
check, which is why it belongs on a private interface (or loopback, behind a sidecar),
like ``internal_listen``. It serves nothing else; any other path is 404 and any other
method 405, so it exposes no topic data but what the metrics carry.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.node_metrics import NodeMetrics
from broker.metrics import BrokerMetrics


def create_metrics_app(metrics: BrokerMetrics, node: NodeMetrics | None = None) -> Starlette:
    """``node``: a process of a node of several answers with the whole node's series."""

    async def exposition(_: Request) -> Response:
        body = await node.exposition() if node is not None else metrics.exposition()
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    # GET routes answer HEAD too (Starlette), which some health checkers send.
    return Starlette(routes=[Route("/metrics", exposition, methods=["GET"])])
