"""A model planned as vLLM 0.33 plans it, or by one of kvviz's counterfactual planners
(docs/model-core.md#planners). One vocabulary for every model:

* `vllm`: what vLLM 0.33 does for this model (get_kv_cache_groups +
  get_kv_cache_config_from_groups; DeepSeek V4: its packed groups, overlay-by-spec);
* `overlay`: vLLM #48993 as published (each group's layers in group order from byte 0);
* `bucketed`: vLLM before #48993 (page-size buckets, small pages padded);
* `packed`: the cross-layer packed blocks (`_get_packed_kv_cache_groups`) with state pages
  unpadded, which other hybrids could opt into (vLLM 0.33 does not do this for them);
* `separate`: one pool per cache kind, no overlay (as SGLang keeps its pools).

A family says which planners apply to its models; nothing here asks which family it is.
"""

from __future__ import annotations

from dataclasses import replace

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import of_type
from kvviz.core.group import KVGroup
from kvviz.core.plan import SEPARATE, Plan
from kvviz.core.spec import CacheSpec, Scheduling
from kvviz.options import Options
from kvviz.vllm.group_names import group_base_name, spec_buckets
from kvviz.vllm.grouping import group_caches, grouping_derivation, kv_cache_groups, packed_groups, pad_small_pages
from kvviz.vllm.pages import PageRules, resolve_pages
from kvviz.vllm.pipeline import state_only_stages, with_stages
from kvviz.vllm.planners import plan_bucketed, plan_overlay, plan_overlay_by_spec
from kvviz.vllm.stage_modules import require_pipelined

PLANNERS = ("vllm", "overlay", "bucketed", "packed", "separate")
# The names the planners had before one vocabulary (kept working where they were documented).
ALIASES = {"overlay-by-spec": "vllm"}


def encoder_input_tokens(max_model_len: int, options: Options, *, encoder_decoder: bool) -> int:
    """vLLM 0.33's `SchedulerConfig.max_num_encoder_input_tokens`: the max_num_batched_tokens it
    resolves (config/scheduler.py __post_init__). An encoder-decoder model (ModelConfig.is_encoder_decoder)
    runs without chunked prefill (SchedulerConfig.__post_init__), so when the knob is not given vLLM
    raises the serve default to max_model_len (engine/arg_utils.py
    _set_default_max_num_seqs_and_batched_tokens: `if not self.enable_chunked_prefill:
    max(max_model_len, default)`; its cap at max_num_seqs (1024) x max_model_len never binds then), and
    refuses a given one below max_model_len (SchedulerConfig.verify_max_model_len)."""
    given = options.max_num_batched_tokens
    if not encoder_decoder:
        return options.resolved_max_num_batched_tokens
    if given is None:
        return max(max_model_len, options.resolved_max_num_batched_tokens)
    require(
        given >= max_model_len,
        f"max_num_batched_tokens={given}: vLLM 0.33 refuses it for an encoder-decoder model (no chunked prefill): "
        f"'max_num_batched_tokens ({given}) is smaller than max_model_len ({max_model_len})' "
        f"(config/scheduler.py SchedulerConfig.verify_max_model_len)",
    )
    return given


def scheduling_for(model, options: Options, mode: str = "none") -> Scheduling:
    """What a request's blocks depend on for this model and these options: max_model_len (the option, else the
    model's), vLLM 0.33's in-flight tokens, the Mamba cache mode, the DCP size and the encoder tokens a
    cross-attention cache holds (`encoder_input_tokens`)."""
    max_model_len = options.max_model_len or model.max_model_len
    return Scheduling(
        max_model_len=max_model_len,
        max_in_flight_tokens=options.max_in_flight_tokens,
        mamba_cache_mode=mode,
        dcp=options.decode_context_parallel_size or 1,
        max_encoder_input_tokens=encoder_input_tokens(
            max_model_len, options, encoder_decoder=model.reader.encoder_decoder(model)
        ),
    )


# DCP reuses the TP ranks (vLLM 0.33 config/parallel.py: "DCP reuses the TP ranks when PCP is
# disabled"), so it is a knob of every model that takes tensor_parallel_size.
DCP = "decode_context_parallel_size"
TP = "tensor_parallel_size"
MLA_SPEC_CLASSES = ("MLAAttentionSpec", "SlidingWindowMLASpec")


