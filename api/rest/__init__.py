"""The REST API (Kafka REST Proxy v2 + Confluent REST v3); conventions in ``api.rest.app``.

``models`` / ``models_v3``: request/response bodies (validation and OpenAPI schema); ``codec``:
pure helpers (content negotiation, JSON/base64, placement, error shape); ``app``: the v2 routes
and the wiring; ``v3*``: the v3 resources; ``producing``: the one produce path; ``docs``: the
offline ``/docs`` and ``/redoc``.
"""

from api.rest.app import create_app
from api.rest.codec import (
    V2,
    V2_BINARY,
    V2_JSON,
    RestError,
    UnknownPartitionError,
    dumps_compact,
    loads_strict,
)

__all__ = [
    "V2",
    "V2_BINARY",
    "V2_JSON",
    "RestError",
    "UnknownPartitionError",
    "create_app",
    "dumps_compact",
    "loads_strict",
]
