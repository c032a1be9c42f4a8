"""The follower's decisions, as pure functions (Kafka's AbstractFetcherThread rules).

Before fetching from a new leader, and after every leader change, a follower finds where
its log diverges from the leader's, by leader epoch and never by its high watermark
(KIP-101: truncating to the high watermark loses acknowledged records):

1. ``epoch_to_request(latest epoch)``: ask the leader OffsetForLeaderEpoch for the
   follower's latest epoch; a follower without epochs truncates to its high watermark
   (``truncation_without_epochs``), as does one whose leader cannot answer.
2. ``truncation_for(answer, ...)``: the offset to truncate to. When the leader answers
   with an epoch the follower lacks (KIP-279: fast back-to-back failovers), the
   follower truncates to the end of its own largest epoch below it and asks again
   (``Truncate.complete`` is False) until both name the same epoch.
3. Fetch from the truncation point. ``fetch_error_action`` says what each error code of
   a Fetch (or OffsetForLeaderEpoch) response asks for; OFFSET_OUT_OF_RANGE needs the
   leader's log end and log start (ListOffsets), then ``on_offset_out_of_range``.

A follower's high watermark is ``min(leader's high watermark, its own log end)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hot.errors import InvalidRequestError
from hot.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry, end_offset_for
from kwire.error_table import (
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    LEADER_NOT_AVAILABLE,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)

OFFSET_MOVED_TO_TIERED_STORAGE = 109  # Kafka's code; Strata's leader reports OFFSET_OUT_OF_RANGE

# Errors after which the follower must learn the partition's new state (leader, epoch)
# before trying again; the others are retried as they are after a back-off.
_REFRESH = frozenset(
    {
        FENCED_LEADER_EPOCH,
        NOT_LEADER_OR_FOLLOWER,
        UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE,
        KAFKA_STORAGE_ERROR,
    }
)


@dataclass(frozen=True, slots=True)
class Truncate:
    """Truncate the log to ``offset`` (``Log.truncate_to``; no-op at or past its end).
    ``complete`` False: then ask the leader again with the new latest epoch."""

    offset: int
    complete: bool = True


@dataclass(frozen=True, slots=True)
class TruncateFully:
    """Empty the log and restart it at ``start_offset`` with the given log start offset
    (``Log.truncate_fully_and_start_at``), then fetch from ``start_offset``."""

    start_offset: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class FetchFrom:
    """Keep the log and fetch again from ``offset``."""

    offset: int


@dataclass(frozen=True, slots=True)
class Backoff:
    """Wait (replica.fetch.backoff.ms) and retry; with ``refresh_metadata`` only once the
    partition's state changed (new leader or epoch): the current one cannot serve us."""

    refresh_metadata: bool
    reason: str


@dataclass(frozen=True, slots=True)
class ResolveOutOfRange:
    """Ask the leader its log end and log start offsets (ListOffsets latest / earliest,
    and earliest-local with tiered storage), then call ``on_offset_out_of_range``."""


FetchErrorAction = Backoff | ResolveOutOfRange


def epoch_to_request(latest_epoch: int) -> int | None:
    """The epoch to send in OffsetForLeaderEpoch, None when the follower has none (then
    ``truncation_without_epochs``)."""
    return latest_epoch if latest_epoch >= 0 else None


def truncation_without_epochs(high_watermark: int, log_end_offset: int) -> Truncate:
    """A follower without epochs, or whose leader does not support OffsetForLeaderEpoch,
    can only trust its high watermark (the pre-KIP-101 rule, Kafka's fallback)."""
    return Truncate(min(high_watermark, log_end_offset))


