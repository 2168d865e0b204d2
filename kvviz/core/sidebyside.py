"""Plans set side by side for a review (`kvviz compare A -- B`, `kvviz.api.side_by_side`), and plans that are the
same layout under two names (`kvviz compare`'s planner rows, `kvviz render`'s before/after).

* `SideBySide`: two configurations (bf16 vs fp8, TP 2 vs TP 4, one model vs another), each a plan, its capacity at
  its budget and how that budget was had; the knobs that differ (`Plan.knobs`, the model and the budget's inputs),
  and one table of what a reviewer reads (blocks, requests, tokens, ...) as text, Markdown or JSON. Every number is
  the plan's or the capacity's own; the change column is B over A.
* `same_layouts` / `why_same`: which of several plans lay out the same pools (every placement at the same offset,
  the same strides) and why they do, so that equal rows are said to be equal and why.

Imports no model, engine or view (kvviz.views.sidebyside draws a SideBySide).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from kvviz.base.errors import require
from kvviz.core.layout import text_table
from kvviz.core.plan import Capacity, Plan

__all__ = ["Side", "SideBySide", "layout_key", "same_layouts", "why_same"]


def layout_key(plan: Plan) -> tuple:
    """What a user sees of a plan's layout, whatever its planner is called: each pool's stride and tokens per block,
    and every placement (layer, group index, offset, page bytes)."""
    return tuple(
        (p.block_stride, p.tokens_per_block, tuple((q.name, q.group, q.offset, q.page_bytes) for q in p.placements))
        for p in plan.pools
    )


def same_layouts(plans) -> list[list[str]]:
    """The labels of `plans` ((label, Plan) pairs) grouped by equal layout (`layout_key`), in first-seen order."""
    groups: dict[tuple, list[str]] = {}
    for label, plan in plans:
        groups.setdefault(layout_key(plan), []).append(label)
    return list(groups.values())


def why_same(plan: Plan) -> str:
    """Why several planners give `plan`'s layout: one cache kind of one page size (nothing to unify, pack or keep
    apart); pages all of one size (nothing to pad or pack: vLLM's packed path does not apply, kvviz.vllm.plan);
    else the same groups at the same offsets."""
    caches = [c for g in plan.groups for c in g.layers]
    kinds = list(dict.fromkeys(c.kind.label for c in caches))
    pages = {c.page_bytes for c in caches}
    if len(kinds) == 1 and len(pages) == 1:
        return (
            f"{plan.model} has one cache kind ({kinds[0]}, {len(caches):,} layers of one {next(iter(pages)):,} B "
            f"page): there is nothing to unify, pack or keep apart, so every planner gives vLLM's layout"
        )
    if len(pages) == 1:
        return (
            f"every page of {plan.model} is one size ({next(iter(pages)):,} B: {', '.join(kinds)}), so there is "
            f"nothing to pad or pack and these planners place the same groups at the same offsets"
        )
    return f"{plan.model}'s {len(caches):,} layers ({', '.join(kinds)}) come to the same groups at the same offsets"


@dataclasses.dataclass(frozen=True)
class Side:
    """One configuration of a review: its label ('A', 'B'), its plan, the plan's capacity at the side's budget, and
    how that budget was had (`budget`: {'rule': ..., its inputs})."""

    label: str
    plan: Plan
    capacity: Capacity
    budget: dict = dataclasses.field(default_factory=dict)

    def knobs(self) -> dict:
        """What shaped this side: the model, every knob of the plan (`Plan.knobs`, resolved; each kind's row format
        on its own) and the budget's rule and inputs (not its results)."""
        out: dict[str, Any] = {"model": self.plan.model, "planner": self.plan.planner}
        for name, value in self.plan.knobs:
            if name == "row_formats":
                out.update({f"row format ({kind})": fmt for kind, fmt in value.items()})
            elif name != "given":
                out[name] = value
        out["budget rule"] = self.budget.get("rule")
        out.update({f"budget {k}": v for k, v in self.budget.get("inputs", {}).items()})
        return out

    @property
    def title(self) -> str:
        """'A: model (what was planned)'."""
        return f"{self.label}: {self.plan.model} ({self.plan.setting or self.plan.planner})"


def _ratio(a, b) -> str:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool):
        return "same" if a == b else "differs"
    if a == b:
        return "same"
    return f"x{b / a:.2f}" if a else "-"


# (row, value of a side): what a reviewer reads, in the order the capacity line is built.
ROWS: tuple[tuple[str, Callable[[Side], Any]], ...] = (
    ("model", lambda s: s.plan.model),
    ("planned", lambda s: s.plan.setting),
    ("planner", lambda s: s.plan.planner),
    ("budget (B)", lambda s: s.capacity.budget_bytes),
    ("tokens per block", lambda s: s.capacity.tokens_per_block),
    ("bytes per block", lambda s: s.capacity.bytes_per_block),
    ("groups", lambda s: s.capacity.num_groups),
    ("blocks", lambda s: s.capacity.num_blocks),
    ("max_model_len", lambda s: s.capacity.max_model_len),
    ("blocks per request", lambda s: s.capacity.blocks_per_request),
    ("requests at once", lambda s: s.capacity.requests_fit),
    ("max concurrency", lambda s: round(s.capacity.max_concurrency, 2)),
    ("GPU KV cache size (tokens)", lambda s: s.capacity.kv_cache_tokens),
)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


