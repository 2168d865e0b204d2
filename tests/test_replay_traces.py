"""kvviz.replay against vLLM 0.33's own scheduler on windows of real, public traces with Mooncake's hash
chains (tests/data/vllm-0.33/replay-traces/trace-cases.json, a copy of the lead's shared reference: its
README), every step field, request field and total through `kvviz replay --json` (tests/replay_cases.py),
and the rule that names shared tokens (kvviz/replay/identity.py) by hand-worked examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_cases import cli_args, compare, load_cases, write_workload

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.replay import WorkloadRequest, replay
from kvviz.replay.identity import Identities
from kvviz.replay.scheduler import Request

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "replay-traces"
CASES = load_cases(DATA / "trace-cases.json")


def test_cases_use_hash_chains():
    """Three of the four cases replay Mooncake's chains; the vLLM run hit prompt tokens through them."""
    chained = [c for c in CASES if any(w.get("hash_ids") for w in c["workload"])]
    assert len(chained) == 3
    assert sum(c["totals"]["prefix_cache"]["hits"] for c in chained) > 0


# A step's `preempted` ids are compared as a set: where one step preempts two requests (Qwen3-Next, steps
# 870, 873, 897, 900) the reference lists them in id order, not in the order vLLM preempted them
# (`Scheduler.schedule` pops the last running request first: synth-01076, admitted after synth-01075 at
# step 868, goes first), so its recorder read them from a set (`SchedulerOutput.preempted_req_ids` is one).
# kvviz lists them in vLLM's order, as scripts/vllm_reference_replay.py records it (`_preempt_request` calls).
UNORDERED = ("preempted",)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_cli_matches_vllm(case, tmp_path, capsys):
    workload = write_workload(case, tmp_path / "workload.jsonl")
    assert main(cli_args(case, DATA, workload)) == 0
    compare(json.loads(capsys.readouterr().out), case, UNORDERED)


def _request(w: WorkloadRequest, ids: Identities) -> Request:
    return Request(w.id, 0, w.prompt_len, w.output_len, {}, *ids.of(w))


def test_block_identity_of_a_chain():
    """README of the reference: two requests share the tokens of their common leading ids, a partial last
    chunk is the first tokens of that id's chunk elsewhere, tokens past the ids are the request's own."""
    ids = Identities()
    a = _request(WorkloadRequest("a", 0, 700, 1, hash_ids=(1, 2), hash_block_tokens=512), ids)
    b = _request(WorkloadRequest("b", 0, 1536, 1, hash_ids=(1, 2, 3), hash_block_tokens=512), ids)
    c = _request(WorkloadRequest("c", 0, 1536, 1, hash_ids=(4, 2, 3), hash_block_tokens=512), ids)
    assert a.token_key(512) == b.token_key(512) != c.token_key(512)  # chunk 0: id 1 against id 4
    assert a.token_key(688) == b.token_key(688)  # 176 tokens into id 2's chunk: shared
    assert a.token_key(704) != b.token_key(704)  # tokens 700..703 of a are past its prompt: its own
    assert b.token_key(1024) != c.token_key(1024)  # the same id 2 after different ids: a different prefix
    d = _request(WorkloadRequest("d", 0, 1100, 1, hash_ids=(1,), hash_block_tokens=512), ids)
    assert d.token_key(512) == a.token_key(512) and d.token_key(528) == ("d", 528)


def test_one_hash_block_size_per_workload():
    plan = kvviz.plan(kvviz.load(str(DATA / "configs" / "llama-3.1-8b" / "config.json")), max_model_len=4096)
    work = [
        WorkloadRequest("a", 0, 600, 4, hash_ids=(1, 2), hash_block_tokens=512),
        WorkloadRequest("b", 0, 600, 4, hash_ids=(1, 2), hash_block_tokens=256),
    ]
    with pytest.raises(KvvizError, match="^b: hash_block_tokens=256"):
        replay(plan, work, budget_bytes=plan.block_stride * 200)


def test_chain_hits_by_hand():
    """Llama-3.1-8B (16-token blocks), async scheduling off: b arrives after a finished; a's 1,300-token prompt
    is ids (1, 2, 3) cut at 1,300, b's is ids (1, 2, 9): b shares 1,024 tokens = 64 blocks, all cached."""
    plan = kvviz.plan(kvviz.load(str(DATA / "configs" / "llama-3.1-8b" / "config.json")), max_model_len=4096)
    work = [
        WorkloadRequest("a", 0, 1300, 2, hash_ids=(1, 2, 3), hash_block_tokens=512),
        WorkloadRequest("b", 10, 1536, 2, hash_ids=(1, 2, 9), hash_block_tokens=512),
    ]
    r = replay(plan, work, budget_bytes=plan.block_stride * 400, async_scheduling=False, check_invariants=True)
    got = {x["id"]: x["prefix_hit_tokens_at_admission"] for x in r.request_records()}
    assert got == {"a": 0, "b": 1024}
