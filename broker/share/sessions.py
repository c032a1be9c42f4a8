"""Share sessions (KIP-932): a member's ShareFetch/ShareAcknowledge conversation with one
broker, keyed by (group, member).

Epoch 0 opens a session (replacing any the member had) with the request's partitions;
each later request must carry the next epoch (INVALID_SHARE_SESSION_EPOCH otherwise),
adds its partitions and drops the forgotten ones; epoch -1 closes it (acknowledgements
only, and the member's records go back). A request with a non-zero epoch and no session
is SHARE_SESSION_NOT_FOUND. Sessions are bounded by ``group.share.max.share.sessions``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.share.errors import (
    InvalidShareSessionEpochError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
)

OPEN_EPOCH = 0
CLOSE_EPOCH = -1

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 0  # the epoch the next request must carry
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set


class ShareSessions:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession | None:
        """The session a request with ``epoch`` continues (None for a new one), or the error."""
        session = self._sessions.get((group_id, member_id))
        if epoch == OPEN_EPOCH:
            if session is None and len(self._sessions) >= self.max_sessions:
                raise ShareSessionLimitReachedError(
                    f"this broker holds its maximum of {self.max_sessions} share sessions"
                )
            return None
        if session is None:
            raise ShareSessionNotFoundError(f"no share session for member {member_id} of group {group_id}")
        if epoch != CLOSE_EPOCH and epoch != session.epoch:
            raise InvalidShareSessionEpochError(
                f"share session epoch {epoch} is not the expected {session.epoch}"
            )
        return session

    def open(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition]) -> ShareSession:
        session = ShareSession(group_id, member_id, epoch=1, partitions=dict.fromkeys(partitions))
        self._sessions[(group_id, member_id)] = session
        return session

    def advance(
        self, session: ShareSession, added: Iterable[TopicPartition], forgotten: Iterable[TopicPartition]
    ) -> None:
        for tp in added:
            session.partitions[tp] = None
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [s for (g, _), s in self._sessions.items() if g == group_id]
