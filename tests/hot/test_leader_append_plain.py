"""A leader's one-batch append in one C call (``hot.leader_append._append_plain``, and an
idempotent producer's one batch in ``append_as_leader``: the batch stamped and written by
``hot/_recordwalk.c`` ``write_stamped``) against the general path (``STAMPED_WRITE`` off).

Two logs get the same appends (plain one-batch appends, several batches at once,
idempotent producers, compressed batches, LogAppendTime topics, leader epochs that move,
segments small enough to roll and index intervals small enough to index often); after
every append both must have answered the same ``AppendInfo`` (or the same error) and hold
the same files, byte for byte. A failed write is cut back and the log stays usable.
Skipped without the extension, except in CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot import leader_append, segment
from hot.batch import Compression
from hot.config import LogConfig
from hot.errors import StorageError, StrataError
from hot.log import AppendInfo, Log
from hot.records import RecordInput, build_batch
from tests.hot.hotlib import decode

pytestmark = pytest.mark.skipif(
    not segment.STAMPED_WRITE and os.environ.get("CI") != "true", reason="hot._recordwalk is not built"
)

NOW = 1_700_000_000_000


def _batch(draw: Any, *, producer: int) -> bytes:
    n = draw(st.integers(1, 4))
    records = [
        RecordInput(
            draw(st.binary(min_size=1, max_size=8)),
            draw(st.binary(max_size=60)),
            timestamp=draw(st.one_of(st.none(), st.integers(NOW - 5000, NOW + 5000))),
        )
        for _ in range(n)
    ]
    compression = draw(st.sampled_from([Compression.NONE, Compression.NONE, Compression.LZ4]))
    if producer < 0:
        return build_batch(records, compression=compression, base_timestamp=NOW)
    return build_batch(
        records, compression=compression, base_timestamp=NOW, producer_id=producer, producer_epoch=0,
        base_sequence=draw(st.integers(0, 3)),
    )  # fmt: skip


@st.composite
def _appends(draw: Any) -> list[tuple[bytes, int]]:
    out: list[tuple[bytes, int]] = []
    epoch = 0
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["plain", "plain", "plain", "two", "idempotent", "damaged"]))
        if draw(st.integers(0, 9)) == 0:
            epoch += 1
        if kind == "two":
            data = _batch(draw, producer=-1) + _batch(draw, producer=-1)
        elif kind == "idempotent":
            data = _batch(draw, producer=7)
        else:
            data = _batch(draw, producer=-1)
            if kind == "damaged":
                i = draw(st.integers(0, len(data) - 1))
                data = data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1 :]
        out.append((data, epoch))
    return out


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def _append(log: Log, data: bytes, epoch: int, stamped: bool) -> Any:
    setattr(leader_append, "STAMPED_WRITE", stamped)  # noqa: B010 (a module constant)
    try:
        return log.append(memoryview(data), leader_epoch=epoch, now_ms=NOW)
    except StrataError as exc:
        return type(exc).__name__, str(exc)
    finally:
        setattr(leader_append, "STAMPED_WRITE", segment.STAMPED_WRITE)  # noqa: B010


@pytest.fixture
def counted_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    calls = [0]
    real = getattr(segment, "_write_stamped")  # noqa: B009 (private)
    assert real is not None

    def counting(*args: Any) -> None:
        calls[0] += 1
        real(*args)

    monkeypatch.setattr(segment, "_write_stamped", counting)
    yield calls


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    appends=_appends(),
    segment_bytes=st.sampled_from([1024, 3000, 1 << 30]),
    log_append_time=st.booleans(),
    compact=st.booleans(),
)
def test_same_answers_and_files_as_the_general_path(
    tmp_path_factory: pytest.TempPathFactory,
    counted_writes: list[int],
    appends: list[tuple[bytes, int]],
    segment_bytes: int,
    log_append_time: bool,
    compact: bool,
) -> None:
    cfg = LogConfig.from_kafka(
        {
            "segment.bytes": str(segment_bytes),
            "index.interval.bytes": "100",
            "message.timestamp.type": "LogAppendTime" if log_append_time else "CreateTime",
            "cleanup.policy": "compact" if compact else "delete",
        }
    )
    root = tmp_path_factory.mktemp("plain")
    fast = Log.open(root / "fast" / "t-0", cfg, topic="t", partition=0)
    general = Log.open(root / "general" / "t-0", cfg, topic="t", partition=0)
    before = counted_writes[0]
    expected = 0  # appends that must have taken the C write
    try:
        for data, epoch in appends:
            answer = _append(fast, data, epoch, True)
            assert answer == _append(general, data, epoch, False)
            assert _files(root / "fast" / "t-0") == _files(root / "general" / "t-0")
            if isinstance(answer, AppendInfo) and not answer.duplicate and _one_kept_header(data, cfg):
                expected += 1
        assert fast.log_end_offset == general.log_end_offset
        end = fast.log_end_offset
        assert fast.read(0, 1 << 20, max_offset=end).read() == general.read(0, 1 << 20, max_offset=end).read()
    finally:
        fast.close()
        general.close()
    assert counted_writes[0] - before == (0 if log_append_time else expected)


def _one_kept_header(data: bytes, cfg: LogConfig) -> bool:
    """One batch whose header is stored as sent (any producer id, any codec)."""
    from hot.log_append import byte_view, validate_batches

    batches, _ = validate_batches(byte_view(data), cfg, leader=True)
    return len(batches) == 1 and batches[0].attributes < 0 and not cfg.log_append_time


def test_a_failed_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), topic="t", partition=0)
    try:
        first = log.append(build_batch([RecordInput(None, b"a")]), leader_epoch=0)
        size = log.size
        real = getattr(segment, "_write_stamped")  # noqa: B009 (private)
        assert real is not None

        def half_then_fail(fd: int, data: Any, pos: int, n: int, at: int, *rest: Any) -> None:
            os.pwrite(fd, bytes(data)[pos : pos + n // 2], at)
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(segment, "_write_stamped", half_then_fail)
        with pytest.raises(StorageError, match="No space left"):
            log.append(build_batch([RecordInput(None, b"b")]), leader_epoch=0)
        assert log.is_online and log.size == size and log.log_end_offset == first.last_offset + 1
        assert os.path.getsize(log.active_segment.log_path) == size
        monkeypatch.setattr(segment, "_write_stamped", real)
        again = log.append(build_batch([RecordInput(None, b"c")]), leader_epoch=0)
        assert again.first_offset == first.last_offset + 1
        read = log.read(0, 1 << 20, max_offset=log.log_end_offset).read()
        assert [(off, value) for off, _, _, value in decode(read)] == [(0, b"a"), (1, b"c")]
    finally:
        log.close()
