"""The web console in headless Chromium over one real broker (tests/ops/console_scenario.py:
SCRAM users, ACLs and REST basic auth, tiering to a moto S3 endpoint, a group with lag).

Every page loads directly at its own URL with the broker's real figures; the message browser
finds a record by offset and by value filter below the local log start (read from the
bucket); a reset moves an empty group's committed offsets; a principal without ACLs sees
neither the topic nor its messages. One broker for the module: the tests read what it
holds and change only what they own (the group reset comes last)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.brokers import BrokerProcess, S3Endpoint
from tests.ops.chromium import chromium
from tests.ops.console_scenario import (
    GROUP,
    JSON_TOPIC,
    PAGES,
    TOPIC,
    authorized,
    http,
    populate,
    start_broker,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: S3Endpoint) -> Iterator[BrokerProcess]:
    bucket = s3_endpoint.create_bucket("console-tests")
    b = start_broker(tmp_path_factory.mktemp("console"), s3_endpoint, bucket, sample_interval_s=1.0)
    try:
        populate(b)
        yield b
    finally:
        b.kill()


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("profile"), 1280, 1000) as d:
        yield d


def _open(driver: Any, b: BrokerProcess, path: str) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(b.http_url + path)
    # pages re-render on every refresh: an element read after one is stale, and read again
    wait = WebDriverWait(driver, 30, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda d: int(d.find_element(By.TAG_NAME, "body").get_attribute("data-refreshes") or 0) >= 1)
    return wait


def _text(driver: Any, css: str) -> str:
    """The text of the element ``css`` finds; found again when a refresh replaced it between
    the find and the read (pages re-render every 5 s)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for attempt in range(5):
        try:
            return str(driver.find_element(By.CSS_SELECTOR, css).text)
        except StaleElementReferenceException:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def test_every_page_renders_real_data(broker: BrokerProcess, driver: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    with http(broker) as h:
        topic = h.get(f"/console/api/topics/{TOPIC}").json()
        lag = h.get(f"/v1/groups/{GROUP}/lag").json()
        broker_id = h.get("/console/api/overview").json()["broker_id"]
    expected = {
        "overview": ("[data-testid=stat-topics] .stat-value", "3"),  # orders, payments, __consumer_offsets
        "topics": (f"[data-row=topic-{TOPIC}] [data-field=messages]", "2,000"),
        "topic": (
            f"[data-row=partition-{TOPIC}-0] [data-field=high_watermark]",
            str(topic["partitions"][0]["high_watermark"]),
        ),
        "groups": (f"[data-row=group-{GROUP}] [data-field=total_lag]", f"{lag['total_lag']:,}"),
        "group": ("[data-testid=total-lag]", f"{lag['total_lag']:,}"),
        "brokers": (f"[data-row=broker-{broker_id}] [data-field=leaders]", None),
        "broker": (f"[data-row={TOPIC}-0] [data-field=leader]", str(broker_id)),
        "tiering": (f"[data-row={TOPIC}] [data-field=remote_segments]", None),
        "security": ("[data-testid=users]", None),
    }
    with authorized(driver):
        for name, path in PAGES.items():
            _open(driver, broker, path.replace("{id}", str(broker_id)))
            assert driver.find_elements(By.CSS_SELECTOR, "[data-testid=view-error]") == [], name
            css, want = expected[name]
            got = _text(driver, css)
            assert got if want is None else got == want, (name, got, want)
            # the page's nav entry is the current one; the title is the page's
            assert driver.find_element(By.CSS_SELECTOR, "nav a[aria-current=page]")
        # the security page lists the users and the ACL the scenario created
        assert "nobody" in _text(driver, "[data-testid=users]")
        assert "nobody-group" in _text(driver, "[data-testid=acls]")
        assert "consumer_byte_rate = 256.0 MiB/s" in _text(driver, "[data-testid=quotas]")
        # the tier view's Iceberg column: the payments topic's table with its 300 records
        wait = _open(driver, broker, "/dashboard/tiering")
        iceberg_cell = f"[data-row={JSON_TOPIC}] [data-field=iceberg]"
        try:
            wait.until(lambda d: _text(d, iceberg_cell).startswith("strata.payments @ 300, lag 0"))
        except Exception:
            raise AssertionError(f"the Iceberg column says {_text(driver, iceberg_cell)!r}") from None
        assert _text(driver, f"[data-row={TOPIC}] [data-field=iceberg]") == ""
        # keyboard: the navigation's links take the focus and Enter follows them
        driver.find_element(By.CSS_SELECTOR, "nav a[data-section=groups]").send_keys(Keys.ENTER)
        WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("/dashboard/groups"))
        assert _text(driver, "[data-testid=page-title]") == "Consumer groups"
        # the overview's lag chart draws the history the broker sampled while the scenario ran
        _open(driver, broker, "/dashboard")
        assert driver.find_elements(By.CSS_SELECTOR, "[data-testid=chart-lag] path[data-series]")
        # client-side navigation keeps real URLs: a click on a topic link, then a reload
        wait = _open(driver, broker, "/dashboard/topics")
        wait.until(lambda d: d.find_element(By.LINK_TEXT, JSON_TOPIC).click() or True)  # again if replaced
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f"[data-row=partition-{JSON_TOPIC}-2]"))
        assert driver.current_url.endswith(f"/dashboard/topics/{JSON_TOPIC}")
        driver.refresh()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f"[data-row=partition-{JSON_TOPIC}-2]"))
        assert _text(driver, "[data-testid=page-title]") == JSON_TOPIC
        # the tier bar of a tiered partition has a bucket-only part
        wait = _open(driver, broker, PAGES["topic"])
        parts = wait.until(
            lambda d: {
                r.get_attribute("data-part")
                for r in d.find_elements(By.CSS_SELECTOR, "[data-testid=partition-bar] rect")
            }
        )
        assert "remote" in parts, parts
        # phone width: no horizontal scroll of the page itself (tables scroll in their box)
        driver.set_window_size(390, 844)
        try:
            _open(driver, broker, "/dashboard")
            assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
        finally:
            driver.set_window_size(1280, 1000)


