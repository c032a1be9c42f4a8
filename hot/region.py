"""A byte range of an open segment file: what a fetch hands to the network layer.

The network layer sends it with ``os.sendfile(sock, region.file.fileno(), position,
length)`` (zero copy) or calls ``read()``. A region holds a reference to the file
object itself, not to a path or a bare descriptor: a segment deleted by retention
while a fetch is in flight therefore stays readable (the inode lives while it is
open), and its descriptor cannot be closed and reused under the reader's feet.
Segments never close their read file explicitly; the last reference going away
closes it (``SegmentFile.__del__``).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

from hot.errors import CorruptLogError, LogClosedError, StorageError


class SegmentFile(io.FileIO):
    """A read-only segment file shared by a segment and the regions it handed out.

    Closed when the last reference goes away, quietly (no ResourceWarning: that is the
    intended way to release it).
    """

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``length`` bytes at ``position`` of ``file`` (whole record batches)."""

    file: io.FileIO
    path: str
    position: int
    length: int

    def read(self) -> bytes:
        """The bytes of the region. A file shorter than the region is a CorruptLogError."""
        try:
            fd = self.file.fileno()
        except ValueError:
            raise LogClosedError(f"segment file {self.path} was closed") from None
        if self.length <= 0:
            return b""
        try:
            data = os.pread(fd, self.length, self.position)
            if len(data) == self.length:
                return data
            parts = [data]
            got = len(data)
            while got < self.length:
                chunk = os.pread(fd, self.length - got, self.position + got)
                if not chunk:
                    raise CorruptLogError(
                        self.path,
                        self.position + got,
                        f"short read: file ends {self.length - got} bytes before the end of the region",
                    )
                parts.append(chunk)
                got += len(chunk)
            return b"".join(parts)
        except OSError as e:
            raise StorageError(f"read of {self.path} at {self.position} failed: {e}") from e
