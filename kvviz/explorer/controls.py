"""The explorer's controls: one ipywidget per knob (`control_for`, its choices and range as the model has them) and
the stylesheet the page needs (`stylesheet`: kvviz/static/explorer.css as a <style> element)."""

from __future__ import annotations

from importlib.resources import files

import ipywidgets as widgets


def control_for(knob, value, model):
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


def stylesheet() -> widgets.HTML:
    """The explorer's stylesheet as a <style> element in the page (the stale and pending marks, the reflowing
    knob columns): a widget's Python-side attribute the browser never receives cannot grey anything out."""
    css = files("kvviz").joinpath("static", "explorer.css").read_text(encoding="utf-8")
    return widgets.HTML(f"<style>{css}</style>", layout=widgets.Layout(display="none"))
