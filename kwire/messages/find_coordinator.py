"""FindCoordinator (key 10), versions 0-4, flexible 3+.

v0-3 ask for one ``key``; v4 (KIP-699) batches ``coordinator_keys`` and answers with one
``Coordinator`` per key instead of the top-level node fields. ``key_type`` is 0 (group)
or 1 (transaction); v0 has no key type and always means a group.

Kafka 4.x serves 0-6: v5 (KIP-890, allows TRANSACTION_ABORTABLE) and v6 (KIP-932, key type
2 = share group) are v4 on the wire, so this table is correct for them too (tests check
it); serving them is a range change once the handler answers key type 2.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT8, INT16, INT32, STRING, W

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorRequest:
    key: Annotated[str, W(STRING, "0-3")] = ""
    key_type: Annotated[int, W(INT8, "1+")] = KEY_TYPE_GROUP
    coordinator_keys: Annotated[Sequence[str], W(ARRAY(STRING), "4+")] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Coordinator:
    key: Annotated[str, W(STRING, "4+")]
    node_id: Annotated[int, W(INT32, "4+")] = -1
    host: Annotated[str, W(STRING, "4+")] = ""
    port: Annotated[int, W(INT32, "4+")] = -1
    error_code: Annotated[int, W(INT16, "4+")] = 0
    error_message: Annotated[str | None, W(STRING, "4+", nullable="4+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    error_code: Annotated[int, W(INT16, "0-3")] = 0
    error_message: Annotated[str | None, W(STRING, "1-3", nullable="1-3")] = None
    node_id: Annotated[int, W(INT32, "0-3")] = -1
    host: Annotated[str, W(STRING, "0-3")] = ""
    port: Annotated[int, W(INT32, "0-3")] = -1
    coordinators: Annotated[Sequence[Coordinator], W(ARRAY(Coordinator), "4+")] = ()