def test_message_browser_reads_across_the_tier_boundary(broker: BrokerProcess, driver: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    with http(broker) as h:
        p0 = h.get(f"/console/api/topics/{TOPIC}").json()["partitions"][0]
        # a record of the bucket-only part of partition 0, and its value
        target = p0["local_log_start_offset"] // 2
        assert p0["log_start_offset"] <= target < p0["local_log_start_offset"]
        doc = h.get(
            f"/console/api/topics/{TOPIC}/messages",
            params={"partition": 0, "mode": "offset", "offset": target, "limit": 1},
        ).json()
    value = base64.b64decode(doc["records"][0]["value"]).decode()
    needle = value.split(":")[0] + ":"  # "order-<i>:", unique in the topic
    with http(broker) as h:
        hw = {
            p["partition"]: p["high_watermark"]
            for p in h.get(f"/console/api/topics/{TOPIC}").json()["partitions"]
        }

    def first_offset(d: Any) -> str | None:
        found = d.find_elements(By.CSS_SELECTOR, "[data-testid=message]")
        return str(found[0].get_attribute("data-offset")) if found else None

    with authorized(driver):
        # the page opens with the newest records of every partition, unasked
        wait = _open(driver, broker, PAGES["topic"])
        wait.until(lambda d: first_offset(d) is not None)
        newest = driver.find_element(By.CSS_SELECTOR, "[data-testid=message]")
        partition = int(newest.get_attribute("data-partition"))
        assert int(newest.get_attribute("data-offset")) == hw[partition] - 1
        form = driver.find_element(By.CSS_SELECTOR, "[data-testid=browse-form]")
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=browse-partition]")).select_by_value("0")
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=browse-mode]")).select_by_value("offset")
        box = form.find_element(By.CSS_SELECTOR, "[data-testid=browse-offset]")
        box.clear()
        box.send_keys(str(target))
        form.find_element(By.CSS_SELECTOR, "[data-testid=browse-go]").click()
        wait.until(lambda d: first_offset(d) == str(target))
        # the filter is in the URL: a reload (or a shared link) opens the same view
        search = driver.execute_script("return location.search")
        assert search == f"?partition=0&mode=offset&offset={target}", search
        wait = _open(driver, broker, PAGES["topic"] + search)
        wait.until(lambda d: first_offset(d) == str(target))
        form = driver.find_element(By.CSS_SELECTOR, "[data-testid=browse-form]")
        assert (
            Select(
                form.find_element(By.CSS_SELECTOR, "[data-testid=browse-mode]")
            ).first_selected_option.get_attribute("value")
            == "offset"
        )
        first = driver.find_element(By.CSS_SELECTOR, "[data-testid=message]")
        assert needle in first.find_element(By.CSS_SELECTOR, "[data-testid=message-value]").text
        assert "console-test" in first.text  # the header
        # all partitions, newest first, filtered by the value: the one record from the bucket
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=browse-partition]")).select_by_value("")
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=browse-mode]")).select_by_value("newest")
        form.find_element(By.CSS_SELECTOR, "[data-testid=browse-filter]").send_keys(needle)
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=browse-format]")).select_by_value("hex")
        form.find_element(By.CSS_SELECTOR, "[data-testid=browse-go]").click()
        wait.until(lambda d: d.execute_script("return location.search").startswith("?filter="))
        wait.until(lambda d: _text(d, "[data-testid=browse-summary]").startswith("1 record(s)"))
        found = driver.find_elements(By.CSS_SELECTOR, "[data-testid=message]")
        assert [(m.get_attribute("data-partition"), m.get_attribute("data-offset")) for m in found] == [
            ("0", str(target))
        ]
        assert driver.execute_script("return location.search") == "?" + urlencode(
            {"filter": needle, "format": "hex"}
        )


