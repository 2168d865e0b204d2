"""TensorRT-LLM's hybrid Mamba / GDN / KDA models (kvviz.engines.trtllm.hybrid) against numbers derived here by hand.

TensorRT-LLM main resolves use_kv_cache_manager_v2 'auto' to V2 for Qwen3NextForCausalLM and
NemotronHForCausalLM (get_preferred_kv_cache_manager_version; llm_utils._resolve_kv_cache_manager_v2_auto),
so _util.get_kv_cache_manager_cls picks MambaHybridCacheManagerV2: attention blocks and recurrent-state
slots from one GPU quota (the KV budget). Every expected number is written out below from the model's
config.json fields and the cited rules (docs/engines.md#hybrid-mamba--gdn-models-in-tensorrt-llm),
never copied from kvviz.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import io
import math
from pathlib import Path

import pytest
from engine_sources import absent, source_root

from kvviz.base.errors import KvvizError
from kvviz.engines import EngineKnobs, plan_engine
from kvviz.engines.trtllm.plan import plan_trtllm
from kvviz.families import load, preset_raw

GIB = 2**30
TPB = 32  # KvCacheConfig.tokens_per_block
MAX_BATCH = 2048  # LlmArgs.max_batch_size
DUMMY = 1  # _get_num_cuda_graph_padding_dummy_slots(spec_config=None); no attention DP
BF16 = 2


def _cfg(name) -> dict:
    raw = preset_raw(name)
    return {**raw, **raw.get("text_config", {})}


def qwen3_next_layout():
    """(attention block bytes, state pools per slot, max_seq_len) of Qwen3-Next-80B-A3B from config.json:
    layers i with (i + 1) % full_attention_interval == 0 are attention; the rest Gated DeltaNet."""
    c = _cfg("qwen3-next-80b-a3b")
    n_attn = sum(1 for i in range(c["num_hidden_layers"]) if (i + 1) % c["full_attention_interval"] == 0)
    n_lin = c["num_hidden_layers"] - n_attn
    # AttentionLayerConfig: K and V buffers of tokens_per_block x kv heads x head_dim x bf16, one pool
    block = 2 * n_attn * TPB * c["num_key_value_heads"] * c["head_dim"] * BF16
    # GDN as a Mamba layer: conv (2 x key heads x key dim + value heads x value dim, kernel - 1) bf16;
    # SSM (value heads, value dim, key dim) in mamba_ssm_cache_dtype 'auto' -> torch_dtype bf16
    conv_dim = (
        2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
        + c["linear_num_value_heads"] * c["linear_value_head_dim"]
    )
    conv = conv_dim * (c["linear_conv_kernel_dim"] - 1) * BF16
    ssm = c["linear_num_value_heads"] * c["linear_value_head_dim"] * c["linear_key_head_dim"] * BF16
    return block, (n_lin * ssm, n_lin * conv), c["max_position_embeddings"]


def nemotron_layout():
    """The same for NVIDIA-Nemotron-Nano-9B-v2: hybrid_override_pattern 'M' Mamba-2, '*' attention."""
    c = _cfg("nemotron-nano-9b-v2")
    pattern = c["hybrid_override_pattern"]
    n_m, n_attn = pattern.count("M"), pattern.count("*")
    block = 2 * n_attn * TPB * c["num_key_value_heads"] * c["head_dim"] * BF16
    conv_dim = c["mamba_num_heads"] * c["mamba_head_dim"] + 2 * c["n_groups"] * c["ssm_state_size"]
    conv = conv_dim * (c["conv_kernel"] - 1) * BF16
    # mamba_ssm_cache_dtype 'auto' -> config_utils.resolve_ssm_cache_dtype: the config's own field, absent from this
    # config.json, so NemotronHConfig's default float32 (_torch/configs/nemotron_h.py)
    assert "mamba_ssm_cache_dtype" not in c
    ssm = c["mamba_num_heads"] * c["mamba_head_dim"] * c["ssm_state_size"] * 4
    return block, (n_m * ssm, n_m * conv), c["max_position_embeddings"]


def v2_by_hand(block: int, state_pools: tuple[int, int], max_seq_len: int, budget: int, max_batch: int = MAX_BATCH):
    """(blocks, state slots, requests at once, requests of max_seq_len at once) as MambaHybridCacheManagerV2 + the
    V2 storage manager give them when the state group is pinned at its floor (asserted here): granularity 32 MiB
    for a quota of 16 GiB or more (cache_tier_granularity); the SSM group gets the grains of its max_batch + dummy
    slots, one more slot while those grains hold it (ratio_to_slot_count_list's bump); the single attention pool
    the remaining grains. Requests: _util.create_py_executor_instance gives a KVCacheManagerV2 the
    KVCacheV2Scheduler with scheduler_capacity = max_batch_size, which allocates each step's pages and reserves
    nothing to completion (get_needed_resource_to_completion 0): at most max_batch_size requests, each holding at
    least one block; of max_seq_len tokens, the blocks over ceil(max_seq_len / 32)."""
    assert budget >= 16 * GIB
    g = 32 << 20
    live = max_batch + DUMMY
    grains = -(-budget // g)

    def state_grains(n):
        return sum(-(-n * p // g) for p in state_pools)

    # the typical step (max_batch requests of max_seq_len // 2, plus the dummy) gives the state group a byte share
    # that holds fewer slots than its floor: it is pinned
    capacity = max_seq_len // 2
    attn_bytes = -(-max_batch * -(-capacity // TPB) * block // g) * g
    st_bytes = sum(-(-live * p // g) * g for p in state_pools)
    share = round(grains * st_bytes / (attn_bytes + st_bytes))
    assert share < state_grains(live)
    pinned = state_grains(live)
    slots = live
    while state_grains(slots + 1) <= pinned:
        slots += 1
    blocks = (grains - pinned) * g // block
    requests = min(max_batch, blocks)  # BudgetTracker.max_num_requests; a running request holds a block
    seq_len = min(max_seq_len, blocks * TPB)  # max_seq_len cut to the pool's tokens
    whole = min(requests, blocks // -(-seq_len // TPB))
    return blocks, slots, requests, whole


@pytest.mark.parametrize(
    "name,layout", [("qwen3-next-80b-a3b", qwen3_next_layout), ("nemotron-nano-9b-v2", nemotron_layout)]
)
def test_default_max_batch_size_needs_more_than_40_gib(name, layout):
    block, pools, _ = layout()
    # _minimum_live_gpu_quota: (max_batch_size + dummy) x state bytes per slot + one attention block
    need = (MAX_BATCH + DUMMY) * sum(pools) + block
    assert need > 40 * GIB
    with pytest.raises(KvvizError, match=f"got {40 * GIB} bytes, need at least {need} bytes"):
        plan_trtllm(load(name), kv_budget_bytes=40 * GIB)


def test_qwen3_next_v2_pools():
    block, pools, ctx = qwen3_next_layout()
    m = load("qwen3-next-80b-a3b")
    assert (block, pools) == (786_432, (36 * 1_048_576, 36 * 49_152))  # the arithmetic above, spelled out
    for budget, batch in ((40 * GIB, 256), (100 * GIB, MAX_BATCH)):
        blocks, slots, requests, whole = v2_by_hand(block, pools, ctx, budget, batch)
        t = plan_trtllm(m, kv_budget_bytes=budget, max_batch_size=batch)
        assert (t.token_capacity, t.request_bound, t.full_length_requests) == (blocks * TPB, requests, whole)
        attn, states = t.pools
        assert (attn.units, attn.bytes_per_unit) == (blocks, block)
        assert (states.units + states.reserved_units, states.bytes_per_unit) == (slots, sum(pools))
        assert not states.outside_budget and t.kv_bytes <= -(-budget // (32 << 20)) * (32 << 20)
    # 100 GiB at the default: the V2 scheduler runs 2,048 requests at once (max_batch_size, far under the
    # 33,493 blocks); 4 of them whole 262,144-token requests (8,192 blocks each)
    assert v2_by_hand(block, pools, ctx, 100 * GIB) == (33_493, MAX_BATCH + DUMMY, MAX_BATCH, 4)
    t = plan_trtllm(m, kv_budget_bytes=100 * GIB)
    assert (t.request_bound, t.full_length_requests) == (MAX_BATCH, 4)
    # 40 GiB at max_batch_size 256: 256 at once; the 256 + 1 slots pinned take
    # ceil(257 x 36 MiB / 32 MiB) + ceil(257 x 36 x 49,152 / 32 MiB) = 290 + 14 grains of the 1,280 (a 258th
    # slot would need 291 + 14); the attention pool 976 x 32 MiB // 786,432 B = 41,642 blocks, 5 x 8,192
    blocks = (1_280 - 290 - 14) * (32 << 20) // block
    assert (
        v2_by_hand(block, pools, ctx, 40 * GIB, 256)
        == (blocks, 257, 256, blocks // (ctx // TPB))
        == (41_642, 257, 256, 5)
    )


def test_nemotron_nano_v2_pools():
    block, pools, ctx = nemotron_layout()
    m = load("nemotron-nano-9b-v2")
    for budget, batch in ((40 * GIB, 256), (100 * GIB, 512)):
        blocks, slots, requests, whole = v2_by_hand(block, pools, ctx, budget, batch)
        t = plan_engine("trtllm", m, kv_budget_bytes=budget, knobs=EngineKnobs(max_batch_size=batch))
        assert (t.token_capacity, t.request_bound, t.full_length_requests) == (blocks * TPB, requests, whole)
        assert [p.units + p.reserved_units for p in t.pools] == [blocks, slots]
    # 100 GiB at max_batch_size 512: 513 slots of 27 x (fp32 SSM 128 x 80 x 128 x 4 + bf16 conv
    # (128 x 80 + 2 x 8 x 128) x 3 x 2) B take ceil(513 x 141,557,760 / 32 MiB) + ceil(513 x 1,990,656 / 32 MiB)
    # = 2,165 + 31 grains of the 3,200 (a 514th slot would need 2,169 + 31); the 4 attention layers' 32-token
    # block is 2 x 4 x 32 x 8 x 128 x 2 = 524,288 B, so 1,004 x 32 MiB // 524,288 = 64,256 blocks: 512 requests
    # at once, 15 of 131,072 tokens (4,096 blocks each)
    assert (block, pools) == (524_288, (27 * 5_242_880, 27 * 73_728))
    blocks = (3_200 - 2_165 - 31) * (32 << 20) // block
    assert (
        v2_by_hand(block, pools, ctx, 100 * GIB, 512)
        == (blocks, 513, 512, blocks // (ctx // TPB))
        == (64_256, 513, 512, 15)
    )


def test_mamba_ssm_dtype_option_reaches_the_state_slot():
    block, (ssm, conv), ctx = qwen3_next_layout()
    from kvviz.options import Options

    t = plan_trtllm(
        load("qwen3-next-80b-a3b"), Options(mamba_ssm_dtype="float32"), kv_budget_bytes=40 * GIB, max_batch_size=128
    )  # kv_cache_config.mamba_ssm_cache_dtype float32: the SSM state doubles
    assert t.pools[1].bytes_per_unit == 2 * ssm + conv


def test_use_py_mamba_keeps_the_legacy_manager():
    # use_kv_cache_manager_v2=False + TRTLLM_USE_PY_MAMBA=1: MixedMambaHybridCacheManager, the whole budget is KV
    # (KVCacheManager over the attention layers), the states are max_batch_size + 1 slots outside it
    block, pools, ctx = qwen3_next_layout()
    t = plan_engine(
        "trtllm", load("qwen3-next-80b-a3b"), kv_budget_bytes=40 * GIB, knobs=EngineKnobs(use_py_mamba=True)
    )
    blocks = 40 * GIB // (block // TPB) // TPB
    assert (t.token_capacity, t.request_bound) == (blocks * TPB, min(MAX_BATCH, blocks // (ctx // TPB)))
    assert all(p.outside_budget for p in t.pools if p.kind == "state")


def test_kimi_linear_is_not_served_by_trtllm():
    # every stored _torch/models/modeling_kimi_linear.py is the Kimi K3 runtime: KimiLinearDecoderLayer asserts
    # attn_res_block_size, which the Kimi-Linear-48B-A3B config does not carry
    assert "attn_res_block_size" not in _cfg("kimi-linear")
    for budget in (40 * GIB, 80 * GIB):
        with pytest.raises(KvvizError, match="Kimi K3 runtime.*attn_res_block_size"):
            plan_engine("trtllm", load("kimi-linear"), kv_budget_bytes=budget)


def test_knobs_are_checked():
    with pytest.raises(KvvizError, match="max_batch_size=0"):
        EngineKnobs(max_batch_size=0)
    with pytest.raises(KvvizError, match="use_py_mamba applies to hybrid"):
        plan_engine("trtllm", load("llama-3.1-8b"), kv_budget_bytes=40 * GIB, knobs=EngineKnobs(use_py_mamba=True))


def test_cli_compare_shows_the_trtllm_row():
    from kvviz.cli import main

    block, pools, ctx = qwen3_next_layout()
    need = (MAX_BATCH + DUMMY) * sum(pools) + block
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            main(["compare", "--model", "qwen3-next-80b-a3b", "--engines", "vllm,sglang,trtllm", "--budget-gib", "40"])
            == 0
        )
    text = out.getvalue()
    row = next(line for line in text.splitlines() if line.startswith("trtllm "))
    assert "not planned" in row and f"need at least {need} bytes" in text
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            main(
                [
                    "compare",
                    "--model",
                    "qwen3-next-80b-a3b",
                    "--engines",
                    "trtllm",
                    "--budget-gib",
                    "40",
                    "--max-batch-size",
                    "256",
                ]
            )
            == 0
        )
    blocks, _, requests, whole = v2_by_hand(block, pools, ctx, 40 * GIB, 256)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("trtllm "))
    assert f"{blocks * TPB:,}" in row and f" {whole} " in row and f" {requests} " in row


# TensorRT-LLM's own storage functions, compiled alone from a local extract (never committed; see
# tests/data/trtllm/PROVENANCE.md): skip where absent (tests/engine_sources.py).


def engine_code(path: Path, qualname: str, env: dict):
    """One function of an engine's module, compiled alone into `env` (as tests/test_engines.py's)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    owner, _, name = qualname.rpartition(".")
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body if owner else tree.body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []  # @staticmethod: the plain function
    exec(
        compile(
            ast.Module(body=[node], type_ignores=[]),
            str(path),
            "exec",
            flags=__future__.annotations.compiler_flag,
            dont_inherit=True,
        ),
        env,
    )
    return env[name]


