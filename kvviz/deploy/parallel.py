"""Data parallel and attention data parallel as vLLM 0.33 runs them (docs/deploy.md#data-parallel).

* DP replicas multiply engines, not blocks. `--data-parallel-size N` starts N engine cores
  (v1/engine/core.py `EngineCoreProc.run_engine_core`: a dense model's DP ranks "are completely independent, so
  treat like DP=1"; a MoE model's run `DPEngineCoreProc`, which keeps their forward steps in step, not their
  caches). Each engine sizes its own pool in `EngineCore._initialize_kv_caches` (its own workers'
  `determine_available_memory`, then `get_kv_cache_configs`; no minimum across DP ranks), so every replica's
  capacity line is the DP 1 plan's, and the deployment holds N of them: `data_parallel`.
* Attention DP for MLA (`--data-parallel-size N --enable-expert-parallel`, TP 1 a replica): each GPU's attention
  serves its own requests; the routed experts are split over all N GPUs (`FusedMoEParallelConfig.make`:
  `flatten_tp_across_dp_and_pcp`, with or without EP). Under TP N the MLA latent is not sharded:
  `ModelConfig.get_num_kv_heads` returns 1 when `use_mla`, and `MLAAttentionSpec` keeps the whole
  kv_lora_rank + rope row on every rank, so the N ranks of one engine hold N copies of every token. DCP N
  (`decode_context_parallel_size`, on the TP ranks) spreads each request's tokens over them instead
  (`FullAttentionSpec.max_memory_usage_bytes`: cdiv(cdiv(L, dcp), block)). `attention_layouts` plans the three
  on the same GPUs at the same per-GPU budget and counts what each GPU holds (vllm-project/vllm#51454).
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import instance, short_repr
from kvviz.core.plan import Plan
from kvviz.options import Options

DP = "data_parallel_size"


def _dp_size(value, field: str = DP) -> int:
    require(type(value) is int and 1 <= value <= 1 << 16, f"{field}={value!r}: must be a positive integer")
    return value


def _has_experts(model) -> bool | None:
    """Whether the model's config.json names routed experts (the keys kvviz.deploy.weights reads); None when kvviz
    does not hold its config.json (a model loaded from a path)."""
    from kvviz.deploy.weights import raw_config_of

    raw, _ = raw_config_of(model, None, None) if model is not None else (None, "")
    if not isinstance(raw, dict):
        return None
    text: dict = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw
    return any(bool(text.get(k)) for k in ("n_routed_experts", "num_experts", "num_local_experts"))


@dataclasses.dataclass(frozen=True)
class DataParallel:
    """`data_parallel_size` engines, each the plan's (its TP x PP GPUs, its own pool): one replica's blocks and
    capacity line, and the deployment's total (replicas x one replica's)."""

    model: str
    data_parallel_size: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    expert_parallel: bool
    moe: bool | None  # routed experts in its config.json (None: not known)
    budget_bytes: int
    num_blocks: int  # a replica's (every GPU of it keeps this many)
    max_model_len: int
    max_concurrency: float  # a replica's
    kv_cache_tokens: int  # a replica's capacity line
    capacity_line: str

    @property
    def gpus(self) -> int:
        """GPUs of the deployment: DP x TP x PP (ParallelConfig.world_size_across_dp)."""
        return self.data_parallel_size * self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def total_concurrency(self) -> float:
        """Requests of max_model_len held at once over every replica."""
        return self.data_parallel_size * self.max_concurrency

    @property
    def total_tokens(self) -> int:
        """Tokens of the replicas' capacity lines added up (each replica logs its own line)."""
        return self.data_parallel_size * self.kv_cache_tokens

    def lines(self) -> list[str]:
        """What the CLI prints: the engines, one replica's pool and line, the total."""
        ep = ""
        if self.expert_parallel:
            ep = (
                "; --enable-expert-parallel: the routed experts split over all "
                f"{self.data_parallel_size * self.tensor_parallel_size} GPUs of a stage, whole experts each "
                "(FusedMoEParallelConfig.make); the KV is the same"
                if self.moe is not False
                else "; --enable-expert-parallel: the model has no routed experts, nothing changes"
            )
        return [
            f"data parallel {self.data_parallel_size}: {self.data_parallel_size} engines of TP "
            f"{self.tensor_parallel_size} x PP {self.pipeline_parallel_size} = {self.gpus:,} GPUs, each engine its "
            f"own pool (EngineCore._initialize_kv_caches){ep}",
            f"each replica: {self.num_blocks:,} blocks, {self.capacity_line}",
            f"all {self.data_parallel_size} replicas: {self.total_tokens:,} tokens, {self.total_concurrency:.2f} "
            f"requests of {self.max_model_len:,} tokens at once",
        ]

    def to_json(self) -> dict:
        """The replicas as a JSON object."""
        return {
            "data_parallel_size": self.data_parallel_size,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "enable_expert_parallel": self.expert_parallel,
            "gpus": self.gpus,
            "budget_bytes_per_gpu": self.budget_bytes,
            "per_replica": {
                "num_blocks": self.num_blocks,
                "kv_cache_tokens": self.kv_cache_tokens,
                "max_concurrency": self.max_concurrency,
                "capacity_line": self.capacity_line,
            },
            "total": {"kv_cache_tokens": self.total_tokens, "max_concurrency": self.total_concurrency},
        }


