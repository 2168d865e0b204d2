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

from .core import capacity
from .core.plan import Plan
from .errors import KvvizError
from .explorer_tables import PRE_STYLE, group_table_html, summary_html
from .families.deepseek_v4 import BACKENDS
from .knobs import (DEFAULT_MODEL, kv_budget, KNOB_BY_NAME, KNOB_SPECS, KNOBS, baseline_planner, budget_bytes, capacities,
                    check_names, control_values, describe_knobs, knobs_for, layout_key, model_of, plan_knobs,
                    preset_knobs)
from .livemap import LiveBlockMap, separate_pools_map_data
from .mapdata import block_map_data
from .text import plural

# The knobs a model switch keeps (where the new model takes the value): deployment choices that
# mean the same for every model. Every other knob takes the new model's default, and the notice
# names those that changed.
KEPT_ON_SWITCH = ("kv_dtype", "mamba_ssm_dtype", "prefix_caching", "tensor_parallel_size", "budget_gib", "gpu",
                  "gpu_memory_utilization",
                  "main_format", "indexer_format", "backend")

# Layouts (and their map data) kept per Explorer, so that toggling back or moving the budget is instant.
CACHE_SIZE = 32

# Where the controls sit: three columns (model, deployment, layer mix and budget). A knob added to
# kvviz.knobs.KNOB_SPECS and not listed here gets a fourth column.
CONTROL_COLUMNS = (("model", "head_dim", "rope_dim", "index_head_dim", "mtp", "sliding_window", "full_layers"),
                   ("main_format", "indexer_format", "backend", "kv_dtype", "block_size", "mamba_ssm_dtype",
                    "prefix_caching", "tensor_parallel_size", "decode_context_parallel_size", "planner"),
                   ("c4", "c128", "swa", "budget_gib", "gpu", "gpu_memory_utilization", "context"))

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
    "sliding_window": "kvviz-sliding-window",
    "full_layers": "kvviz-full-layers",
    "mamba_ssm_dtype": "kvviz-mamba-ssm-dtype",
    "prefix_caching": "kvviz-prefix-caching",
    "tensor_parallel_size": "kvviz-tensor-parallel-size",
    "decode_context_parallel_size": "kvviz-decode-context-parallel-size",
    "capacity_label": "kvviz-capacity",
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
    """One cached plan: the chosen planner's `Plan`, the baseline's, the map's data and the HTML of
    the group (or pool) table and the derivation (they depend on the plan only)."""

    plan: Plan
    baseline: Plan
    map_data: dict  # what the live map draws
    table_html: str
    derivation_html: str

    @property
    def layout(self):
        """The plan's one pool, or the Plan itself when it has separate pools."""
        return self.plan.pools[0] if len(self.plan.pools) == 1 else self.plan


def stride_words(plan: Plan) -> str:
    """The plan's block stride in words, e.g. 'block stride 1,315,008 B, 256 tokens per block'."""
    tokens = "" if plan.tokens_per_block is None else f", {plan.tokens_per_block} tokens per block"
    pools = f" ({len(plan.pools)} separate pools)" if len(plan.pools) > 1 else ""
    return f"block stride {plan.block_stride:,} B{tokens}{pools}"


def plan_for_display(knobs: dict) -> Planned:
    """Plan the knobs and prepare everything the explorer shows of the plan. Raises KvvizError.

    Separate pools share no block: the map draws one lane per pool, each its own pool's block on
    one byte scale (`livemap.separate_pools_map_data`), and the caption says so."""
    plan = plan_knobs(knobs)
    base = baseline_planner(knobs)
    baseline = plan if base == plan.planner else plan_knobs(knobs, base)
    what = describe_knobs(knobs)
    if len(plan.pools) > 1:
        strides = ", ".join(f"{p.groups[0].name} {p.block_stride:,} B" for p in plan.pools)
        caption = (f"separate pools of {what}: one lane per pool, each lane one block of its own pool with its own "
                   f"stride ({strides}), drawn from byte 0 on one byte scale; no lane binds, and a lane is blank past "
                   f"its pool's block; one block of every pool: {stride_words(plan)}")
        data = separate_pools_map_data(plan, caption=caption)
    else:
        data = block_map_data(plan.layout, caption=f"block map of {what}: {stride_words(plan)}").to_dict()
    derivation = f'<pre style="{PRE_STYLE}">{html.escape(plan.explain())}</pre>'
    return Planned(plan, baseline, data, group_table_html(plan), derivation)


