"""Follower segments and local retention as pure logic over real ``Log`` instances (no
etcd, no network): followers start segments exactly where the leader's begin, whatever
their own clock and size settings; follower local retention deletes only what the
manifest covers; partitions a broker does not host get no log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.fetcher import _append_at_leader_bases
from broker.follower_retention import over_local_limit
from broker.log_manager import ClusterLogManager
from broker.read_path import _segment_bases
from hot.config import LogConfig
from hot.errors import NotLeaderError, UnknownTopicOrPartitionError
from hot.log import Log
from hot.records import RecordInput, build_batch


def _batch(n: int = 1, size: int = 0) -> bytes:
    return build_batch([RecordInput(None, b"v%d" % i + b"x" * size) for i in range(n)])


def _whole_batches(chunk: bytes) -> int:
    cut = 0
    while cut + 12 <= len(chunk):
        nxt = cut + 12 + int.from_bytes(chunk[cut + 8 : cut + 12], "big")
        if nxt > len(chunk):
            break
        cut = nxt
    return cut


def test_followers_roll_exactly_where_the_leader_segments_begin(tmp_path: Path) -> None:
    # The leader rolls by size and by age (segment.ms, on its clock); the follower has
    # another segment size (a config change it applied later) and a clock far ahead, and
    # still ends with the leader's boundaries.
    leader = Log.open(
        tmp_path / "leader",
        LogConfig(segment_bytes=2048, segment_ms=1000),
        topic="t",
        partition=0,
        hw_managed_externally=True,
    )
    follower = Log.open(
        tmp_path / "follower",
        LogConfig(segment_bytes=1024, segment_ms=1),
        topic="t",
        partition=0,
        hw_managed_externally=True,
    )
    try:
        now = 1_000_000
        for i in range(60):
            now += 400 if i % 9 else 1500  # now and then older than segment.ms: a time roll
            leader.append(_batch(1 + i % 5, 40), leader_epoch=0, now_ms=now)
        assert len(leader.segments()) > 5
        end = leader.log_end_offset
        data = b"".join(r.read() for r in leader.read(0, 1 << 20, max_offset=end).regions)
        pos = 0
        for size in (3000, 1, 5000, 700, 2500, 1 << 20):
            chunk = data[pos : pos + size]
            cut = _whole_batches(chunk)
            if cut:
                first = follower.log_end_offset
                r = leader.read(first, cut, max_offset=end)
                assert r.size == cut
                bases = _segment_bases(leader, r.first_offset, r.next_offset)
                _append_at_leader_bases(follower, memoryview(chunk[:cut]), bases)
            pos += cut
        assert follower.log_end_offset == end
        assert [s.base_offset for s in follower.segments()] == [s.base_offset for s in leader.segments()]
    finally:
        leader.close()
        follower.close()


def test_append_as_follower_roll_argument(tmp_path: Path) -> None:
    lg = Log.open(
        tmp_path / "l",
        LogConfig(segment_bytes=1024, segment_ms=1),
        topic="t",
        partition=0,
        hw_managed_externally=True,
    )
    try:
        lg.append_as_follower(_offset_batch(0, 3), roll=False, now_ms=10)
        lg.append_as_follower(_offset_batch(3, 3), roll=False, now_ms=10_000)  # past size and age
        assert [s.base_offset for s in lg.segments()] == [0]
        lg.append_as_follower(_offset_batch(6, 1), roll=True)
        lg.append_as_follower(_offset_batch(7, 1), roll=True)
        assert [s.base_offset for s in lg.segments()] == [0, 6, 7]
    finally:
        lg.close()


def _offset_batch(base: int, n: int) -> bytes:
    b = bytearray(_batch(n, 200))
    b[0:8] = base.to_bytes(8, "big")
    return bytes(b)


def test_over_local_limit(tmp_path: Path) -> None:
    lg = Log.open(
        tmp_path / "l",
        LogConfig(segment_bytes=1024, local_retention_bytes=-2, retention_bytes=-1),
        topic="t",
        partition=0,
        hw_managed_externally=True,
    )
    try:
        for _ in range(8):
            lg.append(_batch(3, 200), leader_epoch=0)
        assert len(lg.segments()) > 2
        assert not over_local_limit(lg, 0)  # no local limit: nothing could go
        lg.update_config(LogConfig(segment_bytes=1024, local_retention_bytes=1500))
        assert over_local_limit(lg, 0)
    finally:
        lg.close()


def test_no_log_for_a_partition_hosted_elsewhere(tmp_path: Path) -> None:
    m = ClusterLogManager(tmp_path / "data")
    m.hosted = lambda topic, p: p == 1
    m.open()
    try:
        m.create_topic("t", 3, {}, topic_id=uuid.uuid4())
        assert sorted(p.name for p in (tmp_path / "data" / "logs").iterdir() if p.is_dir()) == ["t-1"]
        assert m.get_log("t", 1).partition == 1
        with pytest.raises(NotLeaderError):
            m.get_log("t", 0)
        with pytest.raises(UnknownTopicOrPartitionError):
            m.get_log("t", 3)
        # Taking on a replica creates its log.
        m.hosted = lambda topic, p: True
        assert m.ensure_log("t", 2).partition == 2
        with pytest.raises(UnknownTopicOrPartitionError):
            m.ensure_log("t", 7)
    finally:
        m.close()
    # Reopened: existing directories are opened, no new ones are made.
    m = ClusterLogManager(tmp_path / "data")
    m.hosted = lambda topic, p: False
    m.open()
    try:
        assert {lg.partition for lg in m.logs()} == {1, 2}
    finally:
        m.close()


def test_segment_bases_tag_round_trips_and_kafka_clients_skip_it() -> None:
    from kwire import ApiKey, RequestHeader
    from kwire.codec import decode_response, encode_response
    from kwire.messages.fetch import FetchableTopicResponse, FetchPartitionData, FetchResponse

    kp_consumer = pytest.importorskip("kafka.protocol.consumer")
    plain = FetchPartitionData(partition_index=0, high_watermark=9, records=b"")
    tagged = FetchPartitionData(partition_index=0, high_watermark=9, records=b"", segment_bases=(0, 512))
    frames = []
    for p in (plain, tagged):
        resp = FetchResponse(responses=(FetchableTopicResponse(topic="t", partitions=(p,)),))
        parts = encode_response(RequestHeader(ApiKey.FETCH, 12, 1, "x"), resp)
        frame = b"".join(x if isinstance(x, bytes | bytearray) else bytes(x) for x in parts)  # type: ignore[arg-type]
        assert decode_response(ApiKey.FETCH, 12, frame)[1] == resp
        frames.append(frame)
    # kafka-python (Kafka's JSON schemas) reads the tagged response as the plain one.
    cls = kp_consumer.FetchResponse
    header_len = 5  # correlation id and the (empty) tagged fields of response header v1
    plain_kp = cls.decode(frames[0][header_len:], version=12)
    tagged_kp = cls.decode(frames[1][header_len:], version=12)
    assert tagged_kp.responses[0].partitions[0].high_watermark == 9
    assert plain_kp.responses[0].partitions[0].high_watermark == 9
