"""Options of the ``strata`` data source (and of ``strata export``), parsed and validated. Pure.

Option names are case-insensitive, as in every Spark data source::

    path / load(URL)              object store URL the brokers use: s3://bucket/prefix or file:///dir
    subscribe                     topic name, or several separated by commas (alias: topic)
    subscribePattern              a regular expression; every topic whose whole name matches it
    assign                        JSON {"topic":[0,1]}: exactly these partitions
                                  (exactly one of subscribe, subscribePattern and assign)
    partitions                    optional, with subscribe/subscribePattern: partition numbers, e.g. "0,2,5"
    startingOffsets               "earliest" (batch default) or "latest" (streaming default, only there)
                                  or JSON {"topic":{"0":100,"1":-2}}
    endingOffsets                 batch only: "latest" (default) or JSON {"topic":{"0":200,"1":-1}}; exclusive
    startingTimestamp             ms since the epoch, for every partition (wins over the above)
    endingTimestamp               likewise for the end
    startingOffsetsByTimestamp    JSON {"topic":{"0":1700000000000}}
    endingOffsetsByTimestamp      likewise for the end
    includeHot                    also read the not-yet-tiered tail through the broker; default
                                  true when a broker is given, so that "latest" is the high
                                  watermark as in Spark's Kafka source; "false": the archive's end
    failOnDataLoss                "true" (default): fail when planned records were deleted (retention)
                                  before a task read them; "false": skip them (Spark's Kafka option)
    broker                        HOST:PORT of a broker's Kafka listener (alias: kafka.bootstrap.servers)
    endpoint, region,             S3 endpoint URL, region and credentials; default: the standard
    accessKey, secretKey          AWS chain (AWS_ENDPOINT_URL, AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, ...)
    maxPartitionBytes             a Spark partition reads at most about this many bytes [128m]: each
                                  topic-partition's segments are cut into the fewest nearly equal
                                  pieces this size allows (small segments share one piece)
    minPartitions                 cut smaller pieces so the scan has at least about this many Spark
                                  partitions (as Spark's Kafka source option)
    readChunkBytes                size of one ranged GET while scanning [8m]

Streaming only (``spark.stream``), as Spark's Kafka source::

    maxOffsetsPerTrigger          at most about this many offsets per micro-batch, split over
                                  the partitions in proportion to their backlog
    minOffsetsPerTrigger          skip a trigger while fewer offsets are waiting, ...
    maxTriggerDelay               ... unless this long passed since the last batch [15m]

Options of Spark's Kafka source that mean nothing here are accepted when ignoring them is
harmless (consumer tuning such as kafka.client.id or fetchOffset.numRetries,
kafka.group.id, groupIdPrefix, includeHeaders=true); any other option is refused, naming
the nearest valid one.

Security of the broker connection (includeHot), named as Spark's Kafka source names them
(``kafka.`` + the client property); PEM files rather than Java keystores::

    kafka.security.protocol       PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
    kafka.sasl.mechanism          PLAIN (default) | SCRAM-SHA-256 | SCRAM-SHA-512
    kafka.sasl.username           the SASL user (its principal needs DESCRIBE and READ on the
    kafka.sasl.password           topics: ListOffsets plans, Fetch reads)
    kafka.ssl.cafile              CA file (PEM) the broker's certificate is checked against
                                  (alias: kafka.ssl.ca.location)
    kafka.ssl.certfile,           client certificate and key (PEM) for mutual TLS
    kafka.ssl.keyfile             (aliases: kafka.ssl.certificate.location, kafka.ssl.key.location)
    kafka.ssl.endpoint.identification.algorithm   "none": do not check the broker's host name

The password is kept out of the options' repr and out of every error message.

Offsets follow Spark's Kafka source exactly: in JSON, -2 means earliest and -1 latest;
"latest" (or -1) is refused as a starting offset and "earliest" (or -2) as an ending one,
as Spark refuses them for batch queries. A timestamp bound resolves, per partition, to the
earliest offset whose record timestamp is at or after it (Kafka's offsetsForTimes); when no
record qualifies, to the latest offset. Precedence: *Timestamp, then *OffsetsByTimestamp,
then *Offsets.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from hot.errors import InvalidConfigError
from kclient.security import ClientSecurity

EARLIEST: Final = -2
LATEST: Final = -1
DEFAULT_MAX_PARTITION_BYTES: Final = 128 << 20  # spark.sql.files.maxPartitionBytes
DEFAULT_READ_CHUNK_BYTES: Final = 8 << 20
DEFAULT_MAX_TRIGGER_DELAY_MS: Final = 15 * 60 * 1000  # Spark's maxTriggerDelay default, 15m
_SIZE: Final = re.compile(r"(\d+)\s*([kmgt]?)b?", re.IGNORECASE)
_UNITS: Final = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of the range to read, before resolution against the bucket (and broker).

    ``default`` (EARLIEST or LATEST) applies to partitions not listed in ``offsets`` or
    ``timestamps``; ``timestamp`` applies to every partition."""

    default: int
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None

    def for_partition(self, tp: TopicPartition) -> tuple[str, int]:
        """("offset", n) with n >= 0, ("earliest"|"latest", -2|-1) or ("timestamp", ms)."""
        if self.timestamp is not None:
            return "timestamp", self.timestamp
        if tp in self.timestamps:
            return "timestamp", self.timestamps[tp]
        off = self.offsets.get(tp, self.default)
        if off == EARLIEST:
            return "earliest", off
        if off == LATEST:
            return "latest", off
        return "offset", off

    def named_partitions(self) -> set[TopicPartition]:
        return set(self.offsets) | set(self.timestamps)


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """maxOffsetsPerTrigger, minOffsetsPerTrigger and maxTriggerDelay (ms); None: unset."""

    max_offsets: int | None = None
    min_offsets: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """Where the bucket is and how to reach it; picklable, opened inside each task."""

    url: str
    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None


