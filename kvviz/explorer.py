"""An ipywidgets app to turn the knobs of a model's KV cache and watch the block change.

DeepSeek V4 (its formats, dims, layer mix and planners) and the hybrid models (gpt-oss, Gemma 3,
Llama 4, Qwen3-Next: KV dtype, block size, sliding window, full-layer mix, Mamba state dtype,
prefix caching, vllm / packed / separate planners); the controls that do not apply to the chosen
model are hidden.

Thin by design: every number comes from the library (config -> specs -> groups -> planner ->
capacity) through `kvviz.knobs`; the block map is drawn in the browser by `kvviz.livemap`
from `kvviz.mapdata.BlockMapData`, the same data the matplotlib figures of `kvviz.plot` draw.
A change updates the numbers, the tables and the map's data in one handler; no picture is
rendered in Python.

    from kvviz.explorer import Explorer
    Explorer().widget          # display it in JupyterLab

Tests (and the browser test) drive it by setting `.value` on the public controls; every
control and output carries a stable CSS class (`kvviz-<name>`, see `CSS_CLASSES`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
from collections import OrderedDict

import ipywidgets as widgets

from . import capacity
from .errors import KvvizError
from .hybrid import SeparatePools
from .knobs import (BASELINE_PLANNER, DEFAULT_MODEL, KNOB_BY_NAME, KNOB_SPECS, KNOBS, budget_bytes, check_names,
                    control_values, describe_knobs, hybrid_summaries, knobs_are_hybrid, knobs_for, layout_key,
                    plan_hybrid_knobs, plan_pair, preset, preset_knobs)
from .layout import Layout
from .livemap import LiveBlockMap, separate_pools_map_data
from .mapdata import block_map_data
from .specs import BACKENDS

# Layouts (and their map data) kept per Explorer, so that toggling back or moving the budget is instant.
CACHE_SIZE = 32

# white-space: nowrap keeps group names (c4-state-a) and numbers on one line.
TABLE_STYLE = ("<style>.kvviz-groups{border-collapse:collapse;font-size:12px}"
               ".kvviz-groups th,.kvviz-groups td{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd;"
               "white-space:nowrap}"
               ".kvviz-groups th:first-child,.kvviz-groups td:first-child{text-align:left}</style>")
# The derivation keeps its lines as they are (no wrapping inside a term).
PRE_STYLE = "white-space:pre;overflow-x:auto;margin:0;font-size:12px"

# Where the controls sit: three columns (model, deployment, layer mix and budget). A knob added to
# kvviz.knobs.KNOB_SPECS and not listed here gets a fourth column.
CONTROL_COLUMNS = (("model", "head_dim", "rope_dim", "index_head_dim", "mtp", "sliding_window", "full_layers"),
                   ("main_format", "indexer_format", "backend", "block_size", "planner",
                    "kv_dtype", "attn_block_size", "mamba_ssm_dtype", "prefix_caching", "hybrid_planner"),
                   ("c4", "c128", "swa", "budget_gib", "context"))

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
    "kv_dtype": "kvviz-kv-dtype",
    "attn_block_size": "kvviz-attn-block-size",
    "sliding_window": "kvviz-sliding-window",
    "full_layers": "kvviz-full-layers",
    "mamba_ssm_dtype": "kvviz-mamba-ssm-dtype",
    "prefix_caching": "kvviz-prefix-caching",
    "hybrid_planner": "kvviz-hybrid-planner",
    "context": "kvviz-context",
    "budget_gib": "kvviz-budget",
    "error_label": "kvviz-error",
    "stride_label": "kvviz-stride",
    "blocks_label": "kvviz-blocks",
    "change_label": "kvviz-change",
    "summary": "kvviz-summary",
    "block_map": "kvviz-block-map",
    "map_caption": "kvviz-map-caption",
    "table": "kvviz-table",
    "derivation": "kvviz-derivation",
}


@dataclasses.dataclass(frozen=True)
class Planned:
    """One cached plan: the chosen planner's layout, the bucketed baseline, the map's data and
    the HTML of the group table and the derivation (they depend on the layout only)."""

    layout: Layout
    baseline: Layout
    map_data: dict  # BlockMapData.to_dict() of `layout`, what the live map draws
    table_html: str
    derivation_html: str


GROUP_COLUMNS = ("group", "layers", "total_bytes", "unused_bytes", "binds_stride")


def group_table_html(layout: Layout) -> str:
    """The layout's group table (the columns of `Layout.group_table`) as an HTML table, written
    here rather than by pandas: it is rebuilt on every change of layout."""
    head = "".join(f"<th>{c}</th>" for c in GROUP_COLUMNS)
    rows = "".join(
        f"<tr><td>{html.escape(g.name)}</td><td>{len(g.layers)}</td><td>{layout.group_total(i):,}</td>"
        f"<td>{layout.group_unused(i):,}</td><td>{'binds' if i == layout.binding_group else ''}</td></tr>"
        for i, g in enumerate(layout.groups))
    return f'{TABLE_STYLE}<table class="kvviz-groups"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def plan_for_display(knobs: dict) -> Planned:
    """Plan the knobs and prepare everything the explorer shows of the layout. Raises KvvizError."""
    layout, baseline = plan_pair(knobs)
    data = block_map_data(layout, caption=f"block map of {describe_knobs(knobs)}: "
                                          f"block stride {layout.block_stride:,} B")
    table = group_table_html(layout)
    derivation = f'<pre style="{PRE_STYLE}">{html.escape(layout.explain())}</pre>'
    return Planned(layout, baseline, data.to_dict(), table, derivation)


@dataclasses.dataclass(frozen=True)
class HybridPlanned:
    """One cached plan of a hybrid model: the chosen planner's layout (`HybridLayout`, or
    `SeparatePools` for 'separate'), the map's data, the group (or pool) table and the derivation."""

    layout: object
    map_data: dict
    table_html: str
    derivation_html: str


