"""The HTML page of a report: its figures inlined (`RenderedFigure`), the capacity table and the
style; `kvviz.views.report` renders the figures and writes the folder."""

from __future__ import annotations

import base64
import dataclasses
import html

from kvviz.base.inputs import printable
from kvviz.base.text import plural
from kvviz.core.layout import Layout


@dataclasses.dataclass(frozen=True)
class RenderedFigure:
    """One figure of a report: its file stem, caption and PNG bytes."""

    name: str
    caption: str
    png: bytes


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


def report_html(
    layout: Layout,
    figures: list[RenderedFigure],
    *,
    title: str,
    before: Layout | None = None,
    after: Layout | None = None,
    note: str | None = None,
) -> str:
    """One self-contained HTML page: summary (and `note`, a paragraph under it), figures (inline base64 PNG),
    tables, derivation."""
    esc = html.escape
    summary = (
        f"{layout.planner} layout: {plural(len(layout.groups), 'group')}, {plural(layout.num_layers, 'layer cache')}, "
        f"block stride {layout.block_stride:,} B, binding group {layout.binding_label}."
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{esc(title)}</h1>",
        f"<p>{esc(summary)}</p>",
    ]
    if note:
        parts.append(f'<p class="note">{esc(printable(note))}</p>')
    if before is not None and after is not None:
        pct = 100.0 * (after.block_stride - before.block_stride) / before.block_stride
        parts.append(
            f"<p>Before ({esc(before.planner)}): {before.block_stride:,} B per block; after "
            f"({esc(after.planner)}): {after.block_stride:,} B per block ({pct:+.2f}%).</p>"
        )
    parts += [
        "<h2>Text byte map</h2>",
        f"<pre>{esc(layout.text_map())}</pre>",
        "<h2>How the stride is derived</h2>",
        f"<pre>{esc(layout.explain())}</pre>",
    ]
    parts.append("<h2>Figures</h2>")
    for f in figures:
        data = base64.b64encode(f.png).decode("ascii")
        parts.append(
            f'<figure id="{esc(f.name)}"><img alt="{esc(f.caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{esc(f.caption)} Also in {esc(f.name)}.png / {esc(f.name)}.svg.</figcaption>"
            "</figure>"
        )
    parts += [
        "<h2>Groups</h2>",
        _table_html(layout.group_table()),
        "<h2>Layout (every layer's page)</h2>",
        f"<details><summary>{layout.num_layers} rows</summary>",
        _table_html(layout.to_dataframe()),
        "</details>",
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(parts)
