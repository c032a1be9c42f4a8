"""Broker health on the console follows an object-store outage: a real broker tiering to
a moto S3 endpoint that is stopped reports `degraded` (store unreachable) in /v1/status,
the console's overview shows the store unreachable, and both turn back by themselves once
the endpoint is back."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tests.ops.chromium import chromium

TOPIC = "outage"


def _status(http: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{http}/v1/status", timeout=10) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
    return doc


def _wait_status(http: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while (doc := _status(http))["status"] != status:
        assert time.monotonic() < deadline, f"status never became {status}: {doc}"
        time.sleep(0.2)
    return doc


def test_health_shows_a_store_outage_and_the_recovery(
    broker_factory: Callable[..., BrokerProcess], s3_endpoint: S3Endpoint, s3_bucket: str, tmp_path: Path
) -> None:
    from confluent_kafka import Producer
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    env = {
        **s3_endpoint.env,
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
        "STRATA_TIERING_MAX_BACKOFF_MS": "300",
    }
    b = broker_factory("--object-store", f"s3://{s3_bucket}/health", env=env)
    create_topic(b.bootstrap, TOPIC, 1, {"segment.bytes": "16384"})
    assert _status(b.http_url)["status"] == "ok"
    s3_endpoint.stop()
    restarted = False
    try:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "batch.size": 4096})
        for i in range(300):
            p.produce(TOPIC, value=f"v{i}".encode() + b"h" * 300)
        assert p.flush(30) == 0  # produce goes on during the outage
        down = _wait_status(b.http_url, "degraded")
        assert down["object_store_available"] is False and down["offline_partitions"] == []

        with chromium(tmp_path / "profile") as driver:
            driver.get(f"{b.http_url}/dashboard")
            # the page re-renders every refresh: an element read after one is stale, read again
            wait = WebDriverWait(
                driver, 60, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
            )

            def store(_: object) -> str:
                return str(driver.find_element(By.CSS_SELECTOR, "[data-testid=store-health]").text)

            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=store-health]"))
            wait.until(lambda d: store(d).startswith("unreachable"))
            driver.save_screenshot(str(tmp_path / "degraded.png"))
            s3_endpoint.start()
            restarted = True
            _wait_status(b.http_url, "ok")
            wait.until(lambda d: store(d).startswith("reachable"))  # the page refreshes by itself
    finally:
        if not restarted:  # the endpoint is shared by the session's other tests
            s3_endpoint.start()
    assert (tmp_path / "degraded.png").stat().st_size > 10_000
    assert b.stop() == 0
