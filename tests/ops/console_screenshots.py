"""Screenshots of every console page at desktop (1280 px) and phone (390 px) widths, for
docs/console.md: ``python -m tests.ops.console_screenshots [OUT_DIR]`` (default docs/img).

Runs the test scenario (tests/ops/console_scenario.py) on a real broker tiering to a moto
S3 endpoint, keeps a light produce/consume load going for about a minute with the history
sampled every 2 s so the charts have a shape, then loads each page in headless Chromium.
"""

from __future__ import annotations

import base64
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.brokers import ROOT, S3Endpoint
from tests.ops.chromium import chromium
from tests.ops.console_scenario import (
    GROUP,
    JSON_TOPIC,
    PAGES,
    authorized,
    http,
    populate,
    produce,
    start_broker,
)

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
LOAD_S = 60.0
MAX_HEIGHT = 2600


def _load(b_bootstrap_broker: object, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    from tests.broker.security.test_authorization import ADMIN_PW, conf

    b = b_bootstrap_broker
    c = Consumer(
        {**conf(b, "admin", ADMIN_PW), "group.id": "screenshot-reader", "auto.offset.reset": "earliest"}
    )  # type: ignore[arg-type]
    c.subscribe([JSON_TOPIC])
    i = 0
    while not stop.is_set():
        burst = 20 + int(15 * (1 + (i % 12) / 6))
        produce(b, JSON_TOPIC, [(b"k", b'{"load": %d}' % (i * 100 + j)) for j in range(burst)])  # type: ignore[arg-type]
        c.consume(num_messages=30, timeout=0.5)
        i += 1
    c.close()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    s3 = S3Endpoint()
    with tempfile.TemporaryDirectory() as tmp:
        b = start_broker(Path(tmp) / "data", s3, s3.create_bucket("console-shots"), sample_interval_s=2.0)
        try:
            populate(b)
            stop = threading.Event()
            loader = threading.Thread(target=_load, args=(b, stop), daemon=True)
            loader.start()
            time.sleep(LOAD_S)
            stop.set()
            loader.join(30)
            with http(b) as h:
                broker_id = str(h.get("/console/api/overview").json()["broker_id"])
            with chromium(Path(tmp) / "profile", *WIDTHS["desktop"]) as driver, authorized(driver):
                for kind, (w, h) in WIDTHS.items():
                    for name, path in PAGES.items():
                        _viewport(driver, w, h, kind == "phone")
                        driver.get(b.http_url + path.replace("{id}", broker_id))
                        _wait_rendered(driver)
                        if name == "topic":  # show the browser with records from the bucket
                            _browse(driver)
                        _full_page(driver, out / f"console-{name}-{kind}.png", w, kind == "phone")
                # the message browser on a JSON topic, pretty-printed, newest first
                _viewport(driver, *WIDTHS["desktop"], False)
                driver.get(f"{b.http_url}/dashboard/topics/{JSON_TOPIC}")
                _wait_rendered(driver)
                _browse(driver, mode="newest", fmt="json")
                _full_page(driver, out / "console-messages-desktop.png", WIDTHS["desktop"][0], False)
                driver.get(b.http_url + "/dashboard")
                _wait_rendered(driver)
                driver.find_element("css selector", "[data-testid=theme]").click()  # auto -> dark
                _full_page(driver, out / "console-overview-dark.png", WIDTHS["desktop"][0], False)
            print(f"screenshots in {out} (group {GROUP})")
        finally:
            b.stop()
            s3.stop()
        _cluster(Path(tmp), out)


def _cluster(tmp: Path, out: Path) -> None:
    """The brokers page of a 3-broker cluster on etcd, served by broker 2."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.clusterlib import Cluster, wait_until
    from tests.broker.etcdlib import EtcdProcess

    etcd = EtcdProcess(tmp / "etcd").start()
    cluster = Cluster(tmp / "cluster", etcd, env={"STRATA_CONSOLE_SAMPLE_INTERVAL_S": "2"}, proxied=False)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = [NewTopic(f"events-{i}", num_partitions=6, replication_factor=3) for i in range(3)]
        for f in admin.create_topics(topics).values():
            f.result(30)
        wait_until(lambda: all(cluster.fully_replicated(t.topic) for t in topics), "replicated")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # some history for the charts
            for t in topics:
                for i in range(200):
                    p.produce(t.topic, value=b"e" * 200, key=str(i).encode())
            p.flush(30)
            time.sleep(0.5)
        node = cluster.nodes[2]
        with chromium(tmp / "profile-cluster", *WIDTHS["desktop"]) as driver:
            for name, path in (("brokers", "/dashboard/brokers"), ("overview", "/dashboard")):
                _viewport(driver, *WIDTHS["desktop"], False)
                driver.get(node.http_url + path)
                _wait_rendered(driver)
                _full_page(driver, out / f"console-cluster-{name}-desktop.png", WIDTHS["desktop"][0], False)
    finally:
        cluster.close()
        etcd.kill()


def _viewport(driver: Any, width: int, height: int, mobile: bool) -> None:
    """An exact CSS viewport (DevTools' device metrics: no window decorations to allow for)."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def _full_page(driver: Any, path: Path, width: int, mobile: bool) -> None:
    """The whole page (up to MAX_HEIGHT): the viewport grows to the content, the page is
    scrolled to the top, and the charts redraw before the capture."""
    driver.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.3)
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    _viewport(driver, width, min(height, MAX_HEIGHT), mobile)
    time.sleep(0.5)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    path.write_bytes(base64.b64decode(shot["data"]))


def _wait_rendered(driver: object) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30, poll_frequency=0.2).until(  # type: ignore[arg-type]
        lambda d: int(d.find_element("tag name", "body").get_attribute("data-refreshes") or 0) >= 1
    )


def _browse(driver: Any, mode: str = "offset", fmt: str = "text") -> None:
    from selenium.webdriver.support.ui import Select, WebDriverWait

    Select(driver.find_element("css selector", "[data-testid=browse-mode]")).select_by_value(mode)
    Select(driver.find_element("css selector", "[data-testid=browse-format]")).select_by_value(fmt)
    box = driver.find_element("css selector", "[data-testid=browse-limit]")
    box.clear()
    box.send_keys("3")
    driver.find_element("css selector", "[data-testid=browse-go]").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements("css selector", "[data-testid=message]"))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "img")
