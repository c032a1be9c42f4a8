"""The record-level work behind ``strata produce``, ``strata consume`` and ``strata bench``,
kept apart from the click commands (api/cli/__init__.py) that parse options and print.

Data moves through confluent-kafka (librdkafka), the client operators' applications
use; librdkafka's own log lines are silenced so that a failure is reported once, as one
line, by the command. Bad input raises ``CliError`` with the message to print.
"""

from __future__ import annotations

import base64
import logging
import re
import signal
import struct
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
    (``config``: bootstrap.servers, -X and the profile file; api.cli.connect) over them."""
    return {**extra, **config, "logger": _QUIET}


# -- produce ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutRecord:
    key: bytes | None
    value: bytes


def split_input(data: bytes, delimiter: bytes | None) -> list[bytes]:
    """The records of an input: split at ``delimiter`` (a final one ends the last record,
    as a file's last newline does), or the whole input as one record when it is None
    (``--raw``). Bytes as given: input need not be UTF-8."""
    if delimiter is None:
        return [data]
    chunks = data.split(delimiter)
    if chunks and chunks[-1] == b"":
        chunks.pop()
    return chunks


def parse_records(
    chunks: Iterable[bytes], key_separator: bytes | None, *, source: str = "stdin", what: str = "line"
) -> Iterator[OutRecord]:
    """One record per chunk; with ``key_separator`` the bytes before its first occurrence
    are the key, and a chunk without it is an error naming it (``what`` ``n`` of
    ``source``)."""
    for n, data in enumerate(chunks, 1):
        if key_separator is None:
            yield OutRecord(None, data)
            continue
        key, sep, value = data.partition(key_separator)
        if not sep:
            raise CliError(
                f"{source} {what} {n}: no key separator {key_separator.decode(errors='replace')!r}"
            )
        yield OutRecord(key, value)


_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", "0": b"\0"}


def unescape(text: str, *, option: str) -> bytes:
    """kcat's delimiter and format escapes: ``\\n \\r \\t \\0 \\\\ \\xNN``; other text as
    UTF-8. An unknown escape is an error naming ``option``."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")  # argv bytes that are not UTF-8, as given
            i += 1
            continue
        esc = text[i + 1 : i + 2]
        if esc == "x":
            digits = text[i + 2 : i + 4]
            try:
                if len(digits) != 2:
                    raise ValueError
                out.append(int(digits, 16))
            except ValueError:
                raise CliError(f"{option}: \\x needs two hex digits, got {digits!r}") from None
            i += 4
            continue
        if esc not in _ESCAPES:
            raise CliError(f"{option}: unknown escape \\{esc} (known: \\n \\r \\t \\0 \\\\ \\xNN)")
        out += _ESCAPES[esc]
        i += 2
    return bytes(out)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
        head = f"produced {_plural(self.records, 'record')} ({_plural(self.bytes, 'byte')}) to {self.topic}"
        return f"{head}: {parts}" if parts else head


