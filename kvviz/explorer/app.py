"""An ipywidgets app to turn the knobs of a model's KV cache and watch the block change.

DeepSeek V4 (its formats, dims, layer mix and planners) and the hybrid models (gpt-oss, Gemma 3,
Llama 4, Qwen3-Next: KV dtype, block size, sliding window, full-layer mix, Mamba state dtype,
prefix caching, vllm / packed / separate planners); the controls that do not apply to the chosen
model are hidden.

Thin by design: every number comes from the library (config -> specs -> groups -> planner ->
capacity) through `kvviz.explorer.knobs`; the block map is drawn in the browser by `kvviz.views.livemap`
from `kvviz.views.blockmap_data.BlockMapData`, the same data the matplotlib figures of `kvviz.views` draw.
A change updates the numbers, the tables and the map's data in one handler; no picture is
rendered in Python.

    from kvviz.explorer.app import Explorer
    Explorer().widget          # display it in JupyterLab

Tests (and the browser test) drive it by setting `.value` on the public controls; every
control and output carries a stable CSS class (`kvviz-<name>`, see `CSS_CLASSES`).
"""

from __future__ import annotations

import contextlib
import html
from collections import OrderedDict

import ipywidgets as widgets

from kvviz.base.errors import KvvizError
from kvviz.base.text import plural
from kvviz.core.plan import Plan
from kvviz.explorer.display import (
    CACHE_SIZE,
    CONTROL_COLUMNS,
    CSS_CLASSES,
    KEPT_ON_SWITCH,
    Planned,
    Result,
    _caption,
    _pct,
    deploy_html,
    engines_html,
    plan_for_display,
    result_at,
    stride_words,
)
from kvviz.explorer.knobs import (
    DEFAULT_MODEL,
    KNOB_BY_NAME,
    KNOB_SPECS,
    KNOBS,
    check_names,
    control_values,
    knobs_for,
    model_of,
    preset_knobs,
)
from kvviz.explorer.sweeps import describe_knobs, explorer_source, kv_budget, layout_key
from kvviz.explorer.tables import summary_html
from kvviz.families.deepseek_v4 import BACKENDS
from kvviz.views.livemap import LiveBlockMap


def _control(knob, value, model):
    """The ipywidget of one knob (choices and ranges as the model has them)."""
    wide = {"description_width": "110px"}
    if knob.control == "int":
        top = knob.max_for(model) if (knob.max_for is not None and knob.applies_to(model)) else knob.max
        return widgets.IntSlider(
            value=value,
            min=min(knob.min, value),
            max=max(top, value),
            step=knob.step,
            description=knob.label,
            style=wide,
            continuous_update=False,
            layout=widgets.Layout(width="340px"),
        )
    if knob.control == "bool":
        return widgets.Checkbox(
            value=value,
            description=knob.label,
            indent=False,
            layout=widgets.Layout(width="200px", margin="0 0 0 114px"),
        )
    if knob.control == "count":  # unbounded on purpose: 0 or less is refused with a message, not clamped
        return widgets.IntText(value=value, description=knob.label, style=wide, layout=widgets.Layout(width="260px"))
    if knob.control == "float":  # unbounded on purpose: 0 or less is refused with a message, not clamped
        return widgets.FloatText(
            value=value, step=knob.step, description=knob.label, style=wide, layout=widgets.Layout(width="260px")
        )
    options = list(knob.choices(model))
    if value not in options:  # a value of another model's knob, hidden until that model is picked
        options.append(value)
    return widgets.Dropdown(
        options=options, value=value, description=knob.label, style=wide, layout=widgets.Layout(width="260px")
    )


