"""The bucket key layout: stable strings, spread, and lossless parsing."""

from __future__ import annotations

import hashlib
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hot.errors import InvalidRequestError, InvalidTopicError
from tiering.keys import (
    HASH_PREFIX_LEN,
    TOPICS_PREFIX,
    ParsedSegmentKey,
    SegmentFileKind,
    manifest_key,
    parse_partition_key,
    parse_segment_key,
    parse_topic_manifest_key,
    partition_root,
    segment_keys,
    spillover_manifest_key,
    topic_manifest_key,
)
from tiering.store import validate_key

TID = uuid.UUID("12345678-1234-5678-1234-567812345678")
SID = uuid.UUID("00000000-0000-4000-8000-000000000001")
ROOT0 = "b4f4/orders-12345678123456781234567812345678/0"
STEM = f"{ROOT0}/segments/00000000000000001234-00000000000040008000000000000001"


def test_golden_keys() -> None:
    """These strings are a storage format: changing them orphans every existing bucket."""
    assert partition_root("orders", TID, 0) == ROOT0
    assert partition_root("orders", TID, 1) == "7aa2/orders-12345678123456781234567812345678/1"
    assert manifest_key("orders", TID, 7) == "531e/orders-12345678123456781234567812345678/7/manifest.json"
    keys = segment_keys("orders", TID, 0, 1234, SID)
    assert keys.log == f"{STEM}.log"
    assert keys.index == f"{STEM}.index"
    assert keys.timeindex == f"{STEM}.timeindex"
    assert keys.producer_snapshot == f"{STEM}.snapshot"
    assert keys.leader_epoch_checkpoint == f"{STEM}.leader-epoch-checkpoint"
    assert spillover_manifest_key("orders", TID, 0, 0, 999, digest="abcdef0123456789") == (
        f"{ROOT0}/spillover/00000000000000000000-00000000000000000999-abcdef0123456789.json"
    )
    assert spillover_manifest_key("orders", TID, 0, 5, 9) == (
        f"{ROOT0}/spillover/00000000000000000005-00000000000000000009.json"
    )
    assert topic_manifest_key("orders") == "topics/orders.json"
    assert TOPICS_PREFIX == "topics/"


def test_hash_prefix_is_sha256_of_the_partition_path() -> None:
    body = f"orders-{TID.hex}/0"
    assert ROOT0.split("/")[0] == hashlib.sha256(body.encode()).hexdigest()[:HASH_PREFIX_LEN]


def test_hash_prefix_spreads_partitions() -> None:
    roots = [partition_root("hot-topic", TID, p) for p in range(2000)]
    prefixes = [r.split("/")[0] for r in roots]
    assert all(len(p) == HASH_PREFIX_LEN for p in prefixes)
    # 2000 draws from 65536 values: ~30 expected collisions; a broken hash would collapse.
    assert len(set(prefixes)) > 1900
    assert len({p[0] for p in prefixes}) == 16
    # Different topics with the same partition land in different ranges too.
    assert len({partition_root(f"t{i}", TID, 0).split("/")[0] for i in range(200)}) > 190


def test_segment_keys_sort_by_offset() -> None:
    offsets = [0, 9, 10, 99, 100, 12345, 2**40, 2**63 - 1]
    keys = [segment_keys("t", TID, 0, o, uuid.uuid4()).log for o in offsets]
    assert sorted(keys) == keys


def test_every_key_is_a_legal_object_key() -> None:
    for k in [
        manifest_key("a.b_c-d", TID, 0),
        topic_manifest_key(".hidden"),
        spillover_manifest_key("x", TID, 2, 0, 1, digest="ff"),
        *segment_keys("x", TID, 2, 0, SID).all(),
    ]:
        assert validate_key(k) == k


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "a b", "ü", "x" * 250, "a\x00"])
def test_illegal_topics_rejected(topic: str) -> None:
    with pytest.raises(InvalidTopicError):
        partition_root(topic, TID, 0)
    with pytest.raises(InvalidTopicError):
        topic_manifest_key(topic)


def test_illegal_numbers_rejected() -> None:
    with pytest.raises(InvalidRequestError):
        partition_root("t", TID, -1)
    with pytest.raises(InvalidRequestError):
        partition_root("t", TID, True)
    with pytest.raises(InvalidRequestError):
        segment_keys("t", TID, 0, -5, SID)
    with pytest.raises(InvalidRequestError):
        segment_keys("t", TID, 0, 0, "not-a-uuid")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        spillover_manifest_key("t", TID, 0, 10, 9)
    with pytest.raises(InvalidRequestError):
        spillover_manifest_key("t", TID, 0, 0, 9, digest="../x")
    with pytest.raises(InvalidRequestError):
        partition_root("t", "1234", 0)  # type: ignore[arg-type]


topics = st.from_regex(r"[a-zA-Z0-9._-]{1,60}", fullmatch=True).filter(lambda t: t not in (".", ".."))


@given(
    topic=topics,
    topic_id=st.uuids(),
    partition=st.integers(0, 100_000),
    base=st.integers(0, 2**63 - 1),
    segment_id=st.uuids(),
)
def test_parse_segment_key_round_trip(
    topic: str, topic_id: uuid.UUID, partition: int, base: int, segment_id: uuid.UUID
) -> None:
    keys = segment_keys(topic, topic_id, partition, base, segment_id)
    for kind in SegmentFileKind:
        parsed = parse_segment_key(keys.for_kind(kind))
        assert parsed == ParsedSegmentKey(topic, topic_id, partition, base, segment_id, kind)
    p = parse_partition_key(manifest_key(topic, topic_id, partition))
    assert p is not None and (p.topic, p.topic_id, p.partition, p.rest) == (
        topic,
        topic_id,
        partition,
        "manifest.json",
    )
    assert parse_segment_key(manifest_key(topic, topic_id, partition)) is None
    assert parse_topic_manifest_key(topic_manifest_key(topic)) == topic


def test_parse_rejects_foreign_keys() -> None:
    good = segment_keys("orders", TID, 0, 1234, SID).log
    assert parse_segment_key(good) is not None
    wrong_hash = "0000" + good[4:]
    assert parse_segment_key(wrong_hash) is None
    for key in [
        "",
        "random/object",
        good + ".bak",
        good.replace(".log", ".exe"),
        good.replace("/0/", "/00/"),
        good.replace("segments/", "segs/"),
        "topics/orders.json",
        f"{ROOT0}/manifest.json",
    ]:
        assert parse_segment_key(key) is None, key
    assert parse_topic_manifest_key("topics/a/b.json") is None
    assert parse_topic_manifest_key("topics/bad name.json") is None
    assert parse_topic_manifest_key("other/x.json") is None