def pools_table_html(pools: SeparatePools) -> str:
    """One row per pool: its layers, its own block (= its total: a pool leaves nothing unused)."""
    head = "".join(f"<th>{c}</th>" for c in ("pool", "layers", "block_bytes", "tokens_per_block", "stride"))
    rows = "".join(
        f"<tr><td>{html.escape(p.groups[0].name)}</td><td>{len(p.groups[0].layers)}</td><td>{p.block_stride:,}</td>"
        f"<td>{p.tokens_per_block}</td><td>its own</td></tr>" for p in pools.pools)
    return f'{TABLE_STYLE}<table class="kvviz-groups"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def hybrid_derivation_text(layout) -> str:
    """The derivation lines of a hybrid layout; separate pools: theirs, then each pool's."""
    if isinstance(layout, SeparatePools):
        lines = list(layout.derivation)
        for p in layout.pools:
            lines.append(f"{p.groups[0].name} pool:")
            lines.extend(f"  {line}" for line in p.derivation)
        return "\n".join(lines)
    return layout.explain()


def stride_words(layout, hybrid: bool) -> str:
    """'block stride N B' (DeepSeek V4) or 'bytes per block N B' (hybrid models)."""
    return f"{'bytes per block' if hybrid else 'block stride'} {layout.block_stride:,} B"


