"""Operators' view of transactions through the Kafka APIs, as Kafka's Admin client gets it
(``strata transactions``): ListTransactions from every broker (each coordinator lists the
ids it owns), DescribeTransactions from each id's coordinator (FindCoordinator TRANSACTION),
DescribeProducers from each partition's leader.

``connect`` opens a client to another broker with the caller's security settings; the
bootstrap client answers Metadata and FindCoordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kclient.kafka_client import KafkaClient, topic_error
from kwire import ApiKey
from kwire.address import HostPort
from kwire.error_table import (
    INVALID_REQUEST,
    LEADER_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION,
    error_for_code,
)
from kwire.messages.describe_producers import DescribeProducersRequest, DescribeProducersTopicRequest
from kwire.messages.describe_transactions import DescribeTransactionsRequest
from kwire.messages.find_coordinator import KEY_TYPE_TRANSACTION, FindCoordinatorRequest
from kwire.messages.list_transactions import ListTransactionsRequest
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic

Connect = Callable[[HostPort], KafkaClient]


def _brokers(client: KafkaClient) -> dict[int, HostPort]:
    md = client.call(ApiKey.METADATA, MetadataRequest(topics=(), allow_auto_topic_creation=False))
    return {b.node_id: HostPort(b.host, b.port) for b in md.brokers}


def list_transactions(
    client: KafkaClient,
    connect: Connect,
    *,
    states: Sequence[str] = (),
    producer_ids: Sequence[int] = (),
    min_duration_ms: int = -1,
) -> list[dict[str, Any]]:
    """Every transactional id the cluster's coordinators hold (filtered as ListTransactions
    filters: states, producer ids, open for at least ``min_duration_ms``), by id."""
    req = ListTransactionsRequest(
        state_filters=tuple(states), producer_id_filters=tuple(producer_ids), duration_filter=min_duration_ms
    )
    out: list[dict[str, Any]] = []
    for node, addr in sorted(_brokers(client).items()):
        with connect(addr) as other:
            resp = other.call(ApiKey.LIST_TRANSACTIONS, req)
        if resp.error_code:
            raise error_for_code(
                resp.error_code, f"ListTransactions on broker {node}: error {resp.error_code}"
            )
        if resp.unknown_state_filters:
            raise error_for_code(
                INVALID_REQUEST, f"unknown transaction states {list(resp.unknown_state_filters)}"
            )
        out += [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "state": t.transaction_state,
                "coordinator": node,
            }
            for t in resp.transaction_states
        ]
    return sorted(out, key=lambda t: str(t["transactional_id"]))


def describe_transactions(client: KafkaClient, connect: Connect, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Each id's state, producer, timeout, start time and partitions, from its coordinator."""
    out = []
    for tid in ids:
        fc = client.call(
            ApiKey.FIND_COORDINATOR,
            FindCoordinatorRequest(key_type=KEY_TYPE_TRANSACTION, coordinator_keys=(tid,))
            if client.versions.get(ApiKey.FIND_COORDINATOR, 0) >= 4
            else FindCoordinatorRequest(key_type=KEY_TYPE_TRANSACTION, key=tid),
        )
        if fc.coordinators:
            c = fc.coordinators[0]
            code, addr = c.error_code, HostPort(c.host, c.port)
        else:
            code, addr = fc.error_code, HostPort(fc.host, fc.port)
        if code:
            raise error_for_code(code, f"transactional id {tid!r}: no coordinator (error {code})")
        with connect(addr) as coordinator:
            resp = coordinator.call(
                ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=(tid,))
            )
        (s,) = resp.transaction_states
        if s.error_code:
            raise error_for_code(s.error_code, f"transactional id {tid!r}: error {s.error_code}")
        out.append(
            {
                "transactional_id": s.transactional_id,
                "state": s.transaction_state,
                "producer_id": s.producer_id,
                "producer_epoch": s.producer_epoch,
                "timeout_ms": s.transaction_timeout_ms,
                "start_time_ms": s.transaction_start_time_ms,
                "partitions": sorted([t.topic, p] for t in s.topics for p in t.partitions),
            }
        )
    return out


def describe_producers(
    client: KafkaClient, connect: Connect, topic: str, partitions: Sequence[int] | None = None
) -> list[dict[str, Any]]:
    """The producers with state in each partition (its leader's answer): epoch, last
    sequence and timestamp, and the first offset of an open transaction (-1: none)."""
    md = client.call(
        ApiKey.METADATA,
        MetadataRequest(topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False),
    )
    t = md.topics[0]
    if t.error_code:
        raise error_for_code(t.error_code, topic_error(topic, t.error_code))
    brokers = {b.node_id: HostPort(b.host, b.port) for b in md.brokers}
    wanted = set(partitions) if partitions is not None else {p.partition_index for p in t.partitions}
    by_leader: dict[int, list[int]] = {}
    for p in t.partitions:
        if p.partition_index in wanted:
            by_leader.setdefault(p.leader_id, []).append(p.partition_index)
    missing = wanted - {p for ps in by_leader.values() for p in ps}
    if missing:
        raise error_for_code(UNKNOWN_TOPIC_OR_PARTITION, f"{topic!r} has no partitions {sorted(missing)}")
    out = []
    for leader, parts in sorted(by_leader.items()):
        if leader not in brokers:
            raise error_for_code(LEADER_NOT_AVAILABLE, f"{topic!r} partitions {parts} have no leader")
        req = DescribeProducersRequest(
            topics=(DescribeProducersTopicRequest(name=topic, partition_indexes=tuple(sorted(parts))),)
        )
        with connect(brokers[leader]) as other:
            resp = other.call(ApiKey.DESCRIBE_PRODUCERS, req)
        for rt in resp.topics:
            for rp in rt.partitions:
                if rp.error_code:
                    raise error_for_code(rp.error_code, f"{topic}-{rp.partition_index}: {rp.error_message}")
                out += [
                    {
                        "partition": rp.partition_index,
                        "producer_id": s.producer_id,
                        "producer_epoch": s.producer_epoch,
                        "last_sequence": s.last_sequence,
                        "last_timestamp": s.last_timestamp,
                        "coordinator_epoch": s.coordinator_epoch,
                        "current_txn_start_offset": s.current_txn_start_offset,
                    }
                    for s in rp.active_producers
                ]
    return sorted(out, key=lambda r: (r["partition"], r["producer_id"]))
