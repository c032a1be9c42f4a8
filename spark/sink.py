"""The ``strata`` sink: ``df.write.format("strata")`` and ``df.writeStream.format("strata")``.

Columns and options follow Spark's Kafka sink
(https://spark.apache.org/docs/latest/structured-streaming-kafka-integration.html):

    value       string or binary, required (null: a tombstone)
    key         string or binary, optional (null: no key)
    topic       string, optional; the ``topic`` option overrides it; without the option a
                null topic fails the task
    partition   int, optional; null or absent: the producer's partitioner, Kafka's murmur2 of
                the key (librdkafka's ``murmur2_random``, what the Java producer Spark uses
                does), so keyed rows land where a Java or REST producer would put them
    headers     array<struct<key:string,value:binary>>, optional

Other columns are ignored, as Spark's Kafka sink ignores them.

Options: ``topic``, ``kafka.bootstrap.servers`` (required; alias ``broker``) and ``kafka.*``
producer settings, handed to librdkafka under their name without ``kafka.`` (acks,
compression.type, linger.ms, batch.size, enable.idempotence, security.protocol,
sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...). Java-only settings are
translated where the meaning is the same (``sasl.jaas.config`` with a username and password,
an empty ``ssl.endpoint.identification.algorithm``) and refused with the librdkafka
equivalent named otherwise (keystores, serializers, ``partitioner.class``). Any other option
is an error naming the nearest valid one.

Each Spark task writes its Arrow batches with one idempotent producer (no duplicates or
reordering from the producer's own retries), polls for delivery errors between batches and
flushes before returning; the first delivery error fails the task with the broker's error
name (e.g. TOPIC_AUTHORIZATION_FAILED). The guarantee is Spark's: at least once (a retried
task or a replayed micro-batch writes its rows again). ``exactlyOnce=true`` on a streaming
write: each task writes its rows of a micro-batch in one transaction with a marker offset
that makes a replay of the same (query, Spark partition, batch) skip
(``write_task_exactly_once``; docs/spark.md "Exactly once").
"""

from __future__ import annotations

import difflib
import itertools
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from hot.errors import InvalidConfigError

# Options of the sink itself (lower case, as Spark hands them over); kafka.* go to the producer.
SINK_OPTIONS: Final = (
    "topic",
    "kafka.bootstrap.servers",
    "broker",
    "checkpointlocation",
    "exactlyonce",
    "transactionalidprefix",
)
_SPELLED: Final = {
    "checkpointlocation": "checkpointLocation",
    "exactlyonce": "exactlyOnce",
    "transactionalidprefix": "transactionalIdPrefix",
}
# librdkafka producer-only properties, left out of the marker consumer's configuration.
_PRODUCER_ONLY: Final = (
    "acks",
    "request.required.acks",
    "enable.idempotence",
    "linger.ms",
    "queue.buffering.max.ms",
    "batch.size",
    "batch.num.messages",
    "compression.type",
    "compression.codec",
    "partitioner",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "retries",
    "message.send.max.retries",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "max.in.flight.requests.per.connection",
    "max.in.flight",
    "transaction.timeout.ms",
)

HEADERS_TYPE: Final = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

