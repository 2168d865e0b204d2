"""kvviz.replay against vLLM 0.33's own scheduler on Llama 4 Scout's chunked local attention
(tests/data/vllm-0.33/replay-chunked/scheduler-cases.json, made by scripts/vllm_reference_replay.py: its
README), every step field, request field and total through `kvviz replay --json` (tests/replay_cases.py),
and `ChunkedLocalAttentionManager`'s rules by the examples of its own docstrings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_cases import cli_args, compare, load_cases, write_workload

from kvviz.cli import main
from kvviz.replay.managers import ChunkedLocalManager
from kvviz.replay.pool import NULL, BlockPool
from kvviz.replay.scheduler import Request

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "replay-chunked"
CASES = load_cases(DATA / "scheduler-cases.json")


def test_cases_exercise_the_chunks():
    """vLLM's own record: chunked local attention groups beside a full one; every case crosses a chunk;
    together they preempt and hit past a chunk boundary (admissions with at least one chunk of hits)."""
    for c in CASES:
        specs = [g["spec_class"] for g in c["kv_cache_config"]["groups"]]
        assert specs.count("ChunkedLocalAttentionSpec") == 3 and "FullAttentionSpec" in specs
        assert max(w["prompt_len"] + w["output_len"] for w in c["workload"]) > 16384
        assert c["checks"]["all_finished_with_output_len"]
    assert sum(c["totals"]["total_preemptions"] for c in CASES) > 0
    assert any(a[1] >= 8192 for c in CASES for r in c["requests"] for a in r["admissions"])


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_cli_matches_vllm(case, tmp_path, capsys):
    workload = write_workload(case, tmp_path / "workload.jsonl")
    assert main(cli_args(case, DATA, workload)) == 0
    compare(json.loads(capsys.readouterr().out), case)


def test_skipped_tokens_as_vllm_documents_them():
    """`ChunkedLocalAttentionManager.get_num_skipped_tokens`' three examples (chunk 8): 13 -> 8, 8 -> 8, 7 -> 0."""
    m = ChunkedLocalManager(BlockPool(4, True), 0, 4, True, chunk=8)
    assert [m.skipped_tokens(n) for n in (13, 8, 7)] == [8, 8, 0]
    assert m.trim_limit(0) == 8 and m.trim_limit(1) == 8 and m.trim_limit(2) == 16  # block i leaves at its chunk's end


def test_hit_as_vllm_documents_it():
    """`find_longest_cache_hit`'s examples (chunk 8, block 4): max length 15 looks up block 2 only (blocks 0-1
    are left of the chunk: nulls), and returns [null, null, block 2] on a hit, [null, null] on a miss; max
    length 16 returns four nulls without a lookup."""
    pool = BlockPool(8, True)
    pool.held = [0]  # one group
    r = Request("r", 0, 16, 1, {})
    find = ChunkedLocalManager.find_longest_cache_hit_chunked
    assert find(r, 15, [0], pool, 4, 8) == ([[NULL, NULL]], 8)
    (b,) = pool.get_new_blocks(1)
    pool.insert_hash((r.token_key(12), 0), b, 12)  # block 2 holds tokens 8..11
    assert find(r, 15, [0], pool, 4, 8) == ([[NULL, NULL, b]], 12)
    assert find(r, 16, [0], pool, 4, 8) == ([[NULL] * 4], 16)
