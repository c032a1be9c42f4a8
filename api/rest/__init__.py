"""The REST API (Kafka REST Proxy v2 + Confluent v3 topic admin); conventions in ``api.rest.app``.

``models``: request/response bodies (validation and OpenAPI schema); ``codec``: pure
helpers (content negotiation, JSON/base64, placement, error shape); ``app``: routes.
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
