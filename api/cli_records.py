"""The record-level work behind ``strata produce``, ``strata consume`` and ``strata bench``,
kept apart from the click commands (api/cli.py) that parse options and print.

Data moves through confluent-kafka (librdkafka), the client operators' applications
use; librdkafka's own log lines are silenced so that a failure is reported once, as one
line, by the command. Bad input raises ``CliError`` with the message to print.
"""

from __future__ import annotations

import base64
import logging
import signal
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

_QUIET = logging.getLogger("strata.cli.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

Progress = Callable[[int], None]  # called with the number of records done so far


class CliError(Exception):
    """Bad input or a failed operation; the message is the one line to print."""


def client_config(config: dict[str, str], **extra: Any) -> dict[str, Any]:
    """librdkafka settings: the command's defaults, then the user's properties
    (``config``: bootstrap.servers, -X and the profile file; api.cli_connect) over them."""
    return {**extra, **config, "logger": _QUIET}


# -- produce ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutRecord:
    key: bytes | None
    value: bytes


def parse_lines(
    lines: Iterable[bytes], key_separator: str | None, *, source: str = "stdin"
) -> Iterator[OutRecord]:
    """One record per line (trailing newline dropped), bytes as given: input need not be
    UTF-8. With ``key_separator`` (UTF-8 encoded) the bytes before its first occurrence are
    the key, and a line without it is an error."""
    sep_bytes = None if key_separator is None else key_separator.encode()
    for n, line in enumerate(lines, 1):
        data = line[:-1] if line.endswith(b"\n") else line
        if sep_bytes is None:
            yield OutRecord(None, data)
            continue
        key, sep, value = data.partition(sep_bytes)
        if not sep:
            raise CliError(f"{source} line {n}: no key separator {key_separator!r}")
        yield OutRecord(key, value)


@dataclass
class ProduceSummary:
    topic: str
    records: int = 0
    bytes: int = 0
    partitions: dict[int, dict[str, int]] = field(default_factory=dict)  # first/last offset, count

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "records": self.records,
            "bytes": self.bytes,
            "partitions": {  # offsets null with acks=0 (the broker does not answer)
                str(p): {k: (n if n >= 0 else None) for k, n in v.items()}
                for p, v in sorted(self.partitions.items())
            },
        }

    def text(self) -> str:
        parts = ", ".join(
            f"partition {p} offsets {v['first_offset']}-{v['last_offset']}"
            if v["first_offset"] >= 0
            else f"partition {p}"  # acks=0: offsets unknown
            for p, v in sorted(self.partitions.items())
        )
        head = f"produced {self.records} records ({self.bytes} bytes) to {self.topic}"
        return f"{head}: {parts}" if parts else head


def produce(
    config: dict[str, str],
    topic: str,
    records: Iterable[OutRecord],
    *,
    acks: str,
    partition: int | None,
    headers: Sequence[tuple[str, bytes]],
    progress: Progress | None = None,
) -> ProduceSummary:
    """Produce every record and wait for each acknowledgement (acks=0: for the send)."""
    from confluent_kafka import KafkaError, Producer

    producer = Producer(
        client_config(
            config,
            acks=acks,
            **{"linger.ms": 5, "allow.auto.create.topics": False, "message.timeout.ms": 30000},
        )
    )
    summary = ProduceSummary(topic)
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(err)
            return
        p = msg.partition()
        off = msg.offset()
        if off is None:  # acks=0: the broker does not answer, offsets are unknown
            off = -1
        row = summary.partitions.setdefault(p, {"first_offset": off, "last_offset": off, "records": 0})
        if off >= 0:
            row["first_offset"] = min(row["first_offset"], off)
            row["last_offset"] = max(row["last_offset"], off)
        row["records"] += 1
        summary.records += 1
        summary.bytes += len(msg.value() or b"")
        if progress is not None:
            progress(summary.records)

    sent = 0
    for rec in records:
        kwargs: dict[str, Any] = {"value": rec.value, "on_delivery": delivered}
        if rec.key is not None:
            kwargs["key"] = rec.key
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
        if failures:
            break
    left = producer.flush(60)
    if failures:
        raise CliError(f"{len(failures)} of {sent} records not produced to {topic}: {failures[0].str()}")
    if left:
        raise CliError(f"{left} of {sent} records to {topic} not acknowledged within 60 s")
    return summary


# -- consume ------------------------------------------------------------------------------------


