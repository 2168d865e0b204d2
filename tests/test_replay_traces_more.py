"""vLLM 0.33's own scheduler on more windows of the published traces (tests/data/vllm-0.33/replay-traces-more,
scripts/vllm_reference_traces.py): Llama 4 Scout's chunked local attention, DeepSeek-V2-Lite's MLA, the Mamba
hybrids Nemotron-Nano (Mamba-2) and Jamba (Mamba-1), an fp8 KV cache and TP 2, on Mooncake's conversation and
synthetic traces and Azure's code and conversation traces, at budgets that preempt. `kvviz replay --json`
equals each field for field, as tests/test_replay_traces.py compares the first four."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_cases import cli_args, compare, load_cases, write_workload

from kvviz.cli.main import main
from kvviz.replay import read_trace

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "replay-traces-more"
CASES = load_cases(DATA / "trace-cases.json")
SHARED_TRACES = [Path(__file__).resolve().parents[3] / "shared" / "traces", Path("/work/shared/traces")]


def test_the_cases_cover_what_the_first_four_leave_out():
    specs = {g["spec_class"] for c in CASES for g in c["kv_cache_config"]["groups"]}
    assert specs == {"FullAttentionSpec", "ChunkedLocalAttentionSpec", "MLAAttentionSpec", "MambaSpec"}
    inputs = [c["inputs"] for c in CASES]
    assert any(i["tp"] == 2 for i in inputs) and any(i["kv_cache_dtype"] == "fp8" for i in inputs)
    assert {c["trace"]["format"] for c in CASES} == {"mooncake", "azure"}
    assert all(c["totals"]["total_preemptions"] for c in CASES if c["inputs"]["tp"] == 1)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_cli_matches_vllm(case, tmp_path, capsys):
    workload = write_workload(case, tmp_path / "workload.jsonl")
    assert main(cli_args(case, DATA, workload)) == 0
    compare(json.loads(capsys.readouterr().out), case, ("preempted",))  # a step's preempted ids: a set there


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_the_workloads_are_the_trace_rows(case):
    """Each workload is its window read by the trace rule (the rows left out counted in the case's `trace`)."""
    folder = next((p for p in SHARED_TRACES if p.is_dir()), None)
    if folder is None:
        pytest.skip("the published traces are not in ../shared/traces (this clone has only the windows' results)")
    note = case["trace"]
    trace = read_trace(folder / note["source"], rows=tuple(note["rows"]), max_model_len=case["inputs"]["max_model_len"])
    assert [r.to_json() for r in trace.requests] == case["workload"]
    assert trace.to_json() == note
