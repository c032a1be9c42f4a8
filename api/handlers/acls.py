"""Kafka protocol handlers of CreateAcls, DescribeAcls and DeleteAcls (single node and
cluster alike: the broker's AccessControl hides where the bindings live).

As Kafka: SECURITY_DISABLED when the broker has no authorizer; creating and deleting need
ALTER on the cluster, describing DESCRIBE on it (CLUSTER_AUTHORIZATION_FAILED otherwise);
an illegal binding or filter is INVALID_REQUEST for that entry only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from api.security.conn_authz import allowed_cluster
from broker.security.authz import AccessControl, denied
from hot.errors import SecurityDisabledError, StrataError
from kwire import RequestHeader
from kwire import error_table as E
from kwire.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from kwire.error_table import kafka_code
from kwire.messages.acls import (
    AclCreationResult,
    AclDescription,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection

_DISABLED = "authorization is not enabled on this broker ([authorization] enabled = false)"


def _access(conn: Connection) -> AccessControl | None:
    return getattr(conn.broker, "access", None)


_E = TypeVar("_E", ResourceType, PatternType, Operation, Permission)


def _enum(cls: type[_E], code: int) -> _E:
    try:
        return cls(code)
    except ValueError:
        raise AclError(f"unknown {cls.__name__} code {code}") from None


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        _enum(Operation, f.operation),
        _enum(Permission, f.permission_type),
    ).validate()


def _check(conn: Connection, operation: Operation) -> StrataError | None:
    if _access(conn) is None:
        return SecurityDisabledError(_DISABLED)
    if not allowed_cluster(conn, operation):
        return denied(operation, ResourceType.CLUSTER, CLUSTER_NAME)
    return None


async def handle_create_acls(
    conn: Connection, header: RequestHeader, req: CreateAclsRequest
) -> CreateAclsResponse:
    refused = _check(conn, Operation.ALTER)
    if refused is not None:
        result = AclCreationResult(error_code=kafka_code(refused), error_message=str(refused))
        return CreateAclsResponse(results=tuple(result for _ in req.creations))
    access = _access(conn)
    assert access is not None
    results: list[AclCreationResult | AclBinding] = []
    for c in req.creations:
        try:
            results.append(
                AclBinding(
                    _enum(ResourceType, c.resource_type),
                    c.resource_name,
                    _enum(PatternType, c.resource_pattern_type),
                    c.principal,
                    c.host,
                    _enum(Operation, c.operation),
                    _enum(Permission, c.permission_type),
                ).validate()
            )
        except AclError as exc:
            results.append(AclCreationResult(error_code=E.INVALID_REQUEST, error_message=str(exc)))
    valid = [b for b in results if isinstance(b, AclBinding)]
    error: AclCreationResult | None = None
    if valid:
        try:
            await access.store.create(valid)
        except StrataError as exc:
            error = AclCreationResult(error_code=kafka_code(exc), error_message=str(exc))
    return CreateAclsResponse(
        results=tuple((error or AclCreationResult()) if isinstance(r, AclBinding) else r for r in results)
    )


async def handle_describe_acls(
    conn: Connection, header: RequestHeader, req: DescribeAclsRequest
) -> DescribeAclsResponse:
    refused = _check(conn, Operation.DESCRIBE)
    if refused is not None:
        return DescribeAclsResponse(error_code=kafka_code(refused), error_message=str(refused))
    access = _access(conn)
    assert access is not None
    try:
        flt = _filter(req)
        bindings = access.store.bindings()
    except AclError as exc:
        return DescribeAclsResponse(error_code=E.INVALID_REQUEST, error_message=str(exc))
    except StrataError as exc:
        return DescribeAclsResponse(error_code=kafka_code(exc), error_message=str(exc))
    by_resource: dict[tuple[int, str, int], list[AclDescription]] = {}
    for b in bindings:
        if flt.matches(b):
            by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                AclDescription(
                    principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission
                )
            )
    return DescribeAclsResponse(
        resources=tuple(
            DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=tuple(acls))
            for (rt, name, pt), acls in by_resource.items()
        )
    )


async def handle_delete_acls(
    conn: Connection, header: RequestHeader, req: DeleteAclsRequest
) -> DeleteAclsResponse:
    refused = _check(conn, Operation.ALTER)
    if refused is not None:
        result = DeleteAclsFilterResult(error_code=kafka_code(refused), error_message=str(refused))
        return DeleteAclsResponse(filter_results=tuple(result for _ in req.filters))
    access = _access(conn)
    assert access is not None
    parsed: list[AclFilter | DeleteAclsFilterResult] = []
    for f in req.filters:
        try:
            parsed.append(_filter(f))
        except AclError as exc:
            parsed.append(DeleteAclsFilterResult(error_code=E.INVALID_REQUEST, error_message=str(exc)))
    filters = [f for f in parsed if isinstance(f, AclFilter)]
    try:
        matched = iter(await access.store.delete(filters) if filters else [])
    except StrataError as exc:
        error = DeleteAclsFilterResult(error_code=kafka_code(exc), error_message=str(exc))
        return DeleteAclsResponse(filter_results=tuple(error for _ in req.filters))
    out = []
    for p in parsed:
        if isinstance(p, DeleteAclsFilterResult):
            out.append(p)
            continue
        out.append(
            DeleteAclsFilterResult(
                matching_acls=tuple(
                    DeleteAclsMatchingAcl(
                        resource_type=b.resource_type,
                        resource_name=b.resource_name,
                        pattern_type=b.pattern_type,
                        principal=b.principal,
                        host=b.host,
                        operation=b.operation,
                        permission_type=b.permission,
                    )
                    for b in next(matched)
                )
            )
        )
    return DeleteAclsResponse(filter_results=tuple(out))
