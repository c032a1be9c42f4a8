"""How every ``strata`` command that talks to a broker's Kafka listener connects: one set of
options, one way to build the client properties, one way to open a client.

Client properties are librdkafka-named (as kcat and rpk take them), from lowest to highest
precedence:

1. the profile file: ``--command-config FILE`` (``-F``, kcat's flag), else the file named by
   ``$STRATA_CLIENT_CONFIG``, else ``~/.config/strata/client.properties`` when it exists
   (``key=value`` lines, ``#`` comments);
2. ``-X key=value`` (repeatable);
3. the shorthand flags ``--security-protocol``, ``--sasl-mechanism``, ``--sasl-user``,
   ``--tls-ca``;
4. the SASL password, when no property gives it: ``--password-stdin`` or
   ``$STRATA_SASL_PASSWORD``.

Commands served by Strata's own client (kclient) use the security properties
(kclient.security.KEYS); ``produce``/``consume``/``bench`` hand every property to
librdkafka. A ``-X`` key neither understands is refused, naming the key; unknown keys of a
profile file are ignored there (one profile serves both kinds of command). A password never
appears in output or error messages.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from api.cli.common import SECURED, fail, output_option
from hot.errors import StrataError

if TYPE_CHECKING:
    from kclient import KafkaClient
    from kclient.security import ClientSecurity
    from kwire.address import HostPort

DEFAULT_PROFILE: Final = Path("~/.config/strata/client.properties")

_STDIN_PASSWORD: list[str] = []


def connection_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The broker and client security options of every command that talks to a broker."""
    opts = [
        click.option(
            "--bootstrap",
            "-b",
            default="127.0.0.1:9092",
            show_default=True,
            metavar="HOST:PORT",
            help="Broker.",
        ),
        click.option(
            "-X",
            "properties",
            multiple=True,
            metavar="KEY=VALUE",
            help="Client property, librdkafka-named: security.protocol, sasl.mechanism, sasl.username, "
            "sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location, "
            "ssl.endpoint.identification.algorithm (repeatable).",
        ),
        click.option(
            "--command-config",
            "-F",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Client properties file, key=value lines [$STRATA_CLIENT_CONFIG, else "
            "~/.config/strata/client.properties if present].",
        ),
        click.option(
            "--security-protocol",
            type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], case_sensitive=False),
        ),
        click.option("--sasl-mechanism", type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])),
        click.option("--sasl-user", help="SASL user; the password from $STRATA_SASL_PASSWORD or stdin."),
        click.option(
            "--password-stdin", is_flag=True, help="Read the SASL password from stdin's first line."
        ),
        click.option(
            "--tls-ca", type=click.Path(dir_okay=False), help="CA file for the broker's certificate."
        ),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def security_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The connection options and --output, shared by ``strata acl``, ``quotas`` and
    ``transactions`` (here, not in api.cli.acl, so that ``quotas`` and ``transactions``
    start without importing the ACL codec)."""
    return connection_options(output_option(fn))


def http_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The security options of commands that read a broker's HTTP listener (``tier
    status``): the same properties, file and shorthands as the Kafka commands, used as
    TLS settings for an https:// URL (ssl.*) and as basic-auth credentials (sasl.username
    and its password), or a bearer token."""
    opts = [
        click.option(
            "-X",
            "properties",
            multiple=True,
            metavar="KEY=VALUE",
            help="Client property: ssl.ca.location, ssl.certificate.location, ssl.key.location, "
            "ssl.endpoint.identification.algorithm; sasl.username, sasl.password for basic auth.",
        ),
        click.option(
            "--command-config",
            "-F",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Client properties file [$STRATA_CLIENT_CONFIG, else ~/.config/strata/client.properties].",
        ),
        click.option(
            "--sasl-user", help="Basic-auth user; the password from $STRATA_SASL_PASSWORD or stdin."
        ),
        click.option(
            "--password-stdin", is_flag=True, help="Read the basic-auth password from stdin's first line."
        ),
        click.option(
            "--token",
            envvar="STRATA_TOKEN",
            help="Bearer token (strata tokens create) [$STRATA_TOKEN]; kept off the command line best.",
        ),
        click.option(
            "--tls-ca", type=click.Path(dir_okay=False), help="CA file for the listener's certificate."
        ),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def http_access(kw: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    """(an SSL context for https:// URLs, the Authorization header if any) from a
    command's http_options: the token as a bearer, else sasl.username and its password as
    basic auth."""
    import base64

    from kclient.security import ClientSecurity

    props = client_properties(kw)
    if props.get("sasl.username") and "sasl.password" not in props:
        # a SASL protocol makes client_properties look for the password (stdin, environment)
        props = client_properties({**kw, "security_protocol": "SASL_SSL"})
    source = props.pop("_source")
    props.pop("security.protocol", None)  # HTTP's TLS follows the URL's scheme
    try:
        sec = ClientSecurity.from_properties(props, where=source)
        context = sec.ssl_context()
    except StrataError as exc:
        fail(str(exc))
    headers: dict[str, str] = {}
    if kw.get("token"):
        headers["Authorization"] = f"Bearer {kw['token']}"
    elif sec.username:
        if sec.password is None:
            fail(
                f"basic auth as {sec.username}: give the password ($STRATA_SASL_PASSWORD or --password-stdin)"
            )
        pair = f"{sec.username}:{sec.password}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return context, headers


def _profile(kw: dict[str, Any]) -> tuple[dict[str, str], str | None]:
    from kclient.security import read_properties

    path: Path | None = kw.get("command_config")
    if path is None and os.environ.get("STRATA_CLIENT_CONFIG"):
        path = Path(os.environ["STRATA_CLIENT_CONFIG"])
    if path is None and DEFAULT_PROFILE.expanduser().is_file():
        path = DEFAULT_PROFILE.expanduser()
    if path is None:
        return {}, None
    try:
        return read_properties(path), str(path)
    except StrataError as exc:
        fail(str(exc))
    raise AssertionError  # fail exits


def client_properties(kw: dict[str, Any], *, librdkafka: bool = False) -> dict[str, str]:
    """The merged client properties of a command's options (module docstring).

    Without ``librdkafka`` (kclient commands) only the security keys are kept, and a
    ``-X`` key outside them is an error."""
    from kclient.security import KEYS

    props, source = _profile(kw)
    if not librdkafka:
        props = {k: v for k, v in props.items() if k in KEYS}
    for item in kw.get("properties") or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            fail(f"-X expects KEY=VALUE, got {item.split('=')[0]!r}")  # not the value: it may be secret
        if not librdkafka and key not in KEYS:
            fail(f"-X {key}: not a property this command uses (it takes: {', '.join(KEYS)})")
        props[key] = value.strip()
    for key, opt in (
        ("security.protocol", "security_protocol"),
        ("sasl.mechanism", "sasl_mechanism"),
        ("sasl.username", "sasl_user"),
        ("ssl.ca.location", "tls_ca"),
    ):
        if kw.get(opt):
            props[key] = str(kw[opt])
    if kw.get("sasl_user") and "security.protocol" not in props:
        props["security.protocol"] = "SASL_SSL" if "ssl.ca.location" in props else "SASL_PLAINTEXT"
    if "sasl.password" not in props and props.get("security.protocol", "").upper().startswith("SASL"):
        if kw.get("password_stdin"):
            if not _STDIN_PASSWORD:  # read once: a command may build its properties twice
                # from the binary buffer: text reading would buffer past the line, and
                # `produce` reads its records from the same stdin after it
                line = sys.stdin.buffer.readline().decode("utf-8", errors="replace")
                _STDIN_PASSWORD.append(line.rstrip("\r\n"))
            props["sasl.password"] = _STDIN_PASSWORD[0]
        elif os.environ.get("STRATA_SASL_PASSWORD"):
            props["sasl.password"] = os.environ["STRATA_SASL_PASSWORD"]
    props["_source"] = source or "options"
    return props


def client_security(kw: dict[str, Any]) -> ClientSecurity:
    from kclient.security import ClientSecurity

    props = client_properties(kw)
    source = props.pop("_source")
    try:
        return ClientSecurity.from_properties(props, where=source)
    except StrataError as exc:
        fail(str(exc))
    raise AssertionError


def _open(addr: HostPort, security: ClientSecurity) -> KafkaClient:
    from kclient import KafkaClient

    try:
        return KafkaClient.connect(addr, security=security)
    except ConnectionRefusedError:
        raise StrataError(
            f"cannot connect to {addr}: connection refused (is a broker listening there?)"
        ) from None
    except OSError as exc:
        raise StrataError(f"cannot connect to {addr}: {exc.strerror or exc}") from None


class Connection:
    """A command's connection settings: ``client()`` opens the --bootstrap broker,
    ``other(addr)`` any other broker of the cluster with the same security. A plaintext
    client whose connection is closed is told the listener may need TLS or SASL
    (api.cli.common.explain, applied by ``fail``)."""

    def __init__(self, kw: dict[str, Any]) -> None:
        from kwire.address import HostPort

        bootstrap: str = kw["bootstrap"].split(",")[0].strip()
        if "://" in bootstrap:
            fail(f"--bootstrap: expected HOST:PORT of a Kafka listener (no URL scheme), got {bootstrap!r}")
        self.security = client_security(kw)
        SECURED[0] = self.security.tls or self.security.sasl
        try:
            self.addr = HostPort.parse(bootstrap, setting="--bootstrap")
        except StrataError as exc:
            fail(str(exc))

    def client(self) -> KafkaClient:
        try:
            return _open(self.addr, self.security)
        except StrataError as exc:
            fail(str(exc))
        raise AssertionError

    def other(self, addr: HostPort) -> KafkaClient:
        return _open(addr, self.security)


def connect(kw: dict[str, Any]) -> KafkaClient:
    """A client of the --bootstrap broker with the command's connection options."""
    return Connection(kw).client()


def connect_all(kw: dict[str, Any]) -> tuple[KafkaClient, Callable[[HostPort], KafkaClient]]:
    """A client of the --bootstrap broker, and how to connect to any other broker of the
    cluster with the same settings (commands that ask each broker or a coordinator)."""
    conn = Connection(kw)
    return conn.client(), conn.other


def librdkafka_config(kw: dict[str, Any]) -> dict[str, str]:
    """confluent-kafka configuration for produce/consume/bench: every property, the
    bootstrap servers from --bootstrap (checked as the other commands check them)."""
    security = client_security(kw)
    SECURED[0] = security.tls or security.sasl
    props = client_properties(kw, librdkafka=True)
    props.pop("_source")
    if "sasl.mechanism" in props:
        props["sasl.mechanisms"] = props.pop("sasl.mechanism")
    return {**props, "bootstrap.servers": kw["bootstrap"]}
