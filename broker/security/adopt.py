"""The upgrade of a single node's security files into its embedded metadata store.

Before the single node kept its ACLs, SASL users and runtime quotas in the embedded store
(broker.security.stored), they lived in three files of ``<data_dir>/meta``: ``acls.json``,
``users.json`` and ``quotas.json``, each holding exactly the document the store's key now
holds. ``adopt_security_files`` moves them in, once, when a broker starts on such a data
dir (or ``strata users --data-dir`` opens its store), as ``ClusterNode.adopt_local_topics``
adopts the topics:

1. the file is read and validated (a malformed file stops the start with an error naming
   it: dropping it could open the cluster to everyone, with
   ``allow_everyone_if_no_acl_found``);
2. its bytes are written to the key only if the store has no such key (a transaction
   guarded by ``Compare.absent``): a store's value is never replaced by an older file;
3. the file is renamed to ``<name>.adopted`` (``os.replace``, then an fsync of the
   directory) and its leftover temp file, if any, removed.

Crash behaviour: a crash before 2 leaves the file; before 3, the file and the key: the next
start finds the key present, writes nothing and renames. So the step is idempotent and
nothing acknowledged is lost; the ``.adopted`` files stay as the record of what was adopted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from broker.keys import KeyLayout
from broker.metadata_store import Compare, MetadataStore, Put
from broker.security.acl_store import decode_acls
from broker.security.quotas import QuotaTable
from broker.security.users import UserTable
from core import disk
from hot.errors import InvalidConfigError, StorageError

log = logging.getLogger("strata.security.adopt")

ADOPTED_SUFFIX: Final = ".adopted"
ACLS_FILE: Final = "acls.json"
USERS_FILE: Final = "users.json"
QUOTAS_FILE: Final = "quotas.json"
LEGACY_FILES: Final = (ACLS_FILE, USERS_FILE, QUOTAS_FILE)


def _check_acls(data: bytes, where: str) -> None:
    decode_acls(data, where)


def _check_users(data: bytes, where: str) -> None:
    UserTable().load_document(data, where)


def _check_quotas(data: bytes, where: str) -> None:
    try:
        doc = json.loads(data)
    except ValueError:
        raise InvalidConfigError(f"{where} is not valid JSON") from None
    QuotaTable.from_json(doc, where)


def _targets(layout: KeyLayout) -> list[tuple[str, bytes, Callable[[bytes, str], None]]]:
    return [
        (ACLS_FILE, layout.acls, _check_acls),
        (USERS_FILE, layout.users, _check_users),
        (QUOTAS_FILE, layout.quotas, _check_quotas),
    ]


def legacy_files(meta_dir: Path) -> list[Path]:
    """The security files of ``meta_dir`` still waiting to be adopted."""
    return [meta_dir / name for name in LEGACY_FILES if (meta_dir / name).is_file()]


async def adopt_security_files(store: MetadataStore, layout: KeyLayout, meta_dir: Path) -> list[str]:
    """Adopt ``meta_dir``'s security files into ``store`` (module docstring); the names adopted."""
    adopted: list[str] = []
    for name, key, check in _targets(layout):
        path = meta_dir / name
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror}") from None
        check(data, str(path))
        result = await store.txn([Compare.absent(key)], [Put(key, data)])
        if not result.succeeded:
            kv = await store.get(key)
            if kv is not None and kv.value != data:
                log.warning("%s: the metadata store already holds %s; keeping the store's", path, name)
        await asyncio.to_thread(_set_aside, path)
        adopted.append(name)
        log.info("adopted %s into the metadata store (the file is now %s%s)", path, name, ADOPTED_SUFFIX)
    return adopted


def _set_aside(path: Path) -> None:
    try:
        os.replace(path, path.with_name(path.name + ADOPTED_SUFFIX))
        disk.unlink_missing_ok(disk.temp_path(path))
        disk.fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot rename {path} after adopting it: {exc.strerror}") from None
