"""The web dashboard renders a real broker's data in headless Chromium.

A real ``strata serve`` tiers to a moto S3 endpoint with small segments and a small local
retention, so partitions have a remote-only part; a real confluent-kafka producer writes
and a real consumer group commits part of it, so the group has lag. The page must show the
topic, the offsets that the REST API reports, the group's lag, and a chart that refreshes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import ROOT, BrokerProcess, S3Endpoint, create_topic
from tests.ops.chromium import chromium
from tests.ops.settle import partitions, wait_settled

TOPIC = "orders"
GROUP = "billing"
SEGMENT = 32 * 1024


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def _produce(bootstrap: str, count: int) -> None:
    from confluent_kafka import Producer

    # Small batches: a batch never splits across segments, and the bar needs several.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 8192})
    for i in range(count):
        p.produce(TOPIC, key=str(i % 7).encode(), value=(f"order-{i}:" + "x" * 500).encode())
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def _consume_and_commit(bootstrap: str, count: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + 60
        while got < count:
            assert time.monotonic() < deadline, f"consumed only {got} of {count}"
            msg = c.poll(1.0)
            if msg is None or msg.error():
                continue
            got += 1
        c.commit(asynchronous=False)
    finally:
        c.close()


def test_dashboard_shows_topics_offsets_tiers_and_group_lag(
    broker_factory: Callable[..., BrokerProcess], s3_endpoint: S3Endpoint, s3_bucket: str, tmp_path: Path
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    env = {
        **s3_endpoint.env,
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
        "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200",
    }
    b = broker_factory("--object-store", f"s3://{s3_bucket}/dash", env=env)
    create_topic(
        b.bootstrap,
        TOPIC,
        2,
        {"segment.bytes": str(SEGMENT), "local.retention.bytes": str(2 * SEGMENT)},
    )
    _produce(b.bootstrap, 2000)
    wait_settled(b.http_url, TOPIC)
    _consume_and_commit(b.bootstrap, 700)
    lag = _get(f"{b.http_url}/v1/groups/{GROUP}/lag")
    assert lag["total_lag"] > 0
    # Settled and quiescent from here (nothing produces, uploads or commits): the REST
    # figures are the page's; checked again after the page was read.
    parts = partitions(b.http_url, TOPIC)
    assert sum(p["high_watermark"] for p in parts) == 2000
    hw = {p["partition"]: p["high_watermark"] for p in parts}
    # A partition without a commit has no lag (broker.group_lag); the consumer may have read
    # all 700 from one partition.
    expected = sum(
        hw[p["partition"]] - p["committed_offset"] for p in lag["partitions"] if p["committed_offset"]
    )
    assert 0 < lag["total_lag"] == expected

    with chromium(tmp_path / "profile") as driver:
        driver.get(f"{b.http_url}/dashboard")
        wait = WebDriverWait(driver, 60, poll_frequency=0.2)
        # Two refreshes: the chart has drawn a line through two samples.
        wait.until(
            lambda d: int(d.find_element(By.TAG_NAME, "body").get_attribute("data-refreshes") or 0) >= 2
        )

        # The page re-renders every refresh (replaceChildren): an element found before one
        # and read after it is stale. The data is quiescent, so every render shows the same;
        # a stale read starts the checks over.
        def page_shows_the_data(d: Any) -> None:
            assert d.find_element(By.ID, "error").text == ""
            assert d.find_element(By.CSS_SELECTOR, "[data-testid=health]").text == "ok"
            names = [e.text for e in d.find_elements(By.CSS_SELECTOR, "[data-testid=topic-name]")]
            assert TOPIC in names
            for p in parts:
                row = d.find_element(By.CSS_SELECTOR, f"[data-testid=partition-{TOPIC}-{p['partition']}]")
                for field in (
                    "log_start_offset",
                    "local_log_start_offset",
                    "high_watermark",
                    "log_end_offset",
                ):
                    cell = row.find_element(By.CSS_SELECTOR, f"[data-field={field}]")
                    assert cell.text == str(p[field]), (field, cell.text, p)
                # The bar has a remote-only part and a local part, in different colours.
                rects = {r.get_attribute("data-part"): r for r in row.find_elements(By.CSS_SELECTOR, "rect")}
                assert {"remote", "both"} <= set(rects) or {"remote", "local"} <= set(rects), rects.keys()
                fills = {r.value_of_css_property("fill") for r in rects.values()}
                assert len(fills) == len(rects)
                assert "seg)" in row.find_element(By.CSS_SELECTOR, "[data-field=upload_lag]").text
            group_row = d.find_element(By.CSS_SELECTOR, f"[data-testid=group-{GROUP}]")
            assert group_row.find_element(By.CSS_SELECTOR, "[data-field=total_lag]").text == str(
                lag["total_lag"]
            )
            legend = [e.text for e in d.find_elements(By.CSS_SELECTOR, "[data-testid=lag-legend]")]
            assert f"{GROUP}: {lag['total_lag']}" in legend
            line = d.find_element(By.CSS_SELECTOR, f"polyline[data-group={GROUP}]")
            assert len((line.get_attribute("points") or "").split()) >= 2

        for attempt in range(10):  # a render every 2 s: the checks fit between two
            try:
                page_shows_the_data(driver)
                break
            except StaleElementReferenceException:
                if attempt == 9:
                    raise
        shot = tmp_path / "dashboard.png"
        assert driver.save_screenshot(str(shot))
    assert partitions(b.http_url, TOPIC) == parts
    # Only the dashboard's own files are served; anything else is the usual JSON error.
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{b.http_url}/dashboard/..%2Fapp.py", timeout=10)
    assert missing.value.code == 404
    assert json.loads(missing.value.read())["error_code"] == 404  # rest-utils: the status
    assert shot.stat().st_size > 10_000
    if os.environ.get("STRATA_UPDATE_SCREENSHOT") == "1":  # refresh the docs' copy on request only
        (ROOT / "docs" / "img").mkdir(exist_ok=True)
        shutil.copyfile(shot, ROOT / "docs" / "img" / "dashboard.png")
    assert b.stop() == 0
    assert "Traceback" not in b.output(), b.output()[-3000:]
