"""The Explorer app driven from pytest: set widget values, compare with the library computed here.

Every expected number is computed in the test from kvviz.vllm.plan.plan_model with the same knobs
(or taken from docs/published-numbers.md#the-published-table, or by hand from vLLM 0.33's
rules), never read back from the explorer's own helpers. The block map is checked through the
data the live map draws.
"""

import dataclasses
import re
from html.parser import HTMLParser

import ipywidgets as widgets
import pytest

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError
from kvviz.explorer import knobs as knobs_module
from kvviz.explorer import sweeps
from kvviz.explorer.app import Explorer
from kvviz.explorer.display import CSS_CLASSES
from kvviz.families import load_preset, preset_raw
from kvviz.options import Options
from kvviz.views.livemap import LiveBlockMap
from kvviz.vllm.plan import plan_model

PRO = load_preset("deepseek-v4-pro")
FLASH = load_preset("deepseek-v4-flash")


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


def expected(model=PRO, *, planner="vllm", **options):
    """The library's layout for the knobs, computed independently of the explorer. 'vllm' is the
    explorer's default planner for DeepSeek V4 (old 'overlay-by-spec': #48993's overlay stride)."""
    opts = dict(backend="flashmla", main_format="fp8_ds_mla", indexer_format="mxfp4", block_size=256, mtp=True)
    opts.update(options)
    return plan_model(model, planner, Options(**opts)).layout


def stride_text(stride, tokens):
    """The stride label: the block's bytes and its tokens."""
    return f"block stride {stride:,} B, {tokens} tokens per block"


@pytest.fixture
def app():
    return Explorer()


def test_starts_on_the_published_pro_flashmla_layout(app):
    """docs/published-numbers.md#the-published-table: FlashMLA after #48993, 1,315,008 B."""
    assert app.error == ""
    assert app.layout.block_stride == expected().block_stride == expected(planner="overlay").block_stride == 1_315_008
    assert app.stride_label.value == stride_text(1_315_008, 256)
    assert isinstance(app.widget, widgets.Box)
    assert isinstance(app.block_map, LiveBlockMap) and app.block_map in app.answer.children
    assert drawn_ranges(app) == layout_ranges(expected())


def test_the_capacity_line_is_vllms(app):
    """vLLM's own "GPU KV cache size" line of the plan at the budget and max_model_len."""
    plan = plan_model(PRO, "vllm", Options(max_model_len=PRO.max_model_len))
    assert app.capacity_label.value == plan.capacity(int(26.09 * GIB)).line
    assert app.capacity_label.value.startswith("GPU KV cache size: ")
    assert app.plan.block_stride == plan.block_stride and app.notice == ""
    loaded = Explorer(load_preset("gpt-oss-120b"))  # a loaded Model too: named by its name
    assert loaded.error == "" and loaded.model.value == "gpt-oss-120b"
    assert loaded.map_caption.value.split(">", 1)[1].startswith("block map of gpt-oss-120b, ")


@pytest.mark.parametrize(
    "changes,model,options,planner",
    [
        ({"head_dim": 576}, PRO, {"head_dim": 576}, "vllm"),
        ({"head_dim": 256, "rope_dim": 128}, PRO, {"head_dim": 256, "rope_dim": 128}, "vllm"),
        (
            {"index_head_dim": 256, "indexer_format": "fp8"},
            PRO,
            {"index_head_dim": 256, "indexer_format": "fp8"},
            "vllm",
        ),
        ({"main_format": "bf16"}, PRO, {"main_format": "bf16"}, "vllm"),
        ({"block_size": 512}, PRO, {"block_size": 512}, "vllm"),
        ({"mtp": False}, PRO, {"mtp": False}, "vllm"),
        ({"planner": "overlay"}, PRO, {}, "overlay"),
        ({"backend": "none"}, PRO, {"backend": "none"}, "vllm"),
        ({"c4": 10, "c128": 5, "swa": 3}, PRO.reader.with_layer_mix(PRO, c4=10, c128=5, swa=3), {}, "vllm"),
    ],
)
def test_each_knob_recomputes_the_layout(app, changes, model, options, planner):
    for name, value in changes.items():  # one widget at a time, as a user would
        getattr(app, name).value = value
    want = expected(model, planner=planner, **options)
    assert app.error == ""
    assert app.layout.block_stride == want.block_stride
    assert [g.name for g in app.layout.groups] == [g.name for g in want.groups]
    assert app.stride_label.value == stride_text(want.block_stride, options.get("block_size", 256))
    # The map drawn in the browser is fed in the same handler: no stale picture.
    assert drawn_ranges(app) == layout_ranges(want)
    assert app.map_data["stride"] == want.block_stride
    binding = None if want.binding_group is None else want.groups[want.binding_group].name
    assert app.map_data["binding_group"] == binding
    assert [lane["name"] for lane in app.map_data["lanes"] if lane["binds"]] == ([binding] if binding else [])


