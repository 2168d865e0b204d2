"""`kvviz replay` on real traffic (kvviz/cli/replay.py, docs/replay.md): `--trace` read as published, the same
deployment flags as `kvviz plan`, the answers printed (text, --markdown, --json), --figure, and the sweep;
checked against vLLM 0.33's own real-trace references (../shared/data/vllm-0.33/replay-traces) and against a
second computation of each answer from the reference's own fields."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from replay_cases import cli_args, compare

import kvviz
from kvviz.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
AZURE = TRACES / "azure-conv-rows-5000-5299.csv"
REFERENCE_DIRS = [
    ROOT / "tests" / "data" / "vllm-0.33" / "replay-traces",
    ROOT.parent.parent / "shared" / "data" / "vllm-0.33" / "replay-traces",
    Path("/work/shared/data/vllm-0.33/replay-traces"),
]
WINDOWS = {  # the shipped window of each reference case's rows (tests/data/traces/README.md)
    "llama-3.1-8b/mooncake-conv-3000": ("mooncake-conversation-rows-3000-3149.jsonl", 3000),
    "qwen3-next-80b-a3b/mooncake-synth-1000": ("mooncake-synthetic-rows-1000-1119.jsonl", 1000),
    "gpt-oss-20b/mooncake-conv-9000": ("mooncake-conversation-rows-9000-9149.jsonl", 9000),
    "llama-3.1-8b/azure-conv-5000": ("azure-conv-rows-5000-5299.csv", 5000),
}


def _references() -> tuple[Path, dict]:
    folder = next((d for d in REFERENCE_DIRS if (d / "trace-cases.json").is_file()), None)
    if folder is None:
        pytest.skip("the real-trace references are in neither tests/data/vllm-0.33/replay-traces nor ../shared")
    return folder, {c["case"]: c for c in json.loads((folder / "trace-cases.json").read_text())["cases"]}


def _argv(folder: Path, case: dict, *extra) -> list[str]:
    """The reference's own `kvviz replay` arguments (replay_cases.cli_args), the trace window instead of its
    workload, and `extra` instead of --json."""
    name, first = WINDOWS[case["case"]]
    argv = [a for a in cli_args(case, folder, Path("-")) if a != "--json"]
    at = argv.index("--workload")
    argv[at : at + 2] = ["--trace", str(TRACES / name), "--first-row", str(first)]
    return argv + list(extra)


def _run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_trace_through_the_cli_matches_vllm(name, capsys):
    """The trace file itself, read by --trace, replayed step for step as vLLM 0.33's scheduler ran it."""
    folder, cases = _references()
    case = cases[name]
    code, out, err = _run(_argv(folder, case, "--json"), capsys)
    assert code == 0, err
    got = json.loads(out)
    compare(got, case, ("preempted",))  # the reference lists a step's preempted ids as a set (test_replay_traces)
    assert got["notes"]["trace"]["num_requests"] == len(case["workload"])


def test_the_answers_are_vllms_numbers(capsys):
    """Each printed answer of the Azure case, computed a second way from vLLM's own recorded fields."""
    folder, cases = _references()
    case = cases["llama-3.1-8b/azure-conv-5000"]
    code, out, err = _run(_argv(folder, case, "--json"), capsys)
    assert code == 0, err
    a = json.loads(out)["answers"]
    t, steps, reqs = case["totals"], case["steps"], case["requests"]
    assert (a["finished"], a["requests"]) == (t["num_finished"], t["num_requests"])
    assert (a["preemptions"], a["requests_preempted"]) == (t["total_preemptions"], t["requests_preempted"])
    assert a["peak_running"] == t["peak_running"] == max(steps["num_running"])
    first = next(k for k, n in enumerate(steps["preemptions"]) if n)
    assert a["first_preemption"] == [first, steps["preempted"][first]]
    assert a["prompt_tokens"] == t["prefix_cache"]["queries"] and a["hit_tokens"] == t["prefix_cache"]["hits"]
    waits = [r["first_scheduled_step"] - r["arrival_step"] for r in reqs]
    ttft = [r["first_token_step"] + 1 - r["arrival_step"] for r in reqs]
    for key, values in (("queueing_steps", waits), ("ttft_steps", ttft)):
        expected = np.percentile(values, [50, 90, 99], method="inverted_cdf")
        assert list(a[key].values()) == [int(v) for v in expected]
    preempted = [r["num_preemptions"] for r in reqs if r["num_preemptions"]]
    assert a["preemptions_per_request"] == {str(k): preempted.count(k) for k in sorted(set(preempted))}
    assert a["max_concurrency"] == case["config"]["kv_cache_max_concurrency(update_kv_cache_capacity)"]
    code, out, _ = _run(_argv(folder, case), capsys)
    assert f"step {first:,} ({first * 25:,} ms): {steps['preempted'][first][0]}" in out
    assert f"{t['total_preemptions']} of {t['requests_preempted']} requests" in out
    assert re.search(rf"peak running +{t['peak_running']} at step", out)
    assert "GPU KV cache size: 12,288 tokens, Maximum concurrency for 8,192 tokens per request: 1.50x" in out
    code, md, _ = _run(_argv(folder, case, "--markdown"), capsys)
    assert md.startswith("**llama-3.1-8b**") and f"| preemptions | {t['total_preemptions']} of" in md


