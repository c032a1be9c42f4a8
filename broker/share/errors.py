"""The share-group errors (KIP-932), each with its Kafka error code.

They carry their code (``kafka_code``) so that api.handlers.share answers with it without a
row in kwire.error_table, which the group-protocol work also edits.
"""

from __future__ import annotations

from typing import ClassVar

from hot.errors import GroupError


class ShareError(GroupError):
    kafka_code: ClassVar[int] = -1


class FencedMemberEpochError(ShareError):
    """The member's epoch is not the coordinator's: it must rejoin with epoch 0."""

    kafka_code = 110


class InvalidRecordStateError(ShareError):
    """An acknowledgement for records this member has not acquired (or no longer holds)."""

    kafka_code = 121


class ShareSessionNotFoundError(ShareError):
    kafka_code = 122


class InvalidShareSessionEpochError(ShareError):
    kafka_code = 123


class ShareSessionLimitReachedError(ShareError):
    kafka_code = 133


class FencedStateEpochError(ShareError):
    """A share partition's state written with an older state epoch than the share
    coordinator has (an administrator altered it meanwhile): the writer reloads."""

    kafka_code = 124
