"""One node's data dir shared by its broker processes, and where each partition lives in it.

A node of N processes (``strata serve --processes N``, api.supervisor) is N brokers of one
cluster on one machine. Each process is a broker with a data dir of its own, inside the
node's::

    <data_dir>/                      process 1: broker id B (the configured one), the
                                     single process's data dir unchanged (logs/, meta/)
    <data_dir>/meta/                 also the node's metadata store (broker.embedded_store),
                                     opened by the supervisor, served to the processes
    <data_dir>/meta/node.json        {"machine": ..., "processes": N} of the last start
    <data_dir>/processes/<k>/        process k (k >= 2): its own logs/ and meta/ (topic
                                     registry, high-watermark checkpoint, producer ids)
    <data_dir>/processes/<k>/meta/broker.id
                                     process k's broker id, assigned once through the
                                     store's counter (above 1000, Kafka's reserved range)
                                     and kept: the same process slot is the same broker

A partition's directory is in the data dir of the process that holds its replica; the
store's replica lists name that process's broker id. Process directories above N stay
when N shrinks (their broker ids are kept for a later larger N); only their partitions
move.

Rehoming (``rehome``), by the supervisor before any process starts:

1. scan every process data dir (``processes/<k>`` for every k, also above N) for the
   partition directories of the store's topics (same topic id in ``partition.metadata``);
2. plan (``plan_homes``, pure): a partition stays in its process if that process is one
   of the N; otherwise, and to even out the load after N grew, it goes to the process
   with the fewest partitions;
3. move: register the topic in the target's registry (same id, partition count and
   overrides), carry the partition's high-watermark checkpoint entry, and rename its
   directory into the target's ``logs/`` (one rename on one filesystem: nothing is
   copied, nothing can exist twice). A source process that did not shut down cleanly
   makes the target's next open recover every log (its clean-shutdown marker is removed);
4. the store: replica lists, ISRs and leaders naming a process of this node are rewritten
   to the process that now holds the directory, leader epoch bumped, in one transaction
   per topic (compare-and-swap: a live cluster's controller may write concurrently).

Crash behaviour: where the directory is on disk is the truth, the store is made to match
at every start. A crash between 3 and 4 leaves the directory in its new place and the
store naming the old process; the next start's scan finds it there and writes the store.
A partition found in two process dirs (never made by this code; an operator's copy)
keeps the non-empty one if only one holds data, else the start stops naming both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from broker.hw_checkpoint import HighWatermarkCheckpoint
from broker.metadata import MetadataClient, PartitionState, TopicAssignment
from broker.metadata_store import Compare, Put
from hot.errors import InvalidConfigError, MetadataStoreError, StorageError
from hot.log import atomic_write, fsync_dir
from hot.manager import CLEAN_SHUTDOWN_FILE, LOCK_FILE, stored_topic_id
from hot.naming import parse_partition_dir
from hot.topics import TOPICS_FILE, TopicRegistry

log = logging.getLogger("strata.node")

PROCESSES_DIR: Final = "processes"
BROKER_ID_FILE: Final = "broker.id"
NODE_FILE: Final = "node.json"
MAX_PROCESSES: Final = 256
LOCK_WAIT_S: Final = 15.0

TopicPartition = tuple[str, int]


def machine_name(data_dir: Path) -> str:
    """The node's machine in registrations: its host and data dir (two nodes on one host,
    as in tests, are distinct machines; their processes are not)."""
    return f"{socket.gethostname()}:{data_dir.resolve()}"


@dataclass(frozen=True)
class NodeLayout:
    """Where process k (1-based) of the node on ``data_dir`` keeps its data."""

    data_dir: Path

    def process_dir(self, k: int) -> Path:
        if k < 1:
            raise ValueError(f"process numbers start at 1, got {k}")
        return self.data_dir if k == 1 else self.data_dir / PROCESSES_DIR / str(k)

    def existing_processes(self) -> list[int]:
        """Process numbers with a data dir: 1 and every ``processes/<k>``."""
        found = [1]
        try:
            names = os.listdir(self.data_dir / PROCESSES_DIR)
        except FileNotFoundError:
            return found
        found += sorted(int(n) for n in names if n.isdigit() and int(n) >= 2)
        return found

    def broker_id_file(self, k: int) -> Path:
        return self.process_dir(k) / "meta" / BROKER_ID_FILE

    def stored_broker_id(self, k: int) -> int | None:
        try:
            text = self.broker_id_file(k).read_text("ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read {self.broker_id_file(k)}: {exc}") from exc
        if not text.isdigit():
            raise StorageError(f"{self.broker_id_file(k)} holds {text!r}, not a broker id")
        return int(text)

    def keep_broker_id(self, k: int, broker_id: int) -> None:
        path = self.broker_id_file(k)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, f"{broker_id}\n".encode())

    def write_node_file(self, processes: int) -> None:
        path = self.data_dir / "meta" / NODE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"machine": machine_name(self.data_dir), "processes": processes}
        atomic_write(path, json.dumps(doc).encode())


# --- the plan (pure) ------------------------------------------------------------------------------


def plan_homes(where: Mapping[TopicPartition, int | None], processes: int) -> dict[TopicPartition, int]:
    """The process (1..``processes``) of every partition of ``where`` (partition -> the
    process whose dir holds it, None: no directory yet), topic by topic, so that each
    topic's load spreads over every process. A partition stays where it is when that
    process is one of the N; the rest go to the process with the fewest of the topic's
    partitions (ties: the fewest of all); then, while one process holds two more of a
    topic's partitions than another, one moves from the fullest to the emptiest
    (directory-less ones first: nothing to rename). Deterministic: sorted order."""
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    procs = range(1, processes + 1)
    total = dict.fromkeys(procs, 0)
    home: dict[TopicPartition, int] = {}
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in sorted(where):
        by_topic.setdefault(tp[0], []).append(tp)
    for topic in sorted(by_topic):
        load = dict.fromkeys(procs, 0)
        homeless: list[TopicPartition] = []
        for tp in by_topic[topic]:
            k = where[tp]
            if k is not None and 1 <= k <= processes:
                home[tp] = k
                load[k] += 1
                total[k] += 1
            else:
                homeless.append(tp)
        for tp in homeless:
            k = min(procs, key=lambda i: (load[i], total[i], i))
            home[tp] = k
            load[k] += 1
            total[k] += 1
        while True:
            full = max(procs, key=lambda i: (load[i], total[i], -i))
            empty = min(procs, key=lambda i: (load[i], total[i], i))
            if load[full] - load[empty] <= 1:
                break
            mine = [tp for tp in by_topic[topic] if home[tp] == full]
            tp = min(mine, key=lambda t: (where.get(t) is not None, t))
            home[tp] = empty
            for counts in (load, total):
                counts[full] -= 1
                counts[empty] += 1
    return home


# --- the disk ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    process: int
    path: Path
    empty: bool


def _holds_data(path: Path) -> bool:
    try:
        return any(e.name.endswith(".log") and e.stat().st_size > 0 for e in os.scandir(path))
    except OSError:
        return True  # unreadable: never treated as an empty copy to drop


def scan(layout: NodeLayout, topics: Mapping[str, TopicAssignment]) -> dict[TopicPartition, list[Found]]:
    """Every directory of a partition of ``topics`` (same topic id) in any process dir."""
    out: dict[TopicPartition, list[Found]] = {}
    for k in layout.existing_processes():
        logs = layout.process_dir(k) / "logs"
        try:
            names = sorted(os.listdir(logs))
        except FileNotFoundError:
            continue
        for name in names:
            parsed = parse_partition_dir(name)
            if parsed is None or parsed[0] not in topics:
                continue
            a = topics[parsed[0]]
            if parsed[1] >= a.partition_count:
                continue
            path = logs / name
            if not path.is_dir() or stored_topic_id(path) not in (None, uuid.UUID(a.topic_id)):
                continue  # a stale directory: its own process removes it at open
            out.setdefault(parsed, []).append(Found(k, path, not _holds_data(path)))
    return out


def _one_home(tp: TopicPartition, found: list[Found]) -> Found:
    if len(found) == 1:
        return found[0]
    full = [f for f in found if not f.empty]
    if len(full) > 1:
        raise StorageError(
            f"partition {tp[0]}-{tp[1]} has data in {len(full)} process directories "
            f"({', '.join(str(f.path) for f in full)}); keep one of them and restart"
        )
    keep = full[0] if full else found[0]
    for f in found:
        if f is not keep:
            log.warning("removing the empty copy %s of %s-%d (kept %s)", f.path, tp[0], tp[1], keep.path)
            _remove_tree(f.path)
    return keep


def _remove_tree(path: Path) -> None:
    import shutil

    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise StorageError(f"cannot remove {path}: {exc}") from exc


class _DirLocks:
    """The process data dirs' ``.lock`` (hot.manager) while partitions move between them:
    a process of a previous run still alive (its supervisor was killed a moment ago) is
    waited for, never moved under."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def take(self, data_dir: Path, deadline: float) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise StorageError(
                        f"{data_dir} is in use by another Strata broker (lock {path} is held)"
                    ) from None
                time.sleep(0.1)
        self._fds.append(fd)

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def _move(layout: NodeLayout, tp: TopicPartition, src: Found, dst: int) -> Path:
    topic, partition = tp
    src_dir = layout.process_dir(src.process)
    dst_dir = layout.process_dir(dst)
    (dst_dir / "logs").mkdir(parents=True, exist_ok=True)
    (dst_dir / "meta").mkdir(parents=True, exist_ok=True)
    info = TopicRegistry(src_dir / "meta" / TOPICS_FILE).get(topic)
    if info is None:
        raise StorageError(f"{src.path} has no topic {topic!r} in {src_dir / 'meta' / TOPICS_FILE}")
    target = TopicRegistry(dst_dir / "meta" / TOPICS_FILE)
    have = target.get(topic)
    if have is not None and have.topic_id != info.topic_id:
        target.delete(topic)  # an older topic of that name: its directories are stale
        have = None
    if have is None:
        target.create(topic, info.partitions, info.configs, topic_id=info.topic_id)
    elif have.partitions < info.partitions:
        target.add_partitions(topic, info.partitions)
    if not (src_dir / "logs" / CLEAN_SHUTDOWN_FILE).exists():
        # The log was not closed cleanly: wherever it opens next, it is recovered.
        with contextlib.suppress(FileNotFoundError):
            (dst_dir / "logs" / CLEAN_SHUTDOWN_FILE).unlink()
            fsync_dir(dst_dir / "logs")
    src_hw = HighWatermarkCheckpoint(src_dir / "meta")
    dst_hw = HighWatermarkCheckpoint(dst_dir / "meta")
    hw = src_hw.read().get(tp)
    if hw is not None:
        dst_hw.write({**dst_hw.read(), tp: hw})
    new_path = dst_dir / "logs" / src.path.name
    try:
        os.rename(src.path, new_path)
    except OSError as exc:
        raise StorageError(f"cannot move {src.path} to {new_path}: {exc}") from exc
    fsync_dir(dst_dir / "logs")
    fsync_dir(src.path.parent)
    log.info("moved %s-%d from process %d to process %d", topic, partition, src.process, dst)
    return new_path