def test_unauthorized_principal_sees_neither_the_topic_nor_its_messages(
    broker: BrokerProcess, driver: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with http(broker, "nobody") as h:
        assert TOPIC not in {t["topic"] for t in h.get("/console/api/topics").json()["topics"]}
        for path in (
            f"/console/api/topics/{TOPIC}",
            f"/console/api/topics/{TOPIC}/messages",
            "/console/api/security",
        ):
            r = h.get(path)
            assert r.status_code == 403, (path, r.text)
        assert h.get(f"/console/api/groups/{GROUP}").status_code == 403
        r = h.post(f"/console/api/topics/{TOPIC}/messages", json={"value": "x"})
        assert r.status_code == 403
    with authorized(driver, "nobody"):
        _open(driver, broker, "/dashboard/topics")
        assert TOPIC not in _text(driver, "[data-testid=topics]")
        driver.get(broker.http_url + PAGES["topic"])
        wait = WebDriverWait(driver, 30, poll_frequency=0.2)
        [error] = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=view-error]"))
        assert "Not authorized" in error.text and "order-" not in driver.page_source
        assert driver.find_elements(By.CSS_SELECTOR, "[data-testid=message]") == []


def test_acls_are_added_and_removed_on_the_security_page(broker: BrokerProcess, driver: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    def rows(d: Any) -> list[str]:
        return [r.text for r in d.find_elements(By.CSS_SELECTOR, "[data-testid=acls] tbody tr")]

    acl = {
        "principal": "User:auditor",
        "host": "*",
        "resource_type": "TOPIC",
        "resource_name": "audit-",
        "pattern_type": "PREFIXED",
        "operation": "READ",
        "permission": "ALLOW",
    }
    with http(broker, "nobody") as h:  # ALTER on the cluster is needed
        r = h.post("/console/api/acls", json=acl)
        assert r.status_code == 403 and r.json()["message"] == "not authorized to ALTER the cluster"
    with http(broker) as h:
        r = h.post("/console/api/acls", json={**acl, "operation": "FLY"})
        assert r.status_code == 400 and "not a valid ACL" in r.json()["message"]
    with authorized(driver):
        wait = _open(driver, broker, PAGES["security"])
        form = driver.find_element(By.CSS_SELECTOR, "[data-testid=acl-form]")
        principal = form.find_element(By.CSS_SELECTOR, "[data-testid=acl-principal]")
        principal.clear()
        principal.send_keys(acl["principal"])
        form.find_element(By.CSS_SELECTOR, "[data-testid=acl-name]").send_keys(acl["resource_name"])
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=acl-pattern_type]")).select_by_value(
            "PREFIXED"
        )
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=acl-operation]")).select_by_value("READ")
        form.find_element(By.CSS_SELECTOR, "[data-testid=acl-add]").click()
        wait.until(lambda d: any("User:auditor" in t for t in rows(d)))
        with http(broker) as h:
            assert acl in h.get("/console/api/security").json()["acls"]

        def click_remove(d: Any) -> bool:
            for r in d.find_elements(By.CSS_SELECTOR, "[data-testid=acls] tbody tr"):
                if "User:auditor" in r.text:
                    r.find_element(By.CSS_SELECTOR, "[data-testid=acl-remove]").click()
                    return True
            return False

        wait.until(click_remove)  # found and clicked in one go (a refresh may replace the row)
        [dialog] = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "dialog[data-testid=confirm]"))
        dialog.find_element(By.CSS_SELECTOR, "[data-testid=confirm-ok]").click()
        wait.until(lambda d: not any("User:auditor" in t for t in rows(d)))
    with http(broker) as h:
        assert acl not in h.get("/console/api/security").json()["acls"]


