"""Hybrid models laid out three ways (docs/hybrid.md#hybrid-planners).

* `vllm`: vLLM 0.33's hybrid KV cache manager. Pages are unified first
  (`hybrid_specs.hybrid_caches`), layers with one spec form a bucket, buckets split into groups
  of `group_size` layers (`hybrid_groups`, mirroring `_get_kv_cache_groups_uniform_page_size`),
  and every group is one tensor starting at byte 0 of the same pool: groups overlay, a block id
  belongs to one group at a time. Bytes per block = the widest group's pages.
* `packed`: DeepSeek V4's per-block packing (`_get_packed_kv_cache_groups`) with state pages at
  their own size. vLLM 0.33 does not do this for these models: it takes the packed path only when
  page sizes differ, and it pads state pages first so they never do.
* `separate`: one pool per cache kind with no overlay (SGLang's hybrid pools), the budget split
  in proportion to what one request of the given length needs from each pool
  (docs/hybrid.md#separate-pools).

`summarize` / `compare_hybrid` put bytes per block, waste, vLLM's per-request admission estimate
and the requests a budget serves side by side; `layer_planes` gives the layer-outermost map.
"""

from __future__ import annotations

import dataclasses

from . import capacity
from .defaults import CONTEXT_TOKENS, GIB
from .errors import KvvizError, require
from .grouping import KVGroup, approximate_gcd
from .hf import HybridConfig
from .hybrid_specs import (DEFAULT_BLOCK_SIZE, HybridOptions, attention_block_size, block_size_derivation,
                           hybrid_caches, kernel_block_alignment, state_blocks_per_request)
from .layout import GLYPHS, Layout, text_table
from .planners import plan_overlay_by_spec
from .specs import CacheKind, CacheSpec

__all__ = [
    "HybridOptions", "HybridLayout", "SeparatePools", "Waste", "GroupNeed", "HybridSummary", "TensorPlanes", "Plane",
    "hybrid_caches", "hybrid_groups", "packed_groups", "plan_hybrid", "summarize", "compare_hybrid",
    "format_comparison", "comparison_json", "plan_json", "layer_planes", "HYBRID_PLANNERS",
]

HYBRID_PLANNERS = ("vllm", "packed", "separate")

PADDING_GLYPH = "~"  # a state page's padding up to the attention page, in the text byte map


# ---- grouping -----------------------------------------------------------------------------------
def _base_name(c: CacheSpec) -> str:
    if c.kind is CacheKind.SLIDING_ATTENTION:
        return f"sliding{c.sliding_window}"
    if c.kind is CacheKind.CHUNKED_ATTENTION:
        return f"chunked{c.attention_chunk_size}"
    return {CacheKind.FULL_ATTENTION: "full", CacheKind.LINEAR_STATE: "state"}.get(c.kind, c.kind.name.lower())


def _named_groups(parts: list[tuple[str, list[list[CacheSpec]]]]) -> tuple[KVGroup, ...]:
    out = []
    for base, groups in parts:
        for i, layers in enumerate(groups):
            out.append(KVGroup(name=base if len(groups) == 1 else f"{base}-{i}", layers=tuple(layers)))
    return tuple(out)


def hybrid_buckets(caches: tuple[CacheSpec, ...]) -> list[list[CacheSpec]]:
    """Layers with the same spec, buckets in first-seen (layer) order."""
    buckets: dict[tuple, list[CacheSpec]] = {}
    for c in caches:
        buckets.setdefault(c.spec_key, []).append(c)  # equal keys = one vLLM KVCacheSpec
    return list(buckets.values())


def group_size(counts: list[int]) -> int:
    """The smallest bucket's layer count, or the largest when it is under 1.5 x the smallest
    (`_get_kv_cache_groups_uniform_page_size`; compared as 2 x max < 3 x min, exactly)."""
    lo, hi = min(counts), max(counts)
    return hi if 2 * hi < 3 * lo else lo


