"""Producer id allocation for InitProducerId: ids are never reused, across restarts too."""

from __future__ import annotations

import logging
import struct
import threading
from pathlib import Path
from typing import Final

from crc32c import crc32c

from hot.errors import StorageError
from hot.log import atomic_write

logger = logging.getLogger(__name__)

PRODUCER_IDS_FILE: Final = "producer-ids"
DEFAULT_BLOCK_SIZE: Final = 1000
FILE_VERSION: Final = 1
# Kafka treats an epoch at Short.MAX_VALUE - 1 as exhausted: bumping it gets a new id.
MAX_EPOCH: Final = (1 << 15) - 2
_MAX_ID: Final = (1 << 63) - 1

# <data_dir>/meta/producer-ids, 14 bytes, big-endian:
#   0 version int16 (1) | 2 crc uint32: CRC-32C of bytes [6, 14) | 6 nextUnreserved int64
_FILE: Final = struct.Struct(">hIq")


class ProducerIdAllocator:
    """Hands out producer ids from blocks reserved in ``<data_dir>/meta/producer-ids``.

    Layout (big-endian, 14 bytes)::

        0  version         int16   1
        2  crc             uint32  CRC-32C of bytes [6, 14)
        6  nextUnreserved  int64   every id below it may have been handed out

    Before the first id of a block is handed out, the file is replaced atomically
    (``.tmp``, fsync, rename, fsync dir) with the block's end. Crash behaviour: ids of
    the block being used when the broker died are skipped, never reused. A missing or
    damaged file (only possible through outside interference) falls back to ``floor``:
    the caller passes one past the highest producer id found in any partition's state,
    and the allocator skips a further block for good measure (a producer unknown to
    every partition is equivalent to a new one anyway).
    """

    def __init__(self, path: str | Path, *, block_size: int = DEFAULT_BLOCK_SIZE, floor: int = 0) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.path = str(path)
        self.block_size = block_size
        self._lock = threading.Lock()
        self._damaged = False
        stored = self._read()
        if stored is not None:
            self._next = max(stored, floor)
        elif floor > 0 or self._damaged:
            self._next = floor + block_size
        else:
            self._next = 0  # a new data directory
        self._limit = self._next  # end of the reserved block: nothing reserved yet

    def _read(self) -> int | None:
        try:
            with open(self.path, "rb") as f:
                data = f.read(64)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StorageError(f"cannot read {self.path}: {e}") from e
        problem = None
        if len(data) != _FILE.size:
            problem = f"{len(data)} bytes, expected {_FILE.size}"
        else:
            version, crc, value = _FILE.unpack(data)
            if version != FILE_VERSION:
                problem = f"unsupported version {version}"
            elif crc32c(data[6:]) != crc:
                problem = "CRC mismatch"
            elif value < 0:
                problem = f"negative next id {value}"
            else:
                return int(value)
        self._damaged = True
        logger.error(
            "ignoring damaged %s (%s); continuing above every producer id in use", self.path, problem
        )
        return None

    @staticmethod
    def encode(next_unreserved: int) -> bytes:
        body = struct.pack(">q", next_unreserved)
        return struct.pack(">hI", FILE_VERSION, crc32c(body)) + body

    @property
    def next_id(self) -> int:
        """The id the next ``allocate`` returns."""
        return self._next

    def allocate(self) -> int:
        """A producer id never handed out before by this data directory."""
        with self._lock:
            if self._next >= self._limit:
                limit = self._next + self.block_size
                if limit > _MAX_ID:
                    raise StorageError("producer ids are exhausted")
                atomic_write(self.path, self.encode(limit))
                self._limit = limit
            pid = self._next
            self._next += 1
            return pid

    def init_producer(self, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
        """InitProducerId for a non-transactional producer: (id, epoch).

        A producer passing its current id and epoch (KIP-360, v3+) keeps its id with the
        epoch bumped, which fences its own stale in-flight batches. Otherwise (first
        call, an id this broker never issued, an exhausted epoch) it gets a new id at
        epoch 0."""
        if 0 <= producer_id < self._next and 0 <= epoch < MAX_EPOCH:
            return producer_id, epoch + 1
        return self.allocate(), 0


__all__ = ["DEFAULT_BLOCK_SIZE", "MAX_EPOCH", "PRODUCER_IDS_FILE", "ProducerIdAllocator"]
