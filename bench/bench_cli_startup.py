"""CLI start-up benchmark (issue 32): how long `strata` takes before it does anything.

    python -m bench.bench_cli_startup [--runs 15] [--root DIR]

Each case is a fresh interpreter started as the console script starts it (``from api.cli
import main; main()``), from the checkout ``--root`` (default: this one; point it at an
older checkout to measure "before"). The baseline is ``python -c pass`` in the same run;
cases run round-robin, so a busy machine slows them all alike. Printed: the median wall
time of each case and its CPU time (user + system; steadier than wall time on a shared
machine), each also above the baseline's: what the CLI itself costs.

The produce/consume "own start" cases run the command against a loopback port nothing
listens on: everything the command imports and builds before its first byte on the wire,
then the refused connection (immediate on loopback) and its one-line error.

Bytecode is cached (in a temporary directory, not the checkout) even where
PYTHONDONTWRITEBYTECODE is set, as an installed package has its .pyc files: otherwise every
run would measure compiling the sources.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# as the console script api.cli:main runs, with argv[0] the command's name
_STRATA = "import sys; sys.argv[0] = 'strata'; from api.cli import main; sys.exit(main())"


def _dead_port() -> str:
    """A loopback address that refuses connections (bound, never listening)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _DEAD.append(s)  # held open until exit, so no one else takes the port
    return f"127.0.0.1:{s.getsockname()[1]}"


_DEAD: list[socket.socket] = []
_PYCACHE = os.path.join(tempfile.gettempdir(), "strata-bench-cli-pycache")


def cases() -> dict[str, list[str]]:
    dead = _dead_port()
    strata = [sys.executable, "-c", _STRATA]
    return {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "strata --version": [*strata, "--version"],
        "strata -h": [*strata, "-h"],
        "strata topic -h": [*strata, "topic", "-h"],
        "strata produce -h": [*strata, "produce", "-h"],
        "strata consume -h": [*strata, "consume", "-h"],
        "strata produce T (own start)": [*strata, "produce", "t", "-b", dead],
        "strata consume T (own start)": [*strata, "consume", "t", "-b", dead, "-e"],
        "strata topic list (own start)": [*strata, "topic", "list", "-b", dead],
    }


def run_once(cmd: list[str], root: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the child). CPU time is the steadier
    figure on a shared machine: it leaves out time spent waiting for a core."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    # bytecode cached as an install has it (pip compiles at install), outside the checkout
    env.update(PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=_PYCACHE)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = 0  # reaped by wait4: Popen must not wait for it again
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="Runs of each case [15].")
    ap.add_argument("--root", type=Path, default=ROOT, help="The checkout to measure [this one].")
    args = ap.parse_args()
    root = args.root.resolve()
    todo = cases()
    wall: dict[str, list[float]] = {name: [] for name in todo}
    cpu: dict[str, list[float]] = {name: [] for name in todo}
    for cmd in todo.values():  # one warm-up each: the page cache, .pyc files
        run_once(cmd, root)
    for _ in range(args.runs):
        for name, cmd in todo.items():
            w, c = run_once(cmd, root)
            wall[name].append(w)
            cpu[name].append(c)
    base_w = statistics.median(next(iter(wall.values())))
    base_c = statistics.median(next(iter(cpu.values())))
    print(f"{root}: {args.runs} runs each, medians in seconds; 'above' = minus the baseline's")
    print(f"{'case':<32} {'wall':>7} {'above':>7} {'cpu':>7} {'above':>7}")
    for name in todo:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{name:<32} {w:>7.3f} {w - base_w:>7.3f} {c:>7.3f} {c - base_c:>7.3f}")


if __name__ == "__main__":
    main()
