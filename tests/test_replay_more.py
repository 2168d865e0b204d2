"""kvviz.replay against vLLM 0.33's own scheduler on the cases the shared reference lacks
(tests/data/vllm-0.33/replay-more/scheduler-cases.json, made by scripts/vllm_reference_replay.py:
sliding window, MLA, Mamba-1, Mamba-2, short conv, gated delta net, fp8 KV, async scheduling off on
hybrids, a small max_num_seqs, a smaller max_num_batched_tokens; its README says how), every step
field and request field through `kvviz replay --json` (the CLI's main, in-process), compared as
tests/test_replay.py compares the shared cases (tests/replay_cases.py); and the budget vLLM refuses to
start on, refused with vLLM's message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from replay_cases import cli_args, compare, load_cases, write_workload

from kvviz.base.errors import KvvizError
from kvviz.cli import main

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "replay-more"
CASES = load_cases(DATA / "scheduler-cases.json")
REFUSED = json.loads((DATA / "scheduler-cases.json").read_text())["errors"]  # vLLM would not start on these


def test_cases_cover_the_issue():
    """The kinds issue 28 names, each in at least one case (read from vLLM's own record of the case)."""
    specs = {g["spec_class"] for c in CASES for g in c["kv_cache_config"]["groups"]}
    assert {"SlidingWindowSpec", "MLAAttentionSpec", "MambaSpec", "FullAttentionSpec"} <= specs
    archs = {c["config"]["hf_architecture"] for c in CASES}
    assert {
        "GptOssForCausalLM",
        "DeepseekV3ForCausalLM",
        "JambaForCausalLM",
        "NemotronHForCausalLM",
        "Lfm2ForCausalLM",
        "Qwen3NextForCausalLM",
    } <= archs
    inputs = [c["inputs"] for c in CASES]
    assert any(i["kv_cache_dtype"] == "fp8" for i in inputs)
    assert any(
        i["async_scheduling"] == "off" and len(c["kv_cache_config"]["groups"]) > 1 for i, c in zip(inputs, CASES)
    )
    assert any(i["max_num_seqs"] and i["max_num_seqs"] <= 8 for i in inputs)
    assert any(i["max_num_batched_tokens"] < 8192 for i in inputs)
    for c in CASES:  # each case exercises the pool: preemptions or prefix hits
        pc = c["totals"]["prefix_cache"]
        assert c["totals"]["total_preemptions"] or pc["hits"] or pc["preempted_hits"], c["case"]
        assert c["checks"]["all_finished_with_output_len"], c["case"]


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_cli_matches_vllm(case, tmp_path, capsys):
    workload = write_workload(case, tmp_path / "workload.jsonl")
    assert main(cli_args(case, DATA, workload)) == 0
    compare(json.loads(capsys.readouterr().out), case)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_cli_refuses_as_vllm(name, tmp_path, capsys):
    """A budget below one max_model_len request: vLLM 0.33 does not start (`_check_enough_kv_cache_memory`),
    and `kvviz replay` refuses with vLLM's own message (less the docs link vLLM appends)."""
    ref = REFUSED[name]
    case = {"case": name, "inputs": ref["inputs"], "workload": ref["workload"]}
    assert main(cli_args(case, DATA, write_workload(case, tmp_path / "w.jsonl"))) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert ref["error"].removeprefix("ValueError: ").split(" See https://")[0] in err


def test_hash_chain_lines_are_read_and_checked():
    """The hash-chain form of shared/data/vllm-0.33/replay-traces/README.md: both fields or neither,
    never beside a prefix group, ids non-negative integers; it round-trips through to_json."""
    from kvviz.replay import loads

    head = '{"id": "a", "arrival_step": 0, "prompt_len": 700, "output_len": 3, '
    (r,) = loads(head + '"hash_ids": [0, 7], "hash_block_tokens": 512}')
    assert r.hash_ids == (0, 7) and r.hash_block_tokens == 512 and r.prefix_group is None
    assert loads(json.dumps(r.to_json())) == (r,)
    bad = {
        '"hash_ids": [0, 7]': "hash_block_tokens: missing",
        '"hash_ids": [0, -1], "hash_block_tokens": 512': "hash_ids[1]=-1",
        '"hash_ids": 5, "hash_block_tokens": 512': "hash_ids: must be a list",
        '"hash_ids": [0], "hash_block_tokens": 0': "hash_block_tokens=0",
        '"hash_ids": [0], "hash_block_tokens": 512, "prefix_group": "g"': "prefix_group='g': must be null",
    }
    for extra, words in bad.items():
        with pytest.raises(KvvizError, match=re.escape(words)):
            loads(head + extra + "}")
