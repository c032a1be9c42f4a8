"""A real etcd server (Debian ``etcd-server``) run as a child process on loopback ports.

The server keeps its ports and data directory across ``kill``/``start``, so clients that
were connected before a crash reconnect to the same address and find the same data, as
they would after a real etcd restart.
"""

from __future__ import annotations

import contextlib
import os
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EtcdProcess:
    """One single-member etcd cluster.

    ``endpoint`` is ``127.0.0.1:<client port>``. The raft timings are shortened: a single
    member has no peers to lose, and a short election timeout makes start-up (the member
    elects itself) fast and lowers etcd's minimum lease TTL, so tests can use 1-2 s leases.
    """

    def __init__(self, data_dir: Path, name: str = "strata-test") -> None:
        self.data_dir = data_dir
        self.name = name
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
            "25",
            "--election-timeout",
            "250",
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
