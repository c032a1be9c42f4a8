"""The partition leader's transaction verification (broker.txn_verification): the Produce
error each coordinator answer becomes, as Kafka's ReplicaManager translates them. The
verification itself runs end to end in tests/e2e/test_transactions.py (this broker's own
coordinator) and in the 3-broker transaction tests (another broker's, over the wire)."""

from __future__ import annotations

import pytest

from broker.txn_verification import produce_error
from kwire import error_table as E
from kwire.error_table import kafka_code


@pytest.mark.parametrize(
    ("answer", "produce"),
    [
        (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE),  # not in the transaction
        (E.INVALID_TXN_STATE, E.INVALID_TXN_STATE),
        (E.CLUSTER_AUTHORIZATION_FAILED, E.INVALID_TXN_STATE),  # never shown to the client
        (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH),
        (E.CONCURRENT_TRANSACTIONS, E.NOT_ENOUGH_REPLICAS),  # retried by every producer
        (E.NETWORK_EXCEPTION, E.NOT_ENOUGH_REPLICAS),
        (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_ENOUGH_REPLICAS),
        (E.COORDINATOR_NOT_AVAILABLE, E.NOT_ENOUGH_REPLICAS),
        (E.NOT_COORDINATOR, E.NOT_ENOUGH_REPLICAS),
        (E.INVALID_PRODUCER_ID_MAPPING, E.INVALID_PRODUCER_ID_MAPPING),
    ],
)
def test_coordinator_answers_become_the_errors_producers_expect(answer: int, produce: int) -> None:
    err = produce_error(answer)
    assert kafka_code(err) == produce
    if produce == E.INVALID_TXN_STATE:
        assert str(err) == "Partition was not added to the transaction"
    if produce == E.NOT_ENOUGH_REPLICAS:
        assert "Unable to verify the partition has been added to the transaction" in str(err)


def test_produce_v11_keeps_transaction_abortable() -> None:
    """KIP-890: from Produce v11 a partition not in the transaction is TRANSACTION_ABORTABLE
    (the client aborts); older versions get INVALID_TXN_STATE."""
    assert kafka_code(produce_error(E.TRANSACTION_ABORTABLE, 11)) == E.TRANSACTION_ABORTABLE
    assert kafka_code(produce_error(E.TRANSACTION_ABORTABLE, 10)) == E.INVALID_TXN_STATE
    assert kafka_code(produce_error(E.INVALID_TXN_STATE, 11)) == E.INVALID_TXN_STATE
