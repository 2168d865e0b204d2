"""vLLM 0.33's own pipeline, offload and P/D functions, compiled from the source (as tests/test_vllm_own_functions.py
does), run on kvviz's specs for models and splits the recorded cases do not hold:

* distributed/utils.py get_pp_indices (envs.VLLM_PP_LAYER_PARTITION from a stand-in);
* v1/core/kv_cache_planning.py get_kv_cache_configs with one spec dict per worker (stage x TP rank), and
  the functions it calls: _project_kv_cache_groups_to_worker, _pool_bytes_per_block_from_builder,
  _get_kv_cache_bytes_per_block, _check_enough_kv_cache_memory, _max_memory_usage_bytes_from_groups,
  _estimate_max_model_len_from_groups. The builder stand-in's get_kv_cache_config_from_groups gives one
  backing of bytes_per_block x num_blocks (vLLM's `size`) with bytes per block from vLLM's own
  _get_kv_cache_bytes_per_block; each spec's block-stride alignment is 1 (kvviz's planners' premise);
* offloading/config.py get_sliding_window_size_in_chunks; nixl/base_scheduler.py blocks_per_sw (the
  statements of __init__ that compute it) and get_exchange_clipped_blocks, kv_connector/utils.py
  clip_ssm_state_blocks.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import math
import types
from functools import partial

import pytest
from test_vllm_own_functions import (  # noqa: E402 (tests/ is on sys.path under pytest's rootdir conftest)
    INTERFACE,
    _cdiv,
    _compile,
    _tree,
    config_classes,
    layer_spec,
    spec_class,
    vllm_config_class,
    vllm_function,
    vllm_method,
)

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.options import Options
from kvviz.vllm.offload import offload_for
from kvviz.vllm.pipeline import pp_indices, startup_refusal
from kvviz.vllm.transfer import transfer

PLANNING = "v1/core/kv_cache_planning.py"
GIB = 2**30
# (preset, knobs): sliding, MLA, Mamba/GDN hybrids, uneven splits, TP x PP, partitions.
PP_MODELS = (
    ("gpt-oss-120b", {"pipeline_parallel_size": 3, "max_model_len": 32768}),
    ("gemma-3-27b", {"pipeline_parallel_size": 4, "tensor_parallel_size": 2}),
    ("deepseek-v3", {"pipeline_parallel_size": 4, "tensor_parallel_size": 8}),
    ("qwen3-next-80b-a3b", {"pipeline_parallel_size": 3}),
    ("jamba-v0.1", {"pipeline_parallel_size": 2, "pp_layer_partition": (10, 22)}),
    # a first stage of two GDN layers only: its states keep block 16 and their own page (state_only_stages)
    ("qwen3-next-80b-a3b", {"pipeline_parallel_size": 2, "pp_layer_partition": (3, 45), "max_model_len": 32768}),
    ("llama-3.1-8b", {"pipeline_parallel_size": 3, "max_num_batched_tokens": 2048}),
)


def _function_without_imports(rel: str, name: str, env: dict):
    """A module-level function of `rel` compiled alone, its local `from ... import` lines dropped (env has them)."""
    node = copy.deepcopy(next(n for n in _tree(rel).body if isinstance(n, ast.FunctionDef) and n.name == name))
    node.body = [s for s in node.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    return _compile(rel, node, env)


class _Envs:
    VLLM_PP_LAYER_PARTITION: str | None = None


@pytest.mark.parametrize("n", [1, 7, 32, 35, 48, 61, 62])
def test_get_pp_indices_is_kvvizs_split(n):
    """vLLM's get_pp_indices gives kvviz's stage ranges for every PP size up to 8 (and a partition)."""
    envs = _Envs()
    fn = vllm_function(
        "distributed/utils.py", "get_pp_indices", {"envs": envs, "logger": types.SimpleNamespace(info=print)}
    )
    for pp in range(1, min(n, 8) + 1):
        assert [fn(n, r, pp) for r in range(pp)] == [pp_indices(n, r, pp) for r in range(pp)], (n, pp)
    if n >= 2:
        envs.VLLM_PP_LAYER_PARTITION = f"1,{n - 1}"
        assert [fn(n, r, 2) for r in range(2)] == [pp_indices(n, r, 2, (1, n - 1)) for r in range(2)]


@functools.cache
def _uniform_class():
    env = {"cdiv": _cdiv()}
    attrs = {
        "page_size_bytes": property(vllm_method(INTERFACE, "UniformTypeKVCacheSpecs", "page_size_bytes", env)),
        "max_memory_usage_bytes": vllm_method(INTERFACE, "UniformTypeKVCacheSpecs", "max_memory_usage_bytes", env),
        "max_memory_usage_pages": vllm_method(INTERFACE, "UniformTypeKVCacheSpecs", "max_memory_usage_pages", env),
    }
    return type("UniformTypeKVCacheSpecs", (types.SimpleNamespace,), attrs)


def _spec(cache):
    s = layer_spec(cache)
    s.get_block_stride_alignment = lambda: 1
    return s


def _vllm_planning(logger_lines: list):
    uniform = _uniform_class()
    group_spec, config = config_classes()
    logger = types.SimpleNamespace(info=lambda *a: None, info_once=lambda *a, **k: logger_lines.append(a[0] % a[1:]))
    env = {
        "UniformTypeKVCacheSpecs": uniform,
        "KVCacheGroupSpec": group_spec,
        "KVCacheConfig": config,
        "HiSparseHotSpec": type("HiSparseHotSpec", (), {}),
        "cdiv": _cdiv(),
        "round_up": vllm_function("utils/math_utils.py", "round_up", {}),
        "format_gib": vllm_function("utils/mem_utils.py", "format_gib", {"GiB_bytes": GIB}),
        "math": math,
        "partial": partial,
        "logger": logger,
        "kv_cache_groups_tp_replicas": lambda *a: 1,  # not what this test checks
    }
    for name in (
        "_get_per_layer_spec",
        "_get_layer_block_stride",
        "_get_kv_cache_bytes_per_block",
        "_pool_bytes_per_block_from_builder",
        "_project_kv_cache_groups_to_worker",
        "_check_enough_kv_cache_memory",
        "_max_memory_usage_bytes_from_groups",
        "_estimate_max_model_len_from_groups",
        "_auto_fit_max_model_len",
    ):
        env[name] = vllm_function(PLANNING, name, env)
    env["_kv_cache_device_name"] = vllm_function("v1/core/kv_cache_utils.py", "_kv_cache_device_name", env)

    layout = types.SimpleNamespace(is_block_outermost=False, name="LBNHC")

    class Builder:
        def _get_pool_bytes_per_block(self, cfg, groups):
            return None

        def get_kv_cache_config_from_groups(self, cfg, groups, num_blocks):
            bpb = env["_get_kv_cache_bytes_per_block"](groups, layout)
            tensor = types.SimpleNamespace(size=bpb * num_blocks, host_resident=False)
            return config(num_blocks=num_blocks, kv_cache_tensors=[tensor], kv_cache_groups=groups)

    env["get_kv_cache_config_builder"] = lambda cfg: Builder()
    return _function_without_imports(PLANNING, "get_kv_cache_configs", env), layout


def _vllm_config(plan, options, layout, auto_fit: bool = False):
    ns = types.SimpleNamespace
    s = plan.scheduling
    return vllm_config_class(True)(
        model_config=ns(max_model_len=s.max_model_len, original_max_model_len=-1 if auto_fit else s.max_model_len),
        parallel_config=ns(
            decode_context_parallel_size=s.dcp,
            pipeline_parallel_size=options.pipeline_parallel_size or 1,
            tensor_parallel_size=options.tensor_parallel_size or 1,
        ),
        scheduler_config=ns(
            max_num_batched_tokens=options.resolved_max_num_batched_tokens,
            async_scheduling=options.async_scheduling is not False,
        ),
        cache_config=ns(
            mamba_cache_mode=s.mamba_cache_mode,
            num_gpu_blocks_override=None,
            get_resolved_kv_cache_layout=lambda: layout,
        ),
        device_config=ns(device_type="cuda"),
        attention_config=ns(hisparse_config=None),
    )


def _run_vllm(plan, options, budget, *, auto_fit: bool = False, log: list | None = None):
    """vLLM's get_kv_cache_configs on kvviz's plan: `budget` on every worker, or one a stage (each TP rank of a
    stage the same); `auto_fit` as --max-model-len -1 (original_max_model_len -1, the plan's own length the
    search's top); `log` collects its info_once lines."""
    fn, layout = _vllm_planning([] if log is None else log)
    group_spec, _ = config_classes()
    uniform = _uniform_class()
    global_groups = [
        group_spec(
            [c.name for c in g.layers],
            uniform(block_size=g.layers[0].tokens_per_block, kv_cache_specs={c.name: _spec(c) for c in g.layers}),
        )
        for g in plan.groups
    ]
    tp = options.tensor_parallel_size or 1
    workers = []
    for st in plan.stages:
        here = {c.name: _spec(c) for g in plan.groups for c in g.layers if st.first_layer <= c.layer < st.end_layer}
        workers += [here] * tp  # every TP rank of a stage registers the same specs
    cfg = _vllm_config(plan, options, layout, auto_fit)
    each = [b for b in budget for _ in range(tp)] if isinstance(budget, tuple) else [budget] * len(workers)
    return fn(cfg, workers, each, global_groups), cfg


@pytest.mark.parametrize("name,knobs", PP_MODELS, ids=[n for n, _ in PP_MODELS])
def test_get_kv_cache_configs_per_stage_gives_kvvizs_blocks(name, knobs):
    """vLLM's get_kv_cache_configs, one spec dict per worker, gives kvviz's num_blocks on every worker; its
    capacity functions on the converged config give kvviz's line; a budget too small is refused on both sides."""
    from test_vllm_own_functions import _Logger, capacity_functions

    options = Options(**knobs)
    plan = kvviz.plan(name, **knobs)
    for budget in (40 * GIB, 7 * GIB + 123_457):
        configs, cfg = _run_vllm(plan, options, budget)
        cap = plan.capacity(budget)
        assert {c.num_blocks for c in configs} == {cap.num_blocks}, (name, budget)
        logger = _Logger()
        get_capacity, update = capacity_functions(logger)
        update(cfg, configs[0])
        assert logger.lines == [cap.line]
        assert startup_refusal(plan, budget) is None
    small = max(s.bytes_per_block for s in plan.stages) * 3
    refusal = startup_refusal(plan, small)
    with pytest.raises(ValueError) as e:
        _run_vllm(plan, options, small)
    assert refusal is not None and refusal.split(": ", 1)[1] == str(e.value)  # word for word, its last sentence too


def test_offload_window_chunks_are_vllms():
    """get_sliding_window_size_in_chunks on kvviz's specs gives the window chunks offload_for counts."""
    classes = {n: spec_class(n) for n in ("SlidingWindowSpec", "ChunkedLocalAttentionSpec", "MambaSpec")}
    fn = vllm_function(
        "distributed/kv_transfer/kv_connector/v1/offloading/config.py",
        "get_sliding_window_size_in_chunks",
        {
            "cdiv": _cdiv(),
            **classes,
            "FullAttentionSpec": (spec_class("FullAttentionSpec"), spec_class("MLAAttentionSpec")),
        },
    )
    for name in ("gpt-oss-120b", "gemma-3-27b", "llama-4-scout", "qwen3-next-80b-a3b", "deepseek-v3"):
        plan = kvviz.plan(name, kv_offloading_size=1)
        off = offload_for(plan, Options(kv_offloading_size=1))
        for g, og in zip(plan.groups, off.groups):
            s = layer_spec(g.layers[0])
            s.extra_retained_tokens = 0
            assert fn(s, og.tokens_per_chunk) == og.window_chunks, (name, g.name)


def _clipper(plan):
    """vLLM's blocks_per_sw / _ssm_spec_blocks / _is_hma_required (the __init__ statements) and
    get_exchange_clipped_blocks, on a stand-in scheduler holding kvviz's groups."""
    rel = "distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py"
    cls = next(
        n
        for n in _tree(rel).body
        if isinstance(n, ast.ClassDef)
        and any(isinstance(f, ast.FunctionDef) and f.name == "get_exchange_clipped_blocks" for f in n.body)
    )
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")

    def assigns(target):
        for st in init.body:
            t = st.targets[0] if isinstance(st, ast.Assign) else getattr(st, "target", None)
            if t is not None and ast.unparse(t) == target:
                return st
        raise AssertionError(target)

    full = (spec_class("FullAttentionSpec"), spec_class("MLAAttentionSpec"))
    env = {
        "cdiv": _cdiv(),
        "SlidingWindowSpec": spec_class("SlidingWindowSpec"),
        "MambaSpec": spec_class("MambaSpec"),
        "FullAttentionSpec": full,
        "clip_ssm_state_blocks": vllm_function(
            "distributed/kv_transfer/kv_connector/utils.py", "clip_ssm_state_blocks", {}
        ),
    }
    specs = []
    for g in plan.groups:
        s = layer_spec(g.layers[0])
        s.num_speculative_blocks = 0
        specs.append(types.SimpleNamespace(kv_cache_spec=s))
    kvc = types.SimpleNamespace(transfer_groups=specs, select_transfer_block_ids=lambda b: b)
    self = types.SimpleNamespace(kv_cache_config=kvc, block_size=plan.tokens_per_block)
    local = {
        "self": self,
        "kv_cache_config": kvc,
        "vllm_config": types.SimpleNamespace(
            scheduler_config=types.SimpleNamespace(disable_hybrid_kv_cache_manager=False)
        ),
    }
    ns = {**env, **local}  # one namespace: the comprehensions see self, the next statement the last one's name
    for target in ("sw_sizes_tokens", "self.blocks_per_sw", "self._ssm_spec_blocks", "self._is_hma_required"):
        node = ast.Module(body=[copy.deepcopy(assigns(target))], type_ignores=[])
        exec(compile(node, rel, "exec"), ns)
    clip = vllm_method(rel, cls.name, "get_exchange_clipped_blocks", env)
    return functools.partial(clip, self)


@pytest.mark.parametrize("name", ["gpt-oss-120b", "gemma-3-27b", "qwen3-next-80b-a3b", "llama-4-scout", "deepseek-v3"])
def test_transfer_blocks_are_the_connectors_clipping(name):
    """get_exchange_clipped_blocks on each group's whole block list keeps kvviz's blocks_sent, at several prompts."""
    plan = kvviz.plan(name)
    clip = _clipper(plan)
    for prompt in (64, 1000, 10_000, 100_000):
        t = transfer(plan, prompt)
        lists = tuple(list(range(g.blocks_allocated)) for g in t.groups)
        assert [len(b) for b in clip(lists)] == [g.blocks_sent for g in t.groups], (name, prompt)


@pytest.mark.parametrize("name", ["gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3"])
def test_cli_transfer_bytes_are_the_connectors_clipped_blocks(name, capsys):
    """`kvviz plan --transfer P --json`: each group's blocks sent are get_exchange_clipped_blocks' list for the
    prompt's blocks, and its bytes that many blocks of one decode rank's pages of the group (a Mamba group's real
    state bytes: the connector moves the state, not its padding); below kv_recompute_threshold nothing moves."""
    from kvviz.cli import main

    plan = kvviz.plan(name)
    clip = _clipper(plan)
    for prompt in (63, 1000, 10_000):
        assert main(["plan", "--model", name, "--transfer", str(prompt), "--json"]) == 0
        got = json.loads(capsys.readouterr().out)["transfer"]
        t = transfer(plan, prompt)
        if prompt < 64:
            assert got["bytes_per_decode_rank"] == 0 and got["recomputed"], name
            continue
        clipped = clip(tuple(list(range(g.blocks_allocated)) for g in t.groups))
        per_block = [sum(c.content_bytes if c.kind.is_state else c.page_bytes for c in g.layers) for g in plan.groups]
        assert [g["blocks_sent"] for g in got["groups"]] == [len(b) for b in clipped], (name, prompt)
        assert [g["bytes_per_decode_rank"] for g in got["groups"]] == [
            len(b) * p for b, p in zip(clipped, per_block)
        ], (name, prompt)
        assert got["bytes_per_decode_rank"] == sum(len(b) * p for b, p in zip(clipped, per_block))


def test_refusals_name_the_knob():
    """Offload without its size is refused naming the knob (offload with PP is planned: vLLM 0.33 raises nothing
    for it; tests/test_deploy_more.py holds it equal to vLLM's own connector)."""
    with pytest.raises(KvvizError, match="kv_offloading_size"):
        offload_for(kvviz.plan("llama-3.1-8b", pipeline_parallel_size=2), Options())


@pytest.mark.parametrize("name,knobs", PP_MODELS, ids=[n for n, _ in PP_MODELS])
def test_each_stage_with_its_own_budget_and_auto_fit_are_vllms(name, knobs):
    """A GPU budget differs by stage (each stage's own weights): vLLM's get_kv_cache_configs with one available
    memory a worker keeps the smallest block count, and with --max-model-len -1 its _auto_fit_max_model_len fits
    each worker from its own check memory and keeps the shortest, logging the limiting worker's memory; kvviz's
    Plan.capacity, startup_refusal and kvviz.deploy.auto_fit with one budget a stage give the same."""
    from kvviz.deploy.autofit import auto_fit

    options = Options(**knobs)
    plan = kvviz.plan(name, **knobs)
    n = len(plan.stages)
    for budgets in (tuple(40 * GIB - i * 3 * GIB for i in range(n)), tuple(4 * GIB + i * 1_234_567 for i in range(n))):
        refusal = startup_refusal(plan, budgets)
        if refusal is None:
            configs, _ = _run_vllm(plan, options, budgets)
            assert {c.num_blocks for c in configs} == {plan.capacity(budgets).num_blocks}, (name, budgets)
        else:  # the stage that cannot hold one request, in vLLM's words
            with pytest.raises(ValueError) as e:
                _run_vllm(plan, options, budgets)
            assert refusal.split(": ", 1)[1] == str(e.value), (name, budgets)
        model = kvviz.load(name)
        fit = auto_fit(model, options.with_(max_model_len=None), budgets)
        top = kvviz.plan(name, **(knobs | {"max_model_len": None}))
        log: list = []
        _, cfg = _run_vllm(top, options, budgets, auto_fit=True, log=log)
        assert cfg.model_config.max_model_len == fit.max_model_len, (name, budgets)
        assert log[-1] == fit.log_line, (name, budgets)
