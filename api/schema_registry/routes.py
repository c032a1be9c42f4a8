"""The Confluent Schema Registry REST API over the registry's store
(broker.schema_registry): answers ``application/vnd.schemaregistry.v1+json``, errors as
``{"error_code": code, "message": text}`` with Confluent's codes (40401 subject not found,
40402 version not found, 40403 schema not found, 409 incompatible, 42201 invalid schema,
42202 invalid version, 42203 invalid compatibility level, 42204 invalid mode, 42205
operation not permitted, 50001 store error, 50003 forwarding failed, ...).

Every broker answers; a broker that does not lead ``_schemas-0`` relays the request to
the one that does (its HTTP listener, under ``/schema-registry``, with
``X-Strata-Forwarded: 1`` so it is never relayed twice) and passes the answer back."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from api.schema_registry.authz import may_subject, require_global_write, require_subject
from broker.schema_registry import operations as ops
from broker.schema_registry.errors import RegistryError, forward_failed
from broker.schema_registry.formats import AVRO, PROTOBUF, SCHEMA_TYPES
from broker.schema_registry.protobuf_format import ProtobufSchema, text_form
from broker.schema_registry.records import SchemaVersion
from broker.schema_registry.state import RegistryState, SchemaById, parse_version, references_from_json
from broker.schema_registry.store import FORWARDED, HTTP_PREFIX, WAIT_LEADER_S, NotHere, SchemaStore

MEDIA: Final = "application/vnd.schemaregistry.v1+json"
FORWARD_FAILED: Final = 50003  # the leader did not answer (errors.forward_failed)
StoreGetter = Callable[[], SchemaStore | None]

if TYPE_CHECKING:
    from broker.broker import Broker


def answer(doc: Any, status: int = 200) -> Response:
    return JSONResponse(doc, status_code=status, media_type=MEDIA)


def error(exc: RegistryError) -> Response:
    return answer({"error_code": exc.code, "message": exc.message}, exc.status)


def _bool(value: str | None) -> bool:
    return value is not None and value.lower() == "true"


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise RegistryError(400, 50005, f"Unrecognized request body: {exc}") from None
    if not isinstance(doc, dict):
        raise RegistryError(422, 42200, "the request body is a JSON object")
    return doc


def _schema_fields(doc: dict[str, Any]) -> tuple[str | None, str, list[Any]]:
    text = doc.get("schema")
    if not isinstance(text, str):
        raise RegistryError(422, 42201, 'Invalid schema: the body has no "schema" string')
    st = doc.get("schemaType")
    if st is not None and (not isinstance(st, str) or st.upper() not in SCHEMA_TYPES):
        raise RegistryError(422, 42201, f"Invalid schema type {st}")
    return st, text, references_from_json(doc.get("references"))


def _text(state: RegistryState, schema_type: str, text: str, refs: Any, fmt: str | None) -> str:
    """The schema as asked: Protobuf as ``.proto`` text by default (a schema registered as
    a base64 descriptor is rendered), as the base64 descriptor with ``format=serialized``."""
    if schema_type != PROTOBUF:
        return text
    if fmt == "serialized":
        parsed = state.parsed(SchemaVersion("", 0, 0, schema_type, text, list(refs)))
        if isinstance(parsed, ProtobufSchema):
            return parsed.serialized()
        return text
    return text_form(text)


def version_doc(state: RegistryState, v: SchemaVersion, fmt: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id}
    if v.schema_type != AVRO:
        doc["schemaType"] = v.schema_type
    if v.references:
        doc["references"] = [r.to_json() for r in v.references]
    doc["schema"] = _text(state, v.schema_type, v.schema, v.references, fmt)
    return doc


def registry_router(get_store: StoreGetter, broker: Broker | None = None) -> APIRouter:
    """The API's routes over ``get_store()``; ACLs (api.schema_registry.authz) are
    ``broker``'s (None: no checks)."""
    router = APIRouter(tags=["schema registry"])

    def need(request: Request, subject: str, *, write: bool = False) -> None:
        require_subject(broker, request, subject, write=write)

    def need_opt(request: Request, subject: str | None, *, write: bool) -> None:
        """A subject's setting (``subject``), or the global one (None): read by anyone,
        written with ALTER on the cluster."""
        if subject is not None:
            need(request, subject, write=write)
        elif write:
            require_global_write(broker, request)

    def need_id(request: Request, state: RegistryState, schema_id: int) -> None:
        """READ on one of the subjects the id is registered under."""
        if broker is None or broker.access is None:
            return
        subjects = {s for s, _ in state.subject_versions_of_id(schema_id, deleted=True)}
        if not any(may_subject(broker, request, s, write=False) for s in subjects):
            raise RegistryError(403, 40301, f"User is denied operation read on schema id {schema_id}")

    async def run(request: Request, fn: Callable[[SchemaStore], Awaitable[Response]]) -> Response:
        store = get_store()
        if store is None:
            return error(RegistryError(503, 50301, "the schema registry is not running on this broker"))
        answered = await _run(request, store, fn)
        route = request.scope.get("route")
        endpoint = f"{request.method} {getattr(route, 'path', '?')}"
        key = (endpoint, answered.status_code)
        store.requests[key] = store.requests.get(key, 0) + 1
        return answered

    async def _run(
        request: Request, store: SchemaStore, fn: Callable[[SchemaStore], Awaitable[Response]]
    ) -> Response:
        """``fn`` here, or relayed to the leader. A leader that does not answer at all (it
        died; the failover has not named another yet) is asked again, the leader looked up
        again each time, for up to ``WAIT_LEADER_S``: every write is idempotent or refused
        the second time, and nothing was answered."""
        deadline = time.monotonic() + WAIT_LEADER_S
        while True:
            try:
                return await fn(store)
            except RegistryError as exc:
                return error(exc)
            except NotHere as here:
                if request.headers.get(FORWARDED) == "1":
                    return error(forward_failed(f"not the primary any more (broker {here.leader} is)"))
                try:
                    return await relay(request, store, here.leader)
                except RegistryError as exc:
                    if exc.code != FORWARD_FAILED or time.monotonic() >= deadline:
                        return error(exc)
                await asyncio.sleep(0.2)

    async def relay(request: Request, store: SchemaStore, leader: int) -> Response:
        raw = request.scope.get("raw_path") or request.url.path.encode()
        path = raw.decode("latin-1")
        if path.startswith(HTTP_PREFIX):
            path = path[len(HTTP_PREFIX) :]
        if request.url.query:
            path += "?" + request.url.query
        headers = {}
        if "authorization" in request.headers:
            headers["Authorization"] = request.headers["authorization"]
        body = await request.body() if request.method in ("POST", "PUT") else None
        status, data = await store.forward(leader, request.method, path, body, headers)
        if status == 500 and b'"error_code":50003' in data.replace(b" ", b""):
            raise forward_failed(f"broker {leader} no longer leads the registry")  # asked again
        return Response(data, status_code=status, media_type=MEDIA)

    @router.get("/", summary="Nothing but a liveness answer")
    async def root() -> Response:
        return answer({})

    @router.get("/schemas/types", summary="The schema formats served")
    async def types() -> Response:
        return answer(list(SCHEMA_TYPES))

    @router.get("/contexts", summary="Schema contexts (only the default one)")
    async def contexts() -> Response:
        return answer(["."])

    @router.get("/schemas", summary="Schemas of every subject")
    async def all_schemas(
        request: Request,
        subjectPrefix: str = Query(""),
        deleted: str | None = None,
        latestOnly: str | None = None,
    ) -> Response:
        async def go(store: SchemaStore) -> Response:
            def get(state: RegistryState) -> list[dict[str, Any]]:
                out = []
                for s in state.subjects(deleted=_bool(deleted), prefix=subjectPrefix):
                    if not may_subject(broker, request, s, write=False):
                        continue
                    versions = state.versions(s, deleted=_bool(deleted))
                    for v in versions[-1:] if _bool(latestOnly) else versions:
                        out.append(version_doc(state, v))
                return out

            return answer(await store.read(get))

        return await run(request, go)

    @router.get("/schemas/ids/{schema_id}", summary="A schema by its id")
    async def schema_by_id(
        request: Request, schema_id: int, subject: str | None = None, format: str | None = None
    ) -> Response:
        async def go(store: SchemaStore) -> Response:
            def get(state: RegistryState) -> dict[str, Any]:
                s = state.schema_by_id(schema_id)
                need_id(request, state, schema_id)
                doc: dict[str, Any] = {}
                if s.schema_type != AVRO:
                    doc["schemaType"] = s.schema_type
                if s.references:
                    doc["references"] = [r.to_json() for r in s.references]
                doc["schema"] = _text(state, s.schema_type, s.schema, s.references, format)
                return doc

            def warm(state: RegistryState) -> None:  # protoc off the loop
                if format == "serialized":
                    state.parsed(state.schema_by_id(schema_id))

            return answer(await store.read(get, warm))

        return await run(request, go)

    @router.get("/schemas/ids/{schema_id}/schema", summary="A schema's text by its id")
    async def raw_schema_by_id(request: Request, schema_id: int) -> Response:
        async def go(store: SchemaStore) -> Response:
            def get(state: RegistryState) -> SchemaById:
                found = state.schema_by_id(schema_id)
                need_id(request, state, schema_id)
                return found

            s = await store.read(get)
            return PlainTextResponse(s.schema, media_type=MEDIA)

        return await run(request, go)

    @router.get("/schemas/ids/{schema_id}/versions", summary="The subject-versions of a schema id")
    async def id_versions(request: Request, schema_id: int, deleted: str | None = None) -> Response:
        async def go(store: SchemaStore) -> Response:
            def get(state: RegistryState) -> list[tuple[str, int]]:
                found = state.subject_versions_of_id(schema_id, deleted=_bool(deleted))
                need_id(request, state, schema_id)
                return [(s, v) for s, v in found if may_subject(broker, request, s, write=False)]

            pairs = await store.read(get)
            return answer([{"subject": s, "version": v} for s, v in pairs])

        return await run(request, go)

    @router.get("/schemas/ids/{schema_id}/subjects", summary="The subjects of a schema id")
    async def id_subjects(request: Request, schema_id: int, deleted: str | None = None) -> Response:
        async def go(store: SchemaStore) -> Response:
            def get(state: RegistryState) -> list[tuple[str, int]]:
                found = state.subject_versions_of_id(schema_id, deleted=_bool(deleted))
                need_id(request, state, schema_id)
                return [(s, v) for s, v in found if may_subject(broker, request, s, write=False)]

            pairs = await store.read(get)
            return answer(sorted({s for s, _ in pairs}))

        return await run(request, go)

    @router.get("/subjects", summary="The subjects")
    async def subjects(
        request: Request,
        deleted: str | None = None,
        subjectPrefix: str = Query(""),
    ) -> Response:
        async def go(store: SchemaStore) -> Response:
            found = await store.read(lambda s: s.subjects(deleted=_bool(deleted), prefix=subjectPrefix))
            return answer([s for s in found if may_subject(broker, request, s, write=False)])

        return await run(request, go)

    @router.get("/subjects/{subject}/versions", summary="A subject's version numbers")
    async def versions(request: Request, subject: str, deleted: str | None = None) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject)
            found = await store.read(lambda s: s.versions(subject, deleted=_bool(deleted)))
            return answer([v.version for v in found])

        return await run(request, go)

    @router.get("/subjects/{subject}/versions/{version}", summary="One version of a subject")
    async def get_version(
        request: Request, subject: str, version: str, deleted: str | None = None, format: str | None = None
    ) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject)

            def get(state: RegistryState) -> dict[str, Any]:
                v = state.version(subject, version, deleted=_bool(deleted))
                return version_doc(state, v, format)

            def warm(state: RegistryState) -> None:  # protoc off the loop
                if format == "serialized":
                    state.parsed(state.version(subject, version, deleted=_bool(deleted)))

            return answer(await store.read(get, warm))

        return await run(request, go)

    @router.get("/subjects/{subject}/versions/{version}/schema", summary="One version's schema text")
    async def get_version_schema(request: Request, subject: str, version: str) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject)
            v = await store.read(lambda s: s.version(subject, version))
            return PlainTextResponse(v.schema, media_type=MEDIA)

        return await run(request, go)

    @router.get("/subjects/{subject}/versions/{version}/referencedby", summary="Ids referencing a version")
    async def referenced_by(request: Request, subject: str, version: str) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject)

            def get(state: RegistryState) -> list[int]:
                return state.referenced_by(subject, state.version(subject, version).version)

            return answer(await store.read(get))

        return await run(request, go)

    @router.post("/subjects/{subject}/versions", summary="Register a schema under a subject")
    async def register(request: Request, subject: str) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject, write=True)
            doc = await _body(request)
            st, text, refs = _schema_fields(doc)
            sid = doc.get("id")
            ver = doc.get("version")

            def write(state: RegistryState) -> tuple[int, list[ops.Record]]:
                return ops.register(
                    state,
                    subject,
                    st,
                    text,
                    refs,
                    schema_id=sid if isinstance(sid, int) else None,
                    version=ver if isinstance(ver, int) else None,
                )

            new_id = await store.write(write, lambda s: ops.warm(s, subject, st, text, refs))
            return answer({"id": new_id})

        return await run(request, go)

    @router.post("/subjects/{subject}", summary="Look a schema up under a subject")
    async def lookup(request: Request, subject: str, deleted: str | None = None) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject)
            doc = await _body(request)
            st, text, refs = _schema_fields(doc)

            def get(state: RegistryState) -> dict[str, Any]:
                return version_doc(state, ops.lookup(state, subject, st, text, refs, deleted=_bool(deleted)))

            return answer(await store.read(get, lambda s: ops.warm(s, subject, st, text, refs)))

        return await run(request, go)

    @router.delete("/subjects/{subject}", summary="Delete a subject (soft; then permanent=true)")
    async def delete_subject(request: Request, subject: str, permanent: str | None = None) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject, write=True)
            gone = await store.write(lambda s: ops.delete_subject(s, subject, permanent=_bool(permanent)))
            return answer(gone)

        return await run(request, go)

    @router.delete(
        "/subjects/{subject}/versions/{version}", summary="Delete a version (soft; then permanent)"
    )
    async def delete_version(
        request: Request, subject: str, version: str, permanent: str | None = None
    ) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject, write=True)
            parse_version(version)
            gone = await store.write(
                lambda s: ops.delete_version(s, subject, version, permanent=_bool(permanent))
            )
            return answer(gone)

        return await run(request, go)

    def config_routes(path: str, with_subject: bool) -> None:
        @router.get(path, summary="Compatibility level" + (" of a subject" if with_subject else " (global)"))
        async def get_config(
            request: Request, subject: str | None = None, defaultToGlobal: str | None = None
        ) -> Response:
            async def go(store: SchemaStore) -> Response:
                need_opt(request, subject, write=False)

                def get(state: RegistryState) -> dict[str, str]:
                    if subject is not None and subject not in state.configs and not _bool(defaultToGlobal):
                        if not state.has_subject(subject, deleted=True):
                            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
                        raise RegistryError(
                            404,
                            40408,
                            f"Subject '{subject}' does not have subject-level compatibility configured",
                        )
                    return {"compatibilityLevel": state.compatibility(subject)}

                return answer(await store.read(get))

            return await run(request, go)

        @router.put(path, summary="Set the compatibility level" + (" of a subject" if with_subject else ""))
        async def put_config(request: Request, subject: str | None = None) -> Response:
            async def go(store: SchemaStore) -> Response:
                need_opt(request, subject, write=True)
                doc = await _body(request)
                level = await store.write(lambda s: ops.set_config(s, subject, doc.get("compatibility")))
                return answer({"compatibility": level})

            return await run(request, go)

        @router.delete(
            path, summary="Remove the compatibility level" + (" of a subject" if with_subject else "")
        )
        async def delete_config(request: Request, subject: str | None = None) -> Response:
            async def go(store: SchemaStore) -> Response:
                need_opt(request, subject, write=True)
                old = await store.write(lambda s: ops.delete_config(s, subject))
                return answer({"compatibilityLevel": old})

            return await run(request, go)

    config_routes("/config", False)
    config_routes("/config/{subject}", True)

    def mode_routes(path: str, with_subject: bool) -> None:
        @router.get(path, summary="Mode" + (" of a subject" if with_subject else " (global)"))
        async def get_mode(
            request: Request, subject: str | None = None, defaultToGlobal: str | None = None
        ) -> Response:
            async def go(store: SchemaStore) -> Response:
                need_opt(request, subject, write=False)

                def get(state: RegistryState) -> dict[str, str]:
                    if subject is not None and subject not in state.modes and not _bool(defaultToGlobal):
                        raise RegistryError(
                            404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
                        )
                    return {"mode": state.mode(subject)}

                return answer(await store.read(get))

            return await run(request, go)

        @router.put(path, summary="Set the mode" + (" of a subject" if with_subject else ""))
        async def put_mode(
            request: Request, subject: str | None = None, force: str | None = None
        ) -> Response:
            async def go(store: SchemaStore) -> Response:
                need_opt(request, subject, write=True)
                doc = await _body(request)
                mode = await store.write(
                    lambda s: ops.set_mode(s, subject, doc.get("mode"), force=_bool(force))
                )
                return answer({"mode": mode})

            return await run(request, go)

        if with_subject:

            @router.delete(path, summary="Remove the mode of a subject")
            async def delete_mode(request: Request, subject: str) -> Response:
                async def go(store: SchemaStore) -> Response:
                    need(request, subject, write=True)
                    old = await store.write(lambda s: ops.delete_mode(s, subject))
                    return answer({"mode": old})

                return await run(request, go)

    mode_routes("/mode", False)
    mode_routes("/mode/{subject}", True)

    async def compat(request: Request, subject: str, version: str | None, verbose: str | None) -> Response:
        async def go(store: SchemaStore) -> Response:
            need(request, subject)
            doc = await _body(request)
            st, text, refs = _schema_fields(doc)
            if version is not None:
                parse_version(version)
            problems = await store.read(
                lambda s: ops.test_compatibility(s, subject, version, st, text, refs),
                lambda s: ops.warm(s, subject, st, text, refs),
            )
            out: dict[str, Any] = {"is_compatible": not problems}
            if _bool(verbose):
                out["messages"] = problems
            return answer(out)

        return await run(request, go)

    @router.post("/compatibility/subjects/{subject}/versions/{version}", summary="Test against a version")
    async def compat_version(
        request: Request, subject: str, version: str, verbose: str | None = None
    ) -> Response:
        return await compat(request, subject, version, verbose)

    @router.post("/compatibility/subjects/{subject}/versions", summary="Test against the subject's versions")
    async def compat_all(request: Request, subject: str, verbose: str | None = None) -> Response:
        return await compat(request, subject, None, verbose)

    return router
