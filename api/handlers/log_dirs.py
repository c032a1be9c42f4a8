"""DescribeLogDirs v1-4: this broker's one log directory (``<data dir>/logs``), the local
size of each partition replica in it (leader or follower; remote segments not counted,
as Kafka counts only the directory's segments) and, from v4, the volume's total and usable
bytes. A null topic list asks for every replica here; partitions this broker does not host
are left out, as Kafka does. DESCRIBE on the cluster is checked by the guard."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kwire import RequestHeader
from kwire import error_table as E
from kwire.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_describe_log_dirs(
    conn: Connection, header: RequestHeader, req: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    broker = conn.broker
    log_dir = str((broker.config.data_dir / "logs").resolve())
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for (topic, partition), rep in sorted(broker.replicas.replicas.items()):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        lg = rep.log
        lag = max(0, lg.high_watermark - lg.log_end_offset)  # a follower behind; 0 on the leader
        by_topic.setdefault(topic, []).append(
            DescribeLogDirsPartition(partition_index=partition, partition_size=lg.size, offset_lag=lag)
        )
    total = usable = -1
    error = E.NONE
    try:
        st = os.statvfs(log_dir)
        total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        error = E.KAFKA_STORAGE_ERROR  # the directory is not readable: offline, as Kafka says
    return DescribeLogDirsResponse(
        results=(
            DescribeLogDirsResult(
                error_code=error,
                log_dir=log_dir,
                topics=tuple(
                    DescribeLogDirsTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
                total_bytes=total,
                usable_bytes=usable,
            ),
        )
    )
