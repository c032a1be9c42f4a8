"""Empty: every Kafka API has its one handler in api.handlers.

Kept only until cluster.node and api.server stop asking for an override table
(``ClusterNode.kafka_handlers`` / ``KafkaServer(handlers=...)``); delete it then.
"""

from __future__ import annotations

from typing import Any


def cluster_handlers() -> dict[int, Any]:
    """No overrides: api.handlers.HANDLERS is the one table."""
    return {}
