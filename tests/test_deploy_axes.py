"""Past one GPU and one memory tier (docs/deploy.md): pipeline parallel, DCP, CPU offload, P/D transfer, fp8.

Expected numbers come from vLLM 0.33's own output recorded in tests/data/vllm-0.33/deploy/cases.json (copied
from ../shared/data/vllm-0.33/deploy/ with the configs it read), or from hand derivations of the cited rules.
tests/test_vllm_own_pipeline.py runs vLLM's own functions on kvviz's specs for models the cases do not hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_cli import plan_argv, run_plan

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.deploy.fp8 import fp8_gain
from kvviz.options import Options
from kvviz.vllm.offload import offload_for
from kvviz.vllm.pipeline import pp_indices, startup_refusal
from kvviz.vllm.transfer import transfer

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "deploy"
CASES = json.loads((DATA / "cases.json").read_text())
PP_CASES = [c for c in CASES["cases"] if c["part"] in ("pp", "dcp")]
OFFLOAD_CASES = [c for c in CASES["cases"] if c["part"] == "offload"]


def _knobs(case, mnbt=None) -> dict:
    o, cfg = case["options"], case["config"]
    knobs = {"max_model_len": cfg["max_model_len"], "tensor_parallel_size": o["tp"]}
    if o.get("pp", 1) > 1:
        knobs["pipeline_parallel_size"] = o["pp"]
    if "partition" in o:
        knobs["pp_layer_partition"] = tuple(int(x) for x in o["partition"].split(","))
    if o.get("dcp", 1) > 1:
        knobs["decode_context_parallel_size"] = o["dcp"]
    if "offload" in o:
        knobs["kv_offloading_size"] = o["offload"]
    if mnbt is not None:
        knobs["max_num_batched_tokens"] = mnbt
    return knobs


def _plan(case, mnbt=None):
    return kvviz.plan(DATA / case["config_path"], **_knobs(case, mnbt))


@pytest.mark.parametrize("case", PP_CASES, ids=[c["case"] for c in PP_CASES])
def test_pipeline_and_dcp_cases_equal_vllms_own_plans(case):
    """Each stage's layers and bytes per block, each worker's blocks before the minimum, num_blocks, the binding
    workers, and the capacity line's tokens and concurrency at both max_num_batched_tokens, as vLLM recorded."""
    rec = case["plan"]
    for budget_key, b in rec["budgets"].items():
        budget = b["available_bytes_per_gpu"]
        for cap_key, want in b["capacity"].items():
            mnbt = int(cap_key.split("=")[1])
            plan = _plan(case, mnbt)
            cap = plan.capacity(budget)
            where = (case["case"], budget_key, cap_key)
            assert cap.num_blocks == b["num_blocks"], where
            assert cap.kv_cache_tokens == want["gpu_kv_cache_size_tokens"], where
            assert cap.max_concurrency == pytest.approx(want["max_concurrency"], rel=1e-12), where
            assert [g.blocks_per_request for g in cap.groups] == want["blocks_per_request_per_group"], where
            assert startup_refusal(plan, budget) is None
        if plan.stages:
            workers = case["workers"]
            tp = case["options"]["tp"]
            assert [(s.first_layer, s.end_layer) for s in plan.stages] == [tuple(w["layer_range"]) for w in workers]
            assert [s.bytes_per_block for s in plan.stages] == [w["bytes_per_block"] for w in rec["workers"]]
            assert [s.num_blocks(budget) for s in plan.stages] == b[
                "pre_min_num_blocks_per_worker(budget // bytes_per_block)"
            ]
            binding = [
                s.index * tp for s in plan.stages if s.bytes_per_block == max(x.bytes_per_block for x in plan.stages)
            ]
            assert binding == b["binding_workers"]
            assert [list(s.group_layers) for s in plan.stages] == [
                [g["num_layers_here"] for g in w["groups"]] for w in rec["workers"]
            ]
        else:
            assert plan.layout.block_stride == rec["workers"][0]["bytes_per_block"]


def _cli_json(case, budget: int, mnbt: int) -> tuple[int, dict | None, str]:
    """`kvviz plan --json` (kvviz.cli main, in-process) on a shared case's config and knobs."""
    config_dir = (DATA / case["config_path"]).parent
    return run_plan(plan_argv(config_dir, case["options"], budget, mnbt, case["config"]["max_model_len"]))