def data_parallel(plan, budget_bytes: int, data_parallel_size: int, *, enable_expert_parallel: bool = False):
    """`data_parallel_size` replicas of `plan` (a `kvviz.plan` result: one engine's TP x PP) at `budget_bytes` of KV
    memory on every GPU: each replica's own pool and capacity line, and their total (docs/deploy.md#data-parallel)."""
    instance(Plan, what="a kvviz.plan(...) result").check(plan, field="plan")
    dp = _dp_size(data_parallel_size)
    require(isinstance(enable_expert_parallel, bool), "enable_expert_parallel: must be True or False")
    options = plan.options if plan.options is not None else Options()
    cap = plan.capacity(budget_bytes)
    return DataParallel(
        model=plan.model,
        data_parallel_size=dp,
        tensor_parallel_size=options.tensor_parallel_size or 1,
        pipeline_parallel_size=options.pipeline_parallel_size or 1,
        expert_parallel=enable_expert_parallel,
        moe=_has_experts(plan.source),
        budget_bytes=cap.budget_bytes,
        num_blocks=cap.num_blocks,
        max_model_len=cap.max_model_len,
        max_concurrency=cap.max_concurrency,
        kv_cache_tokens=cap.kv_cache_tokens,
        capacity_line=cap.line,
    )


# ---- TP vs attention DP vs DCP on the same GPUs -------------------------------------------------------------

LAYOUTS = ("tp", "attention_dp", "dcp")
# kvviz.deploy.kv_budget's terms a layout's budget takes (the weights are kvviz's estimate, split per layout).
GPU_TERMS = ("gpu", "gpu_memory_gib", "gpu_memory_utilization", "activation_bytes")


@dataclasses.dataclass(frozen=True)
class Layout:
    """One way to spread attention over `gpus` GPUs: its engines, one GPU's page, blocks and the engine's capacity
    line; or `refused` (vLLM's reason, in one line)."""

    name: str  # 'tp', 'attention_dp', 'dcp'
    label: str  # 'TP 8', 'attention DP 8 (TP 1 each)', 'TP 8 + DCP 8'
    gpus: int
    budget_bytes: int = 0  # KV memory on one GPU
    budget_source: str = ""  # how it was reached from a GPU ("": given)
    engines: int = 0
    bytes_per_block: int = 0  # one GPU's block stride
    tokens_per_block: int = 0
    num_blocks: int = 0  # one GPU's
    max_concurrency: float = 0.0  # one engine's
    kv_cache_tokens: int = 0  # one engine's capacity line
    capacity_line: str = ""
    refused: str = ""
    startup_refusal: str = ""  # vLLM's start-up error at this budget (one request of max_model_len does not fit)

    @property
    def total_concurrency(self) -> float:
        """Requests of max_model_len held at once over all the GPUs (engines x one engine's)."""
        return self.engines * self.max_concurrency

    @property
    def per_gpu_concurrency(self) -> float:
        """Requests of max_model_len a GPU holds, its share of the total."""
        return self.total_concurrency / self.gpus

    @property
    def total_tokens(self) -> int:
        """The engines' capacity lines added up."""
        return self.engines * self.kv_cache_tokens

    def to_json(self) -> dict:
        """The layout as a JSON object (refused: its name and the reason only)."""
        if self.refused:
            return {"layout": self.name, "label": self.label, "refused": self.refused}
        return {
            "layout": self.name,
            "label": self.label,
            "gpus": self.gpus,
            "budget_bytes_per_gpu": self.budget_bytes,
            "budget_source": self.budget_source,
            "engines": self.engines,
            "bytes_per_block": self.bytes_per_block,
            "tokens_per_block": self.tokens_per_block,
            "num_blocks_per_gpu": self.num_blocks,
            "engine_capacity_line": self.capacity_line,
            "total_kv_cache_tokens": self.total_tokens,
            "total_concurrency": self.total_concurrency,
            "per_gpu_concurrency": self.per_gpu_concurrency,
        } | ({"startup_refusal": self.startup_refusal} if self.startup_refusal else {})


