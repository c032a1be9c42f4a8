"""Routes serving the dashboard's files. A fixed file table (not a directory mount): no
path from the request ever reaches the filesystem."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from api.rest.codec import RestError

_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


def _read(name: str) -> bytes:
    return resources.files("api.dashboard").joinpath("static", name).read_bytes()


def dashboard_router() -> APIRouter:
    router = APIRouter(tags=["ops"], include_in_schema=False)
    # Read once: the files ship with the package and never change while serving.
    bodies = {name: _read(name) for name in _FILES}

    @router.get("/dashboard")
    async def dashboard_root() -> Response:
        return RedirectResponse("/dashboard/", status_code=307)

    @router.get("/dashboard/")
    async def dashboard_index() -> Response:
        return _serve("index.html")

    @router.get("/dashboard/{name}")
    async def dashboard_file(name: str) -> Response:
        if name not in _FILES:
            raise RestError(404, 40400, f"no dashboard file {name!r}")
        return _serve(name)

    def _serve(name: str) -> Response:
        return Response(bodies[name], media_type=_FILES[name], headers={"Cache-Control": "no-cache"})

    return router
