"""The explorer: its knobs without widgets (`knobs`: defaults, checks, sweeps), what it shows for one
state of them (`display`, `tables`) and the ipywidgets app (`app`, `Explorer`); `traffic` (`TrafficExplorer`) is
the step slider over a replay's time-lapse pool map. The names load ipywidgets
only when the app is touched."""

from kvviz.base.lazy import lazy_exports

# name -> the submodule that defines it (imported on first use)
_NAMES = {
    "DEFAULT_MODEL": "knobs",
    "DEFAULT_BUDGET_GIB": "knobs",
    "AUTO": "knobs",
    "NO_GPU": "knobs",
    "BLOCK_SIZES": "knobs",
    "TP_SIZES": "knobs",
    "Knob": "knobs",
    "KNOB_SPECS": "knobs",
    "KNOBS": "knobs",
    "KNOB_BY_NAME": "knobs",
    "DEPLOYMENT_DEFAULTS": "knobs",
    "preset": "knobs",
    "model_of": "knobs",
    "knobs_for": "knobs",
    "preset_knobs": "knobs",
    "check_names": "knobs",
    "check_value": "knobs",
    "default_knobs": "knobs",
    "control_values": "knobs",
    "kv_budget": "sweeps",
    "budget_bytes": "sweeps",
    "model_for": "sweeps",
    "options_for": "sweeps",
    "plan_knobs": "sweeps",
    "baseline_planner": "sweeps",
    "capacities": "sweeps",
    "layout_key": "sweeps",
    "describe_knobs": "sweeps",
    "compare_knobs": "sweeps",
    "sweep": "sweeps",
    "CACHE_SIZE": "display",
    "CSS_CLASSES": "display",
    "Planned": "display",
    "stride_words": "display",
    "plan_for_display": "display",
    "Result": "display",
    "result_at": "display",
    "engines_html": "display",
    "KEPT_ON_SWITCH": "display",
    "CONTROL_COLUMNS": "display",
    "TABLE_STYLE": "tables",
    "PRE_STYLE": "tables",
    "GROUP_COLUMNS": "tables",
    "group_table_html": "tables",
    "CHOSEN_ROW": "tables",
    "COMPARE_COLUMNS": "tables",
    "summary_html": "tables",
    "Explorer": "app",
    "TrafficExplorer": "traffic",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
