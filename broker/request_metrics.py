"""``strata_request_errors_total{api,error}``: error responses counted per API and error.

The anchor is Kafka's ``kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=<API>,
error=<ERROR>``: ``api`` is the Kafka API name (``Produce``, ``Metadata``, ...; the same
value ``strata_request_latency_seconds`` carries) and ``error`` the Kafka error name
(``NOT_LEADER_OR_FOLLOWER``), one increment per error code in a response (per partition,
per topic, or the response's own). Unlike Kafka, ``NONE`` is not counted. Errors of the
REST API's own (Confluent's five-digit codes) are counted as ``api="REST"`` with the code
as the ``error``, and a REST produce's per-record Kafka errors as ``api="Produce"``.

Two ways in:

- ``RequestErrors.labels(source, code)``, the call sites that count as they build a
  response (the Produce and Fetch handlers, WriteTxnMarkers, REST): ``source`` may be a
  Kafka API name or one of the older lower-case names (``produce``, ``rest_produce``, ...),
  which are mapped here so those call sites stay as they are. Children are cached, so a
  call costs one dict lookup.
- ``ResponseErrors.count(api, response)``, called by the Kafka listener with every
  response of the other APIs: the response dataclass is walked for its ``*error_code``
  fields, along a plan compiled once per message class from its wire schema (only the
  fields that are, or lead to, error codes are visited).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, Final

from prometheus_client import Counter

import kwire.error_table as error_table
from kwire.errors import SchemaError
from kwire.schema import INT16, Array, Struct, wire_fields

# Kafka error code -> its name in the protocol guide's table (kwire.error_table).
ERROR_NAMES: Final[dict[int, str]] = {
    v: k for k, v in vars(error_table).items() if k.isupper() and type(v) is int
}

# The names older call sites pass, and the API each one counts for.
_SOURCES: Final[dict[str, str]] = {
    "produce": "Produce",
    "rest_produce": "Produce",
    "fetch": "Fetch",
    "write_txn_markers": "WriteTxnMarkers",
    "rest": "REST",
}

# APIs whose handlers count their own errors as they build the response (see above).
COUNTED_BY_HANDLER: Final = frozenset({"Produce", "Fetch", "WriteTxnMarkers"})


def error_name(code: int) -> str:
    """The Kafka name of ``code`` (``UNKNOWN_TOPIC_OR_PARTITION``); the number itself for
    a code Strata has no name for."""
    return ERROR_NAMES.get(code, str(code))


class RequestErrors:
    """The ``labels(source, code)`` face of the counter (module docstring)."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self._children: dict[tuple[str, str | int], Any] = {}

    def labels(self, source: str, code: str | int) -> Any:
        key = (source, code)
        child = self._children.get(key)
        if child is None:
            api = _SOURCES.get(source, source)
            error = str(code) if api == "REST" else error_name(int(code))
            child = self._children[key] = self.counter.labels(api, error)
        return child


# A walk plan: how to find every error code in one message class.
Walk = Callable[[Any], Iterable[int]]


def _plan(cls: type) -> Walk | None:
    """The walk over ``cls`` instances, or None if no error code can be reached from it."""
    if not dataclasses.is_dataclass(cls):
        return None  # not a schema message (nothing a handler answers with today)
    codes: list[str] = []
    nested: list[tuple[str, Walk, bool]] = []  # (field, walk of the element, is an array)
    try:
        fields = wire_fields(cls)
    except SchemaError:  # not a wire message: nothing to count, and never a failed request
        return None
    for f in fields:
        kind = f.kind
        if kind is INT16 and f.name.endswith("error_code"):
            codes.append(f.name)
            continue
        many = isinstance(kind, Array)
        elem = kind.elem if isinstance(kind, Array) else kind
        if isinstance(elem, Struct):
            inner = _plan_of(elem.cls)
            if inner is not None:
                nested.append((f.name, inner, many))
    if not codes and not nested:
        return None

    def walk(msg: Any) -> Iterable[int]:
        for name in codes:
            code = getattr(msg, name)
            if code:
                yield code
        for name, inner, many in nested:
            value = getattr(msg, name)
            if value is None:
                continue
            if many:
                for item in value:
                    yield from inner(item)
            else:
                yield from inner(value)

    return walk


_PLANS: dict[type, Walk | None] = {}


def _plan_of(cls: type) -> Walk | None:
    if cls not in _PLANS:
        _PLANS[cls] = None  # a recursive schema ends here instead of looping
        _PLANS[cls] = _plan(cls)
    return _PLANS[cls]


class ResponseErrors:
    """Counts the error codes of whole Kafka responses on ``errors``."""

    def __init__(self, errors: RequestErrors) -> None:
        self._errors = errors

    def count(self, api: str, response: object) -> None:
        if response is None or api in COUNTED_BY_HANDLER:
            return
        walk = _plan_of(type(response))
        if walk is None:
            return
        for code in walk(response):
            self._errors.labels(api, code).inc()

    def codes(self, api: str, response: object) -> list[int]:
        """The codes ``count`` would count for ``response`` (to count them again later
        without the walk: ``count_codes``; api.handlers.metadata_cache)."""
        if response is None or api in COUNTED_BY_HANDLER:
            return []
        walk = _plan_of(type(response))
        return [] if walk is None else list(walk(response))

    def count_codes(self, api: str, codes: Iterable[int]) -> None:
        for code in codes:
            self._errors.labels(api, code).inc()
