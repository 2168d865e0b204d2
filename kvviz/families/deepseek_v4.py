"""DeepSeek V4: its config, its knobs and every KV cache each layer registers
(docs/caches.md#the-caches-a-layer-registers), one family among the others.

Caches come out in vLLM's registration order: per layer, sliding-window KV (C), indexer K (B),
main compressed KV (A), indexer compressor state (E), main compressor state (D). The B-before-A
and E-before-D order was read off vLLM 0.33; C first makes the sliding-window groups the
first seen, as vLLM 0.33 lists them.
"""

from __future__ import annotations

import dataclasses
import types
from typing import ClassVar

from kvviz.base import formats
from kvviz.base.defaults import BLOCK_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_TOKENS_PER_BLOCK, bounded_int
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec
from kvviz.families.deepseek_v4_config import DEEPSEEK_V4_MODEL_TYPE, ModelConfig, config_from_dict, with_layer_mix
from kvviz.families.hf import derive_max_model_len
from kvviz.families.record import Record
from kvviz.families.registry import Family, Model, model_method, register
from kvviz.options import Options


# Backend page alignment (a kernel requirement, docs/caches.md#backend-alignment): FlashMLA sparse wants
# every page a multiple of 576 B (one fp8_ds_mla payload row); FlashInfer wants the main KV and
# indexer K pages (the ones its kernels read by page) a multiple of 512 B and leaves states alone.
@dataclasses.dataclass(frozen=True, kw_only=True)
class Backend:
    """An attention backend's page rule for DeepSeek V4: its name, the alignment its kernels want of the pages of
    `aligned_kinds`, and its default main-cache format (docs/caches.md#backend-alignment)."""

    name: str
    alignment: int
    aligned_kinds: frozenset[CacheKind]
    default_main_format: str


_ALL_DSV4 = frozenset(
    {
        CacheKind.MAIN_C4,
        CacheKind.MAIN_C128,
        CacheKind.INDEXER_K,
        CacheKind.SWA_KV,
        CacheKind.STATE_C4,
        CacheKind.STATE_C128,
        CacheKind.INDEXER_STATE,
    }
)
BACKENDS = {
    "flashmla": Backend(name="flashmla", alignment=576, aligned_kinds=_ALL_DSV4, default_main_format="fp8_ds_mla"),
    "flashinfer": Backend(
        name="flashinfer",
        alignment=512,
        aligned_kinds=frozenset({CacheKind.MAIN_C4, CacheKind.MAIN_C128, CacheKind.INDEXER_K}),
        default_main_format="fp8",
    ),
    "none": Backend(name="none", alignment=1, aligned_kinds=frozenset(), default_main_format="fp8_ds_mla"),
}

# Compressor geometry per compression ratio, as DeepSeek V4's compressor registers it:
# coff = overlap factor (c4 windows overlap twice), state rows (tokens) kept per block.
# The state window (the grouping key) is coff x ratio tokens.
COMPRESSOR = {4: {"coff": 2, "state_tokens": 4}, 128: {"coff": 1, "state_tokens": 8}}
SWA_TOKENS_PER_BLOCK = 64  # the sliding-window KV cache has its own fixed block of 64 tokens


@dataclasses.dataclass(frozen=True, kw_only=True)
class CacheOptions:
    """The knobs a deployment chooses. `main_format=None` takes the backend's default."""

    backend: str = "flashmla"
    main_format: str | None = None
    indexer_format: str = "mxfp4"
    block_size: int = BLOCK_SIZE
    mtp: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise KvvizError(f"backend={self.backend!r}: unknown; choose one of {', '.join(BACKENDS)}")
        if self.resolved_main_format not in formats.MAIN_FORMATS:
            raise KvvizError(
                f"main_format={self.main_format!r}: unknown; choose one of {', '.join(formats.MAIN_FORMATS)}"
            )
        if self.indexer_format not in formats.INDEXER_FORMATS:
            raise KvvizError(
                f"indexer_format={self.indexer_format!r}: unknown; choose one of {', '.join(formats.INDEXER_FORMATS)}"
            )
        bounded_int(self.block_size, field="block_size", low=1, high=MAX_TOKENS_PER_BLOCK)  # the CLI's bound
        require(type(self.mtp) is bool, f"mtp={self.mtp!r}: must be True or False")

    @property
    def resolved_main_format(self) -> str:
        """The main-cache row format: the one given, else the backend's default."""
        return self.main_format or BACKENDS[self.backend].default_main_format


