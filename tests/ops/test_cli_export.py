"""`strata export` as a user runs it, against a real tiered broker: all or nothing into its
directory, a non-empty directory refused unless --overwrite (so two exports never leave
duplicate rows), the unarchived tail named on stderr or included with --include-hot, and
progress counted as the files are written."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from tests.brokers import ROOT, BrokerProcess, create_topic
from tests.ops.settle import wait_settled

TOPIC = "export-cli"
RECORDS = 600


def strata(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _pairs(out: Path) -> Counter[tuple[int, int]]:
    table = pq.read_table(out)
    return Counter(
        zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
    )


def _tiered(broker_factory: Callable[..., BrokerProcess], records: int, segment_bytes: int) -> BrokerProcess:
    """A broker whose topic holds ``records`` records, every sealed segment uploaded."""
    from confluent_kafka import Producer

    b = broker_factory(
        env={"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100", "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200"}
    )
    size = str(segment_bytes)
    create_topic(
        b.bootstrap, TOPIC, 1, {"segment.bytes": size, "local.retention.bytes": str(2 * segment_bytes)}
    )
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "batch.size": 4096})
    for i in range(records):
        p.produce(TOPIC, value=f"v{i}".encode() + b"t" * 300)
    assert p.flush(30) == 0
    wait_settled(b.http_url, TOPIC)
    return b


def test_export_is_all_or_nothing_and_names_the_tail(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    b = _tiered(broker_factory, RECORDS, 16384)
    out = tmp_path / "exports" / "events"
    base = ("export", "--topic", TOPIC, "--data-dir", str(b.data_dir), "-b", b.bootstrap)

    # archived rows only, and a note on stderr of how many are not archived yet
    r = strata(*base, "--out", str(out), "-o", "json")
    assert r.returncode == 0, r.stderr
    archived = json.loads(r.stdout)["rows"]
    assert 0 < archived < RECORDS
    [note] = [line for line in r.stderr.splitlines() if line.strip()]  # (a transient bar leaves blanks)
    assert note.startswith(
        f"strata: note: {RECORDS - archived:,} records in 1 partition(s) are not archived yet"
    )
    first = _pairs(out)
    assert sorted(first) == [(0, o) for o in range(archived)] and set(first.values()) == {1}

    # the same directory again: refused, untouched
    r = strata(*base, "--out", str(out))
    assert r.returncode == 1 and "is not empty" in r.stderr and "--overwrite" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1
    assert _pairs(out) == first

    # --overwrite replaces it as a whole; --include-hot adds the tail: no pair twice
    r = strata(*base, "--out", str(out), "--overwrite", "--include-hot", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == RECORDS and "note" not in r.stderr
    again = _pairs(out)
    assert sorted(again) == [(0, o) for o in range(RECORDS)] and set(again.values()) == {1}
    # no staging directory is left beside it
    assert sorted(x.name for x in out.parent.iterdir()) == ["events"]

    # an empty existing directory is fine
    empty = tmp_path / "empty"
    empty.mkdir()
    r = strata(*base, "--out", str(empty))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"exported {archived:,} rows to {empty}")

    # a file where the directory should be: click's usage error, nothing written
    target = tmp_path / "a-file"
    target.write_text("x")
    r = strata(*base, "--out", str(target))
    assert r.returncode == 2 and "is a file" in r.stderr and target.read_text() == "x", r.stderr

    # without a broker: said in one line that it could not tell
    assert b.stop() == 0
    r = strata(*base, "--out", str(tmp_path / "offline"))
    assert r.returncode == 0, r.stderr
    assert "strata: note: only archived records were exported; no broker answered" in r.stderr
    offline = sorted(_pairs(tmp_path / "offline"))  # a clean stop uploads the last segment too
    assert len(offline) >= archived and offline == [(0, o) for o in range(len(offline))]
    assert not list(tmp_path.glob(".strata-export-*"))


def test_export_progress_counts_bytes_as_written(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    from api.cli.common import default_object_store
    from spark.export import export, parse_options

    b = _tiered(broker_factory, RECORDS * 2, 65536)
    assert b.stop() == 0

    progress: list[tuple[int, int, int]] = []
    written: list[int] = []
    # small read chunks: several batches per slice, so the bar moves inside a slice
    opts = parse_options(default_object_store(b.data_dir), TOPIC, {"readChunkBytes": "8192"})
    result = export(
        opts,
        tmp_path / "out",
        progress=lambda done, total, rows: progress.append((done, total, rows)),
        written=written.append,
    )
    assert written and written == sorted(written)
    assert written[-1] == sum(f.path.stat().st_size for f in result.files)
    done = [d for d, _, _ in progress]
    assert done == sorted(done) and done[-1] == progress[-1][1] > 0
    assert len(set(done)) > len(result.plan.tasks) + 1  # not one step per slice
