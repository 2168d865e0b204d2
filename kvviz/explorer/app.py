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

What the page shows is one state: the knobs give an `kvviz.explorer.answer.Answer` (every text, computed before a
widget is touched) or a refusal. Every number sits in one answer area (`answer`, CSS class `kvviz-answer`) whose
head names the knobs it answers; the area carries a DOM class the page itself styles (kvviz/static/explorer.css):
`kvviz-pending` from the first knob a change moves until its last number is written (greyed only if that takes
long), `kvviz-stale` after a refused change (greyed at once, the refusal in words above it)
(docs/explorer.md#the-marks-the-page-shows).

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

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import checked, short_repr
from kvviz.core.plan import Plan
from kvviz.explorer.answer import OK, REFUSED, Answer, answer_for, head_html
from kvviz.explorer.controls import control_for, stylesheet
from kvviz.explorer.display import (
    CACHE_SIZE,
    CONTROL_COLUMNS,
    CSS_CLASSES,
    KEPT_ON_SWITCH,
    Planned,
    Result,
    grey_caption,
    plan_for_display,
    result_at,
    stride_words,
)
from kvviz.explorer.knob_spec import EXPLORER_SOURCE
from kvviz.explorer.knobs import (
    DEFAULT_MODEL,
    KNOB_BY_NAME,
    KNOB_SPECS,
    KNOBS,
    check_names,
    check_value,
    control_values,
    knobs_for,
    model_of,
    preset_knobs,
)
from kvviz.explorer.sweeps import describe_knobs, explorer_source, layout_key
from kvviz.families.deepseek_v4 import BACKENDS
from kvviz.views.livemap import LiveBlockMap

PENDING, STALE = "kvviz-pending", "kvviz-stale"  # the answer area's marks (kvviz/static/explorer.css)
MAX_REFUSAL = 400  # characters of the refusal line (an internal error's text can be anything)


class Explorer:
    """Controls for a model's cache knobs; block map, group table and capacity that follow them.

    `Explorer(model)` takes a preset name, a config.json / folder path, a `kvviz.load` result or a
    `kvviz.plan` result (its model, planner and options).
    Public controls (set `.value` to drive it), one per `kvviz.explorer.knobs.KNOBS`; the controls of the
    knobs that do not apply to the chosen model are hidden (`knobs()` returns only those that apply).
    Outputs, all inside `answer` (the area the page marks stale or pending): answer_head (the knobs the numbers
    answer), stride_label, blocks_label, fits_label (whole requests of max_model_len), change_label (against the
    family's baseline planner), capacity_label (vLLM's own "GPU KV cache size ..." line), deploy_label (stages,
    offload, DP, fp8 gain, vLLM's start-up refusal), engines_label, summary (waste split, admission, every planner
    side by side), block_map (a `LiveBlockMap`, drawn by the browser), map_caption, table, derivation; above it
    error_label (a refusal, or what a model switch reset). State: `plan` (last good Plan), `layout` (its one pool,
    or the Plan of separate pools), `result`, `shown` (the `Answer` on the page), `error` ("" when the knobs are
    fine), `notice` (what the last model switch reset), `widget` (the box to display).

    Changing the model resets every knob to the new model's defaults, says which values it changed and clears
    the map's selection; changing the backend picks its main-cache format (FlashMLA: fp8_ds_mla, FlashInfer:
    fp8). An update never raises: a refusal is shown in one line and the whole answer area is marked stale, its
    head naming the configuration its numbers belong to.
    """

    @checked(model=EXPLORER_SOURCE)
    def __init__(self, model=DEFAULT_MODEL, *, budget_gib: float | None = None, **knob_values) -> None:
        model, knob_values = explorer_source(model, knob_values)  # a kvviz.plan(...) result: its model and knobs
        self._holding = False
        self._cache: OrderedDict[tuple, Planned] = OrderedDict()
        self._models: dict = {}
        self.plan: Plan | None = None
        self.layout = None
        self.result: Result | None = None
        self.shown: Answer | None = None
        self.error = ""
        self.notice = ""
        self.updates = 0  # successful updates so far (tests and the benchmark read it)
        self.steps = 0  # updates so far, refused ones too (the head's data-step)

        m = model_of(model)
        name = model if isinstance(model, str) and not ("/" in model or model.endswith(".json")) else m.name
        self._models[name] = model if not isinstance(model, str) else model
        common = {} if budget_gib is None else {"budget_gib": budget_gib}
        knobs = control_values(self._models[name], **common, **knob_values)
        knobs["model"] = name
        for knob in KNOB_SPECS:
            setattr(self, knob.name, control_for(knob, knobs[knob.name], m))
            getattr(self, knob.name).add_class(f"kvviz-knob-{knob.name.replace('_', '-')}")
        if name not in self.model.options:
            self.model.options = (*self.model.options, name)
            self.model.value = name

        self.error_label = widgets.HTML(layout=widgets.Layout(display="none"))
        self.answer_head = widgets.HTML()
        self.stride_label = widgets.Label(style={"font_weight": "bold", "font_size": "16px"})
        self.blocks_label = widgets.Label(style={"font_size": "16px"})
        self.fits_label = widgets.Label(style={"font_size": "16px"})
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
        columns = [widgets.VBox([getattr(self, n) for n in c]) for c in CONTROL_COLUMNS + ((extra,) if extra else ())]
        for column in columns:  # explorer.css: a column never shrinks under its controls; the row wraps instead
            column.add_class("kvviz-knob-column")
        controls = widgets.HBox(columns)
        controls.add_class("kvviz-knobs")
        for label in (self.stride_label, self.blocks_label, self.fits_label):
            label.layout.margin = "0 24px 0 0"
        self.table.layout.margin = "0 24px 0 0"
        numbers = widgets.HBox(
            [self.stride_label, self.blocks_label, self.fits_label, self.change_label],
            layout=widgets.Layout(align_items="baseline", flex_flow="row wrap"),
        )
        self.answer = widgets.VBox(
            [
                self.answer_head,
                numbers,
                self.capacity_label,
                self.deploy_label,
                self.engines_label,
                self.summary,
                self.block_map,
                self.map_caption,
                widgets.HBox([self.table, self.derivation], layout=widgets.Layout(flex_flow="row wrap")),
            ]
        )
        self.widget = widgets.VBox([stylesheet(), controls, self.error_label, self.answer])
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
        apply to the model is refused (KvvizError), not set, and so is a value its control cannot hold (a string
        for a number, a choice the model does not offer): nothing is set then."""
        check_names(values)
        target = values.get("model", self.model.value)
        require(
            isinstance(target, str) and target in self.model.options,
            f"model={short_repr(target)}: not one of the explorer's models ({', '.join(self.model.options)})",
        )
        m = model_of(self._models.get(target, target))
        check_names([n for n in values if n != "model"], m)
        for n, value in values.items():
            check_value(n, value)
            choices = KNOB_BY_NAME[n].choices(m) if n != "model" and KNOB_BY_NAME[n].choices else None
            require(
                choices is None or value in choices,
                f"{n}={short_repr(value)}: not one of {m.name}'s choices ({', '.join(map(str, choices or ()))})",
            )
        with self.hold():
            if "model" in values:
                self.model.value = values.pop("model")
            if "backend" in values:
                self.backend.value = values.pop("backend")
            for n, value in values.items():
                getattr(self, n).value = value

    def _on_change(self, change) -> None:
        self._mark(PENDING)  # the knob on the page moved: the numbers under it are not its own yet
        if not self._holding:
            self.update()

    def _on_model(self, change) -> None:
        """A new model: every knob takes the new model's default; the notice names the values
        that changed, so no number on the page belongs to the previous model's settings."""
        self._mark(PENDING)
        self.block_map.selected = ""  # the old model's layer: no anatomy of it over the new map
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
                    top = knob.max_for(m) if knob.max_for is not None else max(control.max, value)
                    control.min, control.max = min(control.min, value), max(control.max, value, top)
                    control.value = value
                    control.max = top
                elif isinstance(control, widgets.Dropdown):
                    control.options = list(knob.choices(m))
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
        self._mark(PENDING)
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

    def answer_for(self, knobs: dict) -> Answer:
        """Everything the answer area shows for `knobs` (`kvviz.explorer.answer.answer_for` of the cached plan).
        Raises KvvizError; touches no widget."""
        planned = self.planned(knobs)
        return answer_for(planned, result_at(planned, knobs), knobs)

    def update(self) -> None:
        """Recompute from the knobs and write every output, the block map's data included, from one `Answer`; on
        bad knobs show the one-line message and mark the whole answer area stale. Never raises."""
        self._mark(PENDING)
        self.steps += 1
        knobs = self.knobs()
        try:
            answer = self.answer_for(knobs)
        except KvvizError as e:
            self._refuse(str(e))
            return
        except Exception as e:  # an app in a notebook must not raise into the cell
            self._refuse(f"internal error ({type(e).__name__}): {e}")
            return
        self._show(answer)

    @property
    def map_data(self) -> dict:
        """What the live map draws now (`BlockMapData.to_dict()`)."""
        return self.block_map.data

    def _mark(self, mark: str) -> None:
        """Set the answer area's one mark (PENDING, STALE or "" for none) in one synced change of its DOM classes."""
        keep = tuple(c for c in self.answer._dom_classes if c not in (PENDING, STALE))
        self.answer._dom_classes = keep + ((mark,) if mark else ())

    def _refuse(self, message: str) -> None:
        message = " ".join(message.split())  # one line, whatever the error said
        message = self.error = message if len(message) <= MAX_REFUSAL else message[: MAX_REFUSAL - 3] + "..."
        line = f"cannot plan: {message}"
        if self.shown is not None:
            line += "; every number below (greyed out) is the last configuration that planned, named above them"
        self.error_label.value = f'<span style="color:#b00020">&#9888; {html.escape(line)}</span>'
        self.error_label.layout.display = None
        self.block_map.status = f"refused: {message}"
        if self.shown is not None:
            self.map_caption.value = grey_caption(
                f"still drawn (not the current selection): "
                f"{describe_knobs(self.shown.knobs)}: {stride_words(self.shown.result.plan)}"
            )
            self.answer_head.value = head_html(self.shown, step=self.steps, state=REFUSED)
        self._mark(STALE)

    def _show(self, a: Answer) -> None:
        """Write one Answer into the widgets (nothing here can fail), then lift the pending mark."""
        self.plan, self.layout, self.result, self.error, self.shown = a.result.plan, a.result.layout, a.result, "", a
        # The map first: its message is the largest, so the browser starts on it.
        with self.block_map.hold_sync():
            self.block_map.status = ""
            self.block_map.data = a.planned.map_data
        self.error_label.value = (
            "" if not self.notice else (f'<span style="color:#555">{html.escape(self.notice)}</span>')
        )
        self.error_label.layout.display = None if self.notice else "none"
        self.stride_label.value = a.stride
        self.blocks_label.value = a.blocks
        self.fits_label.value = a.fits
        self.change_label.value = a.change
        self.capacity_label.value = a.capacity
        self.deploy_label.value = a.deploy_html
        self.engines_label.value = a.engines_html
        self.summary.value = a.summary_html
        self.map_caption.value = a.caption_html
        self.table.value = a.planned.table_html
        self.derivation.value = a.planned.derivation_html
        self.answer_head.value = head_html(a, step=self.steps, state=OK)
        self.updates += 1
        self._mark("")

    def _repr_mimebundle_(self, **kwargs):  # `Explorer()` as the last line of a cell shows the app
        return self.widget._repr_mimebundle_(**kwargs)
