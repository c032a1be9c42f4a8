"""Deployment files (no container engine or cluster runs here): docker-compose.yml, the
Prometheus and Grafana provisioning, the Kubernetes manifests and the sample config are
validated for structure, and against a real broker where they name its endpoints or
metrics."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from broker.config import load_config
from kwire.address import HostPort
from tests.brokers import ROOT, BrokerProcess, create_topic

INFRA = ROOT / "infra"
BROKERS = ("broker1", "broker2", "broker3")


def _compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


def _k8s() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((INFRA / "k8s").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in args)


def test_compose_runs_minio_etcd_three_cluster_brokers_prometheus_grafana() -> None:
    doc = _compose()
    services = doc["services"]
    assert {"minio", "minio-init", "etcd", *BROKERS, "prometheus", "grafana"} <= set(services)
    host_ports: list[str] = []
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        for dep in svc.get("depends_on", []):
            assert dep in services, f"{name} depends on unknown service {dep}"
        for vol in svc.get("volumes", []):
            src = vol.split(":", 1)[0]
            if src.startswith("."):
                assert (ROOT / src).exists(), f"{name}: bind mount of missing {src}"
            else:
                assert src in doc["volumes"], f"{name}: undeclared volume {src}"
        host_ports += [p.split(":")[0] for p in svc.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), "two services publish the same host port"

    ids, advertised, data_volumes = set(), set(), set()
    for name in BROKERS:
        svc = services[name]
        assert (ROOT / svc["build"]["dockerfile"]).is_file()
        assert svc["depends_on"]["etcd"]["condition"] == "service_healthy"
        assert svc["depends_on"]["minio-init"]["condition"] == "service_completed_successfully"
        env = svc["environment"]
        assert svc["command"][0] == "serve"  # the image's entrypoint is `strata`
        flags = _flags(svc["command"][1:])
        cfg = load_config(
            env={k: v for k, v in env.items() if k.startswith("STRATA_")},
            overrides={k.replace("-", "_"): v for k, v in flags.items()},
        )
        assert cfg.cluster is not None and cfg.cluster.etcd == "etcd:2379"
        assert cfg.cluster.inter_broker_listener == f"{name}:9092"
        assert cfg.object_store_url == "s3://strata/cluster1"
        assert env["AWS_ENDPOINT_URL"] == "http://minio:9000"
        ids.add(cfg.broker_id)
        advertised.add(str(cfg.advertised))
        # Containers are told the compose name of the main listener; the host is told the
        # published port of the external listener.
        assert cfg.advertised == HostPort(name, cfg.kafka_listen.port)
        ext, ext_listen = cfg.external_advertised_listener, cfg.external_listen
        assert ext is not None and ext_listen is not None and ext.host == "localhost"
        assert f"{ext.port}:{ext_listen.port}" in svc["ports"]
        assert f"{cfg.http_listen.port}" in " ".join(svc["ports"])
        data_volumes.add(svc["volumes"][0].split(":")[0])
    assert len(ids) == len(advertised) == len(data_volumes) == 3


def test_compose_pins_every_image_and_gates_start_order_on_health() -> None:
    services = _compose()["services"]
    for name, svc in services.items():
        image = svc.get("image", "")
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest", f"{name}: image {image!r} is not pinned"
        deps = svc.get("depends_on", {})
        assert isinstance(deps, dict), f"{name}: depends_on without conditions"
        for dep, how in deps.items():
            condition = how["condition"]
            assert condition in ("service_healthy", "service_completed_successfully"), (name, dep)
            if condition == "service_healthy":
                assert "test" in services[dep].get("healthcheck", {}), f"{dep} has no healthcheck"
            else:
                assert services[dep].get("restart") == "no", f"{dep} is a one-shot job"
    # brokers after etcd and the bucket; Prometheus after every broker; Grafana after Prometheus
    assert set(services["prometheus"]["depends_on"]) == set(BROKERS)
    assert set(services["grafana"]["depends_on"]) == {"prometheus"}
    for name in BROKERS:
        health = services[name]["healthcheck"]
        assert health["test"] == ["CMD", "strata-healthcheck"]  # infra/healthcheck.py in the image
        assert int(health["start_period"].rstrip("m")) >= 5  # recovery before the listener opens


def test_prometheus_scrapes_every_broker_and_grafana_is_provisioned() -> None:
    services = _compose()["services"]
    prom = yaml.safe_load((INFRA / "prometheus.yml").read_text())
    [job] = prom["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    targets = {t for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == {f"{b}:8080" for b in BROKERS}
    assert any(v.startswith("./infra/prometheus.yml:") for v in services["prometheus"]["volumes"])
    # The shipped alert rules are mounted where rule_files says (tests/ops/test_metrics_conventions.py
    # checks the rules themselves).
    mounted = {
        v.split(":")[1]: v.split(":")[0] for v in services["prometheus"]["volumes"] if v.startswith(".")
    }
    assert prom["rule_files"] and all(mounted[f] == "./infra/alerts.yml" for f in prom["rule_files"])

    grafana = services["grafana"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"] if v.startswith(".")}
    ds = yaml.safe_load((INFRA / "grafana/provisioning/datasources/prometheus.yml").read_text())
    [source] = ds["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((INFRA / "grafana/provisioning/dashboards/strata.yml").read_text())
    dash_dir = provider["providers"][0]["options"]["path"]
    assert mounts[dash_dir] == "./infra/grafana/dashboards"
    assert mounts["/etc/grafana/provisioning"] == "./infra/grafana/provisioning"
    dash = json.loads((INFRA / "grafana/dashboards/strata.json").read_text())
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    for p in panels:
        assert p["datasource"]["uid"] == source["uid"], p["title"]
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]


def _exported_names(text: str) -> set[str]:
    """Every sample name the exposition can carry, from its TYPE lines (a family with
    no series yet still declares itself)."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "gauge": ("",),
        "summary": ("_sum", "_count", "_created", ""),
    }
    names: set[str] = set()
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
        # prometheus-client declares counters with their _total suffix.
        base = m.group(1).removesuffix("_total") if m.group(2) == "counter" else m.group(1)
        names.update(base + s for s in suffixes.get(m.group(2), ("",)))
    return names


