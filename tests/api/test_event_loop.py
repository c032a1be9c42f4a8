"""Which event loop ``strata serve`` runs on (api.server.event_loop_factory)."""

from __future__ import annotations

from pathlib import Path

import pytest
import uvloop

from api.server import event_loop_factory
from broker.config import BrokerConfig
from broker.security.config import TlsConfig
from hot.errors import InvalidConfigError


def test_uvloop_by_default_else_asyncio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = BrokerConfig(data_dir=tmp_path)
    monkeypatch.delenv("STRATA_EVENT_LOOP", raising=False)
    assert event_loop_factory(config) is uvloop.new_event_loop
    monkeypatch.setenv("STRATA_EVENT_LOOP", "asyncio")
    assert event_loop_factory(config) is None
    monkeypatch.setenv("STRATA_EVENT_LOOP", "uvloop")
    tls = BrokerConfig(data_dir=tmp_path, tls=TlsConfig(cert=tmp_path / "c.pem", key=tmp_path / "k.pem"))
    assert event_loop_factory(tls) is None  # start_tls on uvloop never completes the handshake


def test_an_unknown_loop_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATA_EVENT_LOOP", "trio")
    with pytest.raises(InvalidConfigError, match="STRATA_EVENT_LOOP must be uvloop or asyncio, got 'trio'"):
        event_loop_factory(BrokerConfig(data_dir=tmp_path))