@dataclass(frozen=True, slots=True)
class ReadOptions:
    store: StoreOptions
    # subscribe: the topics; assign: the assigned topics; subscribePattern: empty
    topics: tuple[str, ...]
    partitions: frozenset[int] | None
    start: Bound
    end: Bound
    broker: str | None = None
    include_hot: bool = False
    fail_on_data_loss: bool = True
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    min_partitions: int = 0
    read_chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES
    security: ClientSecurity = field(default_factory=ClientSecurity)
    # kafka.isolation.level: 0 read_uncommitted (Spark's default: every transactional
    # record), 1 read_committed (committed data up to the last stable offset only).
    isolation_level: int = 0
    # subscribePattern: topics whose whole name matches it (Java's Pattern.matches)
    pattern: str | None = None
    # assign: exactly these partitions of each topic
    assign: Mapping[str, frozenset[int]] | None = None
    stream: StreamLimits = field(default_factory=lambda: StreamLimits())

    def partitions_of(self, topic: str) -> frozenset[int] | None:
        """The partitions of ``topic`` to read (None: all)."""
        if self.assign is not None:
            return self.assign.get(topic, frozenset())
        return self.partitions

    def selects(self, topic: str) -> bool:
        """Whether ``topic`` is one this read subscribes to."""
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    @classmethod
    def parse(
        cls, options: Mapping[str, str], *, path: str | None = None, streaming: bool = False
    ) -> ReadOptions:
        """Validate Spark-style options; InvalidConfigError names the option at fault.
        ``streaming``: options of ``spark.readStream`` (startingOffsets defaults to latest,
        endingOffsets is refused), as Spark's Kafka source validates them."""
        check_names({str(k): v for k, v in options.items() if v is not None})
        o = {str(k).lower(): v for k, v in options.items() if v is not None}
        if streaming:
            for opt, what in (
                ("endingoffsets", "ending offset"),
                ("endingoffsetsbytimestamp", "ending timestamp"),
                ("endingtimestamp", "ending timestamp"),
            ):
                if opt in o:
                    raise InvalidConfigError(f"strata: {what} not valid in streaming queries")
        url = path or o.get("path") or o.get("objectstore")
        if not url:
            raise InvalidConfigError(
                'strata: give the object store URL: spark.read.format("strata").load("s3://bucket/prefix")'
            )
        if (o.get("accesskey") is None) != (o.get("secretkey") is None):
            raise InvalidConfigError("strata: options accessKey and secretKey must be given together")
        store = StoreOptions(
            url=str(url),
            endpoint=o.get("endpoint") or None,
            region=o.get("region") or None,
            access_key=o.get("accesskey"),
            secret_key=o.get("secretkey"),
        )
        topics, pattern, assign = _selection(o)
        start = _bound(o, "starting", LATEST if streaming else EARLIEST, streaming)
        end = _bound(o, "ending", LATEST)
        for tp, off in start.offsets.items():
            if off == LATEST and not streaming:
                raise InvalidConfigError(
                    f"startingOffsets for {tp[0]}-{tp[1]} can't be latest for batch queries"
                )
        for tp, off in end.offsets.items():
            if off == EARLIEST:
                raise InvalidConfigError(
                    f"endingOffsets for {tp[0]}-{tp[1]} can't be earliest for batch queries"
                )
        for b, name in ((start, "starting"), (end, "ending")):
            unknown = sorted(t for t in {t for t, _ in b.named_partitions()} if t not in topics)
            if unknown and pattern is None:
                raise InvalidConfigError(f"{name} offsets name topic(s) not being read: {', '.join(unknown)}")
        broker = o.get("broker") or _first_server(o.get("kafka.bootstrap.servers"))
        include_hot = _bool(o.get("includehot", "true" if broker else "false"), "includeHot")
        partitions = _partitions(o.get("partitions"))
        if partitions is not None and assign is not None:
            raise InvalidConfigError("strata: option partitions can't be combined with assign")
        if include_hot and not broker:
            raise InvalidConfigError(
                "strata: includeHot needs option broker=HOST:PORT (a broker's Kafka listener)"
            )
        max_bytes = _size(o.get("maxpartitionbytes"), "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES)
        if max_bytes < 1:
            raise InvalidConfigError("strata: maxPartitionBytes must be positive")
        chunk = _size(o.get("readchunkbytes"), "readChunkBytes", DEFAULT_READ_CHUNK_BYTES)
        if chunk < 4096:
            raise InvalidConfigError("strata: readChunkBytes must be at least 4096")
        return cls(
            store=store,
            topics=topics,
            partitions=partitions,
            start=start,
            end=end,
            broker=broker or None,
            include_hot=include_hot,
            fail_on_data_loss=_bool(o.get("failondataloss", "true"), "failOnDataLoss"),
            max_partition_bytes=max_bytes,
            min_partitions=_count(o.get("minpartitions"), "minPartitions"),
            read_chunk_bytes=chunk,
            security=_security(o),
            isolation_level=_isolation(o.get("kafka.isolation.level", "read_uncommitted")),
            pattern=pattern,
            assign=assign,
            stream=_stream_limits(o),
        )


# option (lower case) -> client property (kclient.security)
_SECURITY_OPTIONS: Final = {
    "kafka.security.protocol": "security.protocol",
    "kafka.sasl.mechanism": "sasl.mechanism",
    "kafka.sasl.username": "sasl.username",
    "kafka.sasl.password": "sasl.password",
    "kafka.ssl.cafile": "ssl.ca.location",
    "kafka.ssl.ca.location": "ssl.ca.location",
    "kafka.ssl.certfile": "ssl.certificate.location",
    "kafka.ssl.certificate.location": "ssl.certificate.location",
    "kafka.ssl.keyfile": "ssl.key.location",
    "kafka.ssl.key.location": "ssl.key.location",
    "kafka.ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
}


def _security(o: Mapping[str, str]) -> ClientSecurity:
    props = {prop: str(o[opt]) for opt, prop in _SECURITY_OPTIONS.items() if o.get(opt)}
    return ClientSecurity.from_properties(props, where="strata options kafka.*")


_ISOLATION_LEVELS: Final = {"read_uncommitted": 0, "read_committed": 1}


def _isolation(text: str) -> int:
    level = _ISOLATION_LEVELS.get(str(text).strip().lower())
    if level is None:
        raise InvalidConfigError(
            f"strata: kafka.isolation.level must be read_uncommitted or read_committed, got {text!r}"
        )
    return level


# Every option this source understands (lower case -> as documented).
_OPTIONS: Final = {
    n.lower(): n
    for n in (
        "path",
        "objectStore",
        "topic",
        "subscribe",
        "subscribePattern",
        "assign",
        "partitions",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "includeHot",
        "failOnDataLoss",
        "broker",
        "kafka.bootstrap.servers",
        "endpoint",
        "region",
        "accessKey",
        "secretKey",
        "maxPartitionBytes",
        "minPartitions",
        "readChunkBytes",
        "kafka.isolation.level",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "includeHeaders",
        # Spark's Kafka source options that tune its consumer or name its consumer group:
        # nothing here uses a consumer group or the Java consumer, so ignoring them is harmless.
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "groupIdPrefix",
        "kafka.group.id",
        "kafka.client.id",
        "kafka.client.dns.lookup",
        "kafka.request.timeout.ms",
        "kafka.default.api.timeout.ms",
        "kafka.session.timeout.ms",
        "kafka.heartbeat.interval.ms",
        "kafka.max.poll.records",
        "kafka.max.poll.interval.ms",
        "kafka.fetch.min.bytes",
        "kafka.fetch.max.bytes",
        "kafka.fetch.max.wait.ms",
        "kafka.max.partition.fetch.bytes",
        "kafka.receive.buffer.bytes",
        "kafka.send.buffer.bytes",
        "kafka.metadata.max.age.ms",
        "kafka.connections.max.idle.ms",
        "kafka.retry.backoff.ms",
        "kafka.reconnect.backoff.ms",
        "kafka.reconnect.backoff.max.ms",
        "kafka.check.crcs",
    )
}
# Kafka consumer settings Spark's Kafka source refuses, with its reasons.
_REFUSED: Final = {
    "kafka.auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the "
    "source option 'startingOffsets' to 'earliest' or 'latest' to specify where to start",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are "
    "deserialized as byte arrays. Use DataFrame operations to explicitly deserialize the keys",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are "
    "deserialized as byte arrays. Use DataFrame operations to explicitly deserialize the values",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported: the source "
    "tracks offsets in the query's checkpoint, not in a consumer group",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported: the source "
    "reads raw records, so consumer interceptors would never apply",
}


def check_names(options: Mapping[str, object]) -> None:
    """Every option name (case-insensitive) is one this source understands: a misspelled
    one is an error naming the nearest valid option, never silently ignored."""
    o = {k.lower(): v for k, v in options.items()}
    for given in options:
        name = given.lower()
        if name in _REFUSED:
            raise InvalidConfigError(f"strata: {_REFUSED[name]}")
        if name in _OPTIONS or name in _SECURITY_OPTIONS:
            continue
        valid = [*_OPTIONS.values(), *_SECURITY_OPTIONS]
        near = difflib.get_close_matches(name, [v.lower() for v in valid], n=1, cutoff=0.6)
        hint = ""
        if near:
            hint = f"; did you mean {next(v for v in valid if v.lower() == near[0])!r}?"
        raise InvalidConfigError(f"strata: unknown option {given!r}{hint}")
    if str(o.get("includeheaders", "true")).strip().lower() != "true":
        raise InvalidConfigError(
            "strata: option includeHeaders: headers are always read (column headers, null when a "
            "record has none); only includeHeaders=true is accepted"
        )
    strategy = str(o.get("startingoffsetsbytimestampstrategy", "latest")).strip().lower()
    if strategy != "latest":
        raise InvalidConfigError(
            "strata: option startingOffsetsByTimestampStrategy: only 'latest' is supported (a "
            "partition without a record at or after the timestamp starts at its latest offset)"
        )


_STRATEGIES: Final = "subscribe, subscribePattern, assign"


def _selection(
    o: Mapping[str, str],
) -> tuple[tuple[str, ...], str | None, dict[str, frozenset[int]] | None]:
    """(topics, pattern, assignment) from exactly one of subscribe (alias topic),
    subscribePattern and assign, with Spark's Kafka source's errors."""
    given = [k for k in ("topic", "subscribe", "subscribepattern", "assign") if k in o]
    if not given:
        raise InvalidConfigError(
            f"strata: One of the following options must be specified for Kafka source: {_STRATEGIES} "
            "(topic is an alias of subscribe). See the docs for more details."
        )
    if len(given) > 1:
        raise InvalidConfigError(
            f"strata: Only one of the following options can be specified for Kafka source: {_STRATEGIES} "
            "(topic is an alias of subscribe). See the docs for more details."
        )
    name, value = given[0], str(o[given[0]])
    if name == "subscribepattern":
        if not value.strip():
            raise InvalidConfigError(
                "strata: Pattern to subscribe is empty as specified value for option "
                f"'subscribePattern' is '{value}'"
            )
        try:
            re.compile(value.strip())
        except re.error as e:
            raise InvalidConfigError(
                f"strata: option subscribePattern: {value!r} is not a valid regex: {e}"
            ) from None
        return (), value.strip(), None
    if name == "assign":
        return _assign(value)
    topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
    if not topics:
        raise InvalidConfigError(
            f"strata: No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
        )
    for n in topics:
        try:
            _validate_topic_name(n)
        except Exception as e:
            raise InvalidConfigError(f"strata: option subscribe: {e}") from None
    return topics, None, None


def _assign(value: str) -> tuple[tuple[str, ...], None, dict[str, frozenset[int]]]:
    """Spark's assign JSON ``{"topicA":[0,1],"topicB":[2,4]}``."""
    if not value.strip().startswith("{"):
        raise InvalidConfigError(
            f"strata: No topicpartitions to assign as specified value for option 'assign' is '{value}'"
        )
    try:
        doc = json.loads(value)
    except ValueError:
        doc = None
    ok = isinstance(doc, dict) and all(
        isinstance(ps, list) and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps)
        for ps in doc.values()
    )
    if not ok or not doc:
        raise InvalidConfigError(
            f'strata: option assign: expected JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {value!r}'
        )
    assert isinstance(doc, dict)
    for n in doc:
        try:
            _validate_topic_name(n)
        except Exception as e:
            raise InvalidConfigError(f"strata: option assign: {e}") from None
    assign = {str(t): frozenset(ps) for t, ps in doc.items() if ps}
    return tuple(assign), None, assign


