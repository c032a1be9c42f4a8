"""The coordinator's cache of its ``__transaction_state`` partitions: loading, leadership,
writes checked against the coordinator epoch, DescribeTransactions and ListTransactions."""

from __future__ import annotations

import dataclasses

import pytest

from broker.transactions.cache import Listed, TransactionCache
from broker.transactions.log_codec import encode_key, encode_value
from broker.transactions.replay import Loaded, replay
from broker.transactions.state import TransactionMetadata, TransactionState, Transit
from broker.transactions.transitions import add_partitions, expire, init_producer_id
from hot.errors import CoordinatorLoadInProgressError, NotCoordinatorError, TransactionalIdNotFoundError
from tests.broker.transactions.txnlib import TP_A0

S = TransactionState
NOW = 1_000_000
A0 = frozenset({TP_A0})


def loaded_cache(*metas: TransactionMetadata, epoch: int = 3) -> tuple[TransactionCache, int]:
    cache = TransactionCache(1)
    cache.begin_loading(0, epoch)
    loaded = replay([(encode_key(m.transactional_id), encode_value(m)) for m in metas], NOW)
    assert cache.finish_loading(0, epoch, loaded) == loaded.completions
    return cache, epoch


def meta(tid: str, state: S = S.EMPTY, **kw: object) -> TransactionMetadata:
    base = TransactionMetadata(
        transactional_id=tid,
        producer_id=5,
        producer_epoch=0,
        timeout_ms=60_000,
        state=state,
        txn_last_update_timestamp_ms=NOW - 10,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_ids_of_unled_or_loading_partitions_are_refused() -> None:
    cache = TransactionCache(4)
    tid = "tx"
    n = cache.partition_for(tid)
    with pytest.raises(NotCoordinatorError):
        cache.get(tid)
    cache.begin_loading(n, 7)
    with pytest.raises(CoordinatorLoadInProgressError):
        cache.get(tid)
    with pytest.raises(CoordinatorLoadInProgressError):
        cache.list_transactions(now_ms=NOW)
    assert cache.finish_loading(n, 6, Loaded({}, (), 0)) is None  # an older load
    assert cache.finish_loading(n, 7, Loaded({}, (), 0)) == ()
    assert cache.get(tid) == (7, None) and cache.coordinator_epoch(n) == 7
    cache.unload(n, 7)
    with pytest.raises(NotCoordinatorError):
        cache.get(tid)


def test_an_unload_cancels_a_load_and_a_load_must_hold_only_its_own_ids() -> None:
    cache = TransactionCache(2)
    cache.begin_loading(0, 1)
    cache.unload(0, 1)
    assert cache.finish_loading(0, 1, Loaded({}, (), 0)) is None
    other = next(t for t in ("a", "b", "c", "d") if cache.partition_for(t) == 1)
    cache.begin_loading(0, 2)
    with pytest.raises(ValueError, match="does not belong"):
        cache.finish_loading(0, 2, Loaded({other: meta(other)}, (), 0))


def test_writes_are_checked_against_the_coordinator_epoch() -> None:
    cache, epoch = loaded_cache()
    transit = init_producer_id(
        None,
        transactional_id="tx",
        timeout_ms=1000,
        max_timeout_ms=2000,
        now_ms=NOW,
        new_producer_id=lambda: 77,
    )
    cache.start(transit, epoch)
    assert cache.get("tx")[1] == transit.before
    done = cache.complete(transit, epoch)
    assert done is not None and done.producer_epoch == 0 and cache.get("tx") == (epoch, done)
    # a write started before a reload completes as NOT_COORDINATOR and changes nothing
    t2 = add_partitions(done, producer_id=77, producer_epoch=0, partitions=[TP_A0], now_ms=NOW)
    assert isinstance(t2, Transit)
    cache.start(t2, epoch)
    cache.begin_loading(0, epoch + 1)
    with pytest.raises(NotCoordinatorError):
        cache.complete(t2, epoch)
    cache.abandon(t2, epoch)
    with pytest.raises(NotCoordinatorError):
        cache.start(t2, epoch)


def test_a_failed_write_clears_the_pending_state() -> None:
    cache, epoch = loaded_cache(meta("tx"))
    _, m = cache.get("tx")
    assert m is not None
    transit = add_partitions(m, producer_id=5, producer_epoch=0, partitions=[TP_A0], now_ms=NOW)
    assert isinstance(transit, Transit)
    cache.start(transit, epoch)
    cache.abandon(transit, epoch)
    assert cache.get("tx")[1] == m


def test_an_acknowledged_tombstone_removes_the_id() -> None:
    cache, epoch = loaded_cache(meta("tx"))
    _, m = cache.get("tx")
    assert m is not None
    transit = expire(m, NOW + 100, 50)
    cache.start(transit, epoch)
    assert cache.complete(transit, epoch) is None
    assert cache.get("tx") == (epoch, None)
    with pytest.raises(TransactionalIdNotFoundError):
        cache.describe("tx")


def test_loading_hands_back_the_completions_with_their_pending_state() -> None:
    prepared = meta("p", S.PREPARE_COMMIT, partitions=frozenset({TP_A0}), txn_start_timestamp_ms=NOW - 50)
    cache, _ = loaded_cache(prepared, meta("e"))
    _, p = cache.get("p")
    assert p is not None and p.pending_state is S.COMPLETE_COMMIT
    assert cache.describe("p") == p


def test_list_transactions_filters_like_kafka() -> None:
    cache, _ = loaded_cache(
        meta("idle"),
        meta("old", S.ONGOING, producer_id=6, partitions=A0, txn_start_timestamp_ms=NOW - 5000),
        meta("new", S.ONGOING, producer_id=7, partitions=A0, txn_start_timestamp_ms=NOW - 10),
    )
    every, unknown = cache.list_transactions(now_ms=NOW)
    assert {x.transactional_id for x in every} == {"idle", "old", "new"} and unknown == []
    ongoing, unknown = cache.list_transactions(states=["Ongoing", "Bogus"], now_ms=NOW)
    assert {x.transactional_id for x in ongoing} == {"old", "new"} and unknown == ["Bogus"]
    assert cache.list_transactions(producer_ids=[6], now_ms=NOW)[0] == [Listed("old", 6, "Ongoing")]
    long, _ = cache.list_transactions(states=["Ongoing"], min_duration_ms=1000, now_ms=NOW)
    assert long == [Listed("old", 6, "Ongoing")]
