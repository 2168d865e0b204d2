"""What `--kv-cache-dtype fp8` buys: the capacity of fp8 KV over bf16 KV for one model, context and budget, and
the group whose page explains it (docs/deploy.md#what-fp8-buys).

Both sides are vLLM 0.33's own plans (`kvviz.api.make_plan`) at the same knobs but the KV dtype, and
the ratio is of their capacity lines (`get_kv_cache_capacity`: tokens of max_model_len-long requests). On an
attention-only model fp8 halves every page, so the same budget holds twice the blocks: 2.00x. On a Mamba/GDN
hybrid the recurrent state keeps its own dtype (mamba_ssm_dtype), and vLLM grows the attention block until its
page covers the state page (`unify_kv_cache_spec_page_size`, docs/hybrid.md): halving the attention row doubles
the tokens a block holds instead of halving the block, so the block stride stays the state's and at a short
context, where one block of each group is what a request holds, fp8 buys nothing (vLLM #55196).
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.base.inputs import short_repr
from kvviz.options import Options

BASELINE, QUANTIZED = "bf16", "fp8"


@dataclasses.dataclass(frozen=True)
class Fp8Gain:
    """bf16 and fp8 KV side by side at one context and budget: each side's block stride, tokens per block,
    binding group, the largest recurrent state's bytes (0: none), blocks, blocks per request and capacity."""

    model: str
    context: int
    budget_bytes: int | tuple[int, ...]  # one a pipeline stage from a GPU (kvviz.deploy.kv_budget)
    sides: tuple[dict, dict]  # (bf16, fp8): stride, tokens_per_block, binding, state_bytes, blocks, ...

    @property
    def ratio(self) -> float:
        """fp8's max concurrency over bf16's (= the ratio of their capacity lines' tokens, before int())."""
        return self.sides[1]["max_concurrency"] / self.sides[0]["max_concurrency"]

    @property
    def explanation(self) -> str:
        """Why the ratio is what it is, from the group that binds the page."""
        b, f = self.sides
        if f["state_bytes"]:
            why = (
                f"the recurrent state ({f['state_bytes']:,} B a layer, its own dtype) pins the unified page: fp8 "
                f"grows the attention block from {b['tokens_per_block']:,} to {f['tokens_per_block']:,} tokens "
                f"and the block goes from {b['block_stride']:,} to {f['block_stride']:,} B only"
            )
        else:
            why = (
                f"{f['binding']} binds the page: fp8 shrinks the block from {b['block_stride']:,} to "
                f"{f['block_stride']:,} B"
            )
        return (
            f"{why}; a request holds {b['blocks_per_request']:,} -> {f['blocks_per_request']:,} blocks, the budget "
            f"{b['num_blocks']:,} -> {f['num_blocks']:,}"
        )

    @property
    def line(self) -> str:
        """The one CLI line: the ratio, the context and budget, and why."""
        return (
            f"fp8 KV buys {self.ratio:.2f}x the capacity of bf16 for {self.model} at {self.context:,} tokens and "
            f"{_bytes(self.budget_bytes)}: {self.explanation}"
        )

    def to_json(self) -> dict:
        """The comparison as a JSON object."""
        return {
            "model": self.model,
            "context": self.context,
            "budget_bytes": self.budget_bytes,
            "ratio": round(self.ratio, 4),
            "bf16": self.sides[0],
            "fp8": self.sides[1],
            "line": self.line,
        }


def _bytes(budget) -> str:
    """'N B', or one a stage: 'N, M B (each stage's)'."""
    if isinstance(budget, tuple):
        return f"{', '.join(f'{b:,}' for b in budget)} B (each stage's)"
    return f"{budget:,} B"


def _side(plan, budget) -> dict:
    cap = plan.capacity(budget)
    lay = plan.layout
    i = lay.binding_group if lay.binding_group is not None else lay.largest_group
    return {
        "block_stride": lay.block_stride,
        "tokens_per_block": plan.tokens_per_block,
        "binding": lay.groups[i].name,
        "state_bytes": max((c.content_bytes for g in lay.groups for c in g.layers if c.is_state), default=0),
        "num_blocks": cap.num_blocks,
        "blocks_per_request": cap.blocks_per_request,
        "max_concurrency": cap.max_concurrency,
        "kv_cache_tokens": cap.kv_cache_tokens,
        "capacity_line": cap.line,
    }


def fp8_gain(model, context: int, budget_bytes, options: Options = Options()) -> Fp8Gain:
    """fp8 KV's capacity over bf16's for `model` (a `Model`) at `context` tokens (max_model_len) and
    `budget_bytes` of KV memory a GPU (with pipeline stages, one a stage: the weights, so the budgets, do not
    change with the KV dtype), the other knobs `options` (its kv_dtype is replaced on both sides)."""
    from kvviz.api import make_plan

    require(type(context) is int and context > 0, f"context={context!r}: must be a positive integer")
    each = budget_bytes if isinstance(budget_bytes, tuple) else (budget_bytes,)
    require(
        len(each) > 0 and all(type(b) is int and b > 0 for b in each),
        f"budget_bytes={short_repr(budget_bytes)}: must be positive",
    )
    sides = tuple(
        _side(make_plan(model, "vllm", options.with_(kv_dtype=dt, max_model_len=context)), budget_bytes)
        for dt in (BASELINE, QUANTIZED)
    )
    return Fp8Gain(model.name, context, budget_bytes, (sides[0], sides[1]))
