"""kvviz.replay against vLLM 0.33's own scheduler (tests/data/vllm-0.33/replay/scheduler-cases.json:
vLLM's real Scheduler / KVCacheManager / BlockPool on 8 cases), field for field, through
`kvviz replay --json` and the library; plus invariants and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_cases import cli_args, compare, config_path, load_cases, write_workload

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.replay import WorkloadRequest, dumps, loads, read_jsonl, replay

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "replay"
CASES = load_cases(DATA / "scheduler-cases.json")


def _config(case) -> str:
    return config_path(case, DATA)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_cli_matches_vllm(case, tmp_path, capsys):
    workload = write_workload(case, tmp_path / "workload.jsonl")
    assert main(cli_args(case, DATA, workload)) == 0
    compare(json.loads(capsys.readouterr().out), case)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_library_matches_vllm(case):
    inp = case["inputs"]
    knobs = {"max_model_len": inp["max_model_len"]}
    if inp["tp"] != 1:
        knobs["tensor_parallel_size"] = inp["tp"]
    async_ = inp["async_scheduling"] != "off"
    if not async_:
        knobs["async_scheduling"] = False
    plan = kvviz.plan(kvviz.load(_config(case)), **knobs)
    result = replay(
        plan, case["workload"], budget_bytes=inp["kv_budget"], async_scheduling=async_, check_invariants=True
    )
    compare(result.to_json(), case)
    assert len(result.to_dataframe()) == case["totals"]["num_steps"]


# ---- invariants ---------------------------------------------------------------------------
_PLANS = {}


def _plan(name, max_model_len=2048):
    if (name, max_model_len) not in _PLANS:
        path = DATA / "configs" / name / "config.json"
        _PLANS[name, max_model_len] = kvviz.plan(kvviz.load(str(path)), max_model_len=max_model_len)
    return _PLANS[name, max_model_len]


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 14))
    out = []
    for i in range(n):
        group = draw(st.sampled_from([None, "a", "b"]))
        prompt = draw(st.integers(1, 1500))
        out.append(
            WorkloadRequest(
                f"r{i}",
                draw(st.integers(0, 30)),
                prompt,
                draw(st.integers(1, 300)),
                group,
                draw(st.integers(0, prompt)) if group else 0,
            )
        )
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workloads(),
    st.sampled_from(["llama-3.1-8b", "gemma-3-27b-text", "qwen3-next-80b-a3b"]),
    st.booleans(),
    st.integers(24, 160),
    st.sampled_from([512, 2048, 8192]),
)
def test_invariants(workload, model, async_, blocks, batched):
    plan = _plan(model)
    budget = plan.block_stride * blocks
    r = replay(
        plan,
        workload,
        budget_bytes=budget,
        async_scheduling=async_,
        max_num_batched_tokens=batched,
        check_invariants=True,
        max_steps=100_000,
    )
    steps = r.step_columns()
    usable = r.to_json()["kv_cache_config"]["usable_blocks"]
    for free, held, cached in zip(steps["free_blocks"], steps["held_blocks"], steps["cached_free_blocks"]):
        assert free + sum(held) == usable and 0 <= cached <= free
    for rec in r.request_records():
        if rec["finish_reason"] == "length":
            assert rec["num_output_tokens"] == rec["output_len"]
        else:
            assert rec["finish_reason"] == "never_admitted"
    assert steps["free_blocks"][-1] == usable


def test_never_admitted_is_reported():
    plan = _plan("llama-3.1-8b")
    work = [WorkloadRequest("big", 0, 2000, 10), WorkloadRequest("small", 0, 100, 5)]
    r = replay(plan, work, budget_bytes=plan.block_stride * 40)
    recs = {x["id"]: x for x in r.request_records()}
    assert recs["big"]["finish_reason"] == "never_admitted"
    assert recs["small"]["finish_reason"] == "length"
    assert r.totals_dict()["never_admitted"] == ["big"]


# ---- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, words",
    [
        ('{"id": "a", "arrival_step": 0, "prompt_len": 5, "output_len": 1}\n{oops\n', ["line 2", "malformed JSON"]),
        ('{"id": "a", "arrival_step": 0, "prompt_len": -5, "output_len": 1}\n', ["line 1", "prompt_len"]),
        ('{"id": "a", "arrival_step": -1, "prompt_len": 5, "output_len": 1}\n', ["line 1", "arrival_step"]),
        (
            '{"id": "a", "arrival_step": 0, "prompt_len": 5, "output_len": 1}\n'
            '{"id": "a", "arrival_step": 0, "prompt_len": 5, "output_len": 1}\n',
            ["line 2", "id", "duplicate"],
        ),
        ('{"id": "a", "arrival_step": 0, "prompt_len": 4000, "output_len": 200}\n', ["line 1", "max_model_len"]),
        ('{"id": "a", "arrival_step": 0, "prompt_len": 5}\n', ["line 1", "output_len", "missing"]),
        ("[1, 2]\n", ["line 1", "not a JSON object"]),
    ],
)
def test_bad_workload_is_one_line(text, words):
    with pytest.raises(KvvizError) as e:
        loads(text, max_model_len=4096)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_cli_bad_workload_exits_2(tmp_path, capsys):
    bad = tmp_path / "w.jsonl"
    bad.write_text('{"id": "a", "arrival_step": 0, "prompt_len": 5, "output_len": 0}\n')
    assert (
        main(
            [
                "replay",
                "--model",
                "llama-3.1-8b",
                "--workload",
                str(bad),
                "--budget-bytes",
                str(2**30),
                "--max-model-len",
                "4096",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1" in err and "output_len" in err


def test_round_trip(tmp_path):
    work = [WorkloadRequest("x", 0, 10, 2, "g", 4), WorkloadRequest("y", 3, 7, 1)]
    p = tmp_path / "w.jsonl"
    p.write_text(dumps(work))
    assert read_jsonl(p) == tuple(work)


@pytest.mark.parametrize("gen", ["chat", "documents", "multi_turn", "agentic", "burst"])
def test_generators_seeded_and_replayable(gen):
    from kvviz.replay import generators

    f = getattr(generators, gen)
    assert f(seed=3) == f(seed=3)
    r = replay(_plan("llama-3.1-8b", 8192), f(seed=3)[:20], budget_bytes=2**30, check_invariants=True)
    assert r.totals_dict()["num_finished"] == 20


def test_csv_trace(tmp_path):
    from kvviz.replay import read_csv_trace

    p = tmp_path / "t.csv"
    p.write_text("arrival_time,prompt_tokens,output_tokens\n1.00,100,5\n1.10,50,3\n1.06,20,2\n")
    w = read_csv_trace(p, step_seconds=0.05)
    assert [(r.id, r.arrival_step) for r in w] == [("trace-2", 0), ("trace-4", 1), ("trace-3", 2)]
    p.write_text("arrival_time,prompt_tokens,output_tokens\n1.0,x,5\n")
    with pytest.raises(KvvizError, match="line 2: prompt_tokens"):
        read_csv_trace(p)
