"""A small blocking Kafka client over our own codec, for the CLI and tools.

It negotiates versions with ApiVersions, then speaks the highest version both sides
support. Error codes in responses become hot.errors exceptions (kwire.error_table).
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import struct
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

from hot.errors import AuthenticationError, GroupIdNotFoundError, StrataError, TlsError
from kclient.lag import partition_lag
from kclient.scram import ScramClient
from kclient.security import ClientSecurity
from kwire import ApiKey, decode_response, encode_request
from kwire.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from kwire.address import HostPort
from kwire.apis import APIS
from kwire.consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolError, decode_assignment
from kwire.error_table import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    NON_EMPTY_GROUP,
    NOT_LEADER_OR_FOLLOWER,
    error_for_code,
)
from kwire.messages.acls import (
    AclCreation,
    CreateAclsRequest,
    DeleteAclsFilter,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from kwire.messages.alter_client_quotas import AlterClientQuotasRequest, AlterEntryData, OpData
from kwire.messages.api_versions import ApiVersionsRequest
from kwire.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kwire.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kwire.messages.delete_groups import DeleteGroupsRequest
from kwire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from kwire.messages.describe_client_quotas import DescribeClientQuotasRequest, EntityData
from kwire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from kwire.messages.describe_groups import DescribeGroupsRequest
from kwire.messages.find_coordinator import FindCoordinatorRequest
from kwire.messages.list_groups import ListGroupsRequest
from kwire.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic
from kwire.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kwire.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kwire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from kwire.messages.sasl_authenticate import SaslAuthenticateRequest
from kwire.messages.sasl_handshake import SaslHandshakeRequest

_SIZE = struct.Struct(">i")
_GROUP_ERRORS = {
    GROUP_ID_NOT_FOUND: "the group does not exist",
    NON_EMPTY_GROUP: "the group still has members",
}


# This client names topics in its requests: Fetch v13+ would need their ids instead.
_CLIENT_MAX_VERSIONS: dict[int, int] = {ApiKey.FETCH: 12}


def _code_name(code: int) -> str:
    """``NAME (Kafka error N)``: the protocol guide's name, so that a message can be looked up."""
    from kwire import error_table

    names = {v: k for k, v in vars(error_table).items() if k.isupper() and isinstance(v, int)}
    return f"{names.get(code, 'error')} (Kafka error {code})"


def topic_error(name: str, code: int, message: str | None = None) -> str:
    """The one wording of a topic's error code: ``topic 'x' does not exist`` for an
    unknown topic, else the code's name and the broker's message, if any."""
    from kwire.error_table import UNKNOWN_TOPIC_OR_PARTITION

    if code == UNKNOWN_TOPIC_OR_PARTITION:
        return f"topic {name!r} does not exist"  # the CLI's one wording of it
    return f"topic {name!r}: {_code_name(code)}{f': {message}' if message else ''}"


# Kafka's ConfigSource, as an operator reads it: set on the topic, inherited from the
# broker's configuration (dynamic or static), or the built-in default.
_SOURCES = {1: "topic", 2: "broker", 3: "broker", 4: "broker", 5: "default"}


def config_source(source: int, is_default: bool) -> str:
    """``topic``, ``broker`` or ``default``: where a topic's config value comes from
    (DescribeConfigs v1+ ``config_source``; v0 only says whether it is the default)."""
    if source < 0:
        return "default" if is_default else "topic"
    return _SOURCES.get(source, "unknown")


