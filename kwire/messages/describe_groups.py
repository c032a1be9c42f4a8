"""DescribeGroups (key 15), versions 0-6, flexible 5+.

v6 (KIP-1043) adds each group's ``error_message`` and answers a group that does not
exist, or is not a classic group (a KIP-848 consumer group), GROUP_ID_NOT_FOUND, where
v0-5 answer it as a Dead group without error.

``authorized_operations`` (v3+) is a bit set of ACL operations, INT32 min when not
requested, as in Metadata.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.messages.metadata import NO_AUTHORIZED_OPERATIONS
from kwire.schema import ARRAY, BOOL, BYTES, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsRequest:
    groups: Annotated[Sequence[str], W(ARRAY(STRING))] = ()
    include_authorized_operations: Annotated[bool, W(BOOL, "3+")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroupMember:
    member_id: Annotated[str, W(STRING)]
    group_instance_id: Annotated[str | None, W(STRING, "4+", nullable="4+")] = None
    client_id: Annotated[str, W(STRING)] = ""
    client_host: Annotated[str, W(STRING)] = ""
    member_metadata: Annotated[bytes, W(BYTES)] = b""
    member_assignment: Annotated[bytes, W(BYTES)] = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, "6+", nullable="6+")] = None
    group_id: Annotated[str, W(STRING)]
    group_state: Annotated[str, W(STRING)] = ""
    protocol_type: Annotated[str, W(STRING)] = ""
    protocol_data: Annotated[str, W(STRING)] = ""
    members: Annotated[Sequence[DescribedGroupMember], W(ARRAY(DescribedGroupMember))] = ()
    authorized_operations: Annotated[int, W(INT32, "3+")] = NO_AUTHORIZED_OPERATIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    groups: Annotated[Sequence[DescribedGroup], W(ARRAY(DescribedGroup))] = ()
