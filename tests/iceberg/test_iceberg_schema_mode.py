"""value_schema_id_prefix mode: values in the registry's wire format become typed columns
(a ``value`` struct), Avro and JSON Schema, and a schema evolution that adds a field adds
a column; undecodable values are dropped. The first test runs the translator in this
process with an in-test schema source against a real broker; the second is the broker's
own committer asking the broker's own schema registry. pyiceberg and DuckDB read the
tables."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import pytest
from confluent_kafka import Producer

from hot.config import LogConfig
from spark.iceberg.catalog import catalog_properties, open_catalog
from spark.iceberg.schema_values import DictSchemaSource
from spark.iceberg.translate import Translator
from tests.brokers import BrokerProcess, create_topic
from tests.iceberg.icelib import duckdb_rows
from tiering.iceberg_config import IcebergConfig
from tiering.keys import iceberg_dlq_root
from tiering.store import SyncObjectStore

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}],
}
JSON_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "tag": {"type": "string"}}}
JSON_SCHEMA_V2 = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "tag": {"type": "string"}, "level": {"type": "integer"}},
}


def _avro(schema_id: int, schema: dict[str, object], value: dict[str, object]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in values:
        p.produce(topic, v, b"k", partition=0)
    assert p.flush(30) == 0


def test_avro_and_json_values_as_typed_columns_with_an_evolution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "b"
    source = DictSchemaSource(
        {
            1: ("AVRO", json.dumps(V1)),
            2: ("AVRO", json.dumps(V2)),
            7: ("JSON", json.dumps(JSON_SCHEMA)),
            8: ("JSON", json.dumps(JSON_SCHEMA_V2)),
        }
    )
    # The translator runs here: the broker's own committer (which would take the same
    # table, and clean the files of a commit in flight as orphans) looks only in an hour.
    broker = BrokerProcess(data, env={"STRATA_ICEBERG_CHECK_INTERVAL_MS": "3600000"}).start()
    url = f"file://{(data / 'objects').resolve()}"
    store = SyncObjectStore.open(url)
    try:
        create_topic(broker.bootstrap, "orders", 1, {"iceberg.mode": "value_schema_id_prefix"})
        create_topic(broker.bootstrap, "events", 1, {"iceberg.mode": "value_schema_id_prefix"})
        create_topic(broker.bootstrap, "bad", 1, {"iceberg.mode": "value_schema_id_prefix"})
        info = {t.name: t for t in _topics(data)}
        config = LogConfig.from_kafka({"iceberg.mode": "value_schema_id_prefix"})
        catalog = open_catalog(catalog_properties(IcebergConfig(), tmp_path / "mine", url))
        t = Translator(store, catalog, namespace="strata", broker=broker.bootstrap, schema_source=source)

        _produce(
            broker.bootstrap, "orders", [_avro(1, V1, {"id": i}) for i in range(3)] + [b"not wire format"]
        )
        assert t.run_pass(info["orders"], config).rows == 3  # the bad value dropped
        _produce(
            broker.bootstrap, "orders", [_avro(2, V2, {"id": 10 + i, "note": f"n{i}"}) for i in range(2)]
        )
        assert t.run_pass(info["orders"], config).rows == 2
        table = catalog.load_table(("strata", "orders"))
        got = table.scan().to_arrow().sort_by("offset")
        assert got.column("value").to_pylist() == [
            {"id": 0, "note": None},
            {"id": 1, "note": None},
            {"id": 2, "note": None},
            {"id": 10, "note": "n0"},
            {"id": 11, "note": "n1"},
        ]
        assert got.column("offset").to_pylist() == [0, 1, 2, 4, 5]  # offset 3 was the bad value
        duck = duckdb_rows(table.metadata_location, "value.id")
        assert [r[3] for r in duck] == [0, 1, 2, 10, 11]

        body = [b"\x00" + struct.pack(">I", 7) + json.dumps({"n": i, "tag": "t"}).encode() for i in range(2)]
        _produce(broker.bootstrap, "events", body)
        assert t.run_pass(info["events"], config).rows == 2
        events = catalog.load_table(("strata", "events")).scan().to_arrow().sort_by("offset")
        assert events.column("value").to_pylist() == [{"n": 0, "tag": "t"}, {"n": 1, "tag": "t"}]
        # a JSON Schema evolution: the property version 8 adds becomes a column
        body = [b"\x00" + struct.pack(">I", 8) + json.dumps({"n": 2, "tag": "u", "level": 3}).encode()]
        _produce(broker.bootstrap, "events", body)
        assert t.run_pass(info["events"], config).rows == 1
        events_table = catalog.load_table(("strata", "events"))
        assert events_table.scan().to_arrow().sort_by("offset").column("value").to_pylist() == [
            {"n": 0, "tag": "t", "level": None},
            {"n": 1, "tag": "t", "level": None},
            {"n": 2, "tag": "u", "level": 3},
        ]
        duck = duckdb_rows(events_table.metadata_location, "value.level")
        assert [(r[1], r[3]) for r in duck] == [(0, None), (1, None), (2, 3)]

        _dead_letters(broker.bootstrap, t, info["bad"], catalog, monkeypatch)
    finally:
        store.close()
        broker.stop()


def _dead_letters(
    bootstrap: str, t: Translator, info: Any, catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """iceberg.invalid.record.action=dlq_table: a value not in the wire format and one
    naming an unknown schema id go to ``bad~dlq`` with their raw bytes and the reason,
    exactly once across a pass that fails between the two tables' commits."""
    import spark.iceberg.translate as translate

    config = LogConfig.from_kafka(
        {"iceberg.mode": "value_schema_id_prefix", "iceberg.invalid.record.action": "dlq_table"}
    )
    unknown = b"\x00" + struct.pack(">I", 99) + b"whatever"
    _produce(bootstrap, "bad", [_avro(1, V1, {"id": 1}), b"plain text", unknown, _avro(1, V1, {"id": 2})])
    real = translate.iceberg_data_file

    def fail_main_commit(metadata: Any, url: str, data: Any) -> Any:
        if "~dlq/" not in url:
            raise OSError("injected: the main table's commit fails")
        return real(metadata, url, data)

    monkeypatch.setattr(translate, "iceberg_data_file", fail_main_commit)
    with pytest.raises(OSError, match="injected"):
        t.run_pass(info, config)  # the dead letters committed, the table not
    monkeypatch.setattr(translate, "iceberg_data_file", real)
    assert t.run_pass(info, config).rows == 2
    main = catalog.load_table(("strata", "bad")).scan().to_arrow().sort_by("offset")
    assert main.column("offset").to_pylist() == [0, 3]
    dlq = catalog.load_table(("strata", "bad~dlq"))
    got = dlq.scan().to_arrow().sort_by("offset")
    assert got.column("offset").to_pylist() == [1, 2]  # once each, after the rerun
    assert got.column("value").to_pylist() == [b"plain text", unknown]
    assert got.column("key").to_pylist() == [b"k", b"k"]
    reasons = got.column("reason").to_pylist()
    assert "wire format" in reasons[0] and "schema id 99 is not registered" in reasons[1]
    duck = duckdb_rows(dlq.metadata_location, "reason")
    assert [(r[1], r[3]) for r in duck] == [(1, reasons[0]), (2, reasons[1])]
    # a pass with invalid values only still moves the table's offsets (a snapshot with no file)
    _produce(bootstrap, "bad", [b"junk"])
    assert t.run_pass(info, config).rows == 0
    assert translate.committed_offsets(catalog.load_table(("strata", "bad"))) == {0: 5}
    assert catalog.load_table(("strata", "bad~dlq")).scan().to_arrow().num_rows == 3
    # iceberg.delete=true: the topic's deletion drops the dead-letter table and its files too
    assert translate.on_topic_deleted(catalog, t.store, "strata", info, drop=True) == "dropped"
    assert not catalog.table_exists(("strata", "bad~dlq")) and not catalog.table_exists(("strata", "bad"))
    assert not list(t.store.list(f"{iceberg_dlq_root(info.name, info.topic_id)}/"))