def test_the_same_deployment_flags_as_plan(capsys):
    """--gpu / --gpu-memory-utilization / -tp / --kv-cache-dtype give the budget and plan `kvviz plan` gives."""
    argv = ["--model", "llama-3.1-8b", "--gpu", "H100", "--gpu-memory-utilization", "0.5", "-tp", "2"]
    argv += ["--kv-cache-dtype", "fp8", "--max-model-len", "8192"]
    assert main(["plan", *argv, "--json"]) == 0
    plan_doc = json.loads(capsys.readouterr().out)
    code, out, err = _run(["replay", *argv, "--trace", str(AZURE), "--rows", "0:40", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["inputs"]["kv_budget"] == plan_doc["kv_budget"]["available_bytes"]
    assert doc["kv_budget"] == plan_doc["kv_budget"]
    plan = kvviz.plan("llama-3.1-8b", tensor_parallel_size=2, kv_dtype="fp8", max_model_len=8192)
    assert doc["kv_cache_config"]["num_blocks"] == plan.capacity(gpu="H100", gpu_memory_utilization=0.5).num_blocks


def test_max_model_len_defaults_as_vllm_derives_it(capsys):
    code, out, err = _run(
        ["replay", "--model", "llama-3.1-8b", "--budget-gib", "20", "--trace", str(AZURE), "--rows", "0:5", "--json"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["inputs"]["max_model_len"] == kvviz.plan("llama-3.1-8b").max_model_len == 131072


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--workload", str(AZURE), "--rows", "0:5"], "--rows: applies to --trace"),
        (["--trace", str(AZURE), "--rows", "5-10"], "rows='5-10'"),
        (["--trace", str(AZURE), "--step-ms", "0"], "--step-ms"),
        (["--trace", str(AZURE), "--step-ms", "nan"], "--step-ms"),
        (["--trace", str(AZURE), "--trace-format", "mooncake"], "line 1: malformed JSON"),
        (["--trace", "/dev/zero"], "not a regular file (a device)"),
        (["--trace", str(AZURE), "--sweep-tp", "1,2", "-tp", "2"], "--sweep-tp: replaces --tensor-parallel-size"),
        (["--trace", str(AZURE), "--sweep-kv-dtype", "fp8,fp4"], "--sweep-kv-dtype 'fp4'"),
        (["--trace", str(AZURE), "--figure", "/tmp/x.gif"], "--figure"),
        (["--trace", str(AZURE), "--workload", str(AZURE)], "not allowed with argument"),
    ],
)
def test_bad_flags_are_one_line(extra, words, capsys):
    code, out, err = _run(
        ["replay", "--model", "llama-3.1-8b", "--budget-gib", "2", "--max-model-len", "8192", *extra], capsys
    )
    assert (code, out) == (2, "") and err.count("\n") == 1 and words in err, err


def test_a_fifo_as_trace_does_not_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    argv = ["replay", "--model", "llama-3.1-8b", "--trace", str(fifo), "--budget-gib", "1", "--max-model-len", "4096"]
    r = subprocess.run([sys.executable, "-m", "kvviz", *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (r.returncode, r.stdout) == (2, "") and r.stderr.count("\n") == 1 and "a FIFO" in r.stderr


def test_a_budget_of_2_to_the_60_bytes_replays(capsys):
    """Issue 38's hostile `--budget-bytes 2**60` (the flag's top, 1 EiB) ended in MemoryError: it is a pool of
    2**39 blocks, and every request runs. Llama 3.1 8B's one group of 32 layers, each a block of 16 tokens x K
    and V x 8 KV heads x 128 x 2 bytes = 2**16 bytes (vLLM 0.33's AttentionSpec.page_size_bytes), is 2**21
    bytes a block (get_num_blocks: budget // page size // layers), so 2**60 // 2**21 = 2**39 blocks."""
    argv = ["replay", "--model", "llama-3.1-8b", "--budget-bytes", str(2**60), "--max-model-len", "8192"]
    code, out, err = _run(argv + ["--trace", str(AZURE), "--rows", "0:20", "--json"], capsys)
    assert code == 0, err
    found = json.loads(out)
    assert found["kv_cache_config"]["num_blocks"] == 2**39
    assert (found["answers"]["finished"], found["answers"]["preemptions"]) == (20, 0)


def test_figure_of_a_run(tmp_path, capsys):
    path = tmp_path / "run.png"
    code, out, err = _run(
        ["replay", "--model", "llama-3.1-8b", "--budget-gib", "2", "--max-model-len", "8192", "--trace", str(AZURE)]
        + ["--rows", "0:60", "--figure", str(path)],
        capsys,
    )
    assert code == 0, err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_sweep_is_one_replay_per_setting(tmp_path, capsys):
    """Each row of the sweep equals the single replay at that setting (a second, separate run)."""
    base = ["replay", "--model", "llama-3.1-8b", "--max-model-len", "8192", "--trace", str(AZURE), "--rows", "0:80"]
    code, out, err = _run(
        base
        + [
            "--sweep-budget-gib",
            "1.5,3",
            "--sweep-kv-dtype",
            "auto,fp8",
            "--json",
            "--figure",
            str(tmp_path / "s.svg"),
        ],
        capsys,
    )
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["label"] for r in rows] == ["1.5 GiB · auto", "1.5 GiB · fp8", "3.0 GiB · auto", "3.0 GiB · fp8"]
    for r in rows:
        gib, dtype = r["setting"]["budget_gib"], r["setting"]["kv_dtype"]
        code, one, err = _run(base + ["--budget-gib", str(gib), "--kv-cache-dtype", dtype, "--json"], capsys)
        a = json.loads(one)["answers"]
        assert (r["preemptions"], r["peak_running"], r["finished"]) == (
            a["preemptions"],
            a["peak_running"],
            a["finished"],
        )
        assert r["p99_queueing_steps"] == a["queueing_steps"]["p99"] and r["hit_rate"] == pytest.approx(a["hit_rate"])
    assert (tmp_path / "s.svg").read_text().lstrip().startswith("<?xml")
    code, out, _ = _run(base + ["--sweep-budget-gib", "1.5,3", "--markdown"], capsys)
    assert out.splitlines()[2].startswith("| setting | blocks | promise")


def test_the_sweep_names_a_setting_vllm_refuses(capsys):
    base = ["replay", "--model", "llama-3.1-8b", "--max-model-len", "8192", "--trace", str(AZURE), "--rows", "0:10"]
    code, out, err = _run(base + ["--sweep-budget-gib", "1,1.5"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert "1.0 GiB" in lines[3] and "1.00x" in lines[3] and "To serve at least one request" in lines[3]
    assert "1.5 GiB" in lines[4] and "10/10" in lines[4]


def test_why_the_hybrid_hits_nothing_is_printed(capsys):
    """Qwen3-Next on Mooncake synthetic rows 1,000-1,119: vLLM hit 0 of 1,407,019 prompt tokens; the answer
    says so and why: whole 576-token blocks are shared, but no earlier request kept its state at them."""
    folder, cases = _references()
    case = cases["qwen3-next-80b-a3b/mooncake-synth-1000"]
    code, out, err = _run(_argv(folder, case, "--markdown"), capsys)
    assert code == 0, err
    pc = case["totals"]["prefix_cache"]
    assert f"| prefix cache | {pc['hits']} of {pc['queries']:,} prompt tokens hit (0.0%)" in out
    line = next(x for x in out.splitlines() if x.startswith("| state-0, state-1, state-2 (mamba, 576-token blocks)"))
    assert "hits nothing" in line and "no earlier request kept its state" in line
