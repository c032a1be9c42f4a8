"""The security page's ACL changes: add one binding, remove one binding.

``POST /console/api/acls``         a binding as the security page lists it (``principal``,
                                   ``host``, ``resource_type``, ``resource_name``,
                                   ``pattern_type``, ``operation``, ``permission``)
``POST /console/api/acls/delete``  the same fields: removes exactly that binding

Both need ALTER on the cluster, Kafka's rule for CreateAcls and DeleteAcls, and write the
ACL document every broker reads (the metadata store's), so they apply cluster-wide as
``strata acl add|remove`` and Kafka admin clients do. A binding that is not legal is 400 with
the reason (``kwire.acl``'s validation); with authorization off there are no ACLs to
change (409).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.rest.authz import require_cluster
from api.rest.codec import JSONBody, RestError, loads_strict, read_body
from kwire.acl import AclBinding, AclError, AclFilter, Operation

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.security.authz import AccessControl


def acls_router(broker: Broker) -> APIRouter:
    router = APIRouter(prefix="/console/api", tags=["console"], include_in_schema=False)
    limit = broker.config.max_request_bytes

    async def binding_of(request: Request) -> tuple[AccessControl, AclBinding]:
        require_cluster(broker, request, Operation.ALTER)
        access = broker.access
        if access is None:
            raise RestError(409, 40900, "authorization is off: there are no ACLs to change")
        try:
            return access, AclBinding.from_json(loads_strict(await read_body(request, limit)))
        except (AclError, ValueError, RecursionError) as exc:
            raise RestError(400, 400, f"not a valid ACL: {exc}") from None

    @router.post("/acls")
    async def add(request: Request) -> Response:
        access, b = await binding_of(request)
        await access.store.create([b])
        return JSONBody({"created": b.to_json()})

    @router.post("/acls/delete")
    async def remove(request: Request) -> Response:
        access, b = await binding_of(request)
        exact = AclFilter(
            b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission
        )
        [removed] = await access.store.delete([exact])
        if not removed:
            raise RestError(404, 404, "no such ACL")
        return JSONBody({"deleted": [r.to_json() for r in removed]})

    return router
