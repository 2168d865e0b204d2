"""A layout's figures as PNG + SVG files and one self-contained `report.html` (`kvviz render`).

The HTML holds everything it shows: the figures as base64 PNGs, the group and layout tables,
the text byte map and the stride derivation. It links to nothing outside itself.

Writing never follows a symbolic link: each file is written to a fresh temporary file inside the
output folder and renamed into place, an output name that is a link is refused, and an
interrupted run leaves no half-written file under its final name.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import html
import os
import tempfile
from pathlib import Path
from typing import Callable

from . import plot
from .errors import KvvizError, require
from .inputs import DPI_RANGE
from .core.layout import Layout, Placement


# Blocks of the small pool a hybrid report's layer-plane figure shows: every block's page is drawn.
POOL_PLANES_BLOCKS = plot.PLANE_PAGES_MAX_BLOCKS


@dataclasses.dataclass(frozen=True)
class RenderedFigure:
    """One figure of a report: its file stem, caption and PNG bytes."""

    name: str
    caption: str
    png: bytes


def prepare_out_dir(path, *, what: str = "out_dir") -> Path:
    """Create the output folder (parents too) and check it takes new files; a KvvizError naming
    `what` if that is impossible."""
    require(str(path) != "", f"{what} '': needs a folder name")
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KvvizError(f"{what} {str(p)!r}: cannot create the folder ({e.strerror or e})") from None
    require(p.is_dir(), f"{what} {str(p)!r}: is not a folder")
    try:  # a probe under a fresh name (O_EXCL): never opens an existing file or link
        fd, probe = tempfile.mkstemp(prefix=".kvviz-write-test-", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise KvvizError(f"{what} {str(p)!r}: cannot write there ({e.strerror or e})") from None
    return p


def write_file(path: Path, data: bytes | str | Callable[[Path], None]) -> None:
    """Write `data` (bytes, text, or a function that writes a given path) to `path` through a
    temporary file in the same folder renamed into place: never follows a link, and never leaves
    a half-written file under the final name."""
    require(not path.is_symlink(), f"out_dir: {str(path)!r} is a symbolic link; refusing to write through it")
    tmp = None
    try:
        # Same suffix, so a writer that picks the format from the name (plot.save_figure) still can.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a plain new file gets 0666 - umask
        with os.fdopen(fd, "wb") as f:
            if not callable(data):
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
        if callable(data):
            data(Path(tmp))
        os.replace(tmp, path)  # replaces a link itself, never its target
        tmp = None
    except OSError as e:
        raise KvvizError(f"out_dir: cannot write {str(path)!r} ({e.strerror or e})") from None
    finally:
        if tmp is not None:  # failed or interrupted (KeyboardInterrupt passes through here)
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def report_figures(layout: Layout, *, before: Layout | None = None, after: Layout | None = None):
    """(name, caption, build) for each figure of a report, in report order; build() returns the Figure."""
    yield ("block-map", f"Block map: {layout.planner} layout, block stride {layout.block_stride:,} B, "
           f"binding group {layout.binding_label}.", lambda: plot.block_map(layout))
    # One page size: vLLM resolves its default layer-outermost arrangement (validate_kv_cache_layout;
    # docs/hybrid.md#hybrid-planners); mixed pages (DeepSeek V4) pack block-outermost.
    if len({p.page_bytes for p in layout.placements}) == 1:
        n = POOL_PLANES_BLOCKS
        yield ("pool-planes", f"The pool as layer planes x blocks (layer-outermost, vLLM's default), {n} blocks: "
               f"layer stride = {n} x page, block stride = page; every tensor starts at byte 0 of the pool.",
               lambda: plot.pool_planes(layout, n))
    if before is not None and after is not None:
        pct = 100.0 * (after.block_stride - before.block_stride) / before.block_stride
        yield ("before-after", f"Before ({before.planner}) and after ({after.planner}): block stride "
               f"{before.block_stride:,} B -> {after.block_stride:,} B ({pct:+.2f}%).",
               lambda: plot.before_after(before, after))
    # One anatomy per row format, of its largest page (first seen on ties); pages known only by
    # their size have no anatomy.
    largest: dict[str, Placement] = {}
    for p in layout.placements:
        fmt = p.cache.row_format.name
        if fmt != "opaque" and (fmt not in largest or p.page_bytes > largest[fmt].page_bytes):
            largest[fmt] = p
    for fmt, p in largest.items():
        yield (f"anatomy-{fmt}", f"Page anatomy of {p.name} ({p.cache.kind.label}, {fmt}).",
               lambda c=p.cache: plot.page_anatomy(c))


def render_report(out_dir, *, layout: Layout, before: Layout | None = None, after: Layout | None = None,
                  title: str, dpi: int = plot.DEFAULT_DPI, svg: bool = True) -> list[Path]:
    """Write every figure as <name>.png (and <name>.svg) plus report.html; return the paths written
    (report.html last)."""
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    require((before is None) == (after is None), "before/after: give both layouts or neither")
    low, high = DPI_RANGE
    require(type(dpi) is int and low <= dpi <= high, f"dpi={dpi!r}: must be an integer from {low} to {high}")
    out = prepare_out_dir(out_dir)
    figures = list(report_figures(layout, before=before, after=after))
    names = [f"{n}.{ext}" for n, _, _ in figures for ext in ("png", "svg")[: 1 + svg]] + ["report.html"]
    for name in names:  # refuse a link before writing anything
        require(not (out / name).is_symlink(),
                f"out_dir: {str(out / name)!r} is a symbolic link; refusing to write through it")
    written: list[Path] = []
    rendered = []
    for name, caption, build in figures:
        fig = build()
        png = plot.to_png_bytes(fig, dpi=dpi)
        write_file(out / f"{name}.png", png)
        written.append(out / f"{name}.png")
        if svg:
            write_file(out / f"{name}.svg", lambda tmp, fig=fig: plot.save_figure(fig, tmp, dpi=dpi))
            written.append(out / f"{name}.svg")
        rendered.append(RenderedFigure(name, caption, png))
    write_file(out / "report.html", report_html(layout, rendered, title=title, before=before, after=after))
    written.append(out / "report.html")
    return written


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: 12px; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: .9em; color: #555; }
table.dataframe { border-collapse: collapse; font-size: 12px; }
table.dataframe td, table.dataframe th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
details summary { cursor: pointer; margin: .5em 0; }
"""