@pytest.mark.parametrize(
    "backend,indexer,planner,stride",
    [
        ("flashmla", "mxfp4", "overlay", 1_315_008),
        ("flashmla", "fp8", "bucketed", 1_473_408),
        ("flashinfer", "mxfp4", "overlay", 1_228_800),
        ("flashinfer", "fp8", "bucketed", 1_308_672),
    ],
)
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
    app.planner.value = "bucketed"  # the baseline itself: no change line against itself
    cap = plan_model(PRO, "bucketed", Options(max_model_len=PRO.max_model_len)).capacity(budget)
    assert app.change_label.value == ""  # no change line against itself
    one = cap.requests_fit == 1
    assert app.fits_label.value == (
        f"{cap.requests_fit:,} whole request{'' if one else 's'} of {cap.max_model_len:,} "
        f"tokens fit{'s' if one else ''}"
    )


@pytest.mark.parametrize(
    "changes,options,planner",
    [
        ({}, {}, "vllm"),
        ({"backend": "flashinfer"}, {"backend": "flashinfer", "main_format": "fp8"}, "vllm"),
        ({"planner": "bucketed", "indexer_format": "fp8"}, {"indexer_format": "fp8"}, "bucketed"),
    ],
)
def test_group_table_is_the_layouts_groups(app, changes, options, planner):
    """One row per group: name, layers, total, unused, and "binds" on the group whose total is the
    stride (the c4 state group under FlashInfer; none for the bucketed planner)."""
    app.set(**changes)
    want = expected(planner=planner, **options)
    header, *rows = _Table(app.table.value).rows
    assert header == list(want.group_table().columns)
    assert rows == [
        [
            g.name,
            str(len(g.layers)),
            f"{want.group_total(i):,}",
            f"{want.group_unused(i):,}",
            "binds" if i == want.binding_group else "",
        ]
        for i, g in enumerate(want.groups)
    ]
    if planner == "bucketed":
        assert "binds" not in [r[-1] for r in rows]
    assert "white-space:nowrap" in app.table.value  # c4-state-a never wraps mid-word
    # The derivation: the layout's own lines, kept as they are (no wrapping inside a term).
    assert app.derivation.value.startswith('<pre style="white-space:pre')
    assert want.explain() in app.derivation.value.replace("&gt;", ">").replace("&#x27;", "'")


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"index_head_dim": 100}, "index_head_dim=100"),  # MXFP4 needs a multiple of 32
        ({"indexer_format": "fp8", "index_head_dim": 160}, "index_head_dim=160"),  # FP8 needs 128s
        ({"head_dim": 544}, "head_dim=544"),  # 544 - 64 = 480 is not a multiple of 64 (fp8_ds_mla)
        ({"c4": 0, "c128": 0}, "layer mix"),  # Pro has no SWA-only layers: zero layers left
        ({"block_size": 64}, "block_size=64"),  # c128 layers need a multiple of 128
        ({"head_dim": 128, "rope_dim": 128}, "qk_rope_head_dim=128"),  # no NoPE dims left
    ],
)
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
    assert re.search(r"still drawn[^:]*: deepseek-v4-pro", caption)
    assert f"block stride {good.block_stride:,} B" in caption
    shown = {
        "head_dim": "head_dim {},",
        "block_size": "block size {},",
        "index_head_dim": "index_head_dim {},",
        "rope_dim": "rope dims {},",
    }
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
    assert sweeps.compare_knobs([{"budget_gib": budget}])["note"][0] == app.error


