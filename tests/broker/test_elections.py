"""The pure decisions of operator leader elections (broker.elections, KIP-460)."""

from __future__ import annotations

import pytest

from broker.elections import preferred, unclean
from broker.metadata import NO_LEADER, PartitionState
from hot.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    PreferredLeaderNotAvailableError,
)

REPLICAS = (1, 2, 3)


def state(leader: int, isr: tuple[int, ...], epoch: int = 4) -> PartitionState:
    return PartitionState(leader, epoch, isr, 7, 9)


def test_preferred() -> None:
    new = preferred(state(2, (1, 2, 3)), REPLICAS, {1, 2, 3})
    assert (new.leader, new.leader_epoch, new.isr) == (1, 5, (1, 2, 3))
    with pytest.raises(ElectionNotNeededError):
        preferred(state(1, (1, 2, 3)), REPLICAS, {1, 2, 3})
    with pytest.raises(PreferredLeaderNotAvailableError, match="in sync"):
        preferred(state(2, (2, 3)), REPLICAS, {1, 2, 3})
    with pytest.raises(PreferredLeaderNotAvailableError, match="alive"):
        preferred(state(2, (1, 2, 3)), REPLICAS, {2, 3})


def test_unclean() -> None:
    with pytest.raises(ElectionNotNeededError):
        unclean(state(2, (2, 3)), REPLICAS, {1, 2, 3})
    clean = unclean(state(NO_LEADER, (2, 3)), REPLICAS, {1, 3})
    assert (clean.leader, clean.leader_epoch, clean.isr) == (3, 5, (3,))  # an in-sync replica first
    dirty = unclean(state(NO_LEADER, (2,)), REPLICAS, {1, 3})
    assert (dirty.leader, dirty.isr) == (1, (1,))  # any live replica, alone in the ISR
    with pytest.raises(EligibleLeadersNotAvailableError):
        unclean(state(NO_LEADER, (2,)), REPLICAS, set())
