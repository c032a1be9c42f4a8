"""Whole-message entry points: frame body <-> (header, typed message). Pure, no I/O.

A frame here is what follows the INT32 size prefix (see ``kwire.framing``)::

    request frame   RequestHeader (v1, or v2 for flexible versions) + request body
    response frame  ResponseHeader (v0, or v1 for flexible versions; ApiVersions always v0)
                    + response body

Trailing bytes after a body are ignored, as Kafka's broker does (its generated readers stop
after the last field and nobody checks ``remaining()``); ``strict=True`` rejects them, which
the tests use to prove encoder and decoder agree byte for byte.
"""

from __future__ import annotations

from typing import Any, Final

from kwire.apis import APIS, ApiKey, ApiSpec, api_versions_response
from kwire.errors import EncodeError, ProtocolError, UnknownApiKeyError
from kwire.header import (
    RequestHeader,
    UnsupportedVersionError,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    peek_request_prefix,
)
from kwire.primitives import I16, Buffer, Reader, Writer

UNSUPPORTED_VERSION: Final = 35  # Kafka error code


def decode_request(frame: Buffer, *, strict: bool = False) -> tuple[RequestHeader, Any]:
    """Parse a request frame into its header and typed body.

    Raises ``UnknownApiKeyError`` for keys we do not serve, ``UnsupportedVersionError``
    (with the parsed header) for versions outside our range, ``ProtocolError`` for anything
    malformed. Records fields are zero-copy ``memoryview`` slices of ``frame``.
    """
    r = Reader(frame)
    api_key, api_version, correlation_id = peek_request_prefix(r)
    spec = APIS.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(api_key, api_version, correlation_id)
    # The header version follows the *requested* version, supported or not, as in Kafka:
    # a client asking ApiVersions v4 sends header v2 and must still get its answer.
    header = decode_request_header(r, spec.request_header_version(api_version))
    if not spec.supports(api_version):
        raise UnsupportedVersionError(header, spec.min_version, spec.max_version)
    try:
        body = spec.request.codecs[api_version].decode(r)
        if strict and r.pos != r.end:
            raise ProtocolError(f"{r.end - r.pos} trailing bytes after the body at offset {r.pos}")
    except ProtocolError as e:
        e.where = f"{spec.name} v{api_version} request"
        raise
    if spec.after_decode_request is not None:
        body = spec.after_decode_request(api_version, body)
    return header, body


def encode_response(header: RequestHeader, response: Any) -> list[bytes | object]:
    """Encode the response to the request with ``header``: response header + body, no size prefix.

    Returns parts: bytes (consecutive bytes merged) and, in order, the file-region objects
    found in records fields, each right after its length prefix. An ApiVersions request at a
    version we do not support is answered in v0, as Kafka does.
    """
    spec = _spec(header.api_key)
    version = header.api_version
    if not spec.supports(version):
        if spec.api_key != ApiKey.API_VERSIONS:
            raise EncodeError(f"{spec.name} v{version} is not a supported version")
        version = 0
    if type(response) is not spec.response.cls:
        raise EncodeError(
            f"{spec.name} response must be {spec.response.cls.__name__}, got {type(response).__name__}"
        )
    w = Writer()
    encode_response_header(w, header.correlation_id, spec.response_header_version(version))
    _encode_body(spec, version, response, w, "response")
    return w.finish()


def api_versions_fallback_response(header: RequestHeader) -> list[bytes | object]:
    """The answer to ApiVersions at a version above ours: a v0 body with UNSUPPORTED_VERSION
    and our supported ranges, so the client (librdkafka asks v3 first) retries at our max."""
    spec = APIS[ApiKey.API_VERSIONS]
    w = Writer()
    encode_response_header(w, header.correlation_id, 0)
    _encode_body(spec, 0, api_versions_response(error_code=UNSUPPORTED_VERSION), w, "response")
    return w.finish()


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, request: Any
) -> bytes:
    """Client side: request header + body (no size prefix; see ``framing.frame_bytes``)."""
    spec = _spec(api_key)
    if not spec.supports(version):
        raise EncodeError(f"{spec.name} v{version} is not a supported version")
    if type(request) is not spec.request.cls:
        raise EncodeError(
            f"{spec.name} request must be {spec.request.cls.__name__}, got {type(request).__name__}"
        )
    if spec.before_encode_request is not None:
        request = spec.before_encode_request(version, request)
    w = Writer()
    encode_request_header(
        w, RequestHeader(api_key, version, correlation_id, client_id), spec.request_header_version(version)
    )
    _encode_body(spec, version, request, w, "request")
    return w.getvalue()


def decode_response(api_key: int, version: int, frame: Buffer, *, strict: bool = False) -> tuple[int, Any]:
    """Client side: (correlation id, typed body) of a response to a request at ``version``.

    An ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0, whatever was
    asked, because that is how a broker answers a version it does not know.
    """
    spec = _spec(api_key)
    if not spec.supports(version):
        raise EncodeError(f"{spec.name} v{version} is not a supported version")
    r = Reader(frame)
    correlation_id = decode_response_header(r, spec.response_header_version(version)).correlation_id
    if (
        spec.api_key == ApiKey.API_VERSIONS
        and r.remaining >= 2
        and I16.unpack_from(r.buf, r.pos)[0] == UNSUPPORTED_VERSION
    ):
        version = 0
    try:
        body = spec.response.codecs[version].decode(r)
        if strict and r.pos != r.end:
            raise ProtocolError(f"{r.end - r.pos} trailing bytes after the body at offset {r.pos}")
    except ProtocolError as e:
        e.where = f"{spec.name} v{version} response"
        raise
    return correlation_id, body


def _spec(api_key: int) -> ApiSpec:
    spec = APIS.get(api_key)
    if spec is None:
        raise EncodeError(f"api key {api_key} is not implemented")
    return spec


def _encode_body(spec: ApiSpec, version: int, obj: Any, w: Writer, kind: str) -> None:
    schema = spec.request if kind == "request" else spec.response
    try:
        schema.codecs[version].encode(w, obj)
    except EncodeError as e:
        e.where = f"{spec.name} v{version} {kind}"
        raise
