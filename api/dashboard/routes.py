"""Routes of the console: its pages, its files and its data.

The console is a single-page app routed in the browser; each page has a real URL that the
server answers with ``index.html``, so a page loads directly and survives a reload:
``/dashboard``, ``/dashboard/topics``, ``/dashboard/topics/{topic}``, ``/dashboard/groups``,
``/dashboard/groups/{group}``, ``/dashboard/brokers``, ``/dashboard/brokers/{id}``,
``/dashboard/tiering``, ``/dashboard/security``, ``/dashboard/schemas`` and
``/dashboard/schemas/{subject}``. Its files are served from a fixed table
under ``/dashboard/assets/`` (not a directory mount): no path from a request ever reaches
the filesystem, and anything else under ``/dashboard`` is the usual 404 JSON error.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from fastapi import APIRouter
from fastapi.responses import Response

from api.dashboard.acls import acls_router
from api.dashboard.admin import admin_router
from api.dashboard.data import data_router
from api.dashboard.groups import groups_console_router
from api.dashboard.messages import messages_router
from api.dashboard.schemas import schemas_router
from api.rest.codec import RestError
from api.rest.peers import Peers
from broker.metrics_history import MetricsHistory, broker_totals

if TYPE_CHECKING:
    from broker.broker import Broker

JS = "text/javascript; charset=utf-8"
FILES = {
    "index.html": "text/html; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "app.js": JS,
    "ui.js": JS,
    "chart.js": JS,
    "views_cluster.js": JS,
    "views_topics.js": JS,
    "views_groups.js": JS,
    "views_schemas.js": JS,
    "favicon.svg": "image/svg+xml",
}
PAGES = ("topics", "groups", "brokers", "tiering", "security", "schemas")
DETAIL_PAGES = ("topics", "groups", "brokers", "schemas")


def _read(name: str) -> bytes:
    return resources.files("api.dashboard").joinpath("static", name).read_bytes()


def dashboard_router(broker: Broker) -> APIRouter:
    # The broker's history (api.server samples it); an app over a broker without one (tests
    # in process) shows empty charts.
    history = broker.history if broker.history is not None else MetricsHistory(broker_totals(broker))
    router = APIRouter(tags=["console"], include_in_schema=False)
    # Read once: the files ship with the package and never change while serving.
    bodies = {name: _read(name) for name in FILES}

    def serve(name: str) -> Response:
        return Response(bodies[name], media_type=FILES[name], headers={"Cache-Control": "no-cache"})

    @router.get("/dashboard")
    @router.get("/dashboard/")
    async def index() -> Response:
        return serve("index.html")

    @router.get("/dashboard/assets/{name}")
    async def asset(name: str) -> Response:
        if name not in FILES:
            raise RestError(404, 404, f"no console file {name!r}")
        return serve(name)

    @router.get("/dashboard/{page}")
    async def page(page: str) -> Response:
        if page not in PAGES:
            raise RestError(404, 404, f"no console page {page!r}")
        return serve("index.html")

    @router.get("/dashboard/{page}/{name:path}")
    async def detail(page: str, name: str) -> Response:
        if page not in DETAIL_PAGES or not name:
            raise RestError(404, 404, f"no console page {page}/{name}")
        return serve("index.html")

    router.include_router(data_router(broker, history, Peers(broker)))
    peers = Peers(broker)
    router.include_router(groups_console_router(broker, history, peers))
    router.include_router(messages_router(broker, peers))
    router.include_router(acls_router(broker))
    router.include_router(admin_router(broker))
    router.include_router(schemas_router(broker, peers))
    return router
