"""What the handlers share: the connection's broker as the one broker it now always is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cluster.broker import ClusterBroker

if TYPE_CHECKING:
    from api.kafka_server import Connection


def cluster_broker(conn: Connection) -> ClusterBroker:
    """The broker behind ``conn``: a ClusterBroker, also for a single node (a cluster of one)."""
    broker = conn.broker
    assert isinstance(broker, ClusterBroker)
    return broker
