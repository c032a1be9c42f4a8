"""REST Proxy v2 consumer instances against a real broker process: lifecycle, exact record
contents, commits that outlive the instance, groups shared by REST instances and by a REST
instance with a confluent-kafka consumer, pattern subscriptions, seeks and errors."""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.api.groups.helpers import (
    JSON_HEADERS,
    V2_BINARY,
    V2_JSON,
    GroupMember,
    assignment,
    get_json_body,
    poll_records,
    produce,
    rest,
    wait_for,
)
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def create(
    http: httpx.Client, group: str, name: str, fmt: str = "binary", **extra: Any
) -> tuple[str, dict[str, Any]]:
    body = {
        "name": name,
        "format": fmt,
        "auto.offset.reset": "earliest",
        "auto.commit.enable": "false",
        **extra,
    }
    r = http.post(f"/consumers/{group}", json=body, headers=JSON_HEADERS)
    assert r.status_code == 200, r.text
    doc = r.json()
    return f"/consumers/{group}/instances/{name}", doc


def subscribe(http: httpx.Client, base: str, **body: Any) -> None:
    r = http.post(f"{base}/subscription", json=body, headers=JSON_HEADERS)
    assert r.status_code == 204, r.text


def committed(http: httpx.Client, base: str, topic: str, partitions: list[int]) -> dict[int, int]:
    r = get_json_body(
        http, f"{base}/offsets", {"partitions": [{"topic": topic, "partition": p} for p in partitions]}
    )
    assert r.status_code == 200, r.text
    return {o["partition"]: o["offset"] for o in r.json()["offsets"] if o["topic"] == topic}


def test_lifecycle_exact_records_and_offsets_outlive_the_instance(gbroker: BrokerProcess) -> None:
    topic, group = "rc-life", "rc-life-g"
    create_topic(gbroker.bootstrap, topic, 1)
    records = [(b"k%d" % i if i % 2 else None, b"value-%d" % i, 0) for i in range(6)]
    produce(gbroker.bootstrap, topic, records)
    http = rest(gbroker.http_url)

    base, doc = create(http, group, "one")
    assert doc == {"instance_id": "one", "base_uri": f"{gbroker.http_url}/consumers/{group}/instances/one"}
    subscribe(http, base, topics=[topic])
    assert http.get(f"{base}/subscription").json() == {"topics": [topic]}

    # max_bytes=1: one record per request.
    got: list[dict[str, Any]] = []
    while len(got) < 3:
        r = http.get(
            f"{base}/records", params={"timeout": 500, "max_bytes": 1}, headers={"Accept": V2_BINARY}
        )
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == V2_BINARY
        assert len(r.json()) <= 1
        got += r.json()
    for i, rec in enumerate(got):
        key, value, _ = records[i]
        assert {k: rec[k] for k in ("topic", "partition", "offset", "key", "value", "headers")} == {
            "topic": topic,
            "partition": 0,
            "offset": i,
            "key": b64(key),
            "value": b64(value),
            "headers": [],
        }
    assert assignment(http, base) == {(topic, 0)}

    # Commit the last record processed (offset 2): the group resumes at 3.
    r = http.post(
        f"{base}/offsets",
        json={"offsets": [{"topic": topic, "partition": 0, "offset": 2}]},
        headers=JSON_HEADERS,
    )
    assert r.status_code == 204, r.text
    assert committed(http, base, topic, [0]) == {0: 3}
    assert http.delete(base).status_code == 204
    r = http.get(f"{base}/records", headers={"Accept": V2_BINARY})
    assert (r.status_code, r.json()["error_code"]) == (404, 40403)

    base, _ = create(http, group, "one")  # same name, same group: a new instance
    subscribe(http, base, topics=[topic])
    rest_of = poll_records(http, base, 3)
    assert [(r["offset"], r["value"]) for r in rest_of] == [(i, b64(records[i][1])) for i in range(3, 6)]
    # An empty body commits every position.
    assert http.post(f"{base}/offsets").status_code == 204
    assert committed(http, base, topic, [0]) == {0: 6}
    lag = http.get(f"/v1/groups/{group}/lag").json()
    assert [(p["committed_offset"], p["lag"], p["client_id"]) for p in lag["partitions"]] == [(6, 0, "one")]
    assert http.delete(base).status_code == 204


