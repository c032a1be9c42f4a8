"""The schema registry's listener under REST basic auth and ACLs (api.schema_registry.authz):
subjects guarded by their topic (READ to read, WRITE to register), listings filtered,
schema ids readable through one readable subject, global settings needing ALTER on the
cluster, 401 without credentials."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.broker.security.test_authorization import ADMIN_PW, MECH, add_acls, add_user, binding
from tests.brokers import BrokerProcess

PW = {"admin": ADMIN_PW, "reader": "Reader-pw-9a1c33", "writer": "Writer-pw-0b7e21"}
SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "f", "type": "string"}]})
MEDIA = "application/vnd.schemaregistry.v1+json"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("registry-authz")
    for name, pw in PW.items():
        add_user(data, name, pw)
    env = {
        "STRATA_SASL_MECHANISMS": MECH,
        "STRATA_AUTHORIZATION_ENABLED": "true",
        "STRATA_AUTHORIZATION_SUPER_USERS": "User:admin",
        "STRATA_SASL_REST_BASIC_AUTH": "true",
        "STRATA_SCHEMA_REGISTRY_LISTEN": "127.0.0.1:0",
    }
    b = BrokerProcess(data, env=env).start()
    try:
        add_acls(
            b,
            binding("TOPIC", "a", "User:reader", "READ"),
            binding("TOPIC", "a", "User:writer", "WRITE"),
        )
        yield b
    finally:
        b.kill()


def client(b: BrokerProcess, user: str | None) -> httpx.Client:
    return httpx.Client(
        base_url=b.registry_url,
        timeout=30,
        auth=(user, PW[user]) if user else None,
        headers={"Content-Type": MEDIA},
    )


def test_subject_acls(broker: BrokerProcess) -> None:
    with client(broker, "admin") as admin:
        ids = {}
        for s in ("a-value", "b-value"):
            r = admin.post(f"/subjects/{s}/versions", json={"schema": SCHEMA.replace('"R"', f'"R{s[0]}"')})
            assert r.status_code == 200, r.text
            ids[s] = r.json()["id"]
        assert admin.get("/subjects").json() == ["a-value", "b-value"]
    with client(broker, None) as anonymous:
        assert anonymous.get("/subjects").status_code == 401
    with client(broker, "reader") as reader:
        assert reader.get("/subjects").json() == ["a-value"]
        assert reader.get("/subjects/a-value/versions").json() == [1]
        r = reader.get("/subjects/b-value/versions")
        assert (r.status_code, r.json()["error_code"]) == (403, 40301)
        assert reader.get(f"/schemas/ids/{ids['a-value']}").status_code == 200
        assert reader.get(f"/schemas/ids/{ids['b-value']}").status_code == 403
        r = reader.post("/subjects/a-value/versions", json={"schema": SCHEMA})
        assert (r.status_code, r.json()["error_code"]) == (403, 40301)
        assert reader.put("/config", json={"compatibility": "NONE"}).status_code == 403
        assert reader.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    with client(broker, "writer") as writer:
        r = writer.post("/subjects/a-value/versions", json={"schema": SCHEMA.replace('"R"', '"Ra"')})
        assert r.status_code == 200 and r.json()["id"] == ids["a-value"], r.text
        assert writer.delete("/subjects/b-value").status_code == 403


def test_confluent_client_with_basic_auth(broker: BrokerProcess) -> None:
    """confluent-kafka's SchemaRegistryClient authenticates with ``basic.auth.user.info``
    (the HTTP listener's users); without credentials it gets 401, refused by ACLs 403."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    def sr(user: str | None) -> SchemaRegistryClient:
        conf = {"url": broker.registry_url}
        if user is not None:
            conf["basic.auth.user.info"] = f"{user}:{PW[user]}"
        return SchemaRegistryClient(conf)

    sid = sr("writer").register_schema("a-key", Schema(SCHEMA, "AVRO"))
    assert sr("reader").get_latest_version("a-key").schema_id == sid
    with pytest.raises(SchemaRegistryError) as info:
        sr(None).get_subjects()
    assert info.value.http_status_code == 401
    with pytest.raises(SchemaRegistryError) as info:
        sr("reader").register_schema("a-key", Schema(SCHEMA.replace('"R"', '"Rd"'), "AVRO"))
    assert (info.value.http_status_code, info.value.error_code) == (403, 40301)
