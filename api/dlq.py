"""Dead-letter topics: park a poison message instead of blocking its partition forever.

The convention (docs/operations.md, "Dead-letter topics"): a record that fails processing
``max_attempts`` times in a row is produced to ``<topic>.dlq`` with its original key,
value, timestamp and headers, plus

    strata.dlq.original.topic      the topic it came from (UTF-8)
    strata.dlq.original.partition  its partition (decimal)
    strata.dlq.original.offset     its offset (decimal)
    strata.dlq.attempts            how many times processing was tried (decimal)
    strata.dlq.error               "<exception class>: <message>" of the last failure (UTF-8,
                                   at most 4096 bytes)

and to the same partition number when the dead-letter topic has one (so dead letters of a
partition stay in order). The dead-letter topic is created on first use with the source
topic's partition count. A source topic of over 245 characters has no legal ``<topic>.dlq``
(Kafka names have at most 249): its dead letters are refused with DeadLetterTopicNameError
(not retriable; use a shorter suffix). Only once the dead letter is acknowledged (acks=all) does
``process`` return, so a consumer that commits after processing never commits past a
record that is neither processed nor parked.

Works with confluent-kafka (librdkafka) consumers and producers::

    policy = DeadLetterPolicy.for_bootstrap("localhost:9092", max_attempts=3)
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        policy.process(msg, handle)             # retries, then parks it in <topic>.dlq
        consumer.commit(msg, asynchronous=False)

Blocking (meant for the consumer's own thread). The attempt count is per call of
``process``: a record redelivered after a crash starts again from 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from hot.errors import InvalidTopicError, StrataError
from hot.topics import MAX_TOPIC_NAME_LENGTH, validate_topic_name

DLQ_SUFFIX: Final = ".dlq"
HEADER_TOPIC: Final = "strata.dlq.original.topic"
HEADER_PARTITION: Final = "strata.dlq.original.partition"
HEADER_OFFSET: Final = "strata.dlq.original.offset"
HEADER_ATTEMPTS: Final = "strata.dlq.attempts"
HEADER_ERROR: Final = "strata.dlq.error"
MAX_ERROR_BYTES: Final = 4096
_TIMESTAMP_NOT_AVAILABLE: Final = 0  # confluent_kafka.TIMESTAMP_NOT_AVAILABLE


class DeadLetterError(StrataError):
    """The dead letter could not be written (the caller must not commit the record)."""

    retriable = True


class DeadLetterTopicNameError(DeadLetterError):
    """The dead-letter topic's name (source topic + suffix) is not a legal topic name,
    e.g. longer than 249 characters: retrying cannot help."""

    retriable = False


class Message(Protocol):
    """What is read of a consumed record (confluent_kafka.Message has all of it)."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> Sequence[tuple[str, bytes | None]] | None: ...
    def timestamp(self) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    processed: bool  # the handler succeeded (on attempt ``attempts``)
    attempts: int
    dead_lettered: bool = False
    error: BaseException | None = None  # the last failure, if it was dead-lettered


def dlq_topic(topic: str, suffix: str = DLQ_SUFFIX) -> str:
    """``topic + suffix``; DeadLetterTopicNameError if that is no legal topic name (a
    source topic of more than ``249 - len(suffix)`` characters): the dead letter is then
    refused rather than produced to a topic no broker can create."""
    name = topic + suffix
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise DeadLetterTopicNameError(
            f"no dead-letter topic for {topic[:60]!r}{'...' if len(topic) > 60 else ''} "
            f"({len(topic)} characters) with suffix {suffix!r}: {exc}; the source topic may have "
            f"at most {MAX_TOPIC_NAME_LENGTH - len(suffix)} characters for this suffix"
        ) from None
    return name


def error_text(error: BaseException) -> bytes:
    text = f"{type(error).__name__}: {error}".encode("utf-8", "backslashreplace")
    if len(text) <= MAX_ERROR_BYTES:
        return text
    return text[: MAX_ERROR_BYTES - 3].decode("utf-8", "ignore").encode("utf-8") + b"..."


def dead_letter_headers(message: Message, error: BaseException, attempts: int) -> list[tuple[str, bytes]]:
    """The original headers followed by the strata.dlq.* ones."""
    out: list[tuple[str, bytes]] = [(k, v if v is not None else b"") for k, v in (message.headers() or [])]
    out += [
        (HEADER_TOPIC, (message.topic() or "").encode("utf-8")),
        (HEADER_PARTITION, str(message.partition()).encode("ascii")),
        (HEADER_OFFSET, str(message.offset()).encode("ascii")),
        (HEADER_ATTEMPTS, str(attempts).encode("ascii")),
        (HEADER_ERROR, error_text(error)),
    ]
    return out


