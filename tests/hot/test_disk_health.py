"""hot.disk_health: the disk-full states, one log line per change; a log's ENOSPC handling."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from hot import disk_health
from hot.disk_health import DiskHealth, DiskUsage, is_no_space
from hot.errors import StorageError
from tests.hot.hotlib import batch_at, open_log


def _enospc(what: str = "write to x failed") -> StorageError:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise StorageError(f"{what}: {e}") from e
    except StorageError as s:
        return s


def test_is_no_space_follows_the_cause_chain() -> None:
    assert is_no_space(_enospc())
    assert is_no_space(OSError(errno.EDQUOT, "quota"))
    assert not is_no_space(StorageError("fsync failed"))
    assert not is_no_space(OSError(errno.EIO, "I/O error"))


def _messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "hot.disk_health"]


def test_no_space_is_logged_once_and_cleared_when_space_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    free = [1000]
    monkeypatch.setattr(disk_health, "measure", lambda _p: DiskUsage(10_000, 10_000 - free[0], free[0]))
    h = DiskHealth(tmp_path, clear_bytes=500)
    caplog.set_level(logging.WARNING, "hot.disk_health")
    h.storage_error(StorageError("checksum mismatch"))  # not a space problem
    assert not h.refusing and h.snapshot().reason is None
    for _ in range(3):
        h.storage_error(_enospc())
    state = h.snapshot()
    assert h.refusing and state.no_space and not state.high_water
    assert state.reason is not None and "no space left on device" in state.reason
    free[0] = 1400  # some freed, less than clear_bytes more than at the failure
    h.poll()
    assert h.refusing
    free[0] = 1500
    h.poll()
    h.poll()
    assert not h.refusing and h.snapshot().reason is None
    msgs = _messages(caplog)
    assert [lvl for lvl, _ in msgs] == [logging.ERROR, logging.WARNING]
    assert str(tmp_path) in msgs[0][1] and "1000 bytes free" in msgs[0][1]
    assert "1500 bytes free" in msgs[1][1]


def test_high_water_state_follows_the_check(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    over: list[str | None] = ["over the mark"]
    h = DiskHealth(tmp_path, high_water_check=lambda: over[0])
    caplog.set_level(logging.WARNING, "hot.disk_health")
    h.high_water_refused("over the mark")
    h.high_water_refused("over the mark")
    h.poll()
    state = h.snapshot()
    assert state.high_water and state.reason == "over the mark"
    over[0] = None
    h.poll()
    assert not h.refusing
    h.high_water_passed()
    assert [lvl for lvl, _ in _messages(caplog)] == [logging.ERROR, logging.WARNING]


def test_enospc_on_an_active_index_write_keeps_the_log_online(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    seen: list[StorageError] = []
    log.storage_error_listener = seen.append
    log.append(batch_at(0, 3))
    seg = log.active_segment

    def full() -> None:
        raise _enospc("cannot write index")

    monkeypatch.setattr(seg.offset_index, "write_pending", full)
    log.append(batch_at(3, 3))
    log.flush()  # index entries stay pending; the data is synced
    assert log.is_online and log.recovery_point == 6 and len(seen) == 1
    monkeypatch.undo()
    log.flush()
    assert log.read(3, 1 << 20).size > 0
    log.close()


def test_enospc_on_append_is_undone_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "t-0")
    seen: list[StorageError] = []
    log.storage_error_listener = seen.append
    log.append(batch_at(0, 3))

    def full(*_a: object, **_k: object) -> int:
        raise _enospc()

    # Both writes: the general one and the one-batch stamped write (hot.leader_append).
    monkeypatch.setattr(log.active_segment.file, "append", full)
    monkeypatch.setattr(log.active_segment.file, "append_stamped", full)
    with pytest.raises(StorageError, match="No space left"):
        log.append(batch_at(3, 3))
    assert log.is_online and log.log_end_offset == 3 and len(seen) == 1
    monkeypatch.undo()
    assert log.append(batch_at(3, 3)).first_offset == 3
    log.close()
