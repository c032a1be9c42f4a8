"""The console's schema pages and the message browser's decoding, in headless Chromium
over one real broker with its registry: the subject list with versions, a diff between
two versions, Avro, Protobuf and JSON Schema values shown decoded by their schema ids."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.brokers import BrokerProcess, create_topic
from tests.ops.chromium import chromium

TOPIC = "people"
V1 = {"type": "record", "name": "Person", "fields": [{"name": "name", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "age", "type": "int", "default": 0}]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("console-schemas"), "--schema-registry-listen", "127.0.0.1:0"
    ).start()
    try:
        sr = SchemaRegistryClient({"url": b.registry_url})
        sr.register_schema(f"{TOPIC}-value", Schema(json.dumps(V1), "AVRO"))
        create_topic(b.bootstrap, TOPIC, 1)
        ser = AvroSerializer(sr, json.dumps(V2))
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce(
            TOPIC, value=ser({"name": "Ada", "age": 36}, SerializationContext(TOPIC, MessageField.VALUE))
        )
        assert p.flush(30) == 0
        _produce_protobuf_json_unknown(b)
        yield b
    finally:
        b.kill()


def _produce_protobuf_json_unknown(b: BrokerProcess) -> None:
    """A Protobuf value (a nested message, so message indexes), a JSON Schema value and a
    value naming an unknown id, each in a topic of its own."""
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped]

    fdp = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    outer = fdp.message_type.add(name="Outer")
    inner = outer.nested_type.add(name="Item")
    inner.field.add(name="sku", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    item = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Outer.Item"))
    sr = SchemaRegistryClient({"url": b.registry_url})
    js = JSONSerializer(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}}), sr)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for topic, make in (
        (
            "mixed",
            lambda ctx: ProtobufSerializer(item, sr, {"use.deprecated.format": False})(item(sku="x-1"), ctx),
        ),
        ("mixed-json", lambda ctx: js({"n": 5}, ctx)),
        ("mixed-unknown", lambda ctx: b"\x00\x00\x00\x03\xe7junk"),
    ):
        create_topic(b.bootstrap, topic, 1)
        p.produce(topic, value=make(SerializationContext(topic, MessageField.VALUE)))
        assert p.flush(30) == 0


def _wait(driver: Any) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 30, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda d: int(d.find_element(By.TAG_NAME, "body").get_attribute("data-refreshes") or 0) >= 1)
    return wait


def test_schema_pages_and_decoded_values(
    broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from selenium.webdriver.common.by import By

    subject = f"{TOPIC}-value"
    with chromium(tmp_path_factory.mktemp("profile"), 1280, 1000) as driver:
        driver.get(broker.http_url + "/dashboard/schemas")
        wait = _wait(driver)
        wait.until(
            lambda d: (
                d.find_element(
                    By.CSS_SELECTOR, f"[data-row=subject-{subject}] [data-field=versions_text]"
                ).text
                == "1, 2"
            )
        )
        driver.get(broker.http_url + f"/dashboard/schemas/{subject}")
        wait = _wait(driver)
        wait.until(
            lambda d: (
                '+      "name": "age",' in d.find_element(By.CSS_SELECTOR, "[data-testid=schema-diff]").text
            )
        )
        assert len(driver.find_elements(By.CSS_SELECTOR, "[data-testid=schema-version]")) == 2
        for topic, value, fmt in (
            (TOPIC, {"name": "Ada", "age": 36}, "schema id 2 · AVRO"),
            ("mixed", {"sku": "x-1"}, "· PROTOBUF"),
            ("mixed-json", {"n": 5}, "· JSON"),
        ):
            driver.get(broker.http_url + f"/dashboard/topics/{topic}")
            wait = _wait(driver)
            driver.find_element(By.CSS_SELECTOR, "[data-testid=browse-go]").click()
            # The browser may render the rows more than once (the first answer, then the
            # decoded one): read both cells together, again while a render replaces them.
            shown = wait.until(lambda d: _decoded_cells(d, By))
            assert json.loads(shown[0]) == value, (topic, shown)
            assert fmt in shown[1], (topic, shown)


def _decoded_cells(driver: Any, by: Any) -> tuple[str, str] | None:
    """The first row's decoded value and schema cells once both are rendered and the value
    is JSON; None (wait on) while they are missing, being replaced, or not decoded yet."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        decoded = driver.find_element(by.CSS_SELECTOR, "[data-testid=value-decoded]").text
        schema = driver.find_element(by.CSS_SELECTOR, "[data-testid=value-schema]").text
        json.loads(decoded)
    except (NoSuchElementException, StaleElementReferenceException, ValueError):
        return None
    return decoded, schema


def test_protobuf_and_json_values_decoded(broker: BrokerProcess) -> None:
    """The browser's data: Protobuf (a nested message, so message indexes) and JSON Schema
    values decoded by their ids; a value with an unknown id says so."""
    import urllib.request

    schemas: list[Any] = []
    for topic in ("mixed", "mixed-json", "mixed-unknown"):
        url = f"{broker.http_url}/console/api/topics/{topic}/messages?mode=offset&offset=0"
        with urllib.request.urlopen(url, timeout=30) as resp:
            schemas += [r.get("value_schema") for r in json.loads(resp.read())["records"]]
    assert schemas[0]["schema_type"] == "PROTOBUF" and schemas[0]["decoded"] == {"sku": "x-1"}, schemas
    assert schemas[1]["schema_type"] == "JSON" and schemas[1]["decoded"] == {"n": 5}, schemas
    assert schemas[2] == {"schema_id": 999, "error": "Schema 999 not found"}, schemas
