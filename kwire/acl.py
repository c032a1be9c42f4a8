"""The ACL binding model of Kafka's admin API: bindings, filters and their codes. Pure.

A binding allows or denies one principal (``User:alice``, ``User:*``), from one host
(``*`` or an exact address), one operation on a resource pattern: a resource type (topic,
group, cluster, transactional id) and a name that is LITERAL (exact, or ``*`` for every
name) or PREFIXED (every name starting with it). The cluster resource is named
``kafka-cluster``. A filter (Kafka's AclBindingFilter) selects bindings for DescribeAcls
and DeleteAcls.

Codes are Kafka's (AclOperation, AclPermissionType, ResourceType, PatternType), so they
go on the wire unchanged. The model is shared by the client (kclient), the CLI and the
broker's authorizer (broker.security.acl), as Kafka's own clients library holds it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

CLUSTER_NAME: Final = "kafka-cluster"
WILDCARD: Final = "*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CONCRETE_RESOURCES: Final = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)


class AclError(ValueError):
    """A binding or filter that is not legal; the message says why (INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def validate(self) -> AclBinding:
        if self.resource_type not in CONCRETE_RESOURCES:
            raise AclError(f"resource type {self.resource_type} cannot be given an ACL")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError("an ACL's pattern type must be LITERAL or PREFIXED")
        if not self.resource_name:
            raise AclError("an ACL needs a resource name")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise AclError("an ACL needs a concrete operation (or ALL)")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError("an ACL's permission must be ALLOW or DENY")
        if not self.principal.startswith("User:") or len(self.principal) <= len("User:"):
            raise AclError(f"principal {self.principal!r} must be User:<name> or User:*")
        if not self.host:
            raise AclError("an ACL needs a host ('*' for any)")
        return self

    def to_json(self) -> dict[str, object]:
        return {
            "resource_type": self.resource_type.name,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission": self.permission.name,
        }

    @classmethod
    def from_json(cls, raw: object) -> AclBinding:
        if not isinstance(raw, dict):
            raise AclError("an ACL must be a JSON object")
        try:
            return cls(
                ResourceType[str(raw["resource_type"])],
                str(raw["resource_name"]),
                PatternType[str(raw["pattern_type"])],
                str(raw["principal"]),
                str(raw["host"]),
                Operation[str(raw["operation"])],
                Permission[str(raw["permission"])],
            ).validate()
        except KeyError as exc:
            raise AclError(f"malformed ACL: bad or missing {exc}") from None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls/DeleteAcls select; None, ANY: anything (Kafka's AclBindingFilter)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def validate(self) -> AclFilter:
        for value, what in (
            (self.resource_type, "resource type"),
            (self.pattern_type, "pattern type"),
            (self.operation, "operation"),
            (self.permission, "permission"),
        ):
            if value == 0:
                raise AclError(f"filter {what} UNKNOWN matches nothing")
        return self

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if not self._name_matches(b):
            return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != Operation.ANY and b.operation != self.operation:
            return False
        return self.permission == Permission.ANY or b.permission == self.permission

    def _name_matches(self, b: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            # every pattern that would apply to the named resource
            if name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD)
            return name.startswith(b.resource_name)
        if self.pattern_type not in (PatternType.ANY, b.pattern_type):
            return False
        return name is None or b.resource_name == name
