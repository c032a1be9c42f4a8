"""The operator web console: a single-page app (HTML, CSS, plain ES modules; nothing from
another host) served at ``/dashboard`` by the broker's HTTP server, with one data endpoint
per page under ``/console/api`` (docs/console.md)."""

from api.dashboard.routes import dashboard_router

__all__ = ["dashboard_router"]
