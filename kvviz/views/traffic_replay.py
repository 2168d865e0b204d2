"""The pool-under-traffic figures taking the Replay itself (matplotlib, no pyplot): `occupancy(r)`, `queues(r)`,
`pool_map(r, step=...)` build the data object of kvviz.views.traffic_data and draw it with kvviz.views.traffic
(each also takes that data object); `answers_figure(r)` draws the queues with the capacity line's promise and
the peak running marked; `sweep_figure` draws a what-if sweep, one bar per setting for the hit rate, the
preemptions, the peak running and the p99 queueing delay (from a `SweepData`). The Replay is read duck-typed:
the views import no replay."""

from __future__ import annotations

import dataclasses

import numpy as np

from kvviz.base.errors import require
from kvviz.base.inputs import checked, instance, short_repr
from kvviz.views import traffic
from kvviz.views.args import REPLAY, WIDTH
from kvviz.views.canvas import new_figure
from kvviz.views.traffic_data import OccupancyData, PoolMapData, QueueData, TimeLapse, occupancy_data, queue_data

__all__ = ["occupancy", "queues", "pool_map", "answers_figure", "SweepData", "sweep_figure", "SWEEP_METRICS"]

# (field of SweepData, panel title): what one sweep figure compares
SWEEP_METRICS = (
    ("hit_rate", "prefix-cache hit rate"),
    ("preemptions", "preemptions"),
    ("peak_running", "peak running"),
    ("p99_queueing_steps", "p99 queueing delay (steps)"),
)


def _replay(value, data_class):
    """`value` if it reads as a kvviz.replay Replay; else one line naming `data_class`, the other thing taken."""
    require(
        hasattr(value, "step_columns") and hasattr(value, "to_json"),
        f"data={short_repr(value)}: give a Replay (kvviz.replay(...)) or a {data_class.__name__}",
    )
    return value


def occupancy(data, **kw):
    """kvviz.views.traffic.occupancy of a Replay (or of its OccupancyData): blocks held per group over the steps."""
    return traffic.occupancy(
        data if isinstance(data, OccupancyData) else occupancy_data(_replay(data, OccupancyData)), **kw
    )


def queues(data, **kw):
    """kvviz.views.traffic.queues of a Replay (or of its QueueData): running and waiting requests, preemptions."""
    return traffic.queues(data if isinstance(data, QueueData) else queue_data(_replay(data, QueueData)), **kw)


def pool_map(data, *, step: int | None = None, **kw):
    """kvviz.views.traffic.pool_map of a Replay run with record_blocks=True at `step` (or of a PoolMapData)."""
    if not isinstance(data, PoolMapData):
        require(step is not None, "step: give the step to draw (pool_map(replay, step=...))")
        data = TimeLapse(_replay(data, PoolMapData)).at(step)
    else:
        require(step is None or step == data.step, f"step={step!r}: the map is of step {data.step}")
    return traffic.pool_map(data, **kw)


@checked(replay=REPLAY)
def answers_figure(replay, **kw):
    """The queues (running, waiting, preemptions) with the capacity line's promise (requests of max_model_len
    the pool holds at once) and the peak running marked."""
    data = queue_data(_replay(replay, QueueData))
    fig = traffic.queues(data, **kw)
    ax = fig.axes[0]
    promise = replay.notes_dict().get("max_concurrency") if hasattr(replay, "notes_dict") else None
    if promise is not None:
        ax.axhline(promise, color="#55a868", lw=1.0, ls="--", label=f"capacity line's promise ({promise:.2f}x)")
    if data.running:
        peak = max(data.running)
        at = data.running.index(peak)
        ax.plot([data.steps[at]], [peak], "v", color="#4c72b0", ms=6, label=f"peak running ({peak:,})")
    legend = ax.get_legend()
    ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=legend.get_texts()[0].get_fontsize(), frameon=False
    )
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


@checked(data=instance(SweepData, what="a SweepData (kvviz.deploy.sweep(...).figure_data())"), width=WIDTH)
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
