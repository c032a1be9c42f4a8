"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455).

Any broker answers both: alter writes each partition's target replicas to the metadata
store (``broker.reassign``; a null target cancels), list reads the ongoing ones from the
view. The controller carries reassignments out (adding, catching up, then removing replicas).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.reassign import alter_reassignment, ongoing_reassignments
from hot.errors import InvalidRequestError, StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kwire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_alter_partition_reassignments(
    conn: Connection, header: RequestHeader, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    """Record each partition's target (or cancellation) in etcd; the controller moves the
    replicas. Answered once written, as Kafka answers once the controller accepted it."""
    broker = conn.broker
    out = []
    for t in req.topics:
        parts = []
        seen: set[int] = set()
        for p in t.partitions:
            try:
                if p.partition_index in seen:
                    raise InvalidRequestError(f"partition {p.partition_index} named twice in one request")
                seen.add(p.partition_index)
                await alter_reassignment(
                    broker.replicas.client,
                    t.name,
                    p.partition_index,
                    None if p.replicas is None else tuple(p.replicas),
                    defaults=broker.manager.defaults,
                )
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
    view = conn.broker.replicas.view
    wanted = None if req.topics is None else {t.name: tuple(t.partition_indexes) for t in req.topics}
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for r in ongoing_reassignments(view, wanted):
        by_topic.setdefault(r.topic, []).append(
            OngoingPartitionReassignment(
                partition_index=r.partition,
                replicas=r.replicas,
                adding_replicas=r.adding,
                removing_replicas=r.removing,
            )
        )
    return ListPartitionReassignmentsResponse(
        topics=tuple(OngoingTopicReassignment(name=n, partitions=tuple(ps)) for n, ps in by_topic.items())
    )
