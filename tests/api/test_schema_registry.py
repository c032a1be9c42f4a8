"""The built-in schema registry end to end: confluent-kafka's SchemaRegistryClient and
serializers through a topic, python-schema-registry-client against the same endpoints,
compatibility levels, references, deletes, Confluent's documented answers, and ids kept
across a restart."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped]

from tests.brokers import BrokerProcess, create_topic

MEDIA = "application/vnd.schemaregistry.v1+json"
USER_V1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}],
}
USER_BAD = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}, {"name": "email", "type": "string"}],
}


@pytest.fixture(scope="module")
def reg_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("registry"), "--schema-registry-listen", "127.0.0.1:0").start()
    yield b
    b.kill()


def call(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": MEDIA})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.headers["Content-Type"].startswith(MEDIA)
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def subject() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def roundtrip(b: BrokerProcess, serialize: Any, deserialize: Any, values: list[Any]) -> list[Any]:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for v in values:
        p.produce(topic, value=serialize(v, SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out: list[Any] = []
    try:
        for _ in range(60):
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            out.append(deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)))
            if len(out) == len(values):
                break
    finally:
        c.close()
    return out


def test_avro_and_json_serializers_through_a_topic(reg_broker: BrokerProcess) -> None:
    sr = SchemaRegistryClient({"url": reg_broker.registry_url})
    avro_ser = AvroSerializer(sr, json.dumps(USER_V1))
    avro_de = AvroDeserializer(sr)
    assert roundtrip(reg_broker, avro_ser, avro_de, [{"name": "a"}, {"name": "b"}]) == [
        {"name": "a"},
        {"name": "b"},
    ]
    js = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    json_ser = JSONSerializer(js, sr)
    json_de = JSONDeserializer(js, schema_registry_client=sr)
    assert roundtrip(reg_broker, json_ser, json_de, [{"n": 1}]) == [{"n": 1}]
    assert set(sr.get_subjects()) >= {s for s in sr.get_subjects() if s.startswith("t-")}


def _message_class() -> Any:
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    msg = fdp.message_type.add(name="Order")
    msg.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    msg.field.add(name="qty", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_through_a_topic(reg_broker: BrokerProcess) -> None:
    sr = SchemaRegistryClient({"url": reg_broker.registry_url})
    order = _message_class()
    ser = ProtobufSerializer(order, sr, {"use.deprecated.format": False})
    de = ProtobufDeserializer(order, {"use.deprecated.format": False})
    got = roundtrip(reg_broker, ser, de, [order(id="o1", qty=3)])
    assert [(m.id, m.qty) for m in got] == [("o1", 3)]
    # Registered as a base64 descriptor, answered as .proto text unless asked serialized.
    [registered] = [s for s in sr.get_subjects() if sr.get_latest_version(s).schema.schema_type == "PROTOBUF"]
    text = sr.get_latest_version(registered).schema.schema_str
    assert "message Order {" in text and "int32 qty = 2;" in text, text
    # The same schema as .proto text is the same schema (one id).
    s = subject()
    text = 'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  string id = 1;\n  int32 qty = 2;\n}\n'
    first = sr.register_schema(s, Schema(text, "PROTOBUF"))
    changed = text.replace("int32 qty", "string qty")
    with pytest.raises(SchemaRegistryError) as info:
        sr.register_schema(s, Schema(changed, "PROTOBUF"))
    assert info.value.http_status_code == 409
    assert sr.register_schema(s, Schema(text.replace("}\n", "  int64 at = 3;\n}\n"), "PROTOBUF")) > first


@pytest.mark.parametrize(
    ("level", "ok", "bad"),
    [
        ("BACKWARD", USER_V2, USER_BAD),
        (
            "FORWARD",
            {**USER_V1, "fields": [*USER_V1["fields"], {"name": "x", "type": "int"}]},
            USER_V2 | {"fields": []},
        ),
        ("FULL", USER_V2, USER_BAD),
        ("NONE", USER_BAD, None),
    ],
)
def test_compatibility_levels(reg_broker: BrokerProcess, level: str, ok: Any, bad: Any) -> None:
    url = reg_broker.registry_url
    s = subject()
    assert call(f"{url}/config/{s}", "PUT", {"compatibility": level}) == (200, {"compatibility": level})
    assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(USER_V1)})[0] == 200
    if bad is not None:
        status, doc = call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(bad)})
        assert (status, doc["error_code"]) == (409, 409), doc
        status, doc = call(
            f"{url}/compatibility/subjects/{s}/versions/latest", "POST", {"schema": json.dumps(bad)}
        )
        assert doc == {"is_compatible": False}
    status, doc = call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(ok)})
    assert status == 200, doc
    assert call(f"{url}/subjects/{s}/versions")[1] == [1, 2]


def _rec(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "T", "fields": list(fields)})


INT_A, INT_A0 = {"name": "a", "type": "int"}, {"name": "a", "type": "int", "default": 0}


@pytest.mark.parametrize(
    ("level", "history", "bad", "ok"),
    [
        # each "bad" is compatible with the latest version but not with the first
        (
            "BACKWARD_TRANSITIVE",
            [_rec(INT_A), _rec()],
            _rec({"name": "a", "type": "string", "default": ""}),
            _rec(INT_A0 | {"name": "b"}),
        ),
        (
            "FORWARD_TRANSITIVE",
            [_rec(INT_A), _rec(INT_A0)],
            _rec(),
            _rec(INT_A, {"name": "c", "type": "int"}),
        ),
        ("FULL_TRANSITIVE", [_rec(INT_A), _rec(INT_A0)], _rec(), _rec(INT_A0, INT_A0 | {"name": "c"})),
    ],
)
def test_transitive_levels(
    reg_broker: BrokerProcess, level: str, history: list[str], bad: str, ok: str
) -> None:
    url = reg_broker.registry_url
    s = subject()
    assert call(f"{url}/config/{s}", "PUT", {"compatibility": level}) == (200, {"compatibility": level})
    for text in history:
        assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": text})[0] == 200
    non_transitive = level.removesuffix("_TRANSITIVE")
    assert call(f"{url}/compatibility/subjects/{s}/versions/latest", "POST", {"schema": bad}) == (
        200,
        {"is_compatible": True},
    ), f"{bad} is {non_transitive}-compatible with the latest version"
    status, doc = call(f"{url}/subjects/{s}/versions", "POST", {"schema": bad})
    assert (status, doc["error_code"]) == (409, 409), doc
    assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": ok})[0] == 200
    assert call(f"{url}/subjects/{s}/versions")[1] == [1, 2, 3]


def test_json_schema_compatibility(reg_broker: BrokerProcess) -> None:
    url = reg_broker.registry_url
    s = subject()
    v1 = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    v2 = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "additionalProperties": False,
    }
    bad = {**v1, "required": ["a", "c"], "properties": {"a": {"type": "integer"}}}
    assert (
        call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(v1), "schemaType": "JSON"})[0]
        == 200
    )
    status, doc = call(
        f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(bad), "schemaType": "JSON"}
    )
    assert status == 409, doc
    status, doc = call(
        f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(v2), "schemaType": "JSON"}
    )
    assert status == 200, doc


def test_compatibility_rules_over_the_wire(reg_broker: BrokerProcess) -> None:
    """confluent-kafka's SchemaRegistryClient.test_compatibility against the registry's own
    rules, one per format: JSON Schema (a $ref into a referenced subject, a pattern
    property) and Protobuf (a oneof field removed, a wire-compatible type change)."""
    from confluent_kafka.schema_registry import SchemaReference

    sr = SchemaRegistryClient({"url": reg_broker.registry_url})
    # JSON Schema: address.json referenced by the order schema.
    addr_subject, order = subject(), subject()
    zip_any = {"type": "object", "properties": {"zip": {"type": ["string", "integer"]}}}
    sr.register_schema(addr_subject, Schema(json.dumps(zip_any), "JSON"))
    order_doc = {
        "type": "object",
        "properties": {"to": {"$ref": "address.json"}},
        "patternProperties": {"^x_": {"type": "number"}},
    }
    refs = [SchemaReference("address.json", addr_subject, 1)]
    sr.register_schema(order, Schema(json.dumps(order_doc), "JSON", refs))
    zip_int = {"type": "object", "properties": {"zip": {"type": "integer"}}}
    call(f"{reg_broker.registry_url}/config/{addr_subject}", "PUT", {"compatibility": "NONE"})
    sr.register_schema(addr_subject, Schema(json.dumps(zip_int), "JSON"))
    narrowed_ref = [SchemaReference("address.json", addr_subject, 2)]
    assert not sr.test_compatibility(order, Schema(json.dumps(order_doc), "JSON", narrowed_ref))
    wider_pattern = {**order_doc, "patternProperties": {"^x_": {"type": ["number", "string"]}}}
    assert sr.test_compatibility(order, Schema(json.dumps(wider_pattern), "JSON", refs))
    narrower_pattern = {**order_doc, "patternProperties": {"^x_": {"type": "integer"}}}
    assert not sr.test_compatibility(order, Schema(json.dumps(narrower_pattern), "JSON", refs))
    # Protobuf: a oneof.
    s = subject()
    proto = (
        'syntax = "proto3";\npackage w;\n'
        "message Pay {\n  oneof how {\n    string card = 1;\n    int32 cash = 2;\n  }\n}\n"
    )
    sr.register_schema(s, Schema(proto, "PROTOBUF"))
    assert not sr.test_compatibility(s, Schema(proto.replace("    int32 cash = 2;\n", ""), "PROTOBUF"))
    assert sr.test_compatibility(s, Schema(proto.replace("int32 cash", "int64 cash"), "PROTOBUF"))
    status, doc = call(
        f"{reg_broker.registry_url}/compatibility/subjects/{s}/versions/latest?verbose=true",
        "POST",
        {"schema": proto.replace("    int32 cash = 2;\n", ""), "schemaType": "PROTOBUF"},
    )
    assert status == 200 and doc["is_compatible"] is False, doc
    assert any("ONEOF_FIELD_REMOVED" in m for m in doc["messages"]), doc


def test_import_mode_keeps_given_ids(reg_broker: BrokerProcess) -> None:
    """IMPORT mode (Confluent's migration path): a schema registered with an explicit id
    and version keeps them; an id taken by another schema is 42207; an explicit id outside
    IMPORT is 42205; back in READWRITE, new ids continue above the imported ones."""
    url = reg_broker.registry_url
    s = subject()
    v1, v2, bad = ({**v, "name": f"Imported{s[2:]}"} for v in (USER_V1, USER_V2, USER_BAD))  # new to it
    status, doc = call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(v1), "id": 5000})
    assert (status, doc["error_code"]) == (422, 42205), doc
    assert call(f"{url}/mode/{s}", "PUT", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    body = {"schema": json.dumps(v1), "id": 5000, "version": 3}
    assert call(f"{url}/subjects/{s}/versions", "POST", body) == (200, {"id": 5000})
    status, doc = call(
        f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(bad), "id": 5000, "version": 4}
    )
    assert (status, doc["error_code"]) == (422, 42207), doc
    assert call(f"{url}/mode/{s}", "PUT", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
    sr = SchemaRegistryClient({"url": url})
    assert json.loads(sr.get_schema(5000).schema_str or "") == v1
    latest = sr.get_latest_version(s)
    assert (latest.version, latest.schema_id) == (3, 5000)
    assert sr.register_schema(s, Schema(json.dumps(v2), "AVRO")) > 5000
    assert sr.get_versions(s) == [3, 4]


def test_documented_answers(reg_broker: BrokerProcess) -> None:
    """Answers shaped as the examples of Confluent's API reference, key for key."""
    url = reg_broker.registry_url
    s = subject()
    v1, v2 = ({**v, "name": f"Golden{s[2:]}"} for v in (USER_V1, USER_V2))  # ids of their own
    text = json.dumps(v1)
    _, reg = call(f"{url}/subjects/{s}/versions", "POST", {"schema": text})
    sid = reg["id"]
    assert reg == {"id": sid}
    assert call(f"{url}/subjects/{s}/versions/1") == (
        200,
        {"subject": s, "version": 1, "id": sid, "schema": text},
    )
    assert call(f"{url}/subjects/{s}/versions/latest/schema") == (200, v1)
    assert call(f"{url}/subjects/{s}", "POST", {"schema": text}) == (
        200,
        {"subject": s, "version": 1, "id": sid, "schema": text},
    )
    assert call(f"{url}/schemas/ids/{sid}/versions")[1] == [{"subject": s, "version": 1}]
    assert s in call(f"{url}/schemas/ids/{sid}/subjects")[1]
    assert call(f"{url}/compatibility/subjects/{s}/versions/latest", "POST", {"schema": json.dumps(v2)}) == (
        200,
        {"is_compatible": True},
    )
    assert call(f"{url}/config/{s}", "PUT", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    assert call(f"{url}/config/{s}") == (200, {"compatibilityLevel": "FULL"})
    assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(v2)})[0] == 200
    assert call(f"{url}/subjects/{s}/versions/1", "DELETE") == (200, 1)
    assert call(f"{url}/subjects/{s}/versions/1")[1] == {
        "error_code": 40402,
        "message": "Version 1 not found.",
    }


