"""An ipywidgets app to turn the knobs of a DeepSeek-V4-style KV cache and watch the block change.

Thin by design: every number comes from the library (config -> specs -> groups -> planner ->
capacity); this module only wires widgets to `kvviz.planners.plan_model` and shows the result.

    from kvviz.explorer import Explorer
    Explorer().widget          # display it in JupyterLab

Tests (and the browser test) drive it by setting `.value` on the public controls; every
control and output carries a stable CSS class (`kvviz-<name>`, see `CSS_CLASSES`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import html
import io
from collections import OrderedDict
from functools import lru_cache

import ipywidgets as widgets

from . import capacity, plot
from .config import ModelConfig, load_model, model_names, with_layer_mix
from .errors import KvvizError
from .formats import INDEXER_FORMATS, MAIN_FORMATS
from .layout import Layout
from .planners import PLANNERS, plan_model
from .specs import BACKENDS, CacheOptions

DEFAULT_MODEL = "deepseek-v4-pro"
# FlashMLA's budget in vLLM #48993's table (REFERENCE.md section 7).
DEFAULT_BUDGET_GIB = 26.09
# Block sizes offered; 64 is there on purpose: it is refused while the model has c128 layers.
BLOCK_SIZES = (64, 128, 256, 512, 1024)
# The block map: 10 in at 96 dpi is about the width of the controls above it (~960 px).
FIGURE_WIDTH_IN = 10.0
DEFAULT_DPI = 96
# Layouts (and their PNGs) kept per Explorer, so that toggling back or moving the budget is instant.
CACHE_SIZE = 32
# The planner the "change" line compares against (vLLM before #48993).
BASELINE_PLANNER = "bucketed"

TABLE_STYLE = ("<style>.kvviz-groups{border-collapse:collapse;font-size:12px}"
               ".kvviz-groups th,.kvviz-groups td{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd}"
               ".kvviz-groups th:first-child,.kvviz-groups td:first-child{text-align:left}</style>")

# Control name -> CSS class; outputs too. The browser test finds widgets by these.
CSS_CLASSES = {
    "widget": "kvviz-explorer",
    "model": "kvviz-model",
    "head_dim": "kvviz-head-dim",
    "rope_dim": "kvviz-rope-dim",
    "index_head_dim": "kvviz-index-head-dim",
    "main_format": "kvviz-main-format",
    "indexer_format": "kvviz-indexer",
    "backend": "kvviz-backend",
    "block_size": "kvviz-block-size",
    "mtp": "kvviz-mtp",
    "c4": "kvviz-c4",
    "c128": "kvviz-c128",
    "swa": "kvviz-swa",
    "planner": "kvviz-planner",
    "budget_gib": "kvviz-budget",
    "error_label": "kvviz-error",
    "stride_label": "kvviz-stride",
    "blocks_label": "kvviz-blocks",
    "change_label": "kvviz-change",
    "figure": "kvviz-figure",
    "figure_caption": "kvviz-figure-caption",
    "text_map": "kvviz-text-map",
    "table": "kvviz-table",
    "derivation": "kvviz-derivation",
}

# The knobs, in the order `knobs()` reports them and `set()` accepts them.
KNOBS = ("model", "head_dim", "rope_dim", "index_head_dim", "main_format", "indexer_format", "backend",
         "block_size", "mtp", "c4", "c128", "swa", "planner", "budget_gib")


@lru_cache(maxsize=None)
def _preset(name: str) -> ModelConfig:
    """Shipped presets are read once per process (configs are frozen)."""
    return load_model(name)


def preset_knobs(name: str) -> dict:
    """The model knobs a preset sets (formats, backend, planner and budget are left alone)."""
    c = _preset(name)
    return {"head_dim": c.head_dim, "rope_dim": c.qk_rope_head_dim, "index_head_dim": c.index_head_dim,
            "mtp": c.num_nextn_predict_layers > 0, **c.layer_mix}


def default_knobs(model: str = DEFAULT_MODEL, **changes) -> dict:
    """Every knob as the explorer starts: the preset's model knobs, FlashMLA with its
    fp8_ds_mla rows, the MXFP4 indexer, 256-token blocks, the overlay planner and FlashMLA's
    budget from vLLM #48993's table; `changes` replace any of them."""
    unknown = set(changes) - set(KNOBS)
    if unknown:
        raise KvvizError(f"{sorted(unknown)[0]}: not a knob; knobs are {', '.join(KNOBS)}")
    knobs = {"model": model, **preset_knobs(model), "main_format": BACKENDS["flashmla"].default_main_format,
             "indexer_format": "mxfp4", "backend": "flashmla", "block_size": 256, "planner": "overlay",
             "budget_gib": DEFAULT_BUDGET_GIB}
    if "backend" in changes and "main_format" not in changes:  # as in the app: the backend's format
        knobs["main_format"] = BACKENDS[changes["backend"]].default_main_format
    knobs.update(changes)
    return {name: knobs[name] for name in KNOBS}