@pytest.mark.parametrize("case", PP_CASES + OFFLOAD_CASES, ids=[c["case"] for c in PP_CASES + OFFLOAD_CASES])
def test_plan_json_equals_the_shared_cases(case):
    """`kvviz plan --json` (not only the library) on every shared case: num_blocks, the capacity line's tokens and
    concurrency, each stage's layers and blocks alone, and offload.num_chunks, as vLLM's own worker processes
    recorded them; no start-up refusal where vLLM started."""
    if case["part"] == "offload":
        mnbt = case["config"]["max_num_batched_tokens(default)"]  # the engine ran at its default
        for key, b in case["budgets"].items():
            rc, out, err = _cli_json(case, b["available_bytes_per_gpu"], mnbt)
            assert rc == 0, err
            s = out["summary"]
            assert s["num_blocks"] == b["gpu_num_blocks"] and s["bytes_per_block"] == b["gpu_bytes_per_block"], key
            assert s["kv_cache_tokens"] == b["gpu_kv_cache_size_tokens"], key
            assert s["max_concurrency"] == pytest.approx(b["gpu_max_concurrency"], abs=5e-5), key
            assert out["offload"]["num_chunks"] == b["offload"]["num_chunks"] == b["offload"]["manager_num_chunks"]
            assert out["offload"]["kv_bytes_per_chunk"] == b["offload"]["kv_bytes_per_chunk(aligned)"], key
            assert "startup_refusal" not in out
        return
    rec = case["plan"]
    for key, b in rec["budgets"].items():
        for cap_key, want in b["capacity"].items():
            rc, out, err = _cli_json(case, b["available_bytes_per_gpu"], int(cap_key.split("=")[1]))
            assert rc == 0, err
            s, where = out["summary"], (key, cap_key)
            assert s["num_blocks"] == b["num_blocks"], where
            assert s["kv_cache_tokens"] == want["gpu_kv_cache_size_tokens"], where
            assert s["max_concurrency"] == pytest.approx(want["max_concurrency"], abs=5e-5), where
            assert f"{want['gpu_kv_cache_size_tokens']:,} tokens" in out["capacity_line"], where
            assert "startup_refusal" not in out
            if case["options"].get("pp", 1) > 1:
                assert [tuple(x["layers"]) for x in out["stages"]] == [tuple(w["layer_range"]) for w in case["workers"]]
                assert [x["num_blocks_alone"] for x in out["stages"]] == b[
                    "pre_min_num_blocks_per_worker(budget // bytes_per_block)"
                ][:: case["options"]["tp"]]


def test_the_recorded_refusal_is_kvvizs_in_the_cli():
    """The shared refusal (DCP 2 at TP 4 for Llama-3.1-8B) through `kvviz plan --json`: exit 2, one line, vLLM's
    condition (TP greater than the model's 8 KV heads)."""
    ((key, rec),) = CASES["refusals"].items()
    o = rec["options"]
    case = {"config_path": "configs/llama-3.1-8b/config.json", "options": o, "config": {"max_model_len": 32768}}
    rc, out, err = _cli_json(case, 8 << 30, 2048)
    assert rc == 2 and out is None and err.count("\n") == 1, err
    assert (
        "to be greater than" in err
        and "(8)" in err
        and "greater than the model's total number of KV heads (8)" in rec["error"]
    )


def test_pp_in_flight_reserve_is_pp_plus_one_batches():
    """max_concurrent_batches = PP + 1 with async scheduling (the cases' config says 3 at PP 2), PP without it."""
    for case in PP_CASES:
        if case["options"].get("pp", 1) > 1:
            assert (
                Options(**{"pipeline_parallel_size": case["options"]["pp"]}).max_concurrent_batches
                == (case["config"]["max_concurrent_batches"])
            )
    assert Options(pipeline_parallel_size=4, async_scheduling=False).max_concurrent_batches == 4


def test_the_recorded_refusal_is_kvvizs():
    """vLLM refuses DCP 2 at TP 4 for Llama-3.1-8B (8 KV heads): kvviz refuses it in one line saying the same."""
    ((key, rec),) = CASES["refusals"].items()
    o = rec["options"]
    with pytest.raises(KvvizError, match=r"requires tensor_parallel_size \(4\) to be greater than .* \(8\)"):
        kvviz.plan(
            DATA / "configs/llama-3.1-8b/config.json",
            tensor_parallel_size=o["tp"],
            decode_context_parallel_size=o["dcp"],
        )
    assert "greater than the model's total number of KV heads (8)" in rec["error"]


