"""The HTML the explorer shows of a plan: the group (or pool) table and the planners side by side.

Plain functions of a `Plan` and its `Capacity` records, with no ipywidgets, so that they are
built (and tested) without a notebook; `kvviz.explorer.app` puts them in its widgets.
"""

from __future__ import annotations

import html

from kvviz.base.inputs import checked, items_of
from kvviz.base.text import plural
from kvviz.core.plan import Plan
from kvviz.explorer.knob_spec import CAPACITY, PLAN

# white-space: nowrap keeps group names (c4-state-a) and numbers on one line.
TABLE_STYLE = (
    "<style>.kvviz-groups{border-collapse:collapse;font-size:12px}"
    ".kvviz-groups th,.kvviz-groups td{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd;"
    "white-space:nowrap}"
    ".kvviz-groups th:first-child,.kvviz-groups td:first-child{text-align:left}</style>"
)
# The derivation keeps its lines as they are (no wrapping inside a term).
PRE_STYLE = "white-space:pre;overflow-x:auto;margin:0;font-size:12px"

GROUP_COLUMNS = ("group", "layers", "total_bytes", "unused_bytes", "binds_stride")


@checked(plan=PLAN)
def group_table_html(plan: Plan) -> str:
    """The plan's group table (one row per group; separate pools: per pool, its own block) as an
    HTML table, written here rather than by pandas: it is rebuilt on every change of layout."""
    columns = (("pool",) + GROUP_COLUMNS[1:]) if len(plan.pools) > 1 else GROUP_COLUMNS
    head = "".join(f"<th>{c}</th>" for c in columns)
    rows = "".join(
        f"<tr><td>{html.escape(g.name)}</td><td>{len(g.layers)}</td><td>{lay.group_total(i):,}</td>"
        f"<td>{lay.group_unused(i):,}</td><td>{'binds' if i == lay.binding_group and len(plan.pools) == 1 else ''}"
        f"</td></tr>"
        for lay in plan.pools
        for i, g in enumerate(lay.groups)
    )
    return f'{TABLE_STYLE}<table class="kvviz-groups"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


CHOSEN_ROW = ' style="font-weight:bold"'  # the planner the map and numbers show
COMPARE_COLUMNS = (
    "planner",
    "tokens/block",
    "bytes/block",
    "groups",
    "waste B",
    "waste %",
    "admission B/request",
    "blocks",
    "requests",
    "concurrency",
)


@checked(chosen=CAPACITY, all_caps=items_of(CAPACITY))
def summary_html(chosen, all_caps) -> str:
    """The waste split and admission of the chosen planner, and every planner side by side."""
    s, w = chosen, chosen.waste
    lines = [
        f"waste {w.waste_bytes:,} B of {w.total_bytes:,} B ({w.waste_pct:.2f}%) in one block of each of "
        f"{plural(s.num_groups, 'pool' if s.planner == 'separate' else 'group')}: "
        f"empty slots {w.empty_slot_bytes:,} B, "
        f"padded pages {w.padded_state_bytes:,} B, unused tail {w.unused_tail_bytes:,} B",
        f"vLLM's admission estimate: {s.admission_bytes_per_request:,} B per request of {s.max_model_len:,} tokens "
        f"({plural(s.blocks_per_request, 'block')}); {plural(s.requests_fit, 'whole request')} "
        f"{'fits' if s.requests_fit == 1 else 'fit'}, concurrency {s.concurrency_text}",
    ]
    head = "".join(f"<th>{c}</th>" for c in COMPARE_COLUMNS)
    rows = "".join(
        f"<tr{CHOSEN_ROW if x.planner == s.planner else ''}><td>{x.planner}</td>"
        f"<td>{x.tokens_per_block or '-'}</td><td>{x.bytes_per_block:,}</td><td>{x.num_groups}</td>"
        f"<td>{x.waste.waste_bytes:,}</td><td>{x.waste.waste_pct:.2f}</td><td>{x.admission_bytes_per_request:,}</td>"
        f"<td>{x.num_blocks:,}</td><td>{x.requests_fit:,}</td><td>{x.concurrency_text}</td></tr>"
        for x in all_caps
    )
    text = "".join(f'<div class="kvviz-summary-line">{html.escape(line, quote=False)}</div>' for line in lines)
    return (
        f'{TABLE_STYLE}<div style="font-size:13px">{text}</div>'
        f'<table class="kvviz-groups kvviz-compare"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    )
