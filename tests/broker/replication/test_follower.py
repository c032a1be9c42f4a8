"""Follower decisions (pure functions): the truncation rules of KIP-101 / KIP-279 case by
case, fetch-error handling, OFFSET_OUT_OF_RANGE resolution, and a randomized cluster
history (elections, clean or not, crashes losing unflushed tails, partial syncs) in which
every follower, after the truncation rule, holds a prefix of its leader's log."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.replication.follower import (
    OFFSET_MOVED_TO_TIERED_STORAGE,
    Backoff,
    FetchFrom,
    ResolveOutOfRange,
    Truncate,
    TruncateFully,
    epoch_to_request,
    fetch_error_action,
    follower_high_watermark,
    on_offset_out_of_range,
    truncation_for,
    truncation_without_epochs,
)
from hot.errors import InvalidRequestError
from hot.leader_epoch import EpochEntry, LeaderEpochCache
from kwire.error_table import (
    CORRUPT_MESSAGE,
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    LEADER_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    REQUEST_TIMED_OUT,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)

E = EpochEntry


# --- the truncation rule ------------------------------------------------------------------------


def test_no_epochs_means_the_high_watermark() -> None:
    assert epoch_to_request(-1) is None
    assert epoch_to_request(0) == 0 and epoch_to_request(7) == 7
    assert truncation_without_epochs(40, 100) == Truncate(40)
    assert truncation_without_epochs(140, 100) == Truncate(100)


@pytest.mark.parametrize(
    ("leader_answer", "follower_epochs", "leo", "hw", "expected"),
    [
        # Same epoch: the smaller of the two ends.
        ((3, 120), [E(1, 0), E(3, 50)], 150, 10, Truncate(120)),
        ((3, 180), [E(1, 0), E(3, 50)], 150, 10, Truncate(150)),
        # The leader ended epoch 1 earlier than we think (we got data it never had).
        ((1, 40), [E(1, 0), E(3, 50)], 150, 10, Truncate(40)),
        # Our epoch 1 ended at 50, the leader's later: our end of epoch 1 wins.
        ((1, 70), [E(1, 0), E(3, 50)], 150, 10, Truncate(50)),
        # The leader answers an epoch we lack (KIP-279): our largest below it is 2, ending
        # at 50 where our epoch 4 started; truncate there and ask again.
        ((3, 60), [E(0, 0), E(2, 20), E(4, 50)], 90, 10, Truncate(50, complete=False)),
        # The leader's epoch predates all of ours: we hold nothing of it.
        ((2, 30), [E(5, 20), E(6, 40)], 60, 10, Truncate(20)),
        # Undefined end offset: the leader cannot tell, fall back to the high watermark.
        ((-1, -1), [E(1, 0)], 60, 25, Truncate(25)),
        # A v0 answer (no epoch): the leader's end offset.
        ((-1, 45), [E(1, 0)], 60, 25, Truncate(45)),
        ((-1, 75), [E(1, 0)], 60, 25, Truncate(60)),
        # We know no epoch <= the leader's (defensive: cannot follow from our request).
        ((2, 30), [], 60, 25, Truncate(30)),
    ],
)
def test_truncation_for(
    leader_answer: tuple[int, int], follower_epochs: list[EpochEntry], leo: int, hw: int, expected: Truncate
) -> None:
    epoch, end = leader_answer
    assert truncation_for(epoch, end, follower_epochs, leo, hw) == expected


def test_malformed_answers_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="invalid"):
        truncation_for(1, -5, [E(1, 0)], 10, 0)
    with pytest.raises(InvalidRequestError, match="invalid"):
        truncation_for(-3, 5, [E(1, 0)], 10, 0)


def test_follower_high_watermark() -> None:
    assert follower_high_watermark(100, 80) == 80
    assert follower_high_watermark(60, 80) == 60


# --- fetch errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (OFFSET_OUT_OF_RANGE, ResolveOutOfRange()),
        (OFFSET_MOVED_TO_TIERED_STORAGE, ResolveOutOfRange()),
        (FENCED_LEADER_EPOCH, True),
        (NOT_LEADER_OR_FOLLOWER, True),
        (UNKNOWN_TOPIC_OR_PARTITION, True),
        (LEADER_NOT_AVAILABLE, True),
        (KAFKA_STORAGE_ERROR, True),
        (UNKNOWN_LEADER_EPOCH, False),
        (REQUEST_TIMED_OUT, False),
        (CORRUPT_MESSAGE, False),
    ],
)
def test_fetch_error_action(code: int, expected: object) -> None:
    action = fetch_error_action(code)
    if isinstance(expected, bool):
        assert isinstance(action, Backoff) and action.refresh_metadata is expected
    else:
        assert action == expected


def test_no_error_is_not_an_error() -> None:
    with pytest.raises(InvalidRequestError):
        fetch_error_action(0)


@pytest.mark.parametrize(
    ("follower_leo", "leader_leo", "leader_start", "leader_local", "expected"),
    [
        # Unclean election: the new leader's log is shorter than ours.
        (120, 100, 0, None, Truncate(100)),
        # Retention removed what we miss: start over at the leader's log start.
        (30, 500, 200, None, TruncateFully(200, 200)),
        # The leader's range moved while we asked: fetch again.
        (300, 500, 200, None, FetchFrom(300)),
        (500, 500, 200, None, FetchFrom(500)),
        # Tiered: below the leader's first local offset, restart there; the rest is remote.
        (250, 500, 200, 400, TruncateFully(400, 200)),
        (30, 500, 200, 400, TruncateFully(400, 200)),
        (450, 500, 200, 400, FetchFrom(450)),
    ],
)
def test_on_offset_out_of_range(
    follower_leo: int, leader_leo: int, leader_start: int, leader_local: int | None, expected: object
) -> None:
    assert on_offset_out_of_range(follower_leo, leader_leo, leader_start, leader_local) == expected


@pytest.mark.parametrize(
    "args",
    [(-1, 10, 0, None), (5, 10, 20, None), (5, 10, 2, 1), (5, 10, 2, 11)],
)
def test_on_offset_out_of_range_refuses_nonsense(args: tuple[int, int, int, int | None]) -> None:
    with pytest.raises(InvalidRequestError):
        on_offset_out_of_range(*args)


# --- a randomized cluster: followers always end up with a prefix of their leader's log ---------------


class Replica:
    """An in-memory replica log: (epoch, payload) per offset plus its epoch cache."""

    def __init__(self) -> None:
        self.records: list[tuple[int, str]] = []
        self.epochs = LeaderEpochCache(None)
        self.hw = 0

    @property
    def leo(self) -> int:
        return len(self.records)

    def become_leader(self, epoch: int) -> None:
        self.epochs.assign(epoch, self.leo)

    def write(self, epoch: int, n: int) -> None:
        for _ in range(n):
            self.records.append((epoch, f"{epoch}@{self.leo}"))

    def truncate(self, offset: int) -> None:
        del self.records[offset:]
        self.epochs.truncate_from_end(offset)
        self.hw = min(self.hw, offset)

    def append_from(self, leader: Replica, upto: int) -> None:
        for epoch, payload in leader.records[self.leo : upto]:
            if epoch != self.epochs.latest_epoch:
                self.epochs.assign(epoch, self.leo)
            self.records.append((epoch, payload))


def reconcile(follower: Replica, leader: Replica) -> int:
    """Run the follower's truncation rule against ``leader``; returns the rounds it took."""
    for rounds in range(1, 50):
        asked = epoch_to_request(follower.epochs.latest_epoch)
        if asked is None:
            step = truncation_without_epochs(follower.hw, follower.leo)
        else:
            epoch, end = leader.epochs.end_offset_for(asked, leader.leo)
            step = truncation_for(epoch, end, follower.epochs.entries(), follower.leo, follower.hw)
        assert step.offset <= follower.leo
        follower.truncate(step.offset)
        if step.complete:
            return rounds
    raise AssertionError("truncation did not converge")


