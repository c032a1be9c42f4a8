"""Child process of test_offsets_kill9: commits offsets in a loop and prints each commit
once it is acknowledged (durable), until it is SIGKILLed.

    python tests/broker/groups/offsets_child.py <data_dir> <first_offset>

Line printed per acknowledged commit: ``<group> <partition> <offset>``. Offsets grow by one
per commit, across all keys, so every key's offsets only ever increase. A small segment
size makes the store compact often, so kills land inside compactions too.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from broker.groups.offsets import OffsetsLog
from broker.groups.types import OffsetAndMetadata, TopicPartition

GROUPS = ("g0", "g1", "g2")
PARTITIONS = 4
SEGMENT_BYTES = 2048


async def main(data_dir: str, first: int) -> None:
    store = OffsetsLog.open(data_dir, segment_bytes=SEGMENT_BYTES)
    offset = first
    while True:
        # A few commits in flight at once, as from several consumers.
        batch = []
        for _ in range(4):
            group = GROUPS[offset % len(GROUPS)]
            tp = TopicPartition("t", offset % PARTITIONS)
            fut = store.commit(group, {tp: OffsetAndMetadata(offset, 0, "m" * (offset % 7), offset)})
            batch.append((fut, group, tp.partition, offset))
            offset += 1
        for fut, group, partition, off in batch:
            await fut
            sys.stdout.write(f"{group} {partition} {off}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
