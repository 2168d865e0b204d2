"""TensorRT-LLM's DeepSeek V4 pools (kvviz.engines.trtllm.dsv4) against hand derivations.

Every expected number is derived here from the preset's config.json fields (kvviz/presets/) and
the TensorRT-LLM rules the module cites (tests/data/trtllm/PROVENANCE.md), never from kvviz's own
output. Where a local extract of TensorRT-LLM's source is present (KVVIZ_TRTLLM_SRC, same relative
paths; never committed; tests/engine_sources.py) the engine's own functions run too.
"""

from __future__ import annotations
import __future__

import ast
import enum
import math
import types
from pathlib import Path

import pytest
from engine_sources import absent, required, source_root

from kvviz.base.errors import KvvizError
from kvviz.engines import compare_rows, plan_engine
from kvviz.engines.trtllm.dsv4 import geometry, plan_trtllm_dsv4
from kvviz.engines.trtllm.dsv4_pools import (
    DSV4Geometry,
    floor_pages,
    life_cycles,
    pages_for_batch,
    slot_counts,
    typical_step,
)
from kvviz.engines.trtllm.hybrid import cache_tier_granularity as gpu_granularity
from kvviz.families import load, preset_raw
from kvviz.options import Options

GIB = 2**30
TPB = 128  # examples/models/core/deepseek_v4/README.md: TensorRT-LLM defaults DeepSeek-V4 to 128
MAX_BATCH_SIZE = 2048  # llmapi/llm_args.py BaseLlmArgs.max_batch_size
MAX_NUM_TOKENS = 8192  # llmapi/llm_args.py BaseLlmArgs.max_num_tokens