def plan_hybrid_for_display(knobs: dict) -> HybridPlanned:
    """Plan a hybrid model's knobs and prepare what the explorer shows of the layout. Raises KvvizError.

    Separate pools share no block: the map draws one lane per pool, each its own pool's block on
    one byte scale (`livemap.separate_pools_map_data`), and the caption says so."""
    layout = plan_hybrid_knobs(knobs)
    what = describe_knobs(knobs)
    if isinstance(layout, SeparatePools):
        strides = ", ".join(f"{p.groups[0].name} {p.block_stride:,} B" for p in layout.pools)
        caption = (f"separate pools of {what}: one lane per pool, each lane one block of its own pool with its own "
                   f"stride ({strides}), drawn from byte 0 on one byte scale; no lane binds, and a lane is blank past "
                   f"its pool's block; one block of every pool: {stride_words(layout, True)}")
        data = separate_pools_map_data(layout, caption=caption)
        table = pools_table_html(layout)
    else:
        caption = f"block map of {what}: {stride_words(layout, True)}, {layout.tokens_per_block} tokens per block"
        data = block_map_data(layout, caption=caption).to_dict()
        table = group_table_html(layout)
    derivation = f'<pre style="{PRE_STYLE}">{html.escape(hybrid_derivation_text(layout))}</pre>'
    return HybridPlanned(layout, data, table, derivation)


@dataclasses.dataclass(frozen=True)
class HybridResult:
    """What one update of a hybrid model shows: the chosen planner's summary and every planner's
    (`kvviz.hybrid.summarize` at the budget and context)."""

    layout: object
    summary: object  # kvviz.hybrid.HybridSummary of the chosen planner
    summaries: tuple  # every planner's, in HYBRID_PLANNERS order

    @property
    def num_blocks(self) -> int:
        return self.summary.num_blocks


CHOSEN_ROW = ' style="font-weight:bold"'  # the planner the map and numbers show
COMPARE_COLUMNS = ("planner", "tokens/block", "bytes/block", "groups", "waste B", "waste %", "admission B/request",
                   "blocks", "requests", "concurrency")


def hybrid_summary_html(result: HybridResult) -> str:
    """The waste split and admission of the chosen planner, and the three planners side by side."""
    s, w = result.summary, result.summary.waste
    lines = [
        f"waste {w.waste_bytes:,} B of {w.total_bytes:,} B ({w.waste_pct:.2f}%) in one block of each of "
        f"{s.num_groups} {'pools' if s.planner == 'separate' else 'groups'}: empty slots {w.empty_slot_bytes:,} B, "
        f"padded state {w.padded_state_bytes:,} B, unused tail {w.unused_tail_bytes:,} B",
        f"vLLM's admission estimate: {s.admission_bytes_per_request:,} B per request of {s.context:,} tokens "
        f"({s.blocks_per_request:,} blocks); {s.requests_fit:,} requests fit, concurrency {s.max_concurrency:.2f}",
    ]
    head = "".join(f"<th>{c}</th>" for c in COMPARE_COLUMNS)
    rows = "".join(
        f"<tr{CHOSEN_ROW if x.planner == s.planner else ''}><td>{x.planner}</td>"
        f"<td>{x.tokens_per_block}</td><td>{x.bytes_per_block:,}</td><td>{x.num_groups}</td>"
        f"<td>{x.waste.waste_bytes:,}</td><td>{x.waste.waste_pct:.2f}</td><td>{x.admission_bytes_per_request:,}</td>"
        f"<td>{x.num_blocks:,}</td><td>{x.requests_fit:,}</td><td>{x.max_concurrency:.2f}</td></tr>"
        for x in result.summaries)
    text = "".join(f'<div class="kvviz-summary-line">{html.escape(line, quote=False)}</div>' for line in lines)
    return (f'{TABLE_STYLE}<div style="font-size:13px">{text}</div>'
            f'<table class="kvviz-groups kvviz-compare"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>')


@dataclasses.dataclass(frozen=True)
class Result:
    """Everything one update shows, computed before any widget is touched."""

    layout: Layout
    comparison: capacity.Comparison  # before = the bucketed planner, after = the chosen planner

    @property
    def num_blocks(self) -> int:
        return self.comparison.blocks_after


def result_at(planned: Planned, budget: int) -> Result:
    return Result(layout=planned.layout,
                  comparison=capacity.Comparison(before=planned.baseline, after=planned.layout, budget=budget))