class Explorer:
    """Controls for a model's cache knobs; block map, group table and capacity that follow them.

    `Explorer(model)` takes a preset name, a config.json / folder path, a `kvviz.load` result or a
    `kvviz.plan` result (its model, planner and options).
    Public controls (set `.value` to drive it), one per `kvviz.explorer.knobs.KNOBS`; the controls of the
    knobs that do not apply to the chosen model are hidden (`knobs()` returns only those that
    apply). Outputs: stride_label, blocks_label, change_label (against the family's baseline
    planner), capacity_label (vLLM's own "GPU KV cache size ..." line), deploy_label (stages, offload, DP,
    fp8 gain), summary (waste split,
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
        model, knob_values = explorer_source(model, knob_values)  # a kvviz.plan(...) result: its model and knobs
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
        self.deploy_label = widgets.HTML()  # stages, CPU offload, DP replicas, fp8 gain (display.deploy_html)
        self.engines_label = widgets.HTML()  # the same model and budget in SGLang and TensorRT-LLM (kvviz.engines)
        self.summary = widgets.HTML()
        self.block_map = LiveBlockMap(layout=widgets.Layout(width="100%", max_width="1000px"))
        self.map_caption = widgets.HTML()
        self.table = widgets.HTML()
        self.derivation = widgets.HTML()

        placed = {n for column in CONTROL_COLUMNS for n in column}
        extra = tuple(k.name for k in KNOB_SPECS if k.name not in placed)  # knobs added later: their own column
        controls = widgets.HBox(
            [
                widgets.VBox([getattr(self, n) for n in column])
                for column in CONTROL_COLUMNS + ((extra,) if extra else ())
            ]
        )
        for label in (self.stride_label, self.blocks_label):
            label.layout.margin = "0 24px 0 0"
        self.table.layout.margin = "0 24px 0 0"
        numbers = widgets.HBox(
            [self.stride_label, self.blocks_label, self.change_label],
            layout=widgets.Layout(align_items="baseline", flex_flow="row wrap"),
        )
        self.widget = widgets.VBox(
            [
                controls,
                self.error_label,
                numbers,
                self.capacity_label,
                self.deploy_label,
                self.engines_label,
                self.summary,
                self.block_map,
                self.map_caption,
                widgets.HBox([self.table, self.derivation]),
            ]
        )
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
        key = layout_key(
            {k: (v if isinstance(v, (str, int, float, bool, type(None))) else id(v)) for k, v in knobs.items()}
        )
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
            self.map_caption.value = _caption(
                f"still drawn (not the current selection): "
                f"{describe_knobs(self._good_knobs)}: {stride_words(self.plan)}"
            )

    def _show(self, result: Result, planned: Planned, knobs: dict) -> None:
        self.plan, self.layout, self.result, self.error = result.plan, result.layout, result, ""
        self._good_knobs = knobs
        # The map first: its message is the largest, so the browser starts on it.
        with self.block_map.hold_sync():
            self.block_map.status = ""
            self.block_map.data = planned.map_data
        for w in (self.block_map, self.summary, self.table, self.derivation):
            w.layout.opacity = None
        self.error_label.value = (
            "" if not self.notice else (f'<span style="color:#555">{html.escape(self.notice)}</span>')
        )
        self.error_label.layout.display = None if self.notice else "none"
        c = result.capacity
        plan = result.plan
        self.stride_label.value = stride_words(plan)
        budget = kv_budget(knobs)
        where = (
            f"{knobs['budget_gib']:g} GiB"
            if budget is None
            else (
                f"{budget.available_bytes / 2**30:.2f} GiB of one {knobs['gpu']} rank"
                + (" (estimate)" if any(t.estimate for t in budget.terms) else "")
            )
        )
        self.blocks_label.value = f"{plural(c.num_blocks, 'block')} at {where}"
        cmp = result.comparison
        if cmp is None or plan.planner == planned.baseline.planner:
            self.change_label.value = (
                f"{plural(c.requests_fit, 'whole request')} of "
                f"{plural(c.max_model_len, 'token')} {'fits' if c.requests_fit == 1 else 'fit'}"
            )
        else:
            self.change_label.value = (
                f"vs {planned.baseline.planner}: stride {cmp.before.block_stride:,} B ({_pct(cmp.stride_change_pct)}), "
                f"blocks {cmp.blocks_before:,} ({_pct(cmp.blocks_change_pct)}); {cmp.stride_note()}"
            )
        self.capacity_label.value = c.line
        self.deploy_label.value = deploy_html(plan, knobs)
        self.engines_label.value = engines_html(knobs)
        self.summary.value = summary_html(c, result.capacities)
        self.map_caption.value = _caption(planned.map_data["caption"])
        self.table.value = planned.table_html
        self.derivation.value = planned.derivation_html
        self.updates += 1

    def _repr_mimebundle_(self, **kwargs):  # `Explorer()` as the last line of a cell shows the app
        return self.widget._repr_mimebundle_(**kwargs)
