"""The pool-under-traffic views (kvviz/views/traffic_data.py, traffic.py): the time-lapse rebuilt from the
replay's block log agrees, step by step, with the replay's own per-group counters (a second method: the
counters are kept by the pool as references change, the log records block states); recording the log
changes no output; the figures draw what their data objects hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.replay import WorkloadRequest, replay
from kvviz.views.traffic import NULL_RGB, block_rgb, group_color, occupancy, pool_map, queues
from kvviz.views.traffic_data import CACHED_FREE, FREE, HELD, TimeLapse, occupancy_data, queue_data

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "replay"
CASES = {c["case"]: c for c in json.loads((DATA / "scheduler-cases.json").read_text())["cases"]}
PICKED = ("gemma-3-27b-text/chat", "qwen3-next-80b-a3b/agentic", "llama-3.1-8b/chat")


def _run(name, **kw):
    case = CASES[name]
    inp = case["inputs"]
    plan = kvviz.plan(
        kvviz.load(str(DATA / "configs" / inp["model"] / "config.json")), max_model_len=inp["max_model_len"]
    )
    return replay(plan, case["workload"], budget_bytes=inp["kv_budget"], **kw)


@pytest.fixture(scope="module", params=PICKED)
def recorded(request):
    return _run(request.param, record_blocks=True)


def test_record_blocks_changes_no_output(recorded):
    name = recorded.to_json()["inputs"]["model"]
    case = next(c for c in PICKED if c.startswith(name))
    assert _run(case).dumps() == recorded.dumps()


def test_time_lapse_matches_the_counters_at_every_step(recorded):
    cols = recorded.step_columns()
    lapse = TimeLapse(recorded)
    ngroups = len(recorded.to_json()["kv_cache_config"]["groups"])
    for step in range(recorded.num_steps):
        d = lapse.at(step)
        held = [0] * ngroups
        for s, g in zip(d.state[1:], d.group[1:]):
            if s == HELD:
                held[g] += 1
        assert held == cols["held_blocks"][step], step
        assert d.count(CACHED_FREE) == cols["cached_free_blocks"][step], step
        assert d.count(CACHED_FREE) + d.count(FREE) == cols["free_blocks"][step], step
        assert all(r for s, r in zip(d.state[1:], d.request[1:]) if s == HELD)  # a held block has a request


def test_occupancy_and_queue_data(recorded):
    occ = occupancy_data(recorded)
    for i in range(len(occ.steps)):
        assert sum(h[i] for h in occ.held) + occ.cached_free[i] + occ.free[i] == occ.usable_blocks
    q = queue_data(recorded)
    assert q.total_preemptions == recorded.totals_dict()["total_preemptions"]
    assert max(q.running) == recorded.totals_dict()["peak_running"]


def test_time_lapse_needs_the_log_and_a_valid_step():
    r = _run("llama-3.1-8b/chat")
    with pytest.raises(KvvizError, match="record_blocks"):
        TimeLapse(r)
    lapse = TimeLapse(_run("llama-3.1-8b/chat", record_blocks=True))
    with pytest.raises(KvvizError, match="step"):
        lapse.at(lapse.num_steps)


def test_pool_map_colours_each_block_by_state_group_and_request():
    plan = kvviz.plan("llama-3.1-8b", max_model_len=2048)
    work = [
        WorkloadRequest("a", 0, 100, 40),
        WorkloadRequest("b", 0, 60, 5, "sys", 48),
        WorkloadRequest("c", 9, 60, 5, "sys", 48),
    ]
    r = replay(plan, work, budget_bytes=plan.block_stride * 40, record_blocks=True)
    lapse = TimeLapse(r)
    d = next(lapse.at(s) for s in range(lapse.num_steps) if lapse.at(s).count(CACHED_FREE) and lapse.at(s).count(HELD))
    rgb = block_rgb(d)
    assert tuple(rgb[0]) == NULL_RGB
    held = [b for b in range(1, d.num_blocks) if d.state[b] == HELD]
    by_request = {}
    for b in held:
        by_request.setdefault(d.request[b], set()).add(tuple(rgb[b]))
    assert all(len(c) == 1 for c in by_request.values())  # one colour per request
    assert len({next(iter(c)) for c in by_request.values()}) == len(by_request)  # distinct across requests
    assert tuple(rgb[held[0]]) == to_rgb(group_color(0))  # the first request: the group's own hue
    fig = pool_map(d)
    ax = fig.axes[0]
    hatched = [c for c in ax.collections if c.get_gid() == "cached-free"]
    assert len(hatched) == 1 and len(hatched[0].get_paths()) == d.count(CACHED_FREE)
    img = np.asarray(ax.images[0].get_array())
    assert img.shape[0] * img.shape[1] >= d.num_blocks
    assert f"step {d.step}" in ax.get_title(loc="left")


def test_occupancy_and_queue_figures(recorded):
    occ = occupancy_data(recorded)
    fig = occupancy(occ)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels[: len(occ.groups)] == list(occ.groups) and "cached free (evictable)" in labels
    fig = queues(queue_data(recorded))
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels[:2] == ["running", "waiting"]


def test_traffic_explorer_slider_moves_the_map():
    from kvviz.explorer import TrafficExplorer

    r = _run("gemma-3-27b-text/chat", record_blocks=True)
    app = TrafficExplorer(r, step=0)
    first, png = app.data, app.map.value
    assert first.step == 0 and "step 0:" in app.line.value
    target = r.num_steps // 2
    app.step.value = target
    assert app.data.step == target and app.data == TimeLapse(r).at(target)
    assert app.map.value != png and f"step {target}:" in app.line.value
    held = sum(r.step_columns()["held_blocks"][target])
    assert f"{held:,} blocks held" in app.line.value
    assert "kvviz-traffic-step" in app.step._dom_classes
