"""A plan as a review reads it: one row per group of each pool (`plan_rows`), as a pandas DataFrame
(`plan_dataframe`, pandas imported inside) or as Markdown (`plan_markdown`, no pandas).

Every number is the layout's own (`Layout.group_total`, `group_unused`, `binding_group`); a separate-pools
plan has one row per pool, none of which binds. Imports no plan (kvviz.core.plan imports this on first use).
"""

from __future__ import annotations

__all__ = ["PLAN_COLUMNS", "plan_rows", "plan_dataframe", "plan_markdown", "markdown_table"]

PLAN_COLUMNS = (
    "pool",
    "group",
    "layers",
    "kinds",
    "page_bytes",
    "total_bytes",
    "unused_bytes",
    "block_stride",
    "binds",
)


def plan_rows(plan) -> list[dict]:
    """One dict per group of each pool, keyed by PLAN_COLUMNS (pool: the pool's index)."""
    rows = []
    for index, lay in enumerate(plan.pools):
        for i, g in enumerate(lay.groups):
            rows.append(
                {
                    "pool": index,
                    "group": g.name,
                    "layers": len(g.layers),
                    "kinds": ", ".join(dict.fromkeys(c.kind.label for c in g.layers)),
                    "page_bytes": max(c.page_bytes for c in g.layers),
                    "total_bytes": lay.group_total(i),
                    "unused_bytes": lay.group_unused(i),
                    "block_stride": lay.block_stride,
                    "binds": len(plan.pools) == 1 and i == lay.binding_group,
                }
            )
    return rows


def plan_dataframe(plan):
    """`plan_rows` as a pandas DataFrame (columns PLAN_COLUMNS)."""
    import pandas as pd

    return pd.DataFrame(plan_rows(plan), columns=list(PLAN_COLUMNS))


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def plan_markdown(plan, budget_bytes: int | None = None) -> str:
    """The plan as Markdown: a heading (model), its header line (`Plan.describe`: what was planned), the
    table of `plan_rows`, and with `budget_bytes` vLLM's capacity line (`Capacity.line`)."""
    lines = [f"### {plan.model}: {plan.planner} layout", "", plan.describe or plan.model, ""]
    lines.append("| " + " | ".join(PLAN_COLUMNS) + " |")
    lines.append("|" + "|".join("---" if c in ("group", "kinds") else "---:" for c in PLAN_COLUMNS) + "|")
    for row in plan_rows(plan):
        lines.append("| " + " | ".join(_cell(row[c]) for c in PLAN_COLUMNS) + " |")
    if budget_bytes is not None:
        lines += ["", plan.capacity(budget_bytes).line]
    return "\n".join(lines) + "\n"


def markdown_table(rows, header) -> str:
    """Rows of cells (as `kvviz.core.layout.text_table` takes them) as a Markdown table: the first column
    left-aligned, the others right-aligned, `|` in a cell escaped."""
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