def by_hand(name: str, budget: int, max_seq_len: int, max_batch_size: int = MAX_BATCH_SIZE) -> dict:
    """DeepseekV4CacheManager's pools, written out from the preset's config fields."""
    cfg = preset_raw(name)
    n = cfg["num_hidden_layers"]
    ratios = [1 if r == 0 else r for r in cfg["compress_ratios"][:n]]  # checkpoint ratio 0 is SWA-only (1)
    c4, c128 = ratios.count(4), ratios.count(128)
    hd, rope, idx = cfg["head_dim"], cfg["qk_rope_head_dim"], cfg["index_head_dim"]
    nope = hd - rope
    # footer_scale_kv.TOKEN_BYTES (fp8_ds_mla, the only Hopper dtype): 448 E4M3 NoPE + 64 bf16 RoPE
    # + one UE8M0 scale per 64 NoPE dims (7) + 1 pad byte
    main = nope + 2 * rope + nope // 64 + 1
    indexer = idx + idx // 128 * 4  # get_token_bytes, indexer_k_dtype 'fp8': 1 B a value + fp32 per 128
    state = 4  # compressor_dtype FLOAT
    c128_state_per_token = 2 * hd * state  # KV + score, 1x wide
    # life cycles by window: 128 (every layer's SWA + c128 compressor states), 8 (c4 states), none
    # (compressed KV); a pool per buffer size, a page one block of every buffer of that size
    pools = {
        128: [n * main * TPB, c128 * c128_state_per_token * TPB],
        8: [c4 * 2 * (2 * hd) * state * TPB, c4 * 2 * (2 * idx) * state * TPB],  # main, indexer states
        0: [c4 * main * (TPB // 4), c4 * indexer * (TPB // 4), c128 * main * (TPB // 128)],
    }
    # typical step: 1 context request of max_num_tokens (all its blocks live in every life cycle)
    # + 2047 generation requests of max_seq_len at history max_seq_len - 1: all blocks windowless,
    # one block live in a window of 128 or 8 (max_seq_len a multiple of 128)
    assert max_seq_len % TPB == 0
    need = {
        128: MAX_NUM_TOKENS // TPB + (max_batch_size - 1),
        8: MAX_NUM_TOKENS // TPB + (max_batch_size - 1),
        0: MAX_NUM_TOKENS // TPB + (max_batch_size - 1) * (max_seq_len // TPB),
    }
    floor = {128: 2, 8: 2, 0: 2}  # (window + 126) // 128 + 1; windowless: the largest of those
    gran = (2 << 20) << min(4, int(math.log2(budget // GIB)))  # gpu_granularity, budget >= 1 GiB

    def counts(scale):
        return {w: max(floor[w], scale * need[w] // need[0]) for w in need}

    def cost(scale):
        c = counts(scale)
        return sum(math.ceil(c[w] * b / gran) * gran for w in pools for b in pools[w])

    scale = budget // sum(b for bs in pools.values() for b in bs)  # a lower bound, then up while it fits
    while cost(scale + 1) <= budget:
        scale += 1
    c = counts(scale)
    # KVCacheV2Scheduler (_util.py create_py_executor_instance, scheduler_v2.py): max_batch_size
    # requests at once, pages allocated step by step, each running request holding a page of every
    # life cycle; a generation request of max_seq_len holds all max_seq_len / 128 windowless pages
    # and one page in each window (128 and 8 tokens): the blocks wholly behind its window are stale.
    bound = min(max_batch_size, min(c.values()))
    fit = min(bound, c[128] // 1, c[8] // 1, c[0] // (max_seq_len // TPB))
    return {
        "pages": c,
        "tokens": c[0] * TPB,
        "bound": bound,
        "fit": fit,
        "gran": gran,
        "c4": c4,
        "c128": c128,
        "layers": n,
    }


@pytest.mark.parametrize("name", ["deepseek-v4-pro", "deepseek-v4-flash"])
@pytest.mark.parametrize("gib", [40, 12])
def test_pools_tokens_and_requests_by_hand(name, gib):
    model = load(name)
    want = by_hand(name, gib * GIB, model.max_model_len)
    plan = plan_engine("trtllm", model, kv_budget_bytes=gib * GIB)
    assert plan.engine == "trtllm" and plan.token_capacity == want["tokens"] and plan.request_bound == want["bound"]
    assert plan.full_length_requests == want["fit"]
    by_name = {p.name: p for p in plan.pools}
    assert by_name["swa kv"].units == want["pages"][128] and by_name["swa kv"].layers == want["layers"]
    assert by_name["c4 compressor state"].units == want["pages"][8]
    assert by_name["c4 compressed kv"].units == want["pages"][0] == plan.token_capacity // TPB
    assert by_name["c4 indexer k"].bytes_per_unit == want["c4"] * 132 * 32  # 32 rows of 132 B per 128 tokens
    assert by_name["c128 compressed kv"].bytes_per_unit == want["c128"] * 584  # one 584 B row per 128 tokens
    assert plan.kv_bytes <= gib * GIB and plan.max_model_len == model.max_model_len
    assert (
        f"= {want['bound']:,} at once" in plan.derivation[-1]
        and f"{want['fit']:,} of full length" in plan.derivation[-1]
    )
    assert plan.log_line == f"[TensorRT-LLM][INFO] KV cache manager v2 device quota set to {float(gib)}GiB"


# The issue's case was planned at a 2,048-token max_seq_len (the preset had no length field then; it
# now carries the published max_position_embeddings, 1,048,576), so it is asked for by name.
ISSUE_CASE = Options(max_model_len=2048)


def test_pro_at_40_gib_numbers():
    """The issue's case, in numbers: Pro at 40 GiB (61 layers: 30 c4, 31 c128; max_seq_len 2048)."""
    want = by_hand("deepseek-v4-pro", 40 * GIB, 2048)
    assert (want["c4"], want["c128"], want["gran"]) == (30, 31, 32 << 20)
    # per request: 2048 x (30 x (146 + 33) + 31 x 4) + 128 x (61 x 584 + 30 x 10240 + 31 x 4096)
    plan = plan_trtllm_dsv4(load("deepseek-v4-pro"), ISSUE_CASE, kv_budget_bytes=40 * GIB)
    assert (plan.token_capacity, plan.request_bound, plan.full_length_requests) == (
        want["tokens"],
        want["bound"],
        want["fit"],
    )


def test_max_batch_size_knob_reshapes_the_typical_step():
    """EngineKnobs.max_batch_size (LlmArgs.max_batch_size): the typical step has that many requests."""
    from kvviz.engines import EngineKnobs

    want = by_hand("deepseek-v4-pro", 40 * GIB, 2048, max_batch_size=256)
    plan = plan_engine(
        "trtllm", load("deepseek-v4-pro"), ISSUE_CASE, kv_budget_bytes=40 * GIB, knobs=EngineKnobs(max_batch_size=256)
    )
    assert (plan.token_capacity, plan.request_bound) == (want["tokens"], want["bound"]) and want["bound"] <= 256
    with pytest.raises(KvvizError, match="max_attention_window"):
        plan_engine(
            "trtllm", load("deepseek-v4-pro"), kv_budget_bytes=40 * GIB, knobs=EngineKnobs(max_attention_window=(128,))
        )


def test_cli_compare_row_shows_trtllm_numbers(capsys):
    from kvviz.cli import main

    want = by_hand("deepseek-v4-pro", 40 * GIB, 2048)
    argv = ["compare", "--model", "deepseek-v4-pro", "--engines", "vllm,sglang,trtllm", "--budget-gib", "40"]
    assert main([*argv, "--max-model-len", "2048"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("trtllm "))
    assert f" {want['tokens']:,} " in row and f" {want['fit']:,} " in row and f" {want['bound']:,} " in row
    assert "not planned" not in row
    assert "trtllm: [TensorRT-LLM][INFO] KV cache manager v2 device quota set to 40.0GiB" in out


def test_max_seq_len_cut_to_the_windowless_pages():
    """KVCacheManagerV2.__init__: a max_seq_len beyond the windowless pages is cut to them."""
    options = Options(max_model_len=1 << 20)
    plan = plan_trtllm_dsv4(load("deepseek-v4-flash"), options, kv_budget_bytes=3 * GIB)
    want = by_hand("deepseek-v4-flash", 3 * GIB, 1 << 20)
    assert plan.token_capacity == want["tokens"] < 1 << 20 and plan.max_model_len == want["tokens"]
    assert plan.log_line == (
        f"[TensorRT-LLM][WARNING] max_seq_len {1 << 20} is greater than max_num_tokens "
        f"{want['tokens']} that can be allocated in kv cache manager, setting max_seq_len to "
        f"{want['tokens']}"
    )


@pytest.mark.parametrize(
    "kwargs, options, field",
    [
        ({"kv_budget_bytes": 64 << 20}, Options(), "kv_budget_bytes"),  # below the floors' chunks
        ({"kv_budget_bytes": 0}, Options(), "kv_budget_bytes"),
        ({"kv_budget_bytes": 40 * GIB}, Options(block_size=64), "block_size"),
        ({"kv_budget_bytes": 40 * GIB}, Options(main_format="fp8"), "main_format"),
        ({"kv_budget_bytes": 40 * GIB}, Options(head_dim=576), "head_dim"),
    ],
)
def test_refusals_are_one_line(kwargs, options, field):
    with pytest.raises(KvvizError) as err:
        plan_trtllm_dsv4(load("deepseek-v4-pro"), options, **kwargs)
    assert "\n" not in str(err.value) and field in str(err.value)


def test_compare_rows_plan_every_engine_for_dsv4():
    rows = compare_rows(load("deepseek-v4-flash"), kv_budget_bytes=40 * GIB)
    assert [r.engine for r in rows] == ["vllm", "sglang", "trtllm"] and all(r.plan for r in rows)
    tiny = compare_rows(load("deepseek-v4-flash"), ("trtllm",), kv_budget_bytes=64 << 20)[0]
    assert tiny.plan is None and "minimum pages" in tiny.refusal and "\n" not in tiny.refusal


# ---------------------------------------------------------------------------------------------
# TensorRT-LLM's own functions, from a local extract where present (never committed).
# ---------------------------------------------------------------------------------------------

DSV4_DIR = "tensorrt_llm/_torch/attention/backends/sparse/deepseek_v4"


def _trtllm_src() -> Path | None:
    root = source_root("trtllm")
    path = root / DSV4_DIR if root else None
    if path and (path / "cache_manager.py").is_file() and (path / "params.py").is_file():
        return root / "tensorrt_llm"
    return None


def _compile(path: Path, names, env: dict) -> dict:
    """The named top-level functions / classes of an engine module compiled alone into `env`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    body = [
        n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Assign))
        and (
            getattr(n, "name", None) in names
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", "") in names for t in n.targets))
        )
    ]
    code = compile(
        ast.Module(body=body, type_ignores=[]),
        str(path),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    exec(code, env)
    return env


def test_trtllm_own_functions_price_and_split_as_kvviz():
    src = _trtllm_src()
    if src is None:  # see tests/data/trtllm/PROVENANCE.md
        absent("trtllm", f"{DSV4_DIR}/cache_manager.py and params.py")
    dsv4 = src / "_torch" / "attention" / "backends" / "sparse" / "deepseek_v4"
    env = {
        "Enum": enum.Enum,
        "dataclass": __import__("dataclasses").dataclass,
        "DataRole": lambda name: name,
        "List": list,
        "Tuple": tuple,
        "Optional": type(None),
    }
    _compile(
        dsv4 / "params.py",
        {
            "DEEPSEEK_V4_SPARSE_RATIO",
            "DEEPSEEK_V4_OVERLAP_COMPRESSOR_RATIO",
            "DeepseekV4AttentionType",
            "DEEPSEEK_V4_SLIDING_ATTENTION",
            "DEEPSEEK_V4_NON_SLIDING_ATTENTION",
            "is_overlap_compressor",
            "is_sparse_layer",
            "is_compress_layer",
            "compress_ratio_has_attention",
        },
        env,
    )
    footer = types.SimpleNamespace(
        **{
            k: v
            for k, v in _compile(
                dsv4 / "footer_scale_kv.py",
                {
                    "DIM_NOPE",
                    "DIM_ROPE",
                    "QUANT_TILE",
                    "NUM_NOPE_TILES",
                    "DATA_ROW_BYTES",
                    "FOOTER_ROW_BYTES",
                    "TOKEN_BYTES",
                },
                {},
            ).items()
            if k.isupper()
        }
    )
    # get_token_bytes' `from . import footer_scale_kv`: the package of the compiled functions gives it
    builtins = dict(vars(__import__("builtins")))
    real_import = builtins["__import__"]
    builtins["__import__"] = lambda name, g=None, l=None, fromlist=(), level=0: (
        types.SimpleNamespace(footer_scale_kv=footer) if level == 1 else real_import(name, g, l, fromlist, level)
    )
    env["__builtins__"] = builtins
    _compile(dsv4 / "cache_manager.py", {"get_attn_dim", "get_token_bytes", "_get_attn_bytes_per_token"}, env)
    kinds = env["DeepseekV4AttentionType"]
    for name in ("deepseek-v4-pro", "deepseek-v4-flash"):
        cfg = preset_raw(name)
        ratios = [1 if r == 0 else r for r in cfg["compress_ratios"][: cfg["num_hidden_layers"]]]
        hd, idx = cfg["head_dim"], cfg["index_head_dim"]
        g = geometry(load(name), Options())
        # every cache a layer of each compress ratio has: TensorRT-LLM's own bytes per token and per block
        for r in sorted(set(ratios)):
            for kind in kinds:
                if not env["compress_ratio_has_attention"](r, kind):
                    continue
                own = env["_get_attn_bytes_per_token"](
                    hd, idx, r, kind, True, indexer_k_dtype="fp8", use_fp8_ds_mla=True
                )
                assert g.bytes_per_token(r, kind.name) == own, (name, r, kind.name)
    lcs = _trtllm_lifecycle_module(src)
    if lcs is not None:
        g = DSV4Geometry(
            head_dim=512,
            index_head_dim=128,
            main_row_bytes=584,
            indexer_row_bytes=132,
            ratios=tuple(ratios),
            tokens_per_block=TPB,
        )
        cycles = life_cycles(g)
        batch = typical_step(MAX_NUM_TOKENS, MAX_BATCH_SIZE, 2048)
        keys = [lcs["LifecycleKey"](False, lc.window, 0, False) for lc in cycles]
        desc = lcs["BatchDesc"]([lcs["KVCacheDesc"](c, h) for c, h in batch])
        need = lcs["slots_for_batch"](keys, desc, TPB)
        assert need == [pages_for_batch(lc.window, batch, TPB) for lc in cycles]
        floors = lcs["slots_from_constraints"](keys, [], TPB, 0.97)
        assert floors == floor_pages([lc.window for lc in cycles], TPB)
        assert lcs["gpu_granularity"](40 * GIB) == gpu_granularity(40 * GIB)
        pools = [lc.pool_slot_bytes for lc in cycles]
        assert lcs["_tier_slot_counts"](need, floors, pools, gpu_granularity(40 * GIB), 40 * GIB, "gpu") == slot_counts(
            need, floors, pools, gpu_granularity(40 * GIB), 40 * GIB
        )


def _trtllm_lifecycle_module(src: Path) -> dict | None:
    """The lifecycle slot-count module (read_file id 70130628343), where the extract holds it."""
    path = src / "_torch" / "pyexecutor" / "lifecycle_slot_counts.py"
    if not path.is_file():
        if required("trtllm"):
            absent("trtllm", "tensorrt_llm/_torch/pyexecutor/lifecycle_slot_counts.py")
        return None
    from typing import Any, Callable, NamedTuple, Sequence

    env = {
        "NamedTuple": NamedTuple,
        "Sequence": Sequence,
        "Any": Any,
        "Callable": Callable,
        "math": math,
        "struct": __import__("struct"),
        "dataclass": __import__("dataclasses").dataclass,
        "logger": types.SimpleNamespace(warning=lambda *a: None),
    }

    @__import__("dataclasses").dataclass
    class KVCacheDesc:
        capacity: int
        history_length: int

    @__import__("dataclasses").dataclass
    class BatchDesc:
        kv_caches: list
        system_prompt_length: int = 0

    env.update(KVCacheDesc=KVCacheDesc, BatchDesc=BatchDesc)
    return _compile(
        path,
        {
            "MAX_SLOT_COUNT",
            "_GPU_PHYS_MEM_BASE",
            "LifecycleKey",
            "_div_up",
            "_round_up",
            "_c_div",
            "_stale_range",
            "_length",
            "_intersect",
            "slots_for_batch",
            "_float32",
            "slots_from_constraints",
            "gpu_granularity",
            "_largest_scale",
            "_tier_slot_counts",
        },
        env,
    )
