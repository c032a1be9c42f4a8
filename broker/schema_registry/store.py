"""The registry's storage: the ``_schemas`` topic (one partition, compacted, replicated,
Confluent's record layout: ``records``) on the coordinator runtime
(broker.coordinator_runtime): the leader of ``_schemas-0`` is the registry's one writer.
It loads the partition when it becomes leader (a replay into two states: log order with
writes in flight, and acknowledged) and appends every write with acks=all, so an id is
given once and stays what it is across restarts, failovers and ``strata restore``; the
leader is elected through the metadata store like every partition's.

A copy of the live records goes to the object store after every acknowledged write
(``BACKUP_KEY``, a JSON list of the records, replaced each time): ``_schemas`` is never
tiered (a coordinator replays its log from local disk), so this copy is what brings the
registry back after ``strata restore``. A leader that loads an empty ``_schemas`` (log end
offset 0: nothing was ever written to it in this cluster) first appends the copy's
records, before answering anything, so every id means what it meant before.

Every broker serves the API; one that does not lead ``_schemas-0`` asks the leader
(``NotHere`` carries its id; the REST layer relays the request, ``forward`` here does it
for the broker's own lookups). Writes on the leader run one at a time (``_write_lock``):
the schemas are parsed off the event loop first (protoc runs as a subprocess), then the
records are computed from the log-order state and appended without another await, so no
two writes see the same next id."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from broker.coordinator_runtime.runtime import CoordinatorLog
from broker.coordinator_runtime.shard import CoordinatorShard, Naming, StateTopic
from broker.schema_registry.errors import RegistryError, forward_failed, store_timeout, store_unavailable
from broker.schema_registry.state import RegistryState
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    ObjectNotFoundError,
    StrataError,
)

if TYPE_CHECKING:
    from broker.partition_replica import PartitionReplica
    from broker.replica_manager import ReplicaManager
    from tiering.store import ObjectStore

log = logging.getLogger("strata.schema_registry")

TOPIC: Final = "_schemas"
KEY: Final = ""  # every key of the one partition
WAIT_LEADER_S: Final = 15.0
FORWARD_TIMEOUT_S: Final = 10.0
FORWARDED: Final = "X-Strata-Forwarded"
# The registry's routes on every broker's HTTP listener (where forwarded requests go).
HTTP_PREFIX: Final = "/schema-registry"
# The object store's copy of the live records (outside topics/: restore ignores it).
BACKUP_KEY: Final = "schema-registry/_schemas.json"

Op = tuple[bytes, bytes | None]
T = TypeVar("T")


class NotHere(Exception):
    """The registry's writer is another broker: ask broker ``leader``."""

    def __init__(self, leader: int) -> None:
        super().__init__(f"the schema registry is served by broker {leader}")
        self.leader = leader


class RegistryShard(CoordinatorShard[Op]):
    """``_schemas-0`` led here: the state in log order (``latest``) and acknowledged
    (``durable``, what reads see)."""

    def __init__(self, number: int, rep: PartitionReplica, epoch: int) -> None:
        super().__init__(number, rep, epoch)
        self.latest = RegistryState()
        self.durable = RegistryState()
        self.restore_checked = False  # an empty log looked for the bucket's copy

    def apply_latest(self, op: Op) -> None:
        self.latest.apply(*op)

    def apply_durable(self, op: Op) -> None:
        self.durable.apply(*op)

    def decode(self, key: bytes, value: bytes | None) -> Op:
        return (key, value)

    def record(self, op: Op) -> tuple[bytes, bytes | None]:
        return op

    def dump(self) -> list[Op]:
        return list(self.latest.live_records())

    def live_size(self) -> int:
        return sum(len(k) + len(v) for k, v in self.latest.live_records())

    def count(self) -> int:
        return len(self.latest.subjects_)


def schemas_topic(replication_factor: int = 3, commit_timeout_ms: int = 10_000) -> StateTopic:
    return StateTopic(
        name=TOPIC,
        partitions=1,  # one writer: ids are given in one place
        replication_factor=replication_factor,
        segment_bytes=16 << 20,
        commit_timeout_ms=commit_timeout_ms,
        naming=Naming(
            entities="subjects",
            records="schemas",
            coordinator="schema registry",
            replication_factor_setting="schema registry replication factor (3)",
            task_prefix="schemas",
            watch_task="schemas-leaders",
        ),
    )


