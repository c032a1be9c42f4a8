"""``consumer.instance.timeout.ms`` as a broker setting (``STRATA_CONSUMER_INSTANCE_TIMEOUT_MS``):
a real broker process configured with a short timeout closes an idle REST Proxy v2
consumer instance, which leaves its group. Waits poll the group listing (which does not
count as using the instance) and are bounded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.groups.helpers import BROKER_ENV, JSON_HEADERS, poll_records, produce, rest, wait_for
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)

TIMEOUT_MS = 1500  # short, but longer than the fetch loop below takes between two uses


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    env = {**BROKER_ENV, "STRATA_CONSUMER_INSTANCE_TIMEOUT_MS": str(TIMEOUT_MS)}
    b = BrokerProcess(tmp_path_factory.mktemp("tbroker"), env=env).start()
    yield b
    b.kill()


def _group(http: Any, group: str) -> dict[str, Any] | None:
    r = http.get("/v1/groups")
    assert r.status_code == 200, r.text
    found = [g for g in r.json()["groups"] if g["group_id"] == group]
    return found[0] if found else None


def test_idle_instance_expires_and_leaves_its_group(tbroker: BrokerProcess) -> None:
    topic, group = "it-idle", "it-idle-g"
    create_topic(tbroker.bootstrap, topic, 2)
    produce(tbroker.bootstrap, topic, [(None, b"v%d" % i, i % 2) for i in range(4)])
    http = rest(tbroker.http_url)
    body = {
        "name": "idle",
        "format": "binary",
        "auto.offset.reset": "earliest",
        "auto.commit.enable": "false",
    }
    r = http.post(f"/consumers/{group}", json=body, headers=JSON_HEADERS)
    assert r.status_code == 200, r.text
    base = f"/consumers/{group}/instances/idle"
    r = http.post(f"{base}/subscription", json={"topics": [topic]}, headers=JSON_HEADERS)
    assert r.status_code == 204, r.text
    # Records arrive once the instance joined the group and got both partitions.
    assert len(poll_records(http, base, 4)) == 4
    g = _group(http, group)
    assert g is not None and g["members"] == 1 and g["state"] == "Stable", g

    # Left alone, it expires after the configured timeout (not the 5-minute default,
    # which would run past this wait) and its membership is released at once (LeaveGroup).
    wait_for("the idle instance to leave its group", lambda: (_group(http, group) or {}).get("members") == 0)
    g = _group(http, group)
    assert g is not None and g["state"] == "Empty", g
    r = http.get(f"{base}/assignments")
    assert r.status_code == 404, r.text
    assert r.json()["error_code"] == 40403
