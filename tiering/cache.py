"""On-disk LRU cache of fixed-size chunks of remote objects, with single-flight GETs and prefetch.

Remote reads fetch objects in chunks of ``chunk_bytes`` (chunk ``i`` of an object is its
bytes ``[i * chunk_bytes, min((i + 1) * chunk_bytes, size))``), so a consumer reading a
segment costs one ranged GET per chunk however small its fetches are, and a chunk read
once is served from local disk afterwards. Objects are immutable (segment keys carry a
fresh segment id per upload), so a cached chunk never goes stale.

A reader that starts at byte 0 of an object of at most ``whole_object_bytes`` (a consumer
reading a small segment sequentially from its start, or the prefetch into the next
segment) may ask for it whole: one GET of the whole object, split into its chunks. That
is one request instead of one per chunk on any S3 (fewer requests, and a GET of a few MiB
is within the sizes S3 recommends), and it lets the caller's ``check`` (the remote reader
passes the segment's whole-object checksum check against the manifest) run once, inside that GET, in a
worker thread, before any of its bytes is handed out.

Files, one per chunk, under ``<cache_dir>/<d0d1>/<digest>-<index>.chunk`` where
``digest`` is the first 40 hex digits of SHA-256 of the object key and ``d0d1`` its first
two (256 subdirectories keep directories small). Layout (big-endian)::

    offset  size  field
    0       4     magic        b"STC2"
    4       4     crc          uint32  CRC-32C of bytes [8, end)
    8       4     index        uint32  chunk index
    12      4     length       uint32  payload bytes
    16      2     keyLength    uint16
    18      1     flags        uint8   bit 0 VERIFIED (below); other bits 0
    19      k     key          UTF-8 object key (guards against digest collisions)
    19+k    p     padding      zero bytes (p < 4 KiB): the payload starts at file size - length
    19+k+p  n     payload

The padding aligns large payloads to 4 KiB in the file, so that a chunk of a GET's
page-aligned buffer is written with O_DIRECT straight from that buffer (no copy).

Files of the first layout (magic ``STCC``: no flags byte, the key at 18) are still read,
as not verified. VERIFIED: the payload is a slice of an object fetched whole whose
checksum matched the caller's ``check`` (for segments, the manifest's CRC-32C of the
whole object, computed by the uploader after it validated every batch). Readers may skip
their own validation of such bytes; the flag is covered by the file's CRC, so a damaged
flag fails the file like any other damage.

Whole-object GETs compute the CRC-32C of each chunk once, in the GET's worker thread;
the whole object's CRC handed to ``check`` and each chunk file's CRC are combined from
those (``tiering.checksum``), so the bytes are read once for both.

Write-behind: a GET's bytes go to the readers waiting for them (and to a small in-memory
LRU of recent chunks, ``memory_bytes``) first; the chunk files are written afterwards, in a
worker thread, so a reader never waits for the disk. Until its file is written a chunk is
served from memory; a chunk evicted from memory before that is simply fetched again.
Files are written with O_DIRECT where the filesystem allows (``ChunkFile._write_direct``):
history read once must not evict the hot tier's pages from the page cache.

Crash behaviour: a chunk is written to ``<name>.<n>.tmp`` and renamed into place (no
fsync: it is a cache). A crash can leave ``.tmp`` files (deleted by the start-up scan) or a
renamed file whose data never reached the disk; the CRC check on every read from disk
catches the latter, and a damaged file is deleted and fetched again, never served.

Restart: the start-up scan rebuilds the in-memory index from the file names and sizes
(no file is read), oldest modification time first, so the LRU order survives roughly.

Concurrency: the index lives on the event loop; file I/O runs in worker threads (all the
chunk files one read needs in one hop). Requests for a chunk that is being fetched join
that fetch (one GET however many readers), and reading chunk N of an object right after
chunk N-1 starts background fetches of the next ``prefetch_chunks`` chunks (consumers
catching up read sequentially). ``prefetch`` lets the remote reader ask for the chunks
after the bytes it just served, across objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import hashlib
import itertools
import logging
import mmap
import os
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from crc32c import crc32c

from hot.errors import InvalidConfigError, ObjectNotFoundError, ObjectStoreError
from hot.region import FileRegion, SegmentFile
from tiering.checksum import crc32c_combine, crc32c_concat, crc32c_pieces
from tiering.store import InvalidRangeError, ObjectStore

logger = logging.getLogger(__name__)


MAGIC: Final = b"STC2"
CHUNK_HEADER: Final = struct.Struct(">4sIIIHB")  # magic, crc, index, length, keyLength, flags
MAGIC_V1: Final = b"STCC"  # the first layout: no flags byte
CHUNK_HEADER_V1: Final = struct.Struct(">4sIIIH")
FLAG_VERIFIED: Final = 0x01
CHUNK_SUFFIX: Final = ".chunk"
DIGEST_HEX: Final = 40
# Objects up to this size are fetched with one GET when read from their start (``whole``).
DEFAULT_WHOLE_OBJECT_BYTES: Final = 16 << 20
# Recently fetched or loaded chunks kept in memory: prefetched bytes are read from here,
# not back from the file just written, and small fetches reuse a chunk without disk reads.
DEFAULT_MEMORY_BYTES: Final = 64 << 20
_CRC_START: Final = 8
_CRC_FIELDS: Final = struct.Struct(">IIHB")  # the header fields the CRC covers: index .. flags
_ZERO_COPY_MIN_BYTES: Final = 64 << 10  # smaller payloads are copied (4 KiB of padding would not pay)
_MAX_TRACKED_OBJECTS: Final = 4096  # objects whose last read chunk is remembered for prefetch
# Chunk files kept mapped after a cache hit (``ChunkCache._maps``), at most: a mapping holds
# an open file, and the pages the reader touched (batch headers) count in the process's RSS
# while it is mapped, so the payload bytes kept mapped are bounded too (``mapped_bytes``).
MAX_MAPPED_CHUNKS: Final = 64
_tmp_ids = itertools.count()
_NOGIL_COPY_BYTES: Final = 256 << 10  # smaller copies keep the GIL (a foreign call costs more)
_MAX_KEY_BYTES: Final = 4096  # more than any key a store accepts (1024 bytes and a prefix)
_DIRECT_ALIGN: Final = 4096  # O_DIRECT alignment of buffer, offset and length (4Kn disks too)
_direct_io = hasattr(os, "O_DIRECT")  # cleared the first time a filesystem refuses it
_thread_local = threading.local()


class RemoteObjectMissingError(ObjectNotFoundError):
    """An object the manifest names is not in the bucket (KAFKA_STORAGE_ERROR); names the key."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class RemoteCorruptObjectError(ObjectStoreError):
    """Bytes of a remote object fail validation (CRC, whole-object checksum, impossible header or size).

    Never served: the partition gets KAFKA_STORAGE_ERROR naming the key and position."""

    def __init__(
        self, key: str, reason: str, *, position: int | None = None, offset: int | None = None
    ) -> None:
        where = []
        if offset is not None:
            where.append(f"offset {offset}")
        if position is not None:
            where.append(f"byte {position}")
        at = f" at {', '.join(where)}" if where else ""
        super().__init__(f"corrupt remote object {key}{at}: {reason}")
        self.key = key
        self.reason = reason
        self.position = position
        self.offset = offset


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters since the cache was created (exported as metrics by the tiering service)."""

    hits: int  # chunks served from disk or memory
    misses: int  # reader requests that started a GET
    coalesced: int  # reader requests that joined a GET already in flight
    prefetches: int  # GETs started by sequential prefetch
    evictions: int  # chunk files deleted to stay under the size cap
    gets: int  # GETs sent to the store (ranged, or of a whole object)
    fetched_bytes: int  # bytes received from the store
    corrupt: int  # damaged chunk files found and deleted
    entries: int  # chunk files currently cached
    size: int  # bytes of those files
    memory: int = 0  # bytes of chunks in the in-memory LRU
    memory_limit: int = 0  # its bound (``read_memory_bytes``)


# --- chunk files ------------------------------------------------------------------------------


class ChunkFile:
    """One cached chunk: ``<cache_dir>/<d0d1>/<digest40>-<index:08d>.chunk``.

    Layout (big-endian): magic ``STC2`` | crc uint32 (CRC-32C of everything after it) |
    index uint32 | length uint32 | keyLength uint16 | flags uint8 | key (UTF-8) | payload
    (module docstring; ``STCC`` files, without flags, are read too). Written to
    ``<name>.<n>.tmp`` (with O_DIRECT: padded to 4 KiB, then truncated to its length) and
    renamed, without fsync (a cache); after a crash a torn, short or zero-filled file
    fails ``decode`` (magic, CRC, lengths, key, index) and is deleted, never served.
    ``header``/``encode``/``decode`` are pure; ``read``/``write``/``delete`` block
    (worker threads)."""

    @staticmethod
    def header(
        key: str,
        index: int,
        payload: bytes | memoryview,
        *,
        verified: bool = False,
        payload_crc: int | None = None,
        aligned: bool = False,
    ) -> bytes:
        """Everything before the payload (the CRC covers the payload too). ``payload_crc``:
        the payload's CRC-32C if the caller has it (saves a pass over the payload).
        ``aligned``: pad the header to 4 KiB (for ``write``'s zero-copy path)."""
        kb = key.encode("utf-8")
        flags = FLAG_VERIFIED if verified else 0
        pad = bytes(-(CHUNK_HEADER.size + len(kb)) % _DIRECT_ALIGN) if aligned else b""
        body = _CRC_FIELDS.pack(index, len(payload), len(kb), flags) + kb + pad
        if payload_crc is None:
            crc = crc32c(payload, crc32c(body))
        else:
            crc = crc32c_combine(crc32c(body), payload_crc, len(payload))
        return CHUNK_HEADER.pack(MAGIC, crc, index, len(payload), len(kb), flags) + kb + pad

    @staticmethod
    def zero_copy(payload: bytes | memoryview) -> bool:
        """Whether ``write`` can send ``payload`` to disk straight from its memory (O_DIRECT
        from a 4 KiB-aligned, writable buffer such as a pooled GET body): then build its
        header with ``aligned=True``."""
        if not _direct_io or not isinstance(payload, memoryview) or payload.readonly:
            return False
        if len(payload) < _ZERO_COPY_MIN_BYTES or not payload.c_contiguous:
            return False
        return _address(payload) % _DIRECT_ALIGN == 0

    @staticmethod
    def encode(key: str, index: int, payload: bytes | memoryview, *, verified: bool = False) -> bytes:
        return ChunkFile.header(key, index, payload, verified=verified) + bytes(payload)

    @staticmethod
    def decode(data: bytes, key: str, index: int) -> memoryview | None:
        """The payload (a view of ``data``), or None if the file is damaged or holds another chunk."""
        found = ChunkFile.decode_chunk(data, key, index)
        return None if found is None else found[0]

    @staticmethod
    def decode_chunk(data: bytes, key: str, index: int) -> tuple[memoryview, bool] | None:
        """(payload as a view of ``data``, VERIFIED flag), or None if the file is damaged
        or holds another chunk."""
        if len(data) < CHUNK_HEADER_V1.size:
            return None
        magic = data[:4]
        if magic == MAGIC and len(data) >= CHUNK_HEADER.size:
            _, crc, idx, length, klen, flags = CHUNK_HEADER.unpack_from(data, 0)
            key_at = CHUNK_HEADER.size
            if flags & ~FLAG_VERIFIED:
                return None
            start = len(data) - length  # after the padding
        elif magic == MAGIC_V1:
            _, crc, idx, length, klen = CHUNK_HEADER_V1.unpack_from(data, 0)
            key_at, flags = CHUNK_HEADER_V1.size, 0
            start = key_at + klen
        else:
            return None
        key_end = key_at + klen
        if idx != index or len(data) != start + length or not 0 <= start - key_end < _DIRECT_ALIGN:
            return None
        view = memoryview(data)
        if crc32c(view[_CRC_START:]) != crc:
            return None
        if view[key_at:key_end] != key.encode("utf-8") or view[key_end:start].tobytes().strip(b"\0"):
            return None
        return view[start:], bool(flags & FLAG_VERIFIED)

    @staticmethod
    def map_chunk(path: str, key: str, index: int) -> tuple[memoryview, bool] | None:
        """(payload, VERIFIED flag) of a chunk file this process trusts (written or checked
        by it: ``ChunkCache._trusted``), mapped rather than read: the header is checked, the
        payload's CRC is not (it was when the file was written or first read). The view is
        of a ``ChunkMap``, so ``sendable`` turns slices of it into file regions the network
        layer sends with sendfile. None: missing, another layout, or not this chunk."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        file = SegmentFile(fd, "rb", closefd=True)
        try:
            size = os.fstat(fd).st_size
            head = os.pread(fd, min(size, CHUNK_HEADER.size + _MAX_KEY_BYTES), 0)
            if len(head) < CHUNK_HEADER.size or head[:4] != MAGIC:
                return None
            _, _, idx, length, klen, flags = CHUNK_HEADER.unpack_from(head, 0)
            key_end = CHUNK_HEADER.size + klen
            start = size - length
            if idx != index or flags & ~FLAG_VERIFIED or not 0 <= start - key_end < _DIRECT_ALIGN:
                return None
            if head[CHUNK_HEADER.size : key_end] != key.encode("utf-8") or length == 0:
                return None
            mm = ChunkMap(fd, 0, access=mmap.ACCESS_COPY)
            # Chunk files are written with O_DIRECT (not in the page cache): read the file
            # in here, in the worker thread, so the sendfile on the event loop finds it in
            # memory instead of waiting for the disk there (which stalls every connection).
            _read_in(fd, size, start, length)
        except (OSError, ValueError) as e:
            logger.warning("cannot map cache file %s: %s", path, e)
            return None
        mm.file = file
        mm.path = path
        mm.base = _address(memoryview(mm))
        return memoryview(mm)[start:], bool(flags & FLAG_VERIFIED)

    @staticmethod
    def read(path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            logger.warning("cannot read cache file %s: %s", path, e)
            return None

    @staticmethod
    def write(path: str, data: bytes | memoryview, header: bytes = b"") -> bool:
        """Write ``header + data`` to ``path`` (via a unique temporary name and a rename),
        bypassing the page cache where the filesystem allows (``_write_direct``)."""
        tmp = f"{path}.{next(_tmp_ids)}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not ChunkFile._write_direct(tmp, header, data):
                with open(tmp, "wb") as f:
                    if header:
                        f.write(header)
                    f.write(data)
            os.replace(tmp, path)
            return True
        except OSError as e:
            logger.warning("cannot write cache file %s: %s", path, e)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False

    @staticmethod
    def _write_direct(tmp: str, header: bytes, data: bytes | memoryview) -> bool:
        """Write with O_DIRECT: False (nothing written) where the filesystem refuses it.

        Why: a chunk file is read again only on a cache hit, and a cold read of gigabytes
        of history through the page cache would evict the hot tier's pages (which serve
        live consumers by sendfile) and pay for page allocation and writeback; on the
        benchmark VM that was 8 ms of CPU per 8 MiB against 2 ms for the copy into an
        aligned buffer and a direct write. O_DIRECT needs block-aligned memory, offsets
        and lengths. A header padded to 4 KiB in front of a ``zero_copy`` payload: the
        header, then the payload's whole blocks straight from its memory, then its last
        partial block from a small aligned buffer. Anything else: the file is copied into
        a page-aligned buffer (one per worker thread, reused) and written padded to 4 KiB.
        Either way the file is then truncated to its length."""
        global _direct_io
        if not _direct_io:
            return False
        n = len(header) + len(data)
        in_place = len(header) % _DIRECT_ALIGN == 0 and ChunkFile.zero_copy(data)
        padded = -(-n // _DIRECT_ALIGN) * _DIRECT_ALIGN
        # in place: only the header and the last partial block go through the buffer
        need = len(header) + _DIRECT_ALIGN if in_place else padded
        buf: mmap.mmap | None = getattr(_thread_local, "buf", None)
        if buf is None or len(buf) < need:
            if buf is not None:
                buf.close()
            buf = mmap.mmap(-1, need)
            _thread_local.buf = buf
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_DIRECT, 0o644)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            _direct_io = False  # e.g. tmpfs
            logger.info("cache directory does not support O_DIRECT; writing through the page cache")
            return False
        try:
            with memoryview(buf) as view:
                if in_place:
                    assert isinstance(data, memoryview)
                    view[: len(header)] = header
                    _pwrite_all(fd, view[: len(header)], 0)
                    whole = len(data) - len(data) % _DIRECT_ALIGN
                    _pwrite_all(fd, data[:whole], len(header))
                    if whole < len(data):
                        tail = len(data) - whole
                        view[:tail] = data[whole:]
                        view[tail:_DIRECT_ALIGN] = bytes(_DIRECT_ALIGN - tail)
                        _pwrite_all(fd, view[:_DIRECT_ALIGN], len(header) + whole)
                else:
                    view[: len(header)] = header
                    _copy_into(buf, len(header), data)
                    _pwrite_all(fd, view[:padded], 0)
            os.ftruncate(fd, n)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            _direct_io = False
            logger.info("O_DIRECT write refused (%s); writing through the page cache", e)
            os.close(fd)
            os.unlink(tmp)
            return False
        os.close(fd)
        return True

    @staticmethod
    def delete(paths: list[str]) -> None:
        for p in paths:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                logger.warning("cannot delete cache file %s: %s", p, e)


class ChunkMap(mmap.mmap):
    """A trusted chunk file mapped copy-on-write (never written: writable only so a view's
    address can be taken) with the open file it came from, so that bytes of it can be
    sent with sendfile (``sendable``) instead of through Python."""

    file: SegmentFile
    path: str
    base: int  # address of the mapping's first byte


SENDFILE_MIN: Final = 64 << 10  # smaller parts are written from the mapping (as the hot tier)


def sendable(parts: Sequence[bytes | memoryview]) -> tuple[bytes | memoryview | FileRegion, ...]:
    """``parts`` with every view of a mapped chunk file (``ChunkCache`` hits on trusted
    files) of at least ``SENDFILE_MIN`` bytes replaced by the ``FileRegion`` of those
    bytes in the file: what the Kafka connection sends with sendfile, as it sends the hot
    tier's segments."""
    out: list[bytes | memoryview | FileRegion] = []
    for p in parts:
        if (
            isinstance(p, memoryview)
            and isinstance(p.obj, ChunkMap)
            and len(p) >= SENDFILE_MIN
            and not p.readonly  # a read-only view's address cannot be taken (ctypes)
        ):
            mapped = p.obj
            out.append(FileRegion(mapped.file, mapped.path, _address(p) - mapped.base, len(p)))
        else:
            out.append(p)
    return tuple(out)


