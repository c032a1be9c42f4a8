"""Kafka-side client quotas: throttling of Produce/Fetch, DescribeClientQuotas, AlterClientQuotas.

Throttling follows KIP-219: the response goes out at once carrying ``throttle_time_ms``,
and the broker then stops reading the connection for that long (``Connection.throttle``),
so a client that ignores the field is held back all the same. A Produce is always
appended and then counted; a Fetch by a user already over its quota is answered with no
data (an empty response, as Kafka's throttled fetch response), otherwise it is served and
its record bytes counted. Replica fetches (replica_id >= 0) are not subject to quotas.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from broker.security.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, Quotas
from hot.errors import InvalidRequestError, StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterEntryResponse,
)
from kwire.messages.describe_client_quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from kwire.messages.fetch import FetchRequest, FetchResponse
from kwire.messages.produce import ProduceRequest, ProduceResponse
from kwire.schema import records_length

if TYPE_CHECKING:
    from api.handlers.context import Connection

USER: Final = "user"
Handler = Callable[["Connection", RequestHeader, Any], Awaitable[Any]]


def records_size(records: Any) -> int:
    """Bytes of a response's records: none, one part or a sequence of parts, measured as
    the encoder measures them (``records_length``)."""
    if records is None:
        return 0
    if isinstance(records, bytes | bytearray | memoryview) or not isinstance(records, Sequence):
        return records_length(records)
    return sum(records_length(p) for p in records)


class ProduceQuota:
    """Produce under quota. Counted on arrival (``admit``, called by the connection before it
    reads the next frame): a pipelining producer is muted before its next request, not
    after dozens more were read while the first was being appended."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def admit(self, conn: Connection, req: ProduceRequest) -> None:
        nbytes = sum(len(p.records or b"") for t in req.topic_data for p in t.partition_data)
        ms = conn.broker.quotas.record(conn.principal, PRODUCER_BYTE_RATE, nbytes)
        if ms > 0:
            conn.throttle(ms)  # acks=0 too: no response to carry it, the mute still holds

    def __call__(
        self, conn: Connection, header: RequestHeader, req: ProduceRequest
    ) -> Awaitable[ProduceResponse | None]:
        if not conn.ever_throttled:  # admitted without a mute (quotas unused): the handler itself
            return self.handler(conn, header, req)
        return self._throttled(conn, header, req)

    async def _throttled(
        self, conn: Connection, header: RequestHeader, req: ProduceRequest
    ) -> ProduceResponse | None:
        response: ProduceResponse | None = await self.handler(conn, header, req)
        ms = conn.throttled_ms()
        if response is None or ms <= 0:
            return response
        return dataclasses.replace(response, throttle_time_ms=max(ms, response.throttle_time_ms))


def with_produce_quota(handler: Handler) -> Handler:
    return ProduceQuota(handler)


def with_fetch_quota(handler: Handler) -> Handler:
    async def handle(conn: Connection, header: RequestHeader, req: FetchRequest) -> FetchResponse:
        if req.replica_id >= 0:
            response: FetchResponse = await handler(conn, header, req)
            return response
        quotas = conn.broker.quotas
        owed = quotas.pending(conn.principal, CONSUMER_BYTE_RATE)
        if owed > 0:  # answered without data, without waiting; the client backs off
            conn.throttle(owed)
            return FetchResponse(throttle_time_ms=owed, session_id=req.session_id)
        response = await handler(conn, header, req)
        nbytes = sum(records_size(p.records) for t in response.responses for p in t.partitions)
        ms = quotas.record(conn.principal, CONSUMER_BYTE_RATE, nbytes)
        if ms <= 0:
            return response
        conn.throttle(ms)
        return dataclasses.replace(response, throttle_time_ms=max(ms, response.throttle_time_ms))

    return handle


def _entity(user: str | None) -> tuple[EntityData, ...]:
    return (EntityData(entity_type=USER, entity_name=user),)


async def handle_describe_client_quotas(
    conn: Connection, header: RequestHeader, req: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    try:
        entities = conn.broker.quotas.runtime().entities()
        for c in req.components:
            if c.entity_type != USER:
                # Only user quotas exist here: a filter on another type matches nothing.
                if c.entity_type not in ("client-id", "ip"):
                    raise InvalidRequestError(f"unknown quota entity type {c.entity_type!r}")
                entities = []
            elif c.match_type == MATCH_EXACT:
                entities = [(u, q) for u, q in entities if u == c.match]
            elif c.match_type == MATCH_DEFAULT:
                entities = [(u, q) for u, q in entities if u is None]
            elif c.match_type == MATCH_ANY:
                entities = [(u, q) for u, q in entities if u is not None]
            else:
                raise InvalidRequestError(f"unknown match type {c.match_type}")
    except StrataError as exc:
        return DescribeClientQuotasResponse(error_code=kafka_code(exc), error_message=str(exc))
    return DescribeClientQuotasResponse(entries=tuple(_entry(u, q) for u, q in entities))


def _entry(user: str | None, quotas: Quotas) -> EntryData:
    return EntryData(
        entity=_entity(user), values=tuple(ValueData(key=k, value=v) for k, v in sorted(quotas.items()))
    )


def _user_of(entity: Sequence[EntityData]) -> str | None:
    if len(entity) != 1 or entity[0].entity_type != USER:
        types = ", ".join(e.entity_type for e in entity) or "none"
        raise InvalidRequestError(f"only user quotas are supported (entity types: {types})")
    return entity[0].entity_name


async def handle_alter_client_quotas(
    conn: Connection, header: RequestHeader, req: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    quotas = conn.broker.quotas
    results = []
    for entry in req.entries:
        try:
            user = _user_of(entry.entity)
            changes = [(user, op.key, None if op.remove else op.value) for op in entry.ops]
            if req.validate_only:
                quotas.runtime().altered(changes)
            else:
                await quotas.alter(changes)
            results.append(AlterEntryResponse(entity=entry.entity))
        except StrataError as exc:
            results.append(
                AlterEntryResponse(error_code=kafka_code(exc), error_message=str(exc), entity=entry.entity)
            )
    return AlterClientQuotasResponse(entries=tuple(results))
