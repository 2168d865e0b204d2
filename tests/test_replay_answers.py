"""The answers' parts (kvviz/replay/sharing.py, kvviz/replay/answers.py): what a workload shares, by hand and as
vLLM 0.33's own replays of real traces hit it, and the percentiles against numpy's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvviz
from kvviz.replay import WorkloadRequest, read_trace
from kvviz.replay.answers import answers, percentiles
from kvviz.replay.sharing import model_reach, reachable, shared_spans, sharing_note, whole_blocks

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
REFERENCES = [
    ROOT / "tests" / "data" / "vllm-0.33" / "replay-traces" / "trace-cases.json",
    ROOT.parent.parent / "shared" / "data" / "vllm-0.33" / "replay-traces" / "trace-cases.json",
    Path("/work/shared/data/vllm-0.33/replay-traces/trace-cases.json"),
]


def _chain(rid, step, prompt, ids, out=5):
    return WorkloadRequest(rid, step, prompt, out, None, 0, tuple(ids), 512)


def test_spans_by_hand():
    """replay-traces/README.md: requests share the tokens of their common leading ids; a partial block shares its
    first tokens with the same id's block elsewhere; tokens past the ids are the request's own."""
    reqs = [
        _chain("a", 0, 1300, [0, 1, 2]),  # blocks 512, 512, 276
        _chain("b", 1, 1100, [0, 1, 3]),  # shares ids 0, 1: 1,024
        _chain("c", 2, 700, [0, 1]),  # id 1 partial (188 tokens): all 700 shared
        _chain("d", 3, 2000, [0, 1, 2]),  # id 2 was seen with 276 tokens: 1,024 + 276, then its own
        _chain("e", 0, 600, [9]),  # arrives first (step 0, after a): nothing shared
        WorkloadRequest("f", 4, 900, 5, "sys", 600),
        WorkloadRequest("g", 5, 500, 5, "sys", 400),  # a group shares the shorter prefix
        WorkloadRequest("h", 6, 900, 5, "sys", 600),
    ]
    assert shared_spans(reqs) == (0, 1024, 700, 1300, 0, 0, 400, 600)
    assert whole_blocks(reqs, shared_spans(reqs), 576) == (0, 576, 576, 1152, 0, 0, 0, 576)
    assert whole_blocks(reqs, shared_spans(reqs), 16) == (0, 1024, 688, 1296, 0, 0, 400, 592)  # at most prompt - 1


def test_sparse_retention_by_hand():
    """A sliding-window / Mamba group hits only where an earlier request kept the boundary: its prompt's last one
    (replay_boundaries: prompt - 1, rounded down) or the junction it pinned (its full-attention hit)."""
    reqs = [
        _chain("a", 0, 1300, [0, 1, 2]),  # keeps 1,296 (its prompt's last 16-token boundary)
        _chain("b", 1, 1100, [0, 1, 3]),  # full hit 1,024 but nothing kept at or below it: pins 1,024
        _chain("c", 2, 1200, [0, 1, 4]),  # finds b's junction: 1,024
        _chain("d", 3, 1400, [0, 1, 2, 5]),  # a kept 1,296 (a's 1,300 tokens lie within d's first 1,300)
    ]
    spans = shared_spans(reqs)
    assert spans == (0, 1024, 1024, 1300)
    assert reachable(reqs, spans, 16) == (0, 0, 1024, 1296)
    assert whole_blocks(reqs, spans, 16) == (0, 1024, 1024, 1296)


def _reference(name):
    path = next((p for p in REFERENCES if p.is_file()), None)
    if path is None:
        pytest.skip("the real-trace references are in neither tests/data/vllm-0.33/replay-traces nor ../shared")
    return {c["case"]: c for c in json.loads(path.read_text())["cases"]}[name]


@pytest.mark.parametrize(
    "case, window, first, group",
    [
        # gpt-oss: its 128-token sliding window (16-token blocks) hits exactly what retention leaves reachable
        ("gpt-oss-20b/mooncake-conv-9000", "mooncake-conversation-rows-9000-9149.jsonl", 9000, ("sliding", 16, 128)),
        # Qwen3-Next: 576-token Mamba blocks; nothing is reachable, and vLLM hits nothing
        (
            "qwen3-next-80b-a3b/mooncake-synth-1000",
            "mooncake-synthetic-rows-1000-1119.jsonl",
            1000,
            ("mamba", 576, None),
        ),
    ],
)
def test_reachable_is_what_vllm_hits(case, window, first, group):
    ref = _reference(case)
    reqs = read_trace(TRACES / window, first_row=first).requests
    note = sharing_note(reqs, [("g", *group)])
    assert note["reachable_tokens"] == ref["totals"]["prefix_cache"]["hits"]


def test_vllm_hits_no_more_than_whole_blocks_allow():
    """Llama-3.1-8B on conversation rows 3,000-3,149: vLLM's 76,288 hit tokens within the 90,624 that whole
    16-token blocks of the shared spans hold (an 18 GiB pool evicts some)."""
    ref = _reference("llama-3.1-8b/mooncake-conv-3000")
    reqs = read_trace(TRACES / "mooncake-conversation-rows-3000-3149.jsonl", first_row=3000).requests
    note = sharing_note(reqs, [("g", "full", 16, None)])
    assert ref["totals"]["prefix_cache"]["hits"] <= note["reachable_tokens"] == 90_624


chains = st.lists(
    st.tuples(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(1, 2600), st.integers(0, 3)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(chains, st.sampled_from([16, 64, 576, 1312]))
def test_sharing_invariants(rows, block):
    """Spans within the prompt and the ids; whole blocks within spans and prompt - 1; what sparse retention
    reaches within whole blocks; the same prompt again shares all of it."""
    reqs = []
    for k, (ids, prompt, step) in enumerate(rows):
        chain = [ids[0]] + [ids[0] * 10 + i + 1 for i in range(len(ids) - 1)]  # chained: a prefix decides the rest
        reqs.append(_chain(f"r{k}", step, prompt, chain))
    spans = shared_spans(reqs)
    whole = whole_blocks(reqs, spans, block)
    reach = reachable(reqs, spans, block)
    for r, s, w, x in zip(reqs, spans, whole, reach):
        assert 0 <= x <= w <= min(s, r.prompt_len - 1) and s <= min(r.prompt_len, len(r.hash_ids) * 512)
        assert w % block == 0 and x % block == 0
    again = reqs + [_chain("copy", 10, reqs[0].prompt_len, reqs[0].hash_ids)]
    assert shared_spans(again)[-1] == min(reqs[0].prompt_len, len(reqs[0].hash_ids) * 512)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=300))
def test_percentiles_are_numpys_nearest_rank(values):
    assert list(percentiles(values)) == [int(v) for v in np.percentile(values, [50, 90, 99], method="inverted_cdf")]


def test_answers_of_a_run_read_its_own_fields():
    plan = kvviz.plan("llama-3.1-8b", max_model_len=4096)
    r = kvviz.replay(plan, kvviz.replay.chat(120, mean_gap=0.3, seed=4), budget_gib=0.5)
    a = answers(r, step_ms=40)
    t = r.totals_dict()
    cols = r.step_columns()
    assert (a.requests, a.finished, a.preemptions) == (120, t["num_finished"], t["total_preemptions"])
    first = next(k for k, p in enumerate(cols["preempted"]) if p)
    assert a.first_preemption == (first, tuple(cols["preempted"][first]))
    assert a.ms(first) == f" ({first * 40:,} ms)" and a.max_concurrency == plan.capacity(2**29).max_concurrency
    assert a.hit_rate == t["prefix_cache"]["hits"] / t["prefix_cache"]["queries"]
    assert sum(n for _, n in a.preemptions_per_request) == t["requests_preempted"]
    assert a.groups[0].kind == "full" and a.groups[0].reachable_tokens >= t["prefix_cache"]["hits"]
    doc = a.to_json()
    assert set(doc["queueing_steps"]) == {"p50", "p90", "p99"} and json.dumps(doc)
    assert a.markdown().count("\n| ") == len(a.rows()) + 1
    with pytest.raises(kvviz.base.errors.KvvizError, match="replay: give a kvviz.replay Replay"):
        answers(None)


CONFIGS = ROOT / "tests" / "data" / "vllm-0.33"
MODELS = {  # one of each kind a group can be: full, sliding (128 and 1,024 tokens), Mamba-2, gated delta net
    "llama-3.1-8b": CONFIGS / "replay" / "configs" / "llama-3.1-8b",
    "gpt-oss-20b": CONFIGS / "replay-more" / "configs" / "gpt-oss-20b",
    "gemma-3-27b-text": CONFIGS / "replay" / "configs" / "gemma-3-27b-text",
    "nemotron-nano-9b-v2": CONFIGS / "replay-more" / "configs" / "nemotron-nano-9b-v2",
    "qwen3-next-80b-a3b": CONFIGS / "replay" / "configs" / "qwen3-next-80b-a3b",
}


def _chained(seed: int) -> list[WorkloadRequest]:
    """12 chained prompts, each a prefix of an earlier one's chain and new ids, ending anywhere in a chunk."""
    import random

    rng = random.Random(seed)
    chains, out, next_id = [[0, 1]], [], 2
    for k in range(12):
        ids = rng.choice(chains)[: rng.randint(1, 6)] + [next_id + i for i in range(rng.randint(0, 6))]
        next_id += 10
        chains.append(ids)
        prompt = rng.randint(max(2, (len(ids) - 1) * 512 - 300), len(ids) * 512 + rng.choice([0, 0, 200]))
        out.append(_chain(f"r{k}", k * 3000, prompt, ids, out=3))
    return out


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("seed", [0, 4, 17])
def test_reach_is_what_a_pool_that_evicts_nothing_hits(model, seed):
    """A second method for the reach: the replay itself. With requests far apart (each finished before the next)
    and a pool that evicts nothing, every first admission hits exactly what the sharing rule says: the
    shared span in whole blocks, where sliding windows and Mamba states kept the blocks a hit needs."""
    reqs = _chained(seed)
    plan = kvviz.plan(kvviz.load(str(MODELS[model] / "config.json")), max_model_len=16384)
    r = kvviz.replay(plan, reqs, budget_gib=200)
    groups = [
        (g["name"], g["kind"], g["block_size"], g["sliding_window"]) for g in r.to_json()["kv_cache_config"]["groups"]
    ]
    assert r.totals_dict()["total_preemptions"] == 0
    hits = tuple(x["prefix_hit_tokens_at_admission"] for x in r.request_records())
    assert hits == model_reach(reqs, groups)  # request for request
    assert sum(hits) == sharing_note(reqs, groups)["reachable_tokens"] == answers(r).reachable_tokens
