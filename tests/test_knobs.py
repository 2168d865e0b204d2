"""kvviz.knobs without widgets: defaults, validation, planning and the sweep tables.

Expected numbers come from kvviz.planners.plan_model and kvviz.capacity called here with the same
knobs, or from docs/published-numbers.md#the-published-table.
"""

import subprocess
import sys

import pytest

from kvviz.capacity import GIB, group_blocks_for_request, max_concurrency
from kvviz.config import load_model, with_layer_mix
from kvviz.errors import KvvizError
from kvviz.knobs import (KNOBS, budget_bytes, compare_knobs, default_knobs, describe_knobs, knobs_for, layout_key,
                         plan_pair, sweep)
from kvviz.planners import plan_model
from kvviz.specs import CacheOptions

PRO = load_model("deepseek-v4-pro")


def expected(config=PRO, *, planner="overlay", **options):
    opts = dict(backend="flashmla", main_format="fp8_ds_mla", indexer_format="mxfp4", block_size=256, mtp=True)
    opts.update(options)
    return plan_model(config, CacheOptions(**opts), planner)


def test_module_is_usable_without_widgets_or_plotting():
    code = ("import sys; import kvviz.knobs as k; k.plan_pair(k.default_knobs())\n"
            "bad = [m for m in ('ipywidgets', 'matplotlib', 'torch', 'anywidget') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_default_knobs_and_changes():
    knobs = default_knobs()
    assert list(knobs) == list(KNOBS)
    assert (knobs["head_dim"], knobs["c4"], knobs["c128"], knobs["swa"]) == (512, 30, 31, 0)
    assert default_knobs(backend="flashinfer")["main_format"] == "fp8"  # the backend's own format
    assert default_knobs(backend="flashinfer", main_format="bf16")["main_format"] == "bf16"
    assert default_knobs("deepseek-v4-flash")["swa"] == 2
    with pytest.raises(KvvizError, match="head_size"):
        default_knobs(head_size=1)


def test_plan_pair_is_the_chosen_planner_and_the_bucketed_baseline():
    layout, baseline = plan_pair(default_knobs(head_dim=576))
    config = PRO.with_overrides(head_dim=576)
    assert layout.block_stride == expected(config).block_stride
    assert baseline.block_stride == expected(config, planner="bucketed").block_stride
    same, also = plan_pair(default_knobs(planner="bucketed"))
    assert same is also


def test_layout_key_ignores_only_the_budget():
    assert layout_key(default_knobs(budget_gib=1.0)) == layout_key(default_knobs(budget_gib=2.0))
    assert layout_key(default_knobs(head_dim=576)) != layout_key(default_knobs())


@pytest.mark.parametrize("gib", [0, 0.0, -0.5, float("nan")])
def test_a_budget_of_zero_or_less_is_an_error(gib):
    with pytest.raises(KvvizError, match=r"^budget_gib=.*: must be a positive number$"):
        budget_bytes(default_knobs(budget_gib=gib))


def test_budget_is_truncated_like_vllm():
    assert budget_bytes(default_knobs(budget_gib=26.09)) == int(26.09 * GIB)


def test_describe_knobs_names_every_layout_knob():
    text = describe_knobs(default_knobs(head_dim=576, block_size=512, mtp=False, planner="bucketed"))
    for part in ("deepseek-v4-pro", "head_dim 576", "rope 64", "index_head_dim 128", "fp8_ds_mla main KV",
                 "mxfp4 indexer", "flashmla alignment", "512-token blocks", "no MTP", "c4 30 / c128 31 / SWA 0",
                 "bucketed planner"):
        assert part in text
    assert "\n" not in text


def test_every_knob_applies_to_the_deepseek_presets():
    assert knobs_for("deepseek-v4-pro") == knobs_for("deepseek-v4-flash") == KNOBS


def test_sweep_rows_are_the_library_numbers():
    table = sweep("indexer_format", ["fp8", "mxfp4"], tokens=8192)
    budget = int(26.09 * GIB)
    for row, fmt in zip(table.to_dict("records"), ["fp8", "mxfp4"]):
        layout = expected(indexer_format=fmt)
        assert row["indexer_format"] == fmt
        assert row["block stride"] == layout.block_stride
        assert row["binding group"] == layout.binding_label
        assert row["blocks"] == budget // layout.block_stride
        assert row["blocks per request"] == sum(group_blocks_for_request(layout, 8192))
        assert row["requests"] == round(max_concurrency(layout, budget, 8192), 2)
    first, second = (max_concurrency(expected(indexer_format=f), budget, 8192) for f in ("fp8", "mxfp4"))
    assert table["requests vs first %"].tolist() == [0.0, round(100 * (second - first) / first, 1)]


def test_sweep_keeps_impossible_rows_with_their_message():
    table = sweep("block_size", [64, 256])
    assert table["note"][0].startswith("block_size=64")
    assert table["block stride"].isna()[0]
    assert table["block stride"][1] == expected().block_stride and table["note"][1] == ""
    with pytest.raises(KvvizError, match="head_size"):
        sweep("head_size", [1])


def test_compare_knobs_shows_the_effective_value_of_every_changed_knob():
    table = compare_knobs([{}, {"c4": 61, "c128": 0}])
    assert table[["c4", "c128"]].values.tolist() == [[30, 31], [61, 0]]
    assert table["block stride"][1] == expected(with_layer_mix(PRO, c4=61, c128=0, swa=0)).block_stride
