"""TxnOffsetCommit (key 28), versions 0-5, flexible 3+.

Sent by a transactional producer to the group coordinator: offsets that become visible
when the transaction commits. v2 adds the per-partition ``committed_leader_epoch``
(ignorable); v3 (KIP-447) adds the consumer's group metadata, ``generation_id``,
``member_id`` and ``group_instance_id``, which the coordinator checks as OffsetCommit
does (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). Those three are not
ignorable: below v3 they must keep Kafka's defaults (-1, "", null) or encoding fails, as
in Kafka (whose client resets them before downgrading). v4 allows TRANSACTION_ABORTABLE;
v5 is v4 for clients on transaction version 2, where this request also adds the offsets
partition to the transaction (no AddOffsetsToTxn).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestPartition:
    partition_index: Annotated[int, W(INT32)]
    committed_offset: Annotated[int, W(INT64)]
    committed_leader_epoch: Annotated[int, W(INT32, "2+")] = -1
    committed_metadata: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[TxnOffsetCommitRequestPartition], W(ARRAY(TxnOffsetCommitRequestPartition))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequest:
    transactional_id: Annotated[str, W(STRING)]
    group_id: Annotated[str, W(STRING)]
    producer_id: Annotated[int, W(INT64)]
    producer_epoch: Annotated[int, W(INT16)]
    generation_id: Annotated[int, W(INT32, "3+", ignorable=False)] = -1
    member_id: Annotated[str, W(STRING, "3+", ignorable=False)] = ""
    group_instance_id: Annotated[str | None, W(STRING, "3+", nullable="3+", ignorable=False)] = None
    topics: Annotated[Sequence[TxnOffsetCommitRequestTopic], W(ARRAY(TxnOffsetCommitRequestTopic))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponsePartition:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponseTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[TxnOffsetCommitResponsePartition], W(ARRAY(TxnOffsetCommitResponsePartition))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    topics: Annotated[Sequence[TxnOffsetCommitResponseTopic], W(ARRAY(TxnOffsetCommitResponseTopic))] = ()
