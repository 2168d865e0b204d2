"""The window in which Ctrl-C gives a traceback: from the interpreter's own SIGINT handler (installed before
`site`) to kvviz's handlers (kvviz/__main__.py enters kvviz.base.signals.handled() before the command line's
imports), for `python -m kvviz plan --model llama-3.1-8b`, against a bare script whose first statement installs a
SIGTERM handler (what no Python program can beat: the interpreter's start-up). Read from /proc/<pid>/status
(SigCgt) of each process as it starts, REPEATS times; min and median in ms, and kvviz's median over the bare one's.
Before issue 37 the handlers came after ~0.2-0.5 s of imports.

    python benchmarks/bench_signal_window.py [REPEATS]
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "python -m kvviz plan --model llama-3.1-8b": [sys.executable, "-m", "kvviz", "plan", "--model", "llama-3.1-8b"],
    "bare: the handler first": [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, lambda *a: 0); time.sleep(1)",
    ],
}


def _caught(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1], 16) for line in f if line.startswith("SigCgt:")), 0)
    except OSError:
        return None


def window_ms(argv: list[str]) -> float | None:
    """ms from the child catching SIGINT (the interpreter's handler) to its catching SIGTERM (the program's)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    t_int = t_term = None
    try:
        while proc.poll() is None and t_term is None:
            mask = _caught(proc.pid)
            if mask is None:
                break
            now = time.perf_counter()
            if t_int is None and mask & (1 << (signal.SIGINT - 1)):
                t_int = now
            if mask & (1 << (signal.SIGTERM - 1)):
                t_term = now
            time.sleep(0.0002)
    finally:
        proc.kill()
        proc.wait()
    return None if t_int is None or t_term is None else (t_term - t_int) * 1000


def main() -> None:
    """Print each command's window (min, median) and kvviz's median over the bare script's."""
    if not Path("/proc/self/status").exists():
        print("needs /proc/<pid>/status (Linux)")
        return
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    medians = {}
    for name, argv in COMMANDS.items():
        windows = [w for w in (window_ms(argv) for _ in range(repeats)) if w is not None]
        medians[name] = statistics.median(windows)
        print(f"{name}: min {min(windows):.0f} ms, median {medians[name]:.0f} ms ({len(windows)} runs)")
    kvviz, bare = medians.values()
    print(f"kvviz's window over the bare script's (medians): {kvviz / bare:.2f}x")


if __name__ == "__main__":
    main()