def test_fixing_the_knobs_clears_the_message(app):
    app.head_dim.value = 544
    assert app.error
    app.head_dim.value = 576
    assert app.error == "" and app.error_label.layout.display == "none"
    assert app.layout.block_stride == expected(head_dim=576).block_stride


def test_an_internal_failure_is_shown_not_raised(app, monkeypatch):
    from kvviz.explorer import display as explorer_module

    def boom(knobs, planner=None):
        raise RuntimeError("planner exploded")

    good, data = app.layout, app.map_data
    monkeypatch.setattr(explorer_module, "plan_knobs", boom)
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
    want = expected(head_dim=576, block_size=512)
    assert "block map of deepseek-v4-pro, head_dim 576," in caption and "block size 512," in caption
    assert caption.endswith(f"{stride_text(want.block_stride, 512)}</div>")


def test_changing_the_preset_resets_the_model_knobs(app):
    app.set(head_dim=576, index_head_dim=256, c4=3, c128=4, swa=5, mtp=False, main_format="bf16")
    app.model.value = "deepseek-v4-flash"
    knobs = app.knobs()
    assert {k: knobs[k] for k in ("head_dim", "rope_dim", "index_head_dim", "c4", "c128", "swa", "mtp")} == {
        "head_dim": 512,
        "rope_dim": 64,
        "index_head_dim": 128,
        "c4": 21,
        "c128": 20,
        "swa": 2,
        "mtp": True,
    }
    assert knobs["main_format"] == "bf16"  # formats are deployment knobs, not the model's
    assert app.layout.block_stride == expected(FLASH, main_format="bf16").block_stride
    app.model.value = "deepseek-v4-pro"
    assert (app.c4.value, app.c128.value, app.swa.value) == (30, 31, 0)
    assert app.layout.block_stride == expected(main_format="bf16").block_stride


def test_set_changes_several_knobs_with_one_update(app):
    n = app.updates
    app.set(indexer_format="fp8", planner="bucketed", head_dim=576)
    assert app.updates == n + 1
    want = expected(head_dim=576, indexer_format="fp8", planner="bucketed")
    assert app.layout.block_stride == want.block_stride
    with pytest.raises(KvvizError, match="head_size"):
        app.set(head_size=1)


def test_every_control_and_output_has_its_css_class(app):
    for name, css in CSS_CLASSES.items():
        assert css in getattr(app, name)._dom_classes, name
    for name in knobs_module.KNOBS:  # every knob's control: kvviz-knob-<name>
        assert f"kvviz-knob-{name.replace('_', '-')}" in getattr(app, name)._dom_classes, name


def test_knobs_that_do_not_apply_are_hidden(app, monkeypatch):
    """A knob declares the models it applies to; the explorer hides the others' controls."""
    shown = {name for name in knobs_module.KNOBS if getattr(app, name).layout.display is None}
    assert shown == set(knobs_module.knobs_for("deepseek-v4-pro"))  # the hybrid models' knobs are hidden
    hidden = dataclasses.replace(
        knobs_module.KNOB_BY_NAME["index_head_dim"], applies_to=lambda model: model.name != "deepseek-v4-flash"
    )
    specs = tuple(hidden if k.name == "index_head_dim" else k for k in knobs_module.KNOB_SPECS)
    monkeypatch.setattr(knobs_module, "KNOB_SPECS", specs)
    app.model.value = "deepseek-v4-flash"
    assert app.index_head_dim.layout.display == "none"
    assert app.head_dim.layout.display is None
    app.model.value = "deepseek-v4-pro"
    assert app.index_head_dim.layout.display is None


