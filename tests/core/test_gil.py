"""core.gil.handoff: the switch interval lowered while any use is inside, restored when
the last one leaves, whatever the order of entering and leaving across threads."""

from __future__ import annotations

import sys
import threading

from core import gil


def test_nested_and_concurrent_uses_restore_the_interval_once() -> None:
    before = sys.getswitchinterval()
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with gil.handoff():
            inside.set()
            release.wait(10)

    with gil.handoff():
        assert abs(sys.getswitchinterval() - gil.HANDOFF_INTERVAL_S) < 1e-9
        t = threading.Thread(target=other)
        t.start()
        assert inside.wait(10)
        with gil.handoff():
            assert abs(sys.getswitchinterval() - gil.HANDOFF_INTERVAL_S) < 1e-9
    # this thread left first; the other is still inside
    assert abs(sys.getswitchinterval() - gil.HANDOFF_INTERVAL_S) < 1e-9
    release.set()
    t.join(10)
    assert abs(sys.getswitchinterval() - before) < 1e-9


def test_restored_after_an_error() -> None:
    before = sys.getswitchinterval()
    try:
        with gil.handoff():
            raise RuntimeError("creation failed")
    except RuntimeError:
        pass
    assert abs(sys.getswitchinterval() - before) < 1e-9
