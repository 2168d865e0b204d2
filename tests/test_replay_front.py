"""The replay's front door (kvviz/replay/front.py, docs/replay.md#python): `kvviz.replay(plan, workload_or_trace,
...)` from `import kvviz`, the budget as Plan.capacity takes it, the scheduler knobs from the plan (issue 37
item 3: a plan made at max_num_batched_tokens=2048 replayed at 8,192), traces and files in, and every
hostile input of issues 37 and 38 as one bounded line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.replay import WorkloadRequest, chat, loads, read_csv_trace, read_jsonl, read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
AZURE = TRACES / "azure-conv-rows-5000-5299.csv"
_PLANS: dict = {}


def _plan(**knobs):
    key = tuple(sorted(knobs.items()))
    if key not in _PLANS:
        _PLANS[key] = kvviz.plan("llama-3.1-8b", **knobs)
    return _PLANS[key]


def test_one_name_is_the_function_and_the_package():
    import kvviz.replay as package
    from kvviz.replay import replay

    assert kvviz.replay is package and callable(kvviz.replay) and kvviz.replay.chat is chat
    plan = _plan(max_model_len=4096)
    a = kvviz.replay(plan, chat(12), budget_gib=1)
    b = replay(plan, chat(12), budget_gib=1)
    assert a.to_json() == b.to_json() and a.totals_dict()["num_finished"] == 12


def test_the_plans_scheduler_knobs_are_the_replays():
    """Issue 37 item 3: kvviz.plan(..., max_num_batched_tokens=2048) then replay(plan, ...) runs at 2,048."""
    plan = _plan(max_model_len=4096, max_num_batched_tokens=2048, async_scheduling=False)
    r = kvviz.replay(plan, chat(40, mean_gap=0.2), budget_gib=2)
    inputs = r.to_json()["inputs"]
    assert inputs["max_num_batched_tokens"] == 2048 and inputs["async_scheduling"] is False
    assert inputs["max_num_seqs"] == 1024  # min(1024, 2048): vLLM's default on an H200-class GPU
    assert max(r.step_columns()["tokens_scheduled"]) == 2048  # the token budget binds at 2,048, not 8,192
    same = kvviz.replay(plan, chat(40, mean_gap=0.2), budget_gib=2, max_num_batched_tokens=2048)
    assert same.to_json() == r.to_json()
    for knob, value, planned in (
        ("max_num_batched_tokens", 8192, 2048),
        ("async_scheduling", True, False),
        ("max_model_len", 8192, 4096),
    ):
        with pytest.raises(KvvizError, match=f"{knob}={value}: the plan was made with .*={planned}"):
            kvviz.replay(plan, chat(3), budget_gib=2, **{knob: value})
    free = kvviz.replay(_plan(max_model_len=4096), chat(40, mean_gap=0.2), budget_gib=2, max_num_batched_tokens=512)
    assert max(free.step_columns()["tokens_scheduled"]) == 512  # a knob the plan left open is taken from here


def test_the_budget_as_capacity_takes_it():
    plan = _plan(max_model_len=4096)
    work = chat(20)
    gpu = kvviz.replay(plan, work, gpu="H100", gpu_memory_utilization=0.5)
    budget = plan.capacity(gpu="H100", gpu_memory_utilization=0.5).budget_bytes
    assert gpu.to_json() == kvviz.replay(plan, work, budget_bytes=budget).to_json()
    assert gpu.to_json()["kv_cache_config"]["num_blocks"] == plan.capacity(budget).num_blocks
    gib = kvviz.replay(plan, work, budget_gib=1.5)
    assert gib.to_json()["inputs"]["kv_budget"] == 3 * 2**29
    notes = gib.to_json()["notes"]
    assert notes["max_concurrency"] == plan.capacity(3 * 2**29).max_concurrency
    assert notes["capacity_line"] == plan.capacity(3 * 2**29).line
    for kw, words in (
        ({}, "give one budget"),
        ({"budget_gib": 1, "budget_bytes": 2**30}, "give one budget"),
        ({"budget_gib": 1, "gpu_memory_utilization": 0.5}, "applies only with a GPU"),
        ({"budget_gib": 1, "tensor_parallel_size": 2}, "tensor_parallel_size=2: the plan was made with"),
    ):
        with pytest.raises(KvvizError, match=words):
            kvviz.replay(plan, work, **kw)


def test_a_trace_file_or_a_trace_in():
    plan = _plan(max_model_len=8192)
    by_path = kvviz.replay(plan, AZURE, budget_gib=1.5, rows=(0, 60))
    trace = read_trace(AZURE, rows=(0, 60))
    by_trace = kvviz.replay(plan, trace, budget_gib=1.5)
    assert by_path.to_json() == by_trace.to_json()
    note = by_path.to_json()["notes"]["trace"]
    assert note["format"] == "azure" and note["rows"] == [0, 60] and note["num_requests"] == 60
    assert note["step_ms"] == 25 and note["left_out_too_long"] == 0
    slower = kvviz.replay(plan, AZURE, budget_gib=1.5, rows=(0, 60), step_ms=250)
    assert [r["arrival_step"] for r in slower.request_records()] == [
        r.arrival_step for r in read_trace(AZURE, rows=(0, 60), step_ms=250).requests
    ]
    with pytest.raises(KvvizError, match="rows: applies to a trace file"):
        kvviz.replay(plan, chat(3), budget_gib=1, rows=(0, 2))
    with pytest.raises(KvvizError, match="step_ms: the trace was read already"):
        kvviz.replay(plan, trace, budget_gib=1, step_ms=10)


def test_a_trace_leaves_out_what_the_plan_cannot_hold(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,3000,44\n"
        "2023-11-16 18:15:46.7805900,4000,200\n2023-11-16 18:15:46.8805900,300,0\n"
    )
    r = kvviz.replay(_plan(max_model_len=4096), p, budget_gib=1)
    note = r.to_json()["notes"]["trace"]
    assert [x["id"] for x in r.request_records()] == ["az-00000"]
    assert (note["left_out_too_long"], note["left_out_zero_length"], note["left_out_ids"]) == (
        1,
        1,
        ["az-00001", "az-00002"],
    )


def test_a_workload_file_is_still_a_workload(tmp_path):
    p = tmp_path / "w.jsonl"
    p.write_text("".join(json.dumps(r.to_json()) + "\n" for r in chat(10)))
    plan = _plan(max_model_len=4096)
    assert kvviz.replay(plan, p, budget_gib=1).to_json() == kvviz.replay(plan, chat(10), budget_gib=1).to_json()
    assert kvviz.replay(plan, p, budget_gib=1).to_json()["notes"]["trace"] is None


def test_dataframes_and_figures_take_the_replay():
    r = kvviz.replay(_plan(max_model_len=4096), chat(20), budget_gib=1, record_blocks=True)
    steps, requests = r.to_dataframe(), r.to_dataframe("requests")
    assert len(steps) == r.num_steps and list(requests["id"]) == [w.id for w in chat(20)]
    with pytest.raises(KvvizError, match="what='blocks'"):
        r.to_dataframe("blocks")
    from kvviz.views.traffic_data import TimeLapse, occupancy_data, queue_data

    assert kvviz.occupancy(r).axes[0].get_title() == kvviz.occupancy(occupancy_data(r)).axes[0].get_title()
    assert kvviz.queues(r).axes[0].get_title() == kvviz.queues(queue_data(r)).axes[0].get_title()
    assert kvviz.pool_map(r, step=5).axes[0].get_title() == kvviz.pool_map(TimeLapse(r).at(5)).axes[0].get_title()
    for call, words in (
        (lambda: kvviz.occupancy(None), "data=None: give a Replay"),
        (lambda: kvviz.pool_map(r), "step: give the step"),
        (lambda: kvviz.pool_map(TimeLapse(r).at(5), step=6), "step=6: the map is of step 5"),
    ):
        with pytest.raises(KvvizError, match=words):
            call()


# ---- hostile input: one bounded line each (issues 37 and 38) -------------------------------------------
def _one_line(call, *words):
    with pytest.raises(KvvizError) as e:
        call()
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg[:500]
    for w in words:
        assert w in msg, msg
    return msg


def test_nonsense_plans_and_workloads():
    plan = _plan(max_model_len=4096)
    _one_line(lambda: kvviz.replay(None, chat(3), budget_gib=1), "plan=None: give a plan")
    _one_line(lambda: kvviz.replay("llama-3.1-8b", chat(3), budget_gib=1), "plan='llama-3.1-8b'")
    _one_line(lambda: kvviz.replay(plan, None, budget_gib=1), "workload=None")
    _one_line(lambda: kvviz.replay(plan, 5, budget_gib=1), "workload=5")
    _one_line(lambda: kvviz.replay(plan, {"id": "a"}, budget_gib=1), "workload={'id': 'a'}")
    _one_line(lambda: kvviz.replay(plan, [5], budget_gib=1), "workload line 1: not a JSON object")
    _one_line(lambda: kvviz.replay(plan, "/nonexistent/t.jsonl", budget_gib=1), "cannot read")


def test_errors_never_echo_the_whole_input(tmp_path):
    """Issue 37: a 10 MB key gave a 10 MB error line, a 15 MB list as id a 15 MB one."""
    good = {"id": "a", "arrival_step": 0, "prompt_len": 5, "output_len": 1}
    _one_line(lambda: loads(json.dumps(dict(good, **{"k" * 10_000_000: 1}))), "line 1", "unknown field")
    _one_line(lambda: loads(json.dumps(dict(good, id=list(range(3_000_000))))), "line 1", "id=[0, 1, 2")
    _one_line(lambda: loads(json.dumps(dict(good, prefix_group=["g"] * 3_000_000))), "line 1", "prefix_group=[")
    _one_line(lambda: loads(json.dumps(dict(good, prompt_len=-(10**4000)))), "integer of 4,001 digits")
    plan = _plan(max_model_len=4096)
    _one_line(lambda: kvviz.replay(plan, [dict(good, prompt_len=-(10**5000))], budget_gib=1), "prompt_len=<an integer")
    huge = WorkloadRequest("x" * 10_000_000, 0, 5, 1)
    _one_line(lambda: kvviz.replay(_plan(max_model_len=4096), [huge, huge], budget_gib=1), "duplicate of line 1")
    p = tmp_path / "big.jsonl"
    p.write_text(json.dumps(dict(good, **{"k" * 10_000_000: 1})) + "\n")
    _one_line(lambda: read_jsonl(p), "line 1: longer than 1,048,576 bytes")


@pytest.mark.parametrize("depth_or_digits", ["nested", "digits"])
def test_a_line_too_deep_or_a_number_too_long(tmp_path, depth_or_digits):
    """Issue 38: RecursionError / ValueError tracebacks before."""
    line = "[" * 1000 + "]" * 1000 if depth_or_digits == "nested" else '{"id": "a", "prompt_len": ' + "9" * 5000 + "}"
    p = tmp_path / "w.jsonl"
    p.write_text('{"id": "z", "arrival_step": 0, "prompt_len": 5, "output_len": 1}\n' + line + "\n")
    words = "nested too deeply" if depth_or_digits == "nested" else "5,000 digits"
    _one_line(lambda: read_jsonl(p), "line 2", words)
    _one_line(lambda: loads(p.read_text()), "line 2", words)


def test_files_that_never_end(tmp_path):
    """/dev/zero, /dev/urandom and a FIFO are refused before a byte is read; a sparse 4 GiB file at line 1."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", "/dev/urandom", fifo):
        _one_line(lambda: read_jsonl(path), "not a regular file")
        _one_line(lambda: kvviz.replay(_plan(max_model_len=4096), path, budget_gib=1), "not a regular file")
    sparse = tmp_path / "sparse.jsonl"
    with open(sparse, "wb") as f:
        f.truncate(4 << 30)
    t = time.perf_counter()
    _one_line(lambda: read_jsonl(sparse), "line 1: longer than")
    assert time.perf_counter() - t < 5  # one line's bound read, not 4 GiB