def _total_heads(model) -> tuple[int | None, int | None]:
    """(total attention heads, total KV heads) of the model's attention layers, before TP."""
    c = model.config
    heads = getattr(c, "num_attention_heads", None)
    kv = getattr(c, "num_key_value_heads", None) or getattr(c, "num_kv_heads", None)
    return heads, kv


def check_dcp(model, options: Options, caches) -> None:
    """vLLM 0.33's refusals of a decode context-parallel size, in the order vLLM meets them:

    * ParallelConfig (config/parallel.py): 'tp_size={tp} must be divisible by dcp_size={dcp}.';
    * ModelConfig.verify_with_parallel_config (config/model.py), for a model without MLA: TP must
      exceed the total KV heads, dcp <= tp // kv, and the query heads per KV head divisible by dcp;
    * SlidingWindowSpec.max_memory_usage_bytes (v1/kv_cache_interface.py): 'DCP not support
      sliding window.' (every sliding-window spec is dcp_sharded, so any windowed layer refuses;
      DeepSeek V4's SWA and compressor specs are SlidingWindowMLASpec).
    MLA (use_mla) skips the GQA rules: its latent is one head on every rank."""
    dcp = options.decode_context_parallel_size or 1
    if dcp == 1:
        return
    tp = options.tensor_parallel_size or 1
    name = model.name
    require(
        tp % dcp == 0,
        f"{DCP}={dcp}: tensor_parallel_size={tp} must be divisible by it (vLLM 0.33 "
        f"ParallelConfig: 'tp_size={tp} must be divisible by dcp_size={dcp}.')",
    )
    attention = [c for c in caches if not c.kind.is_state]
    require(len(attention) > 0, f"{DCP}={dcp}: {name} has no attention layer whose tokens DCP could split")
    use_mla = any(c.spec_class in MLA_SPEC_CLASSES for c in attention)
    if not use_mla:
        heads, kv = _total_heads(model)
        if not heads or not kv:
            raise KvvizError(f"{DCP}={dcp}: kvviz does not know {name}'s attention / KV head counts")
        require(
            tp > kv,
            f"{DCP}={dcp}: decode context parallelism for GQA/MQA requires tensor_parallel_size ({tp}) "
            f"to be greater than {name}'s total number of KV heads ({kv}) (vLLM 0.33 "
            f"ModelConfig.verify_with_parallel_config)",
        )
        require(
            dcp <= tp // kv,
            f"{DCP}={dcp}: exceeds the maximum supported value ({tp // kv}) for "
            f"tensor_parallel_size ({tp}) and {kv} model KV heads (vLLM 0.33)",
        )
        require(
            (heads // kv) % dcp == 0,
            f"{DCP}={dcp}: {name}'s number of query heads per KV head "
            f"({heads // kv}) must be divisible by it for GQA/MQA (vLLM 0.33)",
        )
    windowed = next((c for c in attention if c.sliding_window is not None), None)
    require(
        windowed is None,
        f"{DCP}={dcp}: {name} has sliding-window layers ({windowed.name if windowed else ''}, "
        f"window {windowed.sliding_window if windowed else ''}); vLLM 0.33 refuses: 'DCP not "
        f"support sliding window.' (SlidingWindowSpec.max_memory_usage_bytes)",
    )


def resolve_planner(model, planner: str | None) -> str:
    """The planner name to run: the family's default for None, an alias resolved (overlay-by-spec: vllm); refused in
    one line unless it is one of the model's planners."""
    family = model.reader
    if planner is None:
        return family.default_planner
    of_type(planner, str, field="planner", give=f"a planner's name: {', '.join(family.planners)} (None: vllm's own)")
    planner = getattr(family, "planner_aliases", {}).get(planner, ALIASES.get(planner, planner))
    if planner not in family.planners:
        raise KvvizError(
            f"planner={planner!r}: not a planner of {model.name} ({family.title}); "
            f"choose one of {', '.join(family.planners)}"
        )
    return planner


def check_knobs(model, options: Options) -> None:
    """A knob that does not apply to the model is refused, naming it and the model's knobs."""
    applies = model.reader.knobs_for(model)
    if TP in applies:  # the deployment's axes (docs/deploy.md): any model that takes tensor_parallel_size
        applies = applies + (DCP, "pipeline_parallel_size", "pp_layer_partition", "kv_offloading_size")
    for name in options.given():
        if name not in applies:
            raise KvvizError(
                f"{name}: does not apply to {model.name} ({model.reader.title}); its knobs are {', '.join(applies)}"
            )


def _layered(caches) -> tuple:
    """(already-paged CacheSpecs, declared caches) of a family's output."""
    specs = tuple(c for c in caches if isinstance(c, CacheSpec))
    return specs, tuple(c for c in caches if not isinstance(c, CacheSpec))


def _shared_pool(model, planner: str, groups: tuple[KVGroup, ...], scheduling, derivation, tokens, layout_fn) -> Plan:
    layout = replace(layout_fn(groups), planner=planner, tokens_per_block=tokens)
    return Plan(
        model.name, planner, (layout,), scheduling, tuple(derivation), family=model.family, describe=model.describe()
    )


def planned_setting(model, options: Options) -> str:
    """What was planned beyond the model, for every header: the KV dtype where the family takes one (the
    option, else the model's, vLLM's 'auto'), the TP size, and every other knob given, in Options' field
    order (e.g. 'KV cache fp8 (model bf16), TP 2, block_size 32')."""
    kv = f"KV cache {options.kv_dtype} (model {model.dtype})" if options.kv_dtype else f"KV cache {model.dtype}"
    # a family whose caches have their own formats (DeepSeek V4: main_format, indexer_format) takes no kv_dtype
    words = ([kv] if "kv_dtype" in model.reader.knobs_for(model) else []) + [f"TP {options.tensor_parallel_size or 1}"]
    for name in options.given():
        if name not in ("kv_dtype", "tensor_parallel_size"):
            value = getattr(options, name)
            words.append(f"{name} {value:,}" if type(value) is int else f"{name} {value}")
    return ", ".join(words)


def plan_knobs(model, options: Options, plan: Plan) -> tuple[tuple[str, object], ...]:
    """Every knob that shaped `plan`, as vLLM 0.33 resolves it when it is not given: the KV cache dtype ('auto':
    the model's), TP / PP / DCP (1), the layers per stage, max_model_len (and where it came from), the attention
    block size, max_num_batched_tokens (defaults.MAX_NUM_BATCHED_TOKENS), async scheduling (on) and the tokens in
    flight it gives, prefix caching (on unless the model is attention-free: EngineArgs.
    _set_default_chunked_prefill_and_prefix_caching_args) and the Mamba cache mode it gives, the CPU offload, then
    every other knob given; `given` lists the knobs set explicitly."""
    s = plan.scheduling
    out: dict[str, object] = {}
    if "kv_dtype" in model.reader.knobs_for(model):
        out["kv_cache_dtype"] = options.kv_dtype or model.dtype
    out["model_dtype"] = model.dtype
    # each kind's row format as planned (DeepSeek V4's backend and formats, an fp8 cache's, a state's dtype)
    out["row_formats"] = {c.kind.label: c.row_format.name for g in plan.groups for c in g.layers}
    out[TP] = options.tensor_parallel_size or 1
    out["pipeline_parallel_size"] = len(plan.stages) or options.pipeline_parallel_size or 1
    out["pp_layer_partition"] = list(options.pp_layer_partition) if options.pp_layer_partition else None
    out[DCP] = s.dcp
    out["max_model_len"] = s.max_model_len
    out["max_model_len_source"] = "given" if options.max_model_len else model.max_model_len_source or "the model's"
    out["block_size"] = plan.tokens_per_block
    out["max_num_batched_tokens"] = options.resolved_max_num_batched_tokens
    out["async_scheduling"] = options.async_scheduling is not False
    out["max_in_flight_tokens"] = s.max_in_flight_tokens
    out["prefix_caching"] = (
        not model.reader.attention_free(model) if options.prefix_caching is None else options.prefix_caching
    )
    out["mamba_cache_mode"] = s.mamba_cache_mode
    out["kv_offloading_size"] = options.kv_offloading_size
    for name in options.given():
        if name not in out and name != "kv_dtype":
            value = getattr(options, name)
            out[name] = list(value) if isinstance(value, tuple) else value
    out["given"] = list(options.given())
    return tuple(out.items())


def plan_model(model, planner: str | None = None, options: Options = Options()) -> Plan:
    """`model` laid out by `planner` (None: the family's default, vLLM's own) with `options`. The Plan carries
    the model and options it was made from, says what was planned (`Plan.setting`, in `Plan.describe`) and
    records every knob that shaped it (`Plan.knobs`, `plan_knobs`)."""
    plan = _plan_model(model, planner, options)
    setting = planned_setting(model, options)
    plan = replace(
        plan, describe=f"{plan.describe}; planned: {setting}", setting=setting, source=model, options=options
    )
    return replace(plan, knobs=plan_knobs(model, options, plan))


def _plan_model(model, planner: str | None, options: Options) -> Plan:
    check_knobs(model, options)
    planner = resolve_planner(model, planner)
    family = model.reader
    caches = family.caches(model, options)
    require(len(caches) > 0, f"{model.name}: registers no KV caches")
    specs, declared = _layered(caches)
    if declared and specs:
        raise KvvizError(f"{model.name}: a family may not mix paged and declared caches")
    # EngineArgs._set_default_chunked_prefill_and_prefix_caching_args: on unless the model is attention-free
    prefix = not family.attention_free(model) if options.prefix_caching is None else options.prefix_caching
    rules = PageRules(
        block_size=options.block_size, prefix_caching=prefix, max_model_len=options.max_model_len or model.max_model_len
    )
    tokens: int | None  # the attention block size (None: a paged family without full attention)
    if declared:
        pages = resolve_pages(declared, rules, pad_states=planner == "vllm", raise_block=planner != SEPARATE)
        caches, mode, head, tokens = pages.caches, pages.mamba_cache_mode, pages.derivation, pages.block_size
    else:
        caches, mode, head = specs, "none", ()
        tokens = max((c.tokens_per_block for c in caches if c.is_full_attention), default=None)
    check_dcp(model, options, caches)
    scheduling = scheduling_for(model, options, mode)
    if planner == "vllm":  # get_kv_cache_groups for every model (DeepSeek V4: its packed path)
        staged = options.pipeline_parallel_size not in (None, 1) or options.pp_layer_partition is not None
        require_pipelined(model, options.pipeline_parallel_size)
        if staged and declared:  # a stage of states only registers them unaligned (docs/deploy.md#pipeline-parallel)
            caches, notes = state_only_stages(declared, caches, rules, model, options)
            head = head + notes
        groups = kv_cache_groups(caches, block_outermost=family.block_outermost)
        derivation = head + grouping_derivation(groups, caches) if declared else head
        plan = _shared_pool(model, planner, groups, scheduling, derivation, tokens, plan_overlay_by_spec)
        return with_stages(plan, model, options) if staged else plan  # docs/deploy.md#pipeline-parallel
    require(
        options.pipeline_parallel_size in (None, 1) and options.pp_layer_partition is None,
        f"pipeline_parallel_size: kvviz plans pipeline stages with the vllm planner only, not {planner}",
    )
    if planner == "overlay":
        return _shared_pool(model, planner, group_caches(caches), scheduling, head, tokens, plan_overlay)
    if planner == "bucketed":
        return _shared_pool(
            model, planner, group_caches(pad_small_pages(caches)), scheduling, head, tokens, plan_bucketed
        )
    if planner == "packed":
        if len({c.page_bytes for c in caches}) == 1:
            groups = kv_cache_groups(caches)
            note = (
                "packed: every page is already one size, so vLLM's packed path does not apply and the layout is vLLM's"
            )
        else:
            groups = packed_groups(caches)
            note = (
                f"packed (not what vLLM 0.33 does for this model): state pages unpadded, {len(groups)} groups "
                f"of {', '.join(str(len(g.layers)) for g in groups)} layers packed from byte 0 "
                f"(_get_packed_kv_cache_groups)"
            )
        return _shared_pool(model, planner, groups, scheduling, head + (note,), tokens, plan_overlay_by_spec)
    return _separate(model, caches, scheduling, head)


def _separate(model, caches, scheduling, head) -> Plan:
    """One pool per spec bucket (full, each sliding window, each chunk size, each state), unpadded."""
    pools = []
    for bucket in spec_buckets(caches):
        group = KVGroup(name=group_base_name(bucket[0]), layers=tuple(bucket))
        tokens = None if bucket[0].kind.is_state else bucket[0].tokens_per_block
        pools.append(replace(plan_overlay_by_spec((group,)), planner=SEPARATE, tokens_per_block=tokens))
    names = [p.groups[0].name for p in pools]
    if len(set(names)) != len(names):  # two pools of one base name: number them
        pools = [
            replace(p, groups=(KVGroup(name=f"{p.groups[0].name}-{i}", layers=p.groups[0].layers),))
            for i, p in enumerate(pools)
        ]
    derivation = head + (
        "separate pools: state pages unpadded, one pool per cache kind; the budget is split in "
        "proportion to one request's need from each pool",
    )
    return Plan(
        model.name, SEPARATE, tuple(pools), scheduling, derivation, family=model.family, describe=model.describe()
    )
