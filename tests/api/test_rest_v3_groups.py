"""REST v3 consumer groups, consumers, assignments and lag (Confluent shapes) in process against
a real broker, the group's member being a REST v2 consumer instance (a real member of the
broker's group coordinator) with a committed offset."""

from __future__ import annotations

import httpx

from broker.security.stored import StoredAcls
from kwire.acl import AclFilter, Operation, ResourceType
from tests.api.test_rest import BIN_CT, assert_error, b64, create_topic
from tests.api.test_rest_v3 import BASE, C, allow, authorized, broker, client, walk

__all__ = ["authorized", "broker", "client"]  # the fixtures

V2 = {"Content-Type": "application/vnd.kafka.v2+json"}


async def member_with_commit(client: httpx.AsyncClient, group: str, topic: str, offset: int) -> str:
    """A consumer instance of ``group`` that owns every partition of ``topic`` and committed
    ``offset`` (the last processed record) on partition 0; returns its member id."""
    r = await client.post(
        f"/consumers/{group}",
        json={"name": "m1", "auto.offset.reset": "earliest", "auto.commit.enable": "false"},
        headers=V2,
    )
    assert r.status_code == 200, r.text
    base = f"/consumers/{group}/instances/m1"
    assert (
        await client.post(f"{base}/subscription", json={"topics": [topic]}, headers=V2)
    ).status_code == 204
    for _ in range(50):  # joins on its first fetch
        r = await client.get(
            f"{base}/records", params={"timeout": 100}, headers={"Accept": BIN_CT["Content-Type"]}
        )
        assert r.status_code == 200, r.text
        if (await client.get(f"{base}/assignments")).json()["partitions"]:
            break
    body = {"offsets": [{"topic": topic, "partition": 0, "offset": offset}]}
    assert (await client.post(f"{base}/offsets", json=body, headers=V2)).status_code == 204
    groups = (await client.get(f"{C}/consumer-groups/{group}/consumers")).json()["data"]
    [member] = groups
    return str(member["consumer_id"])