def hybrid_groups(caches: tuple[CacheSpec, ...]) -> tuple[KVGroup, ...]:
    """vLLM 0.33's groups for unified pages (`_get_kv_cache_groups_uniform_page_size`): a bucket
    of n layers becomes cdiv(n, group_size) groups, the i-th holding layers[i::num_groups], so
    groups of one bucket may be one layer short (docs/hybrid.md#hybrid-grouping)."""
    require(len(caches) > 0, "caches: the model registers no KV caches")
    require(len({c.page_bytes for c in caches}) == 1,
            "caches: vLLM's hybrid grouping needs unified page sizes (use hybrid_caches)")
    buckets = hybrid_buckets(caches)
    size = group_size([len(b) for b in buckets])
    parts = []
    for bucket in buckets:
        n = -(-len(bucket) // size)
        parts.append((_base_name(bucket[0]), [bucket[i::n] for i in range(n)]))
    return _named_groups(parts)


def _is_state_bucket(first: CacheSpec, repeats: int | None) -> bool:
    """Buckets that can shrink to one state per group (`_get_packed_kv_cache_groups`'
    is_state_bucket): Mamba state, and sliding windows when no repeat pattern fixes the split."""
    return first.kind is CacheKind.LINEAR_STATE or (repeats is None and first.sliding_window is not None)


def packed_groups(caches: tuple[CacheSpec, ...]) -> tuple[KVGroup, ...]:
    """Mirrors vLLM 0.33's `_get_packed_kv_cache_groups` (DeepSeek V4's per-block packing).

    Buckets of one cache type; a balanced bucket (equal layer counts per page size) splits into
    cdiv(repeats, repeats_per_group) groups of whole pattern repeats; a state bucket splits into
    as many groups as it takes for each to fit the block the others already need."""
    require(len(caches) > 0, "caches: the model registers no KV caches")
    buckets: dict[tuple, list[CacheSpec]] = {}
    for c in caches:  # UniformTypeKVCacheSpecs.is_uniform_type: one type, one block size
        key = (c.kind, c.sliding_window, c.attention_chunk_size, c.tokens_per_block,
               c.page_bytes if c.kind is CacheKind.LINEAR_STATE else None)
        buckets.setdefault(key, []).append(c)
    bucketed = []
    for bucket in buckets.values():
        by_page: dict[int, list[CacheSpec]] = {}
        for c in bucket:
            by_page.setdefault(c.page_bytes, []).append(c)
        balanced = len({len(v) for v in by_page.values()}) == 1
        bucketed.append((bucket, by_page, balanced))

    def max_per_page(by_page):  # UniformTypeKVCacheSpecs.get_max_layers_per_page_size
        return max(len(v) for v in by_page.values())

    floor = max((max_per_page(p) for _, p, bal in bucketed if bal and len(p) > 1), default=0)
    repeats = approximate_gcd([max_per_page(p) for _, p, bal in bucketed if bal], floor) if floor else None

    def num_groups_for(by_page, balanced) -> int:
        return -(-max_per_page(by_page) // repeats) if (balanced and repeats is not None) else 1

    def widest(by_page, n) -> int:
        return sum(-(-len(v) // n) * page for page, v in by_page.items())

    anchor = max(widest(p, len(b) if _is_state_bucket(b[0], repeats) else num_groups_for(p, bal))
                 for b, p, bal in bucketed)
    parts = []
    for bucket, by_page, balanced in bucketed:
        n = num_groups_for(by_page, balanced)
        if anchor and _is_state_bucket(bucket[0], repeats):
            per_block = max(anchor // bucket[0].page_bytes, 1)
            n = max(n, -(-len(bucket) // per_block))
        if n == 1:
            parts.append((_base_name(bucket[0]), [bucket]))
            continue
        pattern = list(zip(*by_page.values()))
        parts.append((_base_name(bucket[0]), [[c for rep in pattern[i::n] for c in rep] for i in range(n)]))
    return _named_groups(parts)


# ---- layouts ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class HybridLayout(Layout):
    """A `Layout` of a hybrid model: the same fields, plus the attention block size, and a text
    byte map that knows the hybrid kinds and shows padded state bytes as '~'."""

    tokens_per_block: int = DEFAULT_BLOCK_SIZE

    @property
    def page_bytes(self) -> int:
        """The largest page (vllm planner: every page)."""
        return max(p.page_bytes for p in self.placements)

    def text_map(self, width: int = 72) -> str:
        lines = []
        name_w = max(len(g.name) for g in self.groups)
        for i, g in enumerate(self.groups):
            cells = ["."] * width
            for p in self.group_placements(i):
                content_end = p.offset + p.cache.content_bytes
                for lo_b, hi_b, glyph in ((p.offset, content_end, GLYPHS[p.cache.kind]),
                                          (content_end, p.end, PADDING_GLYPH)):
                    if hi_b <= lo_b:
                        continue
                    lo = lo_b * width // self.block_stride
                    hi = max(lo + 1, -(-hi_b * width // self.block_stride))
                    for x in range(lo, min(hi, width)):
                        cells[x] = glyph
            lines.append(f"{g.name:>{name_w}} |{''.join(cells)}| {len(g.layers):>3} layers {self.group_total(i):>14,} B")
        kinds = dict.fromkeys(p.cache.kind for p in self.placements)
        legend = "  ".join(f"{GLYPHS[k]}={k.label}" for k in kinds)
        if any(p.cache.padding_bytes for p in self.placements):
            legend += f"  {PADDING_GLYPH}=padding"
        lines.append(f"{'':>{name_w}}  bytes per block {self.block_stride:,} B, {self.tokens_per_block} tokens "
                     f"({self.planner})")
        lines.append(f"{'':>{name_w}}  {legend}  .=unused")
        return "\n".join(lines)


def _as_hybrid(layout: Layout, planner: str, tokens_per_block: int, derivation: tuple[str, ...]) -> HybridLayout:
    return HybridLayout(planner, layout.groups, layout.placements, layout.block_stride, layout.tensors,
                        derivation + layout.derivation, tokens_per_block=tokens_per_block)


def _grouping_derivation(groups: tuple[KVGroup, ...], caches) -> tuple[str, ...]:
    buckets = hybrid_buckets(caches)
    counts = [len(b) for b in buckets]
    size = group_size(counts)
    sizes = ", ".join(str(len(g.layers)) for g in groups)
    return (f"buckets of {' + '.join(f'{len(b)} {_base_name(b[0])}' for b in buckets)} layers -> group size {size} "
            f"(smallest bucket{', or the largest as it is under 1.5 x the smallest' if size != min(counts) else ''})",
            f"{len(groups)} groups of {sizes} layers; each one tensor from byte 0, layer stride = page")


def plan_hybrid(config: HybridConfig, options: HybridOptions = HybridOptions(), planner: str = "vllm"):
    """A hybrid model laid out by one planner: `HybridLayout` for 'vllm' and 'packed',
    `SeparatePools` for 'separate' (separate pools share no block stride, which a Layout has)."""
    if planner not in HYBRID_PLANNERS:
        raise KvvizError(f"planner={planner!r}: unknown for hybrid models; choose one of {', '.join(HYBRID_PLANNERS)}")
    block = attention_block_size(config, options)
    head = block_size_derivation(config, options, pad_states=planner == "vllm")
    if planner == "vllm":
        caches = hybrid_caches(config, options)
        groups = hybrid_groups(caches)
        return _as_hybrid(plan_overlay_by_spec(groups), "vllm", block, head + _grouping_derivation(groups, caches))
    if planner == "packed":
        caches = hybrid_caches(config, options, pad_states=False)
        if len({c.page_bytes for c in caches}) == 1:
            note = ("packed: every page is already one size, so vLLM's packed path does not apply "
                    "and the layout is vLLM's")
            groups = hybrid_groups(caches)
            return _as_hybrid(plan_overlay_by_spec(groups), "packed", block, head + (note,))
        groups = packed_groups(caches)
        note = (f"packed (not what vLLM 0.33 does): state pages unpadded, {len(groups)} groups of "
                f"{', '.join(str(len(g.layers)) for g in groups)} layers packed from byte 0 "
                f"(_get_packed_kv_cache_groups)")
        return _as_hybrid(plan_overlay_by_spec(groups), "packed", block, head + (note,))
    return plan_separate(config, options)


# ---- separate pools -----------------------------------------------------------------------------
def separate_block_size(config: HybridConfig, options: HybridOptions) -> int:
    """Attention tokens per block of separate pools: no page has to hold a state, so vLLM's raise
    is not needed; the block keeps the kernel (and, in 'align' mode, checkpoint) alignment."""
    return kernel_block_alignment(config, options) if config.has_linear_attention else \
        (options.block_size or DEFAULT_BLOCK_SIZE)


@dataclasses.dataclass(frozen=True)
class SeparatePools:
    """One pool per cache kind, no overlay: each pool is a one-group `HybridLayout` whose block
    holds its layers' pages back to back. Not a `Layout` itself: the pools have different
    strides and block counts, and a Layout has one stride for all its groups."""

    pools: tuple[HybridLayout, ...]
    tokens_per_block: int
    derivation: tuple[str, ...] = ()
    planner: str = "separate"

    @property
    def groups(self) -> tuple[KVGroup, ...]:
        return tuple(p.groups[0] for p in self.pools)

    @property
    def block_stride(self) -> int:
        """Bytes of one block in every pool."""
        return sum(p.block_stride for p in self.pools)

    def split_budget(self, budget: int, needs: list[int]) -> list[int]:
        """Bytes each pool gets: the budget in proportion to `needs` (floor)."""
        total = sum(needs)
        require(total > 0, "separate pools: a request needs no bytes")
        return [budget * n // total for n in needs]

    def to_json(self, *, num_blocks: list[int] | None = None) -> dict:
        return {
            "planner": self.planner,
            "block_stride": self.block_stride,
            "num_blocks": None if num_blocks is None else sum(num_blocks),
            "groups": [
                {"name": p.groups[0].name, "total_bytes": p.block_stride, "unused_bytes": 0,
                 "block_stride": p.block_stride, "num_blocks": None if num_blocks is None else num_blocks[i],
                 "layers": [{"name": q.name, "kind": q.cache.kind.name.lower(), "offset": q.offset,
                             "page_bytes": q.page_bytes} for q in p.placements]}
                for i, p in enumerate(self.pools)
            ],
            "derivation": list(self.derivation),
        }

    def text_map(self, width: int = 72) -> str:
        return "\n\n".join(p.text_map(width) for p in self.pools)

    def __str__(self) -> str:
        return self.text_map()


def plan_separate(config: HybridConfig, options: HybridOptions = HybridOptions()) -> SeparatePools:
    """One pool per spec bucket (full, each sliding window, each chunk size, state), unpadded."""
    block = separate_block_size(config, options)
    caches = hybrid_caches(config, options, pad_states=False, block_size=block)
    pools = []
    for bucket in hybrid_buckets(caches):
        group = KVGroup(name=_base_name(bucket[0]), layers=tuple(bucket))
        pools.append(_as_hybrid(plan_overlay_by_spec((group,)), "separate", block, ()))
    derivation = (f"separate pools: {block}-token attention blocks, state pages unpadded, one pool per kind; "
                  f"the budget is split in proportion to one request's need from each pool",)
    return SeparatePools(tuple(pools), block, derivation)


# ---- summaries ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Waste:
    """Bytes of a block that hold nothing, over every group (or pool): when each group holds
    one block, total_bytes = bytes per block x groups (separate: one block of each pool)."""

    total_bytes: int
    real_bytes: int
    empty_slot_bytes: int  # whole pages a group leaves empty (groups one layer short)
    padded_state_bytes: int  # state pages padded up to the attention page
    unused_tail_bytes: int  # the rest of a group's unused range, less than one page

    @property
    def waste_bytes(self) -> int:
        return self.total_bytes - self.real_bytes

    @property
    def waste_pct(self) -> float:
        return 100.0 * self.waste_bytes / self.total_bytes

    def to_json(self) -> dict:
        return {"total_bytes": self.total_bytes, "real_bytes": self.real_bytes, "waste_bytes": self.waste_bytes,
                "waste_pct": round(self.waste_pct, 3), "empty_slot_bytes": self.empty_slot_bytes,
                "padded_state_bytes": self.padded_state_bytes, "unused_tail_bytes": self.unused_tail_bytes}


def layout_waste(layout: Layout) -> Waste:
    """Waste of a shared-pool layout: every group spans the block stride."""
    empty = tail = 0
    for i, g in enumerate(layout.groups):
        unused = layout.group_unused(i)
        page = max(c.page_bytes for c in g.layers)
        empty += unused // page * page
        tail += unused % page
    padded = sum(p.cache.padding_bytes for p in layout.placements)
    real = sum(p.cache.content_bytes for p in layout.placements)
    return Waste(layout.block_stride * len(layout.groups), real, empty, padded, tail)


@dataclasses.dataclass(frozen=True)
class GroupNeed:
    """What one request of the summary's length holds in one group (or pool)."""

    name: str
    layers: int
    blocks_per_request: int
    block_bytes: int  # bytes one of its blocks costs: the shared stride, or the pool's own
    num_blocks: int | None = None  # separate pools only: the pool's own blocks

    def to_json(self) -> dict:
        out = {"name": self.name, "layers": self.layers, "blocks_per_request": self.blocks_per_request,
               "block_bytes": self.block_bytes}
        if self.num_blocks is not None:
            out["num_blocks"] = self.num_blocks
        return out


@dataclasses.dataclass(frozen=True)
class HybridSummary:
    """One planner's numbers for one model at one budget and context length."""

    model: str
    planner: str
    tokens_per_block: int
    bytes_per_block: int
    num_groups: int
    waste: Waste
    context: int
    budget_bytes: int
    groups: tuple[GroupNeed, ...]
    num_blocks: int  # shared pool: budget // bytes per block; separate: all pools' blocks
    max_concurrency: float  # requests of `context` tokens served at once (fractional, like vLLM's)

    @property
    def blocks_per_request(self) -> int:
        return sum(g.blocks_per_request for g in self.groups)

    @property
    def admission_bytes_per_request(self) -> int:
        """vLLM's `_max_memory_usage_bytes_from_groups`: bytes per block x the blocks every group
        holds (separate pools: each pool's blocks at its own block size)."""
        return sum(g.blocks_per_request * g.block_bytes for g in self.groups)

    @property
    def requests_fit(self) -> int:
        """Whole requests of `context` tokens the budget holds at once."""
        if self.planner == "separate":
            return min(g.num_blocks // g.blocks_per_request for g in self.groups)
        return self.num_blocks // self.blocks_per_request

    @property
    def kv_tokens_per_gib(self) -> float:
        """Context tokens served per GiB of budget: concurrency x context / budget in GiB."""
        return self.max_concurrency * self.context / (self.budget_bytes / GIB)

    def to_json(self) -> dict:
        return {
            "model": self.model, "planner": self.planner, "tokens_per_block": self.tokens_per_block,
            "bytes_per_block": self.bytes_per_block, "num_groups": self.num_groups, "waste": self.waste.to_json(),
            "context": self.context, "budget_bytes": self.budget_bytes, "num_blocks": self.num_blocks,
            "blocks_per_request": self.blocks_per_request,
            "admission_bytes_per_request": self.admission_bytes_per_request,
            "max_concurrency": round(self.max_concurrency, 4), "requests_fit": self.requests_fit,
            "kv_tokens_per_gib": round(self.kv_tokens_per_gib, 1),
            "groups": [g.to_json() for g in self.groups],
        }


def summarize(layout_or_pools, config: HybridConfig, options: HybridOptions = HybridOptions(), *,
              budget_bytes: int, context: int) -> HybridSummary:
    """Bytes per block, waste, admission estimate and capacity of one planned layout."""
    require(isinstance(budget_bytes, int) and budget_bytes > 0, f"budget_bytes={budget_bytes!r}: must be a positive integer")
    require(isinstance(context, int) and context > 0, f"context={context!r}: must be a positive integer")
    state_blocks = state_blocks_per_request(config, options)
    mnbt = options.max_num_batched_tokens
    if isinstance(layout_or_pools, SeparatePools):
        pools = layout_or_pools
        per_req = [capacity.cache_blocks_for_request(p.groups[0].layers[0], context, max_num_batched_tokens=mnbt,
                                                     state_blocks=state_blocks) for p in pools.pools]
        needs = [n * p.block_stride for n, p in zip(per_req, pools.pools)]
        shares = pools.split_budget(budget_bytes, needs)
        blocks = [s // p.block_stride for s, p in zip(shares, pools.pools)]
        groups = tuple(GroupNeed(p.groups[0].name, len(p.groups[0].layers), n, p.block_stride, b)
                       for p, n, b in zip(pools.pools, per_req, blocks))
        real = sum(q.cache.content_bytes for p in pools.pools for q in p.placements)
        padded = sum(q.cache.padding_bytes for p in pools.pools for q in p.placements)
        waste = Waste(pools.block_stride, real, 0, padded, 0)
        concurrency = min(b / n for b, n in zip(blocks, per_req))
        return HybridSummary(config.name, "separate", pools.tokens_per_block, pools.block_stride, len(pools.pools),
                             waste, context, budget_bytes, groups, sum(blocks), concurrency)
    layout = layout_or_pools
    per_req = capacity.group_blocks_for_request(layout, context, max_num_batched_tokens=mnbt, state_blocks=state_blocks)
    blocks = capacity.num_blocks(layout, budget_bytes)
    groups = tuple(GroupNeed(g.name, len(g.layers), n, layout.block_stride) for g, n in zip(layout.groups, per_req))
    tokens = getattr(layout, "tokens_per_block", None) or layout.placements[0].cache.tokens_per_block
    return HybridSummary(config.name, layout.planner, tokens, layout.block_stride, len(layout.groups),
                         layout_waste(layout), context, budget_bytes, groups, blocks, blocks / sum(per_req))


def compare_hybrid(config: HybridConfig, options: HybridOptions = HybridOptions(), *, budget_bytes: int,
                   context: int) -> tuple[HybridSummary, ...]:
    """The three planners' summaries, in HYBRID_PLANNERS order."""
    return tuple(summarize(plan_hybrid(config, options, p), config, options, budget_bytes=budget_bytes,
                           context=context) for p in HYBRID_PLANNERS)


def comparison_json(summaries: tuple[HybridSummary, ...]) -> dict:
    first = summaries[0]
    return {"model": first.model, "context": first.context, "budget_bytes": first.budget_bytes,
            "budget_gib": first.budget_bytes / GIB, "planners": [s.to_json() for s in summaries]}


def plan_json(layout_or_pools, config: HybridConfig, options: HybridOptions = HybridOptions(), *,
              budget_bytes: int | None = None, context: int = CONTEXT_TOKENS) -> dict:
    """What `kvviz plan --json` prints for a hybrid model: the Layout fields it prints today
    (planner, block_stride, num_blocks, groups with their layers, tensors, derivation), plus the
    model, its tokens per block and, with a budget, the summary at `context` tokens (separate
    pools need the context to split the budget)."""
    summary = None
    if budget_bytes is not None:
        summary = summarize(layout_or_pools, config, options, budget_bytes=budget_bytes, context=context)
    if isinstance(layout_or_pools, SeparatePools):
        blocks = None if summary is None else [g.num_blocks for g in summary.groups]
        out = layout_or_pools.to_json(num_blocks=blocks)
    else:
        out = layout_or_pools.to_json(num_blocks=None if summary is None else summary.num_blocks)
    out["model"] = config.name
    out["tokens_per_block"] = layout_or_pools.tokens_per_block
    out["budget_bytes"] = budget_bytes
    if summary is not None:
        out["summary"] = summary.to_json()
    return out


def format_comparison(summaries: tuple[HybridSummary, ...]) -> str:
    """A text table of `compare_hybrid`'s summaries, one row per planner."""
    first = summaries[0]
    header = ["planner", "tokens/block", "bytes/block", "groups", "waste B", "waste %", "admission B/request",
              "blocks", "requests", "KV tokens/GiB"]
    rows = [[s.planner, f"{s.tokens_per_block}", f"{s.bytes_per_block:,}", f"{s.num_groups}",
             f"{s.waste.waste_bytes:,}", f"{s.waste.waste_pct:.2f}", f"{s.admission_bytes_per_request:,}",
             f"{s.num_blocks:,}", f"{s.requests_fit:,} ({s.max_concurrency:.2f})", f"{s.kv_tokens_per_gib:,.0f}"]
            for s in summaries]
    title = (f"{first.model}: context {first.context:,} tokens, budget {first.budget_bytes:,} B "
             f"({first.budget_bytes / GIB:.2f} GiB)")
    return title + "\n" + text_table(rows, header)


# ---- layer-outermost map ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Plane:
    """One layer's plane of a layer-outermost tensor: bytes [start, end) of the pool; layer None
    marks the unused plane of a group one layer short."""

    layer: str | None
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class TensorPlanes:
    """A group's tensor in vLLM's layer-outermost layout (the one it resolves by default): layer
    stride = num_blocks x page, block stride = page; every tensor starts at byte 0 of the pool."""

    group: str
    offset: int
    page_bytes: int
    layer_stride: int
    block_stride: int
    size: int  # bytes of the pool: bytes per block x num_blocks
    planes: tuple[Plane, ...]

    def block_range(self, layer_index: int, block: int) -> tuple[int, int]:
        """Bytes of one layer's page of one block."""
        lo = self.offset + layer_index * self.layer_stride + block * self.block_stride
        return lo, lo + self.page_bytes


def layer_planes(layout: Layout, num_blocks: int) -> tuple[TensorPlanes, ...]:
    """The pool as layer planes x blocks (layer-outermost), one entry per tensor of `layout`
    (`get_kv_cache_config_from_groups` with a layer-outermost layout: a tensor's layer stride is
    num_blocks x page, its block stride the page, the next tensor of a group starts where its
    layers end)."""
    require(isinstance(num_blocks, int) and num_blocks > 0, f"num_blocks={num_blocks!r}: must be a positive integer")
    size = layout.block_stride * num_blocks
    out, group_cursor = [], {}
    for t in layout.tensors:
        first = layout.placement(t.layers[0])
        page = first.page_bytes
        start = group_cursor.get(first.group, 0)
        stride = num_blocks * page
        planes = tuple(Plane(name, start + k * stride, start + (k + 1) * stride) for k, name in enumerate(t.layers))
        group_cursor[first.group] = start + len(t.layers) * stride
        out.append((first.group, TensorPlanes(layout.groups[first.group].name, start, page, stride, page, size, planes)))
    result = []
    for gi, tp in out:
        end = group_cursor[gi]
        is_last = tp.planes[-1].end == end
        planes = tp.planes + ((Plane(None, end, size),) if is_last and end < size else ())
        result.append(dataclasses.replace(tp, planes=planes))
    return tuple(result)
