"""ApiVersions (key 18), versions 0-3, flexible 3+.

The response header is always v0 (see ``kwire.header``); a request at a version
above ours is answered with a v0 body carrying UNSUPPORTED_VERSION and our ranges
(``kwire.codec.api_versions_fallback_response``).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequest:
    client_software_name: Annotated[str, W(STRING, "3+")] = ""
    client_software_version: Annotated[str, W(STRING, "3+")] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersion:
    api_key: Annotated[int, W(INT16)]
    min_version: Annotated[int, W(INT16)]
    max_version: Annotated[int, W(INT16)]


@dataclass(frozen=True, slots=True, kw_only=True)
class SupportedFeatureKey:
    name: Annotated[str, W(STRING, "3+")]
    min_version: Annotated[int, W(INT16, "3+")]
    max_version: Annotated[int, W(INT16, "3+")]


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizedFeatureKey:
    name: Annotated[str, W(STRING, "3+")]
    max_version_level: Annotated[int, W(INT16, "3+")]
    min_version_level: Annotated[int, W(INT16, "3+")]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsResponse:
    error_code: Annotated[int, W(INT16)] = 0
    api_keys: Annotated[Sequence[ApiVersion], W(ARRAY(ApiVersion))] = ()
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    supported_features: Annotated[
        Sequence[SupportedFeatureKey], W(ARRAY(SupportedFeatureKey), "3+", tag=0)
    ] = ()
    finalized_features_epoch: Annotated[int, W(INT64, "3+", tag=1)] = -1
    finalized_features: Annotated[
        Sequence[FinalizedFeatureKey], W(ARRAY(FinalizedFeatureKey), "3+", tag=2)
    ] = ()
    zk_migration_ready: Annotated[bool, W(BOOL, "3+", tag=3)] = False
