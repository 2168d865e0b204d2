"""verify's memory guards in real processes: a pool that does not fit under RLIMIT_AS or a cgroup's
memory.max is refused in one line before anything is allocated, and an allocator failure (the
check bypassed) becomes one line naming the pool's size instead of a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvviz.base.errors import KvvizError
from kvviz.pool import check_fits, devices, host_memory

ROOT = Path(__file__).resolve().parents[1]

# In the child: import everything first (torch maps much address space), then cap the address
# space at what is mapped now plus HEADROOM, then run the CLI.
_LIMITED = textwrap.dedent("""
    import resource, sys
    import torch
    from kvviz import cli
    import kvviz.verify
    from kvviz.pool import devices
    headroom, bypass, argv = int(sys.argv[1]), sys.argv[2] == "bypass", sys.argv[3:]
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, resource.RLIM_INFINITY))
    if bypass:  # the fit check told nothing: the allocator is the one to refuse
        devices.host_memory = lambda: {}
    sys.exit(cli.main(argv))
""")

ARGV = ["verify", "--model", "deepseek-v4-pro", "--budget-gib", "2", "--device", "cpu"]


def run_limited(headroom: int, bypass: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _LIMITED, str(headroom), "bypass" if bypass else "check", *ARGV],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_rlimit_as_refuses_the_pool_in_one_line():
    done = run_limited(256 << 20, bypass=False)  # 256 MiB of address space left; the pool is 2 GiB
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    err = done.stderr
    assert err.startswith("kvviz: error: --blocks: num_blocks=") and "pool " in err and "free under RLIMIT_AS" in err


def test_an_allocator_failure_is_one_line_naming_the_pool():
    done = run_limited(256 << 20, bypass=True)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    err = done.stderr
    assert err.startswith("kvviz: error: --blocks: num_blocks=") and "GiB" in err and "cpu" in err


def test_cgroup_v2_memory_max_is_honoured(tmp_path, monkeypatch):
    (tmp_path / "memory.max").write_text(f"{10**9}\n")
    (tmp_path / "memory.current").write_text(f"{9 * 10**8}\n")
    monkeypatch.setattr(devices, "CGROUP_ROOT", str(tmp_path))
    assert host_memory()["cgroup memory.max"] == 10**9 - 9 * 10**8
    check_fits(10**8 - 1, "cpu")
    with pytest.raises(KvvizError) as e:
        check_fits(2 * 10**8, "cpu", what="num_blocks=9")
    msg = str(e.value)
    assert msg.startswith("num_blocks=9: needs 200,000,000 B") and "free under cgroup memory.max" in msg
    assert "\n" not in msg


def test_cgroup_v1_and_unlimited(tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "CGROUP_ROOT", str(tmp_path))
    (tmp_path / "memory.max").write_text("max\n")  # v2, no limit
    assert "cgroup memory.max" not in host_memory()
    v1 = tmp_path / "memory"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text(f"{5 * 10**8}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{10**8}\n")
    assert host_memory()["cgroup memory.max"] == 4 * 10**8


_PEAK = textwrap.dedent("""
    import json, resource, sys, torch
    from kvviz.families import load_preset
    from kvviz.pool import BlockPool, Pool
    from kvviz.verify import verify
    from kvviz.verify import batches as B, guards as G, samples as S
    from kvviz.vllm.plan import plan_model
    mode, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    layout = plan_model(load_preset(model)).pools[0]
    counted = 0
    if mode == "baseline":  # imports, plan and the same pool, touched: what verify cannot do without
        Pool(layout, n, "cpu").backing.fill_(1)
    else:
        assert verify(layout, n, device="cpu").passed
        item = B.item_bytes(torch.device("cpu"), n * layout.block_stride)
        batches = B.layer_batches(layout, item)
        bp = BlockPool.assigned(n, len(layout.groups))
        kinds = S.choose_samples(layout, batches, tuple(int(bp.block_ids(g)[0]) for g in range(len(layout.groups))))
        counted = G.working_bytes(layout, n, batches, item, S.sample_values(kinds))
    print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "counted": counted}))
""")


def _peak(mode: str, model: str, n: int) -> dict:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _PEAK, mode, model, str(n)],
        cwd=ROOT,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "model, blocks", [("deepseek-v4-pro", 100), ("gemma-3-27b", 100), ("nemotron-nano-9b-v2", 12)]
)  # its 1.35 M-value state row
def test_the_fit_check_counts_what_the_run_measurably_uses(model, blocks):
    """Peak resident memory of a real verify process beyond a process that holds the same pool
    (ru_maxrss of each, measured) is no more than what the fit check counted, and under a quarter
    of the pool."""
    base, run = _peak("baseline", model, blocks), _peak("verify", model, blocks)
    from kvviz.families import load_preset
    from kvviz.vllm.plan import plan_model

    pool = blocks * plan_model(load_preset(model)).pools[0].block_stride
    extra = run["peak"] - base["peak"]
    assert extra <= run["counted"] and extra < pool / 4, (extra, run["counted"], pool)
