"""Figures of kvviz.engines: each engine's byte map, and engines side by side (matplotlib, no
pyplot, imported lazily; each returns kvviz.views's KvvizFigure, which shows itself in Jupyter)."""

from __future__ import annotations

from kvviz.base.defaults import GIB
from kvviz.engines.common import EnginePlan, EngineRow, token_count_lines
from kvviz.engines.maps import ByteMap, byte_map

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
    fig = KvvizFigure(figsize=(9, 0.9 + 0.32 * (len(bars) + bool(hidden))))
    ax = fig.add_subplot()
    for y, b in enumerate(bars):
        for r in b.regions:
            ax.barh(
                y,
                r.size / b.size,
                left=r.offset / b.size,
                color=COLOURS.get(r.kind, "#999999"),
                edgecolor="white",
                linewidth=0.3,
                gid=f"{b.name}/{r.name}",
            )
        ax.text(1.01, y, f"{b.size:,} B", va="center", fontsize=7)
    labels = [b.name + (" (inside)" if b.zoom else "") for b in bars]
    if hidden:
        labels.append(f"... {hidden} more buffers of the same shape")
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.18)
    ax.set_xlabel("fraction of the buffer's bytes (offset 0 at the left)")
    kinds = sorted({r.kind for b in bars for r in b.regions})
    ax.legend(handles=[_patch(k) for k in kinds], fontsize=7, loc="lower right", ncols=len(kinds))
    ax.set_title(title or f"{m.engine}: {m.model} ({m.arrangement}), {m.total_bytes:,} B", fontsize=9)
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
    from kvviz.views import KvvizFigure

    fig = KvvizFigure(figsize=(11, 5.2))
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
                ax.text(i, 0, "not planned", rotation=90, ha="center", va="bottom", fontsize=7)
                continue
            if value is None:
                ax.bar(i, p.kv_bytes, color="#55a868", gid=f"{names[i]}/used")
                ax.bar(i, p.waste_bytes, bottom=p.kv_bytes, color="#c44e52", gid=f"{names[i]}/waste")
                ax.text(i, p.kv_budget_bytes, f"waste {p.waste_bytes:,} B", ha="center", va="bottom", fontsize=7)
            else:
                ax.bar(i, value(p), color=f"C{i}", gid=f"{names[i]}/{title}")
                ax.text(i, value(p), f"{value(p):,}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(names)), names)
        ax.set_title(title, fontsize=9)
    lines = [f"{r.engine}: {r.plan.log_line if r.plan else r.refusal}" for r in rows] + token_count_lines(rows)
    fig.text(0.01, 0.01, "\n".join(_clip(t) for t in lines), fontsize=6.5, family="monospace", va="bottom")
    what = f"{model} ({setting})" if setting else model
    fig.suptitle(f"{what}: one KV budget of {budget_bytes:,} B ({budget_bytes / GIB:.2f} GiB) per engine", fontsize=10)
    fig.subplots_adjust(bottom=0.1 + 0.035 * len(lines), top=0.86, wspace=0.35)
    return fig


def _clip(text: str, width: int = 170) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
