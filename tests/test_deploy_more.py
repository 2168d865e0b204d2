"""`kvviz plan --json` with pipeline parallel (TP x PP, --pp-layer-partition) and --kv-offloading-size against vLLM
0.33's own output on models and splits the shared cases do not hold (docs/deploy.md).

tests/data/vllm-0.33/deploy-more/cases.json was made by scripts/vllm_reference_deploy.py (its README says how):
one worker per stage holding only its layers' specs (the model's real __init__ under get_pp_indices /
VLLM_PP_LAYER_PARTITION), vLLM's get_kv_cache_configs with one spec dict per stage and TP rank,
generate_scheduler_kv_cache_config, get_kv_cache_capacity, and for offload vLLM's own build_offloading_config and
CPUOffloadingSpec on the scheduler's KVCacheConfig. Each case runs kvviz's CLI main in-process and compares field
for field: the stages' layer ranges and each global group's layers there, num_blocks, the capacity line's tokens
and concurrency at max_num_batched_tokens 8192 and 2048, vLLM's start-up refusal in its own words, and the
offload's worker bytes per block, copies, bytes per chunk, num_chunks and each group's tokens and window chunks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_cli import plan_argv, run_plan

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "deploy-more"
REF = json.loads((DATA / "cases.json").read_text())
CASES = REF["cases"]
MNBTS = REF["max_num_batched_tokens"]


def _argv(case: dict, budget: int, mnbt: int) -> list[str]:
    max_model_len = case["settings"]["max_model_len"] if "settings" in case else None
    return plan_argv(DATA / Path(case["config_path"]).parent, case["options"], budget, mnbt, max_model_len)


PLANNED = [k for k, c in CASES.items() if "budgets" in c]
REFUSED = [k for k, c in CASES.items() if "refused" in c]


def test_the_reference_covers_the_issue():
    """Sliding, MLA, Mamba hybrids, uneven splits, partitions, TP x PP, offload (with PP too), a refusal."""
    kinds = {g["kind"] for k in PLANNED for g in CASES[k]["groups"]}
    assert {"full_attention", "sliding_attention", "state"} <= kinds
    opts = [CASES[k]["options"] for k in PLANNED]
    assert {o.get("pp", 1) for o in opts} >= {2, 3, 4}
    assert any("partition" in o for o in opts) and any(o.get("tp", 1) > 1 and o.get("pp", 1) > 1 for o in opts)
    assert any("offload" in o and o.get("pp", 1) > 1 for o in opts)
    assert any(g["kind"] == "mla" for k in PLANNED for g in CASES[k]["groups"])


@pytest.mark.parametrize("key", PLANNED)
def test_plan_json_equals_vllms_own(key):
    case = CASES[key]
    for bkey, b in case["budgets"].items():
        budget = b["available_bytes_per_gpu"]
        for mnbt in MNBTS:
            where = (key, bkey, mnbt)
            rc, out, err = run_plan(_argv(case, budget, mnbt))
            if "refused" in b:
                if mnbt != MNBTS[0]:
                    continue  # vLLM's check ran at max_num_batched_tokens 8192 (the window reserve depends on it)
                # get_kv_cache_configs -> _check_enough_kv_cache_memory: vLLM's ValueError, word for word
                want = b["refused"].removeprefix("ValueError: ")
                if case["options"].get("pp", 1) > 1:
                    assert rc == 2 and "vLLM 0.33 refuses to start" in err, where
                    assert want in err, (where, err)
                else:
                    assert rc == 0 and out["startup_refusal"] == want, where
                continue
            assert rc == 0, (where, err)
            s = out["summary"]
            cap = b["capacity"][f"max_num_batched_tokens={mnbt}"]
            assert s["num_blocks"] == b["num_blocks"], where
            assert s["kv_cache_tokens"] == cap["gpu_kv_cache_size_tokens"], where
            assert s["max_concurrency"] == pytest.approx(cap["max_concurrency"], abs=5e-5), where
            assert f"{cap['gpu_kv_cache_size_tokens']:,} tokens" in out["capacity_line"], where
            assert f"{cap['max_concurrency']:.2f}x" in out["capacity_line"], where
            assert "startup_refusal" not in out, where
            if case["options"].get("pp", 1) > 1:
                assert [s["layers"] for s in out["stages"]] == [w["layer_range"] for w in case["stages"]], where
                assert [s["group_layers"] for s in out["stages"]] == [w["group_layers"] for w in case["stages"]]
                assert [s["num_blocks_alone"] * s["bytes_per_block"] for s in out["stages"]] != []
                tensors = b["worker_tensor_bytes"]  # each stage's tensor after the minimum: num_blocks x its stride
                assert [b["num_blocks"] * s["bytes_per_block"] for s in out["stages"]] == tensors, where
            else:
                assert "stages" not in out
            if "offload" in b:
                _offload_equal(out["offload"], b["offload"], where)


def _offload_equal(got: dict, want: dict, where) -> None:
    assert got["cpu_bytes_to_use"] == want["cpu_bytes_to_use"], where
    assert got["world_size"] == want["world_size"], where
    assert got["copies"] == (1 if want["replicated_layout"] else want["world_size"]), where
    assert got["worker_kv_bytes_per_block"] == want["worker_kv_bytes_per_block"], where
    assert got["blocks_per_chunk"] == want["blocks_per_chunk"], where
    assert got["kv_bytes_per_chunk"] == want["kv_bytes_per_chunk"], where
    assert got["num_chunks"] == want["num_chunks"], where
    assert [g["tokens_per_chunk"] for g in got["groups"]] == [g["tokens_per_chunk"] for g in want["groups"]], where
    assert [g["sliding_window_size_in_chunks"] for g in got["groups"]] == [
        g["sliding_window_size_in_chunks"] for g in want["groups"]
    ], where


@pytest.mark.parametrize("key", REFUSED)
def test_vllms_refusals_are_kvvizs(key):
    """A configuration vLLM 0.33 refuses before planning (a partition that does not sum to the layers) is refused
    by kvviz in one line carrying vLLM's own check."""
    case = CASES[key]
    rc, _, err = run_plan(_argv(case, 8 << 30, MNBTS[0]))
    assert rc == 2 and err.count("\n") == 1, err
    want = case["refused"]["error"]
    core = want.split(": ", 1)[1] if ": " in want else want
    assert core.split(".")[0] in err, (want, err)


