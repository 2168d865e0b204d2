"""Everything the explorer's answer area shows for one set of knobs, computed before any widget is touched.

One state, two outcomes: the knobs give an `Answer` (every text and the map's data, each a pure function of the
knobs and their plan), or a refusal (a one-line KvvizError). The app writes an Answer into its widgets in one go
and writes nothing of a refusal but the refusal itself and a stale mark, so no number on the page can come from
another knob set than the one its head names (`head_html`: the knobs, as data-* attributes the browser test
reads, and in words).
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json

from kvviz.base.text import plural
from kvviz.explorer.display import Planned, Result, deploy_html, engines_html, grey_caption, pct, stride_words
from kvviz.explorer.knobs import KNOB_BY_NAME, default_knobs, model_of
from kvviz.explorer.sweeps import kv_budget
from kvviz.explorer.tables import summary_html

OK, REFUSED = "ok", "refused"  # the head's data-state


@dataclasses.dataclass(frozen=True)
class Answer:
    """The texts of the answer area for `knobs` (each a string the widgets show as is) and the map's data."""

    knobs: dict
    result: Result
    planned: Planned
    budget: str  # where the budget comes from: '26.09 GiB' or '64.90 GiB of one H200 rank (estimate)'
    stride: str  # 'block stride 1,315,008 B, 256 tokens per block'
    blocks: str  # '21,306 blocks at 26.09 GiB'
    fits: str  # '1 whole request of 1,048,576 tokens fits'
    change: str  # against the baseline planner ('' when the plan is the baseline's)
    capacity: str  # vLLM's own 'GPU KV cache size: ...' line
    deploy_html: str
    engines_html: str
    summary_html: str
    caption_html: str


def budget_words(knobs: dict) -> str:
    """Where the budget comes from: '26.09 GiB', or '64.90 GiB of one H200 rank (estimate)'."""
    budget = kv_budget(knobs)
    if budget is None:
        return f"{knobs['budget_gib']:g} GiB"
    estimate = " (estimate)" if any(t.estimate for t in budget.terms) else ""
    return f"{budget.available_bytes / 2**30:.2f} GiB of one {knobs['gpu']} rank{estimate}"


def fits_words(capacity) -> str:
    """'N whole requests of L tokens fit' (the chosen planner's Capacity.requests_fit)."""
    n = capacity.requests_fit
    return f"{plural(n, 'whole request')} of {plural(capacity.max_model_len, 'token')} {'fits' if n == 1 else 'fit'}"


def change_words(result: Result, planned: Planned) -> str:
    """The plan against the baseline planner at the budget: stride and blocks and their changes; '' when the plan
    is the baseline's or a side has separate pools. A budget that buys the baseline no block has no percentage."""
    cmp = result.comparison
    if cmp is None or result.plan.planner == planned.baseline.planner:
        return ""
    before = cmp.blocks_before
    blocks = f"blocks {before:,} ({pct(cmp.blocks_change_pct)})" if before else "blocks 0 (no block at this budget)"
    return (
        f"vs {planned.baseline.planner}: stride {cmp.before.block_stride:,} B ({pct(cmp.stride_change_pct)}), "
        f"{blocks}; {cmp.stride_note()}"
    )


def answer_for(planned: Planned, result: Result, knobs: dict) -> Answer:
    """Every text the answer area shows for `knobs` (planned as `planned`, counted at the budget as `result`).
    Raises KvvizError where a view has no answer; nothing here touches a widget."""
    c = result.capacity
    budget = budget_words(knobs)
    return Answer(
        knobs=dict(knobs),
        result=result,
        planned=planned,
        budget=budget,
        stride=stride_words(result.plan),
        blocks=f"{plural(c.num_blocks, 'block')} at {budget}",
        fits=fits_words(c),
        change=change_words(result, planned),
        capacity=c.line,
        deploy_html=deploy_html(result.plan, knobs),
        engines_html=engines_html(knobs),
        summary_html=summary_html(c, result.capacities),
        caption_html=grey_caption(planned.map_data["caption"]),
    )


def knobs_json(knobs: dict) -> str:
    """The knobs as JSON (a model given as a path or a Model: its name or text)."""
    plain = (str, int, float, bool, type(None))
    named = {k: v if isinstance(v, plain) else getattr(v, "name", str(v)) for k, v in knobs.items()}
    return json.dumps(named, sort_keys=True)


@functools.lru_cache(maxsize=64)
def _start(model: str) -> dict:
    """The explorer's start for a model named by a preset name or path (`default_knobs`), worked out once."""
    return default_knobs(model)


def changed_words(knobs: dict) -> str:
    """The model and each knob set away from the explorer's start for it (`default_knobs`), e.g.
    'deepseek-v4-pro (head_dim 576, indexer K fp8)'; the budget's knobs are said by the budget words."""
    model = knobs["model"]
    start = _start(model) if isinstance(model, str) else default_knobs(model)
    skip = ("model", "budget_gib", "gpu", "gpu_memory_utilization")
    changed = [f"{KNOB_BY_NAME[n].label} {v}" for n, v in knobs.items() if n not in skip and start.get(n) != v]
    name = model_of(knobs).name
    return f"{name} ({', '.join(changed)})" if changed else f"{name} (its defaults)"


def head_html(answer: Answer, *, step: int, state: str) -> str:
    """The answer area's head: which knobs its numbers answer, in words and as data-* attributes (data-step: the
    update count, data-state: ok or refused, data-knobs: the knobs as JSON). Refused: the numbers below are the
    last configuration that planned, named as such."""
    knobs = answer.knobs
    words = f"{changed_words(knobs)}; budget {answer.budget}"
    text = (
        f"numbers for {words}"
        if state == OK
        else f"still shown (not the current selection, which was refused): numbers for {words}"
    )
    return (
        f'<div class="kvviz-answer-head-text" data-step="{step}" data-state="{state}" '
        f'data-knobs="{html.escape(knobs_json(knobs))}">{html.escape(text)}</div>'
    )
