"""ApiVersions: every API and version range the codec supports (kwire.APIS).

Served before authentication on a SASL listener. A request in a version newer than the
broker knows is answered by the listener itself with the v0 fallback (KIP-511), not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kwire import RequestHeader, api_versions_response

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_api_versions(conn: Connection, header: RequestHeader, req: Any) -> Any:
    return api_versions_response()