def test_references_deletes_and_documented_answers(reg_broker: BrokerProcess) -> None:
    url = reg_broker.registry_url
    base, top = subject(), subject()
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "x",
        "fields": [{"name": "city", "type": "string"}],
    }
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "x",
        "fields": [{"name": "home", "type": "x.Address"}],
    }
    assert call(f"{url}/subjects/{base}/versions", "POST", {"schema": json.dumps(address)})[0] == 200
    refs = [{"name": "x.Address", "subject": base, "version": 1}]
    status, p = call(
        f"{url}/subjects/{top}/versions", "POST", {"schema": json.dumps(person), "references": refs}
    )
    assert status == 200, p
    # A reference to a missing version is an invalid schema.
    status, doc = call(
        f"{url}/subjects/{subject()}/versions",
        "POST",
        {"schema": json.dumps(person), "references": [{"name": "x.Address", "subject": base, "version": 9}]},
    )
    assert (status, doc["error_code"]) == (422, 42201)
    assert call(f"{url}/subjects/{base}/versions/1/referencedby") == (200, [p["id"]])
    assert call(f"{url}/schemas?subjectPrefix={top}") == (
        200,
        [{"subject": top, "version": 1, "id": p["id"], "references": refs, "schema": json.dumps(person)}],
    )
    assert call(f"{url}/schemas/ids/{p['id']}") == (200, {"references": refs, "schema": json.dumps(person)})
    got = call(f"{url}/subjects/{top}/versions/1")[1]
    assert got["references"] == refs and got["id"] == p["id"] and got["version"] == 1
    # Referenced: not deletable.
    status, doc = call(f"{url}/subjects/{base}/versions/1", "DELETE")
    assert (status, doc["error_code"]) == (422, 42206)
    # Soft, then permanent (Confluent's order), with its error codes.
    status, doc = call(f"{url}/subjects/{top}?permanent=true", "DELETE")
    assert (status, doc["error_code"]) == (404, 40405)
    assert call(f"{url}/subjects/{top}", "DELETE") == (200, [1])
    assert call(f"{url}/subjects/{top}/versions")[1]["error_code"] == 40401
    assert call(f"{url}/subjects/{top}/versions?deleted=true") == (200, [1])
    assert call(f"{url}/subjects/{top}?permanent=true", "DELETE") == (200, [1])
    assert call(f"{url}/subjects/{base}/versions/1", "DELETE") == (200, 1)
    # Confluent's documented error answers.
    assert call(f"{url}/subjects/nope-{base}/versions")[1] == {
        "error_code": 40401,
        "message": f"Subject 'nope-{base}' not found.",
    }
    assert call(f"{url}/subjects/{base}/versions/7")[1]["error_code"] == 40401
    assert call(f"{url}/schemas/ids/999999")[1]["error_code"] == 40403
    assert call(f"{url}/subjects/{top}/versions/abc")[1]["error_code"] == 42202
    assert call(f"{url}/config", "PUT", {"compatibility": "SIDEWAYS"})[1]["error_code"] == 42203
    assert call(f"{url}/mode", "PUT", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    status, doc = call(f"{url}/subjects/{subject()}/versions", "POST", {"schema": "{not json"})
    assert (status, doc["error_code"]) == (422, 42201)
    assert call(f"{url}/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])
    assert call(f"{url}/contexts") == (200, ["."])
    assert call(f"{url}/schemas?subjectPrefix={base}") == (200, [])  # its one version soft-deleted
    assert [d["version"] for d in call(f"{url}/schemas?subjectPrefix={base}&deleted=true")[1]] == [1]
    assert call(f"{url}/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(f"{url}/mode") == (200, {"mode": "READWRITE"})


def test_read_only_mode(reg_broker: BrokerProcess) -> None:
    url = reg_broker.registry_url
    s = subject()
    assert call(f"{url}/mode/{s}", "PUT", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, doc = call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(USER_V1)})
    assert (status, doc["error_code"]) == (422, 42205)
    assert call(f"{url}/mode/{s}", "DELETE") == (200, {"mode": "READONLY"})
    assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(USER_V1)})[0] == 200


