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

from kvviz.errors import KvvizError
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
    return subprocess.run([sys.executable, "-c", _LIMITED, str(headroom), "bypass" if bypass else "check", *ARGV],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                          timeout=300)


def test_rlimit_as_refuses_the_pool_in_one_line():
    done = run_limited(256 << 20, bypass=False)  # 256 MiB of address space left; the pool is 2 GiB
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    err = done.stderr
    assert err.startswith("kvviz: error: num_blocks=") and "pool " in err and "free under RLIMIT_AS" in err


def test_an_allocator_failure_is_one_line_naming_the_pool():
    done = run_limited(256 << 20, bypass=True)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    err = done.stderr
    assert err.startswith("kvviz: error: num_blocks=") and "GiB" in err and "cpu" in err


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
