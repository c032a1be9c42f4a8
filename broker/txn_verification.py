"""Transaction verification on the partition leader (KIP-890 part 1, Kafka's
AddPartitionsToTxnManager and ReplicaManager.appendRecordsWithTransactionVerification).

Before a transactional batch begins a transaction in a partition, the leader asks the
producer's transaction coordinator whether the partition is in the producer's ongoing
transaction (AddPartitionsToTxn with ``verify_only``): to this broker's own coordinator by
a direct call, to another broker's over the inter-broker connections the markers use
(``broker.txn_markers.MarkerChannels``). The log then takes the batch only with the
producer's verification guard (``hot.producer_state``), so a late retry of a batch whose
transaction has ended meanwhile can never open a transaction no marker will close.

Errors as Kafka answers the Produce request for a partition that failed verification:

* the partition is not in the transaction (TRANSACTION_ABORTABLE from the coordinator, or
  INVALID_TXN_STATE): INVALID_TXN_STATE, "Partition was not added to the transaction"; to
  Produce v11+ (KIP-890) TRANSACTION_ABORTABLE stays so (the client aborts the transaction);
* PRODUCER_FENCED: INVALID_PRODUCER_EPOCH (what producers expect from a partition leader);
* coordinator errors a producer would not retry on a Produce (CONCURRENT_TRANSACTIONS,
  NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR): NOT_ENOUGH_REPLICAS, which every producer retries without refreshing
  its metadata;
* CLUSTER_AUTHORIZATION_FAILED (the coordinator refused this broker): INVALID_TXN_STATE;
* any other error (INVALID_PRODUCER_ID_MAPPING, ...) as the coordinator gave it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from broker.groups.types import TopicPartition
from broker.transactions.markers import MarkerSendError
from hot.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    NotEnoughReplicasError,
    StrataError,
    TransactionAbortableError,
)
from hot.record_validation import transactional_producers
from kwire import ApiKey
from kwire import error_table as E
from kwire.error_table import error_for_code, kafka_code
from kwire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager
    from broker.transactions.coordinator import TransactionCoordinator
    from hot.producer_state import VerificationGuard

log = logging.getLogger("strata.transactions.verification")


class InterBrokerCalls(Protocol):
    """Requests to another broker (``broker.txn_markers.MarkerChannels``)."""

    async def call(self, dest: int, api_key: int, req: Any, timeout: float) -> Any: ...


class VerificationHost(Protocol):
    """What a verification needs of the broker (``broker.broker.Broker``): its replicas,
    and the transaction coordinator and inter-broker channels set once it has started."""

    @property
    def node_id(self) -> int: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def transactions(self) -> TransactionCoordinator | None: ...

    @property
    def txn_channels(self) -> InterBrokerCalls | None: ...


# One verification's bound: Kafka's inter-broker requests are bounded by request.timeout.ms;
# a produce waiting longer would outlive its own client's timeout.
VERIFY_TIMEOUT_S: Final = 30.0

_RETRY_AS_NOT_ENOUGH_REPLICAS: Final = {
    E.CONCURRENT_TRANSACTIONS: "CONCURRENT_TRANSACTIONS",
    E.NETWORK_EXCEPTION: "NETWORK_EXCEPTION",
    E.COORDINATOR_LOAD_IN_PROGRESS: "COORDINATOR_LOAD_IN_PROGRESS",
    E.COORDINATOR_NOT_AVAILABLE: "COORDINATOR_NOT_AVAILABLE",
    E.NOT_COORDINATOR: "NOT_COORDINATOR",
}


class ProduceVerification:
    """The verifications one Produce request needs (Kafka's
    appendRecordsWithTransactionVerification): ``add`` each partition its leader will
    append (before anything is awaited), ``run`` when ``pending``, then append each with
    ``guards_for`` unless ``errors`` names it."""

    def __init__(self, broker: VerificationHost, transactional_id: str, produce_version: int) -> None:
        self.broker = broker
        self.transactional_id = transactional_id
        self.produce_version = produce_version
        self._guards: dict[tuple[str, int], dict[int, VerificationGuard]] = {}
        self._needed: dict[tuple[int, int], list[TopicPartition]] = {}  # (producer, epoch) -> partitions
        self.errors: dict[tuple[str, int], StrataError] = {}

    def add(self, topic: str, partition: int, records: bytes | memoryview) -> None:
        """A partition this broker leads: the guards of its transactional batches' producers
        that begin a transaction here (to verify), none for those already in one."""
        producers = transactional_producers(records)
        if not producers:
            return
        rep = self.broker.replicas.replicas.get((topic, partition))
        if rep is None:
            return  # the append answers it
        guards: dict[int, VerificationGuard] = {}
        for producer_id, epoch in producers.items():
            guard = rep.log.start_txn_verification(producer_id, epoch)
            if guard is not None:
                guards[producer_id] = guard
                self._needed.setdefault((producer_id, epoch), []).append(TopicPartition(topic, partition))
        self._guards[(topic, partition)] = guards

    @property
    def pending(self) -> bool:
        return bool(self._needed)

    async def run(self) -> None:
        for (producer_id, epoch), partitions in self._needed.items():
            failed = await verify(
                self.broker, self.transactional_id, producer_id, epoch, partitions, self.produce_version
            )
            for tp, err in failed.items():
                self.errors[(tp.topic, tp.partition)] = err
        self._needed = {}

    def guards_for(self, topic: str, partition: int) -> dict[int, VerificationGuard] | None:
        """The guards to append the partition's batches with (None: no transactional batch)."""
        return self._guards.get((topic, partition))


