"""Hand-derived golden bytes of the transaction APIs: for each message a non-flexible and a
flexible version (where Kafka 4.x has both), written field by field from Kafka's JSON message
definitions, checked against our encoder, our decoder and kafka-python's JSON-driven classes;
plus the transactional fields of Fetch (aborted transactions, LSO) and ListOffsets
(isolation level). Helpers and the specs are those of test_protocol_transactions.
"""

from __future__ import annotations

from typing import Any

import pytest

from kwire import APIS, ApiKey, ProtocolError
from kwire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kwire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)
from kwire.messages.describe_producers import (
    DescribeProducersPartitionResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeProducersTopicRequest,
    DescribeProducersTopicResponse,
    ProducerState,
)
from kwire.messages.describe_transactions import (
    DescribedTransactionState,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TransactionTopicData,
)
from kwire.messages.end_txn import EndTxnRequest, EndTxnResponse
from kwire.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchPartitionData,
    FetchResponse,
)
from kwire.messages.find_coordinator import FindCoordinatorRequest
from kwire.messages.init_producer_id import InitProducerIdRequest
from kwire.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kwire.messages.list_transactions import (
    ListedTransactionState,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kwire.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kwire.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopic,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kwire.primitives import Reader, Writer
from tests.kwire.test_protocol_transactions import (
    EPOCH1,
    PID7,
    SPECS,
    T_OLD,
    TX,
    TX_OLD,
    TXN_SPECS,
    T,
    decode_body,
    encode_body,
    kafka_python_bytes,
    kind_of,
)

# --- hand-derived layouts: a non-flexible and a flexible version of each message -------------
# (WriteTxnMarkers, DescribeProducers, DescribeTransactions and ListTransactions have no
# non-flexible version in Kafka 4.x.) Field order is the Kafka JSON's.


LAYOUTS: list[tuple[str, int, int, Any, str]] = [
    (
        "add-partitions-v0-request",
        24,
        0,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=7,
            v3_and_below_producer_epoch=1,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name="t", partitions=(0, 2)),),
        ),
        (
            TX_OLD  # v3_and_below_transactional_id (the v4+ transactions array is absent)
            + PID7  # v3_and_below_producer_id
            + EPOCH1  # v3_and_below_producer_epoch
            + "00000001"  # v3_and_below_topics: 1
            + T_OLD  # name
            + "00000002"  # partitions: 2
            "00000000"  # 0
            "00000002"  # 2
        ),
    ),
    (
        "add-partitions-v3-request",
        24,
        3,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=7,
            v3_and_below_producer_epoch=1,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name="t", partitions=(0, 2)),),
        ),
        (
            TX  # v3_and_below_transactional_id
            + PID7  # v3_and_below_producer_id
            + EPOCH1  # v3_and_below_producer_epoch
            + "02"  # v3_and_below_topics: compact array of 1
            + T  # name
            + "03"  # partitions: 2
            "00000000"
            "00000002"
            "00"  # topic tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "add-partitions-v4-request-batched",
        24,
        4,
        AddPartitionsToTxnRequest(
            transactions=(
                AddPartitionsToTxnTransaction(
                    transactional_id="tx",
                    producer_id=7,
                    producer_epoch=1,
                    verify_only=True,
                    topics=(AddPartitionsToTxnTopic(name="t", partitions=(5,)),),
                ),
            )
        ),
        (
            "02"  # transactions: compact array of 1 (the v0-3 top-level fields are gone)
            + TX  # transactional_id
            + PID7  # producer_id
            + EPOCH1  # producer_epoch
            + "01"  # verify_only
            "02"  # topics: 1
            + T  # name
            + "02"  # partitions: 1
            "00000005"
            "00"  # topic tagged fields
            "00"  # transaction tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "add-partitions-v0-response",
        24,
        0,
        AddPartitionsToTxnResponse(
            throttle_time_ms=2,
            results_by_topic_v3_and_below=(
                AddPartitionsToTxnTopicResult(
                    name="t",
                    results_by_partition=(
                        AddPartitionsToTxnPartitionResult(partition_index=0, partition_error_code=51),
                    ),
                ),
            ),
        ),
        (
            "00000002"  # throttle_time_ms (no top-level error_code before v4)
            "00000001"  # results_by_topic_v3_and_below: 1
            + T_OLD  # name
            + "00000001"  # results_by_partition: 1
            "00000000"  # partition_index
            "0033"  # partition_error_code 51 CONCURRENT_TRANSACTIONS
        ),
    ),
    (
        "add-partitions-v5-response-batched",
        24,
        5,
        AddPartitionsToTxnResponse(
            results_by_transaction=(
                AddPartitionsToTxnResult(
                    transactional_id="tx",
                    topic_results=(
                        AddPartitionsToTxnTopicResult(
                            name="t",
                            results_by_partition=(
                                AddPartitionsToTxnPartitionResult(partition_index=5, partition_error_code=48),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        (
            "00000000"  # throttle_time_ms
            "0000"  # error_code (v4+)
            "02"  # results_by_transaction: 1
            + TX  # transactional_id
            + "02"  # topic_results: 1
            + T  # name
            + "02"  # results_by_partition: 1
            "00000005"  # partition_index
            "0030"  # partition_error_code 48 INVALID_TXN_STATE
            "00"  # partition result tagged fields
            "00"  # topic result tagged fields
            "00"  # transaction result tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "add-offsets-v0-request",
        25,
        0,
        AddOffsetsToTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=1, group_id="g"),
        TX_OLD + PID7 + EPOCH1 + "000167",  # transactional_id, producer_id, producer_epoch, group_id
    ),
    (
        "add-offsets-v3-request",
        25,
        3,
        AddOffsetsToTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=1, group_id="g"),
        TX + PID7 + EPOCH1 + "0267" + "00",  # ... group_id "g" compact, tagged fields
    ),
    (
        "add-offsets-v1-response",
        25,
        1,
        AddOffsetsToTxnResponse(throttle_time_ms=100, error_code=51),
        "000000640033",  # throttle_time_ms 100, error_code 51
    ),
    (
        "add-offsets-v4-response",
        25,
        4,
        AddOffsetsToTxnResponse(error_code=90),
        "00000000005a00",  # throttle_time_ms, error_code 90 PRODUCER_FENCED, tagged fields
    ),
    (
        "end-txn-v0-request",
        26,
        0,
        EndTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=1, committed=True),
        TX_OLD + PID7 + EPOCH1 + "01",  # transactional_id, producer_id, producer_epoch, committed
    ),
    (
        "end-txn-v5-request",
        26,
        5,
        EndTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=1, committed=False),
        TX + PID7 + EPOCH1 + "00" + "00",  # ..., committed false (abort), tagged fields
    ),
    (
        "end-txn-v2-response",
        26,
        2,
        EndTxnResponse(error_code=47),
        "00000000002f",  # throttle_time_ms, error_code 47 INVALID_PRODUCER_EPOCH
    ),
    (
        "end-txn-v5-response",
        26,
        5,
        EndTxnResponse(producer_id=7, producer_epoch=2),
        (
            "00000000"  # throttle_time_ms
            "0000"  # error_code
            + PID7  # producer_id (v5+): the id to use for the next transaction
            + "0002"  # producer_epoch (v5+): bumped on every end (KIP-890 part 2)
            "00"  # tagged fields
        ),
    ),
    (
        "write-markers-v1-request",
        27,
        1,
        WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=7,
                    producer_epoch=1,
                    transaction_result=True,
                    topics=(WritableTxnMarkerTopic(name="t", partition_indexes=(0, 1)),),
                    coordinator_epoch=5,
                ),
            )
        ),
        (
            "02"  # markers: 1
            + PID7  # producer_id
            + EPOCH1  # producer_epoch
            + "01"  # transaction_result: COMMIT
            "02"  # topics: 1
            + T  # name
            + "03"  # partition_indexes: 2
            "00000000"
            "00000001"
            "00"  # topic tagged fields
            "00000005"  # coordinator_epoch (after topics, as in Kafka's JSON)
            "00"  # marker tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "write-markers-v2-request",
        27,
        2,
        WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=7,
                    producer_epoch=1,
                    transaction_result=False,
                    topics=(WritableTxnMarkerTopic(name="t", partition_indexes=(3,)),),
                    coordinator_epoch=5,
                    transaction_version=2,
                ),
            )
        ),
        (
            "02"  # markers: 1
            + PID7  # producer_id
            + EPOCH1  # producer_epoch
            + "00"  # transaction_result: ABORT
            "02"  # topics: 1
            + T  # name
            + "02"  # partition_indexes: 1
            "00000003"
            "00"  # topic tagged fields
            "00000005"  # coordinator_epoch
            "02"  # transaction_version (v2+)
            "00"  # marker tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "write-markers-v1-response",
        27,
        1,
        WriteTxnMarkersResponse(
            markers=(
                WritableTxnMarkerResult(
                    producer_id=7,
                    topics=(
                        WritableTxnMarkerTopicResult(
                            name="t",
                            partitions=(WritableTxnMarkerPartitionResult(partition_index=1, error_code=6),),
                        ),
                    ),
                ),
            )
        ),
        (
            "02"  # markers: 1
            + PID7  # producer_id
            + "02"  # topics: 1
            + T  # name
            + "02"  # partitions: 1
            "00000001"  # partition_index
            "0006"  # error_code 6 NOT_LEADER_OR_FOLLOWER
            "00"  # partition tagged fields
            "00"  # topic tagged fields
            "00"  # marker tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "txn-offset-commit-v0-request",
        28,
        0,
        TxnOffsetCommitRequest(
            transactional_id="tx",
            group_id="g",
            producer_id=7,
            producer_epoch=1,
            topics=(
                TxnOffsetCommitRequestTopic(
                    name="t",
                    partitions=(
                        TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=42, committed_metadata=None
                        ),
                    ),
                ),
            ),
        ),
        (
            TX_OLD  # transactional_id
            + "000167"  # group_id "g"
            + PID7  # producer_id
            + EPOCH1  # producer_epoch (no group metadata before v3)
            + "00000001"  # topics: 1
            + T_OLD  # name
            + "00000001"  # partitions: 1
            "00000000"  # partition_index
            "000000000000002a"  # committed_offset 42 (no leader epoch before v2)
            "ffff"  # committed_metadata null
        ),
    ),
    (
        "txn-offset-commit-v2-request",
        28,
        2,
        TxnOffsetCommitRequest(
            transactional_id="tx",
            group_id="g",
            producer_id=7,
            producer_epoch=1,
            topics=(
                TxnOffsetCommitRequestTopic(
                    name="t",
                    partitions=(
                        TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=42,
                            committed_leader_epoch=3,
                            committed_metadata="m",
                        ),
                    ),
                ),
            ),
        ),
        (
            TX_OLD  # transactional_id
            + "000167"  # group_id
            + PID7  # producer_id
            + EPOCH1  # producer_epoch
            + "00000001"  # topics: 1
            + T_OLD  # name
            + "00000001"  # partitions: 1
            "00000000"  # partition_index
            "000000000000002a"  # committed_offset
            "00000003"  # committed_leader_epoch (v2+)
            "00016d"  # committed_metadata "m"
        ),
    ),
    (
        "txn-offset-commit-v3-request",
        28,
        3,
        TxnOffsetCommitRequest(
            transactional_id="tx",
            group_id="g",
            producer_id=7,
            producer_epoch=1,
            generation_id=4,
            member_id="m",
            group_instance_id=None,
            topics=(
                TxnOffsetCommitRequestTopic(
                    name="t",
                    partitions=(
                        TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=42,
                            committed_leader_epoch=3,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        ),
        (
            TX  # transactional_id
            + "0267"  # group_id
            + PID7  # producer_id
            + EPOCH1  # producer_epoch
            + "00000004"  # generation_id (v3+, KIP-447)
            "026d"  # member_id "m"
            "00"  # group_instance_id null
            "02"  # topics: 1
            + T  # name
            + "02"  # partitions: 1
            "00000000"  # partition_index
            "000000000000002a"  # committed_offset
            "00000003"  # committed_leader_epoch
            "01"  # committed_metadata "" (length 0 + 1)
            "00"  # partition tagged fields
            "00"  # topic tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "txn-offset-commit-v0-response",
        28,
        0,
        TxnOffsetCommitResponse(
            topics=(
                TxnOffsetCommitResponseTopic(
                    name="t", partitions=(TxnOffsetCommitResponsePartition(partition_index=0, error_code=49),)
                ),
            )
        ),
        (
            "00000000"  # throttle_time_ms
            "00000001"  # topics: 1
            + T_OLD  # name
            + "00000001"  # partitions: 1
            "00000000"  # partition_index
            "0031"  # error_code 49 INVALID_PRODUCER_ID_MAPPING
        ),
    ),
    (
        "txn-offset-commit-v5-response",
        28,
        5,
        TxnOffsetCommitResponse(
            topics=(
                TxnOffsetCommitResponseTopic(
                    name="t", partitions=(TxnOffsetCommitResponsePartition(partition_index=0, error_code=22),)
                ),
            )
        ),
        (
            "00000000"  # throttle_time_ms
            "02"  # topics: 1
            + T  # name
            + "02"  # partitions: 1
            "00000000"  # partition_index
            "0016"  # error_code 22 ILLEGAL_GENERATION
            "00"  # partition tagged fields
            "00"  # topic tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "describe-producers-v0-request",
        61,
        0,
        DescribeProducersRequest(topics=(DescribeProducersTopicRequest(name="t", partition_indexes=(0,)),)),
        (
            "02"  # topics: 1
            + T  # name
            + "02"  # partition_indexes: 1
            "00000000"
            "00"  # topic tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "describe-producers-v0-response",
        61,
        0,
        DescribeProducersResponse(
            topics=(
                DescribeProducersTopicResponse(
                    name="t",
                    partitions=(
                        DescribeProducersPartitionResponse(
                            partition_index=0,
                            active_producers=(
                                ProducerState(
                                    producer_id=7,
                                    producer_epoch=1,
                                    last_sequence=9,
                                    last_timestamp=1000,
                                    coordinator_epoch=2,
                                    current_txn_start_offset=40,
                                ),
                            ),
                        ),
                    ),
                ),
            )
        ),
        (
            "00000000"  # throttle_time_ms
            "02"  # topics: 1
            + T  # name
            + "02"  # partitions: 1
            "00000000"  # partition_index
            "0000"  # error_code
            "00"  # error_message null
            "02"  # active_producers: 1
            + PID7  # producer_id
            + "00000001"  # producer_epoch: INT32 here
            "00000009"  # last_sequence
            "00000000000003e8"  # last_timestamp 1000
            "00000002"  # coordinator_epoch
            "0000000000000028"  # current_txn_start_offset 40
            "00"  # producer tagged fields
            "00"  # partition tagged fields
            "00"  # topic tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "describe-transactions-v0-request",
        65,
        0,
        DescribeTransactionsRequest(transactional_ids=("tx",)),
        "02" + TX + "00",  # transactional_ids: 1, "tx"; tagged fields
    ),
    (
        "describe-transactions-v0-response",
        65,
        0,
        DescribeTransactionsResponse(
            transaction_states=(
                DescribedTransactionState(
                    transactional_id="tx",
                    transaction_state="Ongoing",
                    transaction_timeout_ms=60000,
                    transaction_start_time_ms=1000,
                    producer_id=7,
                    producer_epoch=1,
                    topics=(TransactionTopicData(topic="t", partitions=(0, 1)),),
                ),
            )
        ),
        (
            "00000000"  # throttle_time_ms
            "02"  # transaction_states: 1
            "0000"  # error_code (first, as in Kafka's JSON)
            + TX  # transactional_id
            + "084f6e676f696e67"  # transaction_state "Ongoing" (7 + 1)
            "0000ea60"  # transaction_timeout_ms 60000
            "00000000000003e8"  # transaction_start_time_ms 1000
            + PID7  # producer_id
            + EPOCH1  # producer_epoch
            + "02"  # topics: 1
            + T  # topic
            + "03"  # partitions: 2
            "00000000"
            "00000001"
            "00"  # topic tagged fields
            "00"  # state tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "list-transactions-v0-request",
        66,
        0,
        ListTransactionsRequest(state_filters=("Ongoing",)),
        (
            "02"  # state_filters: 1
            "084f6e676f696e67"  # "Ongoing"
            "01"  # producer_id_filters: empty
            "00"  # tagged fields (no duration_filter before v1)
        ),
    ),
    (
        "list-transactions-v1-request",
        66,
        1,
        ListTransactionsRequest(producer_id_filters=(7,), duration_filter=60000),
        (
            "01"  # state_filters: empty
            "02" + PID7 + "000000000000ea60"  # producer_id_filters: 1  # duration_filter 60000 (v1+)
            "00"  # tagged fields
        ),
    ),
    (
        "list-transactions-v2-request",
        66,
        2,
        ListTransactionsRequest(transactional_id_pattern="tx.*"),
        (
            "01"  # state_filters: empty
            "01"  # producer_id_filters: empty
            "ffffffffffffffff"  # duration_filter -1: no filter
            "0574782e2a"  # transactional_id_pattern "tx.*" (v2+, 4 + 1)
            "00"  # tagged fields
        ),
    ),
    (
        "list-transactions-v0-response",
        66,
        0,
        ListTransactionsResponse(
            unknown_state_filters=("Foo",),
            transaction_states=(
                ListedTransactionState(transactional_id="tx", producer_id=7, transaction_state="Ongoing"),
            ),
        ),
        (
            "00000000"  # throttle_time_ms
            "0000"  # error_code
            "02"  # unknown_state_filters: 1
            "04466f6f"  # "Foo"
            "02"  # transaction_states: 1
            + TX  # transactional_id
            + PID7  # producer_id
            + "084f6e676f696e67"  # transaction_state "Ongoing"
            "00"  # state tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "init-producer-id-v0-request-transactional",
        22,
        0,
        InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000),
        TX_OLD + "0000ea60",  # transactional_id, transaction_timeout_ms
    ),
    (
        "init-producer-id-v5-request",
        22,
        5,
        InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=60000, producer_id=7, producer_epoch=1
        ),
        (
            TX  # transactional_id
            + "0000ea60"  # transaction_timeout_ms
            + PID7  # producer_id (v3+, KIP-360)
            + EPOCH1  # producer_epoch (v3+)
            + "00"  # tagged fields
        ),
    ),
    (
        "find-coordinator-v1-request-transaction",
        10,
        1,
        FindCoordinatorRequest(key="tx", key_type=1),
        TX_OLD + "01",  # key, key_type 1 = TRANSACTION
    ),
    (
        "find-coordinator-v6-request-transaction",
        10,
        6,
        FindCoordinatorRequest(key_type=1, coordinator_keys=("tx",)),
        "01" + "02" + TX + "00",  # key_type TRANSACTION, coordinator_keys: 1, tagged fields
    ),
]


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: c[0])
def test_hand_derived_layouts(case: tuple[str, int, int, Any, str]) -> None:
    _, key, version, obj, hexed = case
    expected = bytes.fromhex(hexed)
    assert encode_body(key, version, obj) == expected
    assert decode_body(key, version, expected, kind_of(key, obj)) == obj
    assert kafka_python_bytes(key, version, obj) == expected


def test_every_transaction_message_has_a_hand_derived_layout() -> None:
    covered = {(key, kind_of(key, obj), SPECS[key].is_flexible(v)) for _, key, v, obj, _ in LAYOUTS}
    for key in TXN_SPECS:
        spec = SPECS[key]
        for kind in ("request", "response"):
            assert (key, kind, True) in covered, (spec.name, kind)
            if not spec.is_flexible(spec.min_version):
                assert (key, kind, False) in covered, (spec.name, kind)


# --- the transactional parts of Fetch and ListOffsets (served in APIS) ---------------------


def test_fetch_v12_aborted_transactions_layout() -> None:
    spec = APIS[ApiKey.FETCH]
    resp = FetchResponse(
        responses=(
            FetchableTopicResponse(
                topic="t",
                partitions=(
                    FetchPartitionData(
                        partition_index=0,
                        high_watermark=10,
                        last_stable_offset=5,
                        log_start_offset=0,
                        aborted_transactions=(AbortedTransaction(producer_id=7, first_offset=3),),
                        records=None,
                    ),
                ),
            ),
        )
    )
    expected = bytes.fromhex(
        "00000000"  # throttle_time_ms
        "0000"  # error_code
        "00000000"  # session_id
        "02"  # responses: 1
        + T  # topic
        + "02"  # partitions: 1
        "00000000"  # partition_index
        "0000"  # error_code
        "000000000000000a"  # high_watermark 10
        "0000000000000005"  # last_stable_offset 5: read_committed reads stop here
        "0000000000000000"  # log_start_offset
        "02"  # aborted_transactions: 1 (nullable: null for read_uncommitted)
        + PID7  # producer_id
        + "0000000000000003"  # first_offset
        "00"  # aborted transaction tagged fields
        "ffffffff"  # preferred_read_replica -1
        "00"  # records null
        "00"  # partition tagged fields (diverging_epoch, current_leader, snapshot_id absent)
        "00"  # topic tagged fields
        "00"  # tagged fields
    )
    w = Writer()
    spec.response.codecs[12].encode(w, resp)
    assert w.getvalue() == expected
    assert spec.response.codecs[12].decode(Reader(expected)) == resp
    # null (read_uncommitted) and empty (read_committed, nothing aborted) stay distinct
    for aborted, byte in ((None, "00"), ((), "01")):
        part = FetchPartitionData(partition_index=0, aborted_transactions=aborted)
        w = Writer()
        spec.response.codecs[12].encode(
            w, FetchResponse(responses=(FetchableTopicResponse(topic="t", partitions=(part,)),))
        )
        assert w.getvalue()[44:45] == bytes.fromhex(byte)  # after log_start_offset
        assert spec.response.codecs[12].decode(Reader(w.getvalue())).responses[0].partitions[0] == part


@pytest.mark.parametrize(
    ("version", "hexed"),
    [
        (
            2,
            "ffffffff"  # replica_id -1: a consumer
            "01"  # isolation_level READ_COMMITTED (v2+): LATEST answers the LSO
            "00000001"  # topics: 1
            + T_OLD  # name
            + "00000001"  # partitions: 1
            "00000000"  # partition_index
            "ffffffffffffffff",  # timestamp -1 LATEST
        ),
        (
            6,
            "ffffffff"  # replica_id
            "01"  # isolation_level
            "02"  # topics: 1
            + T  # name
            + "02"  # partitions: 1
            "00000000"  # partition_index
            "ffffffff"  # current_leader_epoch (v4+)
            "ffffffffffffffff"  # timestamp LATEST
            "00"  # partition tagged fields
            "00"  # topic tagged fields
            "00",  # tagged fields
        ),
    ],
)
def test_list_offsets_isolation_level_layout(version: int, hexed: str) -> None:
    spec = APIS[ApiKey.LIST_OFFSETS]
    req = ListOffsetsRequest(
        isolation_level=1,
        topics=(
            ListOffsetsTopic(name="t", partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)),
        ),
    )
    w = Writer()
    spec.request.codecs[version].encode(w, req)
    assert w.getvalue() == bytes.fromhex(hexed)
    assert spec.request.codecs[version].decode(Reader(bytes.fromhex(hexed))) == req


def test_truncation_errors_name_the_field() -> None:
    _, _, _, _, hexed = next(c for c in LAYOUTS if c[0] == "write-markers-v1-request")
    data = bytes.fromhex(hexed)
    with pytest.raises(
        ProtocolError, match=r"^WriteTxnMarkers v1 request markers\[0\]\.coordinator_epoch: truncated int32"
    ):
        decode_body(27, 1, data[:-4])
    _, _, _, _, hexed = next(c for c in LAYOUTS if c[0] == "add-partitions-v4-request-batched")
    data = bytes.fromhex(hexed)
    # cut after verify_only: the transaction's topics array count is missing
    with pytest.raises(
        ProtocolError,
        match=r"^AddPartitionsToTxn v4 request transactions\[0\]\.topics: truncated unsigned varint",
    ):
        decode_body(24, 4, data[: 1 + 3 + 8 + 2 + 1])
    # cut inside the one partition index: its array count cannot fit (checked before reading)
    with pytest.raises(
        ProtocolError,
        match=r"^AddPartitionsToTxn v4 request transactions\[0\]\.topics\[0\]\.partitions: array count 1 ",
    ):
        decode_body(24, 4, data[:21])