def test_every_grafana_query_uses_metrics_a_real_broker_exports(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "deploy", 1)
    with urllib.request.urlopen(f"{b.http_url}/healthz", timeout=10) as resp:  # the k8s probe path
        assert resp.status == 200
    with urllib.request.urlopen(f"{b.http_url}/metrics", timeout=10) as resp:
        exported = _exported_names(resp.read().decode())
    dash = json.loads((INFRA / "grafana/dashboards/strata.json").read_text())
    queried = {
        name
        for p in dash["panels"]
        for t in p.get("targets", [])
        for name in re.findall(r"\bstrata_[a-z0-9_]+", t["expr"])
    }
    assert len(queried) >= 20
    # The exact event counters (not only gauges' changes()) are charted.
    assert {
        "strata_isr_shrinks_total",
        "strata_isr_expands_total",
        "strata_leader_elections_total",
        "strata_tiering_remote_read_bytes_total",
        "strata_tiering_remote_read_errors_total",
    } <= queried
    assert queried <= exported, sorted(queried - exported)
    assert b.stop() == 0


def test_kubernetes_statefulset_headless_service_pvc_secret_probes() -> None:
    docs = _k8s()
    for d in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(d), d
        assert d["metadata"]["name"]
    sts = _one(docs, "StatefulSet", "strata")
    spec = sts["spec"]
    headless = _one(docs, "Service", spec["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert spec["replicas"] == 3
    [container] = spec["template"]["spec"]["containers"]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port_names == {"kafka": 9092, "external": 19092, "http": 8080, "registry": 8081}
    for svc in (d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].startswith("strata")):
        # every Service selects these pods (per-pod ones also by the pod name the StatefulSet sets)
        selector = {
            k: v for k, v in svc["spec"]["selector"].items() if k != "statefulset.kubernetes.io/pod-name"
        }
        assert selector and selector.items() <= labels.items(), svc["metadata"]["name"]
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= set(port_names)
    env = {e["name"]: e.get("value") for e in container["env"]}
    cfg = load_config(
        env={k: v for k, v in env.items() if k.startswith("STRATA_") and v and k != "STRATA_CONFIG"}
    )
    assert (cfg.kafka_listen.port, cfg.http_listen.port) == (port_names["kafka"], port_names["http"])
    assert cfg.external_listen is not None and cfg.external_listen.port == port_names["external"]

    # The hot tier: a PVC per pod, mounted where the data dir points.
    [claim] = spec["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(cfg.data_dir) == mounts[claim["metadata"]["name"]]
    script = " ".join(container["args"])
    assert "--advertised-listener" in script and spec["serviceName"] in script

    # S3 credentials from a Secret, the config from a ConfigMap that is infra/strata.toml.
    [env_from] = container["envFrom"]
    secret = _one(docs, "Secret", env_from["secretRef"]["name"])
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(secret["stringData"])
    assert env["STRATA_OBJECT_STORE"].startswith("s3://")
    [cfg_vol] = [v for v in spec["template"]["spec"]["volumes"] if "configMap" in v]
    cm = _one(docs, "ConfigMap", cfg_vol["configMap"]["name"])
    assert Path(env["STRATA_CONFIG"]).parent == Path(mounts[cfg_vol["name"]])
    assert cm["data"][Path(env["STRATA_CONFIG"]).name] == (INFRA / "strata.toml").read_text()
    kustomize = yaml.safe_load((INFRA / "k8s" / "kustomization.yaml").read_text())
    assert set(kustomize["resources"]) == {
        p.name for p in (INFRA / "k8s").glob("*.yaml") if p.name != "kustomization.yaml"
    }


def test_kubernetes_manifests_match_the_api_schema() -> None:
    import kubernetes_validate

    docs = _k8s()
    assert len(docs) >= 12
    for d in docs:  # strict: an unknown or misspelt field fails too
        kubernetes_validate.validate(d, "1.30.0", strict=True)


def _probe_port(probe: dict[str, Any]) -> str | None:
    for kind in ("httpGet", "tcpSocket", "grpc"):
        if kind in probe:
            return str(probe[kind]["port"])
    return None


def test_kubernetes_probes_survive_recovery_and_pods_are_locked_down() -> None:
    docs = _k8s()
    for sts in (d for d in docs if d["kind"] == "StatefulSet"):
        name = sts["metadata"]["name"]
        pod = sts["spec"]["template"]
        labels = pod["metadata"]["labels"]
        [container] = pod["spec"]["containers"]
        ports = {p["name"] for p in container["ports"]}
        # A startup probe holds liveness back; readiness is a different check from liveness.
        startup, live, ready = (container[k] for k in ("startupProbe", "livenessProbe", "readinessProbe"))
        for probe in (startup, live, ready):
            port = _probe_port(probe)
            assert port is None or port in ports, (name, probe)
        assert ready != live, name
        assert "initialDelaySeconds" not in live, name
        if name == "strata":  # crash recovery may scan the whole hot tier: an hour
            assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600
            assert ready["exec"]["command"] == ["strata-healthcheck", "--ready"]
        # Non-root, nothing to escalate to, a read-only root with the writable paths mounted.
        pod_sec = pod["spec"]["securityContext"]
        assert pod_sec["runAsNonRoot"] is True and pod_sec["runAsUser"] > 0
        sec = container["securityContext"]
        assert sec["allowPrivilegeEscalation"] is False
        assert sec["capabilities"]["drop"] == ["ALL"]
        assert sec["readOnlyRootFilesystem"] is True
        claims = {c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]}
        volumes = {v["name"] for v in pod["spec"].get("volumes", [])} | claims
        assert {m["name"] for m in container["volumeMounts"]} <= volumes
        # One pod per node, and a disruption budget over the same pods.
        [term] = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"].items() <= labels.items()
        pdb = _one(docs, "PodDisruptionBudget", name)
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert pdb["spec"]["maxUnavailable"] == 1
    strata = _one(docs, "StatefulSet", "strata")
    mounts = {m["mountPath"] for m in strata["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert {"/var/lib/strata", "/tmp"} <= mounts
    # The Dockerfile's user is the one the pods run as.
    assert "USER 999:999" in (INFRA / "Dockerfile").read_text()
    assert strata["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 999


def test_kubernetes_etcd_is_where_the_brokers_look() -> None:
    docs = _k8s()
    cfg = load_config(config_file=INFRA / "strata.toml", env={})
    assert cfg.cluster is not None
    host, port = cfg.cluster.etcd.split(":")
    svc = _one(docs, "Service", host)
    etcd = _one(docs, "StatefulSet", "etcd")
    [container] = etcd["spec"]["template"]["spec"]["containers"]
    client = {p["name"]: p["containerPort"] for p in container["ports"]}
    [svc_port] = svc["spec"]["ports"]
    assert svc_port["port"] == int(port) and client[svc_port["targetPort"]] == int(port)
    assert svc["spec"]["selector"].items() <= etcd["spec"]["template"]["metadata"]["labels"].items()
    assert not container["image"].endswith(":latest")
    # every member is in the initial cluster, named as the pods are
    args = " ".join(container["args"])
    members = re.search(r"--initial-cluster=(\S+)", args)
    assert members is not None
    names = [m.split("=")[0] for m in members.group(1).split(",")]
    assert names == [f"etcd-{i}" for i in range(etcd["spec"]["replicas"])]


def test_kubernetes_external_listener_advertises_each_pods_node_port(tmp_path: Path) -> None:
    """The broker's start script, run for each pod with a stand-in `strata`: the main
    listener advertises the headless name (in-cluster clients, replication), the external
    one the NodePort of that pod's own Service on EXTERNAL_HOST (the headless name when
    EXTERNAL_HOST is not set)."""
    docs = _k8s()
    sts = _one(docs, "StatefulSet", "strata")
    [container] = sts["spec"]["template"]["spec"]["containers"]
    [script] = container["args"]
    fake = tmp_path / "strata"
    fake.write_text('#!/bin/sh\necho "$@" "$STRATA_INTER_BROKER_LISTENER"\n')
    fake.chmod(0o755)
    external = _one(docs, "ConfigMap", "strata-external")["data"]
    base = {"PATH": f"{tmp_path}:/usr/bin:/bin", "POD_NAMESPACE": "ns", **external}
    for ordinal in range(sts["spec"]["replicas"]):
        pod = f"strata-{ordinal}"
        svc = _one(docs, "Service", f"{pod}-external")
        assert svc["spec"]["type"] in ("NodePort", "LoadBalancer")
        assert svc["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == pod
        [port] = svc["spec"]["ports"]
        assert port["targetPort"] == "external"
        internal = f"{pod}.strata-headless.ns.svc.cluster.local:9092"
        for host, advertised in (
            ("", f"{pod}.strata-headless.ns.svc.cluster.local:{port['nodePort']}"),
            ("kafka.example.com", f"kafka.example.com:{port['nodePort']}"),
        ):
            env = {**base, "HOSTNAME": pod, "EXTERNAL_HOST": host}
            out = subprocess.run(
                ["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=30
            )
            assert out.stdout.split() == [
                "serve",
                "--broker-id",
                str(ordinal),
                "--advertised-listener",
                internal,
                "--external-advertised-listener",
                advertised,
                internal,
            ], out


def test_sample_config_loads_with_the_broker_loader() -> None:
    cfg = load_config(config_file=INFRA / "strata.toml", env={})
    assert cfg.cluster is not None and cfg.cluster.etcd == "etcd:2379"
    assert cfg.cluster.default_replication_factor == 3
    assert cfg.log.remote_storage_enable and cfg.log.segment_bytes == 256 << 20
    assert cfg.tiering.upload_concurrency == 4
    assert cfg.cluster_id == "strata-prod"


def test_dockerfile_ships_every_package_and_the_dashboard() -> None:
    text = (INFRA / "Dockerfile").read_text()
    for pkg in ("core", "hot", "tiering", "broker", "api", "spark"):
        assert f"COPY {pkg} ./{pkg}" in text
    assert "USER 999" in text  # the k8s securityContext's runAsUser
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"api.dashboard" = ["static/*"]' in pyproject  # non-editable installs serve it


def test_metrics_carry_the_standard_collectors_and_no_created_series(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """prometheus-client's process/platform/GC collectors, the build info, and no `_created`
    series (they double every labelled counter for nothing)."""
    b = broker_factory()
    with urllib.request.urlopen(f"{b.http_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for name in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "python_info",
    ):
        assert re.search(rf"^{name}[ {{]", text, re.M), name
    assert re.search(r'^strata_build_info\{version="[^"]+"\} 1\.0$', text, re.M)
    assert "_created" not in text


# --- the image's health check (infra/healthcheck.py) against real brokers ------------------

HEALTHCHECK = INFRA / "healthcheck.py"


def _health(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run the health check as the image does: its settings from STRATA_* only."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK), *args],
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _listeners(b: BrokerProcess) -> dict[str, str]:
    """The broker's listeners as the image sets them (wildcard hosts)."""
    return {"STRATA_HTTP_LISTEN": f"0.0.0.0:{b.http_port}", "STRATA_KAFKA_LISTEN": f"0.0.0.0:{b.kafka_port}"}


def _one_line(out: subprocess.CompletedProcess[str]) -> str:
    text = (out.stdout + out.stderr).strip()
    assert "Traceback" not in text and "\n" not in text, text
    return text


def test_healthcheck_follows_the_configured_http_address(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    b = broker_factory()
    # A wildcard address is asked on loopback; the port is the configured one.
    out = _health({"STRATA_HTTP_LISTEN": f"0.0.0.0:{b.http_port}"})
    assert out.returncode == 0 and _one_line(out).startswith("ok: broker 0 at http://127.0.0.1:"), out
    listeners = _listeners(b)
    ready = _health(listeners, "--ready")
    assert ready.returncode == 0 and _one_line(ready).startswith("ready: broker 0"), ready
    # Ready needs the Kafka listener too: HTTP alone answering is not enough.
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    no_kafka = _health({**listeners, "STRATA_KAFKA_LISTEN": f"127.0.0.1:{closed}"}, "--ready")
    assert no_kafka.returncode == 1 and _one_line(no_kafka).startswith("not ready:"), no_kafka
    # The address from the STRATA_CONFIG file, as `strata serve` reads it.
    conf = tmp_path / "strata.toml"
    conf.write_text(f'http_listen = "127.0.0.1:{b.http_port}"\n')
    assert _health({"STRATA_CONFIG": str(conf)}).returncode == 0
    # Nothing there: unhealthy, one line naming why.
    b.kill()
    down = _health({"STRATA_HTTP_LISTEN": f"127.0.0.1:{b.http_port}"})
    assert down.returncode == 1 and _one_line(down).startswith("unhealthy:"), down
    bad = _health({"STRATA_HTTP_LISTEN": "nowhere"})
    assert bad.returncode == 1 and "nowhere" in _one_line(bad), bad


def test_healthcheck_speaks_https_with_the_brokers_certificate(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    from tests.broker.security.tlslib import make_pki, server_env

    pki = make_pki(tmp_path / "pki")
    env = server_env(pki, "required")  # mutual TLS: the check presents the broker's certificate
    b = broker_factory(env=env)
    out = _health({**env, **_listeners(b)}, "--ready")
    assert out.returncode == 0 and "https://127.0.0.1:" in _one_line(out), out
    # Without the TLS settings it speaks plain HTTP to a TLS listener: unhealthy, one line.
    plain = _health({"STRATA_HTTP_LISTEN": f"127.0.0.1:{b.http_port}"})
    assert plain.returncode == 1 and _one_line(plain).startswith("unhealthy:"), plain


def test_healthcheck_takes_an_authenticating_listener_as_alive(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory("--rest-auth", "bearer")
    out = _health(_listeners(b), "--ready")
    assert out.returncode == 0 and "REST authentication is on" in _one_line(out), out
