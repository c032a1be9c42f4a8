"""A partition's consumer lag (kclient.lag), as Kafka's tools compute it: the high
watermark minus the committed offset, never negative, None when either side is unknown."""

from __future__ import annotations

import pytest

from kclient.lag import partition_lag


@pytest.mark.parametrize(
    ("committed", "log_end", "lag"),
    [
        (0, 0, 0),
        (3, 10, 7),
        (10, 10, 0),
        (12, 10, 0),  # committed beyond the end (topic recreated): 0, never negative
        (None, 10, None),  # nothing committed yet
        (-1, 10, None),  # Kafka's "no offset" sentinel
        (5, None, None),  # partition not served
        (5, -1, None),
    ],
)
def test_partition_lag(committed: int | None, log_end: int | None, lag: int | None) -> None:
    assert partition_lag(committed, log_end) == lag
