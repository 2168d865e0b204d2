"""The Explorer app driven from pytest: set widget values, compare with the library computed here.

Every expected number is computed in the test from kvviz.planners.plan_model with the same knobs
(or taken from docs/published-numbers.md#the-published-table), never read back from the
explorer's own helpers. The block map is checked through the data the live map draws.
"""

import dataclasses
from html.parser import HTMLParser

import ipywidgets as widgets
import pytest

from kvviz import knobs as knobs_module
from kvviz.capacity import GIB
from kvviz.config import load_model, with_layer_mix
from kvviz.errors import KvvizError
from kvviz.explorer import CSS_CLASSES, Explorer
from kvviz.livemap import LiveBlockMap
from kvviz.planners import plan_model
from kvviz.specs import CacheOptions

PRO = load_model("deepseek-v4-pro")
FLASH = load_model("deepseek-v4-flash")


class _Table(HTMLParser):
    """The cells of an HTML table, row by row (header row first)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows, self._cell = [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append(self._cell.strip())
            self._cell = None


def drawn_ranges(app):
    """(layer, group, offset, end) of every range the live map is given."""
    return sorted((r["layer"], r["group"], r["offset"], r["end"]) for r in app.map_data["ranges"])


def layout_ranges(layout):
    return sorted((p.name, layout.groups[p.group].name, p.offset, p.end) for p in layout.placements)


def expected(config=PRO, *, planner="overlay", **options):
    """The library's layout for the knobs, computed independently of the explorer."""
    opts = dict(backend="flashmla", main_format="fp8_ds_mla", indexer_format="mxfp4", block_size=256, mtp=True)
    opts.update(options)
    return plan_model(config, CacheOptions(**opts), planner)


@pytest.fixture
def app():
    return Explorer()


def test_starts_on_the_published_pro_flashmla_layout(app):
    """docs/published-numbers.md#the-published-table: FlashMLA after #48993, 1,315,008 B."""
    assert app.error == ""
    assert app.layout.block_stride == expected().block_stride == 1_315_008
    assert app.stride_label.value == "block stride: 1,315,008 B"
    assert isinstance(app.widget, widgets.Box)
    assert isinstance(app.block_map, LiveBlockMap) and app.block_map in app.widget.children
    assert drawn_ranges(app) == layout_ranges(expected())


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
    # The map drawn in the browser is fed in the same handler: no stale picture.
    assert drawn_ranges(app) == layout_ranges(want)
    assert app.map_data["stride"] == want.block_stride
    binding = None if want.binding_group is None else want.groups[want.binding_group].name
    assert app.map_data["binding_group"] == binding
    assert [lane["name"] for lane in app.map_data["lanes"] if lane["binds"]] == ([binding] if binding else [])


@pytest.mark.parametrize("backend,indexer,planner,stride", [
    ("flashmla", "mxfp4", "overlay", 1_315_008),
    ("flashmla", "fp8", "bucketed", 1_473_408),
    ("flashinfer", "mxfp4", "overlay", 1_228_800),
    ("flashinfer", "fp8", "bucketed", 1_308_672),
])
def test_published_before_and_after(app, backend, indexer, planner, stride):
    """docs/published-numbers.md#the-published-table; choosing the backend picks its main
    format (FlashInfer: fp8)."""
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


@pytest.mark.parametrize("changes,options,planner", [
    ({}, {}, "overlay"),
    ({"backend": "flashinfer"}, {"backend": "flashinfer", "main_format": "fp8"}, "overlay"),
    ({"planner": "bucketed", "indexer_format": "fp8"}, {"indexer_format": "fp8"}, "bucketed"),
])
def test_group_table_is_the_layouts_groups(app, changes, options, planner):
    """One row per group: name, layers, total, unused, and "binds" on the group whose total is the
    stride (the c4 state group under FlashInfer; none for the bucketed planner)."""
    app.set(**changes)
    want = expected(planner=planner, **options)
    header, *rows = _Table(app.table.value).rows
    assert header == list(want.group_table().columns)
    assert rows == [[g.name, str(len(g.layers)), f"{g.total_bytes:,}", f"{want.block_stride - g.total_bytes:,}",
                     "binds" if g.total_bytes == want.block_stride else ""] for g in want.groups]
    assert "white-space:nowrap" in app.table.value  # c4-state-a never wraps mid-word
    # The derivation: the layout's own lines, kept as they are (no wrapping inside a term).
    assert app.derivation.value.startswith('<pre style="white-space:pre')
    assert want.explain() in app.derivation.value.replace("&gt;", ">").replace("&#x27;", "'")