def parse_offset(text: str) -> int | str:
    """``--offset``: a non-negative offset, ``earliest`` or ``latest``."""
    if text in ("earliest", "latest"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise CliError(f"--offset: expected an offset, 'earliest' or 'latest', got {text!r}") from None
    if value < 0:
        raise CliError(f"--offset: offsets are non-negative, got {value}")
    return value


def _text(data: bytes | None) -> str | None:
    # Lossless for UTF-8; other bytes are kept visible as \\xNN escapes.
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def record_json(msg: Any) -> dict[str, Any]:
    ts_type, ts = msg.timestamp()
    value = msg.value()
    doc: dict[str, Any] = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ts if ts_type else None,
        "key": _text(msg.key()),
        "value": _text(value),
        "headers": [{"key": k, "value": _text(v)} for k, v in (msg.headers() or [])],
    }
    if value is not None:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            doc["value_base64"] = base64.b64encode(value).decode()  # not UTF-8: the exact bytes
    return doc


def consume(
    config: dict[str, str],
    topic: str,
    starts: dict[int, int | str | None],
    *,
    group: str | None,
    count: int | None,
    idle_timeout: float | None,
    on_record: Callable[[Any], None],
) -> int:
    """Read ``topic``'s partitions from ``starts`` (offset, 'earliest', 'latest', or None:
    the group's committed offset, else latest) until ``count`` records or ``idle_timeout``
    seconds without one; with ``group``, commit the positions reached. Returns the count."""
    from confluent_kafka import (
        OFFSET_BEGINNING,
        OFFSET_END,
        OFFSET_STORED,
        Consumer,
        KafkaError,
        TopicPartition,
    )

    consumer = Consumer(
        client_config(
            config,
            **{
                "group.id": group or f"strata-cli-{uuid.uuid4().hex[:12]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                "enable.partition.eof": False,
            },
        )
    )
    special = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END, None: OFFSET_STORED}
    try:
        consumer.assign(
            [
                TopicPartition(topic, p, special[s] if not isinstance(s, int) else s)
                for p, s in sorted(starts.items())
            ]
        )
        got = 0
        last = time.monotonic()
        # Ctrl-C ends the read between records (never in the middle of printing one), so
        # that what is committed is exactly what was printed.
        stop: list[int] = []
        previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
        try:
            while (count is None or got < count) and not stop:
                msg = consumer.poll(0.2)
                if msg is None:
                    if idle_timeout is not None and time.monotonic() - last >= idle_timeout:
                        break
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise CliError(f"{topic}-{msg.partition()}: {err.str()}")
                on_record(msg)
                got += 1
                last = time.monotonic()
        finally:
            signal.signal(signal.SIGINT, previous)
        if group is not None and got:
            consumer.commit(asynchronous=False)
        return got
    finally:
        consumer.close()


# -- bench --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchResult:
    records: int
    record_bytes: int
    produce_seconds: float
    fetch_seconds: float

    def rates(self) -> dict[str, float]:
        mib = self.records * self.record_bytes / (1 << 20)
        return {
            "produce_records_per_s": self.records / self.produce_seconds,
            "produce_mib_per_s": mib / self.produce_seconds,
            "fetch_records_per_s": self.records / self.fetch_seconds,
            "fetch_mib_per_s": mib / self.fetch_seconds,
            "fetch_to_produce_ratio": self.produce_seconds / self.fetch_seconds,
        }


def bench(
    config: dict[str, str],
    topic: str,
    partitions: int,
    records: int,
    record_bytes: int,
    *,
    acks: str,
    progress: Callable[[str, int], None] | None = None,
) -> BenchResult:
    """Produce ``records`` records of ``record_bytes`` bytes to an empty ``topic``, then
    fetch them all back from offset 0; wall-clock seconds of each phase."""
    value = b"x" * record_bytes
    started = time.perf_counter()
    produce(
        config,
        topic,
        (OutRecord(None, value) for _ in range(records)),
        acks=acks,
        partition=None,
        headers=(),
        progress=(lambda n: progress("produce", n)) if progress is not None else None,
    )
    produced = time.perf_counter() - started
    seen = 0

    def counted(_msg: Any) -> None:
        nonlocal seen
        seen += 1
        if progress is not None and (seen % 1000 == 0 or seen == records):
            progress("fetch", seen)

    started = time.perf_counter()
    got = consume(
        config,
        topic,
        dict.fromkeys(range(partitions), 0),
        group=None,
        count=records,
        idle_timeout=30.0,
        on_record=counted,
    )
    fetched = time.perf_counter() - started
    if got < records:
        raise CliError(f"fetched {got} of {records} records from {topic} (no record for 30 s)")
    return BenchResult(records, record_bytes, produced, fetched)