# --- the store --------------------------------------------------------------------------------------


def _rewrite_state(state: PartitionState, mapping: Mapping[int, int]) -> PartitionState:
    if not any(b in mapping for b in (state.leader, *state.isr)):
        return state
    isr = tuple(mapping.get(b, b) for b in state.isr)
    leader = mapping.get(state.leader, state.leader)
    # A new leader is a new epoch (the old process's writes are fenced); a renamed
    # follower is only a new partition epoch (set by the caller).
    epoch = state.leader_epoch + (leader != state.leader)
    return dataclasses.replace(state, leader=leader, isr=isr, leader_epoch=epoch)


async def _rewrite_topic(client: MetadataClient, name: str, mapping: Mapping[int, Mapping[int, int]]) -> bool:
    """Partition p's replicas (and reassignment lists, ISR, leader) renamed by
    ``mapping[p]`` (old broker id -> new): the topic and as many states as one transaction
    takes (``max_txn_ops``), then the other states, each compared on its revision. A crash
    in between is finished by the next start (the mapping is recomputed from the disk).
    False on a conflict (the caller retries on a fresh view)."""
    va = client.view.topics.get(name)
    if va is None:
        return True  # deleted meanwhile: nothing to name
    a = va.value
    parts = list(a.partitions)
    adding, removing = dict(a.adding), dict(a.removing)
    for p, m in mapping.items():
        parts[p] = tuple(m.get(b, b) for b in parts[p])
        if p in adding:
            adding[p] = tuple(m.get(b, b) for b in adding[p])
        if p in removing:
            removing[p] = tuple(m.get(b, b) for b in removing[p])
    writes: list[tuple[Compare, Put]] = []
    new = dataclasses.replace(a, partitions=tuple(parts), adding=adding, removing=removing)
    if new != a:
        topic_key = client.layout.topic(name)
        writes.append((Compare.mod_revision(topic_key, va.mod_revision), Put(topic_key, new.to_json())))
    for p, m in sorted(mapping.items()):
        vs = client.view.partitions.get((name, p))
        if vs is None:
            continue
        state = _rewrite_state(vs.value, m)
        if state != vs.value:
            key = client.layout.partition_state(name, p)
            state = dataclasses.replace(state, partition_epoch=vs.value.partition_epoch + 1)
            writes.append((Compare.mod_revision(key, vs.mod_revision), Put(key, state.to_json())))
    step = max(1, client.max_txn_ops // 2)
    for i in range(0, len(writes), step):
        chunk = writes[i : i + step]
        res = await client.etcd.txn([c for c, _ in chunk], [w for _, w in chunk])
        if not res.succeeded:
            return False
        await client.view.wait_for_revision(res.revision, 10.0)
    return True


# --- the whole step -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rehomed:
    moved: int  # directories renamed into another process
    rewritten: int  # partitions whose replica list now names another process


async def rehome(
    client: MetadataClient,
    layout: NodeLayout,
    broker_ids: Sequence[int],
    *,
    all_node_ids: Sequence[int] = (),
) -> Rehomed:
    """Steps 1-4 of the module docstring, for processes 1..len(``broker_ids``) (process
    k is broker ``broker_ids[k-1]``). ``all_node_ids``: every broker id this node's process
    slots ever had (``processes/<k>/meta/broker.id`` above N too); a replica naming one of
    them is this node's. Run while none of the node's processes runs."""
    n = len(broker_ids)
    if not 1 <= n <= MAX_PROCESSES:
        raise InvalidConfigError(f"processes must be in [1, {MAX_PROCESSES}], got {n}")
    ours = set(broker_ids) | set(all_node_ids)
    locks = _DirLocks()
    deadline = time.monotonic() + LOCK_WAIT_S
    try:
        for k in sorted({*layout.existing_processes(), *range(1, n + 1)}):
            locks.take(layout.process_dir(k), deadline)
        topics = {name: va.value for name, va in client.view.topics.items()}
        found = scan(layout, topics)
        where: dict[TopicPartition, int | None] = {}
        for name, a in topics.items():
            for p, replicas in enumerate(a.partitions):
                mine = [b for b in replicas if b in ours]
                if not mine:
                    continue  # not this node's (a directory left here: its process drops it)
                if len(mine) > 1:
                    raise MetadataStoreError(
                        f"{name}-{p} has replicas {list(replicas)} on two processes of this node"
                    )
                where[(name, p)] = None
        placed: dict[TopicPartition, Found] = {}
        for tp in where:
            if tp in found:
                placed[tp] = _one_home(tp, found[tp])
                where[tp] = placed[tp].process
        homes = plan_homes(where, n)
        moved = 0
        for tp, k in sorted(homes.items()):
            src = placed.get(tp)
            if src is not None and src.process != k:
                _move(layout, tp, src, k)
                moved += 1
        # The store names the process that holds each directory: any of this node's ids
        # in a partition's replicas, ISR or leader becomes its home's.
        per_topic: dict[str, dict[int, dict[int, int]]] = {}
        for tp, k in homes.items():
            want = broker_ids[k - 1]
            a = topics[tp[0]]
            state = client.view.partitions.get(tp)
            named_ids = {*a.partitions[tp[1]], *a.adding.get(tp[1], ()), *a.removing.get(tp[1], ())}
            if state is not None:
                named_ids |= {state.value.leader, *state.value.isr}
            m = {b: want for b in named_ids & ours if b != want}
            if m:
                per_topic.setdefault(tp[0], {})[tp[1]] = m
        rewritten = 0
        for name, per_partition in sorted(per_topic.items()):
            for _ in range(10):
                if await _rewrite_topic(client, name, per_partition):
                    break
                await client.view.wait_changed(client.view.seq, 1.0)
            else:
                raise MetadataStoreError(f"topic {name} kept changing; its replicas were not renamed")
            rewritten += len(per_partition)
        return Rehomed(moved, rewritten)
    finally:
        locks.release()


async def rehome_into_one(client: MetadataClient, data_dir: Path, broker_id: int) -> Rehomed:
    """A single process on a data dir a node of several processes left: every partition
    comes home to it (no-op when the data dir never had other processes)."""
    layout = NodeLayout(data_dir)
    slots = layout.existing_processes()
    if slots == [1]:
        return Rehomed(0, 0)
    others = [b for k in slots[1:] if (b := layout.stored_broker_id(k)) is not None]
    return await rehome(client, layout, [broker_id], all_node_ids=[broker_id, *others])
