"""Consumer-group lag: how far each group's committed offsets trail the partitions' ends.

The lag of one partition is kclient.lag.partition_lag (log end offset = the high
watermark, minus the committed offset; never negative), the same computation the client
does over the wire.

The partitions reported for a group are those with a committed offset plus those assigned
to a live member (protocol type "consumer"); the latter may have no committed offset yet
(lag unknown, reported as None, as Kafka's tools print "-").

Computed on demand from the coordinator (REST, Prometheus scrape): nothing here runs on
the produce or fetch path. Must be called on the event loop that owns the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.groups.types import GroupDescription, GroupListing, MemberDescription, TopicPartition
from hot.errors import CoordinatorNotAvailableError, StrataError
from kclient.lag import partition_lag

if TYPE_CHECKING:
    from broker.groups.coordinator import GroupCoordinator
    from hot.manager import LogManager


class HasGroups(Protocol):
    """A broker (``broker.broker.Broker``), as far as group lag needs it."""

    @property
    def groups(self) -> GroupCoordinator | None: ...


def coordinator_of(broker: HasGroups) -> GroupCoordinator:
    """The broker's group coordinator (``broker.groups``, set by the process wiring);
    CoordinatorNotAvailableError if it runs none."""
    coord = broker.groups
    if coord is None:
        raise CoordinatorNotAvailableError("this broker runs no group coordinator")
    return coord


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int | None  # None: nothing committed for it
    log_end_offset: int | None  # the high watermark; None if the partition is not served here
    lag: int | None
    member_id: str | None = None  # the member it is assigned to, if any
    client_id: str | None = None
    client_host: str | None = None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupLag:
    description: GroupDescription
    partitions: tuple[PartitionLag, ...]

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag is not None)


# (topic, partition) -> high watermark, or None if this node does not serve it.
EndOffsets = Callable[[str, int], int | None]


def manager_end_offsets(manager: LogManager) -> EndOffsets:
    """End offsets (high watermarks) read from the local logs of a LogManager."""

    def end(topic: str, partition: int) -> int | None:
        try:
            return manager.get_log(topic, partition).high_watermark
        except StrataError:
            return None

    return end


def group_lag(coordinator: GroupCoordinator, end_offsets: EndOffsets, group_id: str) -> GroupLag:
    """The lag of one group. GroupIdNotFoundError for an unknown group (and the
    coordinator's errors when it is not serving)."""
    desc = coordinator.describe_group(group_id)
    committed = coordinator.committed_offsets(group_id)
    owners: dict[TopicPartition, MemberDescription] = {}
    for m in desc.members:
        for tp in m.assigned_partitions:
            owners[tp] = m
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        c = committed.get(tp)
        offset = c.offset if c is not None and c.offset >= 0 else None
        end = end_offsets(tp.topic, tp.partition)
        owner = owners.get(tp)
        rows.append(
            PartitionLag(
                topic=tp.topic,
                partition=tp.partition,
                committed_offset=offset,
                log_end_offset=end,
                lag=partition_lag(offset, end),
                member_id=owner.member_id if owner else None,
                client_id=owner.client_id if owner else None,
                client_host=owner.client_host if owner else None,
                group_instance_id=owner.group_instance_id if owner else None,
            )
        )
    return GroupLag(desc, tuple(rows))


def all_group_lags(
    coordinator: GroupCoordinator, end_offsets: EndOffsets, listings: Iterable[GroupListing] | None = None
) -> list[GroupLag]:
    """The lag of every group the coordinator serves (groups that vanish or are not
    coordinated here meanwhile are skipped)."""
    out = []
    for listing in coordinator.list_groups() if listings is None else listings:
        try:
            out.append(group_lag(coordinator, end_offsets, listing.group_id))
        except StrataError:
            continue
    return out
