"""Produce: decode, hand every partition to the broker's produce path in one call
(``broker.produce_path.ProducePath.append_records``: checks, transaction verification,
appends in request order, durability waits), and answer. Authorization is the guard's
(api.security.guards); per-record errors are answered from v8 (KIP-467); acks=0 gets no
response.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hot.errors import StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.produce import (
    BatchIndexAndErrorMessage,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection
    from broker.broker import Broker
    from broker.produce_path import ProduceResult


async def handle_produce(
    conn: Connection, header: RequestHeader, req: ProduceRequest
) -> ProduceResponse | None:
    broker = conn.broker
    started = time.perf_counter()
    partitions = [(td.name, pd.index, pd.records) for td in req.topic_data for pd in td.partition_data]
    results = await broker.writes.append_records(
        partitions,
        acks=req.acks,
        timeout_ms=req.timeout_ms,
        transactional_id=req.transactional_id,
        api_version=header.api_version,
        order=conn.produce_order,
    )
    if results is None:  # acks=0
        return None
    response = produce_response(broker, partitions, results)
    broker.metrics.labelled(broker.metrics.produce_latency, "kafka").observe(time.perf_counter() - started)
    return response


def produce_response(
    broker: Broker,
    partitions: Sequence[tuple[str, int, object]],
    results: Sequence[ProduceResult],
) -> ProduceResponse:
    """The answer to the partitions' results (in request order; a topic's partitions under
    its first appearance), each error counted in ``strata_request_errors_total``. The fast
    path (api.handlers.produce_fast) answers through here whenever a partition failed."""
    by_topic: dict[str, list[ProducePartitionResponse]] = {}
    for (topic, index, _), r in zip(partitions, results, strict=True):
        err = r.error
        if err is None:
            by_topic.setdefault(topic, []).append(
                ProducePartitionResponse(
                    index=index,
                    base_offset=r.base_offset,
                    log_append_time_ms=r.log_append_time_ms,
                    log_start_offset=r.log_start_offset,
                )
            )
            continue
        code = kafka_code(err)
        broker.metrics.errors.labels("produce", str(code)).inc()
        by_topic.setdefault(topic, []).append(
            ProducePartitionResponse(
                index=index,
                error_code=code,
                error_message=str(err) or None,
                record_errors=_record_errors(err),
            )
        )
    return ProduceResponse(
        responses=tuple(
            ProduceTopicResponse(name=t, partition_responses=tuple(ps)) for t, ps in by_topic.items()
        )
    )


def _record_errors(err: StrataError) -> tuple[BatchIndexAndErrorMessage, ...]:
    """Produce v8+ names the records that made a batch fail (KIP-467)."""
    return tuple(
        BatchIndexAndErrorMessage(batch_index=e.batch_index, batch_index_error_message=e.message)
        for e in getattr(err, "record_errors", ())
    )
