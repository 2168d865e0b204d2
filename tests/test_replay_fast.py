"""The replay's fast path (docs/replay.md#speed: steady decode replayed lazily, quiet steps repeated in one
jump, kvviz/replay/steady.py and loop.py) changes no output: `replay(..., fast=True)` equals the step-by-step
replay `fast=False` in every step field, request field, total and time-lapse entry, on every kind of group the
references cover, generated workloads (scripts/replay_equivalence.py runs the wider set), random ones, idle
gaps and an arrival a billion steps away."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.replay import WorkloadRequest, agentic, burst, chat, documents, multi_turn, replay

DATA = Path(__file__).parent / "data" / "vllm-0.33"
MODELS = {  # one of each kind of group: dense, sliding + full, MLA, Mamba align, chunked local
    "llama-3.1-8b": "replay",
    "gemma-3-27b-text": "replay",
    "deepseek-v2-lite": "replay",
    "qwen3-next-80b-a3b": "replay",
    "gpt-oss-20b": "replay-more",
    "nemotron-nano-9b-v2": "replay-more",
    "llama-4-scout": "replay-chunked",
}
_PLANS: dict = {}


def _plan(model: str, async_: bool = True):
    key = (model, async_)
    if key not in _PLANS:
        knobs = {"max_model_len": 4096} if async_ else {"max_model_len": 4096, "async_scheduling": False}
        _PLANS[key] = kvviz.plan(kvviz.load(str(DATA / MODELS[model] / "configs" / model / "config.json")), **knobs)
    return _PLANS[key]


def _budget(plan, factor: float) -> int:
    """`factor` times the blocks one request of max_model_len needs (1.2: a tight pool that preempts)."""
    per_request = 1024 / plan.capacity(plan.block_stride * 1024).max_concurrency
    return plan.block_stride * int(per_request * factor + 2)


def assert_same(plan, work, budget, async_=True, **knobs) -> None:
    """The fast replay equals the step-by-step one (with the invariant check) in every output."""
    common = {"budget_bytes": budget, "async_scheduling": async_, "record_blocks": True, **knobs}
    fast = replay(plan, work, **common)
    slow = replay(plan, work, fast=False, check_invariants=True, **common)
    assert fast.to_json() == slow.to_json()
    assert fast.block_log == slow.block_log


WORKLOADS = {
    "chat": lambda: chat(24, seed=31),
    "documents": lambda: documents(16, seed=32, num_documents=2, document=(1000, 2400)),
    "multi_turn": lambda: multi_turn(5, 3, seed=33),
    "agentic": lambda: agentic(12, seed=34, tool_prompt=1500),
    "burst": lambda: burst(10, seed=35, prompt=(500, 2000), output=(40, 400)),
}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_fast_equals_step_by_step(model, workload):
    async_ = workload not in ("documents", "burst")  # async scheduling off on two of the five
    plan = _plan(model, async_)
    assert_same(plan, WORKLOADS[workload](), _budget(plan, 1.2 if workload in ("burst", "chat") else 3.0), async_)


@st.composite
def traffic(draw):
    """Requests with prefix groups or hash chains, idle gaps between bursts, outputs long enough to decode."""
    out = []
    for i in range(draw(st.integers(1, 10))):
        prompt = draw(st.integers(1, 1800))
        kind = draw(st.sampled_from(["own", "group", "chain"]))
        common = {"id": f"r{i}", "arrival_step": draw(st.integers(0, 400)), "prompt_len": prompt}
        common["output_len"] = draw(st.integers(1, 260))
        if kind == "group":
            out.append(WorkloadRequest(**common, prefix_group=draw(st.sampled_from("ab")), prefix_len=prompt // 2))
        elif kind == "chain":
            ids = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
            out.append(WorkloadRequest(**common, hash_ids=tuple(ids), hash_block_tokens=512))
        else:
            out.append(WorkloadRequest(**common))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    traffic(), st.sampled_from(sorted(MODELS)), st.booleans(), st.sampled_from([1.2, 4.0]), st.sampled_from([512, 8192])
)
def test_fast_equals_step_by_step_random(work, model, async_, factor, batched):
    plan = _plan(model, async_)
    assert_same(plan, work, _budget(plan, factor), async_, max_num_batched_tokens=batched)


def test_a_billion_idle_steps_cost_nothing():
    """One request arriving at step 10**9: the idle gap is one repeated row, every step still counted, and the
    busy steps are those of the same request arriving at step 0, replayed step by step, shifted by 10**9."""
    plan = _plan("llama-3.1-8b")
    budget = _budget(plan, 2.0)
    t = time.process_time()
    late = replay(plan, [WorkloadRequest("late", 10**9, 1000, 50)], budget_bytes=budget)
    assert time.process_time() - t < 1.0
    now = replay(plan, [WorkloadRequest("late", 0, 1000, 50)], budget_bytes=budget, fast=False)
    (a,), (b,) = late.request_records(), now.request_records()
    for field in ("first_scheduled_step", "first_token_step", "finish_step", "finish_processed_step"):
        assert a[field] == b[field] + 10**9
    ta, tb = late.totals_dict(), now.totals_dict()
    assert ta["num_idle_steps"] == 10**9 and ta["num_steps"] == tb["num_steps"] + 10**9
    assert ta["tokens_scheduled"] == tb["tokens_scheduled"] and late.steps.rows[0][1]  # an idle row, repeated


def test_an_absurd_pool_costs_the_blocks_it_touches():
    """`budget_bytes=2**60` (issue 38's hostile case, 5.5e11 blocks of Llama 3.1 8B): the pool grows only by the
    blocks handed out (kvviz/replay/pool.py), so it replays at once and small; and it behaves as any pool the run
    never fills: every request field, held block and prefix hit equal to a pool of 20,000 blocks, the free count
    shifted by the difference."""
    import tracemalloc

    plan = _plan("llama-3.1-8b")
    work = chat(40, seed=36)
    tracemalloc.start()
    huge = replay(plan, work, budget_bytes=2**60)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20
    big = replay(plan, work, budget_bytes=plan.block_stride * 20_000)
    nh, nb = (r.to_json()["kv_cache_config"]["num_blocks"] for r in (huge, big))
    assert nh == 2**60 // plan.block_stride and huge.totals_dict()["max_held_blocks"] < 20_000
    assert huge.request_records() == big.request_records()
    sh, sb = huge.step_columns(), big.step_columns()
    for field in sh:
        if field in ("free_blocks", "free_blocks_after_schedule"):
            assert all(a is b is None or a - b == nh - nb for a, b in zip(sh[field], sb[field]))
        else:
            assert sh[field] == sb[field], field


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_it_was(enabled):
    """The engine pauses Python's cyclic collector for its loop (docs/replay.md#speed) and leaves it as it found
    it: after a finished run and after one that stops with an error."""
    import gc

    plan = _plan("llama-3.1-8b")
    work = [WorkloadRequest("a", 0, 300, 40), WorkloadRequest("b", 2, 500, 30)]
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        replay(plan, work, budget_bytes=_budget(plan, 1.0))
        assert gc.isenabled() is enabled
        with pytest.raises(KvvizError, match="max_steps=3"):
            replay(plan, work, budget_bytes=_budget(plan, 1.0), max_steps=3)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
