"""Client quotas per user principal: byte rates for produce and fetch (Kafka KIP-13/KIP-219).

Configuration, the broker TOML's ``[quotas]`` table (unset rate = unlimited)::

    [quotas]
    producer_byte_rate = 10485760     # default for every user, bytes/s
    consumer_byte_rate = 20971520
    window_num = 11                   # samples of the rate window (Kafka quota.window.num)
    window_size_ms = 1000             # one sample's span (Kafka quota.window.size.seconds)
    [quotas.users.alice]              # per-user overrides
    producer_byte_rate = 1048576

Runtime quotas (AlterClientQuotas, ``kafka-configs --alter --entity-type users``) are kept
in the metadata store (broker.security.stored: etcd, or a single node's embedded store).
The effective quota of user U for a key is the first set of: runtime U, TOML U, runtime
default user, TOML default. Unauthenticated clients are the user ``ANONYMOUS``; with
mutual TLS the certificate's subject is the user name.

Measurement, per user per broker: a rate over ``window_num`` samples of ``window_size_ms``
each. Over the quota, the throttle time is the time that brings the rate back to it,
Kafka's ``(observed - quota) / quota * window``, capped at the whole window span. Unlike Kafka,
which counts a young window as ``window_num - 1`` samples long (a ten second burst at full
speed before the first throttle), the window here counts as at least one sample: a
burst of one second's quota.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from hot.errors import InvalidConfigError, InvalidRequestError

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
QUOTA_KEYS: Final = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)
ANONYMOUS: Final = "ANONYMOUS"
CONFIG_KEYS: Final = (*QUOTA_KEYS, "window_num", "window_size_ms", "users")

# A user's quotas: key -> bytes/s.
Quotas = Mapping[str, float]


def _rate(value: object, setting: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidConfigError(f"{setting}: expected bytes per second, got {value!r}")
    try:
        rate = float(value)
    except ValueError:
        raise InvalidConfigError(f"{setting}: expected bytes per second, got {value!r}") from None
    if not math.isfinite(rate) or rate <= 0:
        raise InvalidConfigError(f"{setting}: must be a positive number of bytes per second, got {value!r}")
    return rate


def _rates(values: Mapping[str, object], where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in values.items():
        if k not in QUOTA_KEYS:
            raise InvalidConfigError(f"unknown quota {where}.{k} (known: {', '.join(QUOTA_KEYS)})")
        out[k] = _rate(v, f"{where}.{k}")
    return out


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    defaults: Quotas = field(default_factory=dict)
    users: Mapping[str, Quotas] = field(default_factory=dict)
    window_num: int = 11
    window_size_ms: int = 1000

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> QuotaConfig:
        for k in values:
            if k not in CONFIG_KEYS:
                raise InvalidConfigError(f"unknown quotas setting {k!r} (known: {', '.join(CONFIG_KEYS)})")
        defaults = _rates({k: v for k, v in values.items() if k in QUOTA_KEYS}, "quotas")
        users: dict[str, dict[str, float]] = {}
        raw_users = values.get("users", {})
        if not isinstance(raw_users, Mapping):
            raise InvalidConfigError("quotas.users must be a table of users")
        for name, q in raw_users.items():
            if not isinstance(q, Mapping):
                raise InvalidConfigError(f"quotas.users.{name} must be a table")
            users[str(name)] = _rates(q, f"quotas.users.{name}")
        window: dict[str, int] = {}
        for k, default, lo in (("window_num", 11, 2), ("window_size_ms", 1000, 10)):
            v = values.get(k, default)
            try:
                n = int(str(v))
            except ValueError:
                raise InvalidConfigError(f"quotas.{k}: expected an integer, got {v!r}") from None
            if n < lo:
                raise InvalidConfigError(f"quotas.{k}: must be at least {lo}, got {n}")
            window[k] = n
        return cls(defaults, users, **window)


class WindowedRate:
    """Bytes per second over the last ``samples`` windows of ``window`` seconds each."""

    def __init__(self, samples: int, window: float) -> None:
        self.samples = samples
        self.window = window
        self._buckets: deque[list[float]] = deque()  # [start, bytes], oldest first

    def _purge(self, now: float) -> None:
        horizon = now - self.samples * self.window
        while self._buckets and self._buckets[0][0] + self.window <= horizon:
            self._buckets.popleft()

    def record(self, amount: float, now: float) -> None:
        self._purge(now)
        if not self._buckets or now >= self._buckets[-1][0] + self.window:
            self._buckets.append([now, 0.0])
        self._buckets[-1][1] += amount

    def rate(self, now: float) -> float:
        """Bytes/s since the oldest sample began, counted as at least one window long."""
        self._purge(now)
        if not self._buckets:
            return 0.0
        elapsed = now - self._buckets[0][0]
        return sum(b[1] for b in self._buckets) / max(elapsed, self.window)

    def throttle_seconds(self, quota: float, now: float) -> float:
        """How long to hold the client for the rate to fall back to ``quota`` (0: not over).

        Kafka's ``(observed - quota) / quota * window`` with the window as long as it
        really is: ``bytes / quota - elapsed``. Capped at the whole window span.
        """
        if self.rate(now) <= quota:
            return 0.0
        elapsed = now - self._buckets[0][0]
        total = sum(b[1] for b in self._buckets)
        return min(total / quota - elapsed, self.samples * self.window)


@dataclass(frozen=True, slots=True)
class QuotaTable:
    """Runtime quotas: the default user entity and named users."""

    default: Quotas = field(default_factory=dict)
    users: Mapping[str, Quotas] = field(default_factory=dict)

    def entities(self) -> list[tuple[str | None, Quotas]]:
        out: list[tuple[str | None, Quotas]] = [(None, self.default)] if self.default else []
        return out + [(u, q) for u, q in sorted(self.users.items()) if q]

    def altered(self, changes: Iterable[tuple[str | None, str, float | None]]) -> QuotaTable:
        """A copy with ``(user or None for the default, key, rate or None to remove)`` applied."""
        default = dict(self.default)
        users = {u: dict(q) for u, q in self.users.items()}
        for user, key, value in changes:
            if key not in QUOTA_KEYS:
                raise InvalidRequestError(f"unsupported quota {key!r} (supported: {', '.join(QUOTA_KEYS)})")
            target = default if user is None else users.setdefault(user, {})
            if value is None:
                target.pop(key, None)
            else:
                if not math.isfinite(value) or value <= 0:
                    raise InvalidRequestError(f"{key} must be a positive byte rate, got {value}")
                target[key] = value
        return QuotaTable(default, {u: q for u, q in users.items() if q})

    def to_json(self) -> dict[str, Any]:
        users = {u: dict(q) for u, q in self.users.items()}
        return {"version": 1, "default": dict(self.default), "users": users}

    @classmethod
    def from_json(cls, doc: object, where: str) -> QuotaTable:
        if not isinstance(doc, dict) or doc.get("version") != 1:
            raise InvalidConfigError(f"{where}: expected {{'version': 1, 'default': ..., 'users': ...}}")
        default, users = doc.get("default", {}), doc.get("users", {})
        if not isinstance(default, dict) or not isinstance(users, dict):
            raise InvalidConfigError(f"{where}: 'default' and 'users' must be objects")
        return cls(
            _rates(default, where),
            {str(u): _rates(q, f"{where} user {u}") for u, q in users.items() if isinstance(q, dict)},
        )


class QuotaStore(Protocol):
    """What the QuotaManager needs of a runtime quota store (broker.security.stored)."""

    def table(self) -> QuotaTable: ...

    async def alter(self, changes: list[tuple[str | None, str, float | None]]) -> None: ...


# (user, quota key, throttle seconds): how the metrics hear of a throttle.
ThrottleListener = Callable[[str, str, float], None]


class QuotaManager:
    """Per-user produce/fetch rates of this broker and the throttle times they imply."""

    def __init__(
        self,
        config: QuotaConfig,
        store: QuotaStore | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_throttle: ThrottleListener | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.on_throttle = on_throttle
        self._rates: dict[tuple[str, str], WindowedRate] = {}

    def runtime(self) -> QuotaTable:
        """The runtime quotas (what DescribeClientQuotas shows; the TOML's are static)."""
        return self.store.table() if self.store is not None else QuotaTable()

    async def alter(self, changes: list[tuple[str | None, str, float | None]]) -> None:
        if self.store is None:
            raise InvalidRequestError("this broker keeps no runtime quotas")
        await self.store.alter(changes)

    def quota(self, user: str, key: str) -> float | None:
        table = self.runtime()
        order = (table.users.get(user), self.config.users.get(user), table.default, self.config.defaults)
        for source in order:
            if source is not None and key in source:
                return source[key]
        return None

    def _window(self, user: str, key: str) -> WindowedRate:
        rate = self._rates.get((user, key))
        if rate is None:
            rate = self._rates[(user, key)] = WindowedRate(
                self.config.window_num, self.config.window_size_ms / 1000
            )
        return rate

    def _throttle_ms(self, user: str, key: str, quota: float, now: float) -> int:
        seconds = self._window(user, key).throttle_seconds(quota, now)
        if seconds > 0 and self.on_throttle is not None:
            self.on_throttle(user, key, seconds)
        return math.ceil(seconds * 1000)

    def record(self, user: str | None, key: str, nbytes: int) -> int:
        """Count ``nbytes`` of ``user``; the throttle time (ms) that follows, 0 if within quota."""
        user = user or ANONYMOUS
        quota = self.quota(user, key)
        if quota is None:
            return 0
        now = self.clock()
        self._window(user, key).record(nbytes, now)
        return self._throttle_ms(user, key, quota, now)

    def pending(self, user: str | None, key: str) -> int:
        """The throttle time (ms) ``user`` is already owed, before any new bytes."""
        user = user or ANONYMOUS
        quota = self.quota(user, key)
        if quota is None:
            return 0
        return self._throttle_ms(user, key, quota, self.clock())