# (operation, replica, count): write ``count`` records on the leader; sync ``replica``
# (truncation rule, then fetch up to ``count`` records); crash ``replica`` losing its last
# ``count`` records; elect ``replica`` (clean or not: any replica may win).
HISTORY = st.lists(
    st.tuples(st.sampled_from(["write", "sync", "crash", "elect"]), st.integers(0, 2), st.integers(0, 8)),
    min_size=10,
    max_size=60,
)


@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=400,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(history=HISTORY)
def test_followers_converge_to_a_prefix_of_the_leader(history: list[tuple[str, int, int]]) -> None:
    """Elections may be unclean (any replica), crashes drop any unflushed tail and end the
    crashed leader's epoch, syncs copy part of what is missing. Whatever happened, after
    the truncation rule a follower's log is a prefix of the leader's, and after a full
    fetch the two are identical."""
    replicas = [Replica(), Replica(), Replica()]
    current, epoch = 0, 0
    replicas[0].become_leader(0)
    for op, who, n in history:
        lead = replicas[current]
        if op == "write":
            lead.write(epoch, n + 1)
        elif op == "sync" and who != current:
            f = replicas[who]
            reconcile(f, lead)
            assert lead.records[: f.leo] == f.records
            f.append_from(lead, min(lead.leo, f.leo + n))
            f.hw = min(lead.hw, f.leo)
        elif op == "crash":
            r = replicas[who]
            r.truncate(max(0, r.leo - n))  # unflushed data lost
            if who == current:  # its epoch ends with it
                epoch += 1
                replicas[current].become_leader(epoch)
        elif op == "elect" and who != current:
            epoch += 1
            current = who
            replicas[current].become_leader(epoch)
    lead = replicas[current]
    for i, f in enumerate(replicas):
        if i != current:
            reconcile(f, lead)
            assert lead.records[: f.leo] == f.records
            f.append_from(lead, lead.leo)
            assert f.records == lead.records
            assert [e for e in f.epochs.entries() if e.start_offset < f.leo] == [
                e for e in lead.epochs.entries() if e.start_offset < lead.leo
            ]