def truncation_for(
    leader_epoch: int,
    leader_end_offset: int,
    follower_epochs: Sequence[EpochEntry],
    follower_log_end_offset: int,
    follower_high_watermark: int,
) -> Truncate:
    """Where to truncate after the leader answered OffsetForLeaderEpoch with
    (``leader_epoch``, ``leader_end_offset``) without error (Kafka's
    getOffsetTruncationState, KIP-101 and KIP-279):

    * end offset undefined (-1): the leader cannot tell; fall back to the high watermark;
    * epoch undefined (-1) but an end offset (a v0 answer, pre-KIP-279 leader):
      truncate to that end offset;
    * otherwise find the follower's own (largest epoch <= leader_epoch, its end):
      - none (the follower knows no such epoch): the leader's end offset;
      - a different epoch: the follower has data of an epoch the leader never saw, so
        truncate to the end of the follower's epoch and ask again (not complete);
      - the same epoch: both logs agree up to where either ends it: the smaller end.

    The result never exceeds the follower's log end.
    """
    if leader_end_offset < UNDEFINED_EPOCH_OFFSET or leader_epoch < UNDEFINED_EPOCH:
        raise InvalidRequestError(
            f"OffsetForLeaderEpoch answer (epoch {leader_epoch}, end offset {leader_end_offset}) is invalid"
        )
    leo = follower_log_end_offset
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return truncation_without_epochs(follower_high_watermark, leo)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncate(min(leader_end_offset, leo))
    epoch, end = end_offset_for(follower_epochs, leader_epoch, leo)
    if end == UNDEFINED_EPOCH_OFFSET:
        return Truncate(min(leader_end_offset, leo))
    if epoch != leader_epoch:
        return Truncate(min(end, leo), complete=False)
    return Truncate(min(end, leader_end_offset, leo))


def fetch_error_action(error_code: int) -> FetchErrorAction:
    """What a follower does about an error in a Fetch or OffsetForLeaderEpoch partition
    answer: OFFSET_OUT_OF_RANGE (and Kafka's OFFSET_MOVED_TO_TIERED_STORAGE) ->
    ``ResolveOutOfRange``; FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, KAFKA_STORAGE_ERROR -> back off until
    the partition's state changes; UNKNOWN_LEADER_EPOCH (the leader lags behind the
    metadata) and anything else -> back off and retry. NONE is not an error."""
    if error_code == NONE:
        raise InvalidRequestError("error code 0 (NONE) is not an error")
    if error_code in (OFFSET_OUT_OF_RANGE, OFFSET_MOVED_TO_TIERED_STORAGE):
        return ResolveOutOfRange()
    if error_code in _REFRESH:
        return Backoff(True, f"error code {error_code}: wait for the partition's new leader or epoch")
    if error_code == UNKNOWN_LEADER_EPOCH:
        return Backoff(False, "the leader has not caught up with the current leader epoch yet")
    return Backoff(False, f"error code {error_code}")


def on_offset_out_of_range(
    follower_log_end_offset: int,
    leader_log_end_offset: int,
    leader_log_start_offset: int,
    leader_local_log_start_offset: int | None = None,
) -> Truncate | TruncateFully | FetchFrom:
    """The leader refused the fetch offset (Kafka's fetchOffsetAndTruncate, KIP-405 for
    the tiered case):

    * the leader's log ends below ours (only after an unclean election): truncate to its end;
    * our log ends below the leader's log start (retention removed what we miss): start
      over empty at the leader's log start;
    * with tiered storage, our log ends below the leader's first local offset: start over
      empty at that offset, keeping the leader's log start (the rest is in the object
      store, shared by all replicas);
    * otherwise the leader's range moved while we asked: fetch again from our end.
    """
    leo = follower_log_end_offset
    if (
        min(leo, leader_log_end_offset, leader_log_start_offset) < 0
        or leader_log_start_offset > leader_log_end_offset
    ):
        raise InvalidRequestError(
            f"bad offsets: follower end {leo}, leader start {leader_log_start_offset}, "
            f"leader end {leader_log_end_offset}"
        )
    local = (
        leader_log_start_offset if leader_local_log_start_offset is None else leader_local_log_start_offset
    )
    if not leader_log_start_offset <= local <= leader_log_end_offset:
        raise InvalidRequestError(
            f"leader's local log start {local} outside [{leader_log_start_offset}, {leader_log_end_offset}]"
        )
    if leader_log_end_offset < leo:
        return Truncate(leader_log_end_offset)
    if leo < local:
        return TruncateFully(local, leader_log_start_offset)
    return FetchFrom(leo)


def follower_high_watermark(leader_high_watermark: int, follower_log_end_offset: int) -> int:
    """The follower's high watermark after a fetch response (``Log.set_high_watermark``
    clamps the same way)."""
    return min(leader_high_watermark, follower_log_end_offset)


__all__ = [
    "OFFSET_MOVED_TO_TIERED_STORAGE",
    "Backoff",
    "FetchErrorAction",
    "FetchFrom",
    "ResolveOutOfRange",
    "Truncate",
    "TruncateFully",
    "epoch_to_request",
    "fetch_error_action",
    "follower_high_watermark",
    "on_offset_out_of_range",
    "truncation_for",
    "truncation_without_epochs",
]
