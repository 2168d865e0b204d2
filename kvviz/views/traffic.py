"""The pool under traffic, drawn (matplotlib, no pyplot): occupancy per group over time (stacked), the
scheduler's queues over time, and the time-lapse map of the pool's blocks at one step. Each figure draws
one plain data object of `kvviz.views.traffic_data`."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch

from kvviz.views.canvas import new_figure, place_axes
from kvviz.views.style import format_bytes
from kvviz.views.traffic_data import CACHED_FREE, HELD, OccupancyData, PoolMapData, QueueData

__all__ = ["occupancy", "queues", "pool_map", "group_color", "block_rgb", "FREE_RGB", "NULL_RGB"]

# One hue per group (tab10), the same in all three figures.
_GROUP_HUES = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974")
FREE_RGB = (1.0, 1.0, 1.0)
NULL_RGB = (0.1, 0.1, 0.1)
_CACHED_COLOR = "#bdbdbd"
_SHADES = (0.0, 0.18, 0.36, -0.18, 0.27, 0.09)  # lighter (+) or darker (-) per request, cycling


def group_color(i: int) -> str:
    """The colour of group `i` in every traffic figure."""
    return _GROUP_HUES[i % len(_GROUP_HUES)]


def _shade(rgb, f: float):
    if f >= 0:
        return tuple(c + (1 - c) * f for c in rgb)
    return tuple(c * (1 + f) for c in rgb)


def block_rgb(data: PoolMapData) -> np.ndarray:
    """One RGB colour per block: held blocks in their group's hue, one shade per request (requests
    numbered in the order of their first block); cached free blocks a pale tint of the group's hue;
    free blocks white; the null block black."""
    shade_of: dict = {}
    out = np.empty((data.num_blocks, 3))
    hues = [to_rgb(group_color(i)) for i in range(max(len(data.groups), 1))]
    for b, (s, g, r) in enumerate(zip(data.state, data.group, data.request)):
        if b == 0:
            out[b] = NULL_RGB
        elif s == HELD:
            k = shade_of.setdefault(r, len(shade_of))
            out[b] = _shade(hues[g % len(hues)], _SHADES[k % len(_SHADES)])
        elif s == CACHED_FREE:
            out[b] = _shade(hues[g % len(hues)], 0.7)
        else:
            out[b] = FREE_RGB
    return out


def occupancy(data: OccupancyData, *, width: float = 9.0, height: float = 3.6):
    """Blocks held per group, stacked, over the steps; cached free blocks (evictable) above them in grey;
    the usable blocks as the ceiling."""
    fig = new_figure(width, height)
    ax = place_axes(fig, left=0.8, right=2.2, top=0.45, bottom=0.55)
    x = np.asarray(data.steps)
    layers = [np.asarray(h) for h in data.held] + [np.asarray(data.cached_free)]
    colors = [group_color(i) for i in range(len(data.groups))] + [_CACHED_COLOR]
    labels = list(data.groups) + ["cached free (evictable)"]
    if len(x):
        ax.stackplot(x, *layers, colors=colors, labels=labels, step="post", linewidth=0)
    ax.axhline(data.usable_blocks, color="black", lw=0.8, ls="--", label=f"usable blocks ({data.usable_blocks:,})")
    ax.set_xlim(0, max(len(x) - 1, 1))
    ax.set_ylim(0, data.usable_blocks * 1.05)
    ax.set_xlabel("engine step", fontsize=8)
    ax.set_ylabel("blocks", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_title(f"{data.title}: blocks held per group", fontsize=9, loc="left")
    return fig


def queues(data: QueueData, *, width: float = 9.0, height: float = 3.0):
    """Requests running and waiting after every step; a red tick for each step that preempted (its count)."""
    fig = new_figure(width, height)
    ax = place_axes(fig, left=0.8, right=2.2, top=0.45, bottom=0.55)
    x = np.asarray(data.steps)
    ax.step(x, data.running, where="post", color="#4c72b0", lw=1.2, label="running")
    ax.step(x, data.waiting, where="post", color="#dd8452", lw=1.2, label="waiting")
    hit = [(s, p) for s, p in zip(data.steps, data.preemptions) if p]
    if hit:
        ax2 = ax.twinx()
        ax2.vlines([s for s, _ in hit], 0, [p for _, p in hit], color="#c44e52", lw=1.0)
        ax2.set_ylim(0, max(p for _, p in hit) * 4)
        ax2.set_yticks([])
        ax.plot([], [], color="#c44e52", lw=1.0, label=f"preempted ({data.total_preemptions:,} in all)")
    ax.set_xlim(0, max(len(x) - 1, 1))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("engine step", fontsize=8)
    ax.set_ylabel("requests", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_title(f"{data.title}: the scheduler's queues", fontsize=9, loc="left")
    return fig


def pool_map(data: PoolMapData, *, columns: int | None = None, width: float = 9.0):
    """The pool at one step, one cell per block in block-id order (row by row; block b holds the pool's
    bytes [b x bytes_per_block, (b + 1) x bytes_per_block)): held blocks in their group's hue, one shade per
    request; cached free blocks pale and hatched; free blocks white; the null block black."""
    n = data.num_blocks
    if columns is None:
        columns = max(8, min(256, math.ceil(math.sqrt(n * 3))))
    rows = math.ceil(n / columns)
    legend_w = 2.2
    cell = (width - 0.6 - legend_w) / columns
    height = min(max(rows * cell, 1.2), 8.0) + 0.9
    fig = new_figure(width, height)
    ax = place_axes(fig, left=0.3, right=legend_w, top=0.55, bottom=0.35)
    img = np.ones((rows * columns, 3))
    img[:n] = block_rgb(data)
    ax.imshow(img.reshape(rows, columns, 3), aspect="auto", interpolation="nearest", extent=(0, columns, rows, 0))
    cached = [b for b in range(1, n) if data.state[b] == CACHED_FREE]
    if cached:
        b = np.asarray(cached)
        x0, y0 = (b % columns).astype(float), (b // columns).astype(float)
        verts = np.stack(
            [
                np.stack([x0, y0], 1),
                np.stack([x0 + 1, y0], 1),
                np.stack([x0 + 1, y0 + 1], 1),
                np.stack([x0, y0 + 1], 1),
            ],
            1,
        )
        pc = PolyCollection(verts, facecolors="none", edgecolors="#555555", linewidths=0, hatch="////")
        pc.set_gid("cached-free")
        ax.add_collection(pc)
    ax.set_xticks([])
    ax.set_yticks([])
    handles = [Patch(facecolor=group_color(i), label=f"{g} (held)") for i, g in enumerate(data.groups)]
    handles += [
        Patch(facecolor=_CACHED_COLOR, hatch="////", edgecolor="#555555", label="cached free (evictable)"),
        Patch(facecolor="white", edgecolor="#999999", label="free"),
        Patch(facecolor=NULL_RGB, label="null block"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    held = data.count(HELD)
    ax.set_title(
        f"{data.title}: step {data.step} of {data.num_steps - 1} · {held:,} held, {data.count(CACHED_FREE):,} "
        f"cached free of {n - 1:,} blocks of {format_bytes(data.bytes_per_block)} · "
        f"{len(data.requests_holding())} requests hold blocks",
        fontsize=8,
        loc="left",
    )
    return fig
