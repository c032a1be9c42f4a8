"""The start-up gate's HTTP side (api.startup_gate) on a real Starlette app, in process:
``/healthz`` answers 503 "starting" at once, other requests wait for the gate or get a
503 with Retry-After; a real start is raced in tests/api/test_startup_readiness.py."""

from __future__ import annotations

import asyncio

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from api.startup_gate import StartupGate, gated


def _app() -> Starlette:
    async def ok(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/healthz", ok), Route("/topics", ok)])


def _client(gate: StartupGate, wait_s: float = 5.0) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=gated(_app(), gate, wait_s=wait_s))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://strata")


async def test_health_says_starting_and_other_requests_wait_for_the_gate() -> None:
    gate = StartupGate()
    async with _client(gate) as client:
        r = await client.get("/healthz")
        assert (r.status_code, r.json(), r.headers["retry-after"]) == (503, {"status": "starting"}, "1")
        waiting = asyncio.create_task(client.get("/topics"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        gate.open()
        r = await waiting
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        assert (await client.get("/healthz")).status_code == 200


async def test_a_request_that_outwaits_the_start_gets_503_with_retry_after() -> None:
    async with _client(StartupGate(), wait_s=0.05) as client:
        r = await client.get("/topics")
    assert (r.status_code, r.json(), r.headers["retry-after"]) == (503, {"status": "starting"}, "1")