class SchemaStore:
    """The registry on one broker (mechanism: module docstring)."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        *,
        ssl_context: ssl.SSLContext | None = None,
        topic: StateTopic | None = None,
        backup: ObjectStore | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.log: CoordinatorLog[Op, RegistryShard] = CoordinatorLog(
            broker_id, replicas, topic or schemas_topic(), RegistryShard, logger=log
        )
        self._write_lock = asyncio.Lock()
        self._ssl = ssl_context
        self._backup = backup
        self._restore_lock = asyncio.Lock()
        self._backup_task: asyncio.Task[None] | None = None
        self._backup_again = False
        self.restored = 0  # records taken from the bucket's copy (tests, logs)
        self.writes = 0  # records appended (metrics)
        self.requests: dict[tuple[str, int], int] = {}  # (route template, status) -> answered (metrics)
        self.validation_refused = 0  # batches refused by broker-side validation (metrics)

    def start(self) -> None:
        self.log.start()

    def close(self) -> None:
        self.log.close()
        if self._backup_task is not None:
            self._backup_task.cancel()

    async def flush_backup(self) -> None:
        """Wait for the copy being written (shutdown)."""
        task = self._backup_task
        if task is not None and not task.done():
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), timeout=10)

    # --- where the registry is -------------------------------------------------------------------

    async def shard(self) -> RegistryShard:
        """The loaded ``_schemas-0`` when this broker leads it; NotHere(leader) when
        another does; the topic is created on first use. Waits up to ``WAIT_LEADER_S``
        for a leader or a load; 50001 then."""
        deadline = time.monotonic() + WAIT_LEADER_S
        while True:
            try:
                if self.log.partition_count() is None:
                    await self.log.ensure_topic()
                shard = self.log.shard_for(KEY)
                if shard is not None:
                    if not shard.restore_checked:
                        await self._restore_if_empty(shard)
                    return shard
                node = self.log.coordinator_for(KEY)
                if node != self.broker_id:
                    raise NotHere(node)
                error = "loading"
            except (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError) as exc:
                error = str(exc)
            except StrataError as exc:
                raise store_unavailable(str(exc)) from None
            if time.monotonic() >= deadline:
                raise store_unavailable(f"{TOPIC} has no loaded leader: {error}")
            await asyncio.sleep(0.05)

    # --- the object store's copy ---------------------------------------------------------------

    async def _restore_if_empty(self, shard: RegistryShard) -> None:
        """Before a newly loaded partition answers: append the bucket's copy when the log
        was never written (module docstring)."""
        async with self._restore_lock:
            if shard.restore_checked:
                return
            if self._backup is not None and shard.rep.log.log_end_offset == 0:
                records = await self._read_backup()
                if records:
                    try:
                        await self.log.append(shard, records)
                    except (StrataError, TimeoutError) as exc:
                        raise store_unavailable(
                            f"cannot restore {TOPIC} from the object store: {exc}"
                        ) from None
                    self.restored += len(records)
                    log.info("%s: restored %d records from the object store's copy", TOPIC, len(records))
            shard.restore_checked = True

    async def _read_backup(self) -> list[Op]:
        assert self._backup is not None
        try:
            raw = await self._backup.get(BACKUP_KEY)
        except ObjectNotFoundError:
            return []
        except StrataError as exc:
            raise store_unavailable(f"cannot read the object store's copy of {TOPIC}: {exc}") from None
        try:
            doc = json.loads(raw)
            return [(k.encode(), v.encode() if v is not None else None) for k, v in doc["records"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise store_unavailable(f"the object store's copy of {TOPIC} does not parse: {exc}") from None

    def _schedule_backup(self, shard: RegistryShard) -> None:
        """Write the copy after an acknowledged write (one upload at a time; writes during
        it make one more)."""
        if self._backup is None:
            return
        if self._backup_task is not None and not self._backup_task.done():
            self._backup_again = True
            return
        self._backup_task = asyncio.get_running_loop().create_task(self._upload(shard), name="schemas-backup")

    async def _upload(self, shard: RegistryShard) -> None:
        assert self._backup is not None
        while True:
            self._backup_again = False
            records = [[k.decode(), v.decode()] for k, v in shard.durable.live_records()]
            data = json.dumps({"topic": TOPIC, "records": records}, separators=(",", ":")).encode()
            try:
                await self._backup.put(BACKUP_KEY, data)
            except StrataError as exc:
                log.warning(
                    "%s: cannot write the object store's copy (next write tries again): %s", TOPIC, exc
                )
                return
            if not self._backup_again:
                return

    # --- operations ------------------------------------------------------------------------------

    async def read(
        self, fn: Callable[[RegistryState], T], warm: Callable[[RegistryState], None] | None = None
    ) -> T:
        """``fn`` of the acknowledged state (on the leader)."""
        shard = await self.shard()
        if warm is not None:
            await asyncio.to_thread(_warm_quietly, warm, shard.durable)
        return fn(shard.durable)

    async def write(
        self,
        fn: Callable[[RegistryState], tuple[T, list[Op]]],
        warm: Callable[[RegistryState], None] | None = None,
    ) -> T:
        """``fn`` of the log-order state gives (answer, records); the records are appended
        and acknowledged before the answer is returned."""
        async with self._write_lock:
            shard = await self.shard()
            if warm is not None:
                await asyncio.to_thread(_warm_quietly, warm, shard.latest)
                shard = await self.shard()
            result, records = fn(shard.latest)
            if records:
                try:
                    await self.log.append(shard, records)
                except TimeoutError as exc:
                    raise store_timeout(str(exc)) from None
                except StrataError as exc:
                    raise store_unavailable(str(exc)) from None
                self.writes += len(records)
                self._schedule_backup(shard)
            return result

    # --- asking the leader -------------------------------------------------------------------------

    def leader_address(self, leader: int) -> tuple[str, int]:
        live = self.replicas.view.brokers.get(leader)
        if live is None:
            raise forward_failed(f"broker {leader} is not registered")
        reg = live.registration
        return reg.host, reg.http_port

    async def forward(
        self,
        leader: int,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """``method path`` (a registry path, with its query) answered by broker
        ``leader``'s HTTP listener under ``HTTP_PREFIX``: (status, body)."""
        host, port = self.leader_address(leader)
        scheme = "https" if self._ssl is not None else "http"
        url = f"{scheme}://{host}:{port}{HTTP_PREFIX}{path}"
        hdrs = {FORWARDED: "1", "Accept": "application/vnd.schemaregistry.v1+json", **(headers or {})}
        if body is not None:
            hdrs.setdefault("Content-Type", "application/vnd.schemaregistry.v1+json")
        ctx = self._ssl

        def call() -> tuple[int, bytes]:
            req = urllib.request.Request(url, data=body, method=method, headers=hdrs)
            try:
                with urllib.request.urlopen(req, timeout=FORWARD_TIMEOUT_S, context=ctx) as resp:
                    return resp.status, resp.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()
            except (OSError, ValueError) as e:
                raise forward_failed(f"broker {leader} at {host}:{port}: {getattr(e, 'reason', e)}") from None

        return await asyncio.to_thread(call)

    async def forward_json(self, leader: int, path: str) -> Any:
        """A GET answered by the leader, as JSON; its error raised as a RegistryError."""
        status, data = await self.forward(leader, "GET", path)
        try:
            doc = json.loads(data)
        except ValueError:
            raise forward_failed(f"broker {leader} answered HTTP {status} without JSON") from None
        if status != 200:
            code = doc.get("error_code", status * 100) if isinstance(doc, dict) else status * 100
            message = doc.get("message", "") if isinstance(doc, dict) else ""
            raise RegistryError(status, int(code), str(message))
        return doc


def _warm_quietly(warm: Callable[[RegistryState], None], state: RegistryState) -> None:
    """Parse ahead off the loop; the loop may change the state meanwhile (a dict changed
    during iteration): whatever was not parsed here is parsed on the loop."""
    try:
        warm(state)
    except (RuntimeError, RegistryError):
        pass
