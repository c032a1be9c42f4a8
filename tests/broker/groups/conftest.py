"""The ``h`` fixture of the group coordinator's unit tests: a started Harness."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.broker.groups.grouplib import Harness


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await Harness(tmp_path).start()
    yield harness
    await harness.close()
