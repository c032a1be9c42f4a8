"""The ``replication-offset-checkpoint`` file: the high watermark of every replicated log.

A replicated log (``hot.log.Log`` opened with ``hw_managed_externally``) does not persist
its high watermark; the broker checkpoints all of them in one file per data directory,
as Kafka does, and hands each log its value when it opens it.

File ``<data_dir>/meta/replication-offset-checkpoint``, ASCII text, Kafka's layout::

    0\\n                                   format version (only 0 exists)
    <N>\\n                                 number of entries
    <topic> <partition> <high watermark>\\n N lines, single spaces, any order

Crash behaviour: the whole file is replaced atomically (``.tmp``, fsync, rename, fsync of
the directory), so it is the old or the new version. It may lag the logs (it is written
every ``replica.high.watermark.checkpoint.interval.ms`` and on clean shutdown): a high
watermark read back is at most the real one, which only delays what consumers see until
the leader advances it again; ``Log.open`` also clamps it to the log end. A file that
does not parse is logged and treated as empty (every high watermark restarts at its log
start offset), never a reason to refuse to start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from hot.errors import StorageError
from hot.log import atomic_write
from hot.topics import validate_topic_name

log = logging.getLogger("strata.cluster.hw")

CHECKPOINT_FILE: Final = "replication-offset-checkpoint"
_VERSION: Final = 0
_MAX_BYTES: Final = 256 << 20

TopicPartition = tuple[str, int]


def encode(entries: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(_VERSION), str(len(entries))]
    lines += [f"{t} {p} {hw}" for (t, p), hw in sorted(entries.items())]
    return ("\n".join(lines) + "\n").encode("ascii")


def decode(data: bytes, where: str = CHECKPOINT_FILE) -> dict[TopicPartition, int]:
    """Parse the file; ValueError naming the line for anything but the layout above."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not ASCII: {exc}") from None
    if not text.endswith("\n"):
        raise ValueError(f"{where}: missing final newline (truncated file)")
    lines = text[:-1].split("\n")
    if len(lines) < 2 or lines[0] != str(_VERSION):
        raise ValueError(f"{where}: line 1: expected version {_VERSION}")
    if not lines[1].isdigit() or int(lines[1]) != len(lines) - 2:
        raise ValueError(f"{where}: line 2: entry count {lines[1][:20]!r} does not match the file")
    out: dict[TopicPartition, int] = {}
    for n, line in enumerate(lines[2:], start=3):
        parts = line.split(" ")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            raise ValueError(f"{where}: line {n}: expected '<topic> <partition> <offset>', got {line[:80]!r}")
        try:
            validate_topic_name(parts[0])
        except Exception as exc:
            raise ValueError(f"{where}: line {n}: {exc}") from None
        key = (parts[0], int(parts[1]))
        if key in out:
            raise ValueError(f"{where}: line {n}: {key[0]}-{key[1]} appears twice")
        out[key] = int(parts[2])
    return out


class HighWatermarkCheckpoint:
    """The checkpoint file of one data directory (layout and crash behaviour above)."""

    def __init__(self, meta_dir: Path) -> None:
        self.path = Path(meta_dir) / CHECKPOINT_FILE

    def read(self) -> dict[TopicPartition, int]:
        try:
            with self.path.open("rb") as f:
                data = f.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc
        try:
            if len(data) > _MAX_BYTES:
                raise ValueError(f"{self.path}: larger than {_MAX_BYTES} bytes")
            return decode(data, str(self.path))
        except ValueError as exc:
            log.warning("ignoring the high-watermark checkpoint: %s", exc)
            return {}

    def write(self, entries: Mapping[TopicPartition, int]) -> None:
        """Replace the file (StorageError on failure)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, encode(entries))
