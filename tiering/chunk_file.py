"""One cached chunk of a remote object on disk (``ChunkFile``), the mapping a cache hit
is served from (``ChunkMap``, sent with sendfile by ``sendable``), and the low-level I/O
they share (O_DIRECT writes from page-aligned buffers, page-cache read-in). The cache
itself (index, LRU, single-flight GETs, prefetch) is tiering.cache's.

Files, one per chunk, under ``<cache_dir>/<d0d1>/<digest>-<index>.chunk`` (tiering.cache
names them). Layout (big-endian)::

    offset  size  field
    0       4     magic        b"STC2"
    4       4     crc          uint32  CRC-32C of bytes [8, end)
    8       4     index        uint32  chunk index
    12      4     length       uint32  payload bytes
    16      2     keyLength    uint16
    18      1     flags        uint8   bit 0 VERIFIED; other bits 0
    19      k     key          UTF-8 object key (guards against digest collisions)
    19+k    p     padding      zero bytes (p < 4 KiB): the payload starts at file size - length
    19+k+p  n     payload

Files of the first layout (magic ``STCC``: no flags byte, the key at 18) are still read,
as not verified. Crash behaviour: written to ``<name>.<n>.tmp`` and renamed into place,
without fsync (a cache); a torn, short or zero-filled file fails ``ChunkFile.decode``
and is deleted by its reader, never served.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import logging
import mmap
import os
import struct
import threading
from collections.abc import Sequence
from typing import Final

from crc32c import crc32c

from hot.region import FileRegion, SegmentFile
from tiering.checksum import crc32c_combine

logger = logging.getLogger("tiering.cache")

MAGIC: Final = b"STC2"
CHUNK_HEADER: Final = struct.Struct(">4sIIIHB")  # magic, crc, index, length, keyLength, flags
MAGIC_V1: Final = b"STCC"  # the first layout: no flags byte
CHUNK_HEADER_V1: Final = struct.Struct(">4sIIIH")
FLAG_VERIFIED: Final = 0x01
_CRC_START: Final = 8
_CRC_FIELDS: Final = struct.Struct(">IIHB")  # the header fields the CRC covers: index .. flags
_ZERO_COPY_MIN_BYTES: Final = 64 << 10  # smaller payloads are copied (4 KiB of padding would not pay)
_tmp_ids = itertools.count()
_NOGIL_COPY_BYTES: Final = 256 << 10  # smaller copies keep the GIL (a foreign call costs more)
_MAX_KEY_BYTES: Final = 4096  # more than any key a store accepts (1024 bytes and a prefix)
_DIRECT_ALIGN: Final = 4096  # O_DIRECT alignment of buffer, offset and length (4Kn disks too)
_direct_io = hasattr(os, "O_DIRECT")  # cleared the first time a filesystem refuses it
_thread_local = threading.local()


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