class _EvilPage(BaseHTTPRequestHandler):
    """Serves ``page`` (set per test) to every GET: a page of another origin."""

    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args: Any) -> None:  # quiet
        pass


def _attack_page(target: str) -> bytes:
    """Every console write (and a REST v2/v3 one), each as a ``text/plain`` form that
    auto-submits into a frame and as a ``no-cors`` fetch: the requests a page of any site
    can make without a CORS preflight."""
    writes = {
        "/console/api/users": {"name": "evil", "mechanism": "SCRAM-SHA-256", "password": "pwned-pw"},
        "/console/api/acls": {
            "principal": "User:evil",
            "host": "*",
            "resource_type": "TOPIC",
            "resource_name": "*",
            "pattern_type": "LITERAL",
            "operation": "ALL",
            "permission": "ALLOW",
        },
        "/console/api/quotas": {"user": "evil", "key": "producer_byte_rate", "value": 1},
        "/console/api/groups/reset": {"group": GROUP, "topic": TOPIC, "to": "earliest"},
        f"/console/api/topics/{TOPIC}/messages": {"value": "evil"},
        f"/topics/{TOPIC}": {"records": [{"value": "ZXZpbA=="}]},
        "/v3/clusters/strata-local/topics": {"topic_name": "evil-topic"},
    }
    forms, fetches = [], []
    for i, (path, body) in enumerate(writes.items()):
        text = json.dumps(body)
        # enctype=text/plain sends name=value: the name carries the JSON up to a padding field
        name, value = text[:-1] + ', "pad": "', '"}'
        forms.append(
            f"<iframe name=f{i}></iframe><form method=POST enctype=text/plain target=f{i} "
            f"action='{target}{path}'><input type=hidden name='{name}' value='{value}'></form>"
        )
        fetches.append(
            f"fetch('{target}{path}', {{method: 'POST', mode: 'no-cors', credentials: 'include', "
            f"body: {json.dumps(text)}}})"
        )
    script = (
        "window.loaded = 0;"
        "for (const f of document.querySelectorAll('iframe')) f.onload = () => window.loaded++;"
        "for (const f of document.forms) f.submit();"
        f"Promise.allSettled([{', '.join(fetches)}]).then(() => {{ window.fetched = true; }});"
    )
    return f"<!doctype html><body>{''.join(forms)}<script>{script}</script></body>".encode()


