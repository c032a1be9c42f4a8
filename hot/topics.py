"""The registry of topics: names, partition counts, config overrides, topic ids.

File ``<meta_dir>/topics.json``, UTF-8 JSON, replaced atomically on every change
(``topics.json.tmp``, fsync, rename, fsync the directory), so after a crash it holds
either the old or the new registry, never a mix::

    {"version": 1,
     "topics": {"<name>": {"partitions": 3,
                           "configs": {"retention.ms": "3600000"},
                           "topic_id": "6f1c...-uuid4"}}}
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hot.config import LogConfig
from hot.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.log import atomic_write

TOPICS_FILE: Final = "topics.json"
FORMAT_VERSION: Final = 1
MAX_TOPIC_NAME_LENGTH: Final = 249
MAX_PARTITIONS: Final = 10000

_LEGAL_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's rules (Topic.validate); InvalidTopicError says which one is broken."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters long; the maximum is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' and '-' are allowed"
        )


def _collision_key(name: str) -> str:
    # Kafka refuses topics that differ only in '.' vs '_' (their metric names collide).
    return name.replace(".", "_")


def check_topic_collision(name: str, existing: Iterable[str]) -> None:
    """InvalidTopicError if a new topic ``name`` differs from one of ``existing`` only in
    '.' versus '_' (Kafka's Topic.hasCollision; its metric names would be the same)."""
    key = _collision_key(name)
    for other in existing:
        if other != name and _collision_key(other) == key:
            raise InvalidTopicError(f"topic {name!r} collides with existing topic {other!r}")


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # overrides only
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)

    def to_json(self) -> dict[str, Any]:
        return {"partitions": self.partitions, "configs": dict(self.configs), "topic_id": str(self.topic_id)}


class TopicRegistry:
    """Thread-safe, persisted map of topics.

    File ``topics.json`` (format in the module docstring), replaced atomically on every
    change: after a crash it is the old or the new version, never a mix; a leftover
    ``topics.json.tmp`` is ignored and overwritten.

    ``defaults`` is the broker-wide LogConfig that topic overrides apply to; configs are
    validated against it (LogConfig.from_kafka: unknown names and bad values are
    InvalidConfigError).
    """

    def __init__(self, path: Path, *, defaults: LogConfig | None = None) -> None:
        self.path = Path(path)
        self.defaults = defaults if defaults is not None else LogConfig()
        self._lock = threading.Lock()
        self._topics: dict[str, TopicInfo] = self._load()

    @property
    def exists_on_disk(self) -> bool:
        return self.path.exists()

    def _load(self) -> dict[str, TopicInfo]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise StorageError(f"cannot read {self.path}: {e}") from e
        try:
            doc = json.loads(raw)
            if doc.get("version") != FORMAT_VERSION:
                raise ValueError(f"unsupported version {doc.get('version')!r}")
            topics: dict[str, TopicInfo] = {}
            for name, t in doc["topics"].items():
                configs = {str(k): str(v) for k, v in t.get("configs", {}).items()}
                topics[name] = TopicInfo(
                    name=name,
                    partitions=int(t["partitions"]),
                    configs=configs,
                    topic_id=uuid.UUID(t["topic_id"]),
                )
            return topics
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StorageError(f"topic registry {self.path} is unreadable: {e}") from e

    def _save(self, topics: dict[str, TopicInfo]) -> None:
        doc = {"version": FORMAT_VERSION, "topics": {n: t.to_json() for n, t in sorted(topics.items())}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create {self.path.parent}: {e}") from e
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())
        self._topics = topics

    def save(self) -> None:
        """Write the registry even if unchanged (creates the file)."""
        with self._lock:
            self._save(dict(self._topics))

    # --- queries -------------------------------------------------------------------------

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def list(self) -> list[TopicInfo]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __len__(self) -> int:
        return len(self._topics)

    def config(self, name: str) -> LogConfig:
        t = self._require(name)
        return LogConfig.from_kafka(t.configs, self.defaults)

    def _require(self, name: str) -> TopicInfo:
        t = self._topics.get(name)
        if t is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return t

    # --- changes ---------------------------------------------------------------------------

    @staticmethod
    def _check_partitions(n: object) -> int:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"number of partitions must be in [1, {MAX_PARTITIONS}], got {n!r}")
        return n

    def validate_create(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> None:
        """Everything ``create`` checks, without creating (CreateTopics validateOnly)."""
        validate_topic_name(name)
        self._check_partitions(partitions)
        LogConfig.from_kafka(dict(configs or {}), self.defaults)
        if name in self._topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        check_topic_collision(name, self._topics)

    def create(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        """Register a topic; ``topic_id`` keeps a known id (restore), else a fresh one."""
        with self._lock:
            self.validate_create(name, partitions, configs)
            info = TopicInfo(name, partitions, dict(configs or {}), topic_id or uuid.uuid4())
            topics = dict(self._topics)
            topics[name] = info
            self._save(topics)
            return info

    def delete(self, name: str) -> TopicInfo:
        with self._lock:
            info = self._require(name)
            topics = dict(self._topics)
            del topics[name]
            self._save(topics)
            return info

    def alter_configs(
        self, name: str, configs: Mapping[str, str | None], *, replace: bool = False
    ) -> TopicInfo:
        """Set overrides (a None value removes one, i.e. back to the default); with
        ``replace`` the given map becomes the whole override set (Kafka AlterConfigs)."""
        with self._lock:
            info = self._require(name)
            merged = {} if replace else dict(info.configs)
            for k, v in configs.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            LogConfig.from_kafka(merged, self.defaults)
            new = TopicInfo(info.name, info.partitions, merged, info.topic_id)
            topics = dict(self._topics)
            topics[name] = new
            self._save(topics)
            return new

    def add_partitions(self, name: str, new_total: int) -> TopicInfo:
        """Grow a topic to ``new_total`` partitions (Kafka CreatePartitions; never shrinks)."""
        with self._lock:
            self.validate_add_partitions(name, new_total)
            info = self._require(name)
            new = TopicInfo(info.name, new_total, dict(info.configs), info.topic_id)
            topics = dict(self._topics)
            topics[name] = new
            self._save(topics)
            return new

    def validate_add_partitions(self, name: str, new_total: int) -> None:
        """Everything ``add_partitions`` checks, without changing the topic."""
        info = self._require(name)
        self._check_partitions(new_total)
        if new_total <= info.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {info.partitions} partitions; the new total {new_total} must be larger"
            )

    def names(self) -> Iterable[str]:
        return list(self._topics)