def test_the_app_starts_on_the_documented_knobs():
    """The explorer's start: the Pro preset (config.json), FlashMLA with fp8_ds_mla rows, the
    MXFP4 indexer, the engine's block size ('auto': 256 tokens), vLLM's own planner ('vllm', the
    #48993 overlay stride), the model's own max_model_len and FlashMLA's 26.09 GiB budget
    (docs/published-numbers.md#the-published-table)."""
    c = PRO.config
    app = Explorer()
    assert app.knobs() == {
        "model": "deepseek-v4-pro",
        "head_dim": c.head_dim,
        "rope_dim": c.qk_rope_head_dim,
        "index_head_dim": c.index_head_dim,
        "main_format": "fp8_ds_mla",
        "indexer_format": "mxfp4",
        "backend": "flashmla",
        "block_size": "auto",
        "mtp": True,
        "c4": 30,
        "c128": 31,
        "swa": 0,
        "tensor_parallel_size": 1,
        "decode_context_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "kv_offloading_size": 0.0,
        "data_parallel_size": 1,
        "planner": "vllm",
        "context": PRO.max_model_len,
        "budget_gib": 26.09,
        "gpu": "budget",
        "gpu_memory_utilization": 0.92,
    }
    assert app.plan.tokens_per_block == 256
    assert Explorer(backend="flashinfer").main_format.value == "fp8"


# ---- hybrid models ------------------------------------------------------------------------------
# The knobs each hybrid preset shows (docs/hybrid.md#hybrid-caches): the window only with sliding
# layers, the Mamba state dtype and prefix caching only with gated delta net layers.
HYBRID_BASE = {
    "model",
    "kv_dtype",
    "block_size",
    "full_layers",
    "tensor_parallel_size",
    "decode_context_parallel_size",
    "pipeline_parallel_size",
    "kv_offloading_size",
    "data_parallel_size",
    "planner",
    "context",
    "budget_gib",
    "gpu",
    "gpu_memory_utilization",
}
HYBRID_SHOWN = {
    "gpt-oss-120b": HYBRID_BASE | {"sliding_window"},
    "gemma-3-27b": HYBRID_BASE | {"sliding_window"},
    "llama-4-scout": HYBRID_BASE,
    "qwen3-next-80b-a3b": HYBRID_BASE | {"mamba_ssm_dtype", "prefix_caching"},
}
PRO_SHOWN = {
    "model",
    "head_dim",
    "rope_dim",
    "index_head_dim",
    "main_format",
    "indexer_format",
    "backend",
    "block_size",
    "mtp",
    "c4",
    "c128",
    "swa",
    "tensor_parallel_size",
    "decode_context_parallel_size",
    "pipeline_parallel_size",
    "kv_offloading_size",
    "data_parallel_size",
    "planner",
    "context",
    "budget_gib",
    "gpu",
    "gpu_memory_utilization",
}


def shown_knobs(app):
    return {name for name in knobs_module.KNOBS if getattr(app, name).layout.display is None}


def attention_page(config, tokens=16, element_bytes=2):
    """One attention layer's page: tokens x KV heads x head_dim x 2 (K and V) x element bytes."""
    return tokens * config.num_key_value_heads * config.head_dim * 2 * element_bytes