def test_another_sites_page_changes_nothing(broker: BrokerProcess, driver: Any) -> None:
    """A page of another origin, in a browser signed in to the console (basic auth on every
    request), posts to every console write as a text/plain form and a no-cors fetch: the
    broker refuses each (403 cross-origin, 415 not JSON) and nothing changes."""
    from selenium.webdriver.support.ui import WebDriverWait

    def state() -> dict[str, Any]:
        with http(broker) as h:
            sec = h.get("/console/api/security").json()
            group = h.get(f"/v1/groups/{GROUP}/lag").json()
            topic = h.get(f"/console/api/topics/{TOPIC}").json()
            return {
                "acls": sec["acls"],
                "users": sec["users"],
                "quotas": sec["quotas"],
                "offsets": {p["partition"]: p["committed_offset"] for p in group["partitions"]},
                "hw": [p["high_watermark"] for p in topic["partitions"]],
                "topics": sorted(t["topic"] for t in h.get("/console/api/topics").json()["topics"]),
            }

    with http(broker) as h:  # what the pages send, from a client: refused before any route
        evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
        r = h.post("/console/api/users", content=b"{}", headers=evil)
        assert (r.status_code, r.json()["error_code"]) == (403, 40301), r.text
        r = h.post("/console/api/users", content=b"{}", headers={"Content-Type": "text/plain"})
        assert (r.status_code, r.json()["error_code"]) == (415, 41500), r.text
        r = h.post("/console/api/users", json={}, headers={"Sec-Fetch-Site": "cross-site"})
        assert (r.status_code, r.json()["error_code"]) == (403, 40301), r.text
    before = state()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EvilPage)
    _EvilPage.page = _attack_page(broker.http_url)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with authorized(driver):
            # localhost, not the broker's 127.0.0.1: another site, not only another origin
            driver.get(f"http://localhost:{server.server_address[1]}/")
            WebDriverWait(driver, 30, poll_frequency=0.2).until(
                lambda d: d.execute_script("return window.fetched === true && window.loaded >= 7")
            )
    finally:
        server.shutdown()
        server.server_close()
    assert state() == before


def test_reset_offsets_of_the_empty_group(broker: BrokerProcess, driver: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    with http(broker) as h:
        before = h.get(f"/v1/groups/{GROUP}/lag").json()
        hw = {
            p["partition"]: p["high_watermark"]
            for p in h.get(f"/console/api/topics/{TOPIC}").json()["partitions"]
        }
    assert before["total_lag"] > 0 and before["state"] == "Empty"
    with authorized(driver):
        wait = _open(driver, broker, PAGES["group"])
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=reset-topic]"))
        Select(driver.find_element(By.CSS_SELECTOR, "[data-testid=reset-topic]")).select_by_value(TOPIC)
        Select(driver.find_element(By.CSS_SELECTOR, "[data-testid=reset-to]")).select_by_value("latest")
        driver.find_element(By.CSS_SELECTOR, "[data-testid=reset-go]").click()
        [dialog] = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "dialog[data-testid=confirm]"))
        assert GROUP in dialog.text
        dialog.find_element(By.CSS_SELECTOR, "[data-testid=confirm-ok]").click()
        wait.until(lambda d: _text(d, "[data-testid=reset-result]").startswith("Reset"))
    with http(broker) as h:
        after = h.get(f"/v1/groups/{GROUP}/lag").json()
    assert after["total_lag"] == 0
    assert {p["partition"]: p["committed_offset"] for p in after["partitions"]} == hw


