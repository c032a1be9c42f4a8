"""Helpers for the group coordinator's unit tests: a fake clock and request builders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from broker.groups.config import GroupConfig
from broker.groups.coordinator import GroupCoordinator, PartitionCheck
from broker.groups.offsets import OffsetsLog
from broker.groups.types import (
    GroupProtocol,
    JoinGroupRequest,
    JoinGroupResult,
    MemberIdRequired,
    OffsetCommitRequest,
    SyncGroupRequest,
    SyncGroupResult,
    TopicPartition,
)
from hot.config import LogConfig
from kwire.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)

SESSION_MS = 10_000
REBALANCE_MS = 20_000
DELAY_MS = 100


class FakeClock:
    """Monotonic seconds and wall-clock milliseconds that move only when told."""

    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall_ms = 1_700_000_000_000

    def monotonic(self) -> float:
        return self.mono

    def time_ms(self) -> int:
        return self.wall_ms

    def advance(self, ms: int) -> None:
        self.mono += ms / 1000.0
        self.wall_ms += ms


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(1, tuple(topics)))


def assignment(**topics: Sequence[int]) -> bytes:
    return encode_assignment(Assignment(0, tuple(TopicPartitions(t, tuple(ps)) for t, ps in topics.items())))


def protocols(*names: str, topics: Sequence[str] = ("t",)) -> tuple[GroupProtocol, ...]:
    return tuple(GroupProtocol(n, subscription(*topics)) for n in names)


def jreq(
    group: str = "g",
    member_id: str = "",
    *,
    protos: tuple[GroupProtocol, ...] | None = None,
    instance: str | None = None,
    session: int = SESSION_MS,
    rebalance: int = REBALANCE_MS,
    require_known: bool = True,
    skip: bool = False,
    protocol_type: str = "consumer",
    client_id: str = "c",
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        member_id=member_id,
        protocol_type=protocol_type,
        protocols=protos if protos is not None else protocols("range"),
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        group_instance_id=instance,
        client_id=client_id,
        client_host="/127.0.0.1",
        require_known_member_id=require_known,
        supports_skip_assignment=skip,
    )


class Harness:
    """A coordinator over a real offsets log in a temporary directory, its timers driven
    by a fake clock."""

    def __init__(
        self,
        data_dir: Path,
        config: GroupConfig | None = None,
        *,
        partition_exists: PartitionCheck | None = None,
        clock: FakeClock | None = None,
        log_defaults: LogConfig | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.clock = clock or FakeClock()
        self.config = config or GroupConfig(
            initial_rebalance_delay_ms=DELAY_MS, min_session_timeout_ms=1000, max_session_timeout_ms=60_000
        )
        self.coord = GroupCoordinator(
            self.config,
            lambda: OffsetsLog.open(data_dir, log_defaults, now_ms=self.clock.time_ms),
            partition_exists=partition_exists,
            clock=self.clock,
        )

    async def start(self) -> Harness:
        await self.coord.start(run_timers=False)
        return self

    async def close(self) -> None:
        await self.coord.close()

    async def advance(self, ms: int) -> None:
        """Let started tasks reach their wait, move the clock, fire due timers, let woken
        tasks run."""
        await settle()
        self.clock.advance(ms)
        self.coord.tick()
        await settle()

    async def through_initial_delay(self, *tasks: asyncio.Task[JoinGroupResult]) -> list[JoinGroupResult]:
        """Advance through the initial rebalance delay (which each newcomer extends) until
        the joins complete."""
        for _ in range(100):
            if all(t.done() for t in tasks):
                break
            await self.advance(self.config.initial_rebalance_delay_ms)
        return [await t for t in tasks]

    async def member_id(self, group: str = "g", **kw: object) -> str:
        """KIP-394's first round: the id a new dynamic member is told to rejoin with."""
        with pytest.raises(MemberIdRequired) as info:
            await self.coord.join_group(jreq(group, **kw))  # type: ignore[arg-type]
        return info.value.member_id

    def join(self, group: str = "g", member_id: str = "", **kw: object) -> asyncio.Task[JoinGroupResult]:
        return asyncio.create_task(self.coord.join_group(jreq(group, member_id, **kw)))  # type: ignore[arg-type]

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> asyncio.Task[SyncGroupResult]:
        return asyncio.create_task(
            self.coord.sync_group(
                SyncGroupRequest(
                    group_id=group,
                    generation_id=generation,
                    member_id=member_id,
                    group_instance_id=instance,
                    assignments=tuple((assignments or {}).items()),
                )
            )
        )

    async def stable_group(self, n: int, group: str = "g", **kw: object) -> list[JoinGroupResult]:
        """n dynamic members joined and synced (leader assigns partition i to member i)."""
        ids = [await self.member_id(group, **kw) for _ in range(n)]
        results = await self.through_initial_delay(*(self.join(group, mid, **kw) for mid in ids))
        leader = next(r for r in results if r.is_leader)
        plan = {r.member_id: assignment(t=[i]) for i, r in enumerate(results)}
        syncs = [
            self.sync(group, r.member_id, r.generation_id, plan if r is leader else None) for r in results
        ]
        for s in syncs:
            await s
        return results


async def settle(rounds: int = 10) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def pending(task: asyncio.Task[object]) -> bool:
    return not task.done()


Factory = Callable[..., Harness]


TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def commit(
    group: str, *offsets: tuple[TopicPartition, int], generation: int = -1, member: str = "", **kw: object
) -> OffsetCommitRequest:
    """An OffsetCommit of ``offsets`` (leader epoch 3, metadata "md")."""
    return OffsetCommitRequest(
        group_id=group,
        offsets=tuple((tp, off, 3, "md") for tp, off in offsets),
        generation_id=generation,
        member_id=member,
        **kw,  # type: ignore[arg-type]
    )
