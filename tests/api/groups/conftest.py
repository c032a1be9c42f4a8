"""A broker per test module, with short group timings (tests/api/groups/helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.groups.helpers import BROKER_ENV
from tests.brokers import BrokerProcess


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("gbroker"), env=BROKER_ENV).start()
    yield b
    b.kill()
