"""Spark's kafka.isolation.level over a tiered transactional partition: read_uncommitted
sees every data record (as a Kafka consumer does), read_committed filters aborted
transactions by the segments' transaction indexes, without a broker, and stops where the
bucket's decided data ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from hot.errors import InvalidConfigError
from hot.records import ControlType, RecordInput, build_batch, decode_batches
from hot.txn_cleaning import AbortedRanges
from hot.txn_index import AbortedTxn
from hot.txn_marker import EndTxnMarker, build_marker_batch
from spark.columnar import decode_columns, frame
from spark.options import ReadOptions
from spark.plan import ColdTask, open_store_from, plan_scan
from spark.scan import read_task
from tests.spark.sparklib import rows_of_table
from tests.tiering.test_txn_tiering import TOPIC, Writer, local_records, write_compaction_history
from tests.tiering.uplib import load_manifest, new_manager, new_service
from tiering.store import SyncObjectStore

ABORT = ControlType.ABORT


def _scan(opts: ReadOptions) -> list[int]:
    plan = plan_scan(opts)
    sync = SyncObjectStore(open_store_from(opts.store))
    out: list[int] = []
    try:
        for task in plan.tasks:
            assert isinstance(task, ColdTask)
            for batch in read_task(task, opts, store=sync):
                out.extend(r.offset for r in rows_of_table(batch))
    finally:
        sync.close()
    return out


def test_isolation_level_option() -> None:
    base = {"topic": "t"}
    assert ReadOptions.parse(base, path="file:///x").isolation_level == 0
    opts = ReadOptions.parse({**base, "kafka.isolation.level": "read_committed"}, path="file:///x")
    assert opts.isolation_level == 1
    with pytest.raises(InvalidConfigError, match=r"kafka\.isolation\.level"):
        ReadOptions.parse({**base, "kafka.isolation.level": "committed"}, path="file:///x")


def test_columnar_filters_aborted_batches_and_fetch_lists() -> None:
    """Producer 7's first transaction aborted, its second committed; markers never rows."""

    def data(off: int, seq: int) -> bytes:
        recs = [RecordInput(b"k", b"v", timestamp=1)]
        return build_batch(
            recs, producer_id=7, producer_epoch=0, base_sequence=seq, transactional=True, base_offset=off
        )

    marker = EndTxnMarker(ABORT, 0)
    buf = (
        data(0, 0)
        + data(1, 1)
        + build_marker_batch(marker, producer_id=7, producer_epoch=0, timestamp=1, base_offset=2)
        + data(3, 2)
        + build_marker_batch(
            EndTxnMarker(ControlType.COMMIT, 0), producer_id=7, producer_epoch=0, timestamp=1, base_offset=4
        )
    )
    assert len(decode_batches(buf)) == 5

    def offsets(**kw: object) -> list[int]:
        got: list[int] = decode_columns(buf, topic="t", partition=0, **kw).batch.column(4).to_pylist()  # type: ignore[arg-type]
        return got

    assert offsets() == [0, 1, 3]  # read_uncommitted
    assert offsets(aborted=AbortedRanges([AbortedTxn(7, 0, 2, 3)])) == [3]
    assert offsets(fetch_aborted=[(7, 0)]) == [3]
    fr = frame(buf)
    assert fr.aborted_in_fetch([(7, 3)]).contains(7, 3)  # its marker (a commit) still ends it


async def test_read_committed_scan_filters_aborted_and_stops_at_open_transactions(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic(TOPIC, 1, {"segment.bytes": "1200", "retention.ms": "-1"})
        log = m.get_log(TOPIC, 0)
        a_first, _ = write_compaction_history(Writer(log))
        log.roll()
        await svc.run_once(retention=False, sweep=False)
        man = await load_manifest(url, m, TOPIC)
        remote_end = man.next_offset()
        assert a_first < remote_end
        records = local_records(log)
        ranges = AbortedRanges(log.collect_aborted_transactions(0, log.log_end_offset))
        data = [(o, pid, txn) for o, pid, txn, control, _ in records if not control]
    finally:
        await svc.close()
        m.close()
    uncommitted = ReadOptions.parse({"topic": TOPIC}, path=url)
    assert sorted(_scan(uncommitted)) == [o for o, _, _ in data if o < remote_end]
    committed = ReadOptions.parse({"topic": TOPIC, "kafka.isolation.level": "read_committed"}, path=url)
    want = [o for o, pid, txn in data if o < a_first and not (txn and ranges.contains(pid, o))]
    assert len(want) < len([o for o, _, _ in data if o < a_first])
    assert sorted(_scan(committed)) == want
