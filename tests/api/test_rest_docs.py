"""``/docs`` and ``/redoc`` render offline: a real broker process, headless Chromium, and every
resource the pages load comes from the broker itself (no CDN, fonts or validator)."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.brokers import BrokerProcess
from tests.ops.chromium import chromium

pytestmark = pytest.mark.timeout(180)


def _wait_for(driver: object, script: str, what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)  # type: ignore[attr-defined]
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} did not show within {timeout}s"
        time.sleep(0.2)


def test_docs_and_redoc_render_from_local_assets(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        origin = b.http_url
        with httpx.Client(base_url=origin, timeout=30) as http:
            for page in ("/docs", "/redoc"):
                r = http.get(page)
                assert r.status_code == 200 and "cdn." not in r.text and "fonts.googleapis" not in r.text
            assert http.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
        host = urlsplit(origin).netloc
        with chromium(tmp_path / "profile") as driver:
            # What the pages' Content-Security-Policy stops before any request is made (Redoc
            # links its logo from its CDN unconditionally): recorded from the first script on.
            driver.execute_cdp_cmd(
                "Page.addScriptToEvaluateOnNewDocument",
                {
                    "source": "window.blocked = []; document.addEventListener("
                    "'securitypolicyviolation', e => window.blocked.push(e.blockedURI));"
                },
            )
            driver.get(f"{origin}/docs")
            count = _wait_for(
                driver, "return document.querySelectorAll('.opblock').length", "the operations list"
            )
            assert isinstance(count, int) and count > 20
            text = driver.execute_script("return document.body.innerText")
            assert "/v3/clusters/{cluster_id}/topics/{topic}/records" in text
            swagger = driver.execute_script(
                "return performance.getEntriesByType('resource').map(e => e.name)"
            )
            driver.get(f"{origin}/redoc")
            _wait_for(
                driver, "return document.querySelectorAll('[data-section-id]').length", "Redoc's sections"
            )
            redoc = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
            blocked = set(driver.execute_script("return window.blocked"))
        assert blocked <= {"https://cdn.redoc.ly/redoc/logo-mini.svg"}, blocked
        for name in [*swagger, *redoc]:
            if name in blocked:
                continue  # refused by the page's policy: never requested
            parts = urlsplit(name)
            assert parts.scheme in ("http", "data", "blob") and (
                parts.scheme != "http" or parts.netloc == host
            ), name
        assert any(n.endswith("/openapi.json") for n in swagger) and any(
            n.endswith("/openapi.json") for n in redoc
        )
    finally:
        b.kill()