class DeadLetterPolicy:
    """Retry a handler up to ``max_attempts`` times, then park the record in its
    dead-letter topic (behaviour: module docstring).

    ``producer``: a confluent_kafka.Producer (acks=all advised; ``for_bootstrap`` makes
    one). ``admin``: a confluent_kafka.admin.AdminClient, to create missing dead-letter
    topics (None: they must exist or be auto-created by the broker). ``retry_backoff_s``
    is slept between attempts. ``should_retry(error)`` False dead-letters at once (e.g.
    for errors that retrying cannot fix, such as a record that does not parse).
    """

    def __init__(
        self,
        producer: Any,
        *,
        max_attempts: int = 3,
        admin: Any = None,
        suffix: str = DLQ_SUFFIX,
        retry_backoff_s: float = 0.0,
        delivery_timeout_s: float = 30.0,
        should_retry: Callable[[BaseException], bool] | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if not suffix:
            raise ValueError("the dead-letter suffix must not be empty")
        try:
            validate_topic_name("t" + suffix)
        except InvalidTopicError as exc:
            raise ValueError(f"the dead-letter suffix {suffix!r} cannot end a topic name: {exc}") from None
        self.producer = producer
        self.admin = admin
        self.max_attempts = max_attempts
        self.suffix = suffix
        self.retry_backoff_s = retry_backoff_s
        self.delivery_timeout_s = delivery_timeout_s
        self.should_retry = should_retry or (lambda _: True)
        self._partitions: dict[str, int] = {}  # dead-letter topic -> partition count
        self.dead_lettered = 0

    @classmethod
    def for_bootstrap(cls, bootstrap_servers: str, **kwargs: Any) -> DeadLetterPolicy:
        """A policy with its own idempotent acks=all producer and admin client."""
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
            }
        )
        return cls(producer, admin=AdminClient({"bootstrap.servers": bootstrap_servers}), **kwargs)

    def process(self, message: Message, handler: Callable[[Message], object]) -> Outcome:
        """Run ``handler(message)``; on failure retry, and after the last failed attempt
        write the dead letter (DeadLetterError if that fails: do not commit then)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                handler(message)
                return Outcome(processed=True, attempts=attempt)
            except Exception as exc:  # the handler's failure is data here
                if attempt >= self.max_attempts or not self.should_retry(exc):
                    self.dead_letter(message, exc, attempt)
                    return Outcome(processed=False, attempts=attempt, dead_lettered=True, error=exc)
            if self.retry_backoff_s > 0:
                time.sleep(self.retry_backoff_s)

    def wrap(self, handler: Callable[[Message], object]) -> Callable[[Message], Outcome]:
        """``handler`` with this policy applied, for ``for msg in ...: wrapped(msg)`` loops."""
        return lambda message: self.process(message, handler)

    def dead_letter(self, message: Message, error: BaseException, attempts: int) -> None:
        """Produce ``message`` to its dead-letter topic and wait for the acknowledgement."""
        source = message.topic()
        if not source:
            raise DeadLetterError("the message has no topic")
        topic = dlq_topic(source, self.suffix)
        partitions = self._ensure_topic(topic, source)
        ts_type, ts = message.timestamp()
        kwargs: dict[str, Any] = {}
        if ts_type != _TIMESTAMP_NOT_AVAILABLE and ts >= 0:
            kwargs["timestamp"] = ts
        original = message.partition()
        if original is not None and partitions is not None and 0 <= original < partitions:
            kwargs["partition"] = original
        outcome: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            outcome.append(err)

        try:
            self.producer.produce(
                topic,
                key=message.key(),
                value=message.value(),
                headers=dead_letter_headers(message, error, attempts),
                on_delivery=delivered,
                **kwargs,
            )
        except Exception as exc:  # BufferError (queue full), KafkaException, bad arguments
            raise DeadLetterError(f"cannot produce the dead letter to {topic}: {exc}") from exc
        deadline = time.monotonic() + self.delivery_timeout_s
        while not outcome and time.monotonic() < deadline:
            self.producer.poll(min(0.1, max(0.0, deadline - time.monotonic())))
        if not outcome:
            raise DeadLetterError(
                f"dead letter to {topic} not acknowledged within {self.delivery_timeout_s} s"
            )
        if outcome[0] is not None:
            raise DeadLetterError(f"dead letter to {topic} failed: {outcome[0]}")
        self.dead_lettered += 1

    def _ensure_topic(self, topic: str, source: str) -> int | None:
        """The dead-letter topic's partition count, creating it (with the source's count)
        if missing. None if unknown (no admin client)."""
        known = self._partitions.get(topic)
        if known is not None:
            return known
        if self.admin is None:
            return None
        try:
            from confluent_kafka import KafkaError, KafkaException
            from confluent_kafka.cimpl import NewTopic

            md = self.admin.list_topics(timeout=self.delivery_timeout_s)
            existing = md.topics.get(topic)
            if existing is not None and existing.error is None:
                self._partitions[topic] = len(existing.partitions)
                return len(existing.partitions)
            src = md.topics.get(source)
            count = len(src.partitions) if src is not None and src.error is None and src.partitions else 1
            future = self.admin.create_topics([NewTopic(topic, num_partitions=count)])[topic]
            try:
                future.result(timeout=self.delivery_timeout_s)
            except KafkaException as exc:
                if (
                    exc.args
                    and getattr(exc.args[0], "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS
                ):
                    return self._refresh(topic)
                raise
        except Exception as exc:  # confluent_kafka.KafkaException, timeouts
            raise DeadLetterError(f"cannot create dead-letter topic {topic}: {exc}") from exc
        self._partitions[topic] = count
        return count

    def _refresh(self, topic: str) -> int | None:
        md = self.admin.list_topics(topic=topic, timeout=self.delivery_timeout_s)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        self._partitions[topic] = len(t.partitions)
        return len(t.partitions)