async def test_groups_consumers_and_lag(client: httpx.AsyncClient) -> None:
    await create_topic(client, "lagged", 2)
    records = [{"value": b64(b"v%d" % i), "partition": i % 2} for i in range(20)]
    assert (await client.post("/topics/lagged", json={"records": records}, headers=BIN_CT)).status_code == 200
    member = await member_with_commit(client, "g1", "lagged", 3)  # committed 4 on partition 0

    listed = (await client.get(f"{C}/consumer-groups")).json()
    assert listed["kind"] == "KafkaConsumerGroupList"
    [group] = [g for g in listed["data"] if g["consumer_group_id"] == "g1"]
    assert group == (await client.get(f"{C}/consumer-groups/g1")).json()
    assert group["kind"] == "KafkaConsumerGroup"
    assert group["metadata"] == {
        "self": f"{BASE}/consumer-groups/g1",
        "resource_name": "crn:///kafka=strata-local/consumer-group=g1",
    }
    assert (group["state"], group["is_simple"]) == ("STABLE", False)
    assert group["partition_assignor"]
    assert group["coordinator"] == {"related": f"{BASE}/brokers/0"}
    assert group["consumers"] == {"related": f"{BASE}/consumer-groups/g1/consumers"}
    assert group["lag_summary"] == {"related": f"{BASE}/consumer-groups/g1/lag-summary"}

    consumer = (await client.get(f"{C}/consumer-groups/g1/consumers/{member}")).json()
    assert consumer["kind"] == "KafkaConsumer" and consumer["consumer_id"] == member
    assignments = (await client.get(f"{C}/consumer-groups/g1/consumers/{member}/assignments")).json()
    assert assignments["kind"] == "KafkaConsumerAssignmentList"
    assert [(a["topic_name"], a["partition_id"]) for a in assignments["data"]] == [
        ("lagged", 0),
        ("lagged", 1),
    ]
    assert assignments["data"][0]["lag"] == {"related": f"{BASE}/consumer-groups/g1/lags/lagged/partitions/0"}

    lags = (await client.get(f"{C}/consumer-groups/g1/lags")).json()
    assert lags["kind"] == "KafkaConsumerLagList"
    rows = {x["partition_id"]: x for x in lags["data"]}
    assert (rows[0]["current_offset"], rows[0]["log_end_offset"], rows[0]["lag"]) == (4, 10, 6)
    assert (rows[1]["current_offset"], rows[1]["log_end_offset"], rows[1]["lag"]) == (None, 10, None)
    assert rows[0]["consumer_id"] == member and rows[0]["kind"] == "KafkaConsumerLag"
    assert (await client.get(f"{C}/consumer-groups/g1/lags/lagged/partitions/0")).json() == rows[0]

    summary = (await client.get(f"{C}/consumer-groups/g1/lag-summary")).json()
    assert summary["kind"] == "KafkaConsumerGroupLagSummary"
    assert (summary["max_lag"], summary["total_lag"]) == (6, 6)
    assert (summary["max_lag_topic_name"], summary["max_lag_partition_id"]) == ("lagged", 0)
    assert summary["max_lag_consumer_id"] == member
    assert summary["max_lag_consumer"] == {"related": f"{BASE}/consumer-groups/g1/consumers/{member}"}
    assert summary["max_lag_partition"] == {"related": f"{BASE}/topics/lagged/partitions/0"}

    # every link of the group, its consumers, assignments and lags answers
    seen = await walk(client, [f"{C}/consumer-groups/g1", f"{C}/consumer-groups/g1/lags", C])
    assert not {u: s for u, s in seen.items() if s != 200}
    assert any("/assignments" in u for u in seen) and any("/lag-summary" in u for u in seen)

    assert_error(await client.get(f"{C}/consumer-groups/nope"), 404, 404)
    assert_error(await client.get(f"{C}/consumer-groups/g1/consumers/nobody"), 404, 404)
    assert_error(await client.get(f"{C}/consumer-groups/g1/lags/lagged/partitions/5"), 404, 404)
    assert (await client.delete("/consumers/g1/instances/m1")).status_code == 204

    # an offsets-only group: simple, empty, its lag known without an owner
    empty = (await client.get(f"{C}/consumer-groups/g1")).json()
    assert empty["state"] == "EMPTY"
    summary = (await client.get(f"{C}/consumer-groups/g1/lag-summary")).json()
    assert (summary["max_lag"], summary["max_lag_consumer_id"], summary["max_lag_consumer"]) == (6, "", None)


async def test_groups_under_authorization(authorized: tuple[httpx.AsyncClient, StoredAcls]) -> None:
    """The list shows the groups the user may DESCRIBE, a named one it may not is 403 (existing
    or not), lag rows only of topics it may DESCRIBE."""
    http, acls = authorized
    read = [
        allow(ResourceType.GROUP, "g-ok", Operation.READ),
        allow(ResourceType.TOPIC, "seen", Operation.READ),
        allow(ResourceType.TOPIC, "hidden", Operation.READ),
    ]
    await acls.create(read)
    await member_with_commit(http, "g-ok", "seen", 0)
    body = {"offsets": [{"topic": "hidden", "partition": 0, "offset": 0}]}
    assert (await http.post("/consumers/g-ok/instances/m1/offsets", json=body, headers=V2)).status_code == 204
    assert {x["topic_name"] for x in (await http.get(f"{C}/consumer-groups/g-ok/lags")).json()["data"]} == {
        "seen",
        "hidden",
    }
    await acls.delete([AclFilter(ResourceType.TOPIC, "hidden")])
    lags = (await http.get(f"{C}/consumer-groups/g-ok/lags")).json()["data"]
    assert {x["topic_name"] for x in lags} == {"seen"}
    assert_error(await http.get(f"{C}/consumer-groups/g-ok/lags/hidden/partitions/0"), 403, 40301)
    listed = (await http.get(f"{C}/consumer-groups")).json()["data"]
    assert [g["consumer_group_id"] for g in listed] == ["g-ok"]
    for url in (f"{C}/consumer-groups/g-other", f"{C}/consumer-groups/g-other/lag-summary"):
        assert_error(await http.get(url), 403, 40301)
    assert (await http.delete("/consumers/g-ok/instances/m1")).status_code == 204