def _caption(text: str) -> str:
    return f'<div style="font-size:12px;color:#555;line-height:1.35">{html.escape(text, quote=False)}</div>'


def _pct(x: float) -> str:
    return f"{x:+.2f}%"


def _control(knob, value):
    """The ipywidget of one knob."""
    wide = {"description_width": "110px"}
    if knob.control == "int":
        return widgets.IntSlider(value=value, min=min(knob.min, value), max=max(knob.max, value), step=knob.step,
                                 description=knob.label, style=wide, continuous_update=False,
                                 layout=widgets.Layout(width="340px"))
    if knob.control == "bool":
        return widgets.Checkbox(value=value, description=knob.label, indent=False,
                                layout=widgets.Layout(width="200px", margin="0 0 0 114px"))
    if knob.control == "count":  # unbounded on purpose: 0 or less is refused with a message, not clamped
        return widgets.IntText(value=value, description=knob.label, style=wide, layout=widgets.Layout(width="260px"))
    if knob.control == "float":  # unbounded on purpose: 0 or less is refused with a message, not clamped
        return widgets.FloatText(value=value, step=knob.step, description=knob.label, style=wide,
                                 layout=widgets.Layout(width="260px"))
    return widgets.Dropdown(options=list(knob.choices()), value=value, description=knob.label, style=wide,
                            layout=widgets.Layout(width="260px"))


