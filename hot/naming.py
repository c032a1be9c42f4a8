"""File and directory names built from topic names, made to fit the file-name limit.

Linux filesystems (ext4, xfs, tmpfs, ...) refuse a path component longer than
``NAME_MAX`` = 255 bytes with ENAMETOOLONG. Kafka topic names have at most 249 ASCII
characters, so every name that *appends* something to a topic name must be built so it
fits by construction:

- ``<topic>-<partition>``: a partition directory. Partitions are below
  ``hot.topics.MAX_PARTITIONS`` (10,000), so at most 249 + 1 + 4 = 254 bytes: it fits
  as it is, and it is the one name the topic and partition are parsed from.
- ``<prefix>.<32 hex>-delete``: a partition directory being deleted, or a partition
  directory being built (restore, ``Log.create_at``) before it is renamed into place.
  As in Kafka's ``LocalLog.logDeleteDirName``, ``<prefix>`` is the partition directory's
  name truncated so the whole name fits 255 bytes. Such a directory is recognized by its
  suffix alone and removed at start; nothing ever parses a topic from it.
- ``bounded_name(stem, suffix)``: a file named after a topic (``strata export``'s
  Parquet files): the stem is kept when it fits, else cut and followed by ``.`` and 16
  hex digits of its SHA-256, so two long stems sharing a prefix still get distinct names.
- ``key_to_path_parts``/``path_parts_to_key``: a ``file://`` object store keeps an
  object key as a path, one directory per ``/``-separated key segment. The partition
  root segment ``<topic>-<topic id hex>`` has up to 249 + 1 + 32 = 282 bytes, which S3
  accepts (keys have up to 1,024 bytes) but a file name cannot hold, so the key layout
  stays as it is and only the file store maps a segment longer than 255 bytes to
  several path components (see ``key_to_path_parts``). Segments of up to 255 bytes map
  to themselves, so every store written before keeps its paths.

Everything here is pure: no I/O.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import Final

NAME_MAX: Final = 255  # bytes in one path component (Linux NAME_MAX)
DELETE_DIR_SUFFIX: Final = "-delete"
# A file-store path component of exactly NAME_MAX bytes ending in this marker continues in
# the next component (``key_to_path_parts``).
CONTINUATION: Final = "+"
_HASH_HEX: Final = 16


def name_bytes(name: str) -> int:
    """Length of ``name`` as a file name, in bytes (os.fsencode: UTF-8, surrogateescape)."""
    return len(os.fsencode(name))


def _truncate(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` of at most ``max_bytes`` bytes, cut between
    characters (topic names are ASCII, so characters are bytes)."""
    raw = os.fsencode(text)
    if len(raw) <= max_bytes:
        return text
    return raw[: max(max_bytes, 0)].decode("utf-8", "ignore")


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``: a partition's directory (at most 254 bytes for a Kafka-legal
    topic name and a partition below 10,000)."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) for a directory name ``<topic>-<partition>``, else None (a
    ``*-delete`` directory, too, never parses)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or not part.isascii():
        return None
    return topic, int(part)


def delete_dir_name(dir_name: str, unique: str | None = None) -> str:
    """``<dir_name>.<unique>-delete`` with ``dir_name`` truncated so it fits ``NAME_MAX``
    bytes (Kafka's ``logDeleteDirName``). ``unique`` defaults to a fresh UUID's 32 hex
    digits. Used for a directory being deleted and for one being built (renamed into
    place when complete): a crash leaves a name ``is_delete_dir`` recognizes."""
    tail = f".{unique if unique is not None else uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return _truncate(dir_name, NAME_MAX - name_bytes(tail)) + tail


def delete_dir_path(directory: str, unique: str | None = None) -> str:
    """The path of ``directory``'s ``delete_dir_name`` in the same parent directory."""
    parent, base = os.path.split(os.path.normpath(directory))
    return os.path.join(parent, delete_dir_name(base, unique))


