"""DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31): versions 0-3, flexible 2+.

    DescribeAclsRequest:  resource_type_filter INT8, resource_name_filter NULLABLE_STRING,
                          pattern_type_filter INT8 (v1+), principal_filter NULLABLE_STRING,
                          host_filter NULLABLE_STRING, operation INT8, permission_type INT8
    DescribeAclsResponse: throttle_time_ms INT32, error_code INT16, error_message NULLABLE_STRING,
                          resources ARRAY(resource_type INT8, resource_name STRING,
                              pattern_type INT8 (v1+),
                              acls ARRAY(principal STRING, host STRING, operation INT8,
                                         permission_type INT8))
    CreateAclsRequest:    creations ARRAY(resource_type INT8, resource_name STRING,
                              resource_pattern_type INT8 (v1+), principal STRING, host STRING,
                              operation INT8, permission_type INT8)
    CreateAclsResponse:   throttle_time_ms INT32,
                          results ARRAY(error_code INT16, error_message NULLABLE_STRING)
    DeleteAclsRequest:    filters ARRAY(the seven DescribeAcls filter fields)
    DeleteAclsResponse:   throttle_time_ms INT32, filter_results ARRAY(error_code INT16,
                              error_message NULLABLE_STRING, matching_acls ARRAY(error_code INT16,
                              error_message NULLABLE_STRING, resource_type INT8,
                              resource_name STRING, pattern_type INT8 (v1+), principal STRING,
                              host STRING, operation INT8, permission_type INT8))

v0 has no pattern types: every pattern is LITERAL (3), the default here. The codes are
kwire.acl's enums (Kafka's ResourceType, PatternType, AclOperation, AclPermissionType).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT8, INT16, INT32, STRING, W

LITERAL = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsRequest:
    resource_type_filter: Annotated[int, W(INT8)]
    resource_name_filter: Annotated[str | None, W(STRING, nullable="0+")] = None
    pattern_type_filter: Annotated[int, W(INT8, "1+")] = LITERAL
    principal_filter: Annotated[str | None, W(STRING, nullable="0+")] = None
    host_filter: Annotated[str | None, W(STRING, nullable="0+")] = None
    operation: Annotated[int, W(INT8)]
    permission_type: Annotated[int, W(INT8)]


@dataclass(frozen=True, slots=True, kw_only=True)
class AclDescription:
    principal: Annotated[str, W(STRING)]
    host: Annotated[str, W(STRING)]
    operation: Annotated[int, W(INT8)]
    permission_type: Annotated[int, W(INT8)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResource:
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]
    pattern_type: Annotated[int, W(INT8, "1+")] = LITERAL
    acls: Annotated[Sequence[AclDescription], W(ARRAY(AclDescription))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    resources: Annotated[Sequence[DescribeAclsResource], W(ARRAY(DescribeAclsResource))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AclCreation:
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]
    resource_pattern_type: Annotated[int, W(INT8, "1+")] = LITERAL
    principal: Annotated[str, W(STRING)]
    host: Annotated[str, W(STRING)]
    operation: Annotated[int, W(INT8)]
    permission_type: Annotated[int, W(INT8)]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsRequest:
    creations: Annotated[Sequence[AclCreation], W(ARRAY(AclCreation))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AclCreationResult:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    results: Annotated[Sequence[AclCreationResult], W(ARRAY(AclCreationResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsFilter:
    resource_type_filter: Annotated[int, W(INT8)]
    resource_name_filter: Annotated[str | None, W(STRING, nullable="0+")] = None
    pattern_type_filter: Annotated[int, W(INT8, "1+")] = LITERAL
    principal_filter: Annotated[str | None, W(STRING, nullable="0+")] = None
    host_filter: Annotated[str | None, W(STRING, nullable="0+")] = None
    operation: Annotated[int, W(INT8)]
    permission_type: Annotated[int, W(INT8)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsRequest:
    filters: Annotated[Sequence[DeleteAclsFilter], W(ARRAY(DeleteAclsFilter))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsMatchingAcl:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]
    pattern_type: Annotated[int, W(INT8, "1+")] = LITERAL
    principal: Annotated[str, W(STRING)]
    host: Annotated[str, W(STRING)]
    operation: Annotated[int, W(INT8)]
    permission_type: Annotated[int, W(INT8)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsFilterResult:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    matching_acls: Annotated[Sequence[DeleteAclsMatchingAcl], W(ARRAY(DeleteAclsMatchingAcl))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    filter_results: Annotated[Sequence[DeleteAclsFilterResult], W(ARRAY(DeleteAclsFilterResult))] = ()
