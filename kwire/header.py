"""Kafka request and response headers. Pure, no I/O.

Wire layouts (big-endian)::

    RequestHeader v0   api_key INT16, api_version INT16, correlation_id INT32
    RequestHeader v1   v0 + client_id NULLABLE_STRING (INT16 length; never compact)
    RequestHeader v2   v1 + TAGGED_FIELDS
    ResponseHeader v0  correlation_id INT32
    ResponseHeader v1  v0 + TAGGED_FIELDS

Flexible (KIP-482) api versions use request header v2 / response header v1; others v1 / v0.
The one exception is ApiVersions, whose response always has header v0: a client that does
not yet know which versions we speak must be able to read the correlation id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kwire.errors import EncodeError, ProtocolError
from kwire.primitives import Reader, Writer

_REQUEST_PREFIX: Final = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_CORRELATION: Final = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int


def peek_request_prefix(r: Reader) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without consuming; the header version
    depends on the key and version, so they must be known before the rest is parsed."""
    if r.remaining < _REQUEST_PREFIX.size:
        raise ProtocolError(f"request of {r.remaining} bytes is shorter than the 8-byte header prefix")
    api_key, api_version, correlation_id = _REQUEST_PREFIX.unpack_from(r.buf, r.pos)
    return api_key, api_version, correlation_id


def decode_request_header(r: Reader, header_version: int) -> RequestHeader:
    try:
        api_key, api_version, correlation_id = peek_request_prefix(r)
        r.pos += _REQUEST_PREFIX.size
        client_id = r.nullable_string() if header_version >= 1 else None
        if header_version >= 2:
            r.tagged_fields()  # no header tags are defined that a broker needs
    except ProtocolError as e:
        e.where = f"request header v{header_version}"
        raise
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def encode_request_header(w: Writer, header: RequestHeader, header_version: int) -> None:
    try:
        w.buf += _REQUEST_PREFIX.pack(header.api_key, header.api_version, header.correlation_id)
    except struct.error as e:
        raise EncodeError(f"request header: {e}") from None
    if header_version >= 1:
        w.nullable_string(header.client_id)
    if header_version >= 2:
        w.buf.append(0)


def decode_response_header(r: Reader, header_version: int) -> ResponseHeader:
    try:
        correlation_id = r.int32()
        if header_version >= 1:
            r.tagged_fields()
    except ProtocolError as e:
        e.where = f"response header v{header_version}"
        raise
    return ResponseHeader(correlation_id)


def encode_response_header(w: Writer, correlation_id: int, header_version: int) -> None:
    try:
        w.buf += _CORRELATION.pack(correlation_id)
    except struct.error as e:
        raise EncodeError(f"response header: {e}") from None
    if header_version >= 1:
        w.buf.append(0)


class UnsupportedVersionError(ProtocolError):
    """A known api key at a version outside the range we advertise.

    ``header`` is the fully parsed request header, so the server can still answer
    (ApiVersions: ``api_versions_fallback_response(header)``) or log who asked.
    """

    def __init__(self, header: RequestHeader, min_version: int, max_version: int) -> None:
        super().__init__(
            f"api key {header.api_key} version {header.api_version} is not supported "
            f"(supported {min_version}-{max_version})"
        )
        self.header = header
        self.min_version = min_version
        self.max_version = max_version
