"""``strata schemas list|get|register|delete|compat``: the schema registry of a running
broker, through its registry listener (Confluent's REST API, docs/schema-registry.md)."""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click

from api.cli.common import emit, fail, output_option, print_table

MEDIA = "application/vnd.schemaregistry.v1+json"


class Registry:
    def __init__(self, url: str, user: str | None, token: str | None, tls_ca: str | None) -> None:
        if not url.startswith(("http://", "https://")):
            fail(f"--registry: expected an http:// or https:// URL, got {url!r}")
        self.url = url.rstrip("/")
        self.headers = {"Accept": MEDIA}
        if user is not None:
            password = os.environ.get("STRATA_SASL_PASSWORD")
            if password is None:
                fail("--user needs the password in $STRATA_SASL_PASSWORD")
            cred = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {cred}"
        elif token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.context = ssl.create_default_context(cafile=tls_ca) if tls_ca else None

    def call(self, method: str, path: str, body: Any = None, *, allow: tuple[int, ...] = ()) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = MEDIA
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.context) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                doc = json.loads(exc.read())
            except ValueError:
                doc = {"error_code": exc.code, "message": exc.reason}
            if exc.code in allow:
                return doc
            fail(f"{self.url}{path}: HTTP {exc.code} (error {doc.get('error_code')}): {doc.get('message')}")
        except urllib.error.URLError as exc:
            fail(f"cannot reach the schema registry at {self.url}: {exc.reason}")


def _q(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def registry_options(f: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--registry",
                envvar="STRATA_SCHEMA_REGISTRY_URL",
                default="http://127.0.0.1:8081",
                show_default=True,
                metavar="URL",
                help="The broker's schema registry listener ($STRATA_SCHEMA_REGISTRY_URL).",
            ),
            click.option(
                "--user", metavar="NAME", help="Basic auth user; password in $STRATA_SASL_PASSWORD."
            ),
            click.option(
                "--token", envvar="STRATA_TOKEN", metavar="TOKEN", help="Bearer token ($STRATA_TOKEN)."
            ),
            click.option("--tls-ca", metavar="PEM", help="CA of an https registry's certificate."),
        ]
    ):
        f = option(f)
    return f


def _client(registry: str, user: str | None, token: str | None, tls_ca: str | None) -> Registry:
    return Registry(registry, user, token, tls_ca)


def _schema_body(file: str, schema_type: str, references: tuple[str, ...]) -> dict[str, Any]:
    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    body: dict[str, Any] = {"schema": text}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    refs = []
    for r in references:
        try:
            name, rest = r.split("=", 1)
            subject, version = rest.rsplit(":", 1)
            refs.append({"name": name, "subject": subject, "version": int(version)})
        except ValueError:
            fail(f"--reference: expected NAME=SUBJECT:VERSION, got {r!r}")
    if refs:
        body["references"] = refs
    return body


type_option = click.option(
    "--type",
    "schema_type",
    type=click.Choice(["AVRO", "JSON", "PROTOBUF"], case_sensitive=False),
    default="AVRO",
    show_default=True,
)
reference_option = click.option(
    "--reference", "references", multiple=True, metavar="NAME=SUBJECT:VERSION", help="A schema reference."
)


@click.group()
def schemas() -> None:
    """Subjects and schemas of the built-in schema registry."""


@schemas.command("list")
@click.option("--deleted", is_flag=True, help="Include soft-deleted subjects.")
@registry_options
@output_option
def schemas_list(deleted: bool, output: str, **conn: Any) -> None:
    """List subjects with their versions and latest schema id."""
    r = _client(**conn)
    flag = "?deleted=true" if deleted else ""
    rows = []
    for s in r.call("GET", f"/subjects{flag}"):
        versions = r.call("GET", f"/subjects/{_q(s)}/versions{flag}")
        latest = r.call("GET", f"/subjects/{_q(s)}/versions/{versions[-1]}{flag}")
        rows.append(
            {
                "subject": s,
                "versions": versions,
                "latest_id": latest["id"],
                "type": latest.get("schemaType", "AVRO"),
            }
        )
    if output == "json":
        emit(output, rows, "")
    elif not rows:
        click.echo("no subjects")
    else:
        print_table(
            None,
            ["SUBJECT", "TYPE", "VERSIONS", "LATEST-ID"],
            [[x["subject"], x["type"], ",".join(map(str, x["versions"])), x["latest_id"]] for x in rows],
        )