@dataclasses.dataclass(frozen=True)
class AttentionLayouts:
    """TP N, attention DP N and TP N + DCP N side by side on N GPUs at one per-GPU KV budget."""

    model: str
    gpus: int
    max_model_len: int
    layouts: tuple[Layout, ...]
    replicated: bool  # one rank's pages are TP 1's: every TP rank holds the whole KV (MLA: get_num_kv_heads = 1)

    def layout(self, name: str) -> Layout:
        """The layout named 'tp', 'attention_dp' or 'dcp'."""
        return next(x for x in self.layouts if x.name == name)

    def ratio(self, name: str) -> float | None:
        """The layout's requests held over TP N's (None where either is refused)."""
        tp, other = self.layout("tp"), self.layout(name)
        if tp.refused or other.refused:
            return None
        return other.total_concurrency / tp.total_concurrency

    def lines(self) -> list[str]:
        """The comparison as the CLI prints it: one line per layout, then why."""
        budgets = {x.budget_bytes for x in self.layouts}
        each = f"{budgets.pop():,} B of KV on each" if len(budgets) == 1 else "each layout's KV budget a GPU"
        out = [f"attention on {self.gpus} GPUs, {each}, requests of {self.max_model_len:,} tokens:"]
        for x in self.layouts:
            if x.refused:
                out.append(f"  {x.label}: refused: {x.refused}")
                continue
            r = self.ratio(x.name)
            out.append(
                f"  {x.label}: {x.engines} engine{'s' if x.engines > 1 else ''}, {x.num_blocks:,} blocks of "
                f"{x.bytes_per_block:,} B a GPU; each engine: {x.capacity_line}; in all {x.total_tokens:,} tokens, "
                f"{x.total_concurrency:.2f} requests ({x.per_gpu_concurrency:.2f} a GPU)"
                + (f", {r:.2f}x TP {self.gpus}'s" if r is not None and x.name != "tp" else "")
                + (f" [budget {x.budget_bytes:,} B: {x.budget_source}]" if x.budget_source else "")
                + (f"; vLLM 0.33 refuses to start it: {x.startup_refusal}" if x.startup_refusal else "")
            )
        if self.replicated:
            out.append(
                f"  why: one KV head (MLA's latent: ModelConfig.get_num_kv_heads returns 1), whole on every TP rank: "
                f"under TP {self.gpus} each of the {self.gpus} GPUs holds a copy of every token; attention DP gives "
                f"each GPU its own requests, DCP gives each GPU 1/{self.gpus} of every request's tokens"
            )
        return out

    def to_json(self) -> dict:
        """The comparison as a JSON object."""
        return {
            "gpus": self.gpus,
            "max_model_len": self.max_model_len,
            "replicated_under_tp": self.replicated,
            "layouts": [x.to_json() for x in self.layouts],
            "ratio_over_tp": {n: self.ratio(n) for n in LAYOUTS if n != "tp"},
        }


def _layout(model, options: Options, name: str, label: str, gpus: int, engines: int, budget) -> Layout:
    from kvviz.api import make_plan
    from kvviz.vllm.pipeline import startup_refusal
    from kvviz.vllm.plan import check_knobs

    budget, where = budget
    if budget <= 0:
        return Layout(name, label, gpus, refused=where)
    try:
        check_knobs(model, options)
        plan = make_plan(model, "vllm", options)
        cap = plan.capacity(budget)
    except KvvizError as e:
        return Layout(name, label, gpus, budget_bytes=budget, refused=str(e))
    return Layout(
        name,
        label,
        gpus,
        budget_bytes=budget,
        budget_source=where,
        engines=engines,
        bytes_per_block=cap.bytes_per_block,
        tokens_per_block=cap.tokens_per_block or 0,
        num_blocks=cap.num_blocks,
        max_concurrency=cap.max_concurrency,
        kv_cache_tokens=cap.kv_cache_tokens,
        capacity_line=cap.line,
        startup_refusal=startup_refusal(plan, budget) or "",  # get_kv_cache_configs -> _check_enough_kv_cache_memory
    )


