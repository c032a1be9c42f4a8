"""A real etcd server (Debian ``etcd-server``) run as a child process on loopback ports.

The server keeps its ports and data directory across ``kill``/``start``, so clients that
were connected before a crash reconnect to the same address and find the same data, as
they would after a real etcd restart.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
# etcd runs in its own session (so kill() can signal its group); setpriv (util-linux)
# additionally has Linux SIGKILL it when the test process dies, so an interrupted test
# run leaves no etcd behind.
_SETPRIV = shutil.which("setpriv")
_WRAP: list[str] = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []


# etcd is given its ports before it binds them, so a port asked from the kernel (port 0)
# can be taken in between: by a broker another pytest-xdist worker starts, or by any
# outgoing connection, since the kernel hands those out from the same ephemeral range
# (32768-60999 on Linux). CI hit exactly that ("bind: address already in use"). Ports are
# therefore drawn below the ephemeral range, from a slice of it that belongs to this
# xdist worker alone, and checked free before use.
_PORT_LOW, _PORT_HIGH, _SLICES = 20000, 32000, 8
_port_rng = random.Random(os.getpid())


def _worker_slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % _SLICES if worker.isdigit() else 0
    width = (_PORT_HIGH - _PORT_LOW) // _SLICES
    return range(_PORT_LOW + index * width, _PORT_LOW + (index + 1) * width)


def free_port() -> int:
    ports = _worker_slice()
    for _ in range(200):
        port = _port_rng.choice(ports)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


class EtcdProcess:
    """One single-member etcd cluster.

    ``endpoint`` is ``127.0.0.1:<client port>``. The raft timings are shortened: a single
    member has no peers to lose, and a short election timeout makes start-up (the member
    elects itself) fast and lowers etcd's minimum lease TTL, so tests can use 1-2 s leases.
    """

    def __init__(
        self,
        data_dir: Path,
        name: str = "strata-test",
        *,
        heartbeat_ms: int = 25,
        election_ms: int = 250,
    ) -> None:
        # heartbeat_ms/election_ms: the shortened test timings by default; a benchmark
        # that wants etcd's own defaults (100 ms / 1,000 ms) passes them.
        self.data_dir = data_dir
        self.name = name
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.client_port = free_port()
        self.peer_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"http://{self.endpoint}"

    def start(self, timeout: float = 30.0) -> EtcdProcess:
        assert self.proc is None or self.proc.poll() is not None, "etcd already running"
        peer_url = f"http://127.0.0.1:{self.peer_port}"
        cmd = [
            *_WRAP,
            ETCD,
            "--name",
            self.name,
            "--data-dir",
            str(self.data_dir),
            "--listen-client-urls",
            self.client_url,
            "--advertise-client-urls",
            self.client_url,
            "--listen-peer-urls",
            peer_url,
            "--initial-advertise-peer-urls",
            peer_url,
            "--initial-cluster",
            f"{self.name}={peer_url}",
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            f"strata-test-{self.client_port}",
            "--heartbeat-interval",
            str(self.heartbeat_ms),
            "--election-timeout",
            str(self.election_ms),
            "--logger",
            "zap",
            "--log-level",
            "warn",
        ]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"etcd exited during start-up (rc {self.proc.returncode}):\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"etcd not healthy after {timeout} s:\n{self.log_tail()}")
            time.sleep(0.05)
        return self

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1) as resp:
                return b'"health":"true"' in resp.read()
        except (OSError, urllib.error.URLError):
            return False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (SIGKILL by default: a crash) and wait for the process to end."""
        if self.proc is not None and self.proc.poll() is None:
            if sig != signal.SIGKILL:
                self.resume()  # a stopped process would never act on SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): connections stay open but nothing is answered."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Graceful stop (SIGTERM)."""
        self.kill(signal.SIGTERM)

    def restart(self, *, sig: int = signal.SIGKILL, timeout: float = 30.0) -> EtcdProcess:
        """Crash (or stop, with ``sig=SIGTERM``) and start again on the same ports and data dir."""
        self.kill(sig)
        return self.start(timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
