"""Whole-process start-up of the light commands against `python -c pass`, in one run.

Goal (the issue): `kvviz --help`, `kvviz models`, `kvviz plan` and `kvviz compare` finish in under
0.3 s wall and 40 MiB peak memory: they import neither torch nor matplotlib. Each command runs
REPEATS times as its own process; wall time is measured around the process ("x pass": its median
over the median of `python -c pass`), peak memory is the child's ru_maxrss from wait4().
`import torch, matplotlib` is shown as what the light path avoids.

    python benchmarks/bench_startup.py [REPEATS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S, GOAL_MIB = 0.3, 40
KVVIZ = [sys.executable, "-m", "kvviz"]
COMMANDS = [
    ("python -c pass", [sys.executable, "-c", "pass"], False),
    ("kvviz --help", KVVIZ + ["--help"], True),
    ("kvviz models", KVVIZ + ["models"], True),
    ("kvviz plan --model deepseek-v4-pro --json", KVVIZ + ["plan", "--model", "deepseek-v4-pro", "--json"], True),
    ("kvviz compare --model deepseek-v4-pro --backend flashmla --budget-gib 26.09",
     KVVIZ + ["compare", "--model", "deepseek-v4-pro", "--backend", "flashmla", "--budget-gib", "26.09"], True),
    ("python -c 'import torch, matplotlib' (avoided)", [sys.executable, "-c", "import torch, matplotlib.pyplot"], False),
]


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.strip()}")
    return wall, usage.ru_maxrss / 1024  # Linux reports KiB


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"{repeats} runs each, python {sys.version.split()[0]}; wall = whole process (min / median), "
          f"RSS = peak of the process")
    base = None
    missed = []
    print(f"{'command':<78} {'min s':>6} {'median s':>8} {'x pass':>7} {'RSS MiB':>8}")
    for label, argv, has_goal in COMMANDS:
        run_once(argv)  # warm the file cache
        walls, rss = zip(*(run_once(argv) for _ in range(repeats)))
        lo, med, peak = min(walls), statistics.median(walls), max(rss)
        base = base or med  # the median of `python -c pass`
        print(f"{label:<78} {lo:>6.3f} {med:>8.3f} {med / base:>7.1f} {peak:>8.1f}")
        if has_goal and (med >= GOAL_S or peak >= GOAL_MIB):
            missed.append(label)
    print(f"goal: each kvviz command under {GOAL_S} s (median) and {GOAL_MIB} MiB: "
          + ("met" if not missed else "MISSED by " + "; ".join(missed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
