"""An idle broker's periodic tiering passes cost what changed (tiering.pass_schedule):
quiet partitions are not looked at again until a segment rolls, their time comes (the
upload-lag bound, the quiet period), or the set of partitions changes; total retention
skips partitions whose outcome cannot have changed. Real logs and a file:// store,
``TieringService.run_once(quiet=True)`` (what the periodic loop runs) with an injected
clock; the uploader's entry points are wrapped only to count the visits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hot.log import Log
from tests.hot.hotlib import batch_at
from tests.tiering.uplib import load_manifest, make_store, new_manager
from tiering.config import TieringConfig
from tiering.metrics import TieringMetrics
from tiering.pass_schedule import upload_lag_due
from tiering.service import TieringService

T0 = 1_800_000_000_000
QUIET_MS = 30_000


def _service(tmp_path: Path, now: list[int]) -> tuple[TieringService, Counter[str]]:
    m = new_manager(tmp_path / "data")
    cfg = TieringConfig(cache_max_bytes=0, retention_check_interval_ms=QUIET_MS)
    store = make_store(f"file://{tmp_path / 'bucket'}")
    svc = TieringService(m, store, cfg, TieringMetrics(), clock_ms=lambda: now[0])
    svc.attach()
    visits: Counter[str] = Counter()

    def counted(name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapper(log: Log, *args: Any) -> Any:
            visits[f"{name}:{log.topic}-{log.partition}"] += 1
            visits[name] += 1
            return await fn(log, *args)

        return wrapper

    svc.uploader.upload_partition = counted("upload", svc.uploader.upload_partition)  # type: ignore[method-assign,assignment]
    svc.uploader.apply_total_retention = counted("retention", svc.uploader.apply_total_retention)  # type: ignore[method-assign,assignment]
    return svc, visits


def _fill(log: Log, n: int, at_ms: int) -> None:
    log.append(batch_at(log.log_end_offset, n, ts=at_ms), now_ms=at_ms)


async def test_idle_passes_look_at_nothing_until_a_roll_or_a_due_time(tmp_path: Path) -> None:
    now = [T0]
    svc, visits = _service(tmp_path, now)
    m = svc.manager
    try:
        m.create_topic("t", 40, {"remote.copy.max.lag.ms": "3600000"})
        logs = [m.get_log("t", p) for p in range(40)]
        for lg in logs:
            _fill(lg, 2, T0)
            lg.roll()
        first = await svc.run_once(quiet=True, retention=False, sweep=False)
        assert first.uploaded == 40 and visits["upload"] == 40  # a full pass: everything
        now[0] += 1000
        await svc.run_once(quiet=True, retention=False, sweep=False)
        visits.clear()
        for _ in range(10):  # ten idle seconds: no partition is looked at
            now[0] += 1000
            r = await svc.run_once(quiet=True, retention=False, sweep=False)
            assert r.uploaded == 0
        assert visits["upload"] == 0

        # A roll (any thread, under the log's lock) brings exactly that partition back.
        _fill(logs[7], 3, now[0])
        logs[7].roll()
        now[0] += 1000
        r = await svc.run_once(quiet=True, retention=False, sweep=False)
        assert r.uploaded == 1 and visits["upload"] == 1 and visits["upload:t-7"] == 1
        assert (await load_manifest(f"file://{tmp_path / 'bucket'}", m, "t", 7)).next_offset() == 5

        # A new topic changes the set of partitions: the next pass looks at all of them.
        visits.clear()
        m.create_topic("u", 2)
        now[0] += 1000
        await svc.run_once(quiet=True, retention=False, sweep=False)
        assert visits["upload:u-0"] == 1 and visits["upload:u-1"] == 1

        # The quiet period ends: every partition is looked at again, once.
        visits.clear()
        for _ in range(QUIET_MS // 1000 + 1):
            now[0] += 1000
            await svc.run_once(quiet=True, retention=False, sweep=False)
        assert all(visits[f"upload:t-{p}"] == 1 for p in range(40)), visits
    finally:
        await svc.close()
        m.close()


async def test_data_appended_to_a_quiet_partition_rolls_at_its_upload_lag_bound(tmp_path: Path) -> None:
    bound = 10_000
    now = [T0]
    svc, visits = _service(tmp_path, now)
    m = svc.manager
    try:
        m.create_topic("lag", 1, {"remote.copy.max.lag.ms": str(bound)})
        log = m.get_log("lag", 0)
        await svc.run_once(quiet=True, retention=False, sweep=False)  # empty: quiet
        assert upload_lag_due(log, now[0]) == now[0] + bound
        _fill(log, 4, T0 + 1000)  # no roll, no shape change: nothing tells the schedule
        uploaded = []
        for s in range(1, 13):
            now[0] = T0 + s * 1000
            uploaded.append((await svc.run_once(quiet=True, retention=False, sweep=False)).uploaded)
        # Looked at when the empty segment's bound ran out (10 s), then exactly when the
        # first record is ``bound`` old (11 s): rolled and uploaded in that pass.
        assert uploaded == [0] * 10 + [1, 0], uploaded
        # Visits: the first pass, 10 s, 11 s, and 12 s (a visit that uploaded looks again
        # next pass, then the partition is quiet).
        assert visits["upload"] == 4
    finally:
        await svc.close()
        m.close()


async def test_total_retention_skips_partitions_whose_outcome_cannot_have_changed(tmp_path: Path) -> None:
    retention = 600_000
    now = [T0]
    svc, visits = _service(tmp_path, now)
    m = svc.manager
    try:
        m.create_topic("r", 3, {"retention.ms": str(retention), "local.retention.ms": "1"})
        for p in range(3):
            lg = m.get_log("r", p)
            _fill(lg, 2, T0 + p * 1000)
            lg.roll()
        # Uploads, then local retention (local.retention.ms=1) change each partition's
        # shape in the first passes; then nothing does.
        for _ in range(2):
            await svc.run_once(quiet=True, retention=True, sweep=False)
            now[0] += 60_000
        assert all(m.get_log("r", p).local_log_start_offset == 2 for p in range(3))
        visits.clear()
        for _ in range(5):
            now[0] += 60_000
            r = await svc.run_once(quiet=True, retention=True, sweep=False)
            assert r.remote_deleted == 0
        assert visits["retention"] == 0  # nothing changed, nothing expired: not looked at
        # Partition 1 gets new data (its log end moves): looked at again, deletes nothing.
        _fill(m.get_log("r", 1), 1, now[0])
        await svc.run_once(quiet=True, retention=True, sweep=False)
        assert visits["retention:r-1"] == 1 and visits["retention"] == 1
        # The oldest segment of partition 0 expires: then, and only then, it is looked at
        # and deleted.
        now[0] = T0 + retention
        assert (await svc.run_once(quiet=True, retention=True, sweep=False)).remote_deleted == 0
        assert visits["retention:r-0"] == 0
        now[0] = T0 + retention + 1
        r = await svc.run_once(quiet=True, retention=True, sweep=False)
        assert r.remote_deleted == 1 and visits["retention:r-0"] == 1
        assert m.get_log("r", 0).log_start_offset == 2
        assert visits["retention:r-2"] == 0
    finally:
        await svc.close()
        m.close()