class KafkaClient:
    def __init__(self, sock: socket.socket, client_id: str = "strata-cli") -> None:
        self.sock = sock
        self.client_id = client_id
        self._correlation = 0
        self.versions: dict[int, int] = {}
        self._timeout = 30.0
        self._security: ClientSecurity | None = None  # how another broker of the cluster is opened

    @classmethod
    def connect(
        cls, addr: HostPort, timeout: float = 30.0, security: ClientSecurity | None = None
    ) -> KafkaClient:
        """Connect, negotiate versions and, with ``security``, speak TLS and authenticate."""
        sec = security or ClientSecurity()
        sock = socket.create_connection((addr.host, addr.port), timeout=timeout)
        try:
            if sec.tls:
                try:
                    sock = sec.ssl_context().wrap_socket(sock, server_hostname=addr.host)
                except ssl.SSLError as exc:
                    raise TlsError(f"TLS handshake with {addr} failed: {exc.reason or exc}") from None
            client = cls(sock)
            client._timeout, client._security = timeout, sec
            resp = client._call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            for v in resp.api_keys:
                ours = APIS.get(v.api_key)
                if ours is not None and v.max_version >= ours.min_version:
                    mine = _CLIENT_MAX_VERSIONS.get(v.api_key, ours.max_version)
                    client.versions[v.api_key] = min(v.max_version, mine)
            if sec.sasl:
                client._authenticate(sec)
        except BaseException:
            sock.close()
            raise
        return client

    def _authenticate(self, sec: ClientSecurity) -> None:
        # SaslHandshake v1, then the tokens in SaslAuthenticate requests (KIP-152).
        hs = self._call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=sec.mechanism))
        if hs.error_code:
            raise error_for_code(
                hs.error_code,
                f"SASL mechanism {sec.mechanism} not enabled (broker offers {list(hs.mechanisms)})",
            )
        assert sec.username is not None and sec.password is not None
        if sec.mechanism == "PLAIN":
            self._sasl_token(f"\0{sec.username}\0{sec.password}".encode())
            return
        scram = ScramClient(sec.mechanism, sec.username, sec.password)
        server_first = self._sasl_token(scram.first())
        scram.verify(self._sasl_token(scram.final(server_first)))

    def _sasl_token(self, token: bytes) -> bytes:
        version = min(self.versions.get(ApiKey.SASL_AUTHENTICATE, 0), 1)
        resp = self._call(ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token))
        if resp.error_code:
            raise AuthenticationError(resp.error_message or "SASL authentication failed")
        return bytes(resp.auth_bytes)

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
        head = self._recv_exact(4)
        if head == b"HTTP":  # an HTTP server's "HTTP/1.1 400": a wrong port, not a broker
            host, port = self.sock.getpeername()[:2]
            raise StrataError(
                f"{host}:{port} answered in HTTP: expected the HOST:PORT of a Kafka listener, not an HTTP one"
            )
        (size,) = _SIZE.unpack(head)
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

    def describe_client_quotas(self) -> list[dict[str, Any]]:
        """Runtime user quotas: ``[{"user": name or None (default), "quotas": {key: rate}}]``."""
        resp = self.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, DescribeClientQuotasRequest())
        if resp.error_code:
            raise error_for_code(resp.error_code, resp.error_message)
        return [
            {"user": e.entity[0].entity_name, "quotas": {v.key: v.value for v in e.values}}
            for e in resp.entries or ()
            if len(e.entity) == 1 and e.entity[0].entity_type == "user"
        ]

    def alter_client_quotas(self, user: str | None, changes: dict[str, float | None]) -> None:
        """Set (a rate) or remove (None) quotas of ``user``; None is the default user."""
        ops = tuple(
            OpData(key=k, remove=True) if v is None else OpData(key=k, value=v) for k, v in changes.items()
        )
        entity = (EntityData(entity_type="user", entity_name=user),)
        req = AlterClientQuotasRequest(entries=(AlterEntryData(entity=entity, ops=ops),))
        for e in self.call(ApiKey.ALTER_CLIENT_QUOTAS, req).entries:
            if e.error_code:
                raise error_for_code(e.error_code, e.error_message)

    def list_topics(self) -> list[dict[str, Any]]:
        resp = self.call(ApiKey.METADATA, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        return [{"name": t.name, "partitions": len(t.partitions)} for t in resp.topics if not t.error_code]

    def partition_count(self, name: str) -> int:
        """The topic's partition count, from Metadata alone (needs only DESCRIBE on it)."""
        md = self.call(
            ApiKey.METADATA,
            MetadataRequest(topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=False),
        )
        topic = md.topics[0]
        if topic.error_code:
            raise error_for_code(topic.error_code, topic_error(name, topic.error_code))
        return len(topic.partitions)

    def describe_topic(self, name: str) -> dict[str, Any]:
        md = self.call(
            ApiKey.METADATA,
            MetadataRequest(topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=False),
        )
        topic = md.topics[0]
        if topic.error_code:
            raise error_for_code(topic.error_code, topic_error(name, topic.error_code))
        parts = [p.partition_index for p in topic.partitions]

        def offsets(ts: int) -> dict[int, int]:
            found = self._leader_offsets([(name, p) for p in parts], ts)
            for code, _ in found.values():
                if code:
                    raise error_for_code(code)
            return {p: off for (_, p), (_, off) in found.items()}

        start, end = offsets(-2), offsets(-1)
        cfg = self.call(
            ApiKey.DESCRIBE_CONFIGS,
            DescribeConfigsRequest(
                resources=(DescribeConfigsResource(resource_type=2, resource_name=name),),
                include_synonyms=True,
            ),
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
            "config_sources": {c.name: config_source(c.config_source, c.is_default) for c in result.configs},
        }

    # -- consumer groups ------------------------------------------------------------------
    # The bootstrap broker is asked directly: on a single node it coordinates every group.

    def list_offsets(
        self, partitions: Iterable[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int]:
        """ListOffsets at ``timestamp`` (-1: latest, i.e. the high watermark; -2: earliest)
        for each (topic, partition), asked of each partition's leader; partitions answered
        with an error (deleted topics) are left out."""
        found = self._leader_offsets(partitions, timestamp)
        return {tp: off for tp, (code, off) in found.items() if not code}

    def _list_offsets_here(
        self, partitions: Iterable[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], tuple[int, int]]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        if not by_topic:
            return {}
        req = ListOffsetsRequest(
            topics=tuple(
                ListOffsetsTopic(
                    name=t,
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in ps
                    ),
                )
                for t, ps in by_topic.items()
            )
        )
        return {
            (t.name, p.partition_index): (p.error_code, p.offset)
            for t in self.call(ApiKey.LIST_OFFSETS, req).topics
            for p in t.partitions
        }

    def _leader_offsets(
        self, partitions: Iterable[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(error code, offset) per partition: this broker answers for the partitions it
        leads (all of them on a single node); those it does not lead are asked of their
        leader, found in Metadata and opened with this client's security settings."""
        found = self._list_offsets_here(partitions, timestamp)
        elsewhere = sorted(tp for tp, (code, _) in found.items() if code == NOT_LEADER_OR_FOLLOWER)
        if not elsewhere or self._security is None:
            return found
        md = self.call(
            ApiKey.METADATA,
            MetadataRequest(
                topics=tuple(MetadataRequestTopic(name=t) for t in sorted({t for t, _ in elsewhere})),
                allow_auto_topic_creation=False,
            ),
        )
        brokers = {b.node_id: HostPort(b.host, b.port) for b in md.brokers}
        leaders = {(t.name, p.partition_index): p.leader_id for t in md.topics for p in t.partitions}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in elsewhere:
            if leaders.get(tp) in brokers:
                by_leader.setdefault(leaders[tp], []).append(tp)
        for leader, tps in sorted(by_leader.items()):
            with KafkaClient.connect(brokers[leader], self._timeout, self._security) as other:
                found.update(other._list_offsets_here(tps, timestamp))
        return found

    def list_groups(self, states: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Every group (optionally only those in ``states``, ListGroups v4+), by id."""
        resp = self.call(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=tuple(states)))
        if resp.error_code:
            raise error_for_code(resp.error_code)
        return sorted(
            (
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "state": g.group_state,
                    "type": g.group_type or "classic",  # ListGroups v5 (KIP-848)
                }
                for g in resp.groups
            ),
            key=lambda g: str(g["group_id"]),
        )

    def describe_groups(self, groups: Sequence[str]) -> list[dict[str, Any]]:
        """DescribeGroups; a consumer group's member assignments are decoded into
        ``partitions`` ([topic, partition] pairs). An unknown group has state "Dead"."""
        resp = self.call(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=tuple(groups)))
        waking = (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS)
        for attempt in range(20):  # at most ~5 s while the coordinator loads
            asleep = [g.group_id for g in resp.groups if g.error_code in waking]
            if not asleep:
                break
            # As Kafka's admin client, FindCoordinator first: a broker starts (and loads) its
            # group coordinator when asked for it, e.g. before any group ever used it.
            self._find_coordinators(asleep)
            if attempt:
                time.sleep(0.25)
            resp = self.call(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=tuple(groups)))
        out = []
        for g in resp.groups:
            if g.error_code == GROUP_ID_NOT_FOUND:
                # v6: no such classic group (v0-5 say Dead); a KIP-848 one is looked up below
                g = dataclasses.replace(g, error_code=0, group_state="Dead")
            if g.error_code:
                raise error_for_code(g.error_code, f"group {g.group_id!r}: {_code_name(g.error_code)}")
            members = []
            for m in g.members:
                parts: list[list[Any]] = []
                if g.protocol_type == PROTOCOL_TYPE and m.member_assignment:
                    try:
                        assignment = decode_assignment(m.member_assignment)
                        parts = [[tp.topic, p] for tp in assignment.partitions for p in tp.partitions]
                    except ConsumerProtocolError:
                        parts = []
                members.append(
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "partitions": sorted(parts),
                    }
                )
            out.append(
                {
                    "group_id": g.group_id,
                    "state": g.group_state,
                    "protocol_type": g.protocol_type,
                    "protocol": g.protocol_data,
                    "members": members,
                    "type": "classic",
                }
            )
        dead = [d["group_id"] for d in out if d["state"] == "Dead"]
        if dead and ApiKey.CONSUMER_GROUP_DESCRIBE in self.versions:
            found = self.describe_consumer_groups(dead)
            out = [found.get(d["group_id"], d) for d in out]
        return out

    def describe_consumer_groups(self, groups: Sequence[str]) -> dict[str, dict[str, Any]]:
        """ConsumerGroupDescribe (KIP-848) of ``groups``: those that are consumer groups, in
        describe_groups' shape plus epochs, each member's epoch and target partitions."""
        resp = self.call(
            ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=tuple(groups))
        )
        out: dict[str, dict[str, Any]] = {}
        for g in resp.groups:
            if g.error_code == GROUP_ID_NOT_FOUND:
                continue
            if g.error_code:
                raise error_for_code(g.error_code, f"group {g.group_id!r}: {g.error_message}")
            out[g.group_id] = {
                "group_id": g.group_id,
                "state": g.group_state,
                "protocol_type": "consumer",
                "protocol": g.assignor_name,
                "type": "consumer",
                "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.instance_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "member_epoch": m.member_epoch,
                        "partitions": sorted(
                            [t.topic_name, p] for t in m.assignment.topic_partitions for p in t.partitions
                        ),
                        "target_partitions": sorted(
                            [t.topic_name, p]
                            for t in m.target_assignment.topic_partitions
                            for p in t.partitions
                        ),
                    }
                    for m in g.members
                ],
            }
        return out

    def coordinator_of(self, group: str) -> HostPort:
        """Where ``group``'s coordinator listens (FindCoordinator; retried for up to ~5 s
        while it loads, as Kafka's admin client does)."""
        for attempt in range(20):
            if self.versions.get(ApiKey.FIND_COORDINATOR, 0) >= 4:
                resp = self.call(
                    ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(coordinator_keys=(group,), key_type=0)
                )
                c = resp.coordinators[0]
                code, host, port = c.error_code, c.host, c.port
            else:
                old = self.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0))
                code, host, port = old.error_code, old.host, old.port
            if code in (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) and attempt < 19:
                time.sleep(0.25)
                continue
            if code:
                raise error_for_code(code, f"group {group!r}: no coordinator ({_code_name(code)})")
            return HostPort(host, port)
        raise AssertionError("unreachable")

    def at_coordinator(self, group: str) -> KafkaClient:
        """A client of ``group``'s coordinator: the group requests of share groups and
        KIP-848 groups are answered there only (NOT_COORDINATOR elsewhere). A new
        connection with this client's settings; close it (``with``) after use."""
        return KafkaClient.connect(self.coordinator_of(group), self._timeout, self._security)

    def _find_coordinators(self, groups: Sequence[str]) -> None:
        """FindCoordinator for ``groups`` (answers ignored: asking is what matters)."""
        if self.versions.get(ApiKey.FIND_COORDINATOR, 0) >= 4:
            self.call(
                ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(coordinator_keys=tuple(groups), key_type=0)
            )
            return
        for g in groups:
            self.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=g, key_type=0))

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """Every committed offset of ``group`` (OffsetFetch of all partitions)."""
        version = self.versions.get(ApiKey.OFFSET_FETCH, 0)
        if version < 2:
            raise StrataError("the broker's OffsetFetch is too old to list every committed offset")
        if version >= 8:
            resp = self.call(
                ApiKey.OFFSET_FETCH,
                OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=None),)),
            )
            error, topics = resp.groups[0].error_code, resp.groups[0].topics
        else:
            resp = self.call(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=None))
            error, topics = resp.error_code, resp.topics
        if error:
            raise error_for_code(error, f"group {group!r}: {_code_name(error)}")
        out: dict[tuple[str, int], int] = {}
        for t in topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for_code(p.error_code)
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    def describe_group_lag(self, group: str) -> dict[str, Any]:
        """The group (describe_groups) plus, per partition that has a committed offset or an
        owner, the committed offset, the log end offset (high watermark, ListOffsets
        latest) and the lag, as ``kafka-consumer-groups --describe`` shows them.
        GroupIdNotFoundError if the group does not exist."""
        [desc] = self.describe_groups([group])
        committed = self.committed_offsets(group)
        if desc["state"] == "Dead" and not committed:
            raise GroupIdNotFoundError(f"group {group!r} does not exist")
        owners = {(t, p): m for m in desc["members"] for t, p in m["partitions"]}
        keys = sorted(set(committed) | set(owners))
        ends = self.list_offsets(keys, -1)
        rows = []
        for key in keys:
            c, end, owner = committed.get(key), ends.get(key), owners.get(key)
            rows.append(
                {
                    "topic": key[0],
                    "partition": key[1],
                    "committed_offset": c,
                    "log_end_offset": end,
                    "lag": partition_lag(c, end),
                    "member_id": owner["member_id"] if owner else None,
                    "client_id": owner["client_id"] if owner else None,
                    "host": owner["host"] if owner else None,
                }
            )
        desc["partitions"] = rows
        desc["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
        return desc

    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commit ``offsets`` for ``group`` as an admin does (generation -1, no member): the
        broker accepts that only while the group has no members (kafka-consumer-groups
        --reset-offsets). Any partition's error is raised."""
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
            )
        req = OffsetCommitRequest(
            group_id=group,
            topics=tuple(
                OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
        )
        for t in self.call(ApiKey.OFFSET_COMMIT, req).topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for_code(
                        p.error_code,
                        f"group {group!r}, {t.name}-{p.partition_index}: {_code_name(p.error_code)}",
                    )

    def delete_offsets(self, group: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """OffsetDelete: forget ``group``'s committed offsets of ``partitions``; the error
        code per partition (0: deleted; GROUP_SUBSCRIBED_TO_TOPIC while a member consumes
        the topic). A group-level error is raised."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        req = OffsetDeleteRequest(
            group_id=group,
            topics=tuple(
                OffsetDeleteRequestTopic(
                    name=t, partitions=tuple(OffsetDeleteRequestPartition(partition_index=p) for p in ps)
                )
                for t, ps in by_topic.items()
            ),
        )
        resp = self.call(ApiKey.OFFSET_DELETE, req)
        if resp.error_code:
            raise error_for_code(resp.error_code, f"group {group!r}: {_code_name(resp.error_code)}")
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    @staticmethod
    def error_name(code: int) -> str:
        return _code_name(code)

    def delete_groups(self, groups: Sequence[str]) -> None:
        """DeleteGroups; raises the first group's error (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND)."""
        resp = self.call(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=tuple(groups)))
        for r in resp.results:
            if r.error_code:
                raise error_for_code(
                    r.error_code, f"group {r.group_id!r}: {_GROUP_ERRORS.get(r.error_code, r.error_code)}"
                )

    # -- ACLs (kwire.acl) ---------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        req = CreateAclsRequest(
            creations=tuple(
                AclCreation(
                    resource_type=b.resource_type,
                    resource_name=b.resource_name,
                    resource_pattern_type=b.pattern_type,
                    principal=b.principal,
                    host=b.host,
                    operation=b.operation,
                    permission_type=b.permission,
                )
                for b in bindings
            )
        )
        for r in self.call(ApiKey.CREATE_ACLS, req).results:
            if r.error_code:
                raise error_for_code(r.error_code, r.error_message)

    def describe_acls(self, flt: AclFilter) -> list[AclBinding]:
        resp = self.call(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(**_filter_fields(flt)))
        if resp.error_code:
            raise error_for_code(resp.error_code, resp.error_message)
        return [
            AclBinding(
                ResourceType(r.resource_type),
                r.resource_name,
                PatternType(r.pattern_type),
                a.principal,
                a.host,
                Operation(a.operation),
                Permission(a.permission_type),
            )
            for r in resp.resources
            for a in r.acls
        ]

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        req = DeleteAclsRequest(filters=tuple(DeleteAclsFilter(**_filter_fields(f)) for f in filters))
        deleted: list[AclBinding] = []
        for r in self.call(ApiKey.DELETE_ACLS, req).filter_results:
            if r.error_code:
                raise error_for_code(r.error_code, r.error_message)
            deleted += [
                AclBinding(
                    ResourceType(m.resource_type),
                    m.resource_name,
                    PatternType(m.pattern_type),
                    m.principal,
                    m.host,
                    Operation(m.operation),
                    Permission(m.permission_type),
                )
                for m in r.matching_acls
            ]
        return list(dict.fromkeys(deleted))


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission,
    }


def _described_partitions(assignment: Any) -> list[list[Any]]:
    """A ConsumerGroupDescribe assignment as sorted [topic, partition] pairs."""
    return sorted([t.topic_name, p] for t in assignment.topic_partitions for p in t.partitions)