def _topics(data: Path) -> list[object]:
    from hot.topics import TopicRegistry

    return TopicRegistry(next(data.rglob("topics.json"))).list()


def test_the_broker_decodes_values_by_its_own_schema_registry(tmp_path: Path) -> None:
    """The broker's committer in schema mode asks the broker's schema registry (issue 37):
    confluent-kafka's AvroSerializer registers the schemas and frames the values, an
    evolution adds a column, and pyiceberg reads the typed values back."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.iceberg.icelib import wait_for

    data = tmp_path / "b"
    broker = BrokerProcess(
        data, "--schema-registry-listen", "127.0.0.1:0", env={"STRATA_ICEBERG_CHECK_INTERVAL_MS": "200"}
    ).start()
    try:
        topic = "typed"
        create_topic(
            broker.bootstrap,
            topic,
            1,
            {"iceberg.mode": "value_schema_id_prefix", "iceberg.target.lag.ms": "1000"},
        )
        sr = SchemaRegistryClient({"url": broker.registry_url})
        ctx = SerializationContext(topic, MessageField.VALUE)
        v1 = AvroSerializer(sr, json.dumps(V1))
        _produce(broker.bootstrap, topic, [v1({"id": i}, ctx) for i in range(3)])
        v2 = AvroSerializer(sr, json.dumps(V2))  # BACKWARD-compatible: registered as version 2
        _produce(broker.bootstrap, topic, [v2({"id": 10, "note": "n"}, ctx)])

        url = f"file://{(data / 'objects').resolve()}"
        catalog = open_catalog(catalog_properties(IcebergConfig(), data, url))

        def typed() -> list[object] | None:
            try:
                rows = catalog.load_table(("strata", topic)).scan().to_arrow().sort_by("offset")
            except Exception:
                return None
            return rows.column("value").to_pylist() if rows.num_rows >= 4 else None

        assert wait_for(typed, 90, "the typed translation") == [
            {"id": 0, "note": None},
            {"id": 1, "note": None},
            {"id": 2, "note": None},
            {"id": 10, "note": "n"},
        ]

        # a schema with a reference, registered through the registry's REST API: the
        # committer fetches the referenced schema too, and the named type becomes a struct
        from confluent_kafka.schema_registry import Schema, SchemaReference

        address = {"type": "record", "name": "com.x.Address", "fields": [{"name": "city", "type": "string"}]}
        shipment = {
            "type": "record",
            "name": "Shipment",
            "fields": [{"name": "id", "type": "long"}, {"name": "to", "type": "com.x.Address"}],
        }
        sr.register_schema("address", Schema(json.dumps(address), "AVRO"))
        ref = SchemaReference("com.x.Address", "address", 1)
        schema_id = sr.register_schema("shipped-value", Schema(json.dumps(shipment), "AVRO", [ref]))
        create_topic(
            broker.bootstrap,
            "shipped",
            1,
            {"iceberg.mode": "value_schema_id_prefix", "iceberg.target.lag.ms": "1000"},
        )
        named: dict[str, object] = {}
        fastavro.parse_schema(address, named_schemas=named)
        writer = fastavro.parse_schema(shipment, named_schemas=named)
        framed = []
        for i, city in enumerate(("Oslo", "Rome")):
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, writer, {"id": i, "to": {"city": city}})
            framed.append(b"\x00" + struct.pack(">I", schema_id) + buf.getvalue())
        _produce(broker.bootstrap, "shipped", framed)

        def shipped() -> list[object] | None:
            try:
                rows = catalog.load_table(("strata", "shipped")).scan().to_arrow().sort_by("offset")
            except Exception:
                return None
            return rows.column("value").to_pylist() if rows.num_rows >= 2 else None

        assert wait_for(shipped, 90, "the translation of a schema with a reference") == [
            {"id": 0, "to": {"city": "Oslo"}},
            {"id": 1, "to": {"city": "Rome"}},
        ]
        _protobuf(broker, sr, catalog)
    finally:
        broker.stop()


PROTO_V1 = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
enum Kind { KIND_UNKNOWN = 0; BOOK = 1; }
message Order {
  int64 id = 1;
  repeated string tags = 2;
  Line first = 3;
  Kind kind = 4;
  google.protobuf.Timestamp at = 5;
  oneof pay { string card = 6; int64 voucher = 7; }
  message Line { string sku = 1; double price = 2; }
}
"""
# version 2 adds a field (BACKWARD-compatible): a new column, null in the older rows
PROTO_V2 = PROTO_V1.replace("  message Line", "  optional string note = 8;\n  message Line")


