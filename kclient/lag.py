"""Consumer-group lag of one partition, as Kafka's tools compute it. Pure.

Lag = log end offset - committed offset, where "log end offset" is what Kafka's own tools
call it: the offset ListOffsets(LATEST) returns, i.e. the **high watermark** (the first
offset a consumer cannot read yet). Using the high watermark rather than the next offset
to be assigned keeps records not yet durable (fsync mode) out of the lag: a consumer that
has read everything it can has lag 0. A committed offset beyond the end (the topic was
deleted and recreated) counts as lag 0, never negative. Either side unknown (nothing
committed yet, a partition not served) is lag None, which Kafka's tools print as "-".

Shared by the client (KafkaClient.describe_group_lag, over the wire) and the broker's own
view of its groups (broker.group_lag, from the coordinator), so both report the same number.
"""

from __future__ import annotations


def partition_lag(committed: int | None, log_end: int | None) -> int | None:
    """Lag of one partition; None when either side is unknown."""
    if committed is None or committed < 0 or log_end is None or log_end < 0:
        return None
    return max(0, log_end - committed)
