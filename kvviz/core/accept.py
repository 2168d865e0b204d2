"""The one door of every post-plan function: a `Plan` (what `kvviz.plan` returns) or a `Layout`.

`kvviz.block_map`, `before_after`, `live_bytes`, `page_anatomy`, `render_report`, `verify`, `Pool`
and the explorer each ask `pools_of(value, name)` for the layouts they draw or fill: a Layout is
its own one pool; a shared-pool Plan has one pool; a separate-pools Plan has one per cache kind,
each with its own block stride (docs/hybrid.md#separate-pools). Anything else is refused in one
line naming the argument, so no function repeats the conversion.
"""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.core.layout import Layout
from kvviz.core.plan import Plan

__all__ = ["pools_of", "plan_of", "many_pools"]


def pools_of(value, name: str = "layout") -> tuple[Layout, ...]:
    """The layouts `value` holds: (layout,) for a Layout, a Plan's `pools` (one, or one per cache kind
    for separate pools); anything else is a KvvizError naming `name`."""
    if isinstance(value, Layout):
        return (value,)
    require(
        isinstance(value, Plan),
        f"{name}: expected a kvviz Plan (kvviz.plan(...)) or Layout, got {type(value).__name__}",
    )
    return value.pools


def plan_of(value) -> Plan | None:
    """`value` when it is a Plan, else None (a Layout carries no model, options or scheduling)."""
    return value if isinstance(value, Plan) else None


def many_pools(value, name: str = "layout") -> bool:
    """Whether `value` (a Plan or Layout) has several pools, each its own block stride (separate pools)."""
    return len(pools_of(value, name)) > 1
