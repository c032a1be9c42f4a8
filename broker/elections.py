"""ElectLeaders (KIP-460): an operator's leader election, as ``kafka-leader-election.sh`` and
admin clients ask for it (the controller's automatic elections are ``broker.controller``).

The decisions are pure (``preferred``, ``unclean``); ``elect`` applies them from whichever
broker got the request with a compare-and-swap on each partition's state in the metadata
store, as a leader writes its ISR (the state's revision is compared, so a concurrent change
by the controller or a leader makes the election fail for that partition instead of being
overwritten). Every broker follows the new state from its watch.

* PREFERRED: the partition's first replica leads, if it is alive and in the ISR
  (PREFERRED_LEADER_NOT_AVAILABLE otherwise); ELECTION_NOT_NEEDED when it already leads.
* UNCLEAN: only for a partition without a leader (ELECTION_NOT_NEEDED otherwise): a live
  ISR member if there is one, else the first live replica with itself as the whole ISR
  (it may lack acknowledged records, which is what the operator asked for);
  ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is alive.

Every new leader bumps the leader epoch, fencing the old one. A partition asked for that
does not exist is UNKNOWN_TOPIC_OR_PARTITION; with no partition named, PREFERRED considers
every partition whose preferred replica does not lead, UNCLEAN every partition without a
leader.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from broker.metadata import NO_LEADER, PartitionState
from hot.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    PreferredLeaderNotAvailableError,
    StrataError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager

PREFERRED = 0
UNCLEAN = 1


def preferred(state: PartitionState, replicas: Sequence[int], live: Collection[int]) -> PartitionState:
    """The state with the preferred replica leading (module docstring)."""
    first = replicas[0]
    if state.leader == first:
        raise ElectionNotNeededError("Leader election not needed for topic partition")
    if first not in live or first not in state.isr:
        raise PreferredLeaderNotAvailableError(
            f"Failed to elect leader for partition: preferred replica {first} is not "
            f"{'in sync' if first in live else 'alive'}"
        )
    return PartitionState(
        first, state.leader_epoch + 1, state.isr, state.controller_epoch, state.partition_epoch
    )


def unclean(state: PartitionState, replicas: Sequence[int], live: Collection[int]) -> PartitionState:
    """The state of an offline partition with a leader again (module docstring)."""
    if state.leader != NO_LEADER:
        raise ElectionNotNeededError("Leader election not needed for topic partition")
    epoch = state.leader_epoch + 1
    clean = [r for r in replicas if r in state.isr and r in live]
    if clean:
        live_isr = tuple(r for r in state.isr if r in live)
        return PartitionState(clean[0], epoch, live_isr, state.controller_epoch, state.partition_epoch)
    alive = [r for r in replicas if r in live]
    if not alive:
        raise EligibleLeadersNotAvailableError("Failed to elect leader for partition: no replica is alive")
    return PartitionState(alive[0], epoch, (alive[0],), state.controller_epoch, state.partition_epoch)


async def elect(
    replicas: ReplicaManager, election_type: int, partitions: Sequence[tuple[str, int]] | None
) -> dict[tuple[str, int], StrataError | None]:
    """Run the election for each partition (all candidates when ``partitions`` is None):
    None where a new leader was written, else the partition's error."""
    view = replicas.view
    live = view.live_broker_ids()
    decide = preferred if election_type == PREFERRED else unclean
    if partitions is None:
        partitions = [
            (topic, p)
            for topic, va in sorted(view.topics.items())
            for p, reps in enumerate(va.value.partitions)
            if (st := view.partition_state(topic, p)) is not None
            and (st.leader != reps[0] if election_type == PREFERRED else st.leader == NO_LEADER)
        ]
    out: dict[tuple[str, int], StrataError | None] = {}
    for topic, p in partitions:
        va = view.topics.get(topic)
        current = view.partitions.get((topic, p))
        if va is None or not 0 <= p < va.value.partition_count or current is None:
            out[(topic, p)] = UnknownTopicOrPartitionError(f"unknown partition {topic}-{p}")
            continue
        try:
            new = decide(current.value, va.value.partitions[p], live)
        except StrataError as exc:
            out[(topic, p)] = exc
            continue
        res = await replicas.client.update_partition_state(topic, p, current, new)
        out[(topic, p)] = (
            None
            if res.ok
            else PreferredLeaderNotAvailableError("the partition's state changed meanwhile: try again")
            if election_type == PREFERRED
            else EligibleLeadersNotAvailableError("the partition's state changed meanwhile: try again")
        )
    return out
