"""Real brokers started as subprocesses on loopback ports chosen by the OS."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent

_LISTEN_RE = re.compile(r"strata: (kafka|http|schema registry) listener on (?:https?://)?([\w.\-]+):(\d+)")


class BrokerProcess:
    """A `strata serve` child process. Ports are chosen by the OS (port 0) and read back from its output."""

    def __init__(self, data_dir: Path, *extra_args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.kafka_port = 0
        self.http_port = 0
        self.registry_port = 0  # with --schema-registry-listen
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        kafka = f"127.0.0.1:{self.kafka_port}"  # reuse ports on restart so clients can reconnect
        http = f"127.0.0.1:{self.http_port}"
        cmd = [
            sys.executable,
            "-m",
            "api.cli",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--kafka-listen",
            kafka,
            "--http-listen",
            http,
            *self.extra_args,
        ]
        if os.environ.get("STRATA_TEST_LOG_LEVEL"):  # e.g. DEBUG, when hunting a failure
            cmd += ["--log-level", os.environ["STRATA_TEST_LOG_LEVEL"]]
        # No schema registry listener unless asked (--schema-registry-listen, or the env):
        # its default port, 8081, would clash between brokers (tests, bench clusters).
        env = {
            "STRATA_SCHEMA_REGISTRY_LISTEN": "none",
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._queue = queue.Queue()
        # Every run's output also goes to <data dir>.out, so a failed test leaves the
        # brokers' logs in pytest's kept temporary directories.
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.data_dir.with_name(self.data_dir.name + ".out"), "a", encoding="utf-8")  # noqa: SIM115
        threading.Thread(target=self._pump, args=(self.proc, self._queue, out), daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise TimeoutError("broker did not become ready:\n" + "".join(self.lines[-50:]))
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError("broker exited during start-up:\n" + "".join(self.lines[-50:]))
            m = _LISTEN_RE.search(line)
            if m:
                if m.group(1) == "kafka":
                    self.kafka_port = int(m.group(3))
                elif m.group(1) == "schema registry":
                    self.registry_port = int(m.group(3))
                else:
                    self.http_port = int(m.group(3))
            if "strata: ready" in line:
                return self

    def _pump(self, proc: subprocess.Popen[str], q: queue.Queue[str | None], out: TextIO) -> None:
        assert proc.stdout is not None
        with out:
            for line in proc.stdout:
                self.lines.append(line)
                out.write(line)
                out.flush()
                q.put(line)
        q.put(None)

    def output(self) -> str:
        return "".join(self.lines)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> int:
        """Graceful stop via SIGTERM; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise
        return self.proc.returncode


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """Create a topic with confluent-kafka's AdminClient (a real client, as users would)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference until the future resolves
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])
    futures[name].result(timeout=30)


class S3Endpoint:
    """A real S3 HTTP endpoint on loopback: moto's server mode, in a thread of the test process.

    Code under test reaches it only through boto3/aioboto3 with ``url`` as endpoint, exactly as
    it would reach MinIO or AWS. ``stop()``/``start()`` simulate an outage; the stored objects
    survive it (moto keeps them in this process).
    """

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._cls = ThreadedMotoServer
        self.port = 0
        self._server: ThreadedMotoServer | None = None
        self.start()

    def start(self) -> None:
        server = self._cls(ip_address="127.0.0.1", port=self.port, verbose=False)
        server.start()
        self.port = server._server.server_port  # type: ignore[attr-defined]
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS chain variables a broker or Spark needs to reach this endpoint."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> object:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return name