@dataclasses.dataclass(frozen=True)
class Result:
    """Everything one update shows, computed before any widget is touched."""

    plan: Plan
    capacity: object  # core.plan.Capacity of the chosen planner at the budget
    capacities: tuple  # every planner's
    comparison: capacity.Comparison | None  # against the baseline planner (one pool each)

    @property
    def layout(self):
        """The plan's one pool, or the Plan itself when it has separate pools."""
        return self.plan.pools[0] if len(self.plan.pools) == 1 else self.plan

    @property
    def num_blocks(self) -> int:
        """Blocks the chosen planner's pool holds at the budget."""
        return self.capacity.num_blocks

    @property
    def summary(self):
        """The chosen planner's Capacity (the same record as `capacity`)."""
        return self.capacity


def result_at(planned: Planned, knobs: dict) -> Result:
    """What the explorer shows of a planned configuration at the knobs' budget: every planner's Capacity and the
    comparison with the baseline planner (None unless both have one pool)."""
    budget = budget_bytes(knobs)
    caps = capacities(knobs)
    chosen = next(c for c in caps if c.planner == planned.plan.planner)
    one = len(planned.plan.pools) == 1 and len(planned.baseline.pools) == 1
    cmp = capacity.Comparison(before=planned.baseline.layout, after=planned.plan.layout, budget=budget) if one else None
    return Result(planned.plan, chosen, caps, cmp)


def engines_html(knobs: dict) -> str:
    """One line per other engine at the budget the knobs give (kvviz.engines.compare_rows): its
    token capacity, requests at once and own log line, or why it has no plan."""
    from .engines import compare_rows
    from .knobs import model_for, options_for

    try:
        rows = compare_rows(model_for(knobs), ("sglang", "trtllm"), options_for(knobs),
                            kv_budget_bytes=budget_bytes(knobs))
    except KvvizError as e:
        return f'<span style="color:#555">other engines: {html.escape(str(e))}</span>'
    lines = [f"{r.engine}: {r.plan.token_capacity:,} tokens, {r.plan.full_length_requests:,} requests of "
             f"{r.plan.max_model_len:,} tokens at once ({r.plan.log_line})" if r.plan else f"{r.engine}: {r.refusal}"
             for r in rows]
    head = f"the same KV budget ({budget_bytes(knobs):,} B) in the other engines (docs/engines.md#one-budget-meaning):"
    return '<div style="color:#555;font-size:12px">' + "<br>".join(html.escape(t) for t in [head] + lines) + "</div>"


def _caption(text: str) -> str:
    return f'<div style="font-size:12px;color:#555;line-height:1.35">{html.escape(text, quote=False)}</div>'


def _pct(x: float) -> str:
    return f"{x:+.2f}%"