def _stream_limits(o: Mapping[str, str]) -> StreamLimits:
    mx = _count(o.get("maxoffsetspertrigger"), "maxOffsetsPerTrigger") or None
    mn = _count(o.get("minoffsetspertrigger"), "minOffsetsPerTrigger") or None
    if mx is not None and mn is not None and mn > mx:
        raise InvalidConfigError(
            f"strata: The value of minOffsetPerTrigger({mn}) is higher than the maxOffsetsPerTrigger({mx})."
        )
    delay = o.get("maxtriggerdelay")
    ms = DEFAULT_MAX_TRIGGER_DELAY_MS if delay is None else _duration_ms(delay, "maxTriggerDelay")
    return StreamLimits(mx, mn, ms)


_DURATION: Final = re.compile(r"(\d+)\s*(ms|s|m|min|h|d)?", re.IGNORECASE)
_DURATION_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(text: str, name: str) -> int:
    """Spark's time strings (``timeStringAsMs``): 500ms, 10s, 15m, 1h, 1d; no unit: ms."""
    m = _DURATION.fullmatch(str(text).strip())
    if m is None:
        raise InvalidConfigError(f"strata: option {name}: {text!r} is not a duration like 30s or 15m")
    return int(m[1]) * _DURATION_MS[(m[2] or "ms").lower()]


