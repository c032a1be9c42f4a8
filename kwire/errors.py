"""Errors of the Kafka wire codec.

Decoding failures are the client's fault and subclass ``hot.errors.InvalidRequestError``
(Kafka code INVALID_REQUEST); encoding failures are our own bug (a value that does not fit
its wire type) and are plain ``StrataError`` (UNKNOWN_SERVER_ERROR).
"""

from __future__ import annotations

from hot.errors import InvalidRequestError, StrataError


class ProtocolError(InvalidRequestError):
    """Bytes that are not a valid Kafka message.

    ``reason`` is what went wrong; ``path`` locates it in the message (``topics[0].name``);
    ``where`` names the message (``Fetch v12 request``). Decoders add path segments while
    the exception unwinds, so the message stays precise without costing anything on the
    happy path.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self._segments: list[str] = []  # innermost first
        self.where = ""

    def add_path(self, segment: str) -> None:
        self._segments.append(segment)

    @property
    def path(self) -> str:
        return "".join(reversed(self._segments)).lstrip(".")

    def __str__(self) -> str:
        head = " ".join(p for p in (self.where, self.path) if p)
        return f"{head}: {self.reason}" if head else self.reason


class UnknownApiKeyError(ProtocolError):
    """A request for an api key this broker does not implement (Kafka closes the connection)."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int | None) -> None:
        super().__init__(f"unknown api key {api_key} (version {api_version})")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class EncodeError(StrataError):
    """A value that cannot be encoded: wrong type, out of range, null where not nullable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self._segments: list[str] = []
        self.where = ""

    def add_path(self, segment: str) -> None:
        self._segments.append(segment)

    @property
    def path(self) -> str:
        return "".join(reversed(self._segments)).lstrip(".")

    def __str__(self) -> str:
        head = " ".join(p for p in (self.where, self.path) if p)
        return f"{head}: {self.reason}" if head else self.reason


class SchemaError(TypeError):
    """A schema declaration that cannot work (raised at import time, never at run time)."""