def _aligned(kind: CacheKind, backend: Backend) -> int:
    return backend.alignment if kind in backend.aligned_kinds else 1


def _layer_templates(config: ModelConfig, layer: int, options: CacheOptions) -> tuple[tuple, ...]:
    """What a layer of `layer`'s compress ratio registers, in vLLM's registration order (C, B, A,
    E, D): one (name suffix, kind, row format, rows, tokens per block, sliding window, alignment)
    per cache. Everything but the layer name depends on the ratio alone, so model_caches derives
    it once per ratio and only names each layer's caches."""
    backend = BACKENDS[options.backend]
    main = formats.main_row(options.resolved_main_format, config.head_dim, config.qk_rope_head_dim)
    ratio = config.ratio(layer)

    def template(suffix, kind, row, rows, tokens, window):
        return (suffix, kind, row, rows, tokens, window, _aligned(kind, backend))

    out = [
        template(
            ".swa_cache", CacheKind.SWA_KV, main, SWA_TOKENS_PER_BLOCK, SWA_TOKENS_PER_BLOCK, config.sliding_window
        )
    ]
    if ratio in (0, 1):
        return tuple(out)
    if ratio not in COMPRESSOR:
        raise KvvizError(
            f"compress_ratios[{layer}]={ratio}: kvviz knows ratios 0, 1, {', '.join(map(str, COMPRESSOR))}"
        )
    if options.block_size % ratio:
        raise KvvizError(
            f"block_size={options.block_size}: must be a multiple of every compress ratio (layer {layer} has {ratio})"
        )
    geo = COMPRESSOR[ratio]
    state_window = geo["coff"] * ratio
    state_tokens = geo["state_tokens"]
    if ratio == 4:
        index = formats.indexer_row(options.indexer_format, config.index_head_dim)
        out.append(
            template(
                ".indexer.k_cache", CacheKind.INDEXER_K, index, options.block_size // ratio, options.block_size, None
            )
        )
    main_kind = CacheKind.MAIN_C4 if ratio == 4 else CacheKind.MAIN_C128
    out.append(template("", main_kind, main, options.block_size // ratio, options.block_size, None))
    if ratio == 4:
        # K and V halves of the overlapping windows of the indexer's own compressor.
        index_state = formats.state_row(2 * geo["coff"] * config.index_head_dim)
        out.append(
            template(
                ".indexer.compressor.state_cache",
                CacheKind.INDEXER_STATE,
                index_state,
                state_tokens,
                state_tokens,
                state_window,
            )
        )
    state_kind = CacheKind.STATE_C4 if ratio == 4 else CacheKind.STATE_C128
    main_state = formats.state_row(2 * geo["coff"] * config.head_dim)
    out.append(template(".compressor.state_cache", state_kind, main_state, state_tokens, state_tokens, state_window))
    return tuple(out)


def _named_caches(layer: int, templates: tuple[tuple, ...], out: list) -> None:
    """Append one CacheSpec per template to `out`, named model.layers.{layer}.attn{suffix}."""
    prefix = f"model.layers.{layer}.attn"
    for suffix, kind, row, rows, tokens, window, alignment in templates:
        out.append(
            CacheSpec(
                name=prefix + suffix,
                kind=kind,
                layer=layer,
                row_format=row,
                rows=rows,
                tokens_per_block=tokens,
                sliding_window=window,
                alignment=alignment,
            )
        )


def layer_caches(config: ModelConfig, layer: int, options: CacheOptions) -> list[CacheSpec]:
    """The caches one layer registers, in vLLM's registration order (C, B, A, E, D)."""
    out: list[CacheSpec] = []
    _named_caches(layer, _layer_templates(config, layer, options), out)
    return out


def model_caches(config: ModelConfig, options: CacheOptions = CacheOptions()) -> tuple[CacheSpec, ...]:
    """Every cache of every layer (MTP layers too when options.mtp), in registration order.

    The caches' shape is derived once per compress ratio (the MTP slots count as ratio 1), so a
    model of N layers costs N names and N x caches-per-layer records, nothing more per layer."""
    layers = config.num_layers_with_mtp if options.mtp else config.num_hidden_layers
    by_ratio: dict[int, tuple[tuple, ...]] = {}
    out: list[CacheSpec] = []
    for layer in range(layers):
        ratio = config.ratio(layer)
        templates = by_ratio.get(ratio)
        if templates is None:  # the first layer of this ratio derives (and validates) its caches
            templates = by_ratio[ratio] = _layer_templates(config, layer, options)
        _named_caches(layer, templates, out)
    return tuple(out)


# The planners of vLLM #48993's before/after and vLLM 0.33 (docs/planners.md): `vllm` is what
# vLLM 0.33 does for this model (overlay-by-spec on its packed groups).
PLANNERS = ("vllm", "overlay", "bucketed", "separate")
PLANNER_ALIASES = {"overlay-by-spec": "vllm", "packed": "overlay"}


def cache_options(options: Options) -> CacheOptions:
    """The DeepSeek V4 knobs of `options` (None keeps CacheOptions' default)."""
    values = dict(
        backend=options.backend,
        main_format=options.main_format,
        indexer_format=options.indexer_format,
        block_size=options.block_size,
        mtp=options.mtp,
    )
    return CacheOptions(**{k: v for k, v in values.items() if v is not None})


class DeepSeekV4Family(Family):
    """DeepSeek V4's compressed caches (sliding-window KV, indexer K, main c4 / c128 KV, compressor states) and
    #48993's planners (docs/caches.md#the-caches-a-layer-registers)."""

    key = "deepseek_v4"
    title = "DeepSeek V4 (compressed MLA + indexer)"
    knobs = (
        "backend",
        "main_format",
        "indexer_format",
        "mtp",
        "block_size",
        "head_dim",
        "rope_dim",
        "index_head_dim",
        "max_model_len",
        "max_num_batched_tokens",
        "async_scheduling",
        "tensor_parallel_size",
    )
    planners = PLANNERS
    block_outermost = True  # DeepSeek V4's backends declare block-outermost layouts (BLHNC)

    def read(self, raw: dict, *, name: str, record: Record) -> Model:
        config = config_from_dict(raw, name=name)
        length, key = derive_max_model_len(
            types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})
        )
        return Model(
            name=config.name,
            family=self.key,
            architecture=str((raw.get("architectures") or ["DeepseekV4ForCausalLM"])[0]),
            model_type=DEEPSEEK_V4_MODEL_TYPE,
            dtype="bf16",
            max_model_len=length,
            config=config,
            max_model_len_source=key,
        )

    @model_method
    def config_for(self, model: Model, options: Options) -> ModelConfig:
        """The model's config with the head_dim / rope_dim / index_head_dim overrides of `options` applied."""
        return model.config.with_overrides(
            head_dim=options.head_dim, qk_rope_head_dim=options.rope_dim, index_head_dim=options.index_head_dim
        )

    @model_method
    def caches(self, model: Model, options: Options) -> tuple[CacheSpec, ...]:
        """One rank's caches. TP shards none of them in vLLM 0.33: every DeepSeek V4 spec is
        num_kv_heads=1, max_tp_shards=1 (models/deepseek_v4/attention.py DeepseekV4MLAAttention and
        DeepseekV4IndexerCache.get_kv_cache_spec, compressor.py CompressorStateCache,
        v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache), and the compressor state is
        2 x coff x head_dim wide whatever the TP; only the query heads split, and
        DeepseekV4MLAAttention asserts `n_heads % tp_size == 0` (as ModelConfig.verify_with_parallel_config
        does), refused here when the config gives num_attention_heads."""
        tp = options.tensor_parallel_size or 1
        heads = model.config.num_attention_heads
        require(
            heads is None or heads % tp == 0,
            f"tensor_parallel_size={tp}: {model.name}'s {heads} attention heads are not divisible by it (vLLM 0.33: "
            f"'Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp}).')",
        )
        return model_caches(self.config_for(model, options), cache_options(options))

    @model_method
    def describe(self, model: Model) -> str:
        c = model.config
        mix = c.layer_mix
        return (
            f"{model.name}: {c.num_hidden_layers} layers (+{c.num_nextn_predict_layers} MTP): "
            f"{mix['c4']} c4, {mix['c128']} c128, {mix['swa']} SWA-only; head_dim {c.head_dim}, "
            f"index_head_dim {c.index_head_dim}"
            + (
                ""
                if c.num_attention_heads
                else "; no num_attention_heads in the config, so a tensor-parallel "
                "size that does not divide it is not refused"
            )
        )

    @model_method
    def comparisons(self, model: Model, options: Options) -> tuple[tuple[str, str, Options], ...]:
        """vLLM #48993's before/after for the chosen backend: bucketed + padding + FP8 (132 B)
        indexer rows vs overlay + MXFP4 (68 B) rows (docs/published-numbers.md)."""
        return (
            ("before", "bucketed", dataclasses.replace(options, indexer_format="fp8")),
            ("after", "overlay", dataclasses.replace(options, indexer_format="mxfp4")),
        )

    @model_method
    def compare_notes(self, model: Model, options: Options, plans, budget: int) -> dict:
        """The stride and block change, vLLM's admission estimate after the change, and vLLM
        #48993's published counts with the budgets that give exactly them
        (docs/published-numbers.md#budget-rounding)."""
        from kvviz.base.published import published_row
        from kvviz.core import capacity

        before, after = plans[0][1].layout, plans[1][1].layout
        cmp = capacity.Comparison(before, after, budget)
        estimate = capacity.admission_estimate_per_block(after)
        lines = [
            f"stride {cmp.stride_change_pct:+.2f}%, blocks {cmp.blocks_change_pct:+.2f}%",
            f"vLLM's admission estimate after the change: {estimate:,} B per block (real stride "
            f"{after.block_stride:,})",
        ]
        backend = cache_options(options).backend
        row = published_row(model.name, backend)
        published = None
        if row is not None and cache_options(options).mtp:  # the table counts the MTP layer
            common = capacity.common_budget_range(
                [(before.block_stride, row.blocks_before), (after.block_stride, row.blocks_after)]
            )
            published = {
                "budget_gib": row.budget_gib,
                "blocks_before": row.blocks_before,
                "blocks_after": row.blocks_after,
                "budget_range_bytes": list(common) if common else None,
                "source": "docs/published-numbers.md#the-published-table",
            }
            counts = f"{row.blocks_before:,} -> {row.blocks_after:,} blocks"
            if common is None:
                lines.append(f"Published (vLLM #48993): {counts} at {row.budget_gib} GiB; no single budget gives both.")
            else:
                lines.append(
                    f"Published (vLLM #48993): {counts} at {row.budget_gib} GiB, a budget rounded to "
                    f"0.01 GiB; exactly those counts come from budgets {common[0]:,}..{common[1]:,} B."
                )
        out = cmp.to_json()
        out.update(backend=backend, admission_estimate_per_block=estimate, published=published)
        return {"lines": tuple(lines), "json": out}

    @model_method
    def with_layer_mix(self, model: Model, *, c4: int, c128: int, swa: int) -> Model:
        """The model with `c4` c4, `c128` c128 and `swa` SWA-only layers (the explorer's layer mix); the model
        itself when the mix is its own."""
        config = with_layer_mix(model.config, c4=c4, c128=c128, swa=swa)
        return model if config is model.config else dataclasses.replace(model, name=config.name, config=config)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class DeepSeekV4Record(Record):
    """DeepSeek V4 (this module's family): its caches are the family's own rules, read from the config."""

    family: ClassVar[str] = "deepseek_v4"


RECORDS = (
    DeepSeekV4Record(
        name="DeepseekV4ForCausalLM",
        vllm="models/deepseek_v4 DeepseekV4ForCausalLM (compressed MLA, indexer, compressor states)",
        model_types=(DEEPSEEK_V4_MODEL_TYPE,),
    ),
)
DEEPSEEK_V4 = register(DeepSeekV4Family(), RECORDS)
