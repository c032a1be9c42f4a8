"""The catalog Iceberg topics are committed to, and pyiceberg's way into the bucket.

Embedded (default): pyiceberg's SqlCatalog on SQLite under the data directory. The bucket
stays the truth: ``sync_from_bucket`` points the catalog at the newest metadata file the
table's location holds before every pass, so `strata restore` onto an empty data
directory, or a committer that moved to another broker, resumes from what the bucket has
(chosen over a catalog kept only in the bucket: pyiceberg ships no such catalog, and every
engine can still read the table by its metadata file's path). REST: any Iceberg REST
catalog (tiering.iceberg_config).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError

from tiering.iceberg_config import CATALOG_REST, IcebergConfig
from tiering.store import SyncObjectStore

_METADATA_NAME: Final = re.compile(r"(\d+)-[0-9a-f-]+\.metadata\.json")


def fileio_properties(store_url: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What pyiceberg's PyArrow FileIO needs to reach the store Strata uses (the AWS chain
    the broker's S3 client reads)."""
    env = os.environ if env is None else env
    if not store_url.startswith(("s3://", "s3a://")):
        return {}
    props = {
        "s3.endpoint": env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"),
        "s3.access-key-id": env.get("AWS_ACCESS_KEY_ID"),
        "s3.secret-access-key": env.get("AWS_SECRET_ACCESS_KEY"),
        "s3.session-token": env.get("AWS_SESSION_TOKEN"),
        "s3.region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
    }
    return {k: v for k, v in props.items() if v}


def catalog_properties(config: IcebergConfig, data_dir: Path, store_url: str) -> dict[str, str]:
    """The catalog as the properties ``pyiceberg.catalog.load_catalog`` takes (also what
    ``strata iceberg status`` prints, secrets left out there)."""
    props = fileio_properties(store_url)
    if config.catalog == CATALOG_REST:
        assert config.uri is not None
        props.update({"type": "rest", "uri": config.uri})
        if config.credential:
            props["credential"] = config.credential
        if config.token:
            props["token"] = config.token
        if config.warehouse:
            props["warehouse"] = config.warehouse
        return props
    path = (data_dir / "iceberg" / "catalog.db").resolve()
    # the committer writes through Strata's object-store seam (spark.iceberg.fileio)
    props.update({"py-io-impl": "spark.iceberg.fileio.StoreFileIO", "strata.store-url": store_url})
    props.update({"type": "sql", "uri": f"sqlite:///{path}", "warehouse": f"{store_url.rstrip('/')}/iceberg"})
    return props


def open_catalog(props: Mapping[str, str]) -> Catalog:
    if props.get("type") == "sql":
        Path(props["uri"].removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return load_catalog("strata", **dict(props))


def public_properties(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` without secrets (status output)."""
    hidden = ("credential", "token", "s3.secret-access-key", "s3.session-token")
    internal = ("py-io-impl", "strata.store-url")  # other readers use their own FileIO
    return {k: ("***" if k in hidden else v) for k, v in props.items() if k not in internal}


def object_url(store: SyncObjectStore, key: str) -> str:
    """The URL engines (and pyiceberg's FileIO) know an object of the store by."""
    return f"{store.url.rstrip('/')}/{key}"


def newest_metadata(store: SyncObjectStore, table_root: str) -> tuple[int, str] | None:
    """(version, key) of the highest-numbered metadata file under the table's location."""
    best: tuple[int, str] | None = None
    for info in store.list(f"{table_root}/metadata/"):
        m = _METADATA_NAME.fullmatch(info.key.rsplit("/", 1)[-1])
        if m is not None and (best is None or int(m[1]) > best[0]):
            best = (int(m[1]), info.key)
    return best


def metadata_version(location: str) -> int:
    m = _METADATA_NAME.fullmatch(location.rsplit("/", 1)[-1])
    return int(m[1]) if m else -1


def sync_from_bucket(catalog: Catalog, identifier: tuple[str, str], store: SyncObjectStore, root: str) -> Any:
    """The table, with the catalog pointed at the bucket's newest metadata file when it is
    behind (restore, a new committer) or does not know the table; None when neither has it.

    A metadata file written by a commit that crashed before the catalog took it is newer
    than the catalog's pointer too: taking it is still exactly once, since its snapshot
    holds that commit's data files and its offsets together."""
    newest = newest_metadata(store, root)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        table = None
    if newest is None:
        return table
    if table is not None and table.metadata.location.rstrip("/") != object_url(store, root):
        return table  # another topic's (a deleted one's kept table): the caller moves it aside
    if table is not None and metadata_version(table.metadata_location) >= newest[0]:
        return table
    if table is not None:
        catalog.drop_table(identifier)  # the SQL catalog forgets the pointer; no file is removed
    namespace = identifier[0]
    catalog.create_namespace_if_not_exists(namespace)
    return catalog.register_table(identifier, object_url(store, newest[1]))