def _control(knob, value, model):
    """The ipywidget of one knob (choices and ranges as the model has them)."""
    wide = {"description_width": "110px"}
    if knob.control == "int":
        top = knob.max_for(model) if (knob.max_for is not None and knob.applies_to(model)) else knob.max
        return widgets.IntSlider(value=value, min=min(knob.min, value), max=max(top, value), step=knob.step,
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
    options = list(knob.choices(model))
    if value not in options:  # a value of another model's knob, hidden until that model is picked
        options.append(value)
    return widgets.Dropdown(options=options, value=value, description=knob.label, style=wide,
                            layout=widgets.Layout(width="260px"))


class Explorer:
    """Controls for a model's cache knobs; block map, group table and capacity that follow them.

    `Explorer(model)` takes a preset name, a config.json / folder path or a `kvviz.load` result.
    Public controls (set `.value` to drive it), one per `kvviz.knobs.KNOBS`; the controls of the
    knobs that do not apply to the chosen model are hidden (`knobs()` returns only those that
    apply). Outputs: stride_label, blocks_label, change_label (against the family's baseline
    planner), capacity_label (vLLM's own "GPU KV cache size ..." line), summary (waste split,
    admission, every planner side by side), block_map (a `LiveBlockMap`, drawn by the browser),
    map_caption (names the configuration the map shows), table, derivation, error_label. State:
    `plan` (last good Plan), `layout` (its one pool, or the Plan of separate pools), `result`,
    `error` ("" when the knobs are fine), `notice` (what the last model switch reset),
    `widget` (the box to display).

    Changing the model resets every knob to the new model's defaults and says which values it
    changed; changing the backend picks its main-cache format (FlashMLA: fp8_ds_mla, FlashInfer:
    fp8). An update never raises: a refusal is shown in one line and the last good picture is
    greyed out under a caption naming what it shows.
    """

    def __init__(self, model=DEFAULT_MODEL, *, budget_gib: float | None = None, **knob_values) -> None:
        self._holding = False
        self._cache: OrderedDict[tuple, Planned] = OrderedDict()
        self._good_knobs: dict = {}
        self._models: dict = {}
        self.plan: Plan | None = None
        self.layout = None
        self.result: Result | None = None
        self.error = ""
        self.notice = ""
        self.updates = 0  # successful updates so far (tests and the benchmark read it)

        m = model_of(model)
        name = model if isinstance(model, str) and not ("/" in model or model.endswith(".json")) else m.name
        self._models[name] = model if not isinstance(model, str) else model
        common = {} if budget_gib is None else {"budget_gib": budget_gib}
        knobs = control_values(self._models[name], **common, **knob_values)
        knobs["model"] = name
        for knob in KNOB_SPECS:
            setattr(self, knob.name, _control(knob, knobs[knob.name], m))
            getattr(self, knob.name).add_class(f"kvviz-knob-{knob.name.replace('_', '-')}")
        if name not in self.model.options:
            self.model.options = (*self.model.options, name)
            self.model.value = name

        self.error_label = widgets.HTML(layout=widgets.Layout(display="none"))
        self.stride_label = widgets.Label(style={"font_weight": "bold", "font_size": "16px"})
        self.blocks_label = widgets.Label(style={"font_size": "16px"})
        self.change_label = widgets.Label()
        self.capacity_label = widgets.Label(style={"font_size": "14px"})
        self.engines_label = widgets.HTML()  # the same model and budget in SGLang and TensorRT-LLM (kvviz.engines)
        self.summary = widgets.HTML()
        self.block_map = LiveBlockMap(layout=widgets.Layout(width="100%", max_width="1000px"))
        self.map_caption = widgets.HTML()
        self.table = widgets.HTML()
        self.derivation = widgets.HTML()

        placed = {n for column in CONTROL_COLUMNS for n in column}
        extra = tuple(k.name for k in KNOB_SPECS if k.name not in placed)  # knobs added later: their own column
        controls = widgets.HBox([widgets.VBox([getattr(self, n) for n in column])
                                 for column in CONTROL_COLUMNS + ((extra,) if extra else ())])
        for label in (self.stride_label, self.blocks_label):
            label.layout.margin = "0 24px 0 0"
        self.table.layout.margin = "0 24px 0 0"
        numbers = widgets.HBox([self.stride_label, self.blocks_label, self.change_label],
                               layout=widgets.Layout(align_items="baseline", flex_flow="row wrap"))
        self.widget = widgets.VBox([controls, self.error_label, numbers, self.capacity_label, self.engines_label,
                                    self.summary,
                                    self.block_map, self.map_caption, widgets.HBox([self.table, self.derivation])])
        for n, css in CSS_CLASSES.items():
            getattr(self, n).add_class(css)

        self.model.observe(self._on_model, names="value")
        self.backend.observe(self._on_backend, names="value")
        for n in KNOBS:
            if n not in ("model", "backend"):
                getattr(self, n).observe(self._on_change, names="value")
        self._show_knobs_of(self._model())
        self.update()

    # ---- knobs -----------------------------------------------------------------------------
    def _model(self):
        """The chosen model: a preset by name, or the config this explorer was opened with."""
        return model_of(self._models.get(self.model.value, self.model.value))

    def knobs(self) -> dict:
        """The current values of the knobs that apply to the chosen model, by knob name."""
        m = self._model()
        out = {n: getattr(self, n).value for n in knobs_for(m)}
        out["model"] = self._models.get(self.model.value, self.model.value)
        return out

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
        A model given here resets the knobs first; the others then apply. A knob that does not
        apply to the model is refused (KvvizError), not set."""
        check_names(values)
        target = values.get("model", self.model.value)
        check_names([n for n in values if n != "model"], self._models.get(target, target))
        with self.hold():
            if "model" in values:
                self.model.value = values.pop("model")
            if "backend" in values:
                self.backend.value = values.pop("backend")
            for n, value in values.items():
                getattr(self, n).value = value

    def _on_change(self, change) -> None:
        if not self._holding:
            self.update()

    def _on_model(self, change) -> None:
        """A new model: every knob takes the new model's default; the notice names the values
        that changed, so no number on the page belongs to the previous model's settings."""
        m = model_of(self._models.get(change["new"], change["new"]))
        fresh = control_values(self._models.get(change["new"], change["new"]))
        model_knobs = set(preset_knobs(m))
        changed = []
        with self.hold():
            for n in knobs_for(m):
                if n == "model":
                    continue
                control, knob = getattr(self, n), KNOB_BY_NAME[n]
                value = fresh[n]
                if n not in model_knobs:
                    # a deployment knob keeps the user's value where the new model takes it; the block
                    # size means another block in another family (DeepSeek V4's main caches) and resets
                    if n in KEPT_ON_SWITCH and (knob.choices is None or control.value in knob.choices(m)):
                        value = control.value
                    elif control.value != value:
                        why = "not one of its" if n in KEPT_ON_SWITCH else "the model's own"
                        changed.append(f"{n} {control.value} -> {value} ({why})")
                if isinstance(control, widgets.IntSlider):
                    knob = KNOB_BY_NAME[n]
                    top = knob.max_for(m) if knob.max_for is not None else max(control.max, value)
                    control.min, control.max = min(control.min, value), max(control.max, value, top)
                    control.value = value
                    control.max = top
                elif isinstance(control, widgets.Dropdown):
                    control.options = list(KNOB_BY_NAME[n].choices(m))
                    control.value = value
                else:
                    control.value = value
            self.notice = ("reset for " + m.name + ": " + ", ".join(changed)) if changed else ""
            self._show_knobs_of(m)

    def _show_knobs_of(self, m) -> None:
        """Hide the controls of knobs that do not apply to the model."""
        applies = set(knobs_for(m))
        for n in KNOBS:
            getattr(self, n).layout.display = None if n in applies else "none"

    def _on_backend(self, change) -> None:
        with self.hold():
            self.main_format.value = BACKENDS[change["new"]].default_main_format

    # ---- update ----------------------------------------------------------------------------
    def planned(self, knobs: dict) -> Planned:
        """The cached plan of the knobs (planned now when not cached). Raises KvvizError."""
        key = layout_key({k: (v if isinstance(v, (str, int, float, bool, type(None))) else id(v))
                          for k, v in knobs.items()})
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = plan_for_display(knobs)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return entry

    def update(self) -> None:
        """Recompute from the knobs and refresh every output, the block map's data included; on
        bad knobs show the one-line message and grey out the last good outputs. Never raises."""
        knobs = self.knobs()
        try:
            planned = self.planned(knobs)
            result = result_at(planned, knobs)
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
        line = f"cannot plan: {message}"
        if self.plan is not None:
            line += "; the greyed-out picture below is the last configuration that planned"
        self.error_label.value = f'<span style="color:#b00020">&#9888; {html.escape(line)}</span>'
        self.error_label.layout.display = None
        self.block_map.status = f"refused: {message}"
        for w in (self.block_map, self.summary, self.table, self.derivation):
            w.layout.opacity = "0.35"
        if self.plan is not None:
            self.map_caption.value = _caption(f"still drawn (not the current selection): "
                                              f"{describe_knobs(self._good_knobs)}: {stride_words(self.plan)}")

    def _show(self, result: Result, planned: Planned, knobs: dict) -> None:
        self.plan, self.layout, self.result, self.error = result.plan, result.layout, result, ""
        self._good_knobs = knobs
        # The map first: its message is the largest, so the browser starts on it.
        with self.block_map.hold_sync():
            self.block_map.status = ""
            self.block_map.data = planned.map_data
        for w in (self.block_map, self.summary, self.table, self.derivation):
            w.layout.opacity = None
        self.error_label.value = "" if not self.notice else (
            f'<span style="color:#555">{html.escape(self.notice)}</span>')
        self.error_label.layout.display = None if self.notice else "none"
        c = result.capacity
        plan = result.plan
        self.stride_label.value = stride_words(plan)
        budget = kv_budget(knobs)
        where = f"{knobs['budget_gib']:g} GiB" if budget is None else (
            f"{budget.available_bytes / 2**30:.2f} GiB of one {knobs['gpu']} rank"
            + (" (estimate)" if any(t.estimate for t in budget.terms) else ""))
        self.blocks_label.value = f"{plural(c.num_blocks, 'block')} at {where}"
        cmp = result.comparison
        if cmp is None or plan.planner == planned.baseline.planner:
            self.change_label.value = (f"{plural(c.requests_fit, 'whole request')} of "
                                      f"{plural(c.max_model_len, 'token')} {'fits' if c.requests_fit == 1 else 'fit'}")
        else:
            self.change_label.value = (
                f"vs {planned.baseline.planner}: stride {cmp.before.block_stride:,} B ({_pct(cmp.stride_change_pct)}), "
                f"blocks {cmp.blocks_before:,} ({_pct(cmp.blocks_change_pct)}); {cmp.stride_note()}")
        self.capacity_label.value = c.line
        self.engines_label.value = engines_html(knobs)
        self.summary.value = summary_html(c, result.capacities)
        self.map_caption.value = _caption(planned.map_data["caption"])
        self.table.value = planned.table_html
        self.derivation.value = planned.derivation_html
        self.updates += 1

    def _repr_mimebundle_(self, **kwargs):  # `Explorer()` as the last line of a cell shows the app
        return self.widget._repr_mimebundle_(**kwargs)
