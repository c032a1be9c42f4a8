# hot/_recordwalk.c: the record walk of hot.record_validation.check_records, in C.

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
