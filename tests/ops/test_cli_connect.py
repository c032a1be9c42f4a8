"""The ``strata`` command line as a new user and an operator meet it, run as subprocesses
against real brokers: ``--version`` and ``-h``; a base install (the optional modules made
unimportable) where every command works or names its extra in one line; the same
connection options (-X, a profile file, the shorthand flags) for every command that talks
to a broker, against a SASL_SSL listener; one-line errors, never a traceback."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.security.test_sasl import strata_users
from tests.broker.security.tlslib import Pki, make_pki, server_env
from tests.brokers import ROOT, BrokerProcess

ALICE_PW = "Alice-pw-c41e77"
MECH = "SCRAM-SHA-256"

# Everything a base install (`pip install -e .`) lacks: the spark and test extras' modules.
NOT_INSTALLED = (
    "pyarrow", "pyspark", "numpy", "pytest", "hypothesis", "httpx", "kafka", "aiokafka", "snappy",
    "schemathesis", "moto", "yaml", "selenium",
)  # fmt: skip
_BASE_INSTALL = f"""
import runpy, sys
from importlib.abc import MetaPathFinder
class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {set(NOT_INSTALLED)!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, NotInstalled())
sys.argv[0] = "strata"
runpy.run_module("api.cli", run_name="__main__", alter_sys=True)
"""


def strata(
    *args: str, stdin: str | bytes | None = None, env: dict[str, str] | None = None, base: bool = False
) -> subprocess.CompletedProcess[str]:
    """``strata ARGS`` as a user runs it; ``base``: as from a base install."""
    cmd = [sys.executable, "-c", _BASE_INSTALL] if base else [sys.executable, "-m", "api.cli"]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    full_env.update(PYTHONPATH=str(ROOT), HOME=str(ROOT / ".no-home"), **(env or {}))
    r = subprocess.run(
        [*cmd, *args],
        cwd=ROOT,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        env=full_env,
        timeout=120,
    )
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


def one_line_error(r: subprocess.CompletedProcess[str], *texts: str) -> str:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("strata: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr
    for text in texts:
        assert text in r.stderr, r.stderr
    return r.stderr


# -- 1. --version and -h -----------------------------------------------------------------------


def test_version_and_short_help() -> None:
    from importlib.metadata import version

    r = strata("--version")
    assert r.returncode == 0 and r.stdout == f"strata {version('strata')}\n", r
    top = strata("-h")
    assert top.returncode == 0 and "Usage:" in top.stdout and "--version" in top.stdout
    for args in (("topic", "-h"), ("topic", "create", "-h"), ("groups", "describe", "-h"), ("serve", "-h")):
        r = strata(*args)
        assert r.returncode == 0 and r.stdout.startswith("Usage:"), (args, r.stderr)
    assert "-X KEY=VALUE" in strata("produce", "-h").stdout


# -- 2. a base install ---------------------------------------------------------------------------


def _commands(prefix: tuple[str, ...], help_text: str) -> Iterator[tuple[str, ...]]:
    lines = help_text.split("Commands:\n", 1)
    if len(lines) == 1:
        yield prefix
        return
    for line in lines[1].splitlines():
        if line.startswith("  ") and line.strip():
            name = line.split()[0]
            sub = strata(*prefix, name, "-h", base=True)
            assert sub.returncode == 0, (prefix, name, sub.stderr)
            yield from _commands((*prefix, name), sub.stdout)


def test_base_install_every_command(tmp_path: Path) -> None:
    top = strata("-h", base=True)
    assert top.returncode == 0, top.stderr
    commands = list(_commands((), top.stdout))
    assert ("produce",) in commands and ("topic", "create") in commands and len(commands) > 25
    # the one command that needs an extra says which, in one line
    r = strata("export", "--topic", "t", "--out", str(tmp_path / "x"), "--data-dir", str(tmp_path), base=True)
    # a checkout: its editable install with the extra, as the README installs
    one_line_error(r, "pyarrow", "the spark extra", f"pip install -e '{ROOT}[spark]'")

    b = BrokerProcess(tmp_path / "data").start()
    try:
        created = strata("topic", "create", "base", "-p", "2", "-b", b.bootstrap, base=True)
        assert created.returncode == 0, created.stderr
        produced = strata("produce", "base", "-b", b.bootstrap, "-p", "1", stdin="a\nb\n", base=True)
        assert produced.returncode == 0 and produced.stdout.startswith("produced 2 records"), produced.stderr
        got = strata("consume", "base", "-b", b.bootstrap, "--from-beginning", "-n", "2", base=True)
        assert got.returncode == 0 and got.stdout.splitlines() == ["a", "b"], got.stderr
        bench = strata("bench", "-n", "200", "-b", b.bootstrap, "-o", "json", base=True)
        assert bench.returncode == 0 and json.loads(bench.stdout)["records"] == 200, bench.stderr
        for admin in (
            ("topic", "alter-config", "base", "--set", "retention.ms=60000"),
            ("topic", "trim", "base", "-p", "1", "--offset", "1", "--no-confirm"),
            ("topic", "add-partitions", "base", "-n", "1"),
            ("cluster", "health", "--fail-if-unhealthy"),
            ("cluster", "info"),
        ):
            r = strata(*admin, "-b", b.bootstrap, base=True)
            assert r.returncode == 0, (admin, r.stderr)
    finally:
        b.kill()
    # commands on a data directory need no extra either (check --remote reads the bucket)
    r = strata("check", "--data-dir", str(tmp_path / "data"), "--remote", "-o", "json", base=True)
    assert r.returncode == 0 and json.loads(r.stdout), r.stderr


# -- 3. connection options against SASL_SSL ---------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("cli-sasl")
    added = strata_users(data, "add", "alice", "--password-stdin", stdin=ALICE_PW + "\n")
    assert added.returncode == 0, added.stderr
    b = BrokerProcess(data, env={**server_env(pki), "STRATA_SASL_MECHANISMS": MECH}).start()
    yield b
    b.kill()
    assert ALICE_PW not in b.output()


def _x(pki: Pki, *, password: bool = True) -> list[str]:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECH,
        "sasl.username": "alice",
        "ssl.ca.location": str(pki.ca),
        **({"sasl.password": ALICE_PW} if password else {}),
    }
    return [a for k, v in props.items() for a in ("-X", f"{k}={v}")]


def test_every_broker_command_over_sasl_ssl(secured: BrokerProcess, pki: Pki, tmp_path: Path) -> None:
    b = ["-b", secured.bootstrap]
    x = _x(pki)
    # -X properties, with topic create leaving the replication factor to the broker
    r = strata("topic", "create", "sec", "-p", "2", *b, *x)
    assert r.returncode == 0, r.stderr
    described = strata("topic", "describe", "sec", *b, *x, "-o", "json")
    assert described.returncode == 0 and len(json.loads(described.stdout)["partitions"]) == 2
    r = strata("produce", "sec", *b, *x, "-p", "0", stdin="one\ntwo\n")
    assert r.returncode == 0 and r.stdout.startswith("produced 2 records"), r.stderr
    # a profile file named by $STRATA_CLIENT_CONFIG (unknown keys of the file are ignored
    # where they do not apply), the password from the environment
    profile = tmp_path / "client.properties"
    profile.write_text(
        "# strata profile\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.username=alice\nssl.ca.location={pki.ca}\nclient.id=cli-test\n"
    )
    env = {"STRATA_CLIENT_CONFIG": str(profile), "STRATA_SASL_PASSWORD": ALICE_PW}
    r = strata("consume", "sec", *b, "-g", "cli-sec", "--from-beginning", "-n", "2", env=env)
    assert r.returncode == 0 and r.stdout.splitlines() == ["one", "two"], r.stderr
    listings = (
        ("topic", "list"),
        ("groups", "list"),
        ("groups", "describe", "cli-sec"),
        ("quotas", "describe"),
    )
    for args in listings:
        r = strata(*args, *b, env=env)
        assert r.returncode == 0, (args, r.stderr)
    assert "sec" in strata("topic", "list", *b, env=env).stdout.split()
    # --command-config / -F, password on stdin; bench over the same connection
    r = strata("produce", "sec", *b, "-F", str(profile), "--password-stdin", stdin=f"{ALICE_PW}\nthree\n")
    assert r.returncode == 0 and r.stdout.startswith("produced 1 record ("), r.stderr
    r = strata("bench", "-n", "100", *b, "-F", str(profile), "--password-stdin", stdin=ALICE_PW + "\n")
    assert r.returncode == 0, r.stderr
    r = strata("transactions", "list", *b, "-F", str(profile), "--password-stdin", stdin=ALICE_PW + "\n")
    assert r.returncode == 0, r.stderr
    r = strata("groups", "delete", "cli-sec", *b, *x)
    assert r.returncode == 0, r.stderr
    r = strata("topic", "delete", "sec", *b, *x)
    assert r.returncode == 0, r.stderr
    # a -X key this command does not use, and a wrong password: one line, no secret
    one_line_error(strata("topic", "list", *b, *x, "-X", "linger.ms=5"), "-X linger.ms", "security.protocol")
    wrong = strata("topic", "list", *b, *_x(pki, password=False), "-X", "sasl.password=Wrong-pw-0000")
    assert "Wrong-pw-0000" not in one_line_error(wrong, "invalid user name or password")


def test_plaintext_client_on_a_secured_listener_is_told_why(secured: BrokerProcess) -> None:
    for args in (("topic", "list"), ("groups", "list"), ("produce", "t"), ("consume", "t")):
        r = strata(*args, "-b", secured.bootstrap, stdin="")
        one_line_error(r, "may need TLS or SASL", "-X security.protocol=")


# -- 5. one-line errors ---------------------------------------------------------------------------


def test_one_line_errors(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        bs = ["-b", b.bootstrap]
        for args in (("topic", "describe", "nope"), ("topic", "delete", "nope"), ("produce", "nope"),
                     ("consume", "nope")):  # fmt: skip
            one_line_error(strata(*args, *bs, stdin="x\n"), "topic 'nope' does not exist")
        assert strata("topic", "create", "t", *bs).returncode == 0
        # input that is not UTF-8 is produced byte for byte; JSON output carries it in base64
        r = strata("produce", "t", *bs, "-K", ":", stdin=b"k\xff:ok\nk:\xff\xfe raw\n")
        assert r.returncode == 0, r.stderr
        r = strata("consume", "t", *bs, "-n", "2", "-J")
        docs = [json.loads(line) for line in r.stdout.splitlines()]
        assert docs[0]["value"] == "ok" and docs[0]["key"] == "k\\xff"
        assert base64.b64decode(docs[1]["value_base64"]) == b"\xff\xfe raw"
        one_line_error(strata("topic", "list", "-b", "127.0.0.1:http"), "--bootstrap", "not a number")
        one_line_error(strata("topic", "list", "-b", "localhost"), "expected HOST:PORT")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free = s.getsockname()[1]
        one_line_error(strata("topic", "list", "-b", f"127.0.0.1:{free}"), "connection refused")
        # a port clash in serve names the address
        taken = f"127.0.0.1:{b.kafka_port}"
        r = strata("serve", "--data-dir", str(tmp_path / "d2"), "--kafka-listen", taken, "--http-listen",
                   "127.0.0.1:0")  # fmt: skip
        one_line_error(r, taken)
        taken = f"127.0.0.1:{b.http_port}"
        r = strata("serve", "--data-dir", str(tmp_path / "d2"), "--http-listen", taken, "--kafka-listen",
                   "127.0.0.1:0")  # fmt: skip
        one_line_error(r, f"cannot listen on {taken}", "--http-listen")
        one_line_error(strata("tier", "status", "--http", "ftp://127.0.0.1:1"), "expected an http://")
        one_line_error(strata("topic", "list", "-b", f"http://{b.bootstrap}"), "expected HOST:PORT")
        r = strata("restore", "--data-dir", str(tmp_path / "d3"), "--object-store", "gs://bucket/x")
        one_line_error(r, "--object-store: expected s3://bucket/prefix or file:///absolute/path")
    finally:
        b.kill()


# -- 6. tier status on a TLS listener with authentication; wrong schemes and ports ---------------


def test_tier_status_over_https_with_basic_and_bearer_auth(pki: Pki, tmp_path: Path) -> None:
    data = tmp_path / "https"
    assert strata_users(data, "add", "alice", "--password-stdin", stdin=ALICE_PW + "\n").returncode == 0
    env = {
        **server_env(pki),
        "STRATA_SASL_MECHANISMS": MECH,
        "STRATA_SASL_REST_BASIC_AUTH": "true",
        "STRATA_SASL_REST_BEARER_AUTH": "true",
    }
    b = BrokerProcess(data, env=env).start()
    try:
        url = f"https://127.0.0.1:{b.http_port}"
        status = ("tier", "status", "--http", url, "-o", "json")
        # basic auth: the user, its password from the environment, the CA
        r = strata(
            *status, "--tls-ca", str(pki.ca), "--sasl-user", "alice", env={"STRATA_SASL_PASSWORD": ALICE_PW}
        )
        assert r.returncode == 0 and json.loads(r.stdout)["topics"] == [], r.stderr
        # the same from a profile file, the password on stdin
        profile = tmp_path / "client.properties"
        profile.write_text(f"sasl.username=alice\nssl.ca.location={pki.ca}\n")
        r = strata(*status, "-F", str(profile), "--password-stdin", stdin=ALICE_PW + "\n")
        assert r.returncode == 0, r.stderr
        # a bearer token from $STRATA_TOKEN
        made = strata("tokens", "create", "--user", "alice", "--data-dir", str(data), "-o", "json")
        assert made.returncode == 0, made.stderr
        token = json.loads(made.stdout)["token"]
        r = strata(*status, "-X", f"ssl.ca.location={pki.ca}", env={"STRATA_TOKEN": token})
        assert r.returncode == 0, r.stderr
        assert ALICE_PW not in r.stdout + r.stderr and token not in r.stdout + r.stderr

        one_line_error(strata(*status, "--tls-ca", str(pki.ca)), "HTTP 401", "--sasl-user", "--token")
        one_line_error(
            strata(*status, "--sasl-user", "alice", env={"STRATA_SASL_PASSWORD": ALICE_PW}),
            "TLS handshake failed: CERTIFICATE_VERIFY_FAILED",
        )
        wrong = strata(
            *status, "--tls-ca", str(pki.ca), "--sasl-user", "alice", env={"STRATA_SASL_PASSWORD": "Nope-0"}
        )
        assert "Nope-0" not in one_line_error(wrong, "HTTP 401")
        # http:// on an https listener
        one_line_error(
            strata("tier", "status", "--http", f"http://127.0.0.1:{b.http_port}"), "expected the broker's"
        )
    finally:
        b.kill()


def test_wrong_scheme_or_port_says_what_was_expected(broker: BrokerProcess) -> None:
    http_port = broker.http_url.rsplit(":", 1)[1]
    # https:// on a plaintext listener, the Kafka port given as the HTTP one and the reverse
    one_line_error(
        strata("tier", "status", "--http", f"https://127.0.0.1:{http_port}"), "does not speak TLS", "http://"
    )
    one_line_error(
        strata("tier", "status", "--http", f"http://{broker.bootstrap}"),
        "without an HTTP answer",
        "Kafka port",
    )
    for args in (("topic", "list"), ("consume", "t", "-e"), ("cluster", "health")):
        one_line_error(strata(*args, "-b", f"127.0.0.1:{http_port}"), "answered in HTTP", "Kafka listener")
