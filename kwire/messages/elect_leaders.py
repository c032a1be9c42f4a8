"""ElectLeaders (key 43), versions 0-2, flexible 2+ (KIP-460): elect each partition's
preferred replica (``election_type`` 0, the only kind in v0) or, for an offline partition,
any live replica (1, unclean). A null ``topic_partitions`` means every partition.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from kwire.schema import ARRAY, INT8, INT16, INT32, STRING, W

PREFERRED: Final = 0
UNCLEAN: Final = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    topic: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersRequest:
    election_type: Annotated[int, W(INT8, "1+", ignorable=False)] = PREFERRED
    topic_partitions: Annotated[
        Sequence[TopicPartitions] | None, W(ARRAY(TopicPartitions), nullable="0+")
    ] = None
    timeout_ms: Annotated[int, W(INT32)] = 60000


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    partition_id: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaElectionResult:
    topic: Annotated[str, W(STRING)]
    partition_result: Annotated[Sequence[PartitionResult], W(ARRAY(PartitionResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16, "1+", ignorable=False)] = 0
    replica_election_results: Annotated[Sequence[ReplicaElectionResult], W(ARRAY(ReplicaElectionResult))] = ()
