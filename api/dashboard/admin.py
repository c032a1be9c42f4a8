"""The security page's user and quota changes.

``POST /console/api/users``          ``{"name", "mechanism", "password", "iterations"?}``:
                                     creates or replaces that user's SCRAM credential
``POST /console/api/users/delete``   ``{"name", "mechanism"}``: removes it
``POST /console/api/quotas``         ``{"user": name or null (the default user), "key":
                                     "producer_byte_rate" | "consumer_byte_rate",
                                     "value": bytes/s or null (remove)}``

The same changes and rules as Kafka's AlterUserScramCredentials (ALTER on the cluster) and
AlterClientQuotas (ALTER_CONFIGS on the cluster), on the same documents of the metadata
store (``broker.security.scram_admin``, ``QuotaManager.alter``), so they apply to every
broker as ``strata users`` / ``strata quotas`` and Kafka admin clients do. The password is
salted and hashed here (RFC 5802's SaltedPassword, a fresh random salt) and never stored
or logged; send it over HTTPS.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.rest.authz import require_cluster
from api.rest.codec import JSONBody, RestError, loads_strict, read_body
from broker.security import scram_admin
from broker.security.quotas import QUOTA_KEYS
from broker.security.stored import StoredUsers
from hot.errors import ResourceNotFoundError, StrataError
from kclient.scram import HASHES, salted_password
from kwire.acl import Operation

if TYPE_CHECKING:
    from broker.broker import Broker

DEFAULT_ITERATIONS: Final = 8192  # within Kafka's 4,096-16,384


def _object(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RestError(400, 400, "the body must be a JSON object")
    return raw


def _mechanism_id(value: Any) -> int:
    mid = scram_admin.MECHANISM_IDS.get(value) if isinstance(value, str) else None
    if mid is None:
        known = ", ".join(scram_admin.MECHANISM_IDS)
        raise RestError(400, 400, f"mechanism must be one of {known}, got {value!r}")
    return mid


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RestError(400, 400, "name must be a non-empty string")
    return value


def admin_router(broker: Broker) -> APIRouter:
    router = APIRouter(prefix="/console/api", tags=["console"], include_in_schema=False)
    limit = broker.config.max_request_bytes

    def stored_users() -> StoredUsers:
        users = broker.users
        if not isinstance(users, StoredUsers):
            raise RestError(409, 409, "this broker keeps no user store")
        return users

    async def apply(
        users: StoredUsers, deletions: list[tuple[str, int]], upserts: list[scram_admin.Upsertion], name: str
    ) -> None:
        try:
            out = await scram_admin.alter(users, deletions, upserts)
        except StrataError as exc:  # the store could not be written
            raise RestError(503, 503, f"the user store could not be written: {exc}") from None
        error = out.get(name)
        if error is not None:
            status = 404 if isinstance(error, ResourceNotFoundError) else 400
            raise RestError(status, status, str(error))

    @router.post("/users")
    async def put_user(request: Request) -> Response:
        require_cluster(broker, request, Operation.ALTER)
        body = _object(loads_strict(await read_body(request, limit)))
        name, mid = _name(body.get("name")), _mechanism_id(body.get("mechanism"))
        password = body.get("password")
        if not isinstance(password, str) or not password:
            raise RestError(400, 400, "password must be a non-empty string")
        iterations = body.get("iterations", DEFAULT_ITERATIONS)
        if isinstance(iterations, bool) or not isinstance(iterations, int):
            raise RestError(400, 400, f"iterations must be an integer, got {iterations!r}")
        mechanism = scram_admin.MECHANISMS[mid]
        salt = os.urandom(32)
        salted = salted_password(HASHES[mechanism], password, salt, iterations)
        upsert = scram_admin.Upsertion(name, mid, iterations, salt, salted)
        await apply(stored_users(), [], [upsert], name)
        return JSONBody({"user": name, "mechanism": mechanism, "iterations": iterations})

    @router.post("/users/delete")
    async def delete_user(request: Request) -> Response:
        require_cluster(broker, request, Operation.ALTER)
        body = _object(loads_strict(await read_body(request, limit)))
        name, mid = _name(body.get("name")), _mechanism_id(body.get("mechanism"))
        await apply(stored_users(), [(name, mid)], [], name)
        return JSONBody({"deleted": name, "mechanism": scram_admin.MECHANISMS[mid]})

    @router.post("/quotas")
    async def alter_quota(request: Request) -> Response:
        require_cluster(broker, request, Operation.ALTER_CONFIGS)
        body = _object(loads_strict(await read_body(request, limit)))
        user, key, value = body.get("user"), body.get("key"), body.get("value")
        if user is not None and (not isinstance(user, str) or not user):
            raise RestError(400, 400, "user must be a non-empty string, or null for the default user")
        if key not in QUOTA_KEYS:
            raise RestError(400, 400, f"key must be one of {', '.join(QUOTA_KEYS)}, got {key!r}")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if value is not None and (not number or value <= 0):
            raise RestError(400, 400, f"value must be a positive number of bytes/s, or null, got {value!r}")
        try:
            await broker.quotas.alter([(user, key, None if value is None else float(value))])
        except StrataError as exc:
            raise RestError(400, 400, str(exc)) from None
        return JSONBody({"user": user, "key": key, "value": value})

    return router
