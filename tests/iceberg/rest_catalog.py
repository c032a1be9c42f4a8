"""A small Iceberg REST catalog for the tests: the REST spec's namespace and table endpoints
(config, namespaces, create/load/exists/commit/rename/drop table) answered by pyiceberg's
SQL catalog on SQLite, run as its own process so a test can kill and restart it.

No Iceberg REST catalog server installs offline here (the reference one is a Java test
fixture with Jetty and Hadoop; Polaris, Lakekeeper, Gravitino are services), so this is
the most faithful double at hand: the client side is pyiceberg's own ``RestCatalog``
unchanged, the commit is pyiceberg's own requirement checks and metadata writing
(``SqlCatalog.commit_table``), conflicts answer 409 as the spec says. What it does not do:
OAuth2 (a bearer token is accepted and ignored), credential vending, views, scan planning.

    python -m tests.iceberg.rest_catalog --port PORT --db catalog.db --warehouse file:///...
"""

from __future__ import annotations

import argparse
import json
import re
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pyiceberg.catalog.rest import CreateTableRequest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table import CommitTableRequest

_TABLE = re.compile(r"/v1/namespaces/([^/]+)/tables/([^/]+)")
_TABLES = re.compile(r"/v1/namespaces/([^/]+)/tables")
_NAMESPACE = re.compile(r"/v1/namespaces/([^/]+)")


def _ns(part: str) -> tuple[str, ...]:
    return tuple(urllib.parse.unquote(part).split("\x1f"))


def _name(part: str) -> str:
    return urllib.parse.unquote(part)


class _Handler(BaseHTTPRequestHandler):
    catalog: SqlCatalog

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, code: int, kind: str, message: str) -> None:
        self._send(code, {"error": {"message": message, "type": kind, "code": code}})

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def _table(self, table: Any) -> dict[str, Any]:
        return {
            "metadata-location": table.metadata_location,
            "metadata": json.loads(table.metadata.model_dump_json(by_alias=True, exclude_none=True)),
            "config": {},
        }

    def _route(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        c = self.catalog
        try:
            if path == "/v1/config" and self.command == "GET":
                return self._send(200, {"defaults": {}, "overrides": {}})
            if path == "/v1/tables/rename" and self.command == "POST":
                body = self._body()
                src, dst = body["source"], body["destination"]
                c.rename_table((*src["namespace"], src["name"]), (*dst["namespace"], dst["name"]))
                return self._send(204)
            if path == "/v1/namespaces":
                if self.command == "POST":
                    body = self._body()
                    c.create_namespace(tuple(body["namespace"]), body.get("properties", {}))
                    return self._send(200, {"namespace": body["namespace"], "properties": {}})
                return self._send(200, {"namespaces": [list(n) for n in c.list_namespaces()]})
            if m := _TABLE.fullmatch(path):
                ident = (*_ns(m[1]), _name(m[2]))
                if self.command == "HEAD":
                    return self._send(204 if c.table_exists(ident) else 404)
                if self.command == "GET":
                    return self._send(200, self._table(c.load_table(ident)))
                if self.command == "DELETE":
                    c.drop_table(ident)
                    return self._send(204)
                if self.command == "POST":
                    req = CommitTableRequest.model_validate(self._body())
                    resp = c.commit_table(c.load_table(ident), req.requirements, req.updates)
                    return self._send(
                        200,
                        {
                            "metadata-location": resp.metadata_location,
                            "metadata": json.loads(
                                resp.metadata.model_dump_json(by_alias=True, exclude_none=True)
                            ),
                        },
                    )
            if m := _TABLES.fullmatch(path):
                ns = _ns(m[1])
                if self.command == "POST":
                    req = CreateTableRequest.model_validate(self._body())
                    kwargs: dict[str, Any] = {"location": req.location, "properties": req.properties}
                    if req.partition_spec is not None:
                        kwargs["partition_spec"] = req.partition_spec
                    if req.write_order is not None:
                        kwargs["sort_order"] = req.write_order
                    table = c.create_table((*ns, req.name), req.table_schema, **kwargs)
                    return self._send(200, self._table(table))
                ids = [{"namespace": list(t[:-1]), "name": t[-1]} for t in c.list_tables(ns)]
                return self._send(200, {"identifiers": ids})
            if m := _NAMESPACE.fullmatch(path):
                ns = _ns(m[1])
                if self.command == "HEAD":
                    return self._send(204 if c.namespace_exists(ns) else 404)
                return self._send(200, {"namespace": list(ns), "properties": c.load_namespace_properties(ns)})
            return self._error(404, "NotFound", f"no route {self.command} {path}")
        except (NoSuchTableError, NoSuchNamespaceError) as e:
            kind = "NoSuchTableException" if isinstance(e, NoSuchTableError) else "NoSuchNamespaceException"
            return self._error(404, kind, str(e))
        except (NamespaceAlreadyExistsError, TableAlreadyExistsError) as e:
            return self._error(409, "AlreadyExistsException", str(e))
        except CommitFailedException as e:
            return self._error(409, "CommitFailedException", str(e))

    do_GET = do_POST = do_HEAD = do_DELETE = _route


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--warehouse", required=True)
    args = ap.parse_args()
    _Handler.catalog = SqlCatalog("rest-double", uri=f"sqlite:///{args.db}", warehouse=args.warehouse)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
