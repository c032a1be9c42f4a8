"""Pipelined requests on one connection are answered in order, and produce keeps their order."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from hot.records import RecordInput, build_batch
from kwire import ApiKey, decode_response, encode_request
from kwire.messages.api_versions import ApiVersionsRequest
from kwire.messages.metadata import MetadataRequest
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(120)


def _read_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def test_pipelined_requests_answered_in_order(broker: BrokerProcess) -> None:
    topic = f"pipe-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    host, port = broker.bootstrap.rsplit(":", 1)
    plan: list[tuple[int, int]] = []
    payload = b""
    for i in range(60):
        kind = i % 3
        if kind == 0:
            key, ver, req = (
                ApiKey.API_VERSIONS,
                3,
                ApiVersionsRequest(client_software_name="t", client_software_version="1"),
            )
        elif kind == 1:
            key, ver, req = ApiKey.METADATA, 12, MetadataRequest(topics=None)
        else:
            batch = build_batch([RecordInput(None, f"m{i}".encode())])
            req = ProduceRequest(
                acks=-1,
                timeout_ms=10000,
                topic_data=(
                    ProduceTopicData(
                        name=topic, partition_data=(ProducePartitionData(index=0, records=batch),)
                    ),
                ),
            )
            key, ver = ApiKey.PRODUCE, 9
        body = encode_request(key, ver, 1000 + i, "pipeline", req)
        payload += struct.pack(">i", len(body)) + body
        plan.append((key, ver))
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(payload)  # all 60 requests before reading anything
        offsets = []
        for i, (key, ver) in enumerate(plan):
            corr, resp = decode_response(key, ver, _read_frame(s))
            assert corr == 1000 + i
            if key == ApiKey.PRODUCE:
                part = resp.responses[0].partition_responses[0]
                assert part.error_code == 0
                offsets.append(part.base_offset)
    assert offsets == list(range(20))  # appended in the order sent
    from confluent_kafka import Consumer, TopicPartition

    # assign() reads by offset; nothing to commit
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    while len(got) < 20:
        m = c.poll(5)
        assert m is not None
        got.append(m.value())
    c.close()
    assert got == [f"m{i}".encode() for i in range(2, 60, 3)]


@pytest.mark.parametrize("mode", ["fsync", "interval"])
def test_produce_to_several_partitions_answers_each(broker: BrokerProcess, mode: str) -> None:
    """One Produce request for 4 partitions, pipelined 5 deep: each partition's batch is
    appended in order and answered with its offset, whether its completion waits (fsync
    mode: for the flush) or not (interval mode: answered without any task per partition)."""
    topic = f"multi-{mode}-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 4, {"strata.flush.mode": mode})
    host, port = broker.bootstrap.rsplit(":", 1)
    payload = b""
    for i in range(5):
        req = ProduceRequest(
            acks=-1,
            timeout_ms=10000,
            topic_data=(
                ProduceTopicData(
                    name=topic,
                    partition_data=tuple(
                        ProducePartitionData(
                            index=p, records=build_batch([RecordInput(None, f"{i}-{p}".encode())])
                        )
                        for p in range(4)
                    ),
                ),
            ),
        )
        body = encode_request(ApiKey.PRODUCE, 9, 500 + i, "multi", req)
        payload += struct.pack(">i", len(body)) + body
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(payload)
        for i in range(5):
            corr, resp = decode_response(ApiKey.PRODUCE, 9, _read_frame(s))
            assert corr == 500 + i
            parts = sorted(resp.responses[0].partition_responses, key=lambda p: p.index)
            assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(p, 0, i) for p in range(4)]


def _ask(s: socket.socket, requests: list[tuple[int, int, MetadataRequest]]) -> list[tuple[int, bytes]]:
    """Pipelines Metadata requests (correlation id, version, request); their raw answers."""
    payload = b""
    for corr, ver, req in requests:
        body = encode_request(ApiKey.METADATA, ver, corr, "meta", req)
        payload += struct.pack(">i", len(body)) + body
    s.sendall(payload)
    return [(ver, _read_frame(s)) for _, ver, _ in requests]


def test_metadata_answers_reused_follow_the_view(broker: BrokerProcess) -> None:
    """Metadata answers reused from api.handlers.metadata_cache: byte for byte the
    handler's answer under each request's own correlation id (flexible and not), and a
    topic change shows in the very next answer. Unknown topics still go to the handler."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    from kwire.messages.metadata import MetadataRequestTopic

    topic = f"meta-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    one = MetadataRequest(topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False)
    missing = MetadataRequest(
        topics=(MetadataRequestTopic(name=f"none-{topic}"),), allow_auto_topic_creation=False
    )
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        plan = [(7000 + i, ver, req) for i, (ver, req) in enumerate([(v, one) for v in (12, 12, 1, 1, 9)])]
        plan += [(7100, 12, MetadataRequest(topics=None)), (7101, 12, MetadataRequest(topics=None))]
        plan += [(7200, 12, missing), (7201, 12, missing)]
        answers = _ask(s, plan)
        for (corr, ver, _), (_, raw) in zip(plan, answers, strict=True):
            assert decode_response(ApiKey.METADATA, ver, raw)[0] == corr
        # a miss (the handler's bytes) and a hit (the cache's) agree after the correlation id
        assert answers[0][1][4:] == answers[1][1][4:] and answers[2][1][4:] == answers[3][1][4:]
        assert answers[5][1][4:] == answers[6][1][4:]
        decoded = [decode_response(ApiKey.METADATA, ver, raw)[1] for ver, raw in answers]
        assert [len(t.partitions) for t in decoded[0].topics] == [1]
        assert topic in {t.name for t in decoded[5].topics}
        assert [t.error_code for t in decoded[7].topics] == [3]  # UNKNOWN_TOPIC_OR_PARTITION

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
        # CreatePartitions answers once the view has the new count: the next answer shows it
        _, raw = _ask(s, [(7300, 12, one)])[0]
        assert [len(t.partitions) for t in decode_response(ApiKey.METADATA, 12, raw)[1].topics] == [3]


