"""The operator web dashboard: a static page (HTML, CSS, plain JS; nothing from a CDN)
served at ``/dashboard`` by the broker's HTTP server. It reads only the REST API
(``/v1/status``, ``/v1/partitions``, ``/v1/groups``, ``/v1/groups/{g}/lag``)."""

from api.dashboard.routes import dashboard_router

__all__ = ["dashboard_router"]
