"""What-if under traffic in one call (kvviz/deploy/traffic.py, docs/replay.md#sweeps): one replay per setting of
the axes given as lists, each equal to the single replay at that setting, GPUs sized as Plan.capacity sizes
them, the settings vLLM would not start on named instead of replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.replay import chat, read_trace
from kvviz.replay.answers import answers

AZURE = Path(__file__).parent / "data" / "traces" / "azure-conv-rows-5000-5299.csv"


def test_gpus_and_tp_sizes():
    s = kvviz.sweep(
        "llama-3.1-8b",
        AZURE,
        trace={"rows": (0, 40)},
        max_model_len=8192,
        gpu=["H100", "H200"],
        tensor_parallel_size=[1, 2],
        gpu_memory_utilization=0.2,
    )
    assert [r.label for r in s.rows] == ["H100 · TP 1", "H100 · TP 2", "H200 · TP 1", "H200 · TP 2"]
    refused = s.rows[0]
    assert refused.refused.startswith("no memory left for the KV cache") and refused.requests == 0
    trace = read_trace(AZURE, rows=(0, 40))
    for row in s.rows[1:]:
        setting = dict(row.setting)
        plan = kvviz.plan("llama-3.1-8b", max_model_len=8192, tensor_parallel_size=setting["tensor_parallel_size"])
        cap = plan.capacity(gpu=setting["gpu"], gpu_memory_utilization=0.2)
        assert (row.num_blocks, row.max_concurrency) == (cap.num_blocks, cap.max_concurrency)
        one = answers(kvviz.replay(plan, trace, gpu=setting["gpu"], gpu_memory_utilization=0.2))
        assert (row.preemptions, row.peak_running, row.finished) == (one.preemptions, one.peak_running, 40)
    assert "no memory left" in s.table() and s.to_json()["rows"][1]["setting"]["gpu"] == "H100"
    assert s.figure_data().labels[0] == "H100 · TP 1 (refused)"


def test_max_num_seqs_and_a_workload():
    work = chat(60, seed=3, mean_gap=0.2)
    s = kvviz.sweep("llama-3.1-8b", work, max_model_len=4096, budget_gib=2, max_num_seqs=[2, 8, 64])
    assert [r.peak_running for r in s.rows] == [
        2,
        8,
        answers(
            kvviz.replay(kvviz.plan("llama-3.1-8b", max_model_len=4096), work, budget_gib=2, max_num_seqs=64)
        ).peak_running,
    ]
    assert s.step_ms is None and s.title == "llama-3.1-8b on '60 requests'"


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"budget_gib": 2}, "give at least one of"),
        ({"budget_gib": [1, 2], "gpu": ["H100"]}, "sweep over budgets or over GPUs, not both"),
        ({"budget_gib": 2, "max_num_seqs": list(range(1, 66))}, "65 settings; at most 64"),
        ({"budget_gib": 2, "kv_dtype": []}, "kv_dtype=[]: give at least one value"),
        ({"budget_gib": 2, "kv_dtype": ["fp4", "fp8"]}, "kv_dtype='fp4'"),
        ({"gpu": ["H100", "H1000"]}, "gpu='H1000': unknown GPU"),
    ],
)
def test_bad_sweeps_are_one_line(kw, words):
    with pytest.raises(KvvizError) as e:
        kvviz.sweep("llama-3.1-8b", chat(3), max_model_len=4096, **kw)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_reading_arguments_need_a_trace_file():
    with pytest.raises(KvvizError, match="rows: applies to a trace file"):
        kvviz.sweep("llama-3.1-8b", chat(3), trace={"rows": (0, 2)}, max_model_len=4096, budget_gib=[1, 2])