_MAP_POPULATE: Final = getattr(mmap, "MAP_POPULATE", 0)


def _read_in(fd: int, size: int, start: int, length: int) -> None:
    """Bring the file's pages into the page cache and wait for them: a shared read-only
    mapping with MAP_POPULATE (the kernel reads the file in before mmap returns), unmapped
    at once, so the pages stay cached but are not counted in this process's RSS. Where
    that is missing, only ask for read-ahead (POSIX_FADV_WILLNEED, which does not wait)."""
    if _MAP_POPULATE and size > 0:
        with contextlib.suppress(OSError, ValueError):
            mmap.mmap(fd, size, flags=mmap.MAP_SHARED | _MAP_POPULATE, prot=mmap.PROT_READ).close()
            return
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_WILLNEED)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


def _address(view: memoryview) -> int:
    """Address of a writable buffer's first byte."""
    c = ctypes.c_char.from_buffer(view)
    try:
        return ctypes.addressof(c)
    finally:
        del c  # release the export at once


def _copy_into(buf: mmap.mmap, at: int, data: bytes | memoryview) -> None:
    """``buf[at : at + len(data)] = data``, with the GIL released for large writable
    sources (``ctypes.memmove`` is a foreign call): the copy of a chunk into the O_DIRECT
    buffer then runs alongside the event loop and the GET threads instead of stopping
    them (about 1 ms per 8 MiB here). Read-only sources (``bytes``) are copied as usual."""
    n = len(data)
    if n < _NOGIL_COPY_BYTES or (isinstance(data, memoryview) and data.readonly) or isinstance(data, bytes):
        buf[at : at + n] = data
        return
    dst = ctypes.c_char.from_buffer(buf, at)
    src = ctypes.c_char.from_buffer(data)
    try:
        ctypes.memmove(ctypes.addressof(dst), ctypes.addressof(src), n)
    finally:
        del dst, src  # release the exports at once (``buf`` may be closed and replaced)