# ---- data parallel and attention DP: each DP rank its own engine --------------------------------------------------
# vLLM 0.33 v1/engine/core.py EngineCore._initialize_kv_caches: an engine plans with its own executor's workers only
# (`get_kv_cache_specs()`: one spec dict per worker of THIS engine, ParallelConfig.world_size = TP x PP of them) and
# `get_kv_cache_configs` takes the minimum over those; nothing reduces num_blocks across DP ranks. The reference
# plans DP rank 0's engine from a config with data_parallel_size N (its process groups made over
# world_size_across_dp ranks), so its numbers are vLLM's for one replica.


def _engine(key: str) -> dict:
    return CASES[key]


DP_CASES = [k for k in PLANNED if CASES[k]["options"].get("dp", 1) > 1]


@pytest.mark.parametrize("key", DP_CASES)
def test_a_dp_replica_is_its_own_engine(key):
    """`--data-parallel-size N`: one replica's num_blocks and capacity line are vLLM's DP-rank engine's, the
    engine plans with TP x PP workers (not DP x TP x PP), and the deployment holds N of them."""
    case = CASES[key]
    o, st = case["options"], case["settings"]
    assert st["workers_of_this_engine"] == st["world_size"] == o.get("tp", 1) * o.get("pp", 1)
    assert st["world_size_across_dp"] == o["dp"] * st["world_size"]
    for bkey, b in case["budgets"].items():
        if "refused" in b:
            continue
        argv = _argv(case, b["available_bytes_per_gpu"], MNBTS[0]) + ["--data-parallel-size", str(o["dp"])]
        if o.get("ep"):
            argv.append("--enable-expert-parallel")
        rc, out, err = run_plan(argv)
        assert rc == 0, err
        cap = b["capacity"][f"max_num_batched_tokens={MNBTS[0]}"]
        d = out["data_parallel"]
        assert d["gpus"] == st["world_size_across_dp"]
        assert d["per_replica"]["num_blocks"] == b["num_blocks"], (key, bkey)
        assert d["per_replica"]["kv_cache_tokens"] == cap["gpu_kv_cache_size_tokens"], (key, bkey)
        assert d["per_replica"]["max_concurrency"] == pytest.approx(cap["max_concurrency"], rel=1e-12)
        assert d["total"]["kv_cache_tokens"] == o["dp"] * cap["gpu_kv_cache_size_tokens"]