def _protobuf(broker: BrokerProcess, sr: Any, catalog: Any) -> None:
    """Protobuf values by the broker's registry: version 1 registered as .proto text through
    the REST API (the committer compiles it), version 2 by confluent-kafka's
    ProtobufSerializer (a base64 descriptor, a nested message so message indexes); typed
    columns read back by pyiceberg and DuckDB."""
    import datetime

    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import message_factory  # type: ignore[import-untyped]

    from tests.iceberg.icelib import compiled_proto, wait_for

    topic = "pb"
    create_topic(
        broker.bootstrap,
        topic,
        1,
        {"iceberg.mode": "value_schema_id_prefix", "iceberg.target.lag.ms": "1000"},
    )
    v1_id = sr.register_schema(f"{topic}-value", Schema(PROTO_V1, "PROTOBUF"))
    _, pool1 = compiled_proto(PROTO_V1)
    order1 = message_factory.GetMessageClass(pool1.FindMessageTypeByName("shop.Order"))
    line2 = message_factory.GetMessageClass(
        compiled_proto(PROTO_V2)[1].FindMessageTypeByName("shop.Order.Line")
    )
    order2 = message_factory.GetMessageClass(line2.DESCRIPTOR.containing_type)
    first = order1(id=1, tags=["a", "b"], kind=1, card="visa")
    first.first.sku = "s1"
    first.at.seconds = 1_700_000_000
    framed = [
        b"\x00" + struct.pack(">I", v1_id) + b"\x00" + m.SerializeToString() for m in (first, order1(id=2))
    ]
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = ProtobufSerializer(order2, sr, {"use.deprecated.format": False})
    later = order2(id=3, voucher=9, note="n")
    framed.append(ser(later, ctx))
    # the same file, registered again (the same id), with message indexes [0, 0]: a Line
    line_ser = ProtobufSerializer(line2, sr, {"use.deprecated.format": False})
    framed.append(line_ser(line2(sku="s9", price=2.5), ctx))
    assert framed[3][:5] == framed[2][:5] and framed[3][5:8] == b"\x04\x00\x00"
    _produce(broker.bootstrap, topic, framed)

    def rows() -> list[object] | None:
        try:
            got = catalog.load_table(("strata", topic)).scan().to_arrow().sort_by("offset")
        except Exception:
            return None
        return got.column("value").to_pylist() if got.num_rows >= 4 else None

    values = wait_for(rows, 90, "the Protobuf translation")
    at = datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC)
    assert values[0] == {
        "id": 1,
        "tags": ["a", "b"],
        "first": {"sku": "s1", "price": 0.0},
        "kind": "BOOK",
        "at": at,
        "card": "visa",
        "voucher": None,
        "note": None,
        "sku": None,
        "price": None,
    }
    assert values[1]["id"] == 2 and values[1]["first"] is None and values[1]["kind"] == "KIND_UNKNOWN"
    assert (values[2]["id"], values[2]["voucher"], values[2]["card"], values[2]["note"]) == (3, 9, None, "n")
    assert (values[3]["sku"], values[3]["price"], values[3]["id"]) == ("s9", 2.5, None)
    table = catalog.load_table(("strata", topic))
    duck = duckdb_rows(table.metadata_location, "value.note")
    assert [(r[1], r[3]) for r in duck] == [(0, None), (1, None), (2, "n"), (3, None)]
    duck = duckdb_rows(table.metadata_location, "value.first.sku")
    assert [r[3] for r in duck] == ["s1", None, None, None]