def config_for(knobs: dict) -> ModelConfig:
    """The ModelConfig the knobs describe: the preset, its dims overridden, then the layer mix."""
    config = _preset(knobs["model"]).with_overrides(
        head_dim=knobs["head_dim"], qk_rope_head_dim=knobs["rope_dim"], index_head_dim=knobs["index_head_dim"])
    return with_layer_mix(config, c4=knobs["c4"], c128=knobs["c128"], swa=knobs["swa"])


def options_for(knobs: dict) -> CacheOptions:
    return CacheOptions(backend=knobs["backend"], main_format=knobs["main_format"],
                        indexer_format=knobs["indexer_format"], block_size=knobs["block_size"], mtp=knobs["mtp"])


@dataclasses.dataclass(frozen=True)
class Result:
    """Everything one update shows, computed before any widget is touched."""

    layout: Layout
    comparison: capacity.Comparison  # before = the bucketed planner, after = the chosen planner

    @property
    def num_blocks(self) -> int:
        return self.comparison.blocks_after


def plan_pair(knobs: dict) -> tuple[Layout, Layout]:
    """(layout of the chosen planner, layout of the bucketed baseline) for the knobs.
    Raises KvvizError on an impossible combination."""
    config, options = config_for(knobs), options_for(knobs)
    layout = plan_model(config, options, knobs["planner"])
    baseline = layout if knobs["planner"] == BASELINE_PLANNER else plan_model(config, options, BASELINE_PLANNER)
    return layout, baseline


def compute(knobs: dict) -> Result:
    """Knobs -> Result, all through the library. Raises KvvizError on an impossible combination."""
    layout, baseline = plan_pair(knobs)
    return result_at(layout, baseline, knobs["budget_gib"])


def result_at(layout: Layout, baseline: Layout, budget_gib: float) -> Result:
    budget = capacity.budget_bytes(gib=budget_gib)
    return Result(layout=layout, comparison=capacity.Comparison(before=baseline, after=layout, budget=budget))


def layout_key(knobs: dict) -> tuple:
    """The knobs that decide the layout (all but the budget)."""
    return tuple(v for k, v in knobs.items() if k != "budget_gib")


def compare_knobs(variants, *, tokens: int = 131_072, max_num_batched_tokens: int = 8192, **base):
    """One row per variant (a dict of knob changes on top of `default_knobs(**base)`): the knobs
    the variants change, block stride, binding group, blocks at the budget, blocks one request of
    `tokens` tokens holds (summed over groups, `capacity.group_blocks_for_request`), the requests
    the budget serves at once (`capacity.max_concurrency`) and their change against the first
    possible row. An impossible variant gets its one-line message in `note` instead of numbers.
    Returns a pandas DataFrame."""
    import pandas as pd

    variants = list(variants)
    changed = list(dict.fromkeys(k for v in variants for k in v))
    rows, first = [], None
    for changes in variants:
        knobs = default_knobs(**{**base, **changes})
        row = {k: knobs[k] for k in changed}
        try:
            layout = plan_pair(knobs)[0]
        except KvvizError as e:
            rows.append(row | {"note": str(e)})
            continue
        budget = capacity.budget_bytes(gib=knobs["budget_gib"])
        requests = capacity.max_concurrency(layout, budget, tokens, max_num_batched_tokens=max_num_batched_tokens)
        first = first or requests
        rows.append(row | {
            "block stride": layout.block_stride,
            "binding group": layout.binding_label,
            "blocks": capacity.num_blocks(layout, budget),
            "blocks per request": sum(capacity.group_blocks_for_request(
                layout, tokens, max_num_batched_tokens=max_num_batched_tokens)),
            "requests": round(requests, 2),
            "requests vs first %": round(100 * (requests - first) / first, 1),
            "note": "",
        })
    counts = ["block stride", "blocks", "blocks per request"]
    columns = changed + counts[:1] + ["binding group"] + counts[1:] + ["requests", "requests vs first %", "note"]
    return pd.DataFrame.from_records(rows, columns=columns).astype({c: "Int64" for c in counts})


