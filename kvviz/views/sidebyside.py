"""The figure of a side-by-side review (`kvviz compare A -- B --figure`): draws a
`kvviz.core.sidebyside.SideBySide` as the two sides' block maps on one byte scale (`before_after`), each
panel named by its side, what was planned and what its budget buys, the title naming the model(s) and the
knobs that differ."""

from __future__ import annotations

from matplotlib.figure import Figure

from kvviz.base.errors import require
from kvviz.core.sidebyside import Side, SideBySide
from kvviz.views.compare import before_after

__all__ = ["side_by_side"]


def _label(side: Side, models: bool) -> str:
    cap = side.capacity
    what = side.title if models else f"{side.label}: {side.plan.setting}"
    return f"{what} ({cap.requests_fit:,} requests, {cap.kv_cache_tokens:,} KV tokens)"


def side_by_side(review: SideBySide, *, width: float = 12.0) -> Figure:
    """Both sides' block maps on one byte scale, each panel titled by its side, what was planned and what its
    budget buys; the title names the model(s) and what differs. A side of several pools (separate pools) has no one
    block to set beside the other: refused in one line."""
    require(
        isinstance(review, SideBySide), f"review={type(review).__name__}: give a kvviz.api.side_by_side(...) result"
    )
    for side in (review.a, review.b):
        require(
            len(side.plan.pools) == 1,
            f"{side.label}: {len(side.plan.pools)} separate pools have no one block to draw beside the other side's; "
            f"compare with the vllm planner",
        )
    a, b = review.a.plan, review.b.plan
    two = a.model != b.model
    labels = (_label(review.a, two), _label(review.b, two))
    title = f"{a.model} vs {b.model}" if two else f"{a.model}: {review.differs_text}"
    return before_after(a.layout, b.layout, labels=labels, width=width, title=title)
