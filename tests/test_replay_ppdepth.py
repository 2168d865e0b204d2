"""The replay's batch queue under pipeline parallel: as deep as vLLM 0.33's EngineCore keeps it
(`VllmConfig.max_concurrent_batches`: PP + 1 with async scheduling and the V2 model runner, PP without;
`step_with_batch_queue` whenever that is over 1, async or not). Checked step for step and request for request
against vLLM's own scheduler driven by EngineCore's loop at PP 2 (tests/data/vllm-0.33/replay-pp)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_cases import cli_args, compare, load_cases, write_workload

import kvviz
from kvviz.cli import main
from kvviz.options import Options
from kvviz.replay import WorkloadRequest, replay

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "replay-pp"
REPLAY = Path(__file__).parent / "data" / "vllm-0.33" / "replay"  # the configs beside the PP 1 references
CONFIGS = REPLAY / "configs"
CASES = load_cases(DATA / "cases.json")
_PLANS: dict = {}


def _plan(case: dict):
    inp = case["inputs"]
    key = (inp["model"], inp["pp"], inp["max_model_len"], inp["async_scheduling"])
    if key not in _PLANS:
        knobs = {"pipeline_parallel_size": inp["pp"], "max_model_len": inp["max_model_len"]}
        if inp["async_scheduling"] == "off":
            knobs["async_scheduling"] = False
        _PLANS[key] = kvviz.plan(kvviz.load(str(CONFIGS / inp["model"] / "config.json")), **knobs)
    return _PLANS[key]


def _replay(case: dict, **kw):
    inp = case["inputs"]
    budget = inp["kv_budget"]
    return replay(
        _plan(case),
        case["workload"],
        budget_bytes=tuple(budget) if isinstance(budget, list) else budget,
        async_scheduling=inp["async_scheduling"] != "off",
        **kw,
    )


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_the_queue_depth_is_vllms(case):
    """The depth vLLM's engine ran with (recorded) is Options.max_concurrent_batches's, kvviz's one home of it."""
    inp, cfg = case["inputs"], case["config"]
    assert cfg["pipeline_parallel_size"] == inp["pp"]
    async_ = inp["async_scheduling"] != "off"
    assert cfg["async_scheduling"] is async_
    options = Options(pipeline_parallel_size=inp["pp"], async_scheduling=async_)
    assert cfg["max_concurrent_batches"] == options.max_concurrent_batches


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_the_replay_at_pp_2_matches_vllm_step_for_step(case):
    """Every step field, request field and total as vLLM 0.33's scheduler, driven as EngineCore drives it at PP 2."""
    result = _replay(case, check_invariants=True)
    compare(result.to_json(), case)


@pytest.mark.parametrize("name", ["llama-3.1-8b/chat/pp=2", "llama-3.1-8b/burst/pp=2/async=off"])
def test_the_cli_at_pp_2_matches_vllm(name, tmp_path, capsys):
    """`kvviz replay --pipeline-parallel-size 2 --json` gives the same steps and requests as vLLM's."""
    case = next(c for c in CASES if c["case"] == name)
    argv = cli_args(case, REPLAY, write_workload(case, tmp_path / "workload.jsonl"))
    assert main([*argv, "--pipeline-parallel-size", "2"]) == 0
    compare(json.loads(capsys.readouterr().out), case)


@st.composite
def _workloads(draw):
    n = draw(st.integers(1, 10))
    return [
        WorkloadRequest(f"r{i}", draw(st.integers(0, 20)), draw(st.integers(1, 1200)), draw(st.integers(1, 200)))
        for i in range(n)
    ]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_workloads(), st.sampled_from(["llama-3.1-8b", "qwen3-next-80b-a3b"]), st.booleans(), st.integers(24, 120))
def test_pp_2_invariants_and_decode_cadence(workload, model, async_, blocks):
    """At PP 2 the pool stays whole, every request finishes with its output, and with async scheduling two of a
    request's tokens are never sampled in batches less than 2 steps apart (AsyncScheduler.decode_stagger = PP:
    a request that sampled in schedule() call k waits for call k + 2; a preempted one comes back no sooner)."""
    knobs = {"pipeline_parallel_size": 2, "max_model_len": 2048}
    if not async_:
        knobs["async_scheduling"] = False
    plan = kvviz.plan(kvviz.load(str(CONFIGS / model / "config.json")), **knobs)
    r = replay(plan, workload, budget_bytes=plan.block_stride * blocks, async_scheduling=async_, check_invariants=True)
    steps = r.step_columns()
    usable = r.to_json()["kv_cache_config"]["usable_blocks"]
    assert all(f + sum(h) == usable for f, h in zip(steps["free_blocks"], steps["held_blocks"]))
    assert steps["free_blocks"][-1] == usable
    for rec in r.request_records():
        if rec["finish_reason"] == "never_admitted":
            continue
        assert rec["finish_reason"] == "length" and rec["num_output_tokens"] == rec["output_len"]
        if async_:
            assert rec["finish_step"] - rec["first_token_step"] >= 2 * (rec["output_len"] - 1)
