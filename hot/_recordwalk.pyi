# hot/_recordwalk.c: the record walk of hot.record_validation.check_records, in C.

from typing import Any

class InvalidRecord(ValueError):
    """args: (index of the first bad record, message)."""

def walk(
    data: bytes | bytearray | memoryview,
    records_count: int,
    last_offset_delta: int,
    base_timestamp: int,
    require_keys: bool,
    /,
) -> int | list[int]: ...
def scan(
    data: bytes | bytearray | memoryview,
    max_size: int,
    log_append_time: bool,
    require_keys: bool,
    max_uncompressed: int,
    /,
) -> list[tuple[Any, ...]] | None: ...
def crc32c(data: bytes | bytearray | memoryview, /) -> int: ...
def write_stamped(
    fd: int,
    data: bytes | bytearray | memoryview,
    position: int,
    size: int,
    file_position: int,
    base_offset: int,
    leader_epoch: int,
    /,
) -> None: ...
def produce_one(
    frame: bytes | bytearray | memoryview, /
) -> tuple[int, int, int, bytes, int, int, int] | None: ...
def produce_answer(
    correlation: bytes,
    head: bytes,
    tail: bytes,
    version: int,
    index: int,
    base_offset: int,
    log_append_time_ms: int,
    log_start_offset: int,
    /,
) -> bytes: ...
def fetch_one(
    frame: bytes | bytearray | memoryview, /
) -> (
    tuple[int, int, int, str | None, int, int, int, bool, bool, str | None, bytes, int, int, int, int] | None
): ...