@pytest.mark.parametrize("n,pp,want", [(32, 3, (11, 11, 10)), (35, 4, (9, 9, 9, 8)), (61, 4, (15, 16, 15, 15))])
def test_the_split_by_hand(n, pp, want):
    """get_pp_indices by hand: n // pp each, the remainder one more on the stages before the last, from the
    second-to-last backwards (61 at 4: 15 each, the remainder 1 on stage 2)."""
    got = tuple(e - s for s, e in (pp_indices(n, r, pp) for r in range(pp)))
    assert got == want if (n, pp) != (61, 4) else got == (15, 15, 16, 15)


def test_pp_refusals_are_one_line():
    """A partition that does not sum to the layers, a stage without KV layers, a planner other than vLLM's, and
    a budget a stage cannot start with, each in one line."""
    with pytest.raises(KvvizError, match="sum\\(partitions\\)=33"):
        kvviz.plan("llama-3.1-8b", pipeline_parallel_size=2, pp_layer_partition=(12, 21))
    with pytest.raises(KvvizError, match="vllm planner only"):
        kvviz.plan("qwen3-next-80b-a3b", "separate", pipeline_parallel_size=2)
    with pytest.raises(KvvizError, match="pp_layer_partition="):
        Options(pp_layer_partition=(0, 32))
    plan = kvviz.plan("gpt-oss-120b", pipeline_parallel_size=2, max_model_len=32768)
    refusal = startup_refusal(plan, 100 * 2**20)
    assert refusal.startswith("stage 0: To serve at least one request with the model's max seq len (32768)")
    assert "estimated maximum model length is" in refusal


@pytest.mark.parametrize("case", OFFLOAD_CASES, ids=[c["case"] for c in OFFLOAD_CASES])
def test_offload_equals_the_connectors_numbers(case):
    """Bytes per chunk, num_chunks, each group's chunks for one max-length prompt, the prompts and prompt tokens
    held, and the GPU pool beside them, as vLLM's OffloadingConnector recorded them."""
    for b in case["budgets"].values():
        rec = b["offload"]
        options = Options(**_knobs(case))
        plan = _plan(case, case["config"]["max_num_batched_tokens(default)"])  # the engine ran at its default
        off = offload_for(plan, options)
        assert off.cpu_bytes == rec["cpu_bytes_to_use"]
        assert off.worker_bytes_per_block == rec["worker_kv_bytes_per_block(OffloadingConfig)"]
        assert off.bytes_per_chunk == rec["kv_bytes_per_chunk(aligned)"]
        assert off.num_chunks == rec["num_chunks"] == rec["manager_num_chunks"]
        assert [g.chunks_per_prompt for g in off.groups] == [
            g["chunks_stored_for_one_max_len_prompt"] for g in rec["offloaded_groups"]
        ]
        assert [g.window_chunks for g in off.groups] == [
            g["sliding_window_size_in_chunks"] for g in rec["offloaded_groups"]
        ]
        d = rec["derived"]
        assert off.slots_per_prompt == d["chunk_slots_per_max_len_prompt(main store loop, all groups)"]
        assert off.prompts_held == d["max_len_prompts_held(num_chunks // slots)"]
        assert off.tokens_held == d["prompt_tokens_held_per_group(num_chunks * L / slots)"]
        assert plan.capacity(b["available_bytes_per_gpu"]).kv_cache_tokens == d["gpu_pool_tokens(capacity line)"]


