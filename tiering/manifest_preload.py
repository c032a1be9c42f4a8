"""Manifests loaded when this broker comes to lead tiered partitions (issue 39).

After a restart the start-up recovery (``TieringService._recover_all``) runs before this
node leads its partitions again (the controller elects it anew, in a new epoch), so it
loads no manifest, and the first fetch of remote data waited for the manifest GET
(30-65 ms here, more on a real bucket). Now a change of roles (``broker.node`` calls
``changed``, debounced) starts loading the manifests of the tiered partitions led here
that a fetch could need one for: those whose log starts below its local data, so some of
their offsets are only in the bucket. Loads go through the remote reader's manifest
cache (``RemoteReader.manifest``), so a fetch that comes meanwhile joins the GET in
flight instead of sending its own.

Bounded: at most ``concurrency`` GETs at once from a small pool of workers, whatever the
number of partitions (a broker with 10,000 tiered partitions does not send 10,000 GETs
at its start), and only for partitions whose cached manifest is missing or expired; a
partition whose data is all local costs one comparison. Failures are left to the first
fetch (which loads the manifest as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Final

from hot.log import Log
from hot.tasks import cancel_and_wait
from hot.topics import TopicInfo
from tiering.remote_read import RemoteReader

logger = logging.getLogger(__name__)

PRELOAD_CONCURRENCY: Final = 4


def reads_the_bucket(log: Log) -> bool:
    """Whether a fetch of ``log`` can need the remote tier: offsets from its log start up to
    its local start are only there."""
    return log.config.remote_storage_enable and log.local_log_start_offset > log.log_start_offset


class ManifestPreloader:
    """See the module docstring. ``led`` lists the partitions led here (cached by the
    caller while nothing changes)."""

    def __init__(
        self,
        reader: RemoteReader,
        led: Callable[[], Iterable[tuple[TopicInfo, Log]]],
        concurrency: int = PRELOAD_CONCURRENCY,
    ) -> None:
        self._reader = reader
        self._led = led
        self._concurrency = max(1, concurrency)
        self._again = False
        self._task: asyncio.Task[None] | None = None
        self.loads = 0  # manifests this preloader asked for (a test hook)

    def changed(self) -> None:
        """Roles changed: look (again) at the partitions led here. Event-loop only; one
        look runs at a time, and changes during it make one more."""
        self._again = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="strata-tiering-preload")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(Exception):
                await cancel_and_wait(task)

    async def _run(self) -> None:
        while self._again:
            self._again = False
            has = self._reader.has_manifest
            todo = [
                (info.name, info.topic_id, log.partition)
                for info, log in self._led()
                if reads_the_bucket(log) and not has(info.name, info.topic_id, log.partition)
            ]
            if todo:
                logger.info("loading the manifests of %d tiered partition(s) led here", len(todo))
                it = iter(todo)
                await asyncio.gather(*(self._worker(it) for _ in range(min(self._concurrency, len(todo)))))

    async def _worker(self, todo: Iterable[tuple[str, uuid.UUID, int]]) -> None:
        for topic, topic_id, partition in todo:
            self.loads += 1
            try:
                await self._reader.manifest(topic, topic_id, partition)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the first fetch loads it, and reports what fails
                logger.debug("preloading the manifest of %s-%d: %s", topic, partition, e)