def _relay(to: asyncio.Future[_Chunk], src: asyncio.Future[_Chunk]) -> None:
    """Complete ``to`` as ``src`` completed."""
    if to.done():
        return
    if src.cancelled():
        to.cancel()
    elif (e := src.exception()) is not None:
        to.set_exception(e)
    else:
        to.set_result(src.result())


@functools.lru_cache(maxsize=4096)
def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:DIGEST_HEX]


class ObjectCheck(Protocol):
    """Checks a whole object's bytes, in the worker thread that fetched them; raises to
    reject them. ``crc`` is the CRC-32C of ``data`` (computed by the cache with the
    chunks' own)."""

    def __call__(self, data: memoryview, crc: int) -> None: ...


# A chunk's bytes, and whether they passed a whole-object check (module docstring: VERIFIED).
_Chunk = tuple[memoryview, bool]
# A chunk file to write: name, index, payload, VERIFIED, the payload's CRC-32C if known.
_Written = tuple[str, int, memoryview, bool, int | None]


def _check_size(key: str, position: int, size: int, data: memoryview) -> None:
    if len(data) != size:
        what = "shorter" if len(data) < size else "longer"
        raise RemoteCorruptObjectError(
            key,
            f"object is {what} than its recorded size: {len(data)} bytes where {size} were expected",
            position=position,
        )