def _storage_src() -> Path | None:
    root = source_root("trtllm")
    p = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2" if root else None
    if p and (p / "_storage" / "_core.py").is_file() and (p / "_storage_manager.py").is_file():
        return p
    return None


def test_v2_storage_functions_run_as_kvviz_sizes():
    src = _storage_src()
    if src is None:
        absent("trtllm", "tensorrt_llm/runtime/kv_cache_manager_v2/_storage/_core.py and _storage_manager.py")
    import types

    helpers = {
        "typed_len": len,
        "typed_map": lambda xs, f: [f(x) for x in xs],
        "typed_range": range,
        "div_up": lambda a, b: -(-a // b),
        "filled_list": lambda v, n: [v] * n,
        "round": round,
        "sorted": sorted,
        "sum": sum,
        "max": max,
        "min": min,
        "enumerate": enumerate,
        "range": range,
        "len": len,
        "list": list,
        "all": all,
        "ValueError": ValueError,
    }
    cls = types.SimpleNamespace()
    env = {**helpers, "CacheLevelStorage": cls}
    core = src / "_storage" / "_core.py"
    cls._grains_for_slots = engine_code(core, "CacheLevelStorage._grains_for_slots", env)
    cls._grains_to_slots = engine_code(core, "CacheLevelStorage._grains_to_slots", env)
    ratio_to_slots = engine_code(core, "CacheLevelStorage.ratio_to_slot_count_list", env)
    tier = types.SimpleNamespace(GPU_MEM="gpu", HOST_MEM="host", DISK="disk")
    granularity = engine_code(
        src / "_storage_manager.py",
        "CacheLevelManager.cache_tier_granularity",
        {"CacheTier": tier, "math": math, "min": min, "max": max, "int": int},
    )
    for name, layout, budget, batch in (
        ("qwen3-next-80b-a3b", qwen3_next_layout, 100 * GIB, MAX_BATCH),
        ("qwen3-next-80b-a3b", qwen3_next_layout, 40 * GIB, 256),
        ("nemotron-nano-9b-v2", nemotron_layout, 40 * GIB, 256),
        ("nemotron-nano-9b-v2", nemotron_layout, 100 * GIB, 512),
    ):
        block, pools, ctx = layout()
        g = granularity("gpu", budget)
        live = batch + DUMMY
        sizes = [[block], list(pools)]
        typical = [batch * -(-(ctx // 2) // TPB), live]
        nbytes = [sum(-(-n * s // g) * g for s in ss) for n, ss in zip(typical, sizes)]
        min_slots = [1, live]
        min_quota = sum(-(-m * s // g) * g for m, ss in zip(min_slots, sizes) for s in ss)
        quota = max(min_quota, -(-budget // g) * g)
        blocks, slots = ratio_to_slots(quota, sizes, [b / sum(nbytes) for b in nbytes], g, min_slots)
        t = plan_trtllm(load(name), kv_budget_bytes=budget, max_batch_size=batch)
        assert [p.units + p.reserved_units for p in t.pools] == [blocks, slots], name


def _scheduler_v2_src() -> Path | None:
    root = source_root("trtllm")
    p = root / "tensorrt_llm" / "_torch" / "pyexecutor" / "scheduler" / "scheduler_v2.py" if root else None
    return p if p and p.is_file() else None


def test_v2_scheduler_budget_runs_as_kvviz_bounds_requests():
    # KVCacheV2Scheduler's BudgetTracker, compiled alone: _util.create_py_executor_instance passes it
    # max_num_requests = max_batch_size (v2_scheduler_capacity); each scheduled generation request commits
    # one token. Where the blocks exceed max_batch_size, the budget fills at kvviz's request bound.
    src = _scheduler_v2_src()
    if src is None:
        absent("trtllm", "tensorrt_llm/_torch/pyexecutor/scheduler/scheduler_v2.py")
    import typing

    tree = ast.parse(src.read_text(), filename=str(src))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BudgetTracker")
    env = {"Optional": typing.Optional, "LlmRequest": object, "getattr": getattr, "set": set}
    exec(
        compile(
            ast.Module(body=[node], type_ignores=[]),
            str(src),
            "exec",
            flags=__future__.annotations.compiler_flag,
            dont_inherit=True,
        ),
        env,
    )
    for name, budget, batch in (
        ("qwen3-next-80b-a3b", 100 * GIB, MAX_BATCH),
        ("qwen3-next-80b-a3b", 40 * GIB, 256),
        ("nemotron-nano-9b-v2", 100 * GIB, 512),
    ):
        t = plan_trtllm(load(name), kv_budget_bytes=budget, max_batch_size=batch)
        assert t.pools[0].units > batch
        tracker = env["BudgetTracker"](8192, batch)  # LlmArgs.max_num_tokens 8192
        scheduled = 0
        while not tracker.requests_full and tracker.can_fit_tokens(1):
            tracker.commit(None, 1, 0)
            scheduled += 1
        assert scheduled == t.request_bound == batch
