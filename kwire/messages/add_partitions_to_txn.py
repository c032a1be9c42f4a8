"""AddPartitionsToTxn (key 24), versions 0-5, flexible 3+.

Two shapes share the key. v0-3 are what producers send: one transaction, its partitions in
the top-level ``v3_and_below_*`` fields, answered in ``results_by_topic_v3_and_below``. v4+
(KIP-890 part 1) are broker to broker: a partition leader batches several transactions in
``transactions`` and, with ``verify_only``, asks the coordinator whether the partitions are
already in the transaction rather than adding them; the answer has a top-level
``error_code`` and ``results_by_transaction``. Versions 3 and below are for clients only,
4 and above for brokers only (Kafka's JSON). v1 is v0; v2 allows PRODUCER_FENCED; v5
allows TRANSACTION_ABORTABLE.

The fields of the other shape are not ignorable: encoding a non-empty ``transactions`` at
v3, or a transactional id at v4, is an ``EncodeError`` (Kafka raises
UnsupportedVersionException), so their defaults are Kafka's (empty, "", 0).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnTransaction:
    transactional_id: Annotated[str, W(STRING, "4+")]
    producer_id: Annotated[int, W(INT64, "4+")]
    producer_epoch: Annotated[int, W(INT16, "4+")]
    verify_only: Annotated[bool, W(BOOL, "4+")] = False
    topics: Annotated[Sequence[AddPartitionsToTxnTopic], W(ARRAY(AddPartitionsToTxnTopic), "4+")] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnRequest:
    transactions: Annotated[
        Sequence[AddPartitionsToTxnTransaction],
        W(ARRAY(AddPartitionsToTxnTransaction), "4+", ignorable=False),
    ] = ()
    v3_and_below_transactional_id: Annotated[str, W(STRING, "0-3", ignorable=False)] = ""
    v3_and_below_producer_id: Annotated[int, W(INT64, "0-3", ignorable=False)] = 0
    v3_and_below_producer_epoch: Annotated[int, W(INT16, "0-3", ignorable=False)] = 0
    v3_and_below_topics: Annotated[
        Sequence[AddPartitionsToTxnTopic], W(ARRAY(AddPartitionsToTxnTopic), "0-3", ignorable=False)
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnPartitionResult:
    partition_index: Annotated[int, W(INT32)]
    partition_error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnTopicResult:
    name: Annotated[str, W(STRING)]
    results_by_partition: Annotated[
        Sequence[AddPartitionsToTxnPartitionResult], W(ARRAY(AddPartitionsToTxnPartitionResult))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnResult:
    transactional_id: Annotated[str, W(STRING, "4+")]
    topic_results: Annotated[
        Sequence[AddPartitionsToTxnTopicResult], W(ARRAY(AddPartitionsToTxnTopicResult), "4+")
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16, "4+")] = 0  # ignorable in Kafka's JSON
    results_by_transaction: Annotated[
        Sequence[AddPartitionsToTxnResult], W(ARRAY(AddPartitionsToTxnResult), "4+", ignorable=False)
    ] = ()
    results_by_topic_v3_and_below: Annotated[
        Sequence[AddPartitionsToTxnTopicResult],
        W(ARRAY(AddPartitionsToTxnTopicResult), "0-3", ignorable=False),
    ] = ()