def _check_whole(
    data: memoryview, *, key: str, size: int, check: ObjectCheck, chunk_bytes: int, crcs: list[int]
) -> None:
    """The size, then the caller's check, of a whole object (before anything is served).
    Fills ``crcs`` with the CRC-32C of each chunk (for the chunk files)."""
    _check_size(key, 0, size, data)
    pieces = crc32c_pieces(data, chunk_bytes)
    crcs[:] = [crc for crc, _ in pieces]
    check(data, crc32c_concat(pieces))


# --- the cache --------------------------------------------------------------------------------


class ChunkCache:
    """LRU of chunk files under ``directory`` holding at most ``max_bytes`` (file sizes).

    ``max_bytes == 0`` disables the disk (every read is a GET; GETs still coalesce; nothing
    is kept in memory or prefetched).
    """

    def __init__(
        self,
        store: ObjectStore,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int,
        chunk_bytes: int = 1 << 20,
        prefetch_chunks: int = 2,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        whole_object_bytes: int = DEFAULT_WHOLE_OBJECT_BYTES,
        mapped_bytes: int | None = None,
    ) -> None:
        if chunk_bytes < 1024:
            raise InvalidConfigError(f"cache chunk size must be at least 1024 bytes, got {chunk_bytes}")
        if max_bytes < 0 or prefetch_chunks < 0 or memory_bytes < 0 or whole_object_bytes < 0:
            raise InvalidConfigError("cache sizes and prefetch count must not be negative")
        self.store = store
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        self.prefetch_chunks = prefetch_chunks
        self.memory_bytes = min(memory_bytes, max_bytes)
        self.whole_object_bytes = whole_object_bytes
        self._index: OrderedDict[str, int] = OrderedDict()  # chunk file name -> file size, LRU first
        self._size = 0
        self._mem: OrderedDict[str, _Chunk] = OrderedDict()  # chunk name -> payload, LRU first
        self._mem_size = 0
        # Trusted chunk files mapped by a cache hit, LRU first: the next hit on one is served
        # on the event loop, without a worker-thread hop to open and map the file again.
        self._maps: OrderedDict[str, _Chunk] = OrderedDict()
        self._maps_size = 0
        # Payload bytes kept mapped: as many as the in-memory LRU holds, unless told.
        self.mapped_bytes = self.memory_bytes if mapped_bytes is None else max(0, mapped_bytes)
        self._inflight: dict[str, asyncio.Future[_Chunk]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # GETs (strong references while they run)
        self._prefetching: set[asyncio.Task[None]] = set()
        self._prefetch_bytes = 0  # bytes of prefetch GETs in flight (bounded by memory_bytes)
        self._writes: set[asyncio.Task[None]] = set()
        self._pending_write: dict[str, object] = {}  # chunk name -> token of its newest write
        # Chunk files whose payload this process wrote or CRC-checked: hits on them are
        # mapped and sent with sendfile, unread (``ChunkFile.map_chunk``). Files left by an
        # earlier run are read and checked once first (a crash may have left garbage).
        self._trusted: set[str] = set()
        self._last_chunk: OrderedDict[str, int] = OrderedDict()  # object key -> last chunk read
        self._closed = False
        self._hits = self._misses = self._coalesced = self._prefetches = 0
        self._evictions = self._gets = self._fetched_bytes = self._corrupt = 0
        self.object_checks = 0  # whole-object GETs whose bytes went through ``check``
        # Seconds a GET takes from start to its last byte, a moving average (None: none
        # yet): the remote reader sizes its read-ahead by it (``RemoteReader``).
        self.get_seconds: float | None = None
        if max_bytes > 0:
            self._scan()

    # -- start-up ---------------------------------------------------------------------------

    def _scan(self) -> None:
        """Rebuild the index from the files left by a previous run (blocking, at start)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InvalidConfigError(f"cannot create cache directory {self.directory}: {e}") from e
        found: list[tuple[float, str, int]] = []
        stale: list[str] = []
        for sub in self.directory.iterdir():
            if not sub.is_dir() or len(sub.name) != 2:
                continue
            try:
                entries = list(os.scandir(sub))
            except OSError as e:
                logger.warning("cannot list cache directory %s: %s", sub, e)
                continue
            for entry in entries:
                if entry.name.endswith(".tmp"):
                    stale.append(entry.path)
                    continue
                if not entry.name.endswith(CHUNK_SUFFIX) or not entry.name.startswith(sub.name):
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                found.append((st.st_mtime, entry.name, st.st_size))
        ChunkFile.delete(stale)
        found.sort()
        for _, name, size in found:
            self._index[name] = size
            self._size += size
        evicted = self._evict_names()
        ChunkFile.delete([self._path(n) for n in evicted])
        if found:
            logger.info("chunk cache %s: %d chunks, %d bytes", self.directory, len(self._index), self._size)

    # -- naming -------------------------------------------------------------------------------

    @staticmethod
    def chunk_name(key: str, index: int) -> str:
        return f"{_key_digest(key)}-{index:08d}{CHUNK_SUFFIX}"

    def _path(self, name: str) -> str:
        return str(self.directory / name[:2] / name)

    def chunk_range(self, index: int, object_size: int) -> tuple[int, int]:
        start = index * self.chunk_bytes
        return start, min(start + self.chunk_bytes, object_size)

    def chunk_count(self, object_size: int) -> int:
        return -(-object_size // self.chunk_bytes)

    # -- reading ------------------------------------------------------------------------------

    async def read(self, key: str, start: int, end: int, *, object_size: int) -> bytes:
        """Bytes ``[start, end)`` of the object (``end`` clipped to ``object_size``)."""
        views = await self.read_views(key, start, end, object_size=object_size)
        return bytes(views[0]) if len(views) == 1 else b"".join(views)

    async def read_views(
        self,
        key: str,
        start: int,
        end: int,
        *,
        object_size: int,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> list[memoryview]:
        """Bytes ``[start, end)`` of the object (``end`` clipped to ``object_size``) as views
        of the cached chunks, in order, without copying them.

        ``whole``: the caller reads the object sequentially; if ``start`` is 0, the object
        is at most ``whole_object_bytes`` and none of it is cached or being fetched, GET it
        whole, and pass its bytes to ``check`` (in a worker thread) before serving or
        caching any of them; an exception from ``check`` fails the read."""
        views, _ = await self.read_checked_views(
            key, start, end, object_size=object_size, whole=whole, check=check
        )
        return views

    async def read_checked_views(
        self,
        key: str,
        start: int,
        end: int,
        *,
        object_size: int,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> tuple[list[memoryview], bool]:
        """``read_views``, and whether every one of those bytes passed a whole-object
        ``check`` (now, or when its chunk was fetched; module docstring: VERIFIED)."""
        end = min(end, object_size)
        if start >= end:
            return [], True
        first, last = start // self.chunk_bytes, (end - 1) // self.chunk_bytes
        whole = whole and start == 0
        chunks = await self._chunks(key, first, last, object_size, whole=whole, check=check)
        verified = all(v for _, v in chunks)
        base = first * self.chunk_bytes
        if len(chunks) == 1:
            return [chunks[0][0][start - base : end - base]], verified
        out = [chunks[0][0][start - base :]]
        out.extend(c for c, _ in chunks[1:-1])
        out.append(chunks[-1][0][: end - (last * self.chunk_bytes)])
        return out, verified

    async def get_chunk(self, key: str, index: int, *, object_size: int) -> memoryview:
        """Chunk ``index`` of the object (exactly its expected length, else an error)."""
        return (await self._chunks(key, index, index, object_size))[0][0]

    async def _chunks(
        self,
        key: str,
        first: int,
        last: int,
        object_size: int,
        *,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> list[_Chunk]:
        """Chunks ``first..last``: from memory, else from disk (one worker-thread hop for
        all of them), else joining a GET in flight, else from new GETs."""
        if self._closed:
            raise ObjectStoreError(f"chunk cache {self.directory} is closed")
        start, _ = self.chunk_range(first, object_size)
        _, end = self.chunk_range(last, object_size)
        if first < 0 or start >= end or last * self.chunk_bytes >= object_size:
            raise ObjectStoreError(f"chunk {last} is outside the {object_size}-byte object {key}")
        for i in range(first, last + 1):
            self._note_sequential(key, i, object_size)
        n = last - first + 1
        out: list[_Chunk | None] = [None] * n
        waits: dict[int, asyncio.Future[_Chunk]] = {}
        on_disk: list[int] = []
        for i in range(n):
            name = self.chunk_name(key, first + i)
            chunk = self._from_memory(name)
            if chunk is not None:
                out[i] = chunk
            elif name in self._index and name not in self._inflight:
                on_disk.append(i)
            else:
                fut = self._inflight.get(name)
                if fut is not None:
                    self._coalesced += 1
                    waits[i] = fut
        if on_disk:
            jobs = [(self.chunk_name(key, first + i), first + i) for i in on_disk]
            trusted = [name in self._trusted for name, _ in jobs]
            loaded, damaged = await asyncio.to_thread(self._load_many, key, jobs, trusted)
            self._corrupt += damaged
            for i, (name, index), found in zip(on_disk, jobs, loaded, strict=True):
                a, b = self.chunk_range(index, object_size)
                if found is not None and len(found[0]) == b - a:
                    self._hits += 1
                    out[i] = found
                    if name in self._index:
                        self._trusted.add(name)  # checked now (or already trusted)
                    if name in self._index:
                        self._index.move_to_end(name)
                    self._remember(name, found)
                    continue
                self._forget(name)
                fut = self._inflight.get(name)  # a GET may have started during the load
                if fut is not None:
                    self._coalesced += 1
                    waits[i] = fut
        missing: list[int] = []
        for i in range(n):
            if out[i] is not None or i in waits:
                continue
            name = self.chunk_name(key, first + i)
            fut = self._inflight.get(name)  # started while this read loaded from disk
            if fut is not None:
                self._coalesced += 1
                waits[i] = fut
            else:
                missing.append(i)
        if missing:
            self._misses += len(missing)
            if whole and first == 0 and self._can_get_whole(key, object_size):
                self._start_get(
                    key, 0, self.chunk_count(object_size) - 1, object_size, whole=True, check=check
                )
            else:
                for i in missing:
                    self._start_get(key, first + i, first + i, object_size)
            for i in missing:
                waits[i] = self._inflight[self.chunk_name(key, first + i)]
        for i, fut in waits.items():
            # shield: a cancelled reader must not cancel the GET other readers wait for
            out[i] = await asyncio.shield(fut)
        return [v for v in out if v is not None]

    def _from_memory(self, name: str) -> _Chunk | None:
        chunk = self._mem.get(name)
        if chunk is None:
            chunk = self._maps.get(name)
            if chunk is None:
                return None
            self._maps.move_to_end(name)
        else:
            self._mem.move_to_end(name)
        self._hits += 1
        if name in self._index:
            self._index.move_to_end(name)
        return chunk

    def _remember(self, name: str, chunk: _Chunk) -> None:
        """Keep a chunk in the in-memory LRU (only with a disk cache: without one, every read
        is a GET by definition). A mapped chunk file goes to the LRU of mappings instead."""
        if isinstance(chunk[0].obj, ChunkMap):
            if len(chunk[0]) > self.mapped_bytes:
                return
            self._unmap(name)
            self._maps[name] = chunk
            self._maps_size += len(chunk[0])
            while len(self._maps) > MAX_MAPPED_CHUNKS or self._maps_size > self.mapped_bytes:
                _, dropped = self._maps.popitem(last=False)
                self._maps_size -= len(dropped[0])
            return
        size = len(chunk[0])
        if self.memory_bytes <= 0 or size > self.memory_bytes:
            return
        old = self._mem.pop(name, None)
        if old is not None:
            self._mem_size -= len(old[0])
        self._mem[name] = chunk
        self._mem_size += size
        while self._mem_size > self.memory_bytes:
            _, dropped = self._mem.popitem(last=False)
            self._mem_size -= len(dropped[0])

    def _unmap(self, name: str) -> None:
        old = self._maps.pop(name, None)
        if old is not None:
            self._maps_size -= len(old[0])

    def _drop_from_memory(self, name: str) -> None:
        self._unmap(name)
        old = self._mem.pop(name, None)
        if old is not None:
            self._mem_size -= len(old[0])

    def _load_many(
        self, key: str, jobs: Sequence[tuple[str, int]], trusted: Sequence[bool] = ()
    ) -> tuple[list[_Chunk | None], int]:
        """(payload and VERIFIED flag, or None, per chunk; files found damaged and
        deleted). ``trusted[i]``: job i's file is mapped, not read and checked. Runs in a
        thread."""
        out: list[_Chunk | None] = []
        damaged = 0
        for i, (name, index) in enumerate(jobs):
            path = self._path(name)
            if i < len(trusted) and trusted[i]:
                mapped = ChunkFile.map_chunk(path, key, index)
                if mapped is not None:
                    out.append(mapped)
                    continue
            raw = ChunkFile.read(path)
            if raw is None:
                out.append(None)
                continue
            found = ChunkFile.decode_chunk(raw, key, index)
            if found is None:
                logger.warning("damaged cache file %s deleted", path)
                ChunkFile.delete([path])
                damaged += 1
            out.append(found)
        return out, damaged

    def _forget(self, name: str) -> None:
        self._trusted.discard(name)
        self._unmap(name)  # the file goes: so does its mapping (and its disk space)
        size = self._index.pop(name, None)
        if size is not None:
            self._size -= size

    def at_hand(self, key: str, position: int) -> bool:
        """Whether the chunk holding byte ``position`` of the object is in memory or on
        disk (a read of it waits for no GET)."""
        name = self.chunk_name(key, position // self.chunk_bytes)
        return name in self._mem or name in self._maps or name in self._index

    def _can_get_whole(self, key: str, object_size: int) -> bool:
        """The object is small enough, and none of its chunks is cached or being fetched."""
        if object_size > self.whole_object_bytes:
            return False
        for i in range(self.chunk_count(object_size)):
            name = self.chunk_name(key, i)
            if name in self._mem or name in self._index or name in self._inflight:
                return False
        return True

    # -- GETs ---------------------------------------------------------------------------------

    def _start_get(
        self,
        key: str,
        first: int,
        last: int,
        object_size: int,
        *,
        whole: bool = False,
        check: ObjectCheck | None = None,
        prefetch: bool = False,
    ) -> asyncio.Task[None]:
        """One GET for chunks ``first..last`` (the whole object if ``whole``); a future per
        chunk in ``_inflight`` that readers join."""
        loop = asyncio.get_running_loop()
        futs: list[tuple[str, asyncio.Future[_Chunk]]] = []
        for i in range(first, last + 1):
            fut: asyncio.Future[_Chunk] = loop.create_future()
            # retrieve the exception when nobody awaits it (e.g. a failed prefetch)
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            name = self.chunk_name(key, i)
            self._inflight[name] = fut
            futs.append((name, fut))
        task = loop.create_task(self._get(key, first, last, object_size, whole, check, futs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if prefetch:
            size = self.chunk_range(last, object_size)[1] - self.chunk_range(first, object_size)[0]
            self._prefetch_bytes += size
            self._prefetching.add(task)
            task.add_done_callback(self._prefetching.discard)
            task.add_done_callback(lambda _: self._prefetch_done(size))
        return task

    def _prefetch_done(self, size: int) -> None:
        self._prefetch_bytes -= size

    def _prefetch_full(self) -> bool:
        """Prefetch GETs in flight hold as many bytes as the memory tier: start no more (many
        partitions read at once keep the store busy with their own reads)."""
        return self._prefetch_bytes >= self.memory_bytes

    async def _get(
        self,
        key: str,
        first: int,
        last: int,
        object_size: int,
        whole: bool,
        check: ObjectCheck | None,
        futs: list[tuple[str, asyncio.Future[_Chunk]]],
    ) -> None:
        start, _ = self.chunk_range(first, object_size)
        _, end = self.chunk_range(last, object_size)
        began = time.monotonic()
        try:
            self._gets += 1
            verify: Callable[[memoryview], None] | None = None
            crcs: list[int] = []  # of each chunk, filled by a whole-object check
            if whole and check is not None:
                # in the worker thread that fetched the bytes: no hop back and forth
                self.object_checks += 1
                verify = functools.partial(
                    _check_whole,
                    key=key,
                    size=end - start,
                    check=check,
                    chunk_bytes=self.chunk_bytes,
                    crcs=crcs,
                )
            try:
                # a whole object is asked for without a Range: a longer object is caught too
                store = self.store
                data = await (
                    store.get_view(key, check=verify) if whole else store.get_view(key, start=start, end=end)
                )
            except InvalidRangeError as e:
                data = memoryview(b"")  # the object ends before this chunk starts
                logger.debug("short object: %s", e)
            self._fetched_bytes += len(data)
            took = time.monotonic() - began
            last_s = self.get_seconds
            self.get_seconds = took if last_s is None else last_s + (took - last_s) / 4
            _check_size(key, start, end - start, data)
            view = data
            verified = verify is not None
            chunks: list[_Written] = []
            for i, (name, fut) in enumerate(futs):
                lo = i * self.chunk_bytes
                payload = view[lo : lo + self.chunk_bytes]
                chunks.append((name, first + i, payload, verified, crcs[i] if verified else None))
                if self._inflight.get(name) is fut:
                    del self._inflight[name]
                if not self._closed:
                    self._remember(name, (payload, verified))
                if not fut.done():
                    fut.set_result((payload, verified))
            if self.max_bytes > 0 and not self._closed:
                self._write_behind(key, chunks)
        except BaseException as e:
            for name, fut in futs:
                if self._inflight.get(name) is fut:
                    del self._inflight[name]
                if fut.done():
                    continue
                if isinstance(e, asyncio.CancelledError):
                    fut.cancel()
                else:
                    fut.set_exception(e)
            if not isinstance(e, Exception):
                raise

    # -- write-behind -------------------------------------------------------------------------

    def _write_behind(self, key: str, chunks: list[_Written]) -> None:
        token = object()
        for name, *_ in chunks:
            self._pending_write[name] = token
        task = asyncio.get_running_loop().create_task(self._write_chunks(key, chunks, token))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def _write_files(self, key: str, chunks: list[_Written], token: object) -> list[tuple[str, int]]:
        """Write the chunk files; (name, file size) of each written. Runs in a thread."""
        written: list[tuple[str, int]] = []
        for name, index, payload, verified, crc in chunks:
            if self._pending_write.get(name) is not token:
                continue  # invalidated (or fetched again) meanwhile
            header = ChunkFile.header(
                key, index, payload, verified=verified, payload_crc=crc, aligned=ChunkFile.zero_copy(payload)
            )
            if ChunkFile.write(self._path(name), payload, header):
                written.append((name, len(header) + len(payload)))
        return written

    async def _write_chunks(self, key: str, chunks: list[_Written], token: object) -> None:
        written = await asyncio.to_thread(self._write_files, key, chunks, token)
        stale: list[str] = []
        for name, size in written:
            current = self._pending_write.get(name)
            if current is not token:
                if current is None:  # invalidated while being written: do not keep it
                    stale.append(self._path(name))
                continue
            del self._pending_write[name]
            self._forget(name)
            self._index[name] = size
            self._size += size
            self._trusted.add(name)  # written from bytes this process checked
        for name, *_ in chunks:
            if self._pending_write.get(name) is token:
                del self._pending_write[name]  # not written (an I/O error, logged)
        doomed = stale + [self._path(n) for n in self._evict_names()]
        if doomed:
            await asyncio.to_thread(ChunkFile.delete, doomed)

    def _evict_names(self) -> list[str]:
        out: list[str] = []
        while self._size > self.max_bytes and self._index:
            name, size = self._index.popitem(last=False)
            self._trusted.discard(name)
            self._unmap(name)
            self._size -= size
            out.append(name)
        self._evictions += len(out)
        return out

    # -- prefetch -----------------------------------------------------------------------------

    def _note_sequential(self, key: str, index: int, object_size: int) -> None:
        prev = self._last_chunk.get(key)
        self._last_chunk[key] = index
        self._last_chunk.move_to_end(key)
        while len(self._last_chunk) > _MAX_TRACKED_OBJECTS:
            self._last_chunk.popitem(last=False)
        if prev != index - 1 or self.prefetch_chunks == 0 or self.max_bytes == 0:
            return
        # Soon, not now: the reader's own GET (started right after this) goes first.
        asyncio.get_running_loop().call_soon(self._prefetch, key, index, object_size)

    def _prefetch(self, key: str, index: int, object_size: int) -> None:
        self._prefetch_chunks(key, index + 1, self.prefetch_chunks, object_size)

    def prefetch(
        self,
        key: str,
        start: int,
        count: int,
        *,
        object_size: int,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> int:
        """Fetch in the background the ``count`` chunks from the first one starting at or
        after byte ``start`` (fewer at the object's end); chunks cached or in flight are
        skipped, and a reader asking for one being fetched joins that GET. With ``whole``
        (see ``read_views``) a window starting at byte 0 of a small object untouched so far
        fetches the whole object with one GET. Returns how many chunks the window covered,
        so a caller can carry the rest into the next object. Does nothing without a disk
        cache (the bytes would have nowhere to go)."""
        first = -(-max(start, 0) // self.chunk_bytes)
        covered = max(0, min(count, self.chunk_count(object_size) - first))
        if self.max_bytes > 0 and covered > 0 and not self._closed and not self._prefetch_full():
            if whole and first == 0 and self._can_get_whole(key, object_size):
                self._prefetches += 1
                last = self.chunk_count(object_size) - 1
                self._start_get(key, 0, last, object_size, whole=True, check=check, prefetch=True)
            else:
                self._prefetch_chunks(key, first, covered, object_size)
        return covered

    def _prefetch_chunks(self, key: str, first: int, count: int, object_size: int) -> None:
        if self._closed:
            return
        on_disk: list[tuple[str, int]] = []
        for i in range(first, min(first + count, self.chunk_count(object_size))):
            name = self.chunk_name(key, i)
            if name in self._mem or name in self._maps or name in self._inflight:
                continue
            if name in self._index:
                on_disk.append((name, i))
                continue
            if self._prefetch_full():
                break
            self._prefetches += 1
            self._start_get(key, i, i, object_size, prefetch=True)
        if on_disk:
            self._load_ahead(key, on_disk, object_size)

    def _load_ahead(self, key: str, jobs: list[tuple[str, int]], object_size: int) -> None:
        """Map (and read into the page cache) the chunk files ``jobs`` in the background, in
        one worker-thread hop: a reader reading on from cache hits then finds its next
        chunks mapped instead of waiting for the disk (the files are written with O_DIRECT,
        so they are not in the page cache). Readers asking meanwhile join the load."""
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[_Chunk]] = []
        for name, _ in jobs:
            fut: asyncio.Future[_Chunk] = loop.create_future()
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._inflight[name] = fut
            futs.append(fut)
        task = loop.create_task(self._load_ahead_task(key, jobs, futs, object_size))
        self._prefetching.add(task)  # close() cancels it, wait_prefetches() waits for it
        task.add_done_callback(self._prefetching.discard)

    async def _load_ahead_task(
        self, key: str, jobs: list[tuple[str, int]], futs: list[asyncio.Future[_Chunk]], object_size: int
    ) -> None:
        trusted = [name in self._trusted for name, _ in jobs]
        try:
            loaded, damaged = await asyncio.to_thread(self._load_many, key, jobs, trusted)
        except BaseException as e:
            for (name, _), fut in zip(jobs, futs, strict=True):
                if self._inflight.get(name) is fut:
                    del self._inflight[name]
                if not fut.done():
                    fut.cancel() if isinstance(e, asyncio.CancelledError) else fut.set_exception(e)
            if not isinstance(e, Exception):
                raise
            return
        self._corrupt += damaged
        for (name, index), fut, found in zip(jobs, futs, loaded, strict=True):
            if self._inflight.get(name) is fut:
                del self._inflight[name]
            if fut.done():
                continue
            a, b = self.chunk_range(index, object_size)
            if found is not None and len(found[0]) == b - a and name in self._index and not self._closed:
                self._trusted.add(name)  # checked now (or already trusted)
                self._index.move_to_end(name)
                self._remember(name, found)
                fut.set_result(found)
                continue
            # Gone or damaged meanwhile: whoever joined gets the chunk from a GET instead.
            self._forget(name)
            if self._closed:
                fut.cancel()
                continue
            got = self._inflight.get(name)
            if got is None:
                self._start_get(key, index, index, object_size)
                got = self._inflight[name]
            got.add_done_callback(functools.partial(_relay, fut))

    # -- maintenance ----------------------------------------------------------------------------

    async def invalidate(
        self, key: str, first: int = 0, last: int | None = None, *, object_size: int
    ) -> None:
        """Drop the cached chunks ``first..last`` (default: all) of an object, from memory
        and disk, e.g. after its bytes failed validation, so the next read fetches them
        again (a chunk file still being written is deleted when the write ends)."""
        last = self.chunk_count(object_size) - 1 if last is None else last
        names = [self.chunk_name(key, i) for i in range(first, last + 1)]
        for n in names:
            self._drop_from_memory(n)
            self._pending_write.pop(n, None)
        doomed = [n for n in names if n in self._index]
        for n in doomed:
            self._forget(n)
        if doomed:
            await asyncio.to_thread(ChunkFile.delete, [self._path(n) for n in doomed])

    def stats(self) -> CacheStats:
        return CacheStats(
            hits=self._hits,
            misses=self._misses,
            coalesced=self._coalesced,
            prefetches=self._prefetches,
            evictions=self._evictions,
            gets=self._gets,
            fetched_bytes=self._fetched_bytes,
            corrupt=self._corrupt,
            entries=len(self._index),
            size=self._size,
            memory=self._mem_size,
            memory_limit=self.memory_bytes,
        )

    async def wait_writes(self) -> None:
        """Wait until the chunk files of finished GETs are written (tests, shutdown)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def wait_prefetches(self) -> None:
        """Wait for the background prefetches in flight and their chunk files (tests,
        orderly shutdown)."""
        await asyncio.sleep(0)  # let prefetches scheduled by the last read start
        while self._prefetching:
            await asyncio.gather(*list(self._prefetching), return_exceptions=True)
        await self.wait_writes()

    async def close(self) -> None:
        """Cancel background prefetches and finish pending chunk files; reads after this
        fail. The files stay for the next run."""
        self._closed = True
        tasks = list(self._prefetching)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.wait_writes()
        self._mem.clear()
        self._mem_size = 0
        self._maps.clear()
        self._maps_size = 0


__all__ = [
    "CHUNK_SUFFIX",
    "DEFAULT_MEMORY_BYTES",
    "DEFAULT_WHOLE_OBJECT_BYTES",
    "CacheStats",
    "ChunkCache",
    "ChunkFile",
    "ObjectCheck",
    "RemoteCorruptObjectError",
    "RemoteObjectMissingError",
]