def layout_budgets(model, gpus: int, **gpu_terms) -> dict[str, tuple[int, str]]:
    """Each layout's KV budget on one GPU from a GPU (kvviz.deploy.kv_budget's `gpu_terms`: gpu=, gpu_memory_gib=,
    gpu_memory_utilization=, activation_bytes=), with the weights each GPU holds: TP and DCP `gpus` one TP rank's
    (kvviz.deploy.params: sharded layers / TP, norms, routers and MLA's latent down-projections whole); attention
    DP (TP 1) everything but the routed experts whole, the routed experts whole over the `gpus` ranks
    (FusedMoEParallelConfig.make, determine_expert_map). The weights are kvviz's estimate from config.json:
    (bytes, where) a layout, or (0, why) where nothing is left for the KV cache (vLLM's start-up refusal)."""
    from kvviz.deploy.budget import kv_budget, weights_term
    from kvviz.deploy.stage_weights import stage_weights
    from kvviz.deploy.weights import estimate_part_bytes, raw_config_of

    whole = weights_term(model, 1, None, None, None, None).value  # the whole model's estimate (TP 1)
    raw, _ = raw_config_of(model, None, None)
    # the routed experts at the checkpoint's own bytes a parameter (FP8 DeepSeek-V3: 1 B and its scales)
    routed = int(round(estimate_part_bytes(model, raw)[0].get("experts", 0))) if isinstance(raw, dict) else 0
    dp_weights = (  # one GPU of attention DP: TP 1, the routed experts whole over the `gpus` EP ranks
        stage_weights(model, raw, data_parallel_size=gpus, enable_expert_parallel=True).stages[0].bytes_per_gpu
        if routed
        else whole
    )

    def budget(tp: int, weights: int, where: str) -> tuple[int, str]:
        try:
            return kv_budget(
                model, tensor_parallel_size=tp, weights_bytes=weights * tp, **gpu_terms
            ).available_bytes, where
        except KvvizError as e:
            return 0, str(e)

    tp_weights = weights_term(model, gpus, None, None, None, None).value  # one TP rank's shapes
    tp = budget(gpus, tp_weights, f"weights a GPU {tp_weights:,} B (one TP {gpus} rank's), an estimate")
    dp = budget(
        1,
        dp_weights,
        f"weights a GPU {dp_weights:,} B (all but the routed experts' {routed:,} B whole, those split whole over "
        f"{gpus} ranks: determine_expert_map), an estimate",
    )
    return {"tp": tp, "dcp": tp, "attention_dp": dp}


def attention_layouts(
    model, gpus: int, budget_bytes: int | None = None, options: Options = Options(), **gpu_terms
) -> AttentionLayouts:
    """TP `gpus` (one engine), attention DP `gpus` (that many engines of TP 1) and TP `gpus` + DCP `gpus` (one
    engine) for `model` (a `Model`) with `budget_bytes` of KV memory on every GPU, or each layout's budget from a
    GPU (`gpu_terms`: gpu=, gpu_memory_utilization=, activation_bytes=; `layout_budgets`), and the other knobs
    `options` (its TP, DCP and offload are replaced; pipeline parallel is refused: this compares one stage's
    GPUs). A layout vLLM refuses is kept with its reason."""
    from kvviz.api import model_of

    model = model_of(model)
    instance(Options, what="a kvviz.Options record").check(options, field="options")
    n = _dp_size(gpus, "gpus")
    extra = sorted(set(gpu_terms) - set(GPU_TERMS))
    require(not extra, f"{extra[0] if extra else ''}: not a GPU term here; give {', '.join(GPU_TERMS)}")
    if gpu_terms:
        require(budget_bytes is None, "budget_bytes: give a budget or a GPU, not both")
        budgets = layout_budgets(model, n, **gpu_terms)
    else:
        require(
            type(budget_bytes) is int and budget_bytes > 0,
            f"budget_bytes={short_repr(budget_bytes)}: must be a positive integer",
        )
        budgets = {name: (int(budget_bytes or 0), "") for name in LAYOUTS}
    require(
        (options.pipeline_parallel_size or 1) == 1,
        "pipeline_parallel_size: the attention layouts compare the GPUs of one stage; leave it out",
    )
    base = options.with_(tensor_parallel_size=None, decode_context_parallel_size=None, kv_offloading_size=None)
    rows = (
        _layout(model, base.with_(tensor_parallel_size=n), "tp", f"TP {n}", n, 1, budgets["tp"]),
        _layout(model, base, "attention_dp", f"attention DP {n} (TP 1 each)", n, n, budgets["attention_dp"]),
        _layout(
            model,
            base.with_(tensor_parallel_size=n, decode_context_parallel_size=n),
            "dcp",
            f"TP {n} + DCP {n}",
            n,
            1,
            budgets["dcp"],
        ),
    )
    from kvviz.api import make_plan

    one = make_plan(model, "vllm", base)  # TP 1: a model that does not plan at all is refused here
    tp = rows[0]
    replicated = not tp.refused and (tp.bytes_per_block, tp.tokens_per_block) == (
        one.layout.block_stride,
        one.tokens_per_block or 0,
    )
    length = one.max_model_len
    return AttentionLayouts(model.name, n, length, rows, replicated)
