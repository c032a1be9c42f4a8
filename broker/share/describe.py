"""What REST v3 and the console show of a share group: its members with their assignments,
and per share partition the start offset, the records in flight and the lag.

A share partition's figures come from this broker's copy when it serves the partition (the
leader's in-memory window: the freshest), else from the share coordinator's persisted state
(``__share_group_state``), which holds the window as of the last acknowledgement: its
Acquired records are stored Available (KIP-932), so the in-flight count is the same, only
acquisitions since that write are missing. ``in_flight`` is the records of the window not
yet done (Available inside it, or Acquired); ``lag`` is Kafka's share-partition lag
(KIP-1226): the high watermark minus the start offset minus the records already done
(Acknowledged or Archived) inside the window, never negative, null while the end or the
start is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.share.partition import RecordState, SharePartition
from broker.share.service import ShareService
from hot.errors import StrataError

EndOffsets = Callable[[str, int], int | None]  # (topic, partition) -> high watermark

ASSIGNOR = "simple"  # Kafka's share-group assignor, as ShareGroupDescribe names it
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_LIVE = (RecordState.AVAILABLE, RecordState.ACQUIRED)


@dataclass(frozen=True, slots=True)
class ShareMemberView:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupView:
    group_id: str
    state: str  # Kafka's: Empty, Stable
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMemberView, ...]

    @property
    def assigned(self) -> list[tuple[str, int]]:
        """Every topic-partition assigned to a member, each once."""
        return sorted({tp for m in self.members for tp in m.assignment})


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    topic: str
    partition: int
    start_offset: int  # -1: no state yet
    in_flight: int | None
    acquired: int | None  # None: not served here (the persisted state has no acquisitions)
    log_end_offset: int | None
    lag: int | None
    served_here: bool


def describe_group(svc: ShareService, group_id: str) -> ShareGroupView | None:
    """The share group this broker coordinates, None when it has no such group."""
    group = svc.groups.get(group_id)
    if group is None:
        return None
    group.expire_members()
    members = tuple(
        ShareMemberView(
            member_id=m.member_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            rack_id=m.rack_id,
            subscribed=m.subscribed,
            assignment=tuple((t, p) for t, ps in sorted(m.assignment.items()) for p in sorted(ps)),
        )
        for m in sorted(group.members.values(), key=lambda m: m.member_id)
    )
    return ShareGroupView(group_id, group.state, group.group_epoch, group.assignment_epoch, members)


def held_views(svc: ShareService, group_id: str, end_offsets: EndOffsets) -> list[SharePartitionView]:
    """The share partitions of the group this broker holds in memory (those it serves)."""
    out = []
    for (g, topic, partition), sp in sorted(svc.partitions.items()):
        if g == group_id:
            out.append(_from_memory(topic, partition, sp, end_offsets(topic, partition)))
    return out


async def partition_views(
    svc: ShareService, group_id: str, end_offsets: EndOffsets, extra: Iterable[tuple[str, int]] = ()
) -> list[SharePartitionView]:
    """Every share partition of the group known here (its members' subscriptions, the share
    partitions this broker serves, and ``extra``), from memory or the persisted state."""
    held = {(v.topic, v.partition): v for v in held_views(svc, group_id, end_offsets)}
    wanted = sorted(set(svc.group_partitions(group_id)) | set(extra) | set(held))
    out = []
    for topic, partition in wanted:
        view = held.get((topic, partition))
        if view is None:
            view = await _from_store(svc, group_id, topic, partition, end_offsets(topic, partition))
        out.append(view)
    return out


def _from_memory(topic: str, partition: int, sp: SharePartition, end: int | None) -> SharePartitionView:
    sp.expire_locks()
    live = sum(r.size for r in sp.runs if r.state in _LIVE)
    done = sum(r.size for r in sp.runs if r.state in _DONE)
    acquired = sum(r.size for r in sp.runs if r.state is RecordState.ACQUIRED)
    return SharePartitionView(
        topic, partition, sp.start, live, acquired, end, _lag(end, sp.start, done), served_here=True
    )


async def _from_store(
    svc: ShareService, group_id: str, topic: str, partition: int, end: int | None
) -> SharePartitionView:
    tid = svc.topic_id(topic)
    snap = None
    if svc.store is not None and tid is not None:
        try:
            snap = await svc.store.read(group_id, tid, partition)
        except StrataError:  # the share coordinator is loading or unreachable: unknown
            return SharePartitionView(topic, partition, -1, None, None, end, None, served_here=False)
    if snap is None:
        return SharePartitionView(topic, partition, -1, 0, None, end, None, served_here=False)
    live = sum(b.last - b.first + 1 for b in snap.batches if b.last >= snap.start and b.state in _LIVE)
    done = sum(b.last - b.first + 1 for b in snap.batches if b.last >= snap.start and b.state in _DONE)
    return SharePartitionView(
        topic, partition, snap.start, live, None, end, _lag(end, snap.start, done), served_here=False
    )


def _lag(end: int | None, start: int, done: int) -> int | None:
    if end is None or start < 0:
        return None
    return max(0, end - start - done)