LAYOUT_CASES = [
    (m, g)
    for m, g in (("deepseek-v3", 8), ("deepseek-v2-lite", 2))
    if all(k in CASES for k in (f"{m}/tp=1", f"{m}/tp={g}", f"{m}/dp={g},ep"))
]


@pytest.mark.parametrize("model,gpus", LAYOUT_CASES)
def test_mla_tp_vs_attention_dp_vs_dcp_equal_vllms_engines(model, gpus):
    """`--attention-layouts N` on an MLA model, at each per-GPU budget: TP N's row is vLLM's TP N engine (the
    latent whole on every rank: the same blocks as TP 1), attention DP N's row is N of vLLM's DP-rank engines
    (TP 1 each), and DCP's row (where recorded) is vLLM's TP N x DCP N engine. Where an engine refuses to start
    (one request of max_model_len does not fit a GPU: DeepSeek-V3 at 2 GiB under TP 8 and DP 8, not under DCP 8,
    whose request holds 1/8 of its tokens), the row carries vLLM's error word for word."""
    tp_key, dp_key = f"{model}/tp={gpus}", f"{model}/dp={gpus},ep"
    dcp_key = f"{model}/tp={gpus},dcp={gpus}"
    tp_case, dp_case = CASES[tp_key], CASES[dp_key]
    mnbt = f"max_num_batched_tokens={MNBTS[0]}"
    want = {"tp": (tp_case, 1), "attention_dp": (dp_case, gpus)}
    if dcp_key in CASES:
        want["dcp"] = (CASES[dcp_key], 1)
    for bkey, b in tp_case["budgets"].items():
        budget = b["available_bytes_per_gpu"]
        argv = _argv(CASES[f"{model}/tp=1"], budget, MNBTS[0]) + ["--attention-layouts", str(gpus)]
        rc, out, err = run_plan(argv)
        assert rc == 0, err
        rows = {r["layout"]: r for r in out["attention_layouts"]["layouts"]}
        for name, (case, engines) in want.items():
            eb = case["budgets"][bkey]
            r = rows[name]
            if "refused" in eb:  # get_kv_cache_configs -> _check_enough_kv_cache_memory
                assert r["startup_refusal"] == eb["refused"].removeprefix("ValueError: "), (name, bkey)
                continue
            assert "startup_refusal" not in r, (name, bkey)
            assert r["engines"] == engines, (name, bkey)
            assert r["num_blocks_per_gpu"] == eb["num_blocks"], (name, bkey)
            assert r["total_kv_cache_tokens"] == engines * eb["capacity"][mnbt]["gpu_kv_cache_size_tokens"]
            assert r["total_concurrency"] == pytest.approx(engines * eb["capacity"][mnbt]["max_concurrency"])
        if "refused" not in b:
            assert rows["tp"]["num_blocks_per_gpu"] == CASES[f"{model}/tp=1"]["budgets"][bkey]["num_blocks"]
    refused = [k for k, c in want.items() for b in c[0]["budgets"].values() if "refused" in b]
    assert model != "deepseek-v3" or sorted(set(refused)) == ["attention_dp", "tp"]  # the 2 GiB budget
