"""Loading a ``__transaction_state`` partition: what a new coordinator rebuilds. Pure.

The records are replayed in log order, the latest record of a transactional id winning and
a tombstone (null value) forgetting it (it expired). Keys of unknown versions are skipped,
as Kafka does (left over from an aborted upgrade); any other malformed record raises
TxnLogRecordError. A transaction found in PrepareCommit or PrepareAbort was being completed
by the previous coordinator: its completion is prepared here (``begin_completion``, so the
cache holds it with its pending state and clients get CONCURRENT_TRANSACTIONS), and the
loader must (re)write its markers to every partition still listed, then write
``transit.after``. Markers are idempotent at the partitions, so writing one twice is safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.transactions.log_codec import TxnLogRecordError, UnknownKey, decode_key, decode_value
from broker.transactions.state import TransactionMetadata, TransactionState, Transit
from broker.transactions.transitions import begin_completion


@dataclass(frozen=True, slots=True)
class Loaded:
    """A replayed partition: the cache's metadata per transactional id (those completing
    with their pending state), the completions whose markers must be written, and how many
    records had keys of unknown versions."""

    transactions: dict[str, TransactionMetadata]
    completions: tuple[Transit, ...]
    unknown_keys: int


def replay(records: Iterable[tuple[bytes | None, bytes | None]], now_ms: int) -> Loaded:
    """Rebuild the metadata from (key, value) records in log order."""
    latest: dict[str, TransactionMetadata] = {}
    unknown = 0
    for n, (key, value) in enumerate(records):
        if key is None:
            raise TxnLogRecordError(f"record {n} of the transaction log has no key")
        tid = decode_key(key)
        if isinstance(tid, UnknownKey):
            unknown += 1
            continue
        if value is None:
            latest.pop(tid, None)
        else:
            latest[tid] = decode_value(tid, value)
    completions: list[Transit] = []
    for tid, meta in latest.items():
        if meta.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            transit = begin_completion(meta, now_ms)
            completions.append(transit)
            latest[tid] = transit.before
    return Loaded(latest, tuple(completions), unknown)
