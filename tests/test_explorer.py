"""The Explorer app driven from pytest: set widget values, compare with the library computed here.

Every expected number is computed in the test from kvviz.planners.plan_model with the same knobs
(or taken from REFERENCE.md section 7), never read back from the explorer's own helpers.
"""

import asyncio

import ipywidgets as widgets
import pytest

from kvviz import explorer as explorer_module
from kvviz.capacity import GIB, group_blocks_for_request, max_concurrency
from kvviz.config import load_model, with_layer_mix
from kvviz.errors import KvvizError
from kvviz.explorer import CSS_CLASSES, Explorer, compare_knobs, default_knobs, sweep
from kvviz.planners import plan_model
from kvviz.specs import CacheOptions

PRO = load_model("deepseek-v4-pro")
FLASH = load_model("deepseek-v4-flash")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def expected(config=PRO, *, planner="overlay", **options):
    """The library's layout for the knobs, computed independently of the explorer."""
    opts = dict(backend="flashmla", main_format="fp8_ds_mla", indexer_format="mxfp4", block_size=256, mtp=True)
    opts.update(options)
    return plan_model(config, CacheOptions(**opts), planner)


@pytest.fixture
def app():
    """An explorer without the figure (fast); the figure tests use `drawn`."""
    return Explorer(figure=False)


@pytest.fixture
def drawn():
    return Explorer()


def test_starts_on_the_published_pro_flashmla_layout(app):
    """REFERENCE.md section 7: FlashMLA after #48993, 1,315,008 B."""
    assert app.error == ""
    assert app.layout.block_stride == expected().block_stride == 1_315_008
    assert app.stride_label.value == "block stride: 1,315,008 B"
    assert isinstance(app.widget, widgets.Box)


@pytest.mark.parametrize("changes,config,options,planner", [
    ({"head_dim": 576}, PRO.with_overrides(head_dim=576), {}, "overlay"),
    ({"head_dim": 256, "rope_dim": 128}, PRO.with_overrides(head_dim=256, qk_rope_head_dim=128), {}, "overlay"),
    ({"index_head_dim": 256, "indexer_format": "fp8"}, PRO.with_overrides(index_head_dim=256),
     {"indexer_format": "fp8"}, "overlay"),
    ({"main_format": "bf16"}, PRO, {"main_format": "bf16"}, "overlay"),
    ({"block_size": 512}, PRO, {"block_size": 512}, "overlay"),
    ({"mtp": False}, PRO, {"mtp": False}, "overlay"),
    ({"planner": "overlay-by-spec"}, PRO, {}, "overlay-by-spec"),
    ({"backend": "none"}, PRO, {"backend": "none"}, "overlay"),
    ({"c4": 10, "c128": 5, "swa": 3}, with_layer_mix(PRO, c4=10, c128=5, swa=3), {}, "overlay"),
])
def test_each_knob_recomputes_the_layout(app, changes, config, options, planner):
    for name, value in changes.items():  # one widget at a time, as a user would
        getattr(app, name).value = value
    want = expected(config, planner=planner, **options)
    assert app.error == ""
    assert app.layout.block_stride == want.block_stride
    assert [g.name for g in app.layout.groups] == [g.name for g in want.groups]
    assert app.stride_label.value == f"block stride: {want.block_stride:,} B"


@pytest.mark.parametrize("backend,indexer,planner,stride", [
    ("flashmla", "mxfp4", "overlay", 1_315_008),
    ("flashmla", "fp8", "bucketed", 1_473_408),
    ("flashinfer", "mxfp4", "overlay", 1_228_800),
    ("flashinfer", "fp8", "bucketed", 1_308_672),
])
def test_published_before_and_after(app, backend, indexer, planner, stride):
    """REFERENCE.md section 7; choosing the backend picks its main format (FlashInfer: fp8)."""
    app.backend.value = backend
    app.indexer_format.value = indexer
    app.planner.value = planner
    assert app.main_format.value == {"flashmla": "fp8_ds_mla", "flashinfer": "fp8"}[backend]
    assert app.layout.block_stride == stride
    assert f"{stride:,} B" in app.stride_label.value


