"""A small blocking Kafka client over our own codec, for the CLI and tools.

It negotiates versions with ApiVersions, then speaks the highest version both sides
support. Error codes in responses become hot.errors exceptions.
"""

from __future__ import annotations

import socket
import struct
from types import TracebackType
from typing import Any

from api.config import HostPort
from api.protocol import ApiKey, decode_response, encode_request
from api.protocol.apis import APIS
from api.protocol.messages.api_versions import ApiVersionsRequest
from api.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from api.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from api.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from api.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from api.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from hot.errors import StrataError, error_for_code

_SIZE = struct.Struct(">i")


class KafkaClient:
    def __init__(self, sock: socket.socket, client_id: str = "strata-cli") -> None:
        self.sock = sock
        self.client_id = client_id
        self._correlation = 0
        self.versions: dict[int, int] = {}

    @classmethod
    def connect(cls, addr: HostPort, timeout: float = 30.0) -> KafkaClient:
        sock = socket.create_connection((addr.host, addr.port), timeout=timeout)
        client = cls(sock)
        resp = client._call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        for v in resp.api_keys:
            ours = APIS.get(v.api_key)
            if ours is not None and v.max_version >= ours.min_version:
                client.versions[v.api_key] = min(v.max_version, ours.max_version)
        return client

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise StrataError("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _call(self, api_key: int, version: int, request: Any) -> Any:
        self._correlation += 1
        payload = encode_request(api_key, version, self._correlation, self.client_id, request)
        self.sock.sendall(_SIZE.pack(len(payload)) + payload)
        (size,) = _SIZE.unpack(self._recv_exact(4))
        correlation, response = decode_response(api_key, version, self._recv_exact(size))
        if correlation != self._correlation:
            raise StrataError(f"correlation id mismatch: sent {self._correlation}, got {correlation}")
        return response

    def call(self, api_key: int, request: Any) -> Any:
        version = self.versions.get(api_key)
        if version is None:
            raise StrataError(f"broker does not support {APIS[api_key].name}")
        return self._call(api_key, version, request)

    # -- admin operations -----------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        req = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
                ),
            ),
            timeout_ms=30000,
        )
        for t in self.call(ApiKey.CREATE_TOPICS, req).topics:
            if t.error_code:
                raise error_for_code(t.error_code, t.error_message)

    def delete_topic(self, name: str) -> None:
        version = self.versions.get(ApiKey.DELETE_TOPICS, 0)
        if version >= 6:
            req = DeleteTopicsRequest(topics=(DeleteTopicState(name=name),), timeout_ms=30000)
        else:
            req = DeleteTopicsRequest(topic_names=(name,), timeout_ms=30000)
        for t in self.call(ApiKey.DELETE_TOPICS, req).responses:
            if t.error_code:
                raise error_for_code(t.error_code, t.error_message)

    def list_topics(self) -> list[dict[str, Any]]:
        resp = self.call(ApiKey.METADATA, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        return [{"name": t.name, "partitions": len(t.partitions)} for t in resp.topics if not t.error_code]

    def describe_topic(self, name: str) -> dict[str, Any]:
        md = self.call(
            ApiKey.METADATA,
            MetadataRequest(topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=False),
        )
        topic = md.topics[0]
        if topic.error_code:
            raise error_for_code(topic.error_code, f"topic {name!r}: Kafka error {topic.error_code}")
        parts = [p.partition_index for p in topic.partitions]

        def offsets(ts: int) -> dict[int, int]:
            req = ListOffsetsRequest(
                topics=(
                    ListOffsetsTopic(
                        name=name,
                        partitions=tuple(
                            ListOffsetsPartition(partition_index=p, timestamp=ts) for p in parts
                        ),
                    ),
                )
            )
            out = {}
            for t in self.call(ApiKey.LIST_OFFSETS, req).topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for_code(p.error_code)
                    out[p.partition_index] = p.offset
            return out

        start, end = offsets(-2), offsets(-1)
        cfg = self.call(
            ApiKey.DESCRIBE_CONFIGS,
            DescribeConfigsRequest(resources=(DescribeConfigsResource(resource_type=2, resource_name=name),)),
        )
        result = cfg.results[0]
        if result.error_code:
            raise error_for_code(result.error_code, result.error_message)
        leaders = {p.partition_index: p.leader_id for p in topic.partitions}
        return {
            "name": name,
            "topic_id": str(topic.topic_id),
            "partitions": [
                {"partition": p, "leader": leaders[p], "log_start_offset": start[p], "high_watermark": end[p]}
                for p in sorted(parts)
            ],
            "configs": {c.name: c.value for c in result.configs},
        }
