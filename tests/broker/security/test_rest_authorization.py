"""REST listings and /metrics under ACLs, on one real broker (SCRAM users, REST basic auth,
authorization on, a metrics listener): each listing shows only the topics and groups the
user may DESCRIBE (READ implies it), a named one it may not is 403 whether it exists or
not, /metrics needs DESCRIBE on the cluster, and the metrics listener serves without
authentication. Kafka clients commit the groups' offsets, as users would."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.rest import create_app
from broker.config import BrokerConfig, load_config
from broker.embedded_store import EmbeddedMetadataStore
from broker.keys import KeyLayout
from broker.security.acl import Authorizer
from broker.security.authz import AccessControl
from broker.security.stored import SecurityDocuments, StoredAcls
from hot.errors import InvalidConfigError
from kwire.address import HostPort
from tests.broker.security.test_authorization import (
    ADMIN_PW,
    MECH,
    add_acls,
    add_user,
    binding,
    conf,
    create_topics,
)
from tests.brokers import BrokerProcess
from tests.inprocess import broker_of_one

A, B = "acl-rest-a", "acl-rest-b"
GA, GB = "acl-rest-ga", "acl-rest-gb"
PW = {
    "admin": ADMIN_PW,
    "reader": "Reader-pw-5e0b91",
    "nobody": "Nobody-pw-c27a4d",
    "monitor": "Mon-pw-81f3aa",
    "operator": "Oper-pw-4d19c7",
}
V2_JSON = "application/vnd.kafka.json.v2+json"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    from confluent_kafka import Consumer, TopicPartition

    data = tmp_path_factory.mktemp("rest-authz")
    for name, pw in PW.items():
        add_user(data, name, pw)
    env = {
        "STRATA_SASL_MECHANISMS": MECH,
        "STRATA_AUTHORIZATION_ENABLED": "true",
        "STRATA_AUTHORIZATION_SUPER_USERS": "User:admin",
        "STRATA_SASL_REST_BASIC_AUTH": "true",
        "STRATA_METRICS_LISTEN": "127.0.0.1:0",
    }
    b = BrokerProcess(data, env=env).start()
    try:
        create_topics(b, A, B)
        with httpx.Client(base_url=b.http_url, timeout=30, auth=("admin", ADMIN_PW)) as http:
            for topic in (A, B):
                body = {"records": [{"value": i} for i in range(3)]}
                r = http.post(f"/topics/{topic}", json=body, headers={"Content-Type": V2_JSON})
                assert r.status_code == 200, r.text
        for group in (GA, GB):  # offsets-only groups with a committed offset on both topics
            c = Consumer({**conf(b, "admin", ADMIN_PW), "group.id": group, "enable.auto.commit": False})
            c.commit(offsets=[TopicPartition(A, 0, 1), TopicPartition(B, 0, 2)], asynchronous=False)
            c.close()
        add_acls(
            b,
            binding("TOPIC", A, "User:reader", "READ"),  # implies DESCRIBE
            binding("GROUP", GA, "User:reader", "READ"),
            binding("GROUP", GA, "User:monitor", "READ"),
            binding("BROKER", "kafka-cluster", "User:monitor", "DESCRIBE"),  # the cluster,
            binding("TOPIC", B, "User:operator", "ALTER"),
        )
        yield b
    finally:
        b.kill()
    for pw in PW.values():
        assert pw not in b.output()


def client(b: BrokerProcess, user: str | None) -> httpx.Client:
    return httpx.Client(base_url=b.http_url, timeout=30, auth=(user, PW[user]) if user else None)


def _names(key: str, field: str) -> Callable[[Any], set[str]]:
    return lambda doc: {item[field] for item in doc[key]}


# (route, what it lists) for every listing: the names it shows
LISTINGS: dict[str, Callable[[Any], set[str]]] = {
    "/topics": set,
    "/v3/clusters/strata-local/topics": _names("data", "topic_name"),
    "/v1/partitions": _names("topics", "topic"),
    "/v1/groups": _names("groups", "group_id"),
    f"/v1/groups/{GA}/lag": lambda doc: {p["topic"] for p in doc["partitions"]},
}
# what each user may see of ours: monitor's cluster DESCRIBE shows no topic, and its READ
# on group GA shows the group but none of its partitions
SEES = {"admin": {A, B, GA, GB}, "reader": {A, GA}, "monitor": {GA}, "nobody": set()}


@pytest.mark.parametrize("route", LISTINGS)
def test_listings_show_only_describable(broker: BrokerProcess, route: str) -> None:
    ours = {GA, GB} if route == "/v1/groups" else {A, B}
    for user, sees in SEES.items():
        with client(broker, user) as http:
            r = http.get(route)
        if route.endswith("/lag") and GA not in sees:
            assert r.status_code == 403, (user, r.text)  # the group itself is not visible
            continue
        assert r.status_code == 200, (user, r.text)
        assert LISTINGS[route](r.json()) & ours == sees & ours, user


def test_counts_and_lag_cover_only_visible_topics(broker: BrokerProcess) -> None:
    with client(broker, "admin") as http:
        listed = http.get("/v1/partitions").json()["topics"]
        lag = http.get(f"/v1/groups/{GA}/lag").json()
    # Every topic the admin sees (the internal __consumer_offsets among them).
    everything = (len(listed), sum(len(t["partitions"]) for t in listed))
    assert lag["total_lag"] == (3 - 1) + (3 - 2)
    for user, (topics, partitions) in (("admin", everything), ("reader", (1, 1)), ("nobody", (0, 0))):
        with client(broker, user) as http:
            status = http.get("/v1/status").json()
            assert (status["topics"], status["partitions"]) == (topics, partitions), user
            assert http.get("/healthz").json()["topics"] == topics
    with client(broker, "reader") as http:
        lag = http.get(f"/v1/groups/{GA}/lag").json()
    assert lag["total_lag"] == 3 - 1 and [p["committed_offset"] for p in lag["partitions"]] == [1]


def test_named_objects_not_visible_are_403_existing_or_not(broker: BrokerProcess) -> None:
    with client(broker, "reader") as http:
        for route, what in (
            (f"/v1/groups/{GB}/lag", f"DESCRIBE group {GB!r}"),
            ("/v1/groups/no-such-group/lag", "DESCRIBE group 'no-such-group'"),
            (f"/topics/{B}", f"DESCRIBE topic {B!r}"),
            ("/topics/no-such-topic", "DESCRIBE topic 'no-such-topic'"),
        ):
            r = http.get(route)
            assert r.status_code == 403 and r.json()["message"] == f"not authorized to {what}", r.text
        # a REST consumer of a group it may read: committed offsets and commits of a topic
        # it may not describe or read are refused too
        r = http.post(f"/consumers/{GA}", json={"name": "r1"}, headers={"Content-Type": V2_JSON})
        assert r.status_code == 200, r.text
        offsets = f"/consumers/{GA}/instances/r1/offsets"
        ctype = {"Content-Type": V2_JSON}
        try:
            for topic, status in ((B, 403), ("no-such-topic", 403), (A, 200)):
                body = {"partitions": [{"topic": topic, "partition": 0}]}
                r = http.request("GET", offsets, json=body, headers=ctype)
                assert r.status_code == status, (topic, r.text)
            assert r.json()["offsets"] == [{"topic": A, "partition": 0, "offset": 1, "metadata": ""}]
            body = {"offsets": [{"topic": B, "partition": 0, "offset": 0}]}
            r = http.post(offsets, json=body, headers=ctype)
            assert r.status_code == 403 and r.json()["message"] == f"not authorized to READ topic {B!r}"
            # records need READ on the instance's topics from whoever asks for them
            r = http.post(f"/consumers/{GA}/instances/r1/subscription", json={"topics": [A]}, headers=ctype)
            assert r.status_code == 204, r.text
            records = f"/consumers/{GA}/instances/r1/records?timeout=0"
            accept = {"Accept": "application/vnd.kafka.binary.v2+json"}
            assert http.get(records, headers=accept).status_code == 200
            with client(broker, "monitor") as other:  # READ on the group, not on the topic
                r = other.get(records, headers=accept)
                assert r.status_code == 403 and r.json()["message"] == f"not authorized to READ topic {A!r}"
        finally:
            assert http.delete(f"/consumers/{GA}/instances/r1").status_code == 204
    with client(broker, "admin") as http:
        assert http.get("/v1/groups/no-such-group/lag").status_code == 404


def test_metrics_need_cluster_describe_or_the_metrics_listener(broker: BrokerProcess) -> None:
    series = f'topic="{A}"'
    with client(broker, None) as http:
        r = http.get("/metrics")
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic realm=")
    for user in ("nobody", "reader"):
        with client(broker, user) as http:
            r = http.get("/metrics")
            assert r.status_code == 403, (user, r.text)
            assert r.json()["message"] == "not authorized to DESCRIBE the cluster"
            assert series not in r.text
    for user in ("monitor", "admin"):
        with client(broker, user) as http:
            r = http.get("/metrics")
            assert r.status_code == 200 and series in r.text, user
    m = re.search(r"strata: metrics listener on (http://[\d.]+:\d+)/metrics", broker.output())
    assert m is not None, broker.output()
    with httpx.Client(base_url=m.group(1), timeout=30) as plain:  # no credentials at all
        r = plain.get("/metrics")
        assert r.status_code == 200 and series in r.text
        assert r.headers["content-type"].startswith("text/plain")
        assert plain.get("/v1/partitions").status_code == 404  # it serves nothing else
        assert plain.get("/topics").status_code == 404


async def test_anonymous_without_rest_auth_and_authorization_off(tmp_path: Path) -> None:
    """No REST authentication configured: requests are User:ANONYMOUS, held to the ACLs
    like anyone (no challenge to offer, so /metrics is 403); with authorization off
    every route answers as before."""
    config = BrokerConfig(data_dir=tmp_path / "data")
    async with broker_of_one(config) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as http:
            r = await http.post("/v3/clusters/strata-local/topics", json={"topic_name": A})
            assert r.status_code == 201, r.text
            assert (await http.get("/metrics")).status_code == 200
            assert [t["topic"] for t in (await http.get("/v1/partitions")).json()["topics"]] == [A]
            assert (await http.get("/v1/status")).json()["topics"] == 1
            empty = SecurityDocuments(EmbeddedMetadataStore(tmp_path), KeyLayout("strata-local"))
            no_acls = StoredAcls(empty)
            broker.access = AccessControl(Authorizer(), no_acls)
            r = await http.get("/metrics")
            assert r.status_code == 403 and "www-authenticate" not in r.headers
            assert (await http.get("/v1/partitions")).json() == {"topics": []}
            assert (await http.get("/v1/status")).json()["topics"] == 0
            assert (await http.get("/healthz")).json()["topics"] == 0
            assert (await http.get(f"/topics/{A}")).status_code == 403


def test_tier_sync_needs_alter_on_the_cluster_or_the_topic(broker: BrokerProcess) -> None:
    with client(broker, "reader") as http:  # READ on A is not ALTER
        r = http.post("/v1/tier/sync")
        assert r.status_code == 403 and r.json()["message"] == "not authorized to ALTER the cluster"
        r = http.post("/v1/tier/sync", params={"topic": A})
        assert r.status_code == 403 and r.json()["message"] == f"not authorized to ALTER topic {A!r}"
    with client(broker, "operator") as http:  # ALTER on B only
        assert http.post("/v1/tier/sync").status_code == 403
        assert http.post("/v1/tier/sync", params={"topic": A}).status_code == 403
        r = http.post("/v1/tier/sync", params={"topic": B})
        assert r.status_code == 200, r.text
        assert [(p["topic"], p["complete"]) for p in r.json()["partitions"]] == [(B, True)]
    with client(broker, "admin") as http:
        r = http.post("/v1/tier/sync")
        assert r.status_code == 200, r.text
        done = {p["topic"]: p for p in r.json()["partitions"]}
        assert done[A]["complete"] and done[A]["remote_next_offset"] == done[A]["target"] == 3


def test_metrics_listen_setting() -> None:
    assert load_config(env={}).metrics_listen is None
    cfg = load_config(env={"STRATA_METRICS_LISTEN": "10.0.0.5:9644"})
    assert cfg.metrics_listen == HostPort("10.0.0.5", 9644)
    with pytest.raises(InvalidConfigError, match="metrics_listen"):
        load_config(env={"STRATA_METRICS_LISTEN": "9644"})
