"""The console's schema pages and the message browser's decoding, in headless Chromium
over one real broker with its registry: the subject list with versions, a diff between
two versions, an Avro value shown decoded by its schema id."""

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
        yield b
    finally:
        b.kill()


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
        driver.get(broker.http_url + f"/dashboard/topics/{TOPIC}")
        wait = _wait(driver)
        driver.find_element(By.CSS_SELECTOR, "[data-testid=browse-go]").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=value-decoded]"))
        decoded = driver.find_element(By.CSS_SELECTOR, "[data-testid=value-decoded]").text
        assert json.loads(decoded) == {"name": "Ada", "age": 36}
        assert "schema id 2 · AVRO" in driver.find_element(By.CSS_SELECTOR, "[data-testid=value-schema]").text
