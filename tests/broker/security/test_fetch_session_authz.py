"""A consumer's fetch session keeps Kafka's rule, READ on every session topic on every
request, though its answers are cached per session (api.handlers.fetch): an ACL revoked
is refused on the session's very next incremental fetch, granted again it reads again."""

from __future__ import annotations

import uuid
from typing import Any

from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from tests.broker.security.test_authorization import (
    BOB_PW,
    add_acls,
    admin_client,
    binding,
    broker,
    conf,
)
from tests.brokers import BrokerProcess

__all__ = ["broker"]  # the module's SASL broker with authorization on

PARTS = 20


def _codes(resp: Any) -> dict[int, int]:
    return {p.partition_index: p.error_code for t in resp.responses for p in t.partitions}


def test_revoking_read_is_seen_by_the_next_incremental_fetch(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    from kclient import KafkaClient
    from kclient.security import ClientSecurity

    topic = f"sess-acl-{uuid.uuid4().hex[:6]}"
    admin = admin_client(broker)
    for f in admin.create_topics([NewTopic(topic, num_partitions=PARTS)]).values():
        f.result(timeout=30)
    read = binding("TOPIC", topic, "User:bob", "READ")
    add_acls(broker, read)
    props = {k: str(v) for k, v in conf(broker, "bob", BOB_PW).items() if k != "bootstrap.servers"}
    parts = tuple(
        FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in range(PARTS)
    )

    def fetch(c: KafkaClient, sid: int, epoch: int, topics: tuple[FetchTopic, ...] = ()) -> Any:
        req = FetchRequest(max_wait_ms=0, min_bytes=0, session_id=sid, session_epoch=epoch, topics=topics)
        return c._call(ApiKey.FETCH, 12, req)

    with KafkaClient.connect(
        HostPort.parse(broker.bootstrap), security=ClientSecurity.from_properties(props)
    ) as c:
        full = fetch(c, 0, 0, (FetchTopic(topic=topic, partitions=parts),))
        sid = full.session_id
        assert sid != 0 and set(_codes(full).values()) == {E.NONE} and len(_codes(full)) == PARTS
        assert _codes(fetch(c, sid, 1)) == {}  # idle: nothing changed, the READ answer cached

        flt = AclBindingFilter(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:bob",
            None,
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        assert next(iter(admin.delete_acls([flt]).values())).result(timeout=30) == [read]
        refused = fetch(c, sid, 2)
        assert _codes(refused) == dict.fromkeys(range(PARTS), E.TOPIC_AUTHORIZATION_FAILED)
        # Refused on every fetch while it lasts, as Kafka answers.
        assert _codes(fetch(c, sid, 3)) == dict.fromkeys(range(PARTS), E.TOPIC_AUTHORIZATION_FAILED)

        add_acls(broker, read)
        again = fetch(c, sid, 4)
        # Readable again: every partition answered (its error cleared, so its marks changed).
        assert _codes(again) == dict.fromkeys(range(PARTS), E.NONE)
        assert _codes(fetch(c, sid, 5)) == {}