@pytest.mark.parametrize("mode", ["fsync", "interval"])
def test_fast_and_general_produce_keep_the_order_sent(broker: BrokerProcess, mode: str) -> None:
    """Plain Produce requests (appended by the fast path as they are read,
    api.handlers.produce_fast) pipelined between requests the general path takes (a
    topic named twice): every batch lands in the order sent, each answer in order."""
    topic = f"mixed-{mode}-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1, {"strata.flush.mode": mode})
    host, port = broker.bootstrap.rsplit(":", 1)
    payload = b""
    sent: list[bytes] = []
    batches_per_request: list[int] = []
    for i in range(30):
        values = [f"{i}-a".encode(), f"{i}-b".encode()] if i % 3 == 0 else [f"{i}".encode()]
        sent += values
        batches_per_request.append(len(values))
        topics = tuple(
            ProduceTopicData(
                name=topic,
                partition_data=(ProducePartitionData(index=0, records=build_batch([RecordInput(None, v)])),),
            )
            for v in values
        )
        req = ProduceRequest(acks=1, timeout_ms=10000, topic_data=topics)
        body = encode_request(ApiKey.PRODUCE, 9, 700 + i, "mixed", req)
        payload += struct.pack(">i", len(body)) + body
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(payload)
        expected = 0
        for i, n in enumerate(batches_per_request):
            corr, resp = decode_response(ApiKey.PRODUCE, 9, _read_frame(s))
            assert corr == 700 + i
            parts = [p for t in resp.responses for p in t.partition_responses]
            assert [(p.error_code, p.base_offset) for p in parts] == [(0, expected + k) for k in range(n)]
            expected += n
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes | None] = []
    while len(got) < len(sent):
        m = c.poll(5)
        assert m is not None
        got.append(m.value())
    c.close()
    assert got == sent