def test_python_schema_registry_client(reg_broker: BrokerProcess) -> None:
    from schema_registry.client import SchemaRegistryClient as Psrc
    from schema_registry.client import schema as psr_schema

    client = Psrc(url=reg_broker.registry_url)
    s = subject()
    avro_schema = psr_schema.AvroSchema(USER_V1)
    sid = client.register(s, avro_schema)
    got = client.get_by_id(sid)
    assert got is not None and got.schema == avro_schema.schema
    found = client.check_version(s, avro_schema)
    assert found is not None and found.schema_id == sid
    assert client.test_compatibility(s, psr_schema.AvroSchema(USER_V2))
    assert not client.test_compatibility(s, psr_schema.AvroSchema(USER_BAD))
    assert client.get_versions(s) == [1]
    assert client.delete_subject(s) == [1]


def test_ids_survive_a_restart(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "b", "--schema-registry-listen", "127.0.0.1:0").start()
    try:
        s = subject()
        _, first = call(f"{b.registry_url}/subjects/{s}/versions", "POST", {"schema": json.dumps(USER_V1)})
        _, second = call(f"{b.registry_url}/subjects/{s}/versions", "POST", {"schema": json.dumps(USER_V2)})
        assert b.stop() == 0
        b.start()
        assert call(f"{b.registry_url}/subjects/{s}/versions/1")[1]["id"] == first["id"]
        assert call(f"{b.registry_url}/schemas/ids/{second['id']}")[1]["schema"] == json.dumps(USER_V2)
        _, third = call(
            f"{b.registry_url}/subjects/{subject()}/versions", "POST", {"schema": json.dumps(USER_BAD)}
        )
        assert third["id"] > second["id"]
        # The HTTP listener serves it too (where other brokers forward to), in its /docs;
        # the registry listener has its own.
        assert call(f"{b.http_url}/schema-registry/subjects/{s}/versions")[1] == [1, 2]
        with urllib.request.urlopen(f"{b.http_url}/openapi.json", timeout=30) as resp:
            assert "/schema-registry/subjects/{subject}/versions" in json.loads(resp.read())["paths"]
        with urllib.request.urlopen(f"{b.registry_url}/openapi.json", timeout=30) as resp:
            assert "/compatibility/subjects/{subject}/versions/{version}" in json.loads(resp.read())["paths"]
        with urllib.request.urlopen(f"{b.registry_url}/docs", timeout=30) as resp:
            assert resp.status == 200
    finally:
        b.kill()


