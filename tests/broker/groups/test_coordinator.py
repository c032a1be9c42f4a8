"""The GroupCoordinator façade: DeleteGroups, routing (NOT_COORDINATOR), loading and a
store that cannot be opened, shutdown, and the real timer task."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.groups.config import GroupConfig
from broker.groups.coordinator import GroupCoordinator
from broker.groups.offsets import OffsetsLog
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptLogError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
    NotCoordinatorError,
)
from tests.broker.groups.grouplib import (
    TP0,
    Harness,
    commit,
    jreq,
    settle,
)

pytestmark = pytest.mark.timeout(60)


# --- deleting groups ---------------------------------------------------------------------------------


async def test_delete_groups(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    await h.stable_group(1, "busy")
    await h.coord.commit_offsets(commit("idle", (TP0, 5)))
    out = await h.coord.delete_groups(["busy", "idle", "nope"])
    assert isinstance(out["busy"], NonEmptyGroupError)
    assert out["idle"] is None
    assert isinstance(out["nope"], GroupIdNotFoundError)
    assert h.coord.committed_offsets("idle") == {}
    assert [g.group_id for g in h.coord.list_groups()] == ["busy"]
    await h.close()
    h2 = await Harness(tmp_path, clock=h.clock).start()  # the tombstones are durable
    try:
        assert h2.coord.committed_offsets("idle") == {}
        assert [g.group_id for g in h2.coord.list_groups()] == ["busy"]
    finally:
        await h2.close()


# --- availability -------------------------------------------------------------------------------------


async def test_not_coordinator_and_loading_and_failed_store(tmp_path: Path) -> None:
    class Elsewhere:
        def coordinator_for(self, group_id: str) -> int:
            return 7 if group_id == "far" else 0

    c = GroupCoordinator(GroupConfig(), lambda: OffsetsLog.open(tmp_path / "a"), locator=Elsewhere())
    with pytest.raises(CoordinatorLoadInProgressError):
        c.heartbeat("g", "m", 1)
    await c.start(run_timers=False)
    try:
        with pytest.raises(NotCoordinatorError):
            await c.commit_offsets(commit("far", (TP0, 1)))
        assert c.find_coordinator("far") == 7 and c.find_coordinator("near") == 0
    finally:
        await c.close()
    with pytest.raises(CoordinatorNotAvailableError):
        c.list_groups()

    def broken() -> OffsetsLog:
        raise CorruptLogError("somewhere", 3, "bad record")

    c2 = GroupCoordinator(GroupConfig(), broken)
    await c2.start(run_timers=False)
    with pytest.raises(CoordinatorNotAvailableError, match="bad record"):
        c2.committed_offsets("g")
    with pytest.raises(CoordinatorNotAvailableError):
        c2.find_coordinator("g")
    await c2.close()


async def test_close_fails_parked_requests(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    t = h.join(require_known=False)
    await settle()
    await h.close()
    with pytest.raises(CoordinatorNotAvailableError):
        await t


async def test_real_timer_task_completes_a_join(tmp_path: Path) -> None:
    # The production timer loop (real monotonic clock), with a tiny initial delay.
    c = GroupCoordinator(
        GroupConfig(initial_rebalance_delay_ms=20, min_session_timeout_ms=1000),
        lambda: OffsetsLog.open(tmp_path),
    )
    await c.start()
    try:
        r = await asyncio.wait_for(c.join_group(jreq(require_known=False)), 10)
        assert r.is_leader and r.generation_id == 1
    finally:
        await c.close()