def test_json_format_is_never_stuck_on_a_record_that_is_not_json(gbroker: BrokerProcess) -> None:
    """A json instance returns a record that is not JSON in its place (the field null, an
    ``error`` saying why) and moves on; its bytes read with a binary Accept after a seek back.
    Json asked of a binary instance stays 406 / 40601, as in Confluent."""
    topic, group = "rc-json", "rc-json-g"
    create_topic(gbroker.bootstrap, topic, 1)
    produce(
        gbroker.bootstrap,
        topic,
        [(b'"a"', b'{"n":1}', 0), (None, b"[1,2]", 0), (None, b"not json", 0), (b"3", b"null", 0)],
    )
    http = rest(gbroker.http_url)
    binary, _ = create(http, group, "b")
    subscribe(http, binary, topics=[topic])
    r = http.get(f"{binary}/records", headers={"Accept": V2_JSON})
    assert (r.status_code, r.json()["error_code"]) == (406, 40601)
    assert r.headers["content-type"] == "application/vnd.kafka.v2+json"
    assert http.delete(binary).status_code == 204

    base, _ = create(http, group, "j", fmt="json")
    subscribe(http, base, topics=[topic])
    got = poll_records(http, base, 4, accept=V2_JSON)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (0, "a", {"n": 1}),
        (1, None, [1, 2]),
        (2, None, None),
        (3, 3, None),
    ]
    assert [("error" in r) for r in got] == [False, False, True, False]
    assert "value of the record at offset 2 is not valid JSON" in got[2]["error"]
    r = http.post(
        f"{base}/positions",
        json={"offsets": [{"topic": topic, "partition": 0, "offset": 2}]},
        headers=JSON_HEADERS,
    )
    assert r.status_code == 204, r.text
    got = poll_records(http, base, 2, accept=V2_BINARY)  # a json instance reads bytes too
    assert [(r["offset"], r["value"]) for r in got] == [(2, b64(b"not json")), (3, b64(b"null"))]
    assert http.delete(base).status_code == 204


def test_positions_beginning_and_end(gbroker: BrokerProcess) -> None:
    topic, group = "rc-seek", "rc-seek-g"
    create_topic(gbroker.bootstrap, topic, 1)
    produce(gbroker.bootstrap, topic, [(None, b"old-%d" % i, 0) for i in range(3)])
    http = rest(gbroker.http_url)
    base, _ = create(http, group, "s")
    subscribe(http, base, topics=[topic])
    wait_for("an assignment", lambda: assignment(http, base) == {(topic, 0)})
    parts = {"partitions": [{"topic": topic, "partition": 0}]}
    assert http.post(f"{base}/positions/end", json=parts, headers=JSON_HEADERS).status_code == 204
    produce(gbroker.bootstrap, topic, [(None, b"new", 0)])
    assert [r["value"] for r in poll_records(http, base, 1)] == [b64(b"new")]
    assert http.post(f"{base}/positions/beginning", json=parts, headers=JSON_HEADERS).status_code == 204
    got = poll_records(http, base, 4)
    assert [r["value"] for r in got] == [b64(v) for v in (b"old-0", b"old-1", b"old-2", b"new")]
    assert http.delete(base).status_code == 204