def produce(
    config: dict[str, str],
    topic: str,
    records: Iterable[OutRecord],
    *,
    acks: str,
    partition: int | None,
    headers: Sequence[tuple[str, bytes]],
    compression: str = "none",
    progress: Progress | None = None,
) -> ProduceSummary:
    """Produce every record and wait for each acknowledgement (acks=0: for the send);
    batches compressed with ``compression`` (librdkafka's compression.type)."""
    from confluent_kafka import KafkaError, Producer

    producer = Producer(
        client_config(
            config,
            acks=acks,
            **{
                "compression.type": compression,
                "linger.ms": 5,
                "allow.auto.create.topics": False,
                "message.timeout.ms": 30000,
            },
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


@dataclass(frozen=True)
class Start:
    """Where ``consume`` starts, as kcat's ``-o``: ``kind`` is ``earliest``, ``latest``,
    ``stored`` (the group's committed offset), ``offset`` (absolute ``value``), ``tail``
    (``value`` records before each partition's end) or ``time`` (the first record at or
    after ``value`` ms)."""

    kind: str
    value: int = 0


_NAMED_STARTS = {
    "beginning": "earliest",
    "earliest": "earliest",
    "end": "latest",
    "e": "latest",
    "latest": "latest",
    "stored": "stored",
}


def parse_offset(text: str, *, option: str = "--offset") -> Start:
    """kcat's offsets: ``beginning|earliest``, ``end|e|latest``, ``stored``, ``N``,
    ``-N`` (N before the end), ``s@MS`` or ``s@ISO-8601`` (a time)."""
    text = text.strip()
    if text in _NAMED_STARTS:
        return Start(_NAMED_STARTS[text])
    if text.startswith("s@"):
        return Start("time", timestamp_ms(text[2:], option=option))
    try:
        value = int(text)
    except ValueError:
        raise CliError(
            f"{option}: expected an offset N, -N (before the end), s@TIMESTAMP, beginning, end "
            f"or stored, got {text!r}"
        ) from None
    return Start("tail", -value) if text.startswith("-") else Start("offset", value)


def timestamp_ms(text: str, *, option: str) -> int:
    """Milliseconds since the epoch, given as such or as ISO 8601 (local time without a
    zone, as Kafka's tools read it)."""
    import datetime

    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"{option}: expected milliseconds since the epoch or an ISO 8601 time like "
            f"2026-01-31T12:00:00Z, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def resolve_start(
    start: Start, topic: str, part: dict[str, Any], by_time: dict[int, int]
) -> int | str | None:
    """One partition's first offset (or 'earliest', 'latest', None: the group's) from its
    log start and high watermark; a time with no record at or after it is the end."""
    lo: int = part["log_start_offset"]
    hi: int = part["high_watermark"]
    if start.kind in ("earliest", "latest"):
        return start.kind
    if start.kind == "stored":
        return None
    if start.kind == "tail":
        return max(lo, hi - start.value)
    if start.kind == "time":
        found = by_time.get(part["partition"], -1)
        return hi if found < 0 else found
    if not lo <= start.value <= hi:
        raise CliError(f"offset {start.value} is outside {topic}-{part['partition']} (offsets {lo} to {hi})")
    return start.value


def _text(data: bytes | None) -> str | None:
    # Lossless for UTF-8; other bytes are kept visible as \xNN escapes.
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def _exact(doc: dict[str, Any], name: str, data: bytes | None) -> None:
    """``doc[name]`` as text, and ``doc[name + '_base64']`` with the exact bytes when they
    are not UTF-8 (the text then shows them as \\xNN escapes)."""
    doc[name] = _text(data)
    if data is not None:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            doc[f"{name}_base64"] = base64.b64encode(data).decode()


def record_json(msg: Any) -> dict[str, Any]:
    ts_type, ts = msg.timestamp()
    doc: dict[str, Any] = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ts if ts_type else None,
    }
    _exact(doc, "key", msg.key())
    _exact(doc, "value", msg.value())
    headers = []
    for k, v in msg.headers() or []:
        header: dict[str, Any] = {"key": k}
        _exact(header, "value", v)
        headers.append(header)
    doc["headers"] = headers
    return doc


# -- kcat's -f format -----------------------------------------------------------------------------

_TOKENS = re.compile(r"%(.?)", re.DOTALL)


def compile_format(fmt: str) -> list[bytes | str]:
    """kcat's ``-f`` format: literal bytes (with unescape's escapes), and one-letter tokens
    (``%s`` value, ``%S`` its length or -1, ``%R`` that length as a big-endian int32, ``%k``
    key, ``%K`` its length or -1, ``%T`` timestamp ms, ``%h`` headers as ``n=v`` CSV, ``%t``
    topic, ``%p`` partition, ``%o`` offset, ``%%``). Unknown ones are errors."""
    out: list[bytes | str] = []
    lit = bytearray()
    pos = 0
    for m in _TOKENS.finditer(fmt):
        lit += unescape(fmt[pos : m.start()], option="-f")
        pos = m.end()
        tok = m.group(1)
        if tok == "%":
            lit += b"%"
            continue
        if not tok or tok not in "stpokKSTRh":
            raise CliError(f"-f: unknown token %{tok} (known: %s %S %R %k %K %T %h %t %p %o %%)")
        if lit:
            out.append(bytes(lit))
            lit.clear()
        out.append(tok)
    lit += unescape(fmt[pos:], option="-f")
    if lit:
        out.append(bytes(lit))
    return out


