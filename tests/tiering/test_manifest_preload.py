"""When a broker comes to lead tiered partitions it loads the manifests their first remote
fetch would wait for (tiering.manifest_preload): only for partitions with data only in the
bucket, at most ``PRELOAD_CONCURRENCY`` GETs at once, through the reader's cache (a fetch
meanwhile joins the load). Real logs and a file:// store; a second service over the same
data plays the restarted broker."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.hot.hotlib import batch_at
from tests.tiering.uplib import new_manager, new_service
from tiering.manifest_preload import PRELOAD_CONCURRENCY, reads_the_bucket


async def test_leadership_loads_the_manifests_a_first_fetch_needs(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    svc.attach()
    try:
        m.create_topic("cold", 12, {"local.retention.ms": "1", "remote.copy.lag.ms": "0"})
        m.create_topic("hot", 3)
        for p in range(12):
            lg = m.get_log("cold", p)
            lg.append(batch_at(0, 3))
            lg.roll()
        for p in range(3):
            m.get_log("hot", p).append(batch_at(0, 1))
        await svc.run_once(retention=False, sweep=False)  # uploads
        await asyncio.sleep(0.01)
        await svc.run_once(retention=False, sweep=False)  # local retention
        assert all(reads_the_bucket(m.get_log("cold", p)) for p in range(12))
        assert not any(reads_the_bucket(m.get_log("hot", p)) for p in range(3))
    finally:
        await svc.close()

    # The restarted broker: it leads nothing at first, then everything.
    svc = new_service(m, url)
    svc.attach()
    leads = [False]
    svc.is_leader = lambda topic, partition: leads[0]
    svc.roles_key = lambda: leads[0]
    load = svc.reader.manifests.load
    in_flight = [0, 0]  # now, most

    async def counted(*args: Any, **kwargs: Any) -> Any:
        in_flight[0] += 1
        in_flight[1] = max(in_flight[1], in_flight[0])
        try:
            await asyncio.sleep(0.01)
            return await load(*args, **kwargs)
        finally:
            in_flight[0] -= 1

    svc.reader.manifests.load = counted  # type: ignore[method-assign]
    try:
        svc.roles_changed()
        await asyncio.sleep(0.05)
        assert svc.reader.manifest_loads == 0  # not led here yet: nothing to load

        leads[0] = True
        svc.roles_changed()
        svc.roles_changed()  # a burst: one look, and one more after it
        topic_id = m.topic("cold").topic_id
        # A fetch of partition 0 right away joins its load instead of sending its own.
        first = await svc.reader.manifest("cold", topic_id, 0)
        assert first is not None and first.next_offset() == 3
        for _ in range(200):
            if all(svc.reader.has_manifest("cold", topic_id, p) for p in range(12)):
                break
            await asyncio.sleep(0.01)
        assert all(svc.reader.has_manifest("cold", topic_id, p) for p in range(12))
        assert svc.reader.manifest_loads == 12  # one GET each, the fetch's included
        assert in_flight[1] <= PRELOAD_CONCURRENCY + 1  # the pool, and the fetch
        hot_id = m.topic("hot").topic_id
        assert not any(svc.reader.has_manifest("hot", hot_id, p) for p in range(3))

        # Roles change again: cached manifests are not loaded again.
        svc.roles_changed()
        await asyncio.sleep(0.05)
        assert svc.reader.manifest_loads == 12
    finally:
        await svc.close()
        m.close()
