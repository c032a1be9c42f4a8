"""Names built from topic names fit the 255-byte file-name limit by construction
(hot.naming), at the limit: 249-character topics, partitions up to 99,999."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from hot.config import LogConfig
from hot.manager import LogManager
from hot.naming import (
    NAME_MAX,
    bounded_name,
    delete_dir_name,
    delete_dir_path,
    is_delete_dir,
    key_prefix_of_dirs,
    key_to_path_parts,
    name_bytes,
    parse_partition_dir,
    partition_dir_name,
    path_parts_to_key,
)
from hot.topics import MAX_PARTITIONS, MAX_TOPIC_NAME_LENGTH
from tests.hot.hotlib import batch_at
from tiering.keys import manifest_key, segment_keys, spillover_manifest_key, topic_manifest_key

LONGEST = ("long.topic_name-" * 20)[:MAX_TOPIC_NAME_LENGTH]
PARTITIONS = (0, 9, 10, MAX_PARTITIONS - 1, 99_999)


def test_partition_dirs_fit_and_parse_back() -> None:
    for p in PARTITIONS:
        name = partition_dir_name(LONGEST, p)
        assert name_bytes(name) <= NAME_MAX or p >= MAX_PARTITIONS
        assert parse_partition_dir(name) == (LONGEST, p)
    assert name_bytes(partition_dir_name(LONGEST, MAX_PARTITIONS - 1)) == 254


@pytest.mark.parametrize("p", PARTITIONS)
def test_delete_dir_names_fit_and_are_never_parsed(p: int) -> None:
    name = delete_dir_name(partition_dir_name(LONGEST, p))
    assert name_bytes(name) <= NAME_MAX
    assert is_delete_dir(name) and parse_partition_dir(name) is None
    # Kafka's logDeleteDirName: the prefix is cut, the unique part and suffix stay whole.
    assert name.endswith("-delete") and len(name.rsplit(".", 1)[1]) == 32 + len("-delete")
    short = delete_dir_name("t-0", "ab" * 16)
    assert short == "t-0." + "ab" * 16 + "-delete"
    assert delete_dir_path("/d/logs/t-0/", "ab" * 16) == "/d/logs/" + short


def test_bounded_name_keeps_short_names_and_hashes_long_ones() -> None:
    assert bounded_name("t-0-00000000000000000042", ".parquet") == "t-0-00000000000000000042.parquet"
    a = bounded_name(f"{LONGEST}-10-{0:020d}", ".parquet", reserve=4)
    b = bounded_name(f"{LONGEST}-11-{0:020d}", ".parquet", reserve=4)
    assert a != b and name_bytes(a) == NAME_MAX - 4 and a.endswith(".parquet")
    assert a == bounded_name(f"{LONGEST}-10-{0:020d}", ".parquet", reserve=4)  # deterministic


def test_every_object_key_component_fits_a_file_store() -> None:
    tid = uuid.uuid4()
    keys = [topic_manifest_key(LONGEST)]
    for p in PARTITIONS:
        keys.append(manifest_key(LONGEST, tid, p))
        keys.append(spillover_manifest_key(LONGEST, tid, p, 10**19, 10**20 - 1, digest="f" * 64))
        keys.extend(segment_keys(LONGEST, tid, p, 10**20 - 1, uuid.uuid4()).all())
    for key in keys:
        parts = key_to_path_parts(key)
        assert all(1 <= name_bytes(c) <= NAME_MAX for c in parts), key
        assert path_parts_to_key(parts) == key
        # the S3 key layout is unchanged: only the file store splits a long segment
        assert "".join(c.removesuffix("+") if len(c) == NAME_MAX else c + "/" for c in parts)[:-1] == key


def test_key_path_codec_round_trips_and_keeps_short_segments() -> None:
    assert key_to_path_parts("a/b/c.json") == ["a", "b", "c.json"]
    exact = "x" * NAME_MAX  # a segment that fits is kept as it is (older stores stay valid)
    assert key_to_path_parts(f"{exact}/y") == [exact, "y"]
    multi = "é" * 300  # 600 bytes: cut inside a character, joined back as bytes
    parts = key_to_path_parts(f"p/{multi}/o")
    assert all(name_bytes(c) <= NAME_MAX for c in parts) and len(parts) == 5
    assert path_parts_to_key(parts) == f"p/{multi}/o"
    assert key_prefix_of_dirs(parts[:2]) == "p/" + os.fsdecode(os.fsencode(multi)[:254])
    assert path_parts_to_key(parts[:2]) is None  # a continuation is a directory
    # Ambiguous keys are refused, never stored under a path that reads back differently.
    for bad in ("x" * 254 + "+", "a/" + "x" * 508 + "+", "y" * 254 + ".."):
        with pytest.raises(ValueError):
            key_to_path_parts(bad)


def test_longest_topic_create_restore_delete_on_disk(tmp_path: Path) -> None:
    """LogManager end to end at the limit: 11 partitions of a 249-character topic, a
    restored one (Log.create_at stages under a *-delete name), delete, and recovery of
    a truncated *-delete directory left by a crash."""
    other = LONGEST[:-1] + "x"
    with LogManager(tmp_path, LogConfig()) as m:
        m.create_topic(LONGEST, 11)
        m.get_log(LONGEST, 10).append(batch_at(0, 1))
        m.create_topic(other, 11, start_offsets={10: (5, 7)})
        assert m.get_log(other, 10).log_end_offset == 7
        m.delete_topic(LONGEST)
        assert sorted(os.listdir(m.logs_dir)) == sorted(partition_dir_name(other, p) for p in range(11))
    crashed = tmp_path / "logs" / delete_dir_name(partition_dir_name(other, 10))
    os.rename(tmp_path / "logs" / partition_dir_name(other, 10), crashed)
    with LogManager(tmp_path, LogConfig()) as m:
        assert not crashed.exists()
        assert m.get_log(other, 10).log_end_offset == 0  # recreated; the remote part is restore's
        assert [t.name for t in m.topics()] == [other]