@schemas.command("get")
@click.argument("subject", required=False)
@click.option("--version", default="latest", show_default=True, help="Version number or latest.")
@click.option("--id", "schema_id", type=int, help="A schema by its id instead of a subject.")
@registry_options
@output_option
def schemas_get(subject: str | None, version: str, schema_id: int | None, output: str, **conn: Any) -> None:
    """Print a subject's version (or a schema by --id)."""
    r = _client(**conn)
    if schema_id is not None:
        doc = r.call("GET", f"/schemas/ids/{schema_id}")
    elif subject is not None:
        doc = r.call("GET", f"/subjects/{_q(subject)}/versions/{urllib.parse.quote(version)}")
    else:
        fail("give a SUBJECT or --id")
    if output == "json":
        emit(output, doc, "")
        return
    head = {k: v for k, v in doc.items() if k != "schema"}
    click.echo(
        " ".join(f"{k}={json.dumps(v) if not isinstance(v, str | int) else v}" for k, v in head.items())
    )
    text = doc["schema"]
    try:
        text = json.dumps(json.loads(text), indent=2)
    except ValueError:
        pass
    click.echo(text)


@schemas.command("register")
@click.argument("subject")
@click.argument("file")
@type_option
@reference_option
@registry_options
@output_option
def schemas_register(
    subject: str, file: str, schema_type: str, references: tuple[str, ...], output: str, **conn: Any
) -> None:
    """Register the schema in FILE (- for stdin) under SUBJECT; prints its id."""
    doc = _client(**conn).call(
        "POST", f"/subjects/{_q(subject)}/versions", _schema_body(file, schema_type, references)
    )
    emit(output, doc, f"registered under {subject}: id {doc['id']}")


@schemas.command("delete")
@click.argument("subject")
@click.option("--version", help="Delete this version only (a number or latest).")
@click.option("--permanent", is_flag=True, help="Delete for good (after a soft delete).")
@registry_options
@output_option
def schemas_delete(subject: str, version: str | None, permanent: bool, output: str, **conn: Any) -> None:
    """Soft-delete a subject (or one --version); --permanent after that removes it."""
    path = f"/subjects/{_q(subject)}"
    if version is not None:
        path += f"/versions/{urllib.parse.quote(version)}"
    doc = _client(**conn).call("DELETE", path + ("?permanent=true" if permanent else ""))
    kind = "permanently deleted" if permanent else "deleted"
    emit(output, doc, f"{kind}: {subject} version(s) {doc}")


@schemas.command("compat")
@click.argument("subject")
@click.argument("file")
@click.option("--version", default="latest", show_default=True, help="Version to test against, or all.")
@type_option
@reference_option
@registry_options
@output_option
def schemas_compat(
    subject: str,
    file: str,
    version: str,
    schema_type: str,
    references: tuple[str, ...],
    output: str,
    **conn: Any,
) -> None:
    """Test FILE against SUBJECT at its compatibility level; exit 1 when incompatible."""
    path = f"/compatibility/subjects/{_q(subject)}/versions"
    if version != "all":
        path += f"/{urllib.parse.quote(version)}"
    doc = _client(**conn).call("POST", path + "?verbose=true", _schema_body(file, schema_type, references))
    ok = bool(doc.get("is_compatible"))
    human = "compatible" if ok else "incompatible:\n  " + "\n  ".join(doc.get("messages", []))
    emit(output, doc, human)
    if not ok:
        sys.exit(1)
