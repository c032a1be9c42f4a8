"""The transaction APIs (KIP-98, KIP-447, KIP-890).

WriteTxnMarkers (key 27, v1-2), sent by a transaction coordinator to each partition leader:
every marker appended to the partitions led here and acknowledged by their in-sync replicas,
with Kafka's per-partition errors (broker.txn_markers, which this broker's own coordinator
calls directly). Its guard asks CLUSTER_ACTION on the cluster (api.security.guards).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.txn_markers import write_txn_markers
from kwire import RequestHeader
from kwire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_write_txn_markers(
    conn: Connection, header: RequestHeader, req: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    return await write_txn_markers(conn.broker, req)
