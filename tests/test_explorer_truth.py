"""The explorer never shows a number under another knob set's label (issue 37 item 1).

What the page shows is what the widgets' synced state says: a DOM class on the answer area (`_dom_classes`, which
ipywidgets sends to the browser), the text of each output, the live map's `status` and `selected`. These tests read
only that state, never a Python-side attribute the page cannot see (the old `layout.opacity` was such an attribute:
ipywidgets' Layout has no opacity trait, so the greying never reached the page). tests/test_browser.py reads the same
marks back from chromium's DOM.

Expected numbers come from `kvviz.plan` and `Plan.capacity` called here with the knobs set, never from the
explorer's own helpers.
"""

from __future__ import annotations

import html
import json
import re

import ipywidgets as widgets
import pytest
from explorer_expect import expected_numbers, shown_numbers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvviz
from kvviz.base.defaults import GIB
from kvviz.explorer.app import Explorer

STALE, PENDING = "kvviz-stale", "kvviz-pending"


def descendants(w):
    """Every widget under `w` (itself included)."""
    out = [w]
    for c in getattr(w, "children", ()):
        out += descendants(c)
    return out


def marked(app) -> bool:
    """The answer area as the page marks it: stale (a refused change) or pending (an update under way)."""
    return bool({STALE, PENDING} & set(app.answer._dom_classes))


def head(app) -> dict:
    """The answer head's data-* attributes: the update count, the state and the knobs its numbers answer."""
    m = re.search(r'data-step="(\d+)" data-state="(\w+)" data-knobs="([^"]*)"', app.answer_head.value)
    assert m, app.answer_head.value
    return {"step": int(m[1]), "state": m[2], "knobs": json.loads(html.unescape(m[3]))}


ANSWER_OUTPUTS = (
    "answer_head",
    "stride_label",
    "blocks_label",
    "fits_label",
    "change_label",
    "capacity_label",
    "deploy_label",
    "engines_label",
    "summary",
    "block_map",
    "map_caption",
    "table",
    "derivation",
)


def test_every_number_sits_in_the_one_answer_area():
    app = Explorer("llama-3.1-8b")
    inside = {id(w) for w in descendants(app.answer)}
    assert all(id(getattr(app, n)) in inside for n in ANSWER_OUTPUTS)
    assert id(app.error_label) not in inside  # the refusal in words stays in full ink above it
    assert "kvviz-answer" in app.answer._dom_classes and not marked(app)


def test_the_issue_sequence_marks_the_whole_answer_stale_in_the_page():
    """gpt-oss-120b, GPU -> H200, model -> DeepSeek-V4-Pro (refused: 792 GiB of weights on one H200): the answer
    area carries the stale class the page greys out, the head says which knobs its numbers answer, the refusal is
    in words, and the live map says it was refused."""
    app = Explorer("gpt-oss-120b")
    app.gpu.value = "H200"
    assert app.error == "" and not marked(app)
    oss = kvviz.plan("gpt-oss-120b")
    cap = oss.capacity(gpu="H200", gpu_memory_utilization=0.92)
    assert app.stride_label.value.startswith(f"block stride {oss.block_stride:,} B")
    assert app.blocks_label.value.startswith(f"{cap.num_blocks:,} blocks at ")
    assert app.fits_label.value.startswith(f"{cap.requests_fit:,} whole requests")
    app.model.value = "deepseek-v4-pro"
    assert app.error.startswith("no memory left for the KV cache") and "\n" not in app.error
    assert STALE in app.answer._dom_classes
    assert "cannot plan" in app.error_label.value and app.error_label.layout.display != "none"
    assert app.block_map.status.startswith("refused: ")
    h = head(app)
    assert h["state"] == "refused" and h["knobs"]["model"] == "gpt-oss-120b" and h["knobs"]["gpu"] == "H200"
    assert "not the current selection" in app.answer_head.value
    app.gpu.value = "budget"  # DeepSeek-V4-Pro at a plain budget plans: the mark goes, the numbers are its own
    assert app.error == "" and not marked(app)
    assert head(app)["knobs"]["model"] == "deepseek-v4-pro" and head(app)["state"] == "ok"


def test_a_model_change_clears_the_selection():
    app = Explorer("gpt-oss-120b")
    app.block_map.selected = "model.layers.0.self_attn.attn"
    app.model.value = "llama-3.1-8b"
    assert app.block_map.selected == ""


