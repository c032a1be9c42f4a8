"""The Fetch codecs built at start (api.kafka_server, issue 39): every warmed version
round-trips, so the warm-up never fails silently and the first remote-tier Fetch after a
restart finds its codecs built."""

from __future__ import annotations

import asyncio
import time

import pytest

from api import kafka_server
from kwire import APIS, ApiKey

WARMED = range(kafka_server.WARM_FETCH_FROM, APIS[ApiKey.FETCH].max_version + 1)


@pytest.mark.parametrize("version", WARMED)
def test_each_warmed_version_round_trips(version: int) -> None:
    kafka_server._warm_fetch_codec(version)  # raises if a version's request or response does not encode


def test_warm_up_covers_current_clients() -> None:
    assert 12 in WARMED and APIS[ApiKey.FETCH].max_version in WARMED  # librdkafka, Kafka 4.x's Java client


def test_warm_up_yields_between_versions() -> None:
    async def run() -> int:
        turns = 0
        stop = False

        async def count() -> None:
            nonlocal turns
            while not stop:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count())
        started = time.monotonic()
        await kafka_server._warm_fetch_codecs()
        stop = True
        await counter
        assert time.monotonic() - started < 30
        return turns

    # the event loop ran other work between versions: at least once per version
    assert asyncio.run(run()) >= len(WARMED)
