"""A layout's figures as PNG + SVG files and one self-contained `report.html` (`kvviz render`).

The HTML holds everything it shows: the figures as base64 PNGs, the group and layout tables,
the text byte map and the stride derivation. It links to nothing outside itself.

Every file is written through kvviz.views.staging: never through a symbolic link, renamed into place
only once all of them are written (a run that fails or is interrupted half way leaves the previous
report as it was and removes its temporary files), and landed under the folder's lock, so renders
into one folder at once each land whole and never mix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kvviz.base.errors import require
from kvviz.base.inputs import DPI_RANGE, printable, short_repr
from kvviz.core.accept import plan_of, pools_of
from kvviz.core.layout import Layout, Placement
from kvviz.views.anatomy import page_anatomy
from kvviz.views.blockmap import block_map
from kvviz.views.compare import before_after
from kvviz.views.planes import pool_planes
from kvviz.views.planes_data import PLANE_PAGES_MAX_BLOCKS
from kvviz.views.query import DEFAULT_DPI, save_figure, to_png_bytes
from kvviz.views.report_html import RenderedFigure, report_html
from kvviz.views.staging import Staged, prepare_out_dir, prepare_sub_dir, sweep_stale, write_file

__all__ = [
    "render_report",
    "plan_reports",
    "report_figures",
    "Staged",
    "prepare_out_dir",
    "prepare_sub_dir",
    "sweep_stale",
    "write_file",
]

# Blocks of the small pool a hybrid report's layer-plane figure shows: every block's page is drawn.
POOL_PLANES_BLOCKS = PLANE_PAGES_MAX_BLOCKS


def report_figures(layout: Layout, *, before: Layout | None = None, after: Layout | None = None):
    """(name, caption, build) for each figure of a report, in report order; build() returns the Figure."""
    yield (
        "block-map",
        f"Block map: {layout.planner} layout, block stride {layout.block_stride:,} B, "
        f"binding group {layout.binding_label}.",
        lambda: block_map(layout),
    )
    # One page size: vLLM resolves its default layer-outermost arrangement (validate_kv_cache_layout;
    # docs/hybrid.md#hybrid-planners); mixed pages (DeepSeek V4) pack block-outermost.
    if len({p.page_bytes for p in layout.placements}) == 1:
        n = POOL_PLANES_BLOCKS
        yield (
            "pool-planes",
            f"The pool as layer planes x blocks (layer-outermost, vLLM's default), {n} blocks: "
            f"layer stride = {n} x page, block stride = page; every tensor starts at byte 0 of the pool.",
            lambda: pool_planes(layout, n),
        )
    if before is not None and after is not None:
        pct = 100.0 * (after.block_stride - before.block_stride) / before.block_stride
        yield (
            "before-after",
            f"Before ({before.planner}) and after ({after.planner}): block stride "
            f"{before.block_stride:,} B -> {after.block_stride:,} B ({pct:+.2f}%).",
            lambda: before_after(before, after),
        )
    # One anatomy per row format, of its largest page (first seen on ties); pages known only by
    # their size have no anatomy.
    largest: dict[str, Placement] = {}
    for p in layout.placements:
        fmt = p.cache.row_format.name
        if fmt != "opaque" and (fmt not in largest or p.page_bytes > largest[fmt].page_bytes):
            largest[fmt] = p
    for fmt, p in largest.items():
        yield (
            f"anatomy-{fmt}",
            f"Page anatomy of {p.name} ({p.cache.kind.label}, {fmt}).",
            lambda c=p.cache: page_anatomy(c),
        )


def render_report(
    out_dir,
    folder=None,
    *,
    layout: Layout | None = None,
    before: Layout | None = None,
    after: Layout | None = None,
    title: str | None = None,
    dpi: int = DEFAULT_DPI,
    svg: bool = True,
    staged: Staged | None = None,
    note: str | None = None,
) -> list[Path]:
    """Write every figure as <name>.png (and <name>.svg) plus report.html; return the paths written
    (report.html last). Every file is written under a temporary name first and renamed into place
    only when all are written, so a failure leaves the previous report whole. `note`: a paragraph under
    the summary (why a before/after is left out, `kvviz render`). With `staged` given,
    the files are only added to it: they take their names when the caller commits it (several
    reports at once, `kvviz render` of separate pools).

    Called `render_report(plan, folder)` (a Plan or Layout, then the folder; before/after may be Plans of
    one pool): the title says what was planned, and a separate-pools plan writes one report per pool in
    folder/pool-<name>/, as `kvviz render` does (`plan_reports`). Or `render_report(folder, layout=...)`."""
    if layout is None:
        require(note is None, "note: give it with render_report(folder, layout=...)")
        return plan_reports(out_dir, folder, before=before, after=after, title=title, dpi=dpi, svg=svg, staged=staged)
    require(folder is None, "folder: give the folder once (render_report(folder, layout=...) or (plan, folder))")
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    title = f"{layout.planner} layout" if title is None else title
    require((before is None) == (after is None), "before/after: give both layouts or neither")
    require(
        isinstance(out_dir, (str, os.PathLike)),
        f"out_dir={short_repr(out_dir)}: give a folder (a str or pathlib.Path)",
    )
    require(isinstance(title, str), f"title={short_repr(title)}: must be a string (the report's heading)")
    require(note is None or isinstance(note, str), f"note={short_repr(note)}: must be a string or None")
    title = printable(title)  # a lone surrogate (bytes of argv that were not UTF-8) shown as its escape
    low, high = DPI_RANGE
    require(type(dpi) is int and low <= dpi <= high, f"dpi={dpi!r}: must be an integer from {low} to {high}")
    out = prepare_out_dir(out_dir)
    figures = list(report_figures(layout, before=before, after=after))
    names = [f"{n}.{ext}" for n, _, _ in figures for ext in ("png", "svg")[: 1 + svg]] + ["report.html"]
    for name in names:  # refuse a link before writing anything
        require(
            not (out / name).is_symlink(),
            f"out_dir: {printable(out / name)!r} is a symbolic link; refusing to write through it",
        )
    if staged is None:
        with Staged() as own:
            return render_report(
                out, layout=layout, before=before, after=after, title=title, dpi=dpi, svg=svg, staged=own, note=note
            )
    staged.replaces(out, REPORT_FIGURE, names)  # an earlier report's other figures go when this one lands
    rendered = []
    for name, caption, build in figures:
        fig = build()
        png = to_png_bytes(fig, dpi=dpi)
        staged.add(out / f"{name}.png", png)
        if svg:
            staged.add(out / f"{name}.svg", lambda tmp, fig=fig: save_figure(fig, tmp, dpi=dpi))
        rendered.append(RenderedFigure(name, caption, png))
    staged.add(out / "report.html", report_html(layout, rendered, title=title, before=before, after=after, note=note))
    return [out / name for name in names]


def _one_pool(value, name: str) -> Layout | None:
    if value is None:
        return None
    pools = pools_of(value, name)
    require(len(pools) == 1, f"{name}: a before/after compares one pool with one; this plan has {len(pools)}")
    return pools[0]


def plan_reports(source, folder, *, before=None, after=None, title=None, staged=None, **options) -> list[Path]:
    """`render_report(plan, folder)`: one report of a Plan or Layout (kvviz.core.accept.pools_of), titled with
    the model and what was planned (`Plan.setting`); a separate-pools plan: one report per pool, each in
    folder/pool-<name>/, all renamed into place together."""
    pools, plan = pools_of(source, "plan"), plan_of(source)
    if title is None:
        title = f"{pools[0].planner} layout" if plan is None else f"{plan.model}: {plan.planner} layout"
        title += f" ({plan.setting})" if plan is not None and plan.setting else ""
    pair = {"before": _one_pool(before, "before"), "after": _one_pool(after, "after")}
    if len(pools) == 1:
        return render_report(folder, layout=pools[0], title=title, staged=staged, **pair, **options)
    require(before is None and after is None, "before/after: a separate-pools plan's report has no before/after")
    if staged is None:
        with Staged() as own:
            return plan_reports(source, folder, title=title, staged=own, **options)
    out, paths = prepare_out_dir(folder), []
    for pool in pools:
        name = pool.groups[0].name
        sub = prepare_sub_dir(out, f"pool-{name}")
        paths += render_report(sub, layout=pool, title=f"{title}: pool {name}", staged=staged, **options)
    return paths


# The figure files a report writes (report_figures' names): a report folder's other ones belong to
# an earlier report (another model's anatomy formats, its before/after) and go when this one lands.
REPORT_FIGURE = re.compile(r"(block-map|pool-planes|before-after|anatomy-[A-Za-z0-9_.+-]+)\.(png|svg)")