def _partitions(text: str | None) -> frozenset[int] | None:
    if text is None or not text.strip():
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise InvalidConfigError(f"strata: option partitions: {part!r} is not a partition number")
        out.add(int(part))
    return frozenset(out)


def _bool(text: str, name: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no", ""):
        return False
    raise InvalidConfigError(f"strata: option {name} must be true or false, got {text!r}")


def _size(text: str | None, name: str, default: int) -> int:
    if text is None or not str(text).strip():
        return default
    m = _SIZE.fullmatch(str(text).strip())
    if m is None:
        raise InvalidConfigError(f"strata: option {name}: {text!r} is not a size like 67108864 or 64m")
    return int(m[1]) * _UNITS[m[2].lower()]


def _count(text: str | None, name: str) -> int:
    if text is None or not str(text).strip():
        return 0
    t = str(text).strip()
    if not t.isdigit() or int(t) < 1:
        raise InvalidConfigError(f"strata: option {name} must be a positive integer, got {text!r}")
    return int(t)


def _first_server(text: str | None) -> str | None:
    if not text:
        return None
    return text.split(",")[0].strip() or None


def _timestamp(text: str, name: str) -> int:
    try:
        ts = int(str(text).strip())
    except ValueError:
        raise InvalidConfigError(
            f"strata: option {name} must be milliseconds since the epoch, got {text!r}"
        ) from None
    if ts < 0:
        raise InvalidConfigError(f"strata: option {name} must not be negative, got {ts}")
    return ts


def parse_partition_json(text: str, name: str) -> dict[TopicPartition, int]:
    """Spark's Kafka JSON ``{"topic": {"0": 23, "1": -1}}`` as {(topic, partition): value}."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise InvalidConfigError(
            f'strata: option {name}: expected "earliest", "latest" or JSON like '
            f'{{"topic":{{"0":23}}}}, got {text!r}'
        ) from None
    if not isinstance(doc, dict):
        raise InvalidConfigError(f'strata: option {name}: expected a JSON object like {{"topic":{{"0":23}}}}')
    out: dict[TopicPartition, int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise InvalidConfigError(
                f"strata: option {name}: the value of topic {topic!r} must be a JSON object"
            )
        for p, v in parts.items():
            if not (isinstance(p, str) and p.isdigit()):
                raise InvalidConfigError(f"strata: option {name}: {p!r} is not a partition number")
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidConfigError(f"strata: option {name}: {topic}-{p}: {v!r} is not an integer")
            out[(topic, int(p))] = v
    return out


def _bound(o: Mapping[str, str], prefix: str, default: int, streaming: bool = False) -> Bound:
    opt = f"{prefix}Offsets"
    raw = o.get(f"{prefix}offsets")
    offsets: dict[TopicPartition, int] = {}
    if raw is not None and raw.strip():
        word = raw.strip().lower()
        if word in ("earliest", "latest"):
            default = EARLIEST if word == "earliest" else LATEST
            if (word == "latest") == (prefix == "starting") and not streaming:
                raise InvalidConfigError(f"strata: {prefix} offset can't be {word} for batch queries")
        else:
            offsets = parse_partition_json(raw, opt)
            for tp, off in offsets.items():
                if off < LATEST and off != EARLIEST:
                    raise InvalidConfigError(
                        f"strata: option {opt}: {tp[0]}-{tp[1]}: offset {off} is not valid"
                    )
    by_ts: dict[TopicPartition, int] = {}
    raw_ts = o.get(f"{prefix}offsetsbytimestamp")
    if raw_ts is not None and raw_ts.strip():
        by_ts = parse_partition_json(raw_ts, f"{prefix}OffsetsByTimestamp")
        for tp, ts in by_ts.items():
            if ts < 0:
                raise InvalidConfigError(
                    f"strata: option {prefix}OffsetsByTimestamp: {tp[0]}-{tp[1]}: timestamp {ts} is negative"
                )
    ts_all = o.get(f"{prefix}timestamp")
    timestamp = _timestamp(ts_all, f"{prefix}Timestamp") if ts_all is not None and ts_all.strip() else None
    return Bound(default=default, offsets=offsets, timestamps=by_ts, timestamp=timestamp)


def _validate_topic_name(name: str) -> None:
    """Kafka's topic name rules (``hot.topics``), imported when a name is checked: that
    module brings the log's modules, which a stream source's process never needs."""
    from hot.topics import validate_topic_name

    validate_topic_name(name)
