"""Which engine plans a model: `plan_engine` dispatches to vLLM 0.33 (`kvviz.vllm.plan`), SGLang 0.5.23
(`kvviz.engines.sglang`) or TensorRT-LLM (`kvviz.engines.trtllm`); `compare_rows` puts them side by side."""

from __future__ import annotations

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import of_type, short_repr
from kvviz.engines.common import (
    ENGINES,
    VLLM_MAX_NUM_SEQS,
    EngineKnobs,
    EnginePlan,
    EnginePool,
    EngineRow,
    check_budget,
    check_call,
    check_engines,
)
from kvviz.options import Options


def plan_vllm(model, options: Options = Options(), *, kv_budget_bytes: int) -> EnginePlan:
    """vLLM 0.33's plan (kvviz.vllm.plan.plan_model, planner 'vllm') in the engines' shape:
    one pool of blocks, `GPU KV cache size` tokens, whole requests of max_model_len."""
    from kvviz.vllm.plan import plan_model

    check_call(model, options)
    check_budget(kv_budget_bytes)
    plan = plan_model(model, "vllm", options)
    cap = plan.capacity(kv_budget_bytes)
    pools = tuple(
        EnginePool(
            name="+".join(g.name for g in lay.groups),
            holds=f"{len(lay.groups)} KV cache groups overlaid, {sum(len(g.layers) for g in lay.groups)} layers",
            unit=f"block of {lay.tokens_per_block} tokens",
            bytes_per_unit=lay.block_stride,
            units=cap.num_blocks,
            layers=sum(len(g.layers) for g in lay.groups),
            arrangement="blocks",
        )
        for lay in plan.pools
    )
    return EnginePlan(
        engine="vllm",
        version="0.33",
        model=model.name,
        kv_budget_bytes=kv_budget_bytes,
        pools=pools,
        token_capacity=cap.kv_cache_tokens,
        token_capacity_name="GPU KV cache size (tokens)",
        request_bound=min(cap.requests_fit, VLLM_MAX_NUM_SEQS),
        request_bound_rule=f"min(max_num_seqs {VLLM_MAX_NUM_SEQS}, whole requests of max_model_len "
        f"(num_blocks // blocks per request))",
        max_model_len=cap.max_model_len,
        log_lines=(cap.line,),
        derivation=tuple(plan.derivation),
        token_capacity_counts="int(max concurrency x max_model_len): whole requests' worth of context, "
        "every group's blocks per request counted (get_kv_cache_capacity)",
    )


def plan_engine(
    engine: str, model, options: Options = Options(), *, kv_budget_bytes: int, knobs: EngineKnobs = EngineKnobs()
) -> EnginePlan:
    """`engine` ('vllm', 'sglang', 'trtllm') planning `model` with `options` at one budget;
    `knobs` reach only the engine they belong to."""
    require(
        engine in ENGINES if isinstance(engine, str) else False,
        f"engine={short_repr(engine)}: unknown; choose one of {', '.join(ENGINES)}",
    )
    check_call(model, options)
    of_type(knobs, EngineKnobs, field="knobs", give="a kvviz.engines.EngineKnobs record")
    if engine == "vllm":
        return plan_vllm(model, options, kv_budget_bytes=kv_budget_bytes)
    if engine == "sglang":
        if knobs.unified_memory:
            from kvviz.engines.sglang.unified import plan_sglang_unified

            return plan_sglang_unified(model, options, kv_budget_bytes=kv_budget_bytes)
        from kvviz.engines.sglang.plan import plan_sglang

        return plan_sglang(model, options, kv_budget_bytes=kv_budget_bytes)
    if engine == "trtllm":
        from kvviz.engines.trtllm.constants import MAX_BATCH_SIZE
        from kvviz.engines.trtllm.plan import plan_trtllm

        return plan_trtllm(
            model,
            options,
            kv_budget_bytes=kv_budget_bytes,
            max_attention_window=knobs.max_attention_window,
            window_size_shares=knobs.window_size_shares,
            use_py_mamba=knobs.use_py_mamba,
            max_batch_size=knobs.max_batch_size or MAX_BATCH_SIZE,
        )
    raise KvvizError(f"engine={engine!r}: unknown; choose one of {', '.join(ENGINES)}")


def compare_engines(
    model, engines=ENGINES, options: Options = Options(), *, kv_budget_bytes: int, knobs: EngineKnobs = EngineKnobs()
) -> tuple[EnginePlan, ...]:
    """The same declared caches and budget through each engine, in the order given (an engine
    that cannot plan the model raises its one-line error)."""
    engines = check_engines(engines)
    return tuple(plan_engine(e, model, options, kv_budget_bytes=kv_budget_bytes, knobs=knobs) for e in engines)


def compare_rows(
    model,
    engines=ENGINES,
    options: Options = Options(),
    *,
    kv_budget_bytes: int,
    knobs: EngineKnobs = EngineKnobs(),
    budgets: dict[str, int] | None = None,
) -> tuple[EngineRow, ...]:
    """As `compare_engines`, but an engine that has no plan for the model gives a row with its
    one-line reason instead of stopping the comparison (no numbers are made up for it).
    `budgets` (engine -> bytes, kvviz.engines.budget on the --gpu path) overrides the one budget."""
    engines = check_engines(engines)
    check_call(model, options)
    of_type(knobs, EngineKnobs, field="knobs", give="a kvviz.engines.EngineKnobs record")
    check_budget(kv_budget_bytes)
    of_type(budgets, (dict, type(None)), field="budgets", give="a dict of engine -> bytes, or None")
    for b in (budgets or {}).values():
        check_budget(b)
    rows = []
    for e in engines:
        budget = (budgets or {}).get(e, kv_budget_bytes)
        try:
            rows.append(EngineRow(e, plan_engine(e, model, options, kv_budget_bytes=budget, knobs=knobs)))
        except KvvizError as err:
            rows.append(EngineRow(e, None, str(err)))
    return tuple(rows)