def render(fmt: list[bytes | str], msg: Any) -> bytes:
    """One record through a compiled ``-f`` format, as bytes (keys and values unchanged)."""
    parts: list[bytes] = []
    key, value = msg.key(), msg.value()
    for item in fmt:
        if isinstance(item, bytes):
            parts.append(item)
            continue
        if item == "s":
            parts.append(value or b"")
        elif item == "k":
            parts.append(key or b"")
        elif item == "S":
            parts.append(str(-1 if value is None else len(value)).encode())
        elif item == "R":
            parts.append(struct.pack(">i", -1 if value is None else len(value)))
        elif item == "K":
            parts.append(str(-1 if key is None else len(key)).encode())
        elif item == "T":
            ts_type, ts = msg.timestamp()
            parts.append(str(ts if ts_type else -1).encode())
        elif item == "h":
            parts.append(b",".join(k.encode() + b"=" + (v or b"") for k, v in msg.headers() or []))
        elif item == "t":
            parts.append(msg.topic().encode())
        elif item == "p":
            parts.append(str(msg.partition()).encode())
        else:  # "o"
            parts.append(str(msg.offset()).encode())
    return b"".join(parts)


def consume(
    config: dict[str, str],
    topic: str,
    starts: dict[int, int | str | None],
    *,
    group: str | None,
    count: int | None,
    idle_timeout: float | None,
    on_record: Callable[[Any], None],
    exit_at_end: bool = False,
    stop_ms: int | None = None,
    reset: str = "latest",
) -> int:
    """Read ``topic``'s partitions from ``starts`` (offset, 'earliest', 'latest', or None:
    the group's committed offset, else ``reset``) until ``count`` records, ``idle_timeout``
    seconds without one or every partition is done: read to its end with ``exit_at_end``
    (kcat's ``-e``), or at its first record of ``stop_ms`` or later (kcat's ``-o e@``,
    that record not included). With ``group``, commit the positions reached (a stopped
    partition's: its first record not printed). Returns the count."""
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
                "auto.offset.reset": reset,
                "enable.partition.eof": exit_at_end,
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
        at_end: set[int] = set()  # partitions whose end was reached and nothing read since
        stopped: set[int] = set()  # partitions that reached stop_ms
        resume_at: dict[int, int] = {}  # per partition: the first offset not printed
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
                        at_end.add(msg.partition() or 0)
                        if exit_at_end and len(at_end | stopped) == len(starts):
                            break
                        continue
                    raise CliError(f"{topic}-{msg.partition()}: {err.str()}")
                p = msg.partition() or 0
                at_end.discard(p)
                if stop_ms is not None and msg.timestamp()[1] >= stop_ms:
                    # read no more of it; a commit resumes at this record
                    consumer.pause([TopicPartition(topic, p)])
                    resume_at[p] = msg.offset() or 0
                    stopped.add(p)
                    if len(stopped) == len(starts) or (exit_at_end and len(at_end | stopped) == len(starts)):
                        break
                    continue
                on_record(msg)
                resume_at[p] = (msg.offset() or 0) + 1
                got += 1
                last = time.monotonic()
        finally:
            signal.signal(signal.SIGINT, previous)
        if group is not None and resume_at:
            # exactly what was printed (a stopped partition's first record was read, not printed)
            consumer.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in sorted(resume_at.items())],
                asynchronous=False,
            )
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
