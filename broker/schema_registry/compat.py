"""Compatibility levels, as Confluent applies them: BACKWARD (the new schema reads data
written with the latest version), FORWARD (the latest reads the new one's), FULL (both),
their _TRANSITIVE forms (against every live version, not only the latest) and NONE. The
per-format reader/writer rules are the formats' (``ParsedSchema.reads``)."""

from __future__ import annotations

from typing import Final

from broker.schema_registry.formats import ParsedSchema

LEVELS: Final = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL: Final = "BACKWARD"
MODES: Final = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_MODE: Final = "READWRITE"


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (live versions, oldest first) at ``level``;
    empty when it may."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            out += new.reads(old)
        if base in ("FORWARD", "FULL"):
            out += old.reads(new)
        if out:
            break
    return out