def test_every_update_marks_the_answer_pending_before_it_writes(monkeypatch):
    """The browser sees each write as it happens: the answer area is marked pending before the first number changes
    and unmarked only after the last, so no in-between page shows a mix unmarked."""
    app = Explorer("llama-3.1-8b")
    seen = []
    label = app.stride_label
    label.observe(lambda change: seen.append(marked(app)), names="value")
    app.kv_dtype.value = "fp8"
    assert seen == [True] and not marked(app)


@pytest.mark.parametrize("model", ["deepseek-v4-pro", "deepseek-v4-flash", "gemma-3n-e4b", "llama-3.1-8b"])
def test_a_budget_below_one_block_updates_or_refuses_in_one_line_and_so_does_every_later_knob(model):
    """Half a block of budget (it raised ZeroDivisionError in Comparison.blocks_change_pct and Fp8Gain.ratio):
    floor(1/2) = 0 blocks (get_num_blocks), so the answer shows 0 blocks and vLLM's own start-up refusal; every
    deployment knob moved afterwards updates or refuses in one line."""
    app = Explorer(model)
    half = app.plan.block_stride / GIB / 2
    app.budget_gib.value = half
    assert app.error == "" and not marked(app), app.error
    assert app.blocks_label.value.startswith("0 blocks at ")
    assert app.fits_label.value.startswith("0 whole requests")
    assert "vLLM 0.33 refuses to start at this budget" in app.deploy_label.value
    for name, value in (
        ("tensor_parallel_size", 2),
        ("kv_dtype", "fp8"),
        ("data_parallel_size", 2),
        ("kv_offloading_size", 4.0),
        ("planner", app.planner.options[-1]),
        ("context", 4096),
    ):
        if getattr(app, name).layout.display == "none":
            continue
        getattr(app, name).value = value  # must not raise
        assert "\n" not in app.error and not app.error.startswith("internal error"), (name, app.error)
        assert marked(app) == bool(app.error)


WALK_MODELS = ["deepseek-v4-pro", "gpt-oss-120b", "gemma-3n-e4b", "llama-3.1-8b"]
KNOB_MOVES = st.lists(
    st.one_of(
        st.tuples(st.just("model"), st.sampled_from(WALK_MODELS)),
        st.tuples(st.just("gpu"), st.sampled_from(["budget", "H100", "H200"])),
        st.tuples(st.just("tensor_parallel_size"), st.sampled_from([1, 2, 4, 8])),
        st.tuples(st.just("budget_gib"), st.sampled_from([1e-6, 0.001, 1.0, 26.09, -1.0])),
        st.tuples(st.just("kv_dtype"), st.sampled_from(["auto", "fp8", "bf16"])),
        st.tuples(st.just("head_dim"), st.sampled_from([512, 544, 576])),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(moves=KNOB_MOVES)
def test_any_knob_walk_never_raises_and_never_leaves_a_number_unmarked_under_other_knobs(moves):
    """Whatever the order of the moves: no exception, and either the answer is unmarked, its head names exactly the
    knobs on the controls and its stride, blocks and requests are kvviz.plan's of those knobs, or it is marked
    stale with the refusal in one line."""
    app = Explorer("llama-3.1-8b")
    for name, value in moves:
        control = getattr(app, name)
        if control.layout.display == "none" or control.value == value:
            continue
        if isinstance(control, widgets.Dropdown) and value not in control.options:
            continue
        control.value = value
        shown = head(app)
        if app.error:
            assert STALE in app.answer._dom_classes and "\n" not in app.error and len(app.error) < 800
            assert not app.error.startswith("internal error"), app.error
        else:
            assert not marked(app) and shown["state"] == "ok"
            assert shown["knobs"] == app.knobs()
            numbers = shown_numbers(app.stride_label.value, app.blocks_label.value, app.fits_label.value)
            assert numbers == expected_numbers(app.knobs())


def test_an_internal_error_is_refused_in_one_bounded_line(monkeypatch):
    """An error of no known kind (a bug) still leaves one line, at most 400 characters, and the stale mark."""
    from kvviz.explorer import answer as answer_module

    app = Explorer("llama-3.1-8b")

    def boom(*args, **kwargs):
        raise RuntimeError("line one\nline two " + "x" * 5000)

    monkeypatch.setattr(answer_module, "engines_html", boom)
    app.kv_dtype.value = "fp8"
    assert app.error.startswith("internal error (RuntimeError): line one line two ")
    assert "\n" not in app.error and len(app.error) <= 400 and STALE in app.answer._dom_classes