# Produce v11 is the first that may answer TRANSACTION_ABORTABLE (KIP-890).
ABORTABLE_PRODUCE_VERSION: Final = 11


def produce_error(code: int, produce_version: int = 0) -> StrataError:
    """The Produce error for a partition whose verification answered ``code`` (module
    docstring)."""
    if code == E.TRANSACTION_ABORTABLE and produce_version >= ABORTABLE_PRODUCE_VERSION:
        return TransactionAbortableError("Partition was not added to the transaction")
    if code in (E.INVALID_TXN_STATE, E.TRANSACTION_ABORTABLE, E.CLUSTER_AUTHORIZATION_FAILED):
        return InvalidTxnStateError("Partition was not added to the transaction")
    if code == E.PRODUCER_FENCED:
        return InvalidProducerEpochError("the producer was fenced by a newer instance of its id")
    name = _RETRY_AS_NOT_ENOUGH_REPLICAS.get(code)
    if name is not None:
        return NotEnoughReplicasError(
            f"Unable to verify the partition has been added to the transaction. Underlying error: {name}"
        )
    return error_for_code(code, "transaction verification failed")


async def verify(
    broker: VerificationHost,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Sequence[TopicPartition],
    produce_version: int = 0,
) -> dict[TopicPartition, StrataError]:
    """Ask the coordinator of ``transactional_id`` about ``partitions``: the ones it did
    not confirm, each with the Produce error to answer (module docstring)."""
    coordinator = broker.transactions
    if coordinator is None or not partitions:
        return {}
    try:
        dest = coordinator.leader_for(transactional_id)
        if dest == broker.node_id:
            codes = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        else:
            codes = await _remote(broker, dest, transactional_id, producer_id, producer_epoch, partitions)
    except StrataError as exc:
        codes = dict.fromkeys(partitions, kafka_code(exc))
    return {tp: produce_error(code, produce_version) for tp, code in codes.items() if code != E.NONE}


async def _remote(
    broker: VerificationHost,
    dest: int,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Sequence[TopicPartition],
) -> dict[TopicPartition, int]:
    channels = broker.txn_channels
    if channels is None:
        return dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    topics = tuple(AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    req = AddPartitionsToTxnRequest(
        transactions=(
            AddPartitionsToTxnTransaction(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                verify_only=True,
                topics=topics,
            ),
        )
    )
    try:
        resp: AddPartitionsToTxnResponse = await channels.call(
            dest, ApiKey.ADD_PARTITIONS_TO_TXN, req, VERIFY_TIMEOUT_S
        )
    except (MarkerSendError, TimeoutError, OSError) as exc:  # MarkerChannels.call wraps connection errors
        log.info("cannot verify the transaction of %r at broker %d: %s", transactional_id, dest, exc)
        return dict.fromkeys(partitions, E.NETWORK_EXCEPTION)
    if resp.error_code:
        return dict.fromkeys(partitions, resp.error_code)
    codes = dict.fromkeys(partitions, E.NONE)
    for result in resp.results_by_transaction:
        for topic in result.topic_results:
            for p in topic.results_by_partition:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp in codes:
                    codes[tp] = p.partition_error_code
    return codes