def is_delete_dir(name: str) -> bool:
    """Whether a directory name is a ``delete_dir_name`` (to be removed at start)."""
    return name.endswith(DELETE_DIR_SUFFIX)


def bounded_name(stem: str, suffix: str = "", *, reserve: int = 0) -> str:
    """``stem + suffix`` if it has at most ``NAME_MAX - reserve`` bytes (``reserve``: room
    for a temporary suffix such as ``.tmp``), else ``<cut stem>.<16 hex of sha256(stem)>``
    followed by ``suffix``. Deterministic, and distinct for distinct stems (to the hash's
    2**64 odds)."""
    limit = NAME_MAX - reserve
    if name_bytes(stem) + name_bytes(suffix) <= limit:
        return stem + suffix
    digest = hashlib.sha256(os.fsencode(stem)).hexdigest()[:_HASH_HEX]
    room = limit - name_bytes(suffix) - 1 - _HASH_HEX
    if room < 1:
        raise ValueError(f"suffix {suffix!r} leaves no room for a file name within {limit} bytes")
    return f"{_truncate(stem, room)}.{digest}{suffix}"


def key_to_path_parts(key: str) -> list[str]:
    """The path components a file store keeps object ``key`` under.

    Each ``/``-separated segment of at most ``NAME_MAX`` bytes is one component, as it
    is. A longer segment is cut into components of exactly ``NAME_MAX`` bytes, each
    ``NAME_MAX - 1`` bytes of the segment followed by ``CONTINUATION`` ("+"), and a last
    component with the rest (1 to ``NAME_MAX`` bytes); the segment is their
    concatenation without the markers. A component of ``NAME_MAX`` bytes ending in "+" is
    thus always a continuation: ValueError for a key that cannot be kept unambiguously (a
    segment, or the rest of a long one, of ``NAME_MAX`` bytes that ends in "+", or a rest
    that is "." or ".."; Strata's key layout makes none).
    """
    parts: list[str] = []
    for segment in key.split("/"):
        raw = os.fsencode(segment)
        while len(raw) > NAME_MAX:
            parts.append(os.fsdecode(raw[: NAME_MAX - 1]) + CONTINUATION)
            raw = raw[NAME_MAX - 1 :]
        last = os.fsdecode(raw)
        if _is_continuation(last) or (last in (".", "..") and last != segment):
            raise ValueError(
                f"object key segment {segment[:80]!r}... cannot be kept in a file store: with "
                f"{len(os.fsencode(segment))} bytes it would read back as a different key"
            )
        parts.append(last)
    return parts


def _is_continuation(part: str) -> bool:
    return part.endswith(CONTINUATION) and name_bytes(part) == NAME_MAX


def path_parts_to_key(parts: list[str]) -> str | None:
    """The key whose ``key_to_path_parts`` are ``parts``; None if the last component is a
    continuation (a directory, never an object)."""
    if not parts or _is_continuation(parts[-1]):
        return None
    return _join([*_prefix_pieces(parts[:-1]), parts[-1]])


def key_prefix_of_dirs(parts: list[str]) -> str:
    """What the keys of objects below the directory ``parts`` start with: ``seg/`` for a
    complete segment, the segment's first bytes (no ``/``) for a continuation."""
    return _join(_prefix_pieces(parts))


def _prefix_pieces(parts: list[str]) -> list[str]:
    return [p[: -len(CONTINUATION)] if _is_continuation(p) else p + "/" for p in parts]


def _join(pieces: list[str]) -> str:
    # A continuation may end inside a multi-byte character: join as bytes.
    return os.fsdecode(b"".join(os.fsencode(s) for s in pieces))


__all__ = [
    "CONTINUATION",
    "DELETE_DIR_SUFFIX",
    "NAME_MAX",
    "bounded_name",
    "delete_dir_name",
    "delete_dir_path",
    "is_delete_dir",
    "key_prefix_of_dirs",
    "key_to_path_parts",
    "name_bytes",
    "parse_partition_dir",
    "partition_dir_name",
    "path_parts_to_key",
]