# Java client settings without a librdkafka equivalent of the same name: what to use instead.
_JAVA_ONLY: Final = {
    "key.serializer": "keys are written as given (string or binary column)",
    "value.serializer": "values are written as given (string or binary column)",
    "partitioner.class": "use kafka.partitioner (murmur2_random, consistent_random, random, ...)",
    "ssl.truststore.location": "use kafka.ssl.ca.location (a PEM file)",
    "ssl.truststore.password": "use kafka.ssl.ca.location (a PEM file)",
    "ssl.truststore.type": "use kafka.ssl.ca.location (a PEM file)",
    "ssl.keystore.location": "use kafka.ssl.certificate.location and kafka.ssl.key.location (PEM)",
    "ssl.keystore.password": "use kafka.ssl.key.password",
    "ssl.keystore.type": "use kafka.ssl.certificate.location and kafka.ssl.key.location (PEM)",
    "buffer.memory": "use kafka.queue.buffering.max.kbytes",
    "max.block.ms": "the sink waits for queue space itself; use kafka.message.timeout.ms",
    "transactional.id": "use exactlyOnce=true (and transactionalIdPrefix) on a streaming write",
}
# The strata source's names of the PEM files (spark.options), accepted here too.
_ALIASES: Final = {
    "ssl.cafile": "ssl.ca.location",
    "ssl.certfile": "ssl.certificate.location",
    "ssl.keyfile": "ssl.key.location",
}
_JAAS: Final = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_SECRET_WORDS: Final = ("password", "secret", "jaas")
_POLL_EVERY: Final = 1024  # rows between polls that serve delivery reports and free queue space


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Parsed sink options: the ``topic`` override and the librdkafka producer configuration."""

    topic: str | None
    producer: Mapping[str, str] = field(default_factory=dict)
    exactly_once: bool = False
    txn_prefix: str | None = None

    def __repr__(self) -> str:
        shown = {k: ("***" if any(w in k for w in _SECRET_WORDS) else v) for k, v in self.producer.items()}
        return (
            f"SinkOptions(topic={self.topic!r}, producer={shown!r}, "
            f"exactly_once={self.exactly_once}, txn_prefix={self.txn_prefix!r})"
        )

    def consumer_conf(self) -> dict[str, str]:
        """The client-level settings (servers, security) without the producer-only ones."""
        return {k: v for k, v in self.producer.items() if k not in _PRODUCER_ONLY}

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Validate ``options`` (names case-insensitive) and build the producer settings."""
        o = {k.lower(): v for k, v in options.items()}
        for name in o:
            if name in SINK_OPTIONS or name.startswith("kafka."):
                continue
            if name == "path":
                raise InvalidConfigError(
                    "strata sink: a path is not used (records go to the broker named by "
                    "kafka.bootstrap.servers); remove save(path)/option('path')"
                )
            valid = [_SPELLED.get(n, n) for n in SINK_OPTIONS]
            near = difflib.get_close_matches(name, [v.lower() for v in valid], n=1, cutoff=0.6)
            hint = f"; did you mean '{_SPELLED.get(near[0], near[0])}'?" if near else ""
            raise InvalidConfigError(
                f"strata sink: unknown option '{name}'{hint} "
                f"(valid: {', '.join(valid)} and kafka.* producer settings)"
            )
        exactly_once = _bool(o.get("exactlyonce", "false"), "exactlyOnce")
        prefix = o.get("transactionalidprefix")
        if prefix is not None and not exactly_once:
            raise InvalidConfigError("strata sink: option transactionalIdPrefix needs exactlyOnce=true")
        servers = o.get("kafka.bootstrap.servers") or o.get("broker")
        if not servers:
            raise InvalidConfigError(
                "strata sink: option kafka.bootstrap.servers (alias: broker) is required"
            )
        topic = o.get("topic")
        if topic is not None and not topic.strip():
            raise InvalidConfigError("strata sink: option topic is empty")
        producer: dict[str, str] = {
            "partitioner": "murmur2_random",  # the Java producer's placement of keyed records
            "enable.idempotence": "true",
            "linger.ms": "5",
        }
        for name, value in o.items():
            if not name.startswith("kafka.") or name == "kafka.bootstrap.servers":
                continue
            prop = name[len("kafka.") :]
            if prop in _JAVA_ONLY:
                raise InvalidConfigError(
                    f"strata sink: option kafka.{prop} is a Java client setting; {_JAVA_ONLY[prop]}"
                )
            if prop == "sasl.jaas.config":
                creds = dict(_JAAS.findall(value))
                if set(creds) != {"username", "password"}:
                    raise InvalidConfigError(
                        "strata sink: option kafka.sasl.jaas.config must name a username and a "
                        'password (PlainLoginModule/ScramLoginModule required username="..." '
                        'password="..."); or set kafka.sasl.username and kafka.sasl.password'
                    )
                producer["sasl.username"] = creds["username"]
                producer["sasl.password"] = creds["password"]
                continue
            if prop == "ssl.endpoint.identification.algorithm" and value == "":
                value = "none"  # Java's "" (no host name check)
            producer[_ALIASES.get(prop, prop)] = value
        producer["bootstrap.servers"] = servers
        if producer.get("enable.idempotence", "true").lower() == "true" and producer.get(
            "acks", "all"
        ) not in (
            "all",
            "-1",
        ):
            raise InvalidConfigError(
                f"strata sink: kafka.acks={producer['acks']} needs kafka.enable.idempotence=false "
                "(an idempotent producer writes with acks=all)"
            )
        if exactly_once and producer.get("enable.idempotence", "true").lower() != "true":
            raise InvalidConfigError("strata sink: exactlyOnce needs kafka.enable.idempotence=true")
        return cls(topic=topic, producer=producer, exactly_once=exactly_once, txn_prefix=prefix)

    def check_producer(self) -> None:
        """Build (and drop) a producer so that librdkafka rejects unknown or bad ``kafka.*``
        settings on the driver, before any task runs."""
        from confluent_kafka import KafkaException, Producer

        try:
            Producer(dict(self.producer))
        except KafkaException as e:
            raise InvalidConfigError(f"strata sink: bad kafka.* option: {e.args[0].str()}") from None
        except (TypeError, ValueError) as e:
            raise InvalidConfigError(f"strata sink: bad kafka.* option: {e}") from None


