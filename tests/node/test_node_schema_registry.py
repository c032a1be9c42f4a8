"""The schema registry of a node of several processes: the supervisor binds the registry
listener and every process accepts on it, so consecutive requests land on different
processes; the answers agree (one writer, the others relay to it)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.brokers import BrokerProcess

MEDIA = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str = "GET", body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": MEDIA})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def test_every_process_of_a_node_serves_the_registry(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "node", "--processes", "2", "--schema-registry-listen", "127.0.0.1:0")
    b.start(timeout=120)
    try:
        assert b.registry_port
        url = b.registry_url
        ids = []
        for i in range(6):  # new connections each time: both processes accept some
            schema = json.dumps({"type": "record", "name": f"R{i % 3}", "fields": []})
            ids.append(call(f"{url}/subjects/s{i % 3}-value/versions", "POST", {"schema": schema})["id"])
        assert ids == [1, 2, 3, 1, 2, 3]
        for _ in range(4):
            assert call(f"{url}/subjects") == ["s0-value", "s1-value", "s2-value"]
    finally:
        b.kill()
