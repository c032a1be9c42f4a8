"""strata_request_errors_total{api,error}: the response walk and the call sites' labels
(broker.request_metrics), without a broker; tests/ops/test_metrics_conventions.py sees
them on a real one."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.metrics import BrokerMetrics
from broker.request_metrics import COUNTED_BY_HANDLER, _plan_of, error_name
from kwire import APIS
from kwire.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)


def _errors(m: BrokerMetrics) -> dict[tuple[str, str], float]:
    text = generate_latest(m.registry).decode()
    return {
        (s.labels["api"], s.labels["error"]): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "strata_request_errors_total"
    }


def test_every_api_response_has_its_error_codes_found() -> None:
    for spec in APIS.values():
        assert _plan_of(spec.response.cls) is not None, spec.name


def test_nested_error_codes_are_counted_by_kafka_name_and_none_is_not() -> None:
    m = BrokerMetrics()
    partitions = tuple(
        OffsetCommitResponsePartition(partition_index=i, error_code=code)
        for i, code in enumerate((25, 0, 25, 22))
    )
    m.response_errors.count(
        "OffsetCommit",
        OffsetCommitResponse(topics=(OffsetCommitResponseTopic(name="t", partitions=partitions),)),
    )
    m.response_errors.count("OffsetCommit", None)  # acks=0 produce has no response: nothing
    assert _errors(m) == {("OffsetCommit", "UNKNOWN_MEMBER_ID"): 2, ("OffsetCommit", "ILLEGAL_GENERATION"): 1}


def test_handlers_that_count_themselves_are_not_counted_twice() -> None:
    m = BrokerMetrics()
    assert {"Produce", "Fetch", "WriteTxnMarkers"} == COUNTED_BY_HANDLER
    response = OffsetCommitResponse(
        topics=(
            OffsetCommitResponseTopic(
                name="t", partitions=(OffsetCommitResponsePartition(partition_index=0, error_code=6),)
            ),
        )
    )
    m.response_errors.count("Produce", response)
    assert _errors(m) == {}


def test_call_sites_older_names_map_to_one_label_style() -> None:
    m = BrokerMetrics()
    m.errors.labels("produce", "10").inc()
    m.errors.labels("rest_produce", 6).inc()
    m.errors.labels("fetch", "1").inc()
    m.errors.labels("write_txn_markers", 3).inc()
    m.errors.labels("rest", 40402).inc()
    m.errors.labels("Metadata", 3).inc()
    assert _errors(m) == {
        ("Produce", "MESSAGE_TOO_LARGE"): 1,
        ("Produce", "NOT_LEADER_OR_FOLLOWER"): 1,
        ("Fetch", "OFFSET_OUT_OF_RANGE"): 1,
        ("WriteTxnMarkers", "UNKNOWN_TOPIC_OR_PARTITION"): 1,
        ("REST", "40402"): 1,
        ("Metadata", "UNKNOWN_TOPIC_OR_PARTITION"): 1,
    }
    assert error_name(12345) == "12345"  # a code without a name keeps its number
