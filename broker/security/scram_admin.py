"""SCRAM users through the Kafka protocol (KIP-554: DescribeUserScramCredentials and
AlterUserScramCredentials, as ``kafka-configs.sh --alter --add-config SCRAM-SHA-256=...``
and admin clients send them), on the users document of the metadata store
(``broker.security.stored``; the same one ``strata users`` edits and SASL checks).

Validation as Kafka's controller does it, each user answered on its own:

* a user named more than once in one request: DUPLICATE_RESOURCE, nothing of it changed;
* an empty user name, fewer than 4,096 or more than 16,384 iterations: UNACCEPTABLE_CREDENTIAL;
* a mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2): UNSUPPORTED_SASL_MECHANISM;
* deleting or describing a credential that does not exist: RESOURCE_NOT_FOUND.

An upsertion brings the client's salt and SaltedPassword; the stored and server keys are
derived from them (RFC 5802), so the password never reaches the broker. The valid changes
of a request are written in one compare-and-swap of the document.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from broker.security.stored import StoredUsers
from broker.security.users import UserTable
from hot.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    StrataError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from kclient.scram import HASHES, MIN_ITERATIONS, ScramCredential

MAX_ITERATIONS: Final = 16384  # Kafka's upper bound
_TWICE: Final = "A user credential cannot be altered twice in the same request"
_MISSING: Final = "Attempt to {} a user credential that does not exist"
MECHANISMS: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS: Final = {name: i for i, name in MECHANISMS.items()}


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def credential_from_salted(mechanism: str, upsert: Upsertion) -> ScramCredential:
    """The stored credential for a client's SaltedPassword (RFC 5802's StoredKey, ServerKey)."""
    h = HASHES[mechanism]
    client_key = hmac.digest(upsert.salted_password, b"Client Key", h)
    return ScramCredential(
        salt=upsert.salt,
        iterations=upsert.iterations,
        stored_key=hashlib.new(h, client_key).digest(),
        server_key=hmac.digest(upsert.salted_password, b"Server Key", h),
    )


def _mechanism(code: int) -> str:
    name = MECHANISMS.get(code)
    if name is None:
        raise UnsupportedSaslMechanismError(f"Unknown SCRAM mechanism {code}")
    return name


def _check_upsertion(u: Upsertion) -> None:
    _mechanism(u.mechanism)
    if u.iterations < MIN_ITERATIONS:
        raise UnacceptableCredentialError(f"Too few iterations: {u.iterations} (at least {MIN_ITERATIONS})")
    if u.iterations > MAX_ITERATIONS:
        raise UnacceptableCredentialError(f"Too many iterations: {u.iterations} (at most {MAX_ITERATIONS})")
    if not u.salt or not u.salted_password:
        raise UnacceptableCredentialError("the salt and the salted password must not be empty")


async def alter(
    users: StoredUsers, deletions: Sequence[tuple[str, int]], upsertions: Sequence[Upsertion]
) -> dict[str, StrataError | None]:
    """Apply the request's changes (module docstring): the error of each user named, None
    for those changed."""
    named = Counter([u for u, _ in deletions] + [u.user for u in upsertions])
    out: dict[str, StrataError | None] = {}
    for user, n in named.items():
        if not user:
            out[user] = UnacceptableCredentialError("Username must not be empty")
        elif n > 1:
            out[user] = DuplicateResourceError(_TWICE)
    dels = [(u, m) for u, m in deletions if u not in out]
    ups = [u for u in upsertions if u.user not in out]
    for user, mech in dels:
        try:
            _mechanism(mech)
        except StrataError as exc:
            out[user] = exc
    for up in ups:
        try:
            _check_upsertion(up)
        except StrataError as exc:
            out[up.user] = exc
    dels = [(u, m) for u, m in dels if u not in out]
    ups = [u for u in ups if u.user not in out]

    def change(old: bytes | None) -> bytes:
        table = UserTable()
        table.load_document(old, "stored users")
        for user, mech in dels:
            if table.remove_credential(user, MECHANISMS[mech]):
                out[user] = None
            else:
                out[user] = ResourceNotFoundError(_MISSING.format("delete"))
        for up in ups:
            name = MECHANISMS[up.mechanism]
            table.put_credential(up.user, name, credential_from_salted(name, up))
            out[up.user] = None
        return table.document()

    if dels or ups:
        await users.docs.update(users.key, change)
    return {user: out.get(user) for user in named}


Described = list[tuple[str, list[tuple[int, int]] | StrataError]]


def describe(users: UserTable, names: Sequence[str] | None) -> Described:
    """Each user's (mechanism, iterations) pairs, or its error; every user when ``names`` is
    None or empty."""
    if not names:
        names = users.names()
    counts = Counter(names)
    out: Described = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            out.append(
                (name, DuplicateResourceError("Cannot describe SCRAM credentials for the same user twice"))
            )
            continue
        infos = []
        for mech in users.mechanisms(name):
            cred = users.credential(name, mech)
            if cred is not None and mech in MECHANISM_IDS:
                infos.append((MECHANISM_IDS[mech], cred.iterations))
        if not infos:
            out.append((name, ResourceNotFoundError(_MISSING.format("describe"))))
        else:
            out.append((name, infos))
    return out
