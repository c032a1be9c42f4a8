"""The fast paths' leader look-ups (Produce and Fetch), kept while they stay right.

A look-up (``ProducePath.fast_leader``, ``ReplicaManager.leader_replica``) answers a
replica and its log; the answer holds while the cluster view and every replica's role are
as when it was made: the view object, its ``seq``, and ``ReplicaWakeups.roles_seq``
(bumped by every role or epoch change). What may change without those (the replica's log
replaced, the lease, shutting down, the ISR for acks=all) each fast path checks per
request. Bounded: cleared whenever it would grow past ``limit`` entries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager

K = TypeVar("K")
V = TypeVar("V")


class LeaderCache(Generic[K, V]):
    __slots__ = ("_entries", "_limit", "_roles")

    def __init__(self, limit: int) -> None:
        self._entries: dict[K, V] = {}
        self._roles: tuple[object, int, int] = (None, -1, -1)
        self._limit = limit

    def current(self, replicas: ReplicaManager) -> dict[K, V]:
        """The entries valid now (emptied first if the view or a role moved); read them
        directly, add through ``put``."""
        view = replicas.view
        roles = (view, view.seq, replicas.wakeups.roles_seq)
        if roles != self._roles:
            self._roles = roles
            self._entries.clear()
        return self._entries

    def put(self, key: K, value: V) -> None:
        entries = self._entries
        if len(entries) >= self._limit:
            entries.clear()
        entries[key] = value
