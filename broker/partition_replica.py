"""This broker's replica of one partition: its role, leader and epoch, and the waiters
parked on it (acks, flushes, replica fetches, DeleteRecords). Owned by
``broker.replica_manager``; read by the fetchers, the produce and read paths, and the
coordinators' runtime. Event loop only.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from broker.metadata import NO_LEADER
from broker.replication.leader_state import LeaderState
from hot.log import Log


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"  # no leader, or leadership not (yet) taken in this incarnation


_Waiter = tuple[int, int, "asyncio.Future[None]"]


@dataclass(eq=False)
class PartitionReplica:
    """This broker's replica of one partition (event loop only)."""

    topic: str
    partition: int
    log: Log
    role: Role = Role.NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    leader: LeaderState | None = None
    # acks=all waiters: (last offset + 1, seq, future), completed when the HW reaches it.
    ack_waiters: list[_Waiter] = field(default_factory=list)
    # acks=1 waiters in fsync mode: completed when the leader's flush reaches it.
    flush_waiters: list[_Waiter] = field(default_factory=list)
    # DeleteRecords waiting for the followers' log starts: woken by every follower fetch.
    low_watermark_waiters: set[asyncio.Future[None]] = field(default_factory=set)
    isr_writing: bool = False
    # mod_revision of this leader's last ISR write: an older view must not undo it.
    isr_revision: int = 0
    taking_epoch: bool = False
    # A new leader of a tiered partition starts a new segment at its first append: the old
    # leader may have rolled at this log end (tiering.upload_lag) and uploaded up to it
    # without any follower seeing that boundary; appending into the segment below it would
    # straddle the end of the uploaded range, which the uploader cannot continue from.
    roll_before_append: bool = False
    # The open shared waits of this loop iteration (ReplicaManager.ack_round): (future, epoch,
    # timeout) of the acks=all and the fsync-mode acks=1 requests, None once sealed.
    ack_round: tuple[asyncio.Future[None], int, float] | None = None
    flush_round: tuple[asyncio.Future[None], int, float] | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def leader_end_for_hw(self) -> int:
        """What the leader counts as its own log end for the HW: in fsync mode only what
        is flushed, so an acknowledged record is on the leader's disk too."""
        lg = self.log
        return lg.recovery_point if lg.config.fsync_mode else lg.log_end_offset