@dataclasses.dataclass(frozen=True)
class SideBySide:
    """Two configurations side by side (module docstring): `differs` names what differs, `rows` what it does."""

    a: Side
    b: Side

    def __post_init__(self) -> None:
        for side in (self.a, self.b):
            require(isinstance(side, Side), f"side {side!r}: give a kvviz.core.sidebyside.Side")

    @property
    def differs(self) -> tuple[tuple[str, Any, Any], ...]:
        """(knob, A's value, B's value) for every knob, the model and the budget's inputs, that differs."""
        ka, kb = self.a.knobs(), self.b.knobs()
        names = list(dict.fromkeys([*ka, *kb]))
        return tuple((n, ka.get(n), kb.get(n)) for n in names if n != "given" and ka.get(n) != kb.get(n))

    @property
    def chosen(self) -> tuple[tuple[str, Any, Any], ...]:
        """What differs because it was chosen: the model, the planner, a knob given on either side, the budget's
        inputs (the rest of `differs` follows from these: a row format from the KV dtype, a block size from a state)."""
        given = {GIVEN_AS.get(n, n) for s in (self.a, self.b) for n in dict(s.plan.knobs).get("given", ())}
        return tuple(
            d for d in self.differs if d[0] in given or d[0] in ("model", "planner") or d[0].startswith("budget ")
        )

    @property
    def differs_text(self) -> str:
        """What was chosen differently, in words ('kv_cache_dtype bf16 -> fp8; ...'), or that nothing was."""
        return _words(self.chosen) or "nothing chosen differs: the two sides are one configuration"

    @property
    def follows_text(self) -> str:
        """What differs as a consequence of the choices (`differs` less `chosen`), in words, or ''."""
        return _words(d for d in self.differs if d not in self.chosen)

    def rows(self) -> list[list[str]]:
        """One row per quantity of ROWS: its name, A's and B's value, and B against A ('x1.98', 'same')."""
        return [[name, _cell(f(self.a)), _cell(f(self.b)), _ratio(f(self.a), f(self.b))] for name, f in ROWS]

    @property
    def header(self) -> list[str]:
        """The table's column names."""
        return ["", self.a.label, self.b.label, f"{self.b.label} vs {self.a.label}"]

    def text(self) -> str:
        """The review as text: each side's title, what differs, the table and each side's capacity line."""
        lines = [self.a.title, self.b.title, f"differs: {self.differs_text}"]
        lines += [f"and so: {self.follows_text}"] if self.follows_text else []
        lines.append("")
        lines.append(text_table(self.rows(), self.header))
        lines += ["", *(f"{s.label}: {s.capacity.line}" for s in (self.a, self.b))]
        return "\n".join(lines)

    def markdown(self) -> str:
        """The review as Markdown: a heading, each side, what differs (one bullet a knob), the table, the lines."""
        out = [f"### {self.a.plan.model} vs {self.b.plan.model}" if self.a.plan.model != self.b.plan.model else ""]
        if not out[0]:
            out = [f"### {self.a.plan.model}: {self.a.label} vs {self.b.label}"]
        out += ["", f"- **{self.a.label}**: {self.a.plan.setting}", f"- **{self.b.label}**: {self.b.plan.setting}", ""]
        out += ["What differs:", ""]
        out += [f"- `{n}`: {_md(x)} → {_md(y)}" for n, x, y in self.differs] or ["- nothing"]
        out += ["", "| " + " | ".join(self.header) + " |", "|---|---:|---:|---:|"]
        out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in self.rows()]
        out += ["", *(f"{s.label}: `{s.capacity.line}`  " for s in (self.a, self.b))]
        return "\n".join(out).rstrip() + "\n"

    def to_json(self) -> dict:
        """Both sides (the model, every knob, the budget with its rule and inputs, the capacity), what differs and
        the table's rows."""
        return {
            "sides": [
                {"label": s.label, "knobs": s.knobs(), "budget": s.budget, "capacity": s.capacity.to_json()}
                for s in (self.a, self.b)
            ],
            "differs": [{"knob": n, self.a.label: x, self.b.label: y} for n, x, y in self.differs],
            "rows": [dict(zip(["quantity", self.a.label, self.b.label, "change"], r)) for r in self.rows()],
        }


# Plan.knobs' name of an Options field given under another name.
GIVEN_AS = {"kv_dtype": "kv_cache_dtype"}


def _words(differs) -> str:
    return "; ".join(f"{n} {_cell(x)} -> {_cell(y)}" for n, x, y in differs)


def _md(value) -> str:
    return _cell(value).replace("|", "\\|")
