"""The group coordinator's view of the topics (its TopicsImage: partition counts and names)
over the broker's metadata view; shared by the classic and the KIP-848 handlers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ViewTopics:
    """The coordinator's TopicsImage over the broker's metadata view."""

    def __init__(self, view: Any) -> None:
        self._view = view

    def partition_count(self, topic: str) -> int | None:
        va = self._view.topics.get(topic)
        return None if va is None else int(va.value.partition_count)

    def topic_names(self) -> Iterable[str]:
        return list(self._view.topics)