def test_blocks_and_change_against_bucketed(app):
    app.budget_gib.value = 26.46
    budget = int(26.46 * GIB)
    after, before = expected(), expected(planner="bucketed")
    blocks_after, blocks_before = budget // after.block_stride, budget // before.block_stride
    assert app.result.num_blocks == blocks_after
    assert app.blocks_label.value.startswith(f"{blocks_after:,} blocks at 26.46 GiB")
    stride_pct = 100 * (after.block_stride - before.block_stride) / before.block_stride
    blocks_pct = 100 * (blocks_after - blocks_before) / blocks_before
    text = app.change_label.value
    assert f"stride {before.block_stride:,} B ({stride_pct:+.2f}%)" in text
    assert f"blocks {blocks_before:,} ({blocks_pct:+.2f}%)" in text
    app.planner.value = "bucketed"
    assert "baseline" in app.change_label.value


def test_group_table_lists_every_group(app):
    for g in app.layout.groups:
        assert f"<td>{g.name}</td>" in app.table.value
    assert "binds" in app.table.value
    assert f"{app.layout.block_stride:,}" in app.derivation.value


@pytest.mark.parametrize("changes,field", [
    ({"index_head_dim": 100}, "index_head_dim=100"),  # MXFP4 needs a multiple of 32
    ({"indexer_format": "fp8", "index_head_dim": 160}, "index_head_dim=160"),  # FP8 needs 128s
    ({"head_dim": 544}, "head_dim=544"),  # 544 - 64 = 480 is not a multiple of 64 (fp8_ds_mla)
    ({"c4": 0, "c128": 0}, "layer mix"),  # Pro has no SWA-only layers: zero layers left
    ({"block_size": 64}, "block_size=64"),  # c128 layers need a multiple of 128
    ({"head_dim": 128, "rope_dim": 128}, "qk_rope_head_dim=128"),  # no NoPE dims left
])
def test_impossible_knobs_show_a_message_and_keep_the_last_layout(drawn, changes, field):
    *fine, (name, value) = changes.items()
    for n, v in fine:  # the steps before the last one are still possible
        getattr(drawn, n).value = v
    assert drawn.error == ""
    good, label, png = drawn.layout, drawn.stride_label.value, bytes(drawn.figure.value)
    getattr(drawn, name).value = value  # must not raise
    assert field in drawn.error
    assert "\n" not in drawn.error
    assert drawn.error_label.layout.display != "none"
    assert field in drawn.error_label.value
    assert drawn.layout is good
    assert (drawn.stride_label.value, bytes(drawn.figure.value)) == (label, png)


def test_fixing_the_knobs_clears_the_message(app):
    app.head_dim.value = 544
    assert app.error
    app.head_dim.value = 576
    assert app.error == "" and app.error_label.layout.display == "none"
    assert app.layout.block_stride == expected(PRO.with_overrides(head_dim=576)).block_stride


def test_an_internal_failure_is_shown_not_raised(app, monkeypatch):
    def boom(knobs):
        raise RuntimeError("planner exploded")

    good = app.layout
    monkeypatch.setattr(explorer_module, "plan_pair", boom)
    app.head_dim.value = 640
    assert app.error == "internal error (RuntimeError): planner exploded"
    assert app.layout is good


def test_a_failing_figure_is_shown_not_raised(drawn, monkeypatch):
    def broken(layout, **kwargs):
        raise ValueError("no room to draw")

    monkeypatch.setattr(drawn, "_block_map", broken)
    drawn.head_dim.value = 640
    assert "no room to draw" in drawn.error
    assert drawn.layout.block_stride == expected(PRO.with_overrides(head_dim=640)).block_stride


