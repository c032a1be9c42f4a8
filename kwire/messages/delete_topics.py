"""DeleteTopics (key 20), versions 1-6, flexible 4+.

v1-5 name topics in ``topic_names``; v6 in ``topics`` (by name or by id).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.primitives import ZERO_UUID
from kwire.schema import ARRAY, INT16, INT32, STRING, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicState:
    name: Annotated[str | None, W(STRING, "6+", nullable="6+")] = None
    topic_id: Annotated[uuid.UUID, W(UUID, "6+")] = ZERO_UUID


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsRequest:
    topics: Annotated[Sequence[DeleteTopicState], W(ARRAY(DeleteTopicState), "6+")] = ()
    topic_names: Annotated[Sequence[str], W(ARRAY(STRING), "0-5")] = ()
    timeout_ms: Annotated[int, W(INT32)] = 60000


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableTopicResult:
    name: Annotated[str | None, W(STRING, nullable="6+")]
    topic_id: Annotated[uuid.UUID, W(UUID, "6+")] = ZERO_UUID
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    responses: Annotated[Sequence[DeletableTopicResult], W(ARRAY(DeletableTopicResult))] = ()
