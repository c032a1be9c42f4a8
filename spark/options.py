"""Options of the ``strata`` data source (and of ``strata export``), parsed and validated. Pure.

Option names are case-insensitive, as in every Spark data source::

    path / load(URL)              object store URL the brokers use: s3://bucket/prefix or file:///dir
    topic                         topic name, or several separated by commas (alias: subscribe)
    partitions                    optional: partition numbers to read, e.g. "0,2,5"
    startingOffsets               "earliest" (default) or JSON {"topic":{"0":100,"1":-2}}
    endingOffsets                 "latest" (default) or JSON {"topic":{"0":200,"1":-1}}; exclusive
    startingTimestamp             ms since the epoch, for every partition (wins over the above)
    endingTimestamp               likewise for the end
    startingOffsetsByTimestamp    JSON {"topic":{"0":1700000000000}}
    endingOffsetsByTimestamp      likewise for the end
    includeHot                    "true": also read the not-yet-tiered tail through a broker
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

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from api.client.security import ClientSecurity
from hot.errors import InvalidConfigError
from hot.topics import validate_topic_name

EARLIEST: Final = -2
LATEST: Final = -1
DEFAULT_MAX_PARTITION_BYTES: Final = 128 << 20  # spark.sql.files.maxPartitionBytes
DEFAULT_READ_CHUNK_BYTES: Final = 8 << 20
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

    @classmethod
    def parse(cls, options: Mapping[str, str], *, path: str | None = None) -> ReadOptions:
        """Validate Spark-style options; InvalidConfigError names the option at fault."""
        o = {str(k).lower(): v for k, v in options.items() if v is not None}
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
        topics = _topics(o.get("topic") or o.get("subscribe") or "")
        start = _bound(o, "starting", EARLIEST)
        end = _bound(o, "ending", LATEST)
        for tp, off in start.offsets.items():
            if off == LATEST:
                raise InvalidConfigError(
                    f"startingOffsets for {tp[0]}-{tp[1]} can't be latest for batch queries"
                )
        for tp, off in end.offsets.items():
            if off == EARLIEST:
                raise InvalidConfigError(
                    f"endingOffsets for {tp[0]}-{tp[1]} can't be earliest for batch queries"
                )
        for b, name in ((start, "starting"), (end, "ending")):
            unknown = sorted({t for t, _ in b.named_partitions()} - set(topics))
            if unknown:
                raise InvalidConfigError(f"{name} offsets name topic(s) not being read: {', '.join(unknown)}")
        include_hot = _bool(o.get("includehot", "false"), "includeHot")
        broker = o.get("broker") or _first_server(o.get("kafka.bootstrap.servers"))
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
            partitions=_partitions(o.get("partitions")),
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
        )


# option (lower case) -> client property (api.client.security)
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


def _topics(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not names:
        raise InvalidConfigError(
            'strata: option "topic" is required (a topic name, or several separated by commas)'
        )
    for n in names:
        try:
            validate_topic_name(n)
        except Exception as e:
            raise InvalidConfigError(f"strata: option topic: {e}") from None
    return names


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


def _bound(o: Mapping[str, str], prefix: str, default: int) -> Bound:
    opt = f"{prefix}Offsets"
    raw = o.get(f"{prefix}offsets")
    offsets: dict[TopicPartition, int] = {}
    if raw is not None and raw.strip():
        word = raw.strip().lower()
        if word in ("earliest", "latest"):
            if (word == "latest") == (prefix == "starting"):
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
