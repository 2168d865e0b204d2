"""Figures of kvviz.engines: each engine's byte map, and engines side by side (matplotlib, no
pyplot, imported lazily; each returns kvviz.views's KvvizFigure, which shows itself in Jupyter)."""

from __future__ import annotations

import math

from kvviz.base.defaults import GIB
from kvviz.engines.common import EnginePlan, EngineRow, token_count_lines
from kvviz.engines.maps import ByteMap, byte_map
from kvviz.views.style import pt

COLOURS = {
    "k": "#4c72b0",
    "v": "#dd8452",
    "kv": "#55a868",
    "latent": "#8172b3",
    "conv": "#937860",
    "ssm": "#da8bc3",
    "state": "#ccb974",
    "pad": "#c44e52",
    "free": "#eeeeee",
    "swa": "#64b5cd",
    "full": "#4c72b0",
}
MAX_BARS = 24  # per-layer buffers beyond this are summarised in one line


def map_figure(m: ByteMap, *, title: str | None = None):
    """One bar per buffer (one per layer for SGLang, one per pool plus one block's inside for
    TensorRT-LLM, one shared buffer for SGLang's unified memory), each region coloured by what it
    holds; each bar's length is its own byte count (the x axis is the fraction of that buffer)."""
    from kvviz.views import KvvizFigure

    bars = list(m.buffers[:MAX_BARS])
    hidden = len(m.buffers) - len(bars)
    fig = KvvizFigure(figsize=(11, 1.3 + 0.36 * (len(bars) + bool(hidden))))
    ax = fig.add_subplot()
    for y, b in enumerate(bars):
        for r in b.regions:
            ax.barh(
                y,
                r.size / b.size,
                left=r.start / b.size,
                color=COLOURS.get(r.kind, "#999999"),
                edgecolor="white",
                linewidth=0.3,
                gid=f"{b.name}/{r.name}",
            )
        ax.text(1.01, y, f"{b.size:,} B", va="center", fontsize=pt("small"))
    labels = [b.name + (" (inside)" if b.zoom else "") for b in bars]
    if hidden:
        labels.append(f"... {hidden} more buffers of the same shape")
    ax.set_yticks(range(len(labels)), labels, fontsize=pt("small"))
    ax.invert_yaxis()
    ax.set_xlim(0, 1.25)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])  # fractions of a buffer; the room past 1 holds the byte counts
    ax.set_xlabel("fraction of the buffer's bytes (offset 0 at the left)")
    kinds = sorted({r.kind for b in bars for r in b.regions})
    ax.legend(handles=[_patch(k) for k in kinds], fontsize=pt("small"), loc="lower right", ncols=len(kinds))
    ax.set_title(title or f"{m.engine}: {m.model} ({m.arrangement}), {m.total_bytes:,} B", fontsize=pt("heading"))
    fig.tight_layout()
    return fig


def _patch(kind: str):
    from matplotlib.patches import Patch

    return Patch(color=COLOURS.get(kind, "#999999"), label=kind)


def plan_figure(plan: EnginePlan, **kw):
    """map_figure of one EnginePlan's byte map."""
    return map_figure(byte_map(plan), **kw)


def compare_figure(rows: tuple[EngineRow, ...], *, model: str, budget_bytes: int, setting: str = ""):
    """Engines side by side at one budget: token capacity, requests at once, and the budget's
    bytes used / wasted, one bar group per engine; an engine with no plan shows its one-line
    reason; each engine's own log line is printed under the bars. The title names the model and
    `setting`, what was planned (kvviz.vllm.plan.planned_setting: the KV dtype, TP, every knob given)."""
    from matplotlib.ticker import FuncFormatter

    from kvviz.views import KvvizFigure

    lines = [f"{r.engine}: {r.plan.log_line if r.plan else r.refusal}" for r in rows] + token_count_lines(rows)
    width, line_in = 14.0, 1.25 * pt("small") / 72  # the log lines under the bars: monospace, one a line
    fig = KvvizFigure(figsize=(width, 5.2 + line_in * len(lines)))
    axes = fig.subplots(1, 3)
    names = [r.engine for r in rows]
    plans = [r.plan for r in rows]
    for ax, (title, value) in zip(
        axes,
        (
            ("token capacity (each engine's own count)", lambda p: p.token_capacity),
            ("requests of max_model_len at once", lambda p: p.full_length_requests),
            ("KV budget bytes used / wasted", None),
        ),
    ):
        for i, p in enumerate(plans):
            if p is None:
                ax.text(i, 0, "not planned", rotation=90, ha="center", va="bottom", fontsize=pt("small"))
                continue
            if value is None:
                ax.bar(i, p.kv_bytes, color="#55a868", gid=f"{names[i]}/used")
                ax.bar(i, p.waste_bytes, bottom=p.kv_bytes, color="#c44e52", gid=f"{names[i]}/waste")
                ax.text(
                    i, p.kv_budget_bytes, f"waste\n{p.waste_bytes:,}\nB", ha="center", va="bottom", fontsize=pt("small")
                )
            else:
                ax.bar(i, value(p), color=f"C{i}", gid=f"{names[i]}/{title}")
                ax.text(i, value(p), f"{value(p):,}", ha="center", va="bottom", fontsize=pt("small"))
        ax.set_xticks(range(len(names)), names)
        top = ax.get_ylim()[1] * 1.25  # room for the labels over the bars, under the title
        if value is None:  # bytes: ticks at whole GiB steps (1, 2, 4, ... GiB), at most 8 of them
            step = GIB * 2 ** max(0, math.ceil(math.log2(top / GIB / 8)))
            ax.set_yticks([k * step for k in range(int(top // step) + 1)])
        ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= top])  # no tick label past the top
        ax.set_ylim(0, top)
        # tick labels in full (no '1e10' offset text over the bars' labels): counts separated, bytes in GiB
        ax.yaxis.set_major_formatter(FuncFormatter(_gib_tick if value is None else _count_tick))
        if value is None:
            ax.set_ylabel("GiB")
        ax.set_title(title, fontsize=pt("heading"), pad=20)  # clear of the top tick label
    chars = int((width - 0.3) / (0.6 * pt("small") / 72))  # a monospace character is 0.6 em
    fig.text(
        0.01, 0.01, "\n".join(_clip(t, chars) for t in lines), fontsize=pt("small"), family="monospace", va="bottom"
    )
    what = f"{model} ({setting})" if setting else model
    fig.suptitle(
        f"{what}: one KV budget of {budget_bytes:,} B ({budget_bytes / GIB:.2f} GiB) per engine", fontsize=pt("title")
    )
    height = fig.get_figheight()
    fig.subplots_adjust(bottom=(0.7 + line_in * len(lines)) / height, top=1 - 1.05 / height, wspace=0.45)
    return fig


def _count_tick(v: float, _pos) -> str:
    return f"{v:,.0f}" if v == int(v) else f"{v:g}"


def _gib_tick(v: float, _pos) -> str:
    return f"{v / GIB:g}"


def _clip(text: str, width: int = 170) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