def test_reset_is_refused_while_the_group_has_members(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    from tests.broker.security.test_authorization import ADMIN_PW, conf

    c = Consumer(
        {**conf(broker, "admin", ADMIN_PW), "group.id": "console-live", "auto.offset.reset": "earliest"}
    )
    try:
        c.subscribe([JSON_TOPIC])
        with http(broker) as h:
            for _ in range(60):
                c.poll(0.5)
                if h.get("/console/api/groups/console-live").json()["members"]:
                    break
            r = h.post("/console/api/groups/reset", json={"group": "console-live", "to": "earliest"})
        assert r.status_code == 409 and "only while the group is empty" in r.json()["message"], r.text
    finally:
        c.close()


def test_users_and_quotas_are_changed_on_the_security_page(broker: BrokerProcess, driver: Any) -> None:
    """A SCRAM credential set from the form authenticates a real client (the password is
    salted on the broker as a Kafka admin client would); a quota set from the form is the
    runtime quota; both need their cluster ACL; the credential is removed again."""
    from confluent_kafka.admin import AdminClient
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from tests.broker.security.test_authorization import conf

    user, pw = "console-newbie", "n3wbie-secret"

    def users(d: Any) -> list[str]:
        return [r.text for r in d.find_elements(By.CSS_SELECTOR, "[data-testid=users] tbody tr")]

    with http(broker, "nobody") as h:
        r = h.post("/console/api/users", json={"name": user, "mechanism": "SCRAM-SHA-256", "password": pw})
        assert r.status_code == 403 and r.json()["message"] == "not authorized to ALTER the cluster"
        r = h.post("/console/api/quotas", json={"user": user, "key": "producer_byte_rate", "value": 1024})
        assert r.status_code == 403
    with http(broker) as h:
        r = h.post("/console/api/users", json={"name": user, "mechanism": "SCRAM-SHA-1", "password": pw})
        assert r.status_code == 400 and "mechanism must be one of" in r.json()["message"]
        r = h.post("/console/api/quotas", json={"user": user, "key": "request_percentage", "value": 5})
        assert r.status_code == 400 and "key must be one of" in r.json()["message"]
    with authorized(driver):
        wait = _open(driver, broker, PAGES["security"])
        form = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=user-form]"))
        form.find_element(By.CSS_SELECTOR, "[data-testid=user-name]").send_keys(user)
        # the mechanism the broker's listener offers (tests.ops.console_scenario)
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=user-mechanism]")).select_by_value(
            "SCRAM-SHA-256"
        )
        form.find_element(By.CSS_SELECTOR, "[data-testid=user-password]").send_keys(pw)
        form.find_element(By.CSS_SELECTOR, "[data-testid=user-submit]").click()
        wait.until(lambda d: any(user in t for t in users(d)))
        # the credential works for a real client (SASL/SCRAM over the Kafka listener)
        meta = AdminClient(conf(broker, user, pw, "SCRAM-SHA-256")).list_topics(timeout=20)
        assert meta.brokers
        quota = driver.find_element(By.CSS_SELECTOR, "[data-testid=quota-form]")
        quota.find_element(By.CSS_SELECTOR, "[data-testid=quota-user]").send_keys(user)
        quota.find_element(By.CSS_SELECTOR, "[data-testid=quota-value]").send_keys("2048")
        quota.find_element(By.CSS_SELECTOR, "[data-testid=quota-submit]").click()
        wait.until(
            lambda d: (
                "producer_byte_rate" in d.find_element(By.CSS_SELECTOR, "[data-testid=quota-result]").text
            )
        )
        with http(broker) as h:
            quotas = h.get("/console/api/security").json()["quotas"]
            assert {
                "entity": f"user {user}",
                "source": "runtime",
                "quotas": {"producer_byte_rate": 2048.0},
            } in quotas
            r = h.post("/console/api/quotas", json={"user": user, "key": "producer_byte_rate", "value": None})
            assert r.status_code == 200

        def click_remove(d: Any) -> bool:
            for row in d.find_elements(By.CSS_SELECTOR, "[data-testid=users] tbody tr"):
                if user in row.text:
                    row.find_element(By.CSS_SELECTOR, "[data-testid=user-remove]").click()
                    return True
            return False

        wait.until(click_remove)
        [dialog] = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "dialog[data-testid=confirm]"))
        dialog.find_element(By.CSS_SELECTOR, "[data-testid=confirm-ok]").click()
        wait.until(lambda d: not any(user in t for t in users(d)))
