"""AlterPartitionReassignments / ListPartitionReassignments of a single-node broker.

One broker is the whole cluster: every partition has exactly one replica, here, and no
reassignment can ever be in progress. As a one-broker Kafka does, a request naming only
this broker is accepted (nothing to move), cancelling gets NO_REASSIGNMENT_IN_PROGRESS,
any other broker id INVALID_REPLICA_ASSIGNMENT, and the list is always empty. Cluster
mode has its own handlers (``cluster.kafka_handlers``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.protocol import RequestHeader
from api.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from api.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from hot.errors import (
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    StrataError,
    UnknownTopicOrPartitionError,
    kafka_code,
)

if TYPE_CHECKING:
    from api.kafka_server import Connection


def _check_one(conn: Connection, topic: str, partition: int, replicas: tuple[int, ...] | None) -> None:
    info = conn.broker.topic(topic)  # UnknownTopicOrPartitionError
    if not 0 <= partition < info.partitions:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
    if replicas is None:
        raise NoReassignmentInProgressError(f"no reassignment of {topic}-{partition} is in progress")
    node = conn.broker.node_id
    if not replicas:
        raise InvalidReplicaAssignmentError("the target replica list is empty")
    if list(replicas) != [node]:
        raise InvalidReplicaAssignmentError(
            f"replicas {list(replicas)}: this single-node broker is the only broker ({node})"
        )


async def handle_alter_partition_reassignments(
    conn: Connection, header: RequestHeader, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                _check_one(conn, t.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
                parts.append(ReassignablePartitionResponse(partition_index=p.partition_index))
            except StrataError as exc:
                parts.append(
                    ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=kafka_code(exc), error_message=str(exc)
                    )
                )
        out.append(ReassignableTopicResponse(name=t.name, partitions=tuple(parts)))
    return AlterPartitionReassignmentsResponse(responses=tuple(out))


async def handle_list_partition_reassignments(
    conn: Connection, header: RequestHeader, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse()