@pytest.mark.parametrize("changes,field", [
    ({"index_head_dim": 100}, "index_head_dim=100"),  # MXFP4 needs a multiple of 32
    ({"indexer_format": "fp8", "index_head_dim": 160}, "index_head_dim=160"),  # FP8 needs 128s
    ({"head_dim": 544}, "head_dim=544"),  # 544 - 64 = 480 is not a multiple of 64 (fp8_ds_mla)
    ({"c4": 0, "c128": 0}, "layer mix"),  # Pro has no SWA-only layers: zero layers left
    ({"block_size": 64}, "block_size=64"),  # c128 layers need a multiple of 128
    ({"head_dim": 128, "rope_dim": 128}, "qk_rope_head_dim=128"),  # no NoPE dims left
])
def test_impossible_knobs_show_a_message_and_keep_the_last_layout(app, changes, field):
    *fine, (name, value) = changes.items()
    for n, v in fine:  # the steps before the last one are still possible
        getattr(app, n).value = v
    assert app.error == ""
    good, label, data = app.layout, app.stride_label.value, app.map_data
    previous = getattr(app, name).value
    getattr(app, name).value = value  # must not raise
    assert app.error.startswith(field)
    assert "\n" not in app.error
    assert app.error_label.layout.display != "none"
    assert field in app.error_label.value
    assert app.block_map.status == f"refused: {app.error}"
    assert app.layout is good
    assert (app.stride_label.value, app.map_data) == (label, data)
    # The caption names the configuration still drawn: the last good knobs, not the refused one.
    caption = app.map_caption.value
    assert "still drawn: deepseek-v4-pro" in caption and f"block stride {good.block_stride:,} B" in caption
    shown = {"head_dim": "head_dim {}", "block_size": "{}-token blocks", "index_head_dim": "index_head_dim {}",
             "rope_dim": "rope {}"}
    if name in shown:
        assert shown[name].format(previous) in caption
        assert shown[name].format(value) not in caption


@pytest.mark.parametrize("budget", [0.0, -1.0])
def test_a_budget_of_zero_or_less_is_an_error_not_a_clamp(app, budget):
    good = app.result
    app.budget_gib.value = budget
    assert app.budget_gib.value == budget  # the control does not clamp it
    assert app.error == f"budget_gib={budget!r}: must be a positive number"
    assert app.result is good
    assert knobs_module.compare_knobs([{"budget_gib": budget}])["note"][0] == app.error


def test_fixing_the_knobs_clears_the_message(app):
    app.head_dim.value = 544
    assert app.error
    app.head_dim.value = 576
    assert app.error == "" and app.error_label.layout.display == "none"
    assert app.layout.block_stride == expected(PRO.with_overrides(head_dim=576)).block_stride


def test_an_internal_failure_is_shown_not_raised(app, monkeypatch):
    from kvviz import explorer as explorer_module

    def boom(knobs):
        raise RuntimeError("planner exploded")

    good, data = app.layout, app.map_data
    monkeypatch.setattr(explorer_module, "plan_pair", boom)
    app.head_dim.value = 640
    assert app.error == "internal error (RuntimeError): planner exploded"
    assert app.layout is good and app.map_data == data


def test_map_follows_the_layout_not_the_budget(app):
    first = app.map_data
    app.indexer_format.value = "fp8"
    second = app.map_data
    assert drawn_ranges(app) == layout_ranges(expected(indexer_format="fp8")) != layout_ranges(expected())
    app.budget_gib.value = 40.0  # same layout: the same map data (not even re-sent), new block count
    assert app.map_data is second
    assert app.blocks_label.value.startswith(f"{int(40 * GIB) // app.layout.block_stride:,} blocks")
    app.indexer_format.value = "mxfp4"  # back to a planned layout: its cached data
    assert app.map_data is first


def test_map_caption_names_the_configuration_drawn(app):
    app.set(head_dim=576, block_size=512)
    caption = app.map_caption.value
    want = expected(PRO.with_overrides(head_dim=576), block_size=512)
    assert "block map of deepseek-v4-pro, head_dim 576," in caption and "512-token blocks" in caption
    assert caption.endswith(f"block stride {want.block_stride:,} B</div>")


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


def test_knobs_that_do_not_apply_are_hidden(app, monkeypatch):
    """A knob declares the models it applies to; the explorer hides the others' controls."""
    shown = {name for name in knobs_module.KNOBS if getattr(app, name).layout.display is None}
    assert shown == set(knobs_module.knobs_for("deepseek-v4-pro"))  # the hybrid models' knobs are hidden
    hidden = dataclasses.replace(knobs_module.KNOB_BY_NAME["index_head_dim"],
                                 applies_to=lambda config: config.name != "deepseek-v4-flash")
    specs = tuple(hidden if k.name == "index_head_dim" else k for k in knobs_module.KNOB_SPECS)
    monkeypatch.setattr(knobs_module, "KNOB_SPECS", specs)
    app.model.value = "deepseek-v4-flash"
    assert app.index_head_dim.layout.display == "none"
    assert app.head_dim.layout.display is None
    app.model.value = "deepseek-v4-pro"
    assert app.index_head_dim.layout.display is None


def test_the_app_starts_on_the_documented_knobs():
    """The explorer's start: the Pro preset (config.json), FlashMLA with fp8_ds_mla rows, the
    MXFP4 indexer, 256-token blocks, the overlay planner and FlashMLA's 26.09 GiB budget
    (docs/published-numbers.md#the-published-table)."""
    assert Explorer().knobs() == {
        "model": "deepseek-v4-pro", "head_dim": PRO.head_dim, "rope_dim": PRO.qk_rope_head_dim,
        "index_head_dim": PRO.index_head_dim, "main_format": "fp8_ds_mla", "indexer_format": "mxfp4",
        "backend": "flashmla", "block_size": 256, "mtp": True, "c4": 30, "c128": 31, "swa": 0,
        "planner": "overlay", "budget_gib": 26.09}
    assert Explorer(backend="flashinfer").main_format.value == "fp8"
