"""REST v3 (Confluent shapes) in process against a real broker: partitions, replicas,
reassignments, brokers, configs and ACLs, every ``related`` link answering 200, and the
authorization of each (ACLs for User:ANONYMOUS, the principal of requests without REST auth)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.rest import create_app
from broker.broker import Broker
from broker.embedded_store import EmbeddedMetadataStore
from broker.keys import KeyLayout
from broker.security.acl import Authorizer
from broker.security.authz import AccessControl
from broker.security.stored import SecurityDocuments, StoredAcls
from kwire.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from tests.api import test_rest as rest_base
from tests.api.test_rest import assert_error, create_topic

# the in-process broker and client fixtures of the v2 tests
broker = rest_base.broker
client = rest_base.client

C = "/v3/clusters/strata-local"
BASE = "http://strata.test" + C


def related_links(doc: Any) -> list[str]:
    """Every ``{"related": url}`` and ``metadata.self`` in a v3 document."""
    out: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("related", "self") and isinstance(value, str):
                out.append(value)
            else:
                out.extend(related_links(value))
    elif isinstance(doc, list):
        for item in doc:
            out.extend(related_links(item))
    return out


async def walk(client: httpx.AsyncClient, start: list[str], limit: int = 400) -> dict[str, int]:
    """GET every link reachable from ``start`` (breadth first, each once): url -> status."""
    seen: dict[str, int] = {}
    queue = list(start)
    while queue and len(seen) < limit:
        url = queue.pop(0)
        if url in seen:
            continue
        r = await client.get(url)
        seen[url] = r.status_code
        if r.status_code == 200:
            queue.extend(u for u in related_links(r.json()) if u not in seen)
    return seen


async def test_partitions_replicas_and_brokers(client: httpx.AsyncClient) -> None:
    await create_topic(client, "parts", 3)
    r = await client.get(f"{C}/topics/parts/partitions")
    assert r.status_code == 200, r.text
    listed = r.json()
    assert listed["kind"] == "KafkaPartitionList"
    assert listed["metadata"] == {"self": f"{BASE}/topics/parts/partitions", "next": None}
    assert [p["partition_id"] for p in listed["data"]] == [0, 1, 2]
    p1 = (await client.get(f"{C}/topics/parts/partitions/1")).json()
    assert p1 == listed["data"][1]
    assert p1 == {
        "kind": "KafkaPartition",
        "metadata": {
            "self": f"{BASE}/topics/parts/partitions/1",
            "resource_name": "crn:///kafka=strata-local/topic=parts/partition=1",
        },
        "cluster_id": "strata-local",
        "topic_name": "parts",
        "partition_id": 1,
        "leader": {"related": f"{BASE}/topics/parts/partitions/1/replicas/0"},
        "replicas": {"related": f"{BASE}/topics/parts/partitions/1/replicas"},
        "reassignment": {"related": f"{BASE}/topics/parts/partitions/1/reassignment"},
    }
    replicas = (await client.get(f"{C}/topics/parts/partitions/1/replicas")).json()
    assert replicas["kind"] == "KafkaReplicaList"
    [replica] = replicas["data"]
    assert replica["broker_id"] == 0 and replica["is_leader"] and replica["is_in_sync"]
    assert replica["broker"] == {"related": f"{BASE}/brokers/0"}
    assert (await client.get(f"{C}/topics/parts/partitions/1/replicas/0")).json() == replica

    reassignment = (await client.get(f"{C}/topics/parts/partitions/1/reassignment")).json()
    assert reassignment["kind"] == "KafkaReassignment"
    assert (reassignment["adding_replicas"], reassignment["removing_replicas"]) == ([], [])
    for url in (f"{C}/topics/parts/partitions/-/reassignment", f"{C}/topics/-/partitions/-/reassignment"):
        r = await client.get(url)
        assert r.status_code == 200 and r.json()["kind"] == "KafkaReassignmentList"
        assert r.json()["data"] == []  # none in progress

    brokers = (await client.get(f"{C}/brokers")).json()
    assert brokers["kind"] == "KafkaBrokerList"
    [b0] = brokers["data"]
    assert b0["broker_id"] == 0 and b0["kind"] == "KafkaBroker"
    assert isinstance(b0["host"], str) and isinstance(b0["port"], int)
    assert b0["configs"] == {"related": f"{BASE}/brokers/0/configs"}
    assert (await client.get(f"{C}/brokers/0")).json() == b0
    on_b0 = (await client.get(f"{C}/brokers/0/partition-replicas")).json()
    assert {(x["topic_name"], x["partition_id"]) for x in on_b0["data"]} >= {("parts", p) for p in range(3)}

    assert_error(await client.get(f"{C}/topics/parts/partitions/3"), 404, 40402)
    assert_error(await client.get(f"{C}/topics/nope/partitions"), 404, 40401)
    assert_error(await client.get(f"{C}/topics/nope/partitions/0"), 404, 40401)
    assert_error(await client.get(f"{C}/topics/parts/partitions/0/replicas/7"), 404, 404)
    assert_error(await client.get(f"{C}/brokers/7"), 404, 404)
    assert_error(await client.get("/v3/clusters/other/brokers"), 404, 404)


async def test_every_related_link_answers(client: httpx.AsyncClient) -> None:
    await create_topic(client, "walk", 2, retention_ms="3600000")
    seen = await walk(client, [C, f"{C}/topics/walk", f"{C}/brokers/0", "http://strata.test/v3/clusters"])
    bad = {url: status for url, status in seen.items() if status != 200}
    assert not bad, bad
    # the walk reached every kind of resource
    for fragment in ("/partitions/1/replicas/0", "/configs/retention.ms", "/brokers/0/configs", "/acls"):
        assert any(fragment in url for url in seen), fragment


async def test_topic_configs_read_and_alter(client: httpx.AsyncClient) -> None:
    await create_topic(client, "cfg", 1, retention_ms="3600000")
    r = await client.get(f"{C}/topics/cfg/configs")
    assert r.status_code == 200, r.text
    configs = {c["name"]: c for c in r.json()["data"]}
    assert r.json()["kind"] == "KafkaTopicConfigList"
    retention = configs["retention.ms"]
    assert retention["kind"] == "KafkaTopicConfig"
    assert retention["metadata"]["self"] == f"{BASE}/topics/cfg/configs/retention.ms"
    assert retention["metadata"]["resource_name"] == "crn:///kafka=strata-local/topic=cfg/config=retention.ms"
    assert (retention["value"], retention["is_default"], retention["source"]) == (
        "3600000",
        False,
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert retention["synonyms"] == [
        {"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "log.retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG"},
    ]
    assert not retention["is_read_only"] and not retention["is_sensitive"]
    segment = configs["segment.bytes"]
    assert (segment["is_default"], segment["source"]) == (True, "DEFAULT_CONFIG")
    assert (await client.get(f"{C}/topics/cfg/configs/retention.ms")).json() == retention
    every = (await client.get(f"{C}/topics/-/configs")).json()
    assert every["metadata"]["self"] == f"{BASE}/topics/-/configs"
    assert retention in every["data"]

    # PUT one, DELETE one (back to the default), then a batch with every operation
    r = await client.put(f"{C}/topics/cfg/configs/segment.ms", json={"value": "60000"})
    assert r.status_code == 204, r.text
    seg = (await client.get(f"{C}/topics/cfg/configs/segment.ms")).json()
    assert (seg["value"], seg["source"]) == ("60000", "DYNAMIC_TOPIC_CONFIG")
    assert (await client.delete(f"{C}/topics/cfg/configs/retention.ms")).status_code == 204
    retention = (await client.get(f"{C}/topics/cfg/configs/retention.ms")).json()
    assert (retention["value"], retention["is_default"]) == ("604800000", True)

    batch = {
        "data": [
            {"name": "cleanup.policy", "value": "compact", "operation": "APPEND"},
            {"name": "max.message.bytes", "value": "2048"},
            {"name": "segment.ms", "operation": "DELETE"},
        ]
    }
    r = await client.post(f"{C}/topics/cfg/configs:alter", json=batch)
    assert r.status_code == 204, r.text
    now = {c["name"]: c["value"] for c in (await client.get(f"{C}/topics/cfg/configs")).json()["data"]}
    assert set(now["cleanup.policy"].split(",")) == {"delete", "compact"}
    assert now["max.message.bytes"] == "2048"
    assert now["segment.ms"] == "604800000"
    # the v2 view agrees
    assert (await client.get("/topics/cfg")).json()["configs"]["max.message.bytes"] == "2048"

    dry = {"data": [{"name": "max.message.bytes", "value": "4096"}], "validate_only": True}
    assert (await client.post(f"{C}/topics/cfg/configs:alter", json=dry)).status_code == 204
    assert (await client.get(f"{C}/topics/cfg/configs/max.message.bytes")).json()["value"] == "2048"

    bad = {"data": [{"name": "retention.ms", "value": "soon"}]}
    assert_error(await client.post(f"{C}/topics/cfg/configs:alter", json=bad), 400, 40002, "retention.ms")
    bad = {"data": [{"name": "no.such.config", "value": "1"}]}
    assert_error(await client.post(f"{C}/topics/cfg/configs:alter", json=bad), 400, 40002)
    bad = {"data": [{"name": "retention.ms", "value": "1", "operation": "MULTIPLY"}]}
    assert_error(await client.post(f"{C}/topics/cfg/configs:alter", json=bad), 400, 40002, "MULTIPLY")
    assert_error(await client.post(f"{C}/topics/cfg/configs:alter", json={"data": 5}), 400, 400)
    r = await client.post(
        f"{C}/topics/cfg/configs:alter", content=b"{}", headers={"Content-Type": "text/plain"}
    )
    assert_error(r, 415, 415)
    assert_error(await client.get(f"{C}/topics/cfg/configs/no.such"), 404, 404)
    assert_error(await client.get(f"{C}/topics/nope/configs"), 404, 40401)
    assert_error(await client.put(f"{C}/topics/nope/configs/retention.ms", json={"value": "1"}), 404, 40401)


async def test_broker_configs(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{C}/brokers/0/configs")
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "KafkaBrokerConfigList"
    configs = {c["name"]: c for c in r.json()["data"]}
    assert configs["broker.id"]["value"] == "0"
    assert configs["num.partitions"]["source"] == "STATIC_BROKER_CONFIG"
    assert configs["num.partitions"]["is_read_only"]
    one = (await client.get(f"{C}/brokers/0/configs/num.partitions")).json()
    assert one == configs["num.partitions"] and one["kind"] == "KafkaBrokerConfig"
    assert_error(await client.get(f"{C}/brokers/0/configs/nope"), 404, 404)
    assert_error(await client.get(f"{C}/brokers/5/configs"), 404, 404)
    r = await client.get(f"{C}/broker-configs")
    assert r.status_code == 200 and r.json()["data"] == [] and r.json()["kind"] == "KafkaClusterConfigList"


# --- authorization ----------------------------------------------------------------------------


def allow(rtype: ResourceType, name: str, op: Operation) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, "User:ANONYMOUS", "*", op, Permission.ALLOW)


@pytest.fixture
async def authorized(broker: Broker, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, StoredAcls]]:
    """A client whose requests are User:ANONYMOUS held to the ACLs (none to start with)."""
    app = create_app(broker)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as c:
        for name in ("seen", "hidden"):
            r = await c.post(f"{C}/topics", json={"topic_name": name, "partitions_count": 1})
            assert r.status_code == 201, r.text
        store = await EmbeddedMetadataStore(tmp_path / "acls").connect()
        docs = SecurityDocuments(store, KeyLayout("strata-local"))
        await docs.start()
        acls = StoredAcls(docs)
        broker.access = AccessControl(Authorizer(), acls)
        try:
            yield c, acls
        finally:
            broker.access = None
            await docs.close()
            await store.close()


async def test_v3_authorization(authorized: tuple[httpx.AsyncClient, StoredAcls]) -> None:
    http, acls = authorized
    await acls.create([allow(ResourceType.TOPIC, "seen", Operation.DESCRIBE)])
    assert (await http.get(f"{C}/topics/seen/partitions")).status_code == 200
    assert (await http.get(f"{C}/topics/seen/partitions/0/replicas")).status_code == 200
    for url in (
        f"{C}/topics/hidden/partitions",
        f"{C}/topics/hidden/partitions/0",
        f"{C}/topics/nope/partitions",
        f"{C}/topics/hidden/partitions/-/reassignment",
        f"{C}/topics/seen/configs",  # DESCRIBE is not DESCRIBE_CONFIGS
        f"{C}/brokers/0/configs",
        f"{C}/topics/-/partitions/-/reassignment",
        f"{C}/acls",
    ):
        assert_error(await http.get(url), 403, 40301)
    assert_error(await http.put(f"{C}/topics/seen/configs/retention.ms", json={"value": "1"}), 403, 40301)
    # brokers are anyone's to see; their replicas only of visible topics
    assert (await http.get(f"{C}/brokers")).status_code == 200
    replicas = (await http.get(f"{C}/brokers/0/partition-replicas")).json()["data"]
    assert {x["topic_name"] for x in replicas} == {"seen"}

    await acls.create(
        [
            allow(ResourceType.TOPIC, "seen", Operation.ALTER_CONFIGS),  # implies DESCRIBE_CONFIGS
            allow(ResourceType.CLUSTER, "kafka-cluster", Operation.DESCRIBE),
        ]
    )
    assert (await http.get(f"{C}/topics/seen/configs")).status_code == 200
    every = (await http.get(f"{C}/topics/-/configs")).json()["data"]
    assert {c["topic_name"] for c in every} == {"seen"}
    assert (
        await http.put(f"{C}/topics/seen/configs/retention.ms", json={"value": "1000"})
    ).status_code == 204
    r = await http.get(f"{C}/acls", params={"resource_type": "TOPIC"})
    assert r.status_code == 200, r.text
    listed = {(a["resource_name"], a["operation"], a["permission"]) for a in r.json()["data"]}
    assert listed == {("seen", "DESCRIBE", "ALLOW"), ("seen", "ALTER_CONFIGS", "ALLOW")}
    assert r.json()["data"][0]["kind"] == "KafkaAcl"
    assert_error(await http.get(f"{C}/acls", params={"operation": "FLY"}), 400, 40002)
