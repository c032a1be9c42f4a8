"""Broker-level Iceberg settings (``[iceberg]`` in the broker's TOML, ``STRATA_ICEBERG_*``).

Topic-level settings (``iceberg.mode``, ``iceberg.target.lag.ms``, ...) live in
``hot.config.LogConfig``; these name the catalog every Iceberg topic of the broker is
committed to (docs/iceberg.md):

- ``catalog = "embedded"`` (default): pyiceberg's SQL catalog on SQLite in
  ``<data_dir>/iceberg/catalog.db``. It is only a cache of the pointer to the table's
  current metadata file: the committer re-reads the newest ``metadata/*.metadata.json`` in
  the bucket before each pass, so a restore from the bucket, a lost data directory or a
  committer moving to another broker picks the table up where the bucket has it.
- ``catalog = "rest"``: any Iceberg REST catalog at ``uri``, with ``credential``
  (client_id:secret, OAuth2 client credentials) or ``token``, and ``warehouse``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from hot.errors import InvalidConfigError

CATALOG_EMBEDDED: Final = "embedded"
CATALOG_REST: Final = "rest"


@dataclass(frozen=True, slots=True)
class IcebergConfig:
    catalog: str = CATALOG_EMBEDDED
    uri: str | None = None  # REST catalog URL
    credential: str | None = None  # OAuth2 client_id:client_secret
    token: str | None = None  # bearer token
    warehouse: str | None = None
    namespace: str = "strata"  # tables are <namespace>.<topic>
    # How often each Iceberg topic is looked at; a table is committed once its lag nears
    # iceberg.target.lag.ms (half of it elapsed since the last commit).
    check_interval_ms: int = 1000
    # Maintenance (docs/iceberg.md): snapshots older than this are expired, checked this often.
    snapshot_max_age_ms: int = 86_400_000
    maintenance_interval_ms: int = 3_600_000

    def __post_init__(self) -> None:
        if self.catalog not in (CATALOG_EMBEDDED, CATALOG_REST):
            raise InvalidConfigError(f"iceberg catalog must be embedded or rest, got {self.catalog!r}")
        if self.catalog == CATALOG_REST and not self.uri:
            raise InvalidConfigError("iceberg catalog = rest needs uri (the REST catalog's URL)")
        if not self.namespace or "." in self.namespace:
            raise InvalidConfigError(f"iceberg namespace must be one non-empty level, got {self.namespace!r}")
        for name in _INT_FIELDS:
            if getattr(self, name) < 1:
                raise InvalidConfigError(f"iceberg {name} must be at least 1, got {getattr(self, name)}")

    def __repr__(self) -> str:  # the credential and token stay out of logs
        return f"IcebergConfig(catalog={self.catalog!r}, uri={self.uri!r}, namespace={self.namespace!r})"

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> IcebergConfig:
        changes: dict[str, object] = {}
        for name, raw in values.items():
            if name not in FIELDS:
                raise InvalidConfigError(f"unknown iceberg setting {name!r} (known: {', '.join(FIELDS)})")
            if name in _INT_FIELDS:
                try:
                    changes[name] = int(str(raw))
                except ValueError:
                    raise InvalidConfigError(f"iceberg {name}: expected an integer, got {raw!r}") from None
            else:
                changes[name] = str(raw)
        return dataclasses.replace(cls(), **changes)  # type: ignore[arg-type]


FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in dataclasses.fields(IcebergConfig))
_INT_FIELDS: Final = ("check_interval_ms", "snapshot_max_age_ms", "maintenance_interval_ms")