def sweep(knob: str, values, **kwargs):
    """`compare_knobs` over one knob's values, e.g. `sweep("block_size", [128, 256, 512])`."""
    return compare_knobs([{knob: v} for v in values], **kwargs)


def _running_loop():
    """The kernel's asyncio loop when called inside Jupyter, else None (pytest, scripts)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _pct(x: float) -> str:
    return f"{x:+.2f}%"


class Explorer:
    """Controls for a model's cache knobs; block map, group table and capacity that follow them.

    Public controls (set `.value` to drive it): model, head_dim, rope_dim, index_head_dim,
    main_format, indexer_format, backend, block_size, mtp, c4, c128, swa, planner, budget_gib.
    Outputs: stride_label, blocks_label, change_label, figure (PNG Image) and figure_caption
    (names the layout the picture shows), text_map (with figure=False: the text byte map instead of the picture), table,
    derivation, error_label. State: `layout` (last good Layout), `result`, `error` ("" when the
    knobs are fine), `widget` (the box to display).

    Changing the model resets the model knobs to the preset; changing the backend picks its
    main-cache format (FlashMLA: fp8_ds_mla, FlashInfer: fp8), which can then be changed.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, backend: str = "flashmla", indexer_format: str = "mxfp4",
                 planner: str = "overlay", budget_gib: float = DEFAULT_BUDGET_GIB, dpi: int = DEFAULT_DPI,
                 figure: bool = True, defer_figure: bool = True) -> None:
        self.dpi = dpi
        self.defer_figure = defer_figure
        self._block_map = plot.block_map if figure else None
        self._holding = False
        self._cache: OrderedDict[tuple, list] = OrderedDict()
        self._pending: tuple | None = None
        self._scheduled = False
        self._good_knobs: dict = {}
        self.figure_key: tuple | None = None  # layout_key of what the block map shows
        self.layout: Layout | None = None
        self.result: Result | None = None
        self.error = ""
        self.updates = 0  # successful updates so far (tests and the benchmark read it)

        knobs = default_knobs(model, backend=backend, indexer_format=indexer_format, planner=planner,
                              budget_gib=budget_gib)
        wide = {"description_width": "110px"}
        slider = dict(style=wide, continuous_update=False, layout=widgets.Layout(width="340px"))
        pick = dict(style=wide, layout=widgets.Layout(width="260px"))

        self.model = widgets.Dropdown(options=model_names(), value=model, description="model", **pick)
        self.head_dim = widgets.IntSlider(value=knobs["head_dim"], min=128, max=1024, step=32,
                                          description="head_dim", **slider)
        self.rope_dim = widgets.IntSlider(value=knobs["rope_dim"], min=32, max=256, step=32,
                                          description="rope dims", **slider)
        self.index_head_dim = widgets.IntSlider(value=knobs["index_head_dim"], min=32, max=512, step=32,
                                                description="index_head_dim", **slider)
        self.block_size = widgets.Dropdown(options=BLOCK_SIZES, value=knobs["block_size"], description="block size",
                                           **pick)
        self.mtp = widgets.Checkbox(value=knobs["mtp"], description="MTP layer", indent=False,
                                    layout=widgets.Layout(width="200px", margin="0 0 0 114px"))
        self.main_format = widgets.Dropdown(options=list(MAIN_FORMATS), value=knobs["main_format"],
                                            description="main KV", **pick)
        self.indexer_format = widgets.Dropdown(options=list(INDEXER_FORMATS), value=knobs["indexer_format"],
                                               description="indexer K", **pick)
        self.backend = widgets.Dropdown(options=list(BACKENDS), value=knobs["backend"], description="alignment",
                                        **pick)
        self.planner = widgets.Dropdown(options=list(PLANNERS), value=knobs["planner"], description="planner", **pick)
        self.budget_gib = widgets.BoundedFloatText(value=knobs["budget_gib"], min=0.01, max=100_000.0, step=0.01,
                                                   description="KV budget GiB", **pick)
        self.c4 = widgets.IntSlider(value=knobs["c4"], min=0, max=96, description="c4 layers", **slider)
        self.c128 = widgets.IntSlider(value=knobs["c128"], min=0, max=96, description="c128 layers", **slider)
        self.swa = widgets.IntSlider(value=knobs["swa"], min=0, max=96, description="SWA-only layers", **slider)

        self.error_label = widgets.HTML(layout=widgets.Layout(display="none"))
        self.stride_label = widgets.Label(style={"font_weight": "bold", "font_size": "16px"})
        self.blocks_label = widgets.Label(style={"font_size": "16px"})
        self.change_label = widgets.Label()
        self.figure = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.figure_caption = widgets.Label(style={"font_size": "12px", "text_color": "#555"})
        self.text_map = widgets.HTML()
        self.table = widgets.HTML()
        self.derivation = widgets.HTML()
        if self._block_map is None:
            self.figure.layout.display = self.figure_caption.layout.display = "none"
        else:
            self.text_map.layout.display = "none"

        controls = widgets.HBox([
            widgets.VBox([self.model, self.head_dim, self.rope_dim, self.index_head_dim, self.mtp]),
            widgets.VBox([self.main_format, self.indexer_format, self.backend, self.block_size, self.planner]),
            widgets.VBox([self.c4, self.c128, self.swa, self.budget_gib]),
        ])
        for label in (self.stride_label, self.blocks_label):
            label.layout.margin = "0 24px 0 0"
        self.table.layout.margin = "0 24px 0 0"
        numbers = widgets.HBox([self.stride_label, self.blocks_label, self.change_label],
                               layout=widgets.Layout(align_items="baseline"))
        self.widget = widgets.VBox([controls, self.error_label, numbers, self.figure, self.figure_caption,
                                    self.text_map,
                                    widgets.HBox([self.table, self.derivation])])
        for name, css in CSS_CLASSES.items():
            getattr(self, name).add_class(css)

        self.model.observe(self._on_model, names="value")
        self.backend.observe(self._on_backend, names="value")
        for name in KNOBS:
            if name not in ("model", "backend"):
                getattr(self, name).observe(self._on_change, names="value")
        self.update()

    # ---- knobs -----------------------------------------------------------------------------
    def knobs(self) -> dict:
        """The current control values, by knob name."""
        return {name: getattr(self, name).value for name in KNOBS}

    @contextlib.contextmanager
    def hold(self):
        """Change several controls with one update at the end."""
        outer = self._holding
        self._holding = True
        try:
            yield
        finally:
            self._holding = outer
        if not outer:
            self.update()

    def set(self, **values) -> None:
        """Set several knobs at once (one update), e.g. `set(head_dim=576, indexer_format="fp8")`.
        A model given here resets the model knobs first; the others then apply."""
        unknown = set(values) - set(KNOBS)
        if unknown:
            raise KvvizError(f"{sorted(unknown)[0]}: not a knob; knobs are {', '.join(KNOBS)}")
        with self.hold():
            if "model" in values:
                self.model.value = values.pop("model")
            if "backend" in values:
                self.backend.value = values.pop("backend")
            for name, value in values.items():
                getattr(self, name).value = value

    def _on_change(self, change) -> None:
        if not self._holding:
            self.update()

    def _on_model(self, change) -> None:
        """A new preset: its dims, layer mix and MTP replace the current ones."""
        with self.hold():
            for name, value in preset_knobs(change["new"]).items():
                control = getattr(self, name)
                if isinstance(control, widgets.IntSlider):
                    control.min, control.max = min(control.min, value), max(control.max, value)
                control.value = value

    def _on_backend(self, change) -> None:
        with self.hold():
            self.main_format.value = BACKENDS[change["new"]].default_main_format

    # ---- update ----------------------------------------------------------------------------
    def update(self) -> None:
        """Recompute from the knobs and refresh every output; on bad knobs show the message and
        keep the last good outputs. Never raises.

        Numbers and tables are refreshed at once; the block map (the slow part) is drawn right
        after, on the kernel's event loop when there is one, so the numbers never wait for it and
        a burst of changes draws only the last layout. Without a loop (pytest, scripts) it is drawn
        before update() returns."""
        knobs = self.knobs()
        key = layout_key(knobs)
        try:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._cache[key] = [*plan_pair(knobs), None]  # layout, baseline, png
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
            self._cache.move_to_end(key)
            result = result_at(cached[0], cached[1], knobs["budget_gib"])
        except KvvizError as e:
            self._show_error(str(e))
            return
        except Exception as e:  # an app in a notebook must not raise into the cell
            self._show_error(f"internal error ({type(e).__name__}): {e}")
            return
        self._show(result)
        self._draw(key)

    def _draw(self, key: tuple) -> None:
        if self._block_map is None:
            self.text_map.value = f"<pre>{html.escape(self.layout.text_map())}</pre>"
            self.figure_key = key
            return
        png = self._cache[key][2]
        if png is not None:
            self._pending = None
            self._set_png(key, png)
            return
        self._pending = key
        self.figure_caption.value = "drawing the block map of the new layout ..."
        loop = _running_loop() if self.defer_figure else None
        if loop is None:
            self.draw_pending()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self.draw_pending)

    def draw_pending(self) -> None:
        """Draw the block map of the latest good layout if it is not drawn yet. Never raises."""
        self._scheduled = False
        key, self._pending = self._pending, None
        if key is None or key not in self._cache:
            return
        entry = self._cache[key]
        if entry[2] is None:
            try:
                entry[2] = plot.to_png_bytes(self._block_map(entry[0], width=FIGURE_WIDTH_IN), dpi=self.dpi)
            except Exception as e:
                self._show_error(f"block map: {type(e).__name__}: {e}")
                return
        self._set_png(key, entry[2])

    def _set_png(self, key: tuple, png: bytes) -> None:
        layout = self._cache[key][0]
        self.figure.value = png
        self.figure_caption.value = f"block map of the {layout.planner} layout, block stride {layout.block_stride:,} B"
        self.figure_key = key

    @property
    def figure_up_to_date(self) -> bool:
        """Whether the block map shows the current layout (False while a drawing is pending)."""
        return self.layout is not None and self.figure_key == layout_key(self._good_knobs)

    def _show_error(self, message: str) -> None:
        self.error = message
        self.error_label.value = (f'<span style="color:#b00020">&#9888; cannot plan: {html.escape(message)}'
                                  "; showing the last good layout</span>")
        self.error_label.layout.display = None

    def _show(self, result: Result) -> None:
        layout, cmp = result.layout, result.comparison
        self.layout, self.result, self.error = layout, result, ""
        self._good_knobs = self.knobs()
        self.error_label.value = ""
        self.error_label.layout.display = "none"
        self.stride_label.value = f"block stride: {layout.block_stride:,} B"
        self.blocks_label.value = f"{cmp.blocks_after:,} blocks at {self.budget_gib.value:g} GiB"
        if layout.planner == BASELINE_PLANNER:
            self.change_label.value = f"({BASELINE_PLANNER} planner: the baseline)"
        else:
            self.change_label.value = (
                f"vs {BASELINE_PLANNER}: stride {cmp.before.block_stride:,} B ({_pct(cmp.stride_change_pct)}), "
                f"blocks {cmp.blocks_before:,} ({_pct(cmp.blocks_change_pct)})")
        self.table.value = TABLE_STYLE + layout.group_table().to_html(
            index=False, border=0, classes="kvviz-groups", formatters={
                "total_bytes": "{:,}".format, "unused_bytes": "{:,}".format,
                "binds_stride": lambda b: "binds" if b else ""})
        self.derivation.value = f"<pre>{html.escape(layout.explain())}</pre>"
        self.updates += 1

    def _repr_mimebundle_(self, **kwargs):  # `Explorer()` as the last line of a cell shows the app
        return self.widget._repr_mimebundle_(**kwargs)
