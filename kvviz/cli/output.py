"""How the commands print: readable JSON, the capacity table, the budget's terms."""

from __future__ import annotations

import json

from kvviz.base.errors import KvvizError, require
from kvviz.cli.budget_args import budget_option, require_budget_holds_a_block
from kvviz.core.layout import text_table
from kvviz.core.plan import Plan

_json_encode = json.JSONEncoder().encode  # the C encoder, as json.dumps(obj) uses it
_NESTED = (dict, list)


def readable_json(obj, indent: str = "") -> str:
    """JSON laid out for a reader: nested objects and lists one member a line, indented by two,
    and an object or list of plain values (a layer, a range) on one line, written by json's C
    encoder; `json.dumps(obj, indent=2)` runs its pure-Python encoder, several times slower on a
    layout of 100,000 layers."""
    inner = indent + "  "
    if type(obj) is dict:
        for v in obj.values():
            if isinstance(v, _NESTED):
                break
        else:
            return _json_encode(obj)
        body = ",\n".join([f"{inner}{_json_encode(k)}: {readable_json(v, inner)}" for k, v in obj.items()])
        return "{\n" + body + "\n" + indent + "}"
    if type(obj) is list:
        for v in obj:
            if isinstance(v, _NESTED):
                break
        else:
            return _json_encode(obj)
        return "[\n" + ",\n".join([inner + readable_json(v, inner) for v in obj]) + "\n" + indent + "]"
    return _json_encode(obj)


def print_json(obj) -> None:
    """Print `obj` as kvviz's readable JSON (kvviz.base.text.readable_json)."""
    print(readable_json(obj))


def capacity_rows(caps, plans=None) -> list[list]:
    """One table row per capacity (label, planner, stride, blocks, tokens, requests, waste, binding group)."""
    binds = (
        [p.pools[0].binding_label if len(p.pools) == 1 else "none (separate pools)" for p in plans]
        if plans
        else ["" for _ in caps]
    )
    return [
        [
            label,
            c.planner,
            f"{c.tokens_per_block or '-'}",
            f"{c.bytes_per_block:,}",
            f"{c.num_groups}",
            b,
            f"{c.waste.waste_pct:.2f}",
            f"{c.num_blocks:,}",
            f"{c.blocks_per_request:,}",
            f"{c.requests_fit:,} ({c.concurrency_text})",
            f"{c.kv_cache_tokens:,}",
        ]
        for (label, c), b in zip(caps, binds)
    ]


CAPACITY_HEADER = [
    "",
    "planner",
    "tokens/block",
    "bytes/block",
    "groups",
    "binding group",
    "waste %",
    "blocks",
    "blocks/request",
    "requests",
    "KV tokens",
]


def require_shares_hold_blocks(args, planned: Plan, budget) -> None:
    """Every pool's share of the budget holds at least one of its blocks (one budget a pipeline stage, from a GPU:
    each stage's holds one of its own)."""
    if isinstance(budget, tuple):
        for stage, share in zip(planned.stages, budget):
            require(
                share >= stage.bytes_per_block,
                f"{f'--gpu {args.gpu}' if args.gpu else f'--gpu-memory-gib {args.gpu_memory_gib}'}: stage "
                f"{stage.index}'s KV memory {share:,} B is smaller than its block "
                f"({stage.bytes_per_block:,} B)",
            )
        return
    if len(planned.pools) == 1:
        require_budget_holds_a_block(args, budget, planned.block_stride)
        return
    for share, p in zip(planned.split_budget(budget), planned.pools):
        if share < p.block_stride:
            raise KvvizError(
                f"{budget_option(args)}: the share of pool {p.groups[0].name!r} in {budget:,} B (split by "
                f"one request's need) holds none of its {p.block_stride:,} B blocks"
            )


# ---- plan ---------------------------------------------------------------------------------
def group_table_text(layouts) -> str:
    """The groups of each layout as a text table: name, layers, bytes a block, unused bytes, binding."""
    rows = [
        [
            g.name,
            len(g.layers),
            f"{lay.group_total(i):,}",
            f"{lay.group_unused(i):,}",
            "yes" if i == lay.binding_group else "",
        ]
        for lay in layouts
        for i, g in enumerate(lay.groups)
    ]
    return text_table(rows, ["group", "layers", "total B", "unused B", "binds"])