def test_broker_side_validation(reg_broker: BrokerProcess) -> None:
    """A producer without a serializer is refused on a validated topic (INVALID_RECORD,
    nothing stored); the same producer with one is accepted; an id of another subject is
    refused under TopicNameStrategy. Redpanda's config name works too."""
    import struct

    from confluent_kafka import KafkaError

    sr = SchemaRegistryClient({"url": reg_broker.registry_url})
    for name in ("confluent.value.schema.validation", "redpanda.value.schema.id.validation"):
        topic = f"v-{uuid.uuid4().hex[:8]}"
        create_topic(reg_broker.bootstrap, topic, 1, {name: "true"})
        ctx = SerializationContext(topic, MessageField.VALUE)
        ser = AvroSerializer(sr, json.dumps(USER_V1))
        other = sr.register_schema(f"elsewhere-{topic}", Schema(json.dumps(USER_BAD), "AVRO"))
        p = Producer({"bootstrap.servers": reg_broker.bootstrap, "linger.ms": 0})
        results: list[Any] = []
        done = lambda err, msg, out=results: out.append(err)  # noqa: E731

        p.produce(topic, value=b"plain bytes", on_delivery=done)
        p.flush(30)
        p.produce(topic, value=b"\x00" + struct.pack(">I", other) + b"\x02x", on_delivery=done)
        p.flush(30)
        p.produce(topic, value=ser({"name": "ok"}, ctx), key=b"any key", on_delivery=done)
        p.flush(30)
        assert [e.code() if e is not None else None for e in results] == [
            KafkaError.INVALID_RECORD,
            KafkaError.INVALID_RECORD,
            None,
        ], results
        got = roundtrip_read(reg_broker, topic, 1)
        assert [AvroDeserializer(sr)(v, ctx) for v in got] == [{"name": "ok"}]
    # RecordNameStrategy: the id must be registered under the record's full name.
    topic = f"v-{uuid.uuid4().hex[:8]}"
    create_topic(
        reg_broker.bootstrap,
        topic,
        1,
        {
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": "RecordNameStrategy",
        },
    )
    by_name = sr.register_schema("User", Schema(json.dumps(USER_V1), "AVRO"))
    by_topic = sr.register_schema(f"{topic}-value", Schema(json.dumps(USER_V2), "AVRO"))
    verdicts: list[Any] = []
    for sid in (by_name, by_topic):
        p.produce(
            topic,
            value=b"\x00" + struct.pack(">I", sid) + b"\x02x",
            on_delivery=lambda err, msg, out=verdicts: out.append(err),
        )
        p.flush(30)
    assert [e.code() if e is not None else None for e in verdicts] == [None, KafkaError.INVALID_RECORD]
    with urllib.request.urlopen(f"{reg_broker.http_url}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    assert "strata_schema_registry_leader 1.0" in text
    assert "strata_schema_validation_refused_total 5.0" in text
    assert (
        'strata_schema_registry_requests_total{endpoint="POST /subjects/{subject}/versions",status="200"}'
        in text
    )


def test_key_validation_with_redpanda_names(reg_broker: BrokerProcess) -> None:
    """``redpanda.key.schema.id.validation`` with ``redpanda.key.subject.name.strategy =
    topic_record_name``: keys are checked (values are not) and must carry an id registered
    under ``<topic>-<record name>``."""
    from confluent_kafka import KafkaError
    from confluent_kafka.schema_registry import topic_record_subject_name_strategy

    sr = SchemaRegistryClient({"url": reg_broker.registry_url})
    topic = f"k-{uuid.uuid4().hex[:8]}"
    config = {
        "redpanda.key.schema.id.validation": "true",
        "redpanda.key.subject.name.strategy": "topic_record_name",
    }
    create_topic(reg_broker.bootstrap, topic, 1, config)
    key_schema = json.dumps({"type": "record", "name": "Key", "fields": [{"name": "k", "type": "string"}]})
    ctx = SerializationContext(topic, MessageField.KEY)
    by_record = AvroSerializer(
        sr, key_schema, conf={"subject.name.strategy": topic_record_subject_name_strategy}
    )
    # Another record registered as <topic>-key only: not under <topic>-Other, so refused.
    by_topic = AvroSerializer(sr, key_schema.replace('"Key"', '"Other"'))
    p = Producer({"bootstrap.servers": reg_broker.bootstrap, "linger.ms": 0})
    results: list[Any] = []
    for k in (b"plain key", by_topic({"k": "a"}, ctx), by_record({"k": "b"}, ctx)):
        p.produce(
            topic, key=k, value=b"plain value", on_delivery=lambda err, msg, out=results: out.append(err)
        )
        p.flush(30)
    assert [e.code() if e is not None else None for e in results] == [
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_RECORD,
        None,
    ], results
    assert {f"{topic}-Key", f"{topic}-key"} <= set(sr.get_subjects())


def roundtrip_read(b: BrokerProcess, topic: str, n: int) -> list[bytes]:
    c = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": f"r-{topic}", "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(30):
            m = c.poll(1.0)
            if m is not None and not m.error():
                out.append(m.value() or b"")
            elif out and len(out) >= n:
                break
    finally:
        c.close()
    return out


def test_cli_schemas(reg_broker: BrokerProcess, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from api.cli.schemas import schemas

    run = CliRunner()
    reg = ["--registry", reg_broker.registry_url]
    s = subject()
    v1, bad = tmp_path / "v1.avsc", tmp_path / "bad.avsc"
    v1.write_text(json.dumps(USER_V1))
    bad.write_text(json.dumps(USER_BAD))
    r = run.invoke(schemas, ["register", s, str(v1), *reg])
    assert r.exit_code == 0 and "id " in r.output, r.output
    r = run.invoke(schemas, ["list", *reg, "-o", "json"])
    assert any(x["subject"] == s and x["versions"] == [1] for x in json.loads(r.output))
    r = run.invoke(schemas, ["get", s, *reg])
    assert r.exit_code == 0 and '"User"' in r.output
    r = run.invoke(schemas, ["compat", s, str(bad), *reg])
    assert r.exit_code == 1 and "incompatible" in r.output
    r = run.invoke(schemas, ["register", s, str(bad), *reg])
    assert r.exit_code != 0 and "HTTP 409" in r.output
    assert run.invoke(schemas, ["delete", s, *reg]).exit_code == 0
    r = run.invoke(schemas, ["delete", s, "--permanent", *reg])
    assert r.exit_code == 0 and "permanently deleted" in r.output


def test_ids_come_back_with_strata_restore(tmp_path: Path) -> None:
    """``_schemas`` is never tiered; the registry's copy in the bucket brings it back after
    ``strata restore`` into a new data dir: same ids, new ones above them."""
    from click.testing import CliRunner

    from api.cli import main

    bucket = f"file://{tmp_path}/bucket"
    b = BrokerProcess(
        tmp_path / "old", "--schema-registry-listen", "127.0.0.1:0", "--object-store", bucket
    ).start()
    try:
        create_topic(b.bootstrap, "kept", 1)
        s = subject()
        _, first = call(f"{b.registry_url}/subjects/{s}/versions", "POST", {"schema": json.dumps(USER_V1)})
        _, second = call(f"{b.registry_url}/subjects/{s}/versions", "POST", {"schema": json.dumps(USER_V2)})
        assert b.stop() == 0
    finally:
        b.kill()
    r = CliRunner().invoke(main, ["restore", "--data-dir", str(tmp_path / "new"), "--object-store", bucket])
    assert r.exit_code == 0, r.output
    b = BrokerProcess(
        tmp_path / "new", "--schema-registry-listen", "127.0.0.1:0", "--object-store", bucket
    ).start()
    try:
        assert call(f"{b.registry_url}/subjects/{s}/versions") == (200, [1, 2])
        assert call(f"{b.registry_url}/subjects/{s}/versions/2")[1]["id"] == second["id"]
        assert call(f"{b.registry_url}/schemas/ids/{first['id']}")[1]["schema"] == json.dumps(USER_V1)
        _, third = call(
            f"{b.registry_url}/subjects/{subject()}/versions", "POST", {"schema": json.dumps(USER_BAD)}
        )
        assert third["id"] == second["id"] + 1
    finally:
        b.kill()
