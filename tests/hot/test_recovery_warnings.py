"""Recovery at start says what it dropped: one WARNING per truncation (file, position,
bytes) and per discarded file (path, bytes); a clean reopen says nothing."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from hot.log import LOG_START_OFFSET_FILE
from hot.producer_state import snapshot_name
from tests.hot.test_recovery import Fixture, reopen


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return Fixture(tmp_path)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("hot.")
    ]


def test_torn_tail_is_one_warning_with_file_position_and_bytes(
    fx: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    seg_pos, base, _ = fx.batches_in_last_segment()[-1]
    original = Path(fx.last_log).read_bytes()
    cut = seg_pos + 30
    Path(fx.last_log).write_bytes(original[:cut])
    caplog.set_level(logging.WARNING)
    log = reopen(fx)
    assert log.log_end_offset == base
    log.close(clean=False)
    msgs = _warnings(caplog)
    (msg,) = [m for m in msgs if "truncating" in m]
    assert fx.last_log in msg and f"position {seg_pos}" in msg and "dropping 30 bytes" in msg
    # The producer snapshot written at the (former) log end by the clean close goes too.
    (snap,) = [m for m in msgs if m is not msg]
    assert "recovery discards" in snap and ".snapshot" in snap and f"beyond the log end {base}" in snap


def test_discarded_files_are_one_warning_each(fx: Fixture, caplog: pytest.LogCaptureFixture) -> None:
    strays = {
        "00000000000000000000.log.deleted": 7,
        "recovery-point.tmp": 3,
        "00000000000000099999.index": 16,
    }
    for name, size in strays.items():
        (fx.dir / name).write_bytes(b"x" * size)
    beyond = fx.dir / snapshot_name(fx.leo + 10)
    beyond.write_bytes(b"y" * 5)
    caplog.set_level(logging.WARNING)
    log = reopen(fx)
    assert log.log_end_offset == fx.leo and not beyond.exists()
    log.close()
    msgs = _warnings(caplog)
    assert len(msgs) == len(strays) + 1, msgs
    for name, size in [*strays.items(), (beyond.name, 5)]:
        (msg,) = [m for m in msgs if os.path.join(fx.dir, name) in m]
        assert f"({size} bytes)" in msg


def test_segments_below_a_later_log_start_are_each_named(
    fx: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    (fx.dir / LOG_START_OFFSET_FILE).write_text(f"{fx.leo + 100}\n")
    caplog.set_level(logging.WARNING)
    reopen(fx).close()
    msgs = _warnings(caplog)
    for path, _, size in fx.segments:
        (msg,) = [m for m in msgs if path in m]
        assert f"({size} bytes)" in msg


def test_clean_reopen_warns_nothing(fx: Fixture, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    reopen(fx, clean=True).close()
    reopen(fx).close()
    assert _warnings(caplog) == []