def vllm_group_layers(config) -> list[int]:
    """Layers per group under vLLM 0.33's grouping, by hand: buckets of one kind; the group size
    is the smallest bucket, or the largest when under 1.5 x the smallest; a bucket of n layers
    splits into cdiv(n, size) groups dealt round-robin (docs/hybrid.md#hybrid-grouping)."""
    counts = [config.layer_kinds.count(k) for k in dict.fromkeys(config.layer_kinds)]
    size = max(counts) if 2 * max(counts) < 3 * min(counts) else min(counts)
    out = []
    for n in counts:
        groups = -(-n // size)
        out += [n // groups + (i < n % groups) for i in range(groups)]
    return out


@pytest.mark.parametrize("name", ["gpt-oss-120b", "gemma-3-27b", "llama-4-scout"])
def test_picking_an_attention_hybrid_shows_its_knobs_and_vllms_bytes_per_block(app, name):
    app.model.value = name
    model = load_preset(name)
    config = model.config
    assert app.error == ""
    assert shown_knobs(app) == HYBRID_SHOWN[name]
    assert set(app.knobs()) == HYBRID_SHOWN[name]
    per_block = max(vllm_group_layers(config)) * attention_page(config)
    assert app.stride_label.value == stride_text(per_block, 16)
    assert {"gpt-oss-120b": 589_824, "gemma-3-27b": 1_310_720, "llama-4-scout": 786_432}[name] == per_block
    # The map draws vLLM's layout as it is: one lane per group, every page at its offset.
    want = plan_model(model, "vllm", Options()).layout
    assert [lane["name"] for lane in app.map_data["lanes"]] == [g.name for g in want.groups]
    assert [lane["num_layers"] for lane in app.map_data["lanes"]] == vllm_group_layers(config)
    assert drawn_ranges(app) == layout_ranges(want)
    assert app.map_data["stride"] == per_block
    budget = int(26.09 * GIB)
    assert app.blocks_label.value == f"{budget // per_block:,} blocks at 26.09 GiB"


def test_the_summary_compares_the_three_planners(app):
    app.model.value = "gemma-3-27b"
    model = load_preset("gemma-3-27b")
    config = model.config
    assert app.summary.layout.display is None
    header, *rows = _Table(app.summary.value).rows
    assert header[:3] == ["planner", "tokens/block", "bytes/block"]
    page = attention_page(config)
    sliding, full = config.layer_kinds.count("sliding_attention"), config.layer_kinds.count("full_attention")
    # vllm and packed: every page one size, so packed is vLLM's layout; separate: one pool per
    # kind, one block of each = every layer's page.
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("vllm", "16", f"{10 * page:,}"),
        ("packed", "16", f"{10 * page:,}"),
        ("separate", "16", f"{(sliding + full) * page:,}"),
    ]
    # Waste of vLLM's layout: 7 groups (9, 9, 9, 9, 8, 8 sliding; 10 full) of 10 pages each; the
    # groups one or two layers short leave whole pages empty.
    groups = vllm_group_layers(config)
    assert groups == [9, 9, 9, 9, 8, 8, 10]
    empty = sum(max(groups) - g for g in groups) * page
    total = len(groups) * max(groups) * page
    assert f"waste {empty:,} B of {total:,} B ({100 * empty / total:.2f}%)" in app.summary.value
    assert f"empty slots {empty:,} B, padded pages 0 B, unused tail 0 B" in app.summary.value
    assert rows[0][4] == f"{empty:,}"
    # The admission estimate and the requests: vLLM's layout's capacity at the budget and
    # max_model_len (by default the model's own).
    assert app.context.value == model.max_model_len
    want = plan_model(model, "vllm", Options(max_model_len=app.context.value)).capacity(int(26.09 * GIB))
    assert f"vLLM's admission estimate: {want.admission_bytes_per_request:,} B per request" in app.summary.value
    assert app.fits_label.value.startswith(
        f"{want.requests_fit:,} whole request{'' if want.requests_fit == 1 else 's'} of {app.context.value:,} tokens "
        f"fit{'s' if want.requests_fit == 1 else ''}"
    )
    app.context.value = 4096
    again = plan_model(model, "vllm", Options(max_model_len=4096)).capacity(int(26.09 * GIB))
    assert app.result.summary == again


def qwen_state_bytes(ssm_element_bytes=2):
    """A gated delta net state: conv (kernel - 1) x conv_dim x 2 B + SSM v_heads x v_dim x k_dim
    x the SSM element (the preset's config.json)."""
    q = preset_raw("qwen3-next-80b-a3b")
    conv_dim = (
        2 * q["linear_num_key_heads"] * q["linear_key_head_dim"]
        + q["linear_num_value_heads"] * q["linear_value_head_dim"]
    )
    return (q["linear_conv_kernel_dim"] - 1) * conv_dim * 2 + q["linear_num_value_heads"] * q[
        "linear_value_head_dim"
    ] * q["linear_key_head_dim"] * ssm_element_bytes


def test_qwen3_next_prefix_caching_off_by_hand(app):
    """With prefix caching off the block is the smallest multiple of 16 tokens whose attention
    page holds one gated delta net state; a group holds 12 layers (36 linear + 12 full)."""
    app.model.value = "qwen3-next-80b-a3b"
    assert shown_knobs(app) == HYBRID_SHOWN["qwen3-next-80b-a3b"]
    q = preset_raw("qwen3-next-80b-a3b")
    state = qwen_state_bytes()
    per_token = q["num_key_value_heads"] * q["head_dim"] * 2 * 2
    app.prefix_caching.value = False
    block = 16 * -(-state // (16 * per_token))
    assert (block, 12 * block * per_token) == (544, 13_369_344)
    assert app.stride_label.value == stride_text(13_369_344, 544)
    # the state page is padded up to the attention page: that padding is shown as waste
    padded = 36 * (block * per_token - state)
    assert f"padded pages {padded:,} B" in app.summary.value
    app.prefix_caching.value = True  # 'align' mode: a multiple of lcm(16, 64) = 64 tokens
    block = 64 * -(-state // (64 * per_token))
    assert app.stride_label.value == stride_text(12 * block * per_token, block)
    app.mamba_ssm_dtype.value = "float32"  # the SSM state doubles: a larger block holds it
    block = 64 * -(-qwen_state_bytes(4) // (64 * per_token))
    assert app.stride_label.value == stride_text(12 * block * per_token, block)


def test_hybrid_knobs_recompute(app):
    app.model.value = "gpt-oss-120b"
    oss = load_preset("gpt-oss-120b").config
    assert (app.full_layers.min, app.full_layers.max, app.full_layers.value) == (0, 36, 18)
    app.kv_dtype.value = "fp8"  # one byte per element
    assert app.stride_label.value == stride_text(18 * attention_page(oss, element_bytes=1), 16)
    app.kv_dtype.value = "auto"
    app.block_size.value = 32  # twice the tokens, twice the page
    assert app.stride_label.value == stride_text(18 * attention_page(oss, tokens=32), 32)
    app.block_size.value = "auto"
    app.full_layers.value = 12  # 24 sliding + 12 full: groups of 12 layers
    assert app.stride_label.value == stride_text(12 * attention_page(oss), 16)
    assert [lane["num_layers"] for lane in app.map_data["lanes"]] == [12, 12, 12]
    app.sliding_window.value = 4096  # the window changes the sliding lanes' spec, not the page
    assert app.error == "" and app.map_data["lanes"][0]["name"] == "sliding4096-0"
    assert "12 full" in app.map_caption.value and "24 sliding" in app.map_caption.value
    app.model.value = "qwen3-next-80b-a3b"  # the preset's mix again, the slider's range its layers
    assert (app.full_layers.max, app.full_layers.value) == (48, 12)


def test_separate_pools_are_drawn_one_lane_per_pool(app):
    app.set(model="gemma-3-27b", planner="separate")
    model = load_preset("gemma-3-27b")
    page = attention_page(model.config)
    sliding, full = 52 * page, 10 * page
    assert app.error == ""
    assert app.stride_label.value == f"{stride_text(sliding + full, 16)} (2 separate pools)"
    lanes = app.map_data["lanes"]
    assert [(lane["name"], lane["total"], lane["block_end"], lane["binds"]) for lane in lanes] == [
        ("sliding1024", sliding, sliding, False),
        ("full", full, full, False),
    ]
    assert app.map_data["binding_group"] is None and app.map_data["stride"] == sliding
    pools = plan_model(model, "separate", Options()).pools
    assert drawn_ranges(app) == sorted(
        (p.name, pool.groups[0].name, p.offset, p.end) for pool in pools for p in pool.placements
    )
    caption = app.map_caption.value
    assert "each lane one block of its own pool with its own stride" in caption
    assert f"sliding1024 {sliding:,} B, full {full:,} B" in caption
    header, *rows = _Table(app.table.value).rows
    assert [r[:3] for r in rows] == [["sliding1024", "52", f"{sliding:,}"], ["full", "10", f"{full:,}"]]
    assert header[0] == "pool"


@pytest.mark.parametrize(
    "name,value,field",
    [
        ("block_size", 8, "block_size=8"),  # not a multiple of the kernels' 16 tokens
        ("sliding_window", 0, "sliding_window=0"),
        ("context", 0, "max_model_len=0"),  # the context knob is vLLM's max_model_len (its label)
    ],
)
def test_a_refused_hybrid_change_says_why_and_keeps_the_last_layout(app, name, value, field):
    app.model.value = "gemma-3-27b"
    good, label, data = app.layout, app.stride_label.value, app.map_data
    getattr(app, name).value = value  # must not raise
    assert app.error.startswith(field) and "\n" not in app.error
    assert field in app.error_label.value and app.error_label.layout.display != "none"
    assert app.layout is good and (app.stride_label.value, app.map_data) == (label, data)
    caption = app.map_caption.value
    assert re.search(r"still drawn[^:]*: gemma-3-27b, ", caption)
    assert "sliding window 1024" in caption and "block size auto" in caption and "planner vllm" in caption
    assert caption.endswith(f"{stride_text(good.block_stride, 16)}</div>")  # 'auto': 16 tokens
    assert "10 full" in caption and "52 sliding" in caption  # the layer mix still drawn


def test_switching_back_to_deepseek_restores_its_knobs(app):
    app.set(head_dim=576, c4=10)
    app.model.value = "qwen3-next-80b-a3b"
    app.kv_dtype.value = "fp8"
    app.model.value = "deepseek-v4-pro"
    assert shown_knobs(app) == PRO_SHOWN
    assert app.knobs() == Explorer().knobs()  # the preset's dims and mix, the explorer's start
    assert app.stride_label.value == stride_text(1_315_008, 256) and app.error == ""
    # no number of the previous model is left: the summary compares DeepSeek V4's planners
    header, *rows = _Table(app.summary.value).rows
    assert [r[0] for r in rows] == list(PRO.reader.planners)
    assert drawn_ranges(app) == layout_ranges(expected())
    app.model.value = "gpt-oss-120b"  # a deployment knob stays as set, as DeepSeek's formats do
    assert app.kv_dtype.value == "fp8"


def test_set_refuses_a_knob_of_the_other_family(app):
    n = app.updates
    app.set(model="gpt-oss-120b", kv_dtype="fp8")
    assert app.updates == n + 1
    with pytest.raises(KvvizError, match=r"^head_dim: does not apply to gpt-oss-120b \(.+\)"):
        app.set(head_dim=576)
    with pytest.raises(KvvizError, match=r"^kv_dtype: does not apply to deepseek-v4-pro"):
        app.set(model="deepseek-v4-pro", kv_dtype="bf16")


def test_the_app_can_start_on_a_hybrid_model():
    app = Explorer("llama-4-scout")
    assert app.error == "" and shown_knobs(app) == HYBRID_SHOWN["llama-4-scout"]
    assert app.full_layers.max == 48
    app.model.value = "deepseek-v4-pro"
    assert app.knobs() == Explorer().knobs()


def test_the_capacity_moves_with_gpu_utilization_and_tp():
    """With a GPU picked, the budget is one rank's share as vLLM profiles it (kvviz.deploy.budget): the
    blocks and vLLM's capacity line follow the GPU, its memory utilization and the TP size."""
    import math

    from kvviz.deploy.budget import kv_budget
    from kvviz.deploy.gpus import GPUS

    app = Explorer("llama-3.1-8b")
    app.set(gpu="H200", gpu_memory_utilization=0.9, tensor_parallel_size=2)
    b = kv_budget(load_preset("llama-3.1-8b"), gpu="H200", gpu_memory_utilization=0.9, tensor_parallel_size=2)
    assert b.requested_bytes == math.ceil(GPUS["H200"].total_memory * 0.9)  # v1/worker/utils.py request_memory
    assert b.available_bytes == b.requested_bytes - b.weights_bytes - b.activation_bytes
    plan = plan_model(load_preset("llama-3.1-8b"), None, Options(tensor_parallel_size=2))
    assert app.capacity_label.value == plan.capacity(b.available_bytes).line
    assert app.blocks_label.value.startswith(f"{plan.layout.num_blocks(b.available_bytes):,} blocks at ")
    assert "H200" in app.blocks_label.value and "estimate" in app.blocks_label.value
    before = app.capacity_label.value
    app.gpu_memory_utilization.value = 0.5
    assert app.capacity_label.value != before and app.error == ""