def test_figure_follows_the_layout_not_the_budget(drawn):
    first = bytes(drawn.figure.value)
    assert first.startswith(PNG_MAGIC) and drawn.figure_up_to_date
    drawn.indexer_format.value = "fp8"
    second = bytes(drawn.figure.value)
    assert second.startswith(PNG_MAGIC) and second != first and drawn.figure_up_to_date
    drawn.budget_gib.value = 40.0  # same layout: same picture, new block count
    assert bytes(drawn.figure.value) == second
    assert drawn.blocks_label.value.startswith(f"{int(40 * GIB) // drawn.layout.block_stride:,} blocks")
    drawn.indexer_format.value = "mxfp4"  # back to a drawn layout: the cached picture
    assert bytes(drawn.figure.value) == first


def test_figure_is_drawn_after_the_numbers_inside_an_event_loop(drawn):
    """In Jupyter the kernel's loop runs: numbers first, the block map right after."""
    async def change():
        drawn.head_dim.value = 640
        numbers_first = (drawn.stride_label.value, drawn.figure_up_to_date)
        await asyncio.sleep(0)
        return numbers_first

    stride = expected(PRO.with_overrides(head_dim=640)).block_stride
    before = bytes(drawn.figure.value)
    assert asyncio.run(change()) == (f"block stride: {stride:,} B", False)
    assert drawn.figure_up_to_date and bytes(drawn.figure.value) != before
    assert drawn.figure_caption.value.endswith(f"block stride {stride:,} B")


def test_text_map_without_the_figure(app):
    assert app.figure.layout.display == "none"
    assert app.layout.text_map() in app.text_map.value.replace("&#x27;", "'")
    app.c4.value = 12
    assert f"block stride {app.layout.block_stride:,} B" in app.text_map.value


def test_changing_the_preset_resets_the_model_knobs(app):
    app.set(head_dim=576, index_head_dim=256, c4=3, c128=4, swa=5, mtp=False, main_format="bf16")
    app.model.value = "deepseek-v4-flash"
    knobs = app.knobs()
    assert {k: knobs[k] for k in ("head_dim", "rope_dim", "index_head_dim", "c4", "c128", "swa", "mtp")} == {
        "head_dim": 512, "rope_dim": 64, "index_head_dim": 128, "c4": 21, "c128": 20, "swa": 2, "mtp": True}
    assert knobs["main_format"] == "bf16"  # formats are deployment knobs, not the model's
    assert app.layout.block_stride == expected(FLASH, main_format="bf16").block_stride
    app.model.value = "deepseek-v4-pro"
    assert (app.c4.value, app.c128.value, app.swa.value) == (30, 31, 0)
    assert app.layout.block_stride == expected(main_format="bf16").block_stride


def test_set_changes_several_knobs_with_one_update(app):
    n = app.updates
    app.set(indexer_format="fp8", planner="bucketed", head_dim=576)
    assert app.updates == n + 1
    want = expected(PRO.with_overrides(head_dim=576), indexer_format="fp8", planner="bucketed")
    assert app.layout.block_stride == want.block_stride
    with pytest.raises(KvvizError, match="head_size"):
        app.set(head_size=1)


def test_every_control_and_output_has_its_css_class(app):
    for name, css in CSS_CLASSES.items():
        assert css in getattr(app, name)._dom_classes, name


def test_default_knobs_follow_the_app():
    knobs = default_knobs()
    assert Explorer(figure=False).knobs() == knobs
    assert default_knobs(backend="flashinfer")["main_format"] == "fp8"
    assert default_knobs("deepseek-v4-flash")["swa"] == 2
    with pytest.raises(KvvizError, match="head_size"):
        default_knobs(head_size=1)


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
    assert table["requests vs first %"][0] == 0.0


def test_sweep_keeps_impossible_rows_with_their_message():
    table = sweep("block_size", [64, 256])
    assert table["note"][0].startswith("block_size=64")
    assert table["block stride"].isna()[0]
    assert table["block stride"][1] == expected().block_stride and table["note"][1] == ""


def test_compare_knobs_shows_the_effective_value_of_every_changed_knob():
    table = compare_knobs([{}, {"c4": 61, "c128": 0}])
    assert table[["c4", "c128"]].values.tolist() == [[30, 31], [61, 0]]
    assert table["block stride"][1] == expected(with_layer_mix(PRO, c4=61, c128=0, swa=0)).block_stride
