"""``/docs`` (Swagger UI) and ``/redoc`` that render with no outside request.

FastAPI's own pages load Swagger UI and Redoc from a CDN (and a favicon and Google fonts from
elsewhere), so on a machine without Internet access, as brokers often are, they show a blank
page. Here the same pages (FastAPI's ``get_swagger_ui_html`` / ``get_redoc_html``) point at
files served by this app under ``/docs-assets``: those of the ``fastapi-offline`` wheel, a
PyPI package that ships Swagger UI's bundle and stylesheet, Redoc's standalone bundle and
FastAPI's favicon with their licenses (Swagger UI Apache 2.0, Redoc and the package MIT).
Taking them from a package keeps megabytes of third-party JavaScript out of this repository
and lets a dependency update refresh them. Google fonts are off for Redoc (its own fonts
fall back to the browser's) and Swagger UI's online validator is off. Redoc still links
its "API docs by Redocly" logo from its CDN: the pages carry a Content-Security-Policy that
allows only this origin (and inline code, data: and blob: URLs, which the bundles use), so
the browser makes no outside request at all (that logo shows as its alt text).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Final

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request

ASSETS_URL: Final = "/docs-assets"
CSP: Final = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'"
)


def _local_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CSP
    return page


def _assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs``, its OAuth2 redirect page and ``/redoc`` from local assets (``app``
    must be created with ``docs_url=None, redoc_url=None``)."""
    app.mount(ASSETS_URL, StaticFiles(directory=_assets_dir()), name="docs-assets")
    oauth2_redirect = "/docs/oauth2-redirect"

    def assets(request: Request) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_URL}"

    def openapi_url(request: Request) -> str:
        return f"{request.scope.get('root_path', '')}{app.openapi_url}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        base = assets(request)
        page = get_swagger_ui_html(
            openapi_url=openapi_url(request),
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=oauth2_redirect,
            swagger_js_url=f"{base}/swagger-ui-bundle.js",
            swagger_css_url=f"{base}/swagger-ui.css",
            swagger_favicon_url=f"{base}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        )
        return _local_only(page)

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        base = assets(request)
        page = get_redoc_html(
            openapi_url=openapi_url(request),
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{base}/redoc.standalone.js",
            redoc_favicon_url=f"{base}/favicon.png",
            with_google_fonts=False,
        )
        return _local_only(page)