def test_errors(gbroker: BrokerProcess) -> None:
    topic, group = "rc-err", "rc-err-g"
    create_topic(gbroker.bootstrap, topic, 1)
    http = rest(gbroker.http_url)
    r = http.get("/consumers/nope/instances/nobody/subscription")
    assert (r.status_code, r.json()["error_code"]) == (404, 40403)
    base, _ = create(http, group, "e")
    r = http.post(f"/consumers/{group}", json={"name": "e"}, headers=JSON_HEADERS)
    assert (r.status_code, r.json()["error_code"]) == (409, 40902)
    r = http.post(f"/consumers/{group}", json={"name": "x", "format": "avro"}, headers=JSON_HEADERS)
    assert r.status_code == 422
    r = http.post(f"/consumers/{group}", content=b'{"name": "y"}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = http.get(f"{base}/records")
    assert r.status_code == 400 and "not subscribed" in r.json()["message"]
    r = http.post(
        f"{base}/subscription", json={"topics": [topic], "topic_pattern": "x"}, headers=JSON_HEADERS
    )
    assert r.status_code == 422
    r = http.post(
        f"{base}/positions",
        json={"offsets": [{"topic": topic, "partition": 0, "offset": 1}]},
        headers=JSON_HEADERS,
    )
    assert r.status_code == 400 and "not assigned" in r.json()["message"]
    r = http.post(
        f"{base}/positions",
        json={"offsets": [{"topic": topic, "partition": 5, "offset": 1}]},
        headers=JSON_HEADERS,
    )
    assert (r.status_code, r.json()["error_code"]) == (404, 40402)
    assert http.delete(base).status_code == 204
    assert http.delete(base).status_code == 404


def test_two_rest_instances_split_the_partitions(gbroker: BrokerProcess) -> None:
    topic, group = "rc-split", "rc-split-g"
    create_topic(gbroker.bootstrap, topic, 4)
    http = rest(gbroker.http_url)
    a, _ = create(http, group, "a")
    b, _ = create(http, group, "b")
    subscribe(http, a, topics=[topic])
    subscribe(http, b, topics=[topic])
    everything = {(topic, p) for p in range(4)}

    def split() -> bool:
        sa, sb = assignment(http, a), assignment(http, b)
        return bool(sa) and bool(sb) and not (sa & sb) and sa | sb == everything

    wait_for("the two instances to split the partitions", split)
    sa, sb = assignment(http, a), assignment(http, b)
    assert len(sa) == len(sb) == 2  # range over 4 partitions and 2 members
    produced = produce(gbroker.bootstrap, topic, [(None, b"%d" % i, i % 4) for i in range(40)])
    got_a: list[dict[str, Any]] = []
    got_b: list[dict[str, Any]] = []

    def all_consumed() -> bool:
        got_a.extend(http.get(f"{a}/records", params={"timeout": 200}).json())
        got_b.extend(http.get(f"{b}/records", params={"timeout": 200}).json())
        return len(got_a) + len(got_b) >= 40

    wait_for("all 40 records", all_consumed)
    assert {(topic, r["partition"]) for r in got_a} <= sa
    assert {(topic, r["partition"]) for r in got_b} <= sb
    seen = Counter((r["partition"], r["offset"]) for r in got_a + got_b)
    assert seen == Counter(produced)
    lag = http.get(f"/v1/groups/{group}/lag").json()
    assert (lag["state"], len(lag["members"])) == ("Stable", 2)
    assert {m["client_id"] for m in lag["members"]} == {"a", "b"}
    assert http.delete(a).status_code == 204
    # The survivor takes every partition over.
    wait_for("b to own everything", lambda: assignment(http, b) == everything)
    assert http.delete(b).status_code == 204


def test_rest_instance_and_confluent_consumer_share_a_group(gbroker: BrokerProcess) -> None:
    topic, group = "rc-mixed", "rc-mixed-g"
    create_topic(gbroker.bootstrap, topic, 3)
    http = rest(gbroker.http_url)
    member = GroupMember(gbroker.bootstrap, group, [topic]).start()
    try:
        wait_for("the confluent consumer to own every partition", lambda: len(member.snapshot()[0]) == 3)
        base, _ = create(http, group, "r")
        subscribe(http, base, topics=[topic])
        everything = {(topic, p) for p in range(3)}

        def split() -> bool:
            ours, theirs = assignment(http, base), member.snapshot()[0]
            return bool(ours) and bool(theirs) and not (ours & theirs) and ours | theirs == everything

        wait_for("the REST instance and the confluent consumer to split the partitions", split)
        ours = assignment(http, base)
        produced = produce(gbroker.bootstrap, topic, [(None, b"m%d" % i, i % 3) for i in range(30)])
        got: list[dict[str, Any]] = []

        def all_consumed() -> bool:
            got.extend(http.get(f"{base}/records", params={"timeout": 200}).json())
            return len(got) + len(member.snapshot()[1]) >= 30

        wait_for("every record consumed by one of the two", all_consumed)
        assert http.post(f"{base}/offsets").status_code == 204
        theirs = member.snapshot()[1]
        assert {(topic, r["partition"]) for r in got} <= ours
        seen = Counter([(r["partition"], r["offset"]) for r in got] + [(p, o) for _, p, o, _ in theirs])
        assert seen == Counter(produced)
        assert {base64.b64decode(r["value"]) for r in got} | {v for *_, v in theirs} == {
            b"m%d" % i for i in range(30)
        }
        wait_for("lag 0", lambda: http.get(f"/v1/groups/{group}/lag").json()["total_lag"] == 0)
        lag = http.get(f"/v1/groups/{group}/lag").json()
        assert sorted(m["client_id"] for m in lag["members"]) == ["r", "rdkafka"]
        assert http.delete(base).status_code == 204
        wait_for(
            "the confluent consumer to take every partition back", lambda: member.snapshot()[0] == everything
        )
    finally:
        member.close()


def test_pattern_subscription_follows_new_topics(gbroker: BrokerProcess) -> None:
    group = "rc-pat-g"
    create_topic(gbroker.bootstrap, "pat-a", 1)
    create_topic(gbroker.bootstrap, "pat-b", 2)
    create_topic(gbroker.bootstrap, "other", 1)
    http = rest(gbroker.http_url)
    base, _ = create(http, group, "p")
    subscribe(http, base, topic_pattern="pat-.*")
    wait_for(
        "pat-a and pat-b assigned",
        lambda: assignment(http, base) == {("pat-a", 0), ("pat-b", 0), ("pat-b", 1)},
    )
    assert http.get(f"{base}/subscription").json() == {"topics": ["pat-a", "pat-b"]}
    create_topic(gbroker.bootstrap, "pat-c", 1)
    wait_for("pat-c assigned too", lambda: ("pat-c", 0) in assignment(http, base))
    produce(gbroker.bootstrap, "pat-c", [(None, b"c", 0)])
    assert [(r["topic"], r["value"]) for r in poll_records(http, base, 1)] == [("pat-c", b64(b"c"))]
    assert http.delete(f"{base}/subscription").status_code == 204
    assert http.get(f"{base}/subscription").json() == {"topics": []}
    assert assignment(http, base) == set()
    wait_for("the group to be empty", lambda: http.get(f"/v1/groups/{group}/lag").json()["members"] == [])
    assert http.delete(base).status_code == 204


def test_get_offsets_without_a_body_lists_the_assignment(gbroker: BrokerProcess) -> None:
    topic, group = "rc-off", "rc-off-g"
    create_topic(gbroker.bootstrap, topic, 2)
    produce(gbroker.bootstrap, topic, [(None, b"x", p) for p in (0, 1, 1)])
    http = rest(gbroker.http_url)
    base, _ = create(http, group, "o")
    subscribe(http, base, topics=[topic])
    poll_records(http, base, 3)
    r = http.post(
        f"{base}/offsets",
        content=json.dumps({"partitions": [{"topic": topic, "partition": 1, "offset": 1, "metadata": "m"}]}),
        headers=JSON_HEADERS,
    )  # Redpanda's spelling of the list
    assert r.status_code == 204, r.text
    r = http.get(f"{base}/offsets")
    assert r.json() == {"offsets": [{"topic": topic, "partition": 1, "offset": 2, "metadata": "m"}]}
    assert http.delete(base).status_code == 204


COOPERATIVE = {"partition.assignment.strategy": "cooperative-sticky"}


def _group_doc(http: httpx.Client, group: str) -> dict[str, Any]:
    found = [g for g in http.get("/v1/groups").json()["groups"] if g["group_id"] == group]
    return found[0] if found else {}


def test_rest_instances_lead_and_follow_a_cooperative_sticky_group(gbroker: BrokerProcess) -> None:
    """A REST instance alone picks range (eager first); a confluent-kafka consumer that
    offers only cooperative-sticky can join, the group switches to it and the REST
    instance, its leader, runs the cooperative-sticky assignor. A second REST instance
    then gets its partitions in a second round, after the owners revoked them, while the
    others keep theirs (and the first instance its positions on them)."""
    topic, group = "rc-coop", "rc-coop-g"
    create_topic(gbroker.bootstrap, topic, 4)
    everything = {(topic, p) for p in range(4)}
    produce(gbroker.bootstrap, topic, [(None, b"old-%d" % i, i % 4) for i in range(8)])
    http = rest(gbroker.http_url)
    r1, _ = create(http, group, "r1")
    subscribe(http, r1, topics=[topic])
    assert len(poll_records(http, r1, 8)) == 8  # alone: every partition, every record
    assert _group_doc(http, group)["protocol"] == "range"

    member = GroupMember(gbroker.bootstrap, group, [topic], **COOPERATIVE).start()
    r2 = ""
    try:

        def split(*instances: str) -> bool:
            owned = [assignment(http, i) for i in instances] + [member.snapshot()[0]]
            union = set().union(*owned)
            return (
                all(owned)
                and union == everything
                and sum(len(o) for o in owned) == len(everything)  # nobody twice
                and _group_doc(http, group).get("state") == "Stable"
            )

        wait_for("r1 and the confluent consumer to split the partitions", lambda: split(r1))
        doc = _group_doc(http, group)
        assert (doc["protocol"], doc["members"]) == ("cooperative-sticky", 2)
        before_r1, before_member = assignment(http, r1), member.snapshot()[0]

        r2, _ = create(http, group, "r2")
        subscribe(http, r2, topics=[topic])
        wait_for("three members to split the partitions", lambda: split(r1, r2))
        after_r1, after_member = assignment(http, r1), member.snapshot()[0]
        assert after_r1 <= before_r1 and after_member <= before_member  # sticky: nothing swapped
        assert _group_doc(http, group)["members"] == 3

        # r1 kept its positions on the partitions it kept: only the new records come.
        produced = produce(gbroker.bootstrap, topic, [(None, b"new-%d" % p, p) for p in range(4)])
        got = poll_records(http, r1, len(after_r1))
        assert sorted((r["partition"], r["offset"]) for r in got) == sorted(
            (p, o) for p, o in produced if (topic, p) in after_r1
        )
    finally:
        member.close()
        for inst in (r1, r2):
            if inst:
                http.delete(inst)


def test_rest_instance_follows_a_cooperative_leader(gbroker: BrokerProcess) -> None:
    """The confluent-kafka consumer leads (its own cooperative-sticky assignor); the REST
    instance joining gets partitions once the leader revoked them."""
    topic, group = "rc-coop-f", "rc-coop-f-g"
    create_topic(gbroker.bootstrap, topic, 4)
    everything = {(topic, p) for p in range(4)}
    http = rest(gbroker.http_url)
    member = GroupMember(gbroker.bootstrap, group, [topic], **COOPERATIVE).start()
    try:
        wait_for("the confluent consumer to own every partition", lambda: member.snapshot()[0] == everything)
        base, _ = create(http, group, "r")
        subscribe(http, base, topics=[topic])

        def split() -> bool:
            ours, theirs = assignment(http, base), member.snapshot()[0]
            return bool(ours) and bool(theirs) and not (ours & theirs) and ours | theirs == everything

        wait_for("the REST instance to get its share", split)
        doc = _group_doc(http, group)
        assert (doc["protocol"], doc["members"], doc["state"]) == ("cooperative-sticky", 2, "Stable")
        assert len(assignment(http, base)) == 2
    finally:
        member.close()
        http.delete(f"/consumers/{group}/instances/r")
