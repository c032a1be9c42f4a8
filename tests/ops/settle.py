"""Waiting for a tiered broker to settle: every sealed segment uploaded, local retention
done, so /v1/partitions stops changing while nothing produces (bounded polling; never
an assertion about speed)."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from typing import Any

Partitions = list[dict[str, Any]]


def partitions(http: str, topic: str, auth: tuple[str, str] | None = None) -> Partitions:
    """``topic``'s partitions in /v1/partitions (as ``auth``'s user and password, if given)."""
    req = urllib.request.Request(f"{http}/v1/partitions")
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        doc = json.loads(resp.read())
    parts: Partitions = next(t for t in doc["topics"] if t["topic"] == topic)["partitions"]
    return parts


def wait_settled(
    http: str, topic: str, timeout: float = 90.0, auth: tuple[str, str] | None = None
) -> Partitions:
    """Until each partition has a remote-only part (log start below local log start), no
    upload lag, and two snapshots 0.5 s apart are equal (a retention pass runs between
    them when the broker checks every 200 ms)."""
    deadline = time.monotonic() + timeout
    last: Partitions | None = None
    while True:
        now = partitions(http, topic, auth)
        ready = all(
            p["remote_segments"] > 0
            and p["upload_lag_segments"] == 0
            and p["log_start_offset"] < p["local_log_start_offset"]
            for p in now
        )
        if ready and now == last:
            return now
        assert time.monotonic() < deadline, f"{topic} did not settle: {now}"
        last = now if ready else None
        time.sleep(0.5)
