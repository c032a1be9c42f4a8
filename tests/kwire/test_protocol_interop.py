"""Real Kafka clients (librdkafka via confluent-kafka, kafka-python) talk to a minimal
loopback server built only from this codec: version negotiation (including the ApiVersions
fallback) and Metadata must be accepted byte for byte by independent implementations."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hot.batch import iter_batches, set_base_offset
from kwire import (
    ApiKey,
    FetchableTopicResponse,
    FetchPartitionData,
    FetchResponse,
    FrameDecoder,
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    ProducePartitionResponse,
    ProduceResponse,
    ProduceTopicResponse,
    ProtocolError,
    UnsupportedVersionError,
    api_versions_fallback_response,
    api_versions_response,
    decode_request,
    encode_frame,
    encode_response,
)
from kwire.apis import APIS
from kwire.messages.find_coordinator import FindCoordinatorResponse

TOPICS = ("orders", "payments")


@dataclass(frozen=True)
class Region:
    """A stored batch handed to encode_response as a pass-through part (like a file region)."""

    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


class MiniBroker:
    """Answers ApiVersions, Metadata, Produce (into memory), ListOffsets and Fetch (and
    FindCoordinator with COORDINATOR_NOT_AVAILABLE); closes the connection on anything
    else, as Kafka does for requests it cannot serve."""

    def __init__(self) -> None:
        self.log: dict[tuple[str, int], list[tuple[int, int, bytes]]] = {}  # (base, next, batch)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.seen: list[tuple[int, int]] = []
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        except OSError:
            pass
        self.sock.close()
        with self._lock:
            for c in self._conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
        for t in self._threads:
            t.join(timeout=5)
        self._accepter.join(timeout=5)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        dec = FrameDecoder(max_frame_size=1 << 20)
        try:
            while data := conn.recv(65536):
                dec.feed(data)
                while (frame := dec.next_frame()) is not None:
                    parts = self._answer(frame)
                    if parts is None:
                        return
                    # "sendfile" the regions: write their bytes in place, in order
                    out = [p if isinstance(p, bytes) else p.data for p in encode_frame(parts)]  # type: ignore[attr-defined]
                    conn.sendall(b"".join(out))
        except OSError:
            pass
        except BaseException as e:  # surfaced by the test, not swallowed
            self.errors.append(e)
        finally:
            conn.close()

    def _answer(self, frame: bytes) -> list[bytes | object] | None:
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as e:
            self.seen.append((e.header.api_key, e.header.api_version))
            if e.header.api_key == ApiKey.API_VERSIONS:
                return api_versions_fallback_response(e.header)
            return None
        except ProtocolError:
            return None
        self.seen.append((header.api_key, header.api_version))
        if header.api_key == ApiKey.API_VERSIONS:
            return encode_response(header, api_versions_response())
        if header.api_key == ApiKey.METADATA:
            wanted = TOPICS if body.topics is None else tuple(t.name for t in body.topics)
            return encode_response(header, self._metadata(wanted))
        if header.api_key == ApiKey.PRODUCE:
            return encode_response(header, self._produce(body))
        if header.api_key == ApiKey.LIST_OFFSETS:
            return encode_response(header, self._list_offsets(body))
        if header.api_key == ApiKey.FETCH:
            return encode_response(header, self._fetch(body))
        if header.api_key == ApiKey.FIND_COORDINATOR:
            # librdkafka consumers look for their group's coordinator even with assign();
            # closing the connection here would also drop their Fetch in flight on it.
            return encode_response(header, FindCoordinatorResponse(error_code=15))  # not available
        return None

    def _end(self, tp: tuple[str, int]) -> int:
        batches = self.log.get(tp)
        return batches[-1][1] if batches else 0

    def _produce(self, req: Any) -> ProduceResponse:
        topics = []
        for td in req.topic_data:
            parts = []
            for pd in td.partition_data:
                tp = (td.name, pd.index)
                assert isinstance(pd.records, memoryview)  # zero-copy slice of the request frame
                base = self._end(tp)
                for pos, h in iter_batches(pd.records):
                    batch = bytearray(pd.records[pos : pos + h.size])
                    start = self._end(tp)
                    set_base_offset(batch, 0, start)
                    self.log.setdefault(tp, []).append((start, start + h.last_offset_delta + 1, bytes(batch)))
                parts.append(ProducePartitionResponse(index=pd.index, base_offset=base, log_start_offset=0))
            topics.append(ProduceTopicResponse(name=td.name, partition_responses=tuple(parts)))
        return ProduceResponse(responses=tuple(topics))

    def _list_offsets(self, req: Any) -> ListOffsetsResponse:
        return ListOffsetsResponse(
            topics=tuple(
                ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=tuple(
                        ListOffsetsPartitionResponse(
                            partition_index=p.partition_index,
                            offset=0 if p.timestamp == -2 else self._end((t.name, p.partition_index)),
                            leader_epoch=0,
                        )
                        for p in t.partitions
                    ),
                )
                for t in req.topics
            )
        )

    def _fetch(self, req: Any) -> FetchResponse:
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                tp = (t.topic, p.partition)
                regions = [Region(b) for base, nxt, b in self.log.get(tp, []) if nxt > p.fetch_offset]
                parts.append(
                    FetchPartitionData(
                        partition_index=p.partition,
                        high_watermark=self._end(tp),
                        last_stable_offset=self._end(tp),
                        log_start_offset=0,
                        records=regions,
                    )
                )
            topics.append(FetchableTopicResponse(topic=t.topic, partitions=tuple(parts)))
        return FetchResponse(responses=tuple(topics))

    def _metadata(self, names: tuple[str, ...]) -> MetadataResponse:
        return MetadataResponse(
            brokers=(MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port),),
            cluster_id="strata-interop",
            controller_id=1,
            topics=tuple(
                MetadataResponseTopic(
                    name=name,
                    error_code=0 if name in TOPICS else 3,
                    partitions=tuple(
                        MetadataResponsePartition(
                            partition_index=i, leader_id=1, leader_epoch=0, replica_nodes=(1,), isr_nodes=(1,)
                        )
                        for i in range(2)
                    )
                    if name in TOPICS
                    else (),
                )
                for name in names
            ),
        )


@pytest.fixture
def mini_broker() -> Iterator[MiniBroker]:
    b = MiniBroker()
    yield b
    b.close()
    assert not b.errors, b.errors


def test_librdkafka_negotiates_and_reads_metadata(mini_broker: MiniBroker) -> None:
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    admin = admin_mod.AdminClient(
        {"bootstrap.servers": f"127.0.0.1:{mini_broker.port}", "socket.timeout.ms": 10000}
    )
    md = admin.list_topics(timeout=20)
    assert md.cluster_id == "strata-interop"
    assert set(md.topics) == set(TOPICS)
    assert sorted(md.topics["orders"].partitions) == [0, 1]
    assert md.brokers[1].port == mini_broker.port
    assert (ApiKey.API_VERSIONS, 3) in mini_broker.seen  # librdkafka asks v3 first
    assert any(k == ApiKey.METADATA and v >= 9 for k, v in mini_broker.seen)  # a flexible version


def test_kafka_python_negotiates_and_reads_metadata(mini_broker: MiniBroker) -> None:
    kafka_mod = pytest.importorskip("kafka")
    consumer = kafka_mod.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{mini_broker.port}",
        request_timeout_ms=20000,
    )
    try:
        assert consumer.topics() == set(TOPICS)
        assert consumer.partitions_for_topic("payments") == {0, 1}
    finally:
        consumer.close()
    # kafka-python 3.0 asks ApiVersions v4 first: it gets the v0 fallback and retries at v3.
    api_versions_asked = [v for k, v in mini_broker.seen if k == ApiKey.API_VERSIONS]
    assert api_versions_asked[:2] == [4, 3]
    assert (ApiKey.METADATA, APIS[ApiKey.METADATA].max_version) in mini_broker.seen  # the newest both speak


def test_librdkafka_produces_and_kafka_python_consumes(mini_broker: MiniBroker) -> None:
    ck = pytest.importorskip("confluent_kafka")
    kafka_mod = pytest.importorskip("kafka")
    bootstrap = f"127.0.0.1:{mini_broker.port}"
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    for i in range(5):
        producer.produce("orders", key=b"k%d" % i, value=b"v%d" % i, partition=1)
    assert producer.flush(20) == 0
    assert any(k == ApiKey.PRODUCE for k, _ in mini_broker.seen)

    consumer = kafka_mod.KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        request_timeout_ms=20000,
    )
    try:
        consumer.assign([kafka_mod.TopicPartition("orders", 1)])
        got = [(m.offset, m.key, m.value) for _, m in zip(range(5), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]
    assert any(k == ApiKey.FETCH for k, _ in mini_broker.seen)


def test_librdkafka_consumes_file_regions(mini_broker: MiniBroker) -> None:
    ck = pytest.importorskip("confluent_kafka")
    bootstrap = f"127.0.0.1:{mini_broker.port}"
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    for i in range(3):
        producer.produce("payments", value=b"p%d" % i, partition=0)
        assert producer.flush(20) == 0  # one batch per message: several regions per fetch
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g",
            "enable.auto.commit": False,
            "socket.timeout.ms": 10000,
        }
    )
    try:
        consumer.assign([ck.TopicPartition("payments", 0, ck.OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 60  # generous: librdkafka starts slowly on a loaded machine
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value()))
            if len(got) == 3:
                break
    finally:
        consumer.close()
    assert got == [(i, b"p%d" % i) for i in range(3)]
    fetch_versions = {v for k, v in mini_broker.seen if k == ApiKey.FETCH}
    assert fetch_versions and max(fetch_versions) >= 11
