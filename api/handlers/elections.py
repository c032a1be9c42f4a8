"""ElectLeaders v0-2 (KIP-460): preferred or unclean leader elections asked by an operator
(broker.elections), each partition answered with its error or none. ALTER on the cluster is
checked by the guard (api.security.guards)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.elections import elect
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_elect_leaders(
    conn: Connection, header: RequestHeader, req: ElectLeadersRequest
) -> ElectLeadersResponse:
    wanted = (
        None
        if req.topic_partitions is None
        else [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    )
    results = await elect(conn.broker.replicas, req.election_type, wanted)
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, p), err in results.items():
        by_topic.setdefault(topic, []).append(
            PartitionResult(partition_id=p)
            if err is None
            else PartitionResult(partition_id=p, error_code=kafka_code(err), error_message=str(err))
        )
    return ElectLeadersResponse(
        replica_election_results=tuple(
            ReplicaElectionResult(topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()
        )
    )
