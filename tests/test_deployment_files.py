"""docker-compose.yml and infra/ cannot run here (no Docker engine); validate their structure."""

from __future__ import annotations

from pathlib import Path

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
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in broker["command"])
    cfg = load_config(
        env={k: v for k, v in env.items() if k.startswith("STRATA_")},
        overrides={k.replace("-", "_"): v for k, v in flags.items()},
    )
    assert cfg.object_store_url == "s3://strata/cluster1"
    assert str(cfg.kafka_listen) == "0.0.0.0:9092"


def test_dockerfile_installs_the_package_and_runs_serve() -> None:
    text = (ROOT / "infra" / "Dockerfile").read_text()
    assert "pip install" in text and '"strata", "serve"' in text
    for pkg in ("hot", "tiering", "api", "spark"):
        assert f"COPY {pkg} ./{pkg}" in text
