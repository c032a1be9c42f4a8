"""Spark's partition value for one scan task, shared by the batch reader (``spark.source``)
and the stream reader (``spark.stream``). Pickled to the Python workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import InputPartition

if TYPE_CHECKING:
    from spark.plan import ScanTask


class StrataInputPartition(InputPartition):
    """One scan task (a ``spark.plan.ColdTask`` or ``HotTask``) as Spark's partition value."""

    def __init__(self, task: ScanTask) -> None:
        super().__init__(task)
        self.task = task

    def __repr__(self) -> str:
        return f"StrataInputPartition({self.task!r})"
