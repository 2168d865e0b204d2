"""A replay's answers drawn (matplotlib, no pyplot): the queues over the steps with the capacity line's promise
(requests of max_model_len the pool holds at once) and max_num_seqs beside the peak, above the blocks held per
group (`answers_figure`, from a Replay read duck-typed); and a what-if sweep, one bar per setting for the hit
rate, the preemptions, the peak running and the p99 queueing delay (`sweep_figure`, from a `SweepData`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from kvviz.base.errors import require
from kvviz.views.canvas import new_figure
from kvviz.views.traffic import draw_occupancy, draw_queues, replay_of
from kvviz.views.traffic_data import OccupancyData, occupancy_data, queue_data

__all__ = ["answers_figure", "SweepData", "sweep_figure", "SWEEP_METRICS"]

# (field of SweepData, panel title): what one sweep figure compares
SWEEP_METRICS = (
    ("hit_rate", "prefix-cache hit rate"),
    ("preemptions", "preemptions"),
    ("peak_running", "peak running"),
    ("p99_queueing_steps", "p99 queueing delay (steps)"),
)


def answers_figure(replay, *, width: float = 9.0):
    """The queues (running, waiting, preemptions) with the capacity line's promise and the peak marked, over
    the blocks held per group; the same x axis (engine steps)."""
    replay = replay_of(replay, OccupancyData)
    fig = new_figure(width, 6.4)
    w, h = fig.get_size_inches()
    top = fig.add_axes((0.8 / w, 3.65 / h, 1 - 3.0 / w, 2.3 / h))
    bottom = fig.add_axes((0.8 / w, 0.55 / h, 1 - 3.0 / w, 2.3 / h), sharex=top)
    queues = queue_data(replay)
    draw_queues(top, queues)
    notes = replay.notes_dict() if hasattr(replay, "notes_dict") else {}
    promise = notes.get("max_concurrency")
    if promise is not None:
        top.axhline(promise, color="#55a868", lw=1.0, ls="--", label=f"capacity line's promise ({promise:.2f}x)")
    if queues.running:
        peak = max(queues.running)
        at = queues.running.index(peak)
        top.plot([queues.steps[at]], [peak], "v", color="#4c72b0", ms=6, label=f"peak running ({peak:,})")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    draw_occupancy(bottom, occupancy_data(replay))
    return fig


@dataclasses.dataclass(frozen=True)
class SweepData:
    """One row per setting of a what-if sweep (kvviz.deploy.traffic): its label and the four answers compared."""

    title: str
    labels: tuple[str, ...]
    hit_rate: tuple[float, ...]
    preemptions: tuple[int, ...]
    peak_running: tuple[int, ...]
    p99_queueing_steps: tuple[int | None, ...]

    def __post_init__(self) -> None:
        n = len(self.labels)
        for name, _ in SWEEP_METRICS:
            require(len(getattr(self, name)) == n, f"{name}: {len(getattr(self, name))} values for {n} settings")


def sweep_figure(data: SweepData, *, width: float = 9.0):
    """Four panels, one bar per setting in each: hit rate, preemptions, peak running, p99 queueing delay."""
    n = len(data.labels)
    fig = new_figure(width, 2.2 + 0.28 * n * 2)
    w, h = fig.get_size_inches()
    panel_w = (w - 2.6) / 2
    panel_h = (h - 1.3) / 2
    y = np.arange(n)
    for k, (name, title) in enumerate(SWEEP_METRICS):
        col, row = k % 2, k // 2
        ax = fig.add_axes(
            ((2.0 + col * (panel_w + 0.4)) / w, (0.45 + (1 - row) * (panel_h + 0.4)) / h, panel_w / w, panel_h / h)
        )
        values = [0 if v is None else v for v in getattr(data, name)]
        ax.barh(y, values, color="#4c72b0", height=0.6)
        for yi, v, x in zip(y, getattr(data, name), values):
            text = "-" if v is None else (f"{v:.1%}" if name == "hit_rate" else f"{v:,}")
            ax.text(x, yi, f" {text}", va="center", ha="left", fontsize=6.5)
        ax.set_xlim(0, (max(values, default=0) or (0.01 if name == "hit_rate" else 1)) * 1.3)
        ax.set_yticks(y, data.labels if col == 0 else [""] * n, fontsize=7)
        ax.invert_yaxis()
        ax.tick_params(axis="x", labelsize=6.5)
        ax.set_title(title, fontsize=8, loc="left")
    fig.text(0.01, 1 - 0.12 / h, data.title, fontsize=9, va="top")
    return fig
