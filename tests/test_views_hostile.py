"""Every public function of kvviz.views and kvviz.explorer, given a wrong type or value for any one argument, answers
one KvvizError line naming that argument, or the right answer; never an AttributeError, a ZeroDivisionError or a
matplotlib ValueError from deep inside (issue 37 item 6: `pool_map(columns=0)`, `TrafficExplorer(columns=0)`).

The walk is complete by construction: every public name of the two packages is either a function or class called
here (`VALID`: arguments that work) or a plain data record (`RECORDS`, built by the library's own builders); a new
public function without an entry fails `test_the_walk_covers_every_public_function`.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pandas as pd
import pytest

import kvviz
import kvviz.explorer as E
import kvviz.views as V
from kvviz.base.errors import KvvizError
from kvviz.replay import chat, replay

# Data records: frozen dataclasses the builders make (their fields are the builders' output, not user input);
# KvvizFigure is matplotlib's Figure; Knob is the explorer's knob table's row.
RECORDS = {
    "PageAnatomyData",
    "BlockMapData",
    "MapRange",
    "Lane",
    "KvvizFigure",
    "BeforeAfterData",
    "KeyEntry",
    "Visibility",
    "LiveBytesData",
    "PoolPlanesData",
    "PatchRange",
    "RangePatch",
    "OccupancyData",
    "QueueData",
    "PoolMapData",
    "Knob",
    "Planned",
    "Result",
    "SweepData",
}
# Wrong for almost every argument: absent, of another type, out of any range, not finite, empty, a stray object.
WRONG = [None, 0, -1, 2**70, 1.5, math.nan, math.inf, "", "x", [], [None], {}, object(), True, b"x", -0.5]


@pytest.fixture(scope="module")
def things(tmp_path_factory):
    plan = kvviz.plan("llama-3.1-8b", max_model_len=8192)
    small = kvviz.plan("llama-3.1-8b", max_model_len=1024, kv_dtype="fp8")
    sep = kvviz.plan("gemma-3-27b", "separate", max_model_len=1024)
    r = replay(plan, chat(6, seed=1), budget_bytes=64 * plan.block_stride, record_blocks=True)
    knobs = E.default_knobs("llama-3.1-8b", context=1024)
    cap = plan.capacity(2**30)
    fig = V.block_map(plan.layout)
    return {
        "plan": plan,
        "plan2": kvviz.plan("llama-3.1-8b", max_model_len=8192, kv_dtype="fp8"),
        "layout": plan.layout,
        "other": small.layout,
        "sep": sep,
        "replay": r,
        "knobs": knobs,
        "cap": cap,
        "fig": fig,
        "tmp": tmp_path_factory.mktemp("hostile"),
    }


def valid(t) -> dict:
    """name -> (positional args, keyword args) that work."""
    lay, k = t["layout"], t["knobs"]
    r = t["replay"]
    return {
        # views
        "page_anatomy": ((lay,), {}),
        "page_anatomy_data": ((lay,), {}),
        "block_map": ((lay,), {}),
        "block_map_title": ((lay,), {}),
        "block_map_data": ((lay,), {}),
        "separate_pools_data": ((t["sep"],), {"caption": "c"}),
        "as_block_map_data": ((lay,), {}),
        "before_after": ((lay, t["other"]), {}),
        "before_after_data": ((lay, t["other"]), {}),
        "live_bytes": ((lay,), {}),
        "live_bytes_data": ((lay, None, None), {}),
        "binned_bytes": ((np.zeros((2, 64), np.uint8), 8), {}),
        "LiveBlockMap": ((lay,), {}),
        "pool_planes": ((lay, 4), {}),
        "pool_planes_data": ((lay, 4), {}),
        "find_patches": ((t["fig"],), {}),
        "patch_ranges": ((t["fig"],), {}),
        "figure_texts": ((t["fig"],), {}),
        "legend_labels": ((t["fig"],), {}),
        "save_figure": ((t["fig"], t["tmp"] / "x.png"), {}),
        "to_png_bytes": ((t["fig"],), {}),
        "render_report": ((t["tmp"] / "report",), {"layout": lay, "svg": False}),
        "short_layer_name": (("model.layers.0.self_attn.attn",), {}),
        "format_bytes": ((4096,), {}),
        "byte_ticks": ((4096,), {}),
        "text_scale": ((1.0,), {}),
        "readable_table": ((pd.DataFrame({"a": [12345]}),), {"units": {"a": "B"}}),
        "occupancy_data": ((r,), {}),
        "queue_data": ((r,), {}),
        "TimeLapse": ((r,), {}),
        "pool_map_data": ((r, 0), {}),
        "occupancy": ((V.occupancy_data(r),), {}),
        "queues": ((V.queue_data(r),), {}),
        "pool_map": ((V.TimeLapse(r).at(0),), {}),
        "answers_figure": ((r,), {}),
        "sweep_figure": ((V.SweepData("sweep", ("a", "b"), (0.1, 0.2), (0, 1), (3, 4), (None, 5)),), {}),
        "side_by_side": ((kvviz.api.side_by_side(t["plan"], t["plan2"], budget_bytes=1 << 30),), {}),
        # explorer
        "preset": (("llama-3.1-8b",), {}),
        "model_of": (("llama-3.1-8b",), {}),
        "knobs_for": (("llama-3.1-8b",), {}),
        "preset_knobs": (("llama-3.1-8b",), {}),
        "check_names": ((["kv_dtype"], "llama-3.1-8b"), {}),
        "check_value": (("kv_dtype", "fp8"), {}),
        "default_knobs": (("llama-3.1-8b",), {}),
        "control_values": (("llama-3.1-8b",), {}),
        "kv_budget": ((k,), {}),
        "budget_bytes": ((k,), {}),
        "model_for": ((k,), {}),
        "options_for": ((k,), {}),
        "plan_knobs": ((k,), {}),
        "baseline_planner": ((k,), {}),
        "capacities": ((k,), {}),
        "layout_key": ((k,), {}),
        "describe_knobs": ((k,), {}),
        "compare_knobs": (([{}],), {"model": "llama-3.1-8b"}),
        "sweep": (("kv_dtype", ["auto"]), {"model": "llama-3.1-8b"}),
        "stride_words": ((t["plan"],), {}),
        "plan_for_display": ((k,), {}),
        "result_at": ((E.plan_for_display(k), k), {}),
        "engines_html": ((k,), {}),
        "group_table_html": ((t["plan"],), {}),
        "summary_html": ((t["cap"], [t["cap"]]), {}),
        "Explorer": (("llama-3.1-8b",), {"context": 1024}),
        "TrafficExplorer": ((r,), {}),
    }


def public_callables():
    for mod in (V, E):
        for name in mod._NAMES:
            obj = getattr(mod, name)
            if callable(obj) and name not in RECORDS:
                yield name, obj


def test_the_walk_covers_every_public_function(things):
    assert {n for n, _ in public_callables()} == set(valid(things))


def _arguments(func, args, kwargs, name, value):
    """The call with argument `name` replaced by `value` (positional or keyword as the signature has it)."""
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "self"]
    args, kwargs = list(args), dict(kwargs)
    index = [p.name for p in params].index(name)
    if index < len(args):
        args[index] = value
    else:
        kwargs[name] = value
    return args, kwargs


# An argument whose value is a knob's is named by that knob (check_value("kv_dtype", None): "kv_dtype=None: ...").
NAMED_BY_KNOB = {("check_value", "value"), ("sweep", "values")}


def _walk(func, args, kwargs, name, value):
    default = inspect.signature(func).parameters[name].default
    if default is not inspect.Parameter.empty and type(default) is type(value) and default == value:
        return  # not a wrong value: the function's own default
    args, kwargs = _arguments(func, args, kwargs, name, value)
    try:
        func(*args, **kwargs)
    except KvvizError as e:
        message = str(e)
        assert "\n" not in message and len(message) <= 400, (name, value, message)
        named = name in message or ((func.__name__, name) in NAMED_BY_KNOB and "kv_dtype" in message)
        assert named, (func, name, value, message)
    # any other exception fails the test with its traceback


CASES = [
    (n, p.name)
    for n, f in public_callables()
    for p in inspect.signature(f).parameters.values()
    if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
]


@pytest.mark.parametrize("name,arg", CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_a_wrong_argument_is_one_line_naming_it(things, name, arg, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a wrong value that is a fine path ('x') writes nothing into the checkout
    func = dict(public_callables())[name]
    args, kwargs = valid(things)[name]
    wrong = WRONG if name not in ("Explorer", "render_report") else WRONG[:8]  # the slow ones: fewer values
    for value in wrong:
        _walk(func, args, kwargs, arg, value)


def test_explorer_set_refuses_a_wrong_value_naming_the_knob_and_sets_nothing():
    """`Explorer.set(**knobs)` raised a traitlets TraitError for a value its control cannot hold (a string for the
    budget, TP 3, a dtype the model has not); now one KvvizError naming the knob, and no knob moves."""
    app = E.Explorer("llama-3.1-8b", context=1024)
    before, step = app.knobs(), app.steps
    for name in ("kv_dtype", "block_size", "tensor_parallel_size", "planner", "budget_gib", "gpu", "context"):
        for value in WRONG:
            try:
                app.set(**{name: value})
            except KvvizError as e:
                assert str(e).startswith(f"{name}") and "\n" not in str(e) and len(str(e)) <= 400, (name, value, e)
            else:  # a value the control holds: planned, or refused by the planner in one line
                assert "\n" not in app.error and not app.error.startswith("internal error"), (name, value, app.error)
                app.set(**{name: before[name]})
    for value in WRONG:
        with pytest.raises(KvvizError, match=r"^model="):
            app.set(model=value)
    assert app.knobs() == before and app.steps >= step
