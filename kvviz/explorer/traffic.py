"""A small ipywidgets app for the pool under traffic: a step slider that moves the time-lapse map of a replay.

    from kvviz.replay import replay, chat
    r = replay(plan, chat(200), budget_bytes=2**30, record_blocks=True)
    TrafficExplorer(r).widget          # display it in JupyterLab

The map is `kvviz.views.traffic.pool_map` of `kvviz.views.traffic_data.TimeLapse(r).at(step)` (the same
figure a notebook draws), shown as a PNG; the line above it gives the step's queues and blocks. Tests drive it
by setting `.step.value`; the controls carry CSS classes `kvviz-traffic-step`, `kvviz-traffic-line` and
`kvviz-traffic-map`.
"""

from __future__ import annotations

import ipywidgets as widgets

from kvviz.base.inputs import checked, optional
from kvviz.views.args import COLUMNS, REPLAY_WITH_BLOCKS, STEP
from kvviz.views.query import to_png_bytes
from kvviz.views.traffic import pool_map
from kvviz.views.traffic_data import CACHED_FREE, HELD, PoolMapData, TimeLapse


class TrafficExplorer:
    """`TrafficExplorer(replay)` for a Replay run with `record_blocks=True`; `.step` (an IntSlider) picks the
    step, `.data` is the PoolMapData drawn, `.widget` the app."""

    @checked(replay=REPLAY_WITH_BLOCKS, step=optional(STEP), columns=COLUMNS)
    def __init__(self, replay, *, step: int | None = None, columns: int | None = None) -> None:
        self.lapse = TimeLapse(replay)
        self.columns = columns
        self._cols = replay.step_columns()
        last = max(self.lapse.num_steps - 1, 0)
        start = last // 2 if step is None else step
        self.step = widgets.IntSlider(
            value=start,
            min=0,
            max=last,
            description="step",
            continuous_update=False,
            layout=widgets.Layout(width="640px"),
        )
        self.line = widgets.HTML()
        self.map = widgets.Image(format="png")
        for w, name in ((self.step, "step"), (self.line, "line"), (self.map, "map")):
            w.add_class(f"kvviz-traffic-{name}")
        self.data: PoolMapData | None = None
        self.step.observe(self._on_step, names="value")
        self.widget = widgets.VBox([self.step, self.line, self.map])
        self._draw(start)

    def _on_step(self, change) -> None:
        self._draw(change["new"])

    def _draw(self, step: int) -> None:
        d = self.data = self.lapse.at(step)
        cols = self._cols
        self.line.value = (
            f"step {step}: {cols['num_running'][step]} running, {cols['num_waiting'][step]} waiting, "
            f"{cols['preemptions'][step]} preempted; {d.count(HELD):,} blocks held, "
            f"{d.count(CACHED_FREE):,} cached free, {cols['free_blocks'][step] - d.count(CACHED_FREE):,} free"
        )
        self.map.value = to_png_bytes(pool_map(d, columns=self.columns))
