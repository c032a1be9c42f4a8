"""The console's schema pages (data from the built-in registry, broker.schema_registry):

``GET /console/api/schemas``  every live subject with its versions, latest id and format.
``GET /console/api/schemas/{subject}?from=&to=``  its versions (id, format, references,
    the schema pretty-printed) and a unified diff of version ``from`` against ``to``
    (default: the two latest).

Answered by the registry's leader (another broker relays there, as the API does); listings
show only the subjects the user may read (api.schema_registry.authz)."""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api.rest.codec import JSONBody, RestError
from api.rest.peers import Peers, forwarded
from api.schema_registry.authz import may_subject
from broker.schema_registry.errors import RegistryError
from broker.schema_registry.state import RegistryState
from broker.schema_registry.store import NotHere

if TYPE_CHECKING:
    from broker.broker import Broker


def pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:
        return text


def schemas_router(broker: Broker, peers: Peers) -> APIRouter:
    router = APIRouter(prefix="/console/api", tags=["console"], include_in_schema=False)

    async def answered(request: Request, fn: Any) -> Response:
        store = broker.schema_store
        if store is None:
            raise RestError(503, 50300, "this broker runs no schema registry")
        try:
            return JSONBody(await store.read(fn))
        except NotHere as here:
            if forwarded(request):
                raise RestError(503, 50300, "the schema registry's leader moved") from None
            path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return JSONBody(await peers.json(request, here.leader, path))
        except RegistryError as exc:
            raise RestError(exc.status, exc.code, exc.message) from None

    @router.get("/schemas")
    async def subjects(request: Request) -> Response:
        def get(state: RegistryState) -> dict[str, Any]:
            out = []
            for s in state.subjects():
                if not may_subject(broker, request, s, write=False):
                    continue
                versions = state.versions(s)
                out.append(
                    {
                        "subject": s,
                        "versions": [v.version for v in versions],
                        "latest_id": versions[-1].id,
                        "schema_type": versions[-1].schema_type,
                    }
                )
            return {"subjects": out, "compatibility": state.compatibility(None), "mode": state.mode(None)}

        return await answered(request, get)

    @router.get("/schemas/{subject}")
    async def subject(
        request: Request,
        subject: str,
        from_: int | None = Query(None, alias="from", ge=1),
        to: int | None = Query(None, ge=1),
    ) -> Response:
        if not may_subject(broker, request, subject, write=False):
            raise RestError(403, 40301, f"not authorized to read subject {subject!r}")

        def get(state: RegistryState) -> dict[str, Any]:
            versions = state.versions(subject)
            by_number = {v.version: v for v in versions}
            new = by_number.get(to) if to is not None else versions[-1]
            old = by_number.get(from_) if from_ is not None else (versions[-2] if len(versions) > 1 else None)
            if (to is not None and new is None) or (from_ is not None and old is None):
                raise RegistryError(404, 40402, "Version not found.")
            diff: list[str] = []
            if old is not None and new is not None:
                diff = list(
                    difflib.unified_diff(
                        pretty(old.schema).splitlines(),
                        pretty(new.schema).splitlines(),
                        f"version {old.version}",
                        f"version {new.version}",
                        lineterm="",
                    )
                )
            return {
                "subject": subject,
                "compatibility": state.compatibility(subject),
                "versions": [
                    {
                        "version": v.version,
                        "id": v.id,
                        "schema_type": v.schema_type,
                        "references": [r.to_json() for r in v.references],
                        "schema": pretty(v.schema),
                    }
                    for v in versions
                ],
                "diff": {
                    "from": old.version if old is not None else None,
                    "to": new.version if new is not None else None,
                    "lines": diff,
                },
            }

        return await answered(request, get)

    return router