def _bool(text: str, name: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise InvalidConfigError(f"strata sink: option {name} must be true or false, not {text!r}")


def validate_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's Kafka sink checks (KafkaWriter.validateQuery), with its messages."""
    types: dict[str, DataType] = {f.name.lower(): f.dataType for f in schema.fields}

    def bytes_like(name: str) -> None:
        t = types.get(name)
        if t is not None and not isinstance(t, StringType | BinaryType):
            raise InvalidConfigError(
                f"strata sink: {name} attribute type must be a string or binary, not {t.simpleString()}"
            )

    if "value" not in types:
        raise InvalidConfigError("strata sink: required attribute 'value' not found")
    bytes_like("value")
    bytes_like("key")
    if "topic" in types:
        if not isinstance(types["topic"], StringType):
            raise InvalidConfigError(
                f"strata sink: topic attribute type must be a string, not {types['topic'].simpleString()}"
            )
    elif options.topic is None:
        raise InvalidConfigError(
            "strata sink: topic option required when no 'topic' attribute is present. "
            "Use the topic option for setting a topic."
        )
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise InvalidConfigError(
            "strata sink: partition attribute type must be an int, not " + types["partition"].simpleString()
        )
    if "headers" in types and types["headers"] != HEADERS_TYPE:
        raise InvalidConfigError(
            f"strata sink: headers attribute type must be a {HEADERS_TYPE.simpleString()}, "
            f"not {types['headers'].simpleString()}"
        )


@dataclass(frozen=True, slots=True)
class SinkCommit(WriterCommitMessage):
    """What one task wrote (rows delivered), for the driver's log."""

    partition_id: int
    rows: int
    skipped: bool = False  # exactlyOnce: an earlier attempt had committed this batch's rows


class DeliveryFailed(RuntimeError):
    """A record (or the producer) failed; names the broker's error and where it happened."""


class _Errors:
    """First delivery or fatal producer error, collected from librdkafka's callbacks."""

    def __init__(self) -> None:
        self.first: str | None = None

    def delivery(self, err: Any, msg: Any) -> None:
        if err is not None and self.first is None:
            self.first = f"delivery to {msg.topic()}[{msg.partition()}] failed: {err.name()}: {err.str()}"

    def error(self, err: Any) -> None:
        if self.first is None and (err.fatal() or _permanent(err)):
            self.first = f"producer error: {err.name()}: {err.str()}"

    def check(self) -> None:
        if self.first is not None:
            raise DeliveryFailed(f"strata sink: {self.first}")


def _permanent(err: Any) -> bool:
    return err.name() in ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_AUTHENTICATION")


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    i = batch.schema.get_field_index(name)
    return None if i < 0 else batch.column(i)


def _headers(col: pa.Array) -> list[list[tuple[str, str | bytes | None]] | None]:
    """Per row: a list of (key, value) pairs for confluent-kafka, None for a null list."""
    offsets = col.offsets.to_pylist()
    flat = col.flatten()
    keys = flat.field("key").to_pylist()
    values = flat.field("value").to_pylist()
    valid = col.is_valid().to_pylist()
    return [
        list(zip(keys[offsets[i] : offsets[i + 1]], values[offsets[i] : offsets[i + 1]], strict=True))
        if valid[i]
        else None
        for i in range(len(col))
    ]


def write_task(batches: Iterator[pa.RecordBatch], options: SinkOptions, partition_id: int) -> SinkCommit:
    """Produce every row of ``batches`` and flush; raise on the first delivery error."""
    from confluent_kafka import Producer

    errors = _Errors()
    conf: dict[str, Any] = dict(options.producer)
    conf["on_delivery"] = errors.delivery
    conf["delivery.report.only.error"] = True  # no Python callback per delivered record
    conf["error_cb"] = errors.error
    producer = Producer(conf)
    rows = _produce_batches(batches, producer, errors, options)
    _flush(producer, errors, options)
    return SinkCommit(partition_id, rows)


def _produce_batches(
    batches: Iterator[pa.RecordBatch], producer: Any, errors: _Errors, options: SinkOptions
) -> int:
    """Hand every row to ``producer`` (no flush); returns the number of rows."""
    produce = producer.produce
    poll = producer.poll
    rows = 0
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        value_col = _column(batch, "value")
        assert value_col is not None  # validate_schema
        values = value_col.to_pylist()
        key_col = _column(batch, "key")
        keys = key_col.to_pylist() if key_col is not None else [None] * n
        if options.topic is not None:
            topics: list[str] = [options.topic] * n
        else:
            topic_col = _column(batch, "topic")
            assert topic_col is not None
            if topic_col.null_count:
                raise InvalidConfigError(
                    "strata sink: null topic present in the data. Use the topic option for setting a topic."
                )
            topics = topic_col.to_pylist()
        part_col = _column(batch, "partition")
        parts = pc.fill_null(part_col, -1).to_pylist() if part_col is not None else [-1] * n
        head_col = _column(batch, "headers")
        heads = _headers(head_col) if head_col is not None else None
        for i in range(n):
            while True:
                try:
                    if heads is not None and heads[i]:
                        produce(topics[i], values[i], keys[i], parts[i], headers=heads[i])
                    else:
                        produce(topics[i], values[i], keys[i], parts[i])
                    break
                except BufferError:  # local queue full: let librdkafka send, then retry
                    poll(0.05)
                    errors.check()
            if i % _POLL_EVERY == 0:
                poll(0)
        rows += n
        errors.check()
    return rows


def _producer_conf(options: SinkOptions, errors: _Errors) -> dict[str, Any]:
    conf: dict[str, Any] = dict(options.producer)
    conf["on_delivery"] = errors.delivery
    conf["error_cb"] = errors.error
    conf["delivery.report.only.error"] = True  # no Python callback per delivered record
    return conf


def _first_topic(batch: pa.RecordBatch, options: SinkOptions) -> str:
    if options.topic is not None:
        return options.topic
    col = _column(batch, "topic")
    topic = None if col is None else col[0].as_py()
    if topic is None:
        raise InvalidConfigError(
            "strata sink: null topic present in the data. Use the topic option for setting a topic."
        )
    return str(topic)


def write_task_exactly_once(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, partition_id: int, batch_id: int, query_id: str
) -> SinkCommit:
    """Write this task's rows of micro-batch ``batch_id`` in one transaction, at most once per
    (query, Spark partition, batch) -- see docs/spark.md "Exactly once" for the design.

    transactional.id and marker group: ``<prefix>-<partition_id>``. ``init_transactions``
    fences earlier attempts and settles their transaction; the group's committed offset on
    partition 0 of the first topic written is the last batch id + 1 this partition
    committed, written in the same transaction as the rows."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    tid = f"{options.txn_prefix or 'strata-sink-' + query_id}-{partition_id}"
    timeout = _timeout_s(options)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return SinkCommit(partition_id, 0)
    marker = TopicPartition(_first_topic(first, options), 0)
    errors = _Errors()
    producer = Producer({**_producer_conf(options, errors), "transactional.id": tid})
    producer.init_transactions(timeout)
    consumer = Consumer(
        {
            **options.consumer_conf(),
            "group.id": tid,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        done = consumer.committed([marker], timeout)[0].offset
        if done >= batch_id + 1:  # an earlier attempt or run committed this batch's rows
            for _ in batches:
                pass
            return SinkCommit(partition_id, 0, skipped=True)
        producer.begin_transaction()
        try:
            rows = _produce_batches(itertools.chain([first], batches), producer, errors, options)
            _flush(producer, errors, options)
            marker_at = TopicPartition(marker.topic, 0, batch_id + 1)
            producer.send_offsets_to_transaction([marker_at], consumer.consumer_group_metadata(), timeout)
            producer.commit_transaction(timeout)
        except BaseException:
            try:
                producer.abort_transaction(timeout)
            except Exception:
                pass  # fenced or broken: the next init_transactions (or the timeout) aborts it
            raise
        return SinkCommit(partition_id, rows)
    finally:
        consumer.close()


def _flush(producer: Any, errors: _Errors, options: SinkOptions) -> None:
    """Wait for every record's delivery, bounded by the producer's own delivery timeout."""
    timeout_ms = int(
        options.producer.get("message.timeout.ms", options.producer.get("delivery.timeout.ms", 300000))
    )
    deadline = time.monotonic() + timeout_ms / 1000 + 30
    while True:
        left = producer.flush(1.0)
        errors.check()
        if left == 0:
            return
        if time.monotonic() > deadline:
            raise DeliveryFailed(f"strata sink: {left} records not delivered in time")


def _timeout_s(options: SinkOptions) -> float:
    """The producer's delivery timeout (message.timeout.ms, librdkafka's default 300 s) + 30 s."""
    p = options.producer
    return int(p.get("message.timeout.ms", p.get("delivery.timeout.ms", 300000))) / 1000 + 30


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class StrataSinkWriter(DataSourceArrowWriter):
    """Batch writes (``df.write``): each task produces its rows; nothing to do on commit."""

    def __init__(self, options: SinkOptions) -> None:
        if options.exactly_once:
            raise InvalidConfigError(
                "strata sink: exactlyOnce applies to writeStream (micro-batches); df.write is at least once"
            )
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_task(iterator, self.options, _partition_id())


class StrataStreamSinkWriter(DataSourceStreamArrowWriter):
    """Streaming writes (``df.writeStream``): each micro-batch task produces its rows (at
    least once: a replayed micro-batch writes them again, as with Spark's Kafka sink)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if not self.options.exactly_once:
            return write_task(iterator, self.options, _partition_id())
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        batch_id = ctx.getLocalProperty("streaming.sql.batchId")
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        if batch_id is None or query_id is None:
            raise InvalidConfigError("strata sink: exactlyOnce: Spark did not name the micro-batch")
        return write_task_exactly_once(iterator, self.options, ctx.partitionId(), int(batch_id), query_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # delivered records stay; the batch is replayed (at least once)


def sink_options(options: Mapping[str, str], schema: StructType) -> SinkOptions:
    """Parse and check options and schema (the driver side of ``writer``/``streamWriter``)."""
    parsed = SinkOptions.parse(options)
    validate_schema(schema, parsed)
    parsed.check_producer()
    return parsed
