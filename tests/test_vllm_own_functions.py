"""vLLM 0.33's own capacity functions, run on kvviz's vLLM plans.

kvviz reproduces the line vLLM logs once the KV cache is sized ("GPU KV cache size: N tokens,
Maximum concurrency for L tokens per request: C.CCx"). Here vLLM's own source lines compute it,
read as text from the 0.33 wheel (unpacked where KVVIZ_VLLM_SRC points; never imported) and
compiled one function at a time, as tests/test_engines.py runs SGLang's:

* v1/core/kv_cache_utils.py: update_kv_cache_capacity (its logged line), get_kv_cache_capacity,
  get_max_concurrency_for_kv_cache_config, _kv_cache_device_name, generate_scheduler_kv_cache_config
  (the scheduler's config, whose per-layer specs the docstring says give the same capacity);
* utils/math_utils.py: cdiv;
* v1/kv_cache_interface.py: max_memory_usage_bytes / max_admission_blocks_per_request of the
  class each kvviz cache says it is (`CacheSpec.spec_class`), looked up through the class's bases
  as Python would (MLAAttentionSpec inherits FullAttentionSpec's); UniformTypeKVCacheSpecs'
  page_size_bytes and max_memory_usage_bytes (the worker's group spec); the KVCacheGroupSpec,
  KVCacheGroupRole and KVCacheConfig dataclasses themselves;
* config/vllm.py: VllmConfig.max_concurrent_batches and max_in_flight_tokens.

A spec's stand-in `self` carries kvviz's CacheSpec fields under vLLM's field names (the map
VLLM_FIELD_FROM_KVVIZ), vLLM's own literal field defaults (read from the class bodies) for the
rest, and nothing else, so a method reading a field kvviz does not model fails loudly. The
stand-in VllmConfig carries what kvviz resolved: max_model_len, the DCP size, the Mamba cache
mode, max_num_batched_tokens and async scheduling. No expected number is typed in: every
expectation is kvviz's capacity, and every number vLLM's functions produce comes from them.
The tests skip where the source is absent, and fail where KVVIZ_REQUIRE_VLLM_SRC is set (.ci/run
fetches the wheel and sets it; tests/engine_sources.py).
"""

from __future__ import annotations
import __future__

import ast
import copy
import dataclasses
import enum
import functools
import types
from pathlib import Path

import pytest
from engine_sources import absent, source_root

from kvviz.families import load
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

GIB = 2**30
PRESETS = ("gpt-oss-120b", "gemma-3-27b", "llama-4-scout", "qwen3-next-80b-a3b", "deepseek-v3")
# Two KV budgets: a round one and one that is no whole number of blocks of any preset's stride.
BUDGETS = (60 * GIB, 7 * GIB + 123_457)
# Knobs that move what a request holds (inputs to both sides, not expected values).
KNOB_CASES = (
    ("gpt-oss-120b", {"async_scheduling": False, "max_num_batched_tokens": 2048}),
    ("gemma-3-27b", {"max_model_len": 32768, "block_size": 32}),
    ("llama-4-scout", {"max_model_len": 65536}),
    ("qwen3-next-80b-a3b", {"prefix_caching": False}),
    ("deepseek-v3", {"tensor_parallel_size": 8, "decode_context_parallel_size": 8}),
)

# vLLM spec field (kv_cache_interface.py) <- kvviz CacheSpec attribute (kvviz/core/spec.py).
VLLM_FIELD_FROM_KVVIZ = {
    "block_size": "tokens_per_block",
    "sliding_window": "sliding_window",
    "attention_chunk_size": "attention_chunk_size",
    "dcp_sharded": "dcp_sharded",
    "num_prefill_checkpoint_blocks": "checkpoint_blocks",
    "page_size_padded": "padded_page_bytes",
}
# vLLM derives page_size_bytes (a property) from fields kvviz keeps as a row format; the stand-in
# carries kvviz's page instead (pages are checked against vLLM's recorded outputs elsewhere).
PAGE_FROM_KVVIZ = "page_bytes"
SPEC_METHODS = ("max_memory_usage_bytes", "max_admission_blocks_per_request")


def _vllm_root() -> Path | None:
    root = source_root("vllm")
    for pkg in (root / "vllm", root) if root else ():  # the unpacked wheel, or its vllm/ package
        if (pkg / "v1" / "core" / "kv_cache_utils.py").is_file():
            return pkg
    return None