def test_a_fifo_as_workload_on_the_command_line_does_not_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    argv = [
        "replay",
        "--model",
        "llama-3.1-8b",
        "--workload",
        str(fifo),
        "--budget-gib",
        "1",
        "--max-model-len",
        "4096",
    ]
    r = subprocess.run([sys.executable, "-m", "kvviz", *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (r.returncode, r.stdout) == (2, "") and r.stderr.count("\n") == 1 and "a FIFO" in r.stderr


def test_nan_in_a_csv_trace(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_time,prompt_tokens,output_tokens\n1.0,100,5\nnan,50,3\n")
    _one_line(lambda: read_csv_trace(p), "line 3", "arrival_time='nan': not a finite number")
    p.write_text("arrival_time,prompt_tokens,output_tokens\n1.0,100,5\ninf,50,3\n")
    _one_line(lambda: read_csv_trace(p), "line 3", "not a finite number")
    _one_line(lambda: read_csv_trace(p, step_seconds=float("nan")), "step_seconds=nan")


def test_generators_refuse_what_would_never_end():
    """chat(10**12) would fill memory for hours: refused at once, naming the count and the bound."""
    from kvviz.replay import agentic, burst, documents, multi_turn

    t = time.perf_counter()
    _one_line(lambda: chat(10**12), "n=1000000000000: must be an integer from 0 to 10,000,000")
    _one_line(lambda: documents(10**100), "n=")
    _one_line(lambda: agentic(-1), "n=-1")
    _one_line(lambda: burst(2**5000), "n=<an integer of")
    _one_line(lambda: multi_turn(10**6, 10**6), "sessions x turns")
    _one_line(lambda: chat(2.5), "n=2.5: must be an integer")
    assert time.perf_counter() - t < 1
