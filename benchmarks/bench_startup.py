"""Whole-process start-up of the light commands against `python -c pass`, in one run.

Goals (issue 39): `kvviz --help`, `kvviz models`, and `kvviz plan` / `compare` of every model kind
(DeepSeek V4, a preset hybrid, an --hf-config model on a parsed-config cache hit) finish in at most
0.3 s wall (median) and 40 MiB peak memory: they import neither torch, transformers nor matplotlib.
The first sight of a config.json (a parsed-config cache miss: four models' own config.json, three whose
config classes compute fields -- Nemotron-H, Jamba, DeepSeek-V2-Lite -- and Gemma 4's per-layer config)
is read by transformers' own config classes with torch kept out (kvviz/families/hf.py): at most 1 s
median. `render` is shown against the same `python -c pass`. Each command runs REPEATS times as its own
process; wall time is measured around the process ("x pass": its median over the median of
`python -c pass`), CPU time (user + system) and peak memory are the child's rusage from wait4(). On a
shared machine the wall time is the CPU time plus the wait for a core: each goal is judged on both, and
the CPU time is what an idle machine's wall time comes to (these commands run on one thread).
Bytecode is compiled once (the warm-up run) into this run's own folder, as an installed package has it.
`import torch, matplotlib` is shown as what the light path avoids.

    python benchmarks/bench_startup.py [REPEATS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S, GOAL_MIB = 0.3, 40  # the light commands and a cached start
FIRST_SIGHT_S = 1.0  # a config's first sight, through transformers' config classes (no torch)
LIGHT, FIRST = (GOAL_S, GOAL_MIB), (FIRST_SIGHT_S, None)  # each row's goal: (median seconds, peak MiB or None)
KVVIZ = [sys.executable, "-m", "kvviz"]
CACHE = tempfile.mkdtemp(prefix="kvviz-bench-cache-")  # the parsed-config cache of this run
OWN = ROOT / "tests" / "data" / "own-configs"  # four models' own config.json (README there)
DATA = ROOT / "tests" / "data" / "vllm-0.33"
HF_CONFIG = str(DATA / "configs" / "nemotron-nano-9b-v2" / "config.json")
# first sight of a config.json: four models' own, then hybrids / MLA whose config classes compute fields, and
# Gemma 4's per_layer_config (the class builds objects of it)
FIRST_SIGHT = {
    **{name: str(OWN / name) for name in ("qwen3-30b-a3b", "llama-3.3-70b", "gpt-oss-120b", "deepseek-v3")},
    "nemotron-nano-9b-v2": HF_CONFIG,
    "jamba-v0.1": str(DATA / "configs" / "jamba-v0.1" / "config.json"),
    "deepseek-v2-lite": str(DATA / "deploy" / "configs" / "deepseek-v2-lite" / "config.json"),
    "Gemma4ForCausalLM": str(DATA / "registry" / "configs" / "Gemma4ForCausalLM" / "config.json"),
}
COMMANDS = [
    ("python -c pass", [sys.executable, "-c", "pass"], None),
    ("kvviz --help", KVVIZ + ["--help"], LIGHT),
    ("kvviz models", KVVIZ + ["models"], LIGHT),
    ("kvviz plan --model deepseek-v4-pro --json", KVVIZ + ["plan", "--model", "deepseek-v4-pro", "--json"], LIGHT),
    (
        "kvviz compare --model deepseek-v4-pro --budget-gib 26.09",
        KVVIZ + ["compare", "--model", "deepseek-v4-pro", "--budget-gib", "26.09"],
        LIGHT,
    ),
    (
        "kvviz plan --model gemma-3-27b --json (preset, parsed form shipped)",
        KVVIZ + ["plan", "--model", "gemma-3-27b", "--json"],
        LIGHT,
    ),
    (
        "kvviz compare --model qwen3-next-80b-a3b --budget-gib 40",
        KVVIZ + ["compare", "--model", "qwen3-next-80b-a3b", "--budget-gib", "40"],
        LIGHT,
    ),
    (
        "kvviz plan --hf-config nemotron-nano-9b-v2 --json (cache hit)",
        KVVIZ + ["plan", "--hf-config", HF_CONFIG, "--json"],
        LIGHT,
    ),
    *(
        (
            f"kvviz plan --hf-config {name} --json (first sight, cache miss)",
            KVVIZ + ["plan", "--hf-config", path, "--json"],
            FIRST,
        )
        for name, path in FIRST_SIGHT.items()
    ),
    (
        "kvviz plan --hf-config deepseek-v3 -tp 8 --gpu H200 (first sight, cache miss)",
        KVVIZ + ["plan", "--hf-config", str(OWN / "deepseek-v3"), "-tp", "8", "--gpu", "H200"],
        FIRST,
    ),
    (
        "kvviz render --model deepseek-v4-pro --no-svg",
        KVVIZ + ["render", "--model", "deepseek-v4-pro", "--no-svg", "--out", CACHE + "/render-dsv4"],
        None,
    ),
    (
        "kvviz render --model gemma-3-27b --no-svg",
        KVVIZ + ["render", "--model", "gemma-3-27b", "--no-svg", "--out", CACHE + "/render-gemma"],
        None,
    ),
    (
        "python -c 'import torch, matplotlib' (avoided)",
        [sys.executable, "-c", "import torch, matplotlib.pyplot"],
        None,
    ),
]
MISS = "cache miss"
# An installed kvviz has its bytecode (pip compiles on install); a shell with PYTHONDONTWRITEBYTECODE
# would time compiling ~90 modules (~0.1-0.2 s) on every run instead. The warm-up run writes the
# bytecode under this run's own prefix, never beside the source.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": CACHE + "/pyc"}


def run_once(argv: list[str], fresh_cache: bool = False) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak RSS MiB) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV | {"KVVIZ_CACHE_DIR": CACHE + ("/miss-" + str(time.perf_counter_ns()) if fresh_cache else "")},
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux reports KiB


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(
        f"{repeats} runs each, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs; wall = whole process (min / median), CPU = user + system (median), "
        f"RSS = peak of the process"
    )
    base = None
    missed: dict[str, list[str]] = {"wall": [], "CPU": []}
    print(f"{'command':<88} {'min s':>6} {'median s':>8} {'x pass':>7} {'CPU s':>6} {'RSS MiB':>8}")
    for label, argv, goal in COMMANDS:
        fresh = MISS in label  # every run of a cache miss starts from an empty parsed-config cache
        run_once(argv, fresh)  # warm the file cache (and, for a hit, the parsed-config cache)
        walls, cpus, rss = zip(*(run_once(argv, fresh) for _ in range(repeats)))
        lo, med, cpu, peak = min(walls), statistics.median(walls), statistics.median(cpus), max(rss)
        base = base or med  # the median of `python -c pass`
        print(f"{label:<88} {lo:>6.3f} {med:>8.3f} {med / base:>7.1f} {cpu:>6.3f} {peak:>8.1f}")
        for kind, seconds in (("wall", med), ("CPU", cpu)):
            if goal is not None and (seconds > goal[0] or (goal[1] is not None and peak >= goal[1])):
                missed[kind].append(label)
    for kind, labels in missed.items():
        print(
            f"goals by {kind} time: each light command and cached start at most {GOAL_S} s (median) and under "
            f"{GOAL_MIB} MiB, each first sight at most {FIRST_SIGHT_S} s (median): "
            + ("met" if not labels else "MISSED by " + "; ".join(labels))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
