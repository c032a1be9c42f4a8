"""The one produce path of the REST API (v2 ``POST /topics/{t}`` and v3 ``POST .../records``):
the topic looked up (auto-created where allowed), records placed on partitions, one batch
per partition appended with acks=all, per-record outcomes, latency metrics and the user's
producer byte-rate quota.

Placement, in precedence order: the URL's partition, the record's own, murmur2 of the key
(as Java and librdkafka's murmur2_random place it), then a sticky partition for the unkeyed
records of one call, rotating per call. A partition's failure fails only its records.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request

from api.rest.authz import may_create, require_topic
from api.rest.codec import PRODUCE_TIMEOUT_MS, check_partition, place_records
from broker.security.quotas import PRODUCER_BYTE_RATE
from hot.errors import AuthenticationError, AuthorizationError, StrataError, UnknownTopicOrPartitionError
from hot.records import RecordInput, build_batch
from kwire.acl import Operation
from kwire.error_table import kafka_code

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.produce_path import ProduceResult
    from hot.topics import TopicInfo


@dataclass(frozen=True, slots=True)
class Outcome:
    """One record's fate: its partition, then its offset or the error that refused it."""

    partition: int
    offset: int | None
    error: StrataError | None = None
    log_append_time_ms: int = -1  # the broker's time for LogAppendTime topics, else -1


def producer_error_code(exc: StrataError) -> int:
    """Confluent's per-record ``error_code`` of a failed produce (kafka-rest's
    Errors.codeFromProducerException): authentication 40101, authorization 40301, 50003 when
    retrying may help, 50002 otherwise."""
    if isinstance(exc, AuthenticationError):
        return 40101
    if isinstance(exc, AuthorizationError):
        return 40301
    return 50003 if exc.retriable else 50002


class RestProducer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._sticky = itertools.count()

    async def topic_for_write(self, request: Request, topic: str) -> TopicInfo:
        """WRITE on ``topic`` checked first (a refused topic is 403 whether it exists or not),
        then the topic, auto-created when ``auto.create.topics.enable`` and the user may."""
        broker = self.broker
        require_topic(broker, request, Operation.WRITE, topic)
        try:
            return broker.topic(topic)
        except UnknownTopicOrPartitionError:
            if not (broker.config.auto_create_topics and may_create(broker, request, topic)):
                raise
            return await broker.auto_create_topic(topic)

    async def produce(
        self,
        request: Request,
        info: TopicInfo,
        records: list[tuple[RecordInput, int | None]],
        forced_partition: int | None = None,
    ) -> tuple[list[Outcome], int]:
        """Append ``records`` (each with its own partition or None) in request order; returns
        their outcomes and the throttle time (ms) the caller has already waited for."""
        broker = self.broker
        if forced_partition is not None:
            check_partition(info, forced_partition)
        started = time.perf_counter()
        placed, groups = place_records(records, info, forced_partition, next(self._sticky) % info.partitions)
        batches = {p: build_batch(recs) for p, recs in groups.items()}
        parts = sorted(batches)
        results: list[ProduceResult] = await asyncio.gather(
            *(
                broker.writes.produce(info.name, p, batches[p], acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS)
                for p in parts
            )
        )
        by_partition = dict(zip(parts, results, strict=True))
        out = []
        for p, index in placed:
            res = by_partition[p]
            if res.error is None:
                out.append(Outcome(p, res.base_offset + index, None, res.log_append_time_ms))
            else:
                broker.metrics.errors.labels("rest_produce", str(kafka_code(res.error))).inc()
                out.append(Outcome(p, None, res.error))
        broker.metrics.produce_latency.labels("rest").observe(time.perf_counter() - started)
        # Over the user's quota: the response is held back for the throttle time (the
        # client is slowed without having to understand anything; broker.security.quotas).
        size = sum(len(b) for b in batches.values())
        throttle_ms = broker.quotas.record(request.scope.get("strata.principal"), PRODUCER_BYTE_RATE, size)
        await asyncio.sleep(throttle_ms / 1000)
        return out, throttle_ms