def test_offload_of_a_hybrid_holds_fewer_tokens_than_bytes_per_token_say():
    """vLLM #56871's point: Qwen3-Next's states each take a whole chunk of the largest group's bytes, so 16 GiB
    holds num_chunks x L / (L // 576 + 3) tokens, not 16 GiB / bytes per token (by hand from the rule)."""
    options = Options(kv_offloading_size=16, max_model_len=32768)
    plan = kvviz.plan("qwen3-next-80b-a3b", max_model_len=32768, kv_offloading_size=16)
    off = offload_for(plan, options)
    stride = plan.layout.block_stride
    assert off.bytes_per_chunk == -(-stride // 4096) * 4096
    assert off.slots_per_prompt == 32768 // 576 + 3
    assert off.tokens_held == off.num_chunks * 32768 // (32768 // 576 + 3)


def test_transfer_clips_as_the_connector_says_by_hand():
    """gpt-oss-120b: a 10,000-token prompt sends cdiv(128, 16) + 1 = 9 blocks of the window group and all
    cdiv(10000, 16) = 625 of the full one; Qwen3-Next one state a Mamba group; 63 tokens are recomputed."""
    t = transfer(kvviz.plan("gpt-oss-120b"), 10000)
    assert [(g.rule, g.blocks_sent) for g in t.groups] == [("window", 9), ("full", 625)]
    q = transfer(kvviz.plan("qwen3-next-80b-a3b"), 10000)
    assert [g.blocks_sent for g in q.groups] == [1, 1, 1, -(-10000 // 576)]
    assert transfer(kvviz.plan("llama-3.1-8b"), 63).total_bytes == 0
    tp = transfer(kvviz.plan("llama-3.1-8b", tensor_parallel_size=2), 1024, decode_tp=2, prefill_tp=4)
    assert tp.total_bytes == 2 * 64 * 32 * 2 * 16 * 4 * 128 * 2 and tp.prefill_ranks_per_decode_rank == 2


def test_fp8_gain_attention_only_and_a_hybrid_at_short_context():
    """#55196's two ends from the rules: attention-only 2.00x; Granite-4.0-H (Mamba-2) at 512 tokens, where the
    state pins the page on both sides and a request holds one block of each group, 1.00x."""
    budget = 40 * 2**30
    assert fp8_gain(kvviz.load("llama-3.1-8b"), 32768, budget).ratio == 2.0
    g = fp8_gain(kvviz.load("granite-4.0-h"), 512, budget)
    assert g.ratio == 1.0 and g.sides[0]["block_stride"] == g.sides[1]["block_stride"]
    assert "pins the unified page" in g.line
    assert fp8_gain(kvviz.load("granite-4.0-h"), 32768, budget).ratio > 1.0


def test_cli_json_adds_stages_offload_transfer():
    """`kvviz plan --json` with -pp 2, --kv-offloading-size, --transfer and --fp8-gain adds their keys."""
    cfg = str(DATA / "configs/gpt-oss-20b")
    run = lambda *a: subprocess.run(  # noqa: E731
        [
            sys.executable,
            "-m",
            "kvviz",
            "plan",
            "--hf-config",
            cfg,
            "--max-model-len",
            "32768",
            "--budget-gib",
            "8",
            *a,
        ],
        capture_output=True,
        text=True,
    )
    out = json.loads(run("-pp", "2", "--json").stdout)
    assert [s["bytes_per_block"] for s in out["stages"]] == [196608, 196608] and out["summary"]["num_blocks"] == 43690
    out = json.loads(run("--kv-offloading-size", "16", "--transfer", "5000", "--fp8-gain", "--json").stdout)
    assert out["offload"]["num_chunks"] == 43690 and out["transfer"]["groups"][0]["blocks_sent"] == 9
    assert out["fp8_gain"]["ratio"] == 2.0
    bad = run("-pp", "2", "--budget-gib", "0.2")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "refuses to start" in bad.stderr


def test_one_stage_budget_below_one_request_says_vllm_refuses_to_start(capsys):
    """PP 1: vLLM 0.33's get_kv_cache_configs -> _check_enough_kv_cache_memory refuses to start when one request of
    max_model_len does not fit the budget less the null block; the CLI says so under the capacity line. By hand for
    Llama-3.1-8B (32 layers x 8 KV heads x 128 x K|V x bf16 = 131,072 B a token, 16 tokens a block): 1e9 B less one
    2,097,152 B block holds 475 blocks, so the largest max_model_len vLLM estimates is 475 x 16 = 7,600."""
    from kvviz.cli import main

    assert main(["plan", "--model", "llama-3.1-8b", "--budget-bytes", "1000000000"]) == 0
    out = capsys.readouterr().out
    assert "vLLM 0.33 refuses to start at this budget: To serve at least one request" in out
    assert "the estimated maximum model length is 7600." in out
    assert main(["plan", "--model", "llama-3.1-8b", "--budget-gib", "40"]) == 0
    assert "refuses to start" not in capsys.readouterr().out
