# Type stub of the C record decoder (spark/_decode.c; see there for the buffers' layout).
from collections.abc import Sequence

from typing_extensions import Buffer

def decode_records(
    payloads: list[bytes | memoryview],
    counts: Buffer,
    base_offsets: Buffer,
    last_deltas: Buffer,
    base_ts: Buffer,
    max_ts: Buffer,
    log_append: Buffer,
    start_offset: int,
    end_offset: int,
    out: Sequence[Buffer],
) -> tuple[int, int, int, int, int] | None: ...