VLLM = _vllm_root()
if VLLM is None:  # skips this module (and tests/test_vllm_own_pipeline.py, which imports it), or fails
    absent("vllm", "vllm/v1/core/kv_cache_utils.py", module=True)


# ---------------------------------------------------------------------------------------------
# Reading vLLM's source: one function, method or class compiled alone.
# ---------------------------------------------------------------------------------------------


@functools.cache
def _tree(rel: str) -> ast.Module:
    path = VLLM / rel
    return ast.parse(path.read_text(), filename=str(path))


def _classes(rel: str) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in _tree(rel).body if isinstance(n, ast.ClassDef)}


def _chain(rel: str, cls: str) -> list[ast.ClassDef]:
    """The class and its bases defined in the same module, leaf first (vLLM's specs inherit singly)."""
    classes, out = _classes(rel), []
    node = classes[cls]
    while node is not None:
        out.append(node)
        bases = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in classes]
        assert len(bases) <= 1, f"{node.name}: more than one base in {rel}"
        node = classes[bases[0]] if bases else None
    return out


def _compile(rel: str, node: ast.stmt, env: dict):
    """Compile one top-level statement of `rel` alone into `env` (decorators of a function dropped:
    the plain function of a property or method) and return what it defines."""
    node = copy.deepcopy(node)
    if isinstance(node, ast.FunctionDef):
        node.decorator_list = []
    code = compile(
        ast.Module(body=[node], type_ignores=[]),
        str(VLLM / rel),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    exec(code, env)
    return env[node.name]


def vllm_function(rel: str, name: str, env: dict):
    """A module-level function or class of vLLM's `rel`, compiled alone with `env` as its globals."""
    node = next(n for n in _tree(rel).body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    return _compile(rel, node, env)


def vllm_method(rel: str, cls: str, name: str, env: dict):
    """The method `name` that `cls` has (its own, else the nearest base's), as a plain function;
    None when no class of the chain defines it."""
    for node in _chain(rel, cls):
        fn = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if fn is not None:
            return _compile(rel, fn, dict(env))
    return None


NO_DEFAULT = object()  # a vLLM field whose default is not a literal, or that has none


def vllm_fields(rel: str, cls: str) -> dict[str, object]:
    """`cls`'s dataclass fields (its bases' included) -> vLLM's default where the source writes a
    literal (or field(default=literal)); fields without one map to a sentinel."""
    out: dict[str, object] = {}
    for node in reversed(_chain(rel, cls)):  # bases first: a subclass's default wins
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            value = stmt.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "field":
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            try:
                out[stmt.target.id] = NO_DEFAULT if value is None else ast.literal_eval(value)
            except ValueError:  # a default that is an expression (an enum member): not a literal
                out[stmt.target.id] = NO_DEFAULT
    return out


# ---------------------------------------------------------------------------------------------
# Stand-ins built from kvviz's plan, with vLLM's own code in their methods.
# ---------------------------------------------------------------------------------------------

INTERFACE = "v1/kv_cache_interface.py"
UTILS = "v1/core/kv_cache_utils.py"


@functools.cache
def _cdiv():
    return vllm_function("utils/math_utils.py", "cdiv", {})


@functools.cache
def spec_class(name: str) -> type:
    """A stand-in for vLLM's spec class `name`: a namespace whose methods are vLLM's own
    max_memory_usage_bytes / max_admission_blocks_per_request of that class (or its bases)."""
    methods = {m: vllm_method(INTERFACE, name, m, {"cdiv": _cdiv()}) for m in SPEC_METHODS}
    assert methods["max_memory_usage_bytes"] is not None, f"{name}: no max_memory_usage_bytes in {INTERFACE}"
    return type(name, (types.SimpleNamespace,), {k: v for k, v in methods.items() if v is not None})


@functools.cache
def uniform_type_specs_class() -> type:
    """UniformTypeKVCacheSpecs (the worker's group spec): vLLM's page_size_bytes property and
    max_memory_usage_bytes over its kv_cache_specs."""
    env = {"cdiv": _cdiv()}
    page = vllm_method(INTERFACE, "UniformTypeKVCacheSpecs", "page_size_bytes", env)
    usage = vllm_method(INTERFACE, "UniformTypeKVCacheSpecs", "max_memory_usage_bytes", env)
    return type(
        "UniformTypeKVCacheSpecs",
        (types.SimpleNamespace,),
        {"page_size_bytes": property(page), "max_memory_usage_bytes": usage},
    )


@functools.cache
def config_classes() -> tuple[type, type]:
    """vLLM's own KVCacheGroupSpec and KVCacheConfig dataclasses (KVCacheGroupRole for the role's default)."""
    env = {
        "dataclass": dataclasses.dataclass,
        "field": dataclasses.field,
        "Enum": enum.Enum,
        "cached_property": functools.cached_property,
    }
    vllm_function(INTERFACE, "KVCacheGroupRole", env)
    return vllm_function(INTERFACE, "KVCacheGroupSpec", env), vllm_function(INTERFACE, "KVCacheConfig", env)


def layer_spec(cache):
    """One kvviz CacheSpec as vLLM's spec of the class kvviz says it is: kvviz's fields under
    vLLM's names, vLLM's literal defaults for the fields kvviz does not model."""
    cls = cache.spec_class
    fields = vllm_fields(INTERFACE, cls)
    values = {k: v for k, v in fields.items() if v is not NO_DEFAULT}
    for vllm_name, kvviz_name in VLLM_FIELD_FROM_KVVIZ.items():
        value = getattr(cache, kvviz_name)
        if vllm_name in fields:
            values[vllm_name] = value
        else:  # kvviz holds something the vLLM class has no field for: the class would be wrong
            assert value in (None, 0, False), f"{cache.name}: {kvviz_name}={value!r} but {cls} has no {vllm_name}"
    values["page_size_bytes"] = getattr(cache, PAGE_FROM_KVVIZ)
    return spec_class(cls)(**values)


def worker_kv_cache_config(plan, budget: int):
    """The worker's KVCacheConfig for kvviz's plan at `budget`: one KVCacheGroupSpec per kvviz
    group, its spec a UniformTypeKVCacheSpecs of the group's layers, num_blocks kvviz's."""
    group_spec, config = config_classes()
    uniform = uniform_type_specs_class()
    groups = [
        group_spec([c.name for c in g.layers], uniform(kv_cache_specs={c.name: layer_spec(c) for c in g.layers}))
        for g in plan.groups
    ]
    return config(num_blocks=plan.capacity(budget).num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def scheduler_kv_cache_config(worker):
    """vLLM's generate_scheduler_kv_cache_config of the worker's config (each group's first layer spec)."""
    fn = vllm_function(
        UTILS,
        "generate_scheduler_kv_cache_config",
        {"copy": copy, "UniformTypeKVCacheSpecs": uniform_type_specs_class()},
    )
    return fn([worker])


@functools.cache
def vllm_config_class(use_v2_model_runner: bool) -> type:
    """A stand-in VllmConfig whose max_concurrent_batches and max_in_flight_tokens are vLLM's
    (config/vllm.py); use_v2_model_runner is the one input the first reads that kvviz has no knob
    for (at pipeline parallel 1 both runners give 2 batches with async scheduling)."""
    rel = "config/vllm.py"
    attrs = {
        name: property(vllm_method(rel, "VllmConfig", name, {}))
        for name in ("max_concurrent_batches", "max_in_flight_tokens")
    }
    attrs["use_v2_model_runner"] = use_v2_model_runner
    return type("VllmConfig", (types.SimpleNamespace,), attrs)


def vllm_config(plan, options: Options, *, use_v2_model_runner: bool = False):
    """vLLM's config as the capacity functions read it, from what kvviz resolved for `plan`."""
    s = plan.scheduling
    # async_scheduling None: VllmConfig.__post_init__ (config/vllm.py) turns it on for a generative
    # model on the default executor.
    async_scheduling = True if options.async_scheduling is None else options.async_scheduling
    ns = types.SimpleNamespace
    return vllm_config_class(use_v2_model_runner)(
        model_config=ns(max_model_len=s.max_model_len),
        parallel_config=ns(decode_context_parallel_size=s.dcp, pipeline_parallel_size=1),
        scheduler_config=ns(
            max_num_batched_tokens=options.resolved_max_num_batched_tokens, async_scheduling=async_scheduling
        ),
        cache_config=ns(mamba_cache_mode=s.mamba_cache_mode),
        device_config=ns(device_type="cuda"),  # the machine kvviz sizes for: an NVIDIA GPU
        attention_config=ns(hisparse_config=None),
    )


class _Logger:
    """logger.info_once as vLLM's logger formats it (msg % args); the lines kept."""

    def __init__(self):
        self.lines: list[str] = []

    def info_once(self, msg, *args, **_):
        self.lines.append(msg % args)


def capacity_functions(logger: _Logger):
    """(get_kv_cache_capacity, update_kv_cache_capacity), vLLM's, wired to each other and to cdiv."""
    env = {"cdiv": _cdiv(), "logger": logger}
    env["get_max_concurrency_for_kv_cache_config"] = vllm_function(
        UTILS, "get_max_concurrency_for_kv_cache_config", env
    )
    env["get_kv_cache_capacity"] = vllm_function(UTILS, "get_kv_cache_capacity", env)
    env["_kv_cache_device_name"] = vllm_function(UTILS, "_kv_cache_device_name", env)
    return env["get_kv_cache_capacity"], vllm_function(UTILS, "update_kv_cache_capacity", env)


# ---------------------------------------------------------------------------------------------
# The tests.
# ---------------------------------------------------------------------------------------------


def _check(name: str, knobs: dict, budget: int) -> None:
    options = Options(**knobs)
    plan = plan_model(load(name), "vllm", options)
    cap = plan.capacity(budget)
    for use_v2 in (False, True):  # the in-flight tokens kvviz counted are vLLM's, whichever runner
        assert (
            vllm_config(plan, options, use_v2_model_runner=use_v2).max_in_flight_tokens
            == plan.scheduling.max_in_flight_tokens
        ), (name, knobs, use_v2)
    worker = worker_kv_cache_config(plan, budget)
    for label, kv_cache_config in (("worker", worker), ("scheduler", scheduler_kv_cache_config(worker))):
        cfg = vllm_config(plan, options)
        logger = _Logger()
        get_kv_cache_capacity, update_kv_cache_capacity = capacity_functions(logger)
        tokens, concurrency = get_kv_cache_capacity(cfg, kv_cache_config)
        where = f"{name} {knobs} at {budget:,} B ({label} config)"
        assert (tokens, concurrency) == (cap.kv_cache_tokens, cap.max_concurrency), where
        update_kv_cache_capacity(cfg, kv_cache_config)
        assert logger.lines == [cap.line], where
        assert (cfg.cache_config.kv_cache_size_tokens, cfg.cache_config.kv_cache_max_concurrency) == (
            cap.kv_cache_tokens,
            cap.max_concurrency,
        ), where


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: f"{b}B")
@pytest.mark.parametrize("name", PRESETS)
def test_vllm_capacity_functions_give_kvviz_capacity(name, budget):
    """vLLM 0.33's get_kv_cache_capacity and update_kv_cache_capacity, run on kvviz's vLLM plan of
    the preset with default knobs, give kvviz's tokens, concurrency and line (worker and scheduler
    configs alike)."""
    _check(name, {}, budget)


@pytest.mark.parametrize("name,knobs", KNOB_CASES, ids=[n for n, _ in KNOB_CASES])
def test_vllm_capacity_functions_follow_the_knobs(name, knobs):
    """The same with knobs that change a request's blocks: in-flight tokens (sliding, chunked),
    max_model_len, block size, the Mamba cache mode ('none' without prefix caching) and DCP over MLA."""
    _check(name, knobs, BUDGETS[0])


def test_each_preset_reaches_the_spec_classes_it_should():
    """The five presets between them run every spec method this file compiles: FullAttentionSpec,
    SlidingWindowSpec, ChunkedLocalAttentionSpec, MambaSpec and MLAAttentionSpec (kvviz's
    spec_class), and MLAAttentionSpec has no max_memory_usage_bytes of its own (FullAttentionSpec's)."""
    seen = {c.spec_class for n in PRESETS for g in plan_model(load(n), "vllm", Options()).groups for c in g.layers}
    assert seen == {
        "FullAttentionSpec",
        "SlidingWindowSpec",
        "ChunkedLocalAttentionSpec",
        "MambaSpec",
        "MLAAttentionSpec",
    }
    assert (
        spec_class("MLAAttentionSpec").max_memory_usage_bytes.__code__.co_firstlineno
        == spec_class("FullAttentionSpec").max_memory_usage_bytes.__code__.co_firstlineno
    )


def test_max_len_keys_are_vllms():
    """kvviz.families.hf.MAX_LEN_KEYS is the possible_keys list of vLLM 0.33's derive_max_model_len_and_key, in
    order (read from the wheel's source, not retyped)."""
    import ast

    from kvviz.families.hf import MAX_LEN_KEYS

    tree = ast.parse((VLLM / "transformers_utils" / "model_arch_config_convertor.py").read_text())
    found = [
        [e.value for e in node.value.elts]
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "possible_keys" for t in node.targets)
    ]
    assert found == [list(MAX_LEN_KEYS)]