class Explorer:
    """Controls for a model's cache knobs; block map, group table and capacity that follow them.

    Public controls (set `.value` to drive it), one per `kvviz.knobs.KNOBS`: model; DeepSeek V4:
    head_dim, rope_dim, index_head_dim, main_format, indexer_format, backend, block_size, mtp,
    c4, c128, swa, planner; hybrid models: kv_dtype, attn_block_size, sliding_window,
    full_layers, mamba_ssm_dtype, prefix_caching, hybrid_planner, context; both: budget_gib.
    Outputs: stride_label (block stride, or a hybrid's bytes per block), blocks_label,
    change_label (DeepSeek: against the bucketed planner; hybrid: requests that fit), summary
    (hybrid: waste split, admission, the three planners side by side), block_map (a
    `LiveBlockMap`, drawn by the browser), map_caption (names the configuration the map shows),
    table, derivation, error_label. State: `layout` (last good Layout, or SeparatePools),
    `result`, `error` ("" when the knobs are fine), `widget` (the box to display).

    Changing the model resets the model knobs to the preset and hides the knobs that do not
    apply to it (`knobs()` returns only those that apply); changing the backend picks its
    main-cache format (FlashMLA: fp8_ds_mla, FlashInfer: fp8), which can then be changed.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, backend: str = "flashmla", indexer_format: str = "mxfp4",
                 planner: str = "overlay", budget_gib: float | None = None) -> None:
        self._holding = False
        self._cache: OrderedDict[tuple, Planned] = OrderedDict()
        self._good_knobs: dict = {}
        self.layout: Layout | SeparatePools | None = None
        self.result: Result | HybridResult | None = None
        self.error = ""
        self.updates = 0  # successful updates so far (tests and the benchmark read it)

        deepseek = {"backend": backend, "indexer_format": indexer_format, "planner": planner}
        common = {} if budget_gib is None else {"budget_gib": budget_gib}
        config = preset(model)
        if config_is_hybrid := knobs_are_hybrid({"model": model}):  # DeepSeek's knobs wait, hidden
            knobs = control_values(model, **common) | deepseek | {
                "main_format": BACKENDS[backend].default_main_format}
        else:
            knobs = control_values(model, **common, **deepseek)
        for knob in KNOB_SPECS:
            setattr(self, knob.name, _control(knob, knobs[knob.name]))
            getattr(self, knob.name).add_class(f"kvviz-knob-{knob.name.replace('_', '-')}")
            if config_is_hybrid and knob.max_for is not None and knob.applies_to(config):
                getattr(self, knob.name).max = knob.max_for(config)

        self.error_label = widgets.HTML(layout=widgets.Layout(display="none"))
        self.stride_label = widgets.Label(style={"font_weight": "bold", "font_size": "16px"})
        self.blocks_label = widgets.Label(style={"font_size": "16px"})
        self.change_label = widgets.Label()
        self.summary = widgets.HTML(layout=widgets.Layout(display="none"))
        self.block_map = LiveBlockMap(layout=widgets.Layout(width="100%", max_width="1000px"))
        self.map_caption = widgets.HTML()
        self.table = widgets.HTML()
        self.derivation = widgets.HTML()

        placed = {name for column in CONTROL_COLUMNS for name in column}
        extra = tuple(k.name for k in KNOB_SPECS if k.name not in placed)  # knobs added later: their own column
        controls = widgets.HBox([widgets.VBox([getattr(self, name) for name in column])
                                 for column in CONTROL_COLUMNS + ((extra,) if extra else ())])
        for label in (self.stride_label, self.blocks_label):
            label.layout.margin = "0 24px 0 0"
        self.table.layout.margin = "0 24px 0 0"
        numbers = widgets.HBox([self.stride_label, self.blocks_label, self.change_label],
                               layout=widgets.Layout(align_items="baseline", flex_flow="row wrap"))
        self.widget = widgets.VBox([controls, self.error_label, numbers, self.summary, self.block_map, self.map_caption,
                                    widgets.HBox([self.table, self.derivation])])
        for name, css in CSS_CLASSES.items():
            getattr(self, name).add_class(css)

        self.model.observe(self._on_model, names="value")
        self.backend.observe(self._on_backend, names="value")
        for name in KNOBS:
            if name not in ("model", "backend"):
                getattr(self, name).observe(self._on_change, names="value")
        self._show_knobs_of(model)
        self.update()

    # ---- knobs -----------------------------------------------------------------------------
    def knobs(self) -> dict:
        """The current values of the knobs that apply to the chosen model, by knob name."""
        return {name: getattr(self, name).value for name in knobs_for(self.model.value)}

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
        A model given here resets the model knobs first; the others then apply. A knob that does
        not apply to the model is refused (KvvizError), not set."""
        check_names(values)
        check_names([n for n in values if n != "model"], values.get("model", self.model.value))
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
        """A new preset: its model knobs (DeepSeek: dims, layer mix and MTP; hybrid: full-attention
        layers and sliding window) replace the current ones; a slider whose range depends on the
        model (full-attention layers: 0 to its layers) gets the new range."""
        config = preset(change["new"])
        with self.hold():
            for name, value in preset_knobs(change["new"]).items():
                control, knob = getattr(self, name), KNOB_BY_NAME[name]
                if isinstance(control, widgets.IntSlider):
                    top = knob.max_for(config) if knob.max_for is not None else max(control.max, value)
                    control.min, control.max = min(control.min, value), max(control.max, value, top)
                    control.value = value
                    control.max = top
                else:
                    control.value = value
            self._show_knobs_of(change["new"])

    def _show_knobs_of(self, model: str) -> None:
        """Hide the controls of knobs that do not apply to the model."""
        applies = set(knobs_for(model))
        for name in KNOBS:
            getattr(self, name).layout.display = None if name in applies else "none"

    def _on_backend(self, change) -> None:
        with self.hold():
            self.main_format.value = BACKENDS[change["new"]].default_main_format

    # ---- update ----------------------------------------------------------------------------
    def planned(self, knobs: dict) -> Planned:
        """The cached plan of the knobs (planned now when not cached). Raises KvvizError."""
        key = layout_key(knobs)
        entry = self._cache.get(key)
        if entry is None:
            plan = plan_hybrid_for_display if knobs_are_hybrid(knobs) else plan_for_display
            entry = self._cache[key] = plan(knobs)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return entry

    def update(self) -> None:
        """Recompute from the knobs and refresh every output, the block map's data included; on
        bad knobs show the one-line message and keep the last good outputs. Never raises."""
        knobs = self.knobs()
        try:
            budget = budget_bytes(knobs)
            planned = self.planned(knobs)
            if isinstance(planned, HybridPlanned):
                summaries = hybrid_summaries(knobs)
                chosen = next(x for x in summaries if x.planner == knobs["hybrid_planner"])
                result = HybridResult(planned.layout, chosen, summaries)
            else:
                result = result_at(planned, budget)
        except KvvizError as e:
            self._show_error(str(e))
            return
        except Exception as e:  # an app in a notebook must not raise into the cell
            self._show_error(f"internal error ({type(e).__name__}): {e}")
            return
        self._show(result, planned, knobs)

    @property
    def map_data(self) -> dict:
        """What the live map draws now (`BlockMapData.to_dict()`)."""
        return self.block_map.data

    def _show_error(self, message: str) -> None:
        self.error = message
        line = f"cannot plan: {message}; showing the last good layout"
        self.error_label.value = f'<span style="color:#b00020;white-space:nowrap">&#9888; {html.escape(line)}</span>'
        self.error_label.layout.display = None
        self.block_map.status = f"refused: {message}"
        if self.layout is not None:
            hybrid = knobs_are_hybrid(self._good_knobs)
            self.map_caption.value = _caption(f"still drawn: {describe_knobs(self._good_knobs)}: "
                                              f"{stride_words(self.layout, hybrid)}")

    def _show(self, result, planned, knobs: dict) -> None:
        self.layout, self.result, self.error = result.layout, result, ""
        self._good_knobs = knobs
        # The map first: its message is the largest, so the browser starts on it while the
        # labels' messages follow.
        with self.block_map.hold_sync():
            self.block_map.status = ""
            self.block_map.data = planned.map_data
        self.error_label.value = ""
        self.error_label.layout.display = "none"
        if isinstance(result, HybridResult):
            self._show_hybrid_numbers(result, knobs)
        else:
            self._show_numbers(result, knobs)
        self.map_caption.value = _caption(planned.map_data["caption"])
        self.table.value = planned.table_html
        self.derivation.value = planned.derivation_html
        self.updates += 1

    def _show_hybrid_numbers(self, result: HybridResult, knobs: dict) -> None:
        s = result.summary
        pools = f", {s.num_groups} pools" if s.planner == "separate" else ""
        self.stride_label.value = f"bytes per block: {s.bytes_per_block:,} B ({s.tokens_per_block} tokens{pools})"
        self.blocks_label.value = f"{s.num_blocks:,} blocks at {knobs['budget_gib']:g} GiB"
        self.change_label.value = f"{s.requests_fit:,} requests of {s.context:,} tokens fit"
        self.summary.value = hybrid_summary_html(result)
        self.summary.layout.display = None

    def _show_numbers(self, result: Result, knobs: dict) -> None:
        layout, cmp = result.layout, result.comparison
        self.summary.value = ""
        self.summary.layout.display = "none"
        self.stride_label.value = f"block stride: {layout.block_stride:,} B"
        self.blocks_label.value = f"{cmp.blocks_after:,} blocks at {knobs['budget_gib']:g} GiB"
        if layout.planner == BASELINE_PLANNER:
            self.change_label.value = f"({BASELINE_PLANNER} planner: the baseline)"
        else:
            self.change_label.value = (
                f"vs {BASELINE_PLANNER}: stride {cmp.before.block_stride:,} B ({_pct(cmp.stride_change_pct)}), "
                f"blocks {cmp.blocks_before:,} ({_pct(cmp.blocks_change_pct)})")

    def _repr_mimebundle_(self, **kwargs):  # `Explorer()` as the last line of a cell shows the app
        return self.widget._repr_mimebundle_(**kwargs)