def _table_html(df) -> str:
    """A DataFrame as an HTML table, byte counts with thousands separators."""
    ints = {c: "{:,}".format for c in df.columns if df[c].dtype.kind in "iu"}
    return df.to_html(index=False, escape=True, formatters=ints)


def report_html(layout: Layout, figures: list[RenderedFigure], *, title: str, before: Layout | None = None,
                after: Layout | None = None) -> str:
    """One self-contained HTML page: summary, figures (inline base64 PNG), tables, derivation."""
    esc = html.escape
    summary = (f"{layout.planner} layout: {len(layout.groups)} groups, {layout.num_layers} layer caches, "
               f"block stride {layout.block_stride:,} B, binding group {layout.binding_label}.")
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{esc(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
        f"<h1>{esc(title)}</h1>", f"<p>{esc(summary)}</p>",
    ]
    if before is not None and after is not None:
        pct = 100.0 * (after.block_stride - before.block_stride) / before.block_stride
        parts.append(f"<p>Before ({esc(before.planner)}): {before.block_stride:,} B per block; after "
                     f"({esc(after.planner)}): {after.block_stride:,} B per block ({pct:+.2f}%).</p>")
    parts += ["<h2>Text byte map</h2>", f"<pre>{esc(layout.text_map())}</pre>",
              "<h2>How the stride is derived</h2>", f"<pre>{esc(layout.explain())}</pre>"]
    parts.append("<h2>Figures</h2>")
    for f in figures:
        data = base64.b64encode(f.png).decode("ascii")
        parts.append(f'<figure id="{esc(f.name)}"><img alt="{esc(f.caption)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{esc(f.caption)} Also in {esc(f.name)}.png / {esc(f.name)}.svg.</figcaption>"
                     "</figure>")
    parts += ["<h2>Groups</h2>", _table_html(layout.group_table()),
              "<h2>Layout (every layer's page)</h2>",
              f"<details><summary>{layout.num_layers} rows</summary>", _table_html(layout.to_dataframe()),
              "</details>", "</body>", "</html>", ""]
    return "\n".join(parts)
