"""core.disk: the one atomic write / directory fsync / unlink used by every layer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from core import disk


def test_atomic_write_round_trip_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "state"
    disk.atomic_write(path, b"one")
    assert path.read_bytes() == b"one"
    disk.atomic_write(str(path), b"two, longer")
    disk.atomic_write(path, b"3")  # shorter than before: the temp file is truncated
    assert path.read_bytes() == b"3"
    assert sorted(os.listdir(tmp_path)) == ["state"]
    assert disk.temp_path(path) == str(path) + disk.TEMP_SUFFIX == str(path) + ".tmp"


def test_atomic_write_large_data(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 7)
    disk.atomic_write(tmp_path / "big", data, sync_dir=False)
    assert (tmp_path / "big").read_bytes() == data


def test_atomic_write_mode_is_exact_even_over_a_stale_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    stale = Path(disk.temp_path(path))
    stale.write_bytes(b"left by a crash, with other bits")
    stale.chmod(0o666)
    disk.atomic_write(path, b"private", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == b"private"
    assert not stale.exists()


def test_atomic_write_default_mode_follows_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        disk.atomic_write(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o644


def test_failed_write_removes_its_temp_file_and_keeps_the_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state"
    disk.atomic_write(path, b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        disk.atomic_write(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["state"]


def test_failed_rename_removes_its_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a-directory"
    (target / "inside").mkdir(parents=True)  # a non-empty directory cannot be replaced by a file
    with pytest.raises(IsADirectoryError):
        disk.atomic_write(target, b"data")
    assert sorted(os.listdir(tmp_path)) == ["a-directory"]


def test_missing_directory_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        disk.atomic_write(tmp_path / "no" / "such" / "file", b"x")


def test_fsync_dir(tmp_path: Path) -> None:
    disk.fsync_dir(tmp_path)
    disk.fsync_dir(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        disk.fsync_dir(tmp_path / "missing")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        disk.fsync_dir(tmp_path / "file")


def test_unlink_missing_ok(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x")
    disk.unlink_missing_ok(f)
    assert not f.exists()
    disk.unlink_missing_ok(f)  # already gone: fine
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        disk.unlink_missing_ok(tmp_path / "d")


def test_deferred_sync_skips_fsyncs_and_syncs_the_filesystem_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    fsyncs: list[int] = []
    syncs: list[str] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real(fd))[1])
    real_syncfs = disk.sync_filesystem
    monkeypatch.setattr(disk, "sync_filesystem", lambda p: (syncs.append(str(p)), real_syncfs(p))[1])
    with disk.deferred_sync(tmp_path):
        with disk.deferred_sync(tmp_path):  # nested: one sync, at the outer end
            disk.atomic_write(tmp_path / "a", b"1")
        disk.fsync_dir(tmp_path)
        # another thread is not deferred
        t = threading.Thread(target=disk.atomic_write, args=(tmp_path / "b", b"2"))
        t.start()
        t.join()
        assert len(fsyncs) == 2  # b's temp file and its directory, from the other thread
        assert syncs == []
    assert syncs == [str(tmp_path)]
    assert (tmp_path / "a").read_bytes() == b"1"
    with pytest.raises(RuntimeError), disk.deferred_sync(tmp_path):
        raise RuntimeError("no sync when the block fails")
    assert syncs == [str(tmp_path)]


def test_sync_filesystem(tmp_path: Path) -> None:
    disk.sync_filesystem(tmp_path)
    with pytest.raises(OSError):
        disk.sync_filesystem(tmp_path / "missing")
