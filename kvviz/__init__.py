"""kvviz: byte-exact views of LLM serving engines' KV-cache layouts (vLLM 0.33 first).

Data flows one way: config -> specs -> groups -> layout -> pool / figures. A notebook needs one
import:

    import kvviz

    model = kvviz.load("llama-3.1-8b")   # a preset, or any config.json / folder
    plan = kvviz.plan(model)              # what vLLM 0.33 does; planner="overlay", "separate", ...
    print(plan)                           # a text byte map with a legend
    print(plan.capacity(40 * 2**30).line) # vLLM's "GPU KV cache size: ..." line
    r = kvviz.replay(plan, "trace.jsonl", gpu="H100")  # a workload or a published trace, step by step

`import kvviz` is instant: each name below is imported from its module on first use (PEP 562), so
torch, matplotlib, pandas and ipywidgets load only when a name that needs them is touched.
"""

from __future__ import annotations

import importlib
import sys
import types

from kvviz.base.version import __version__ as __version__

# name -> module, grouped as a notebook meets them (the order of __all__).
_PUBLIC = {
    # load a model, plan it, compare planners
    "load": "kvviz.api",
    "plan": "kvviz.api",
    "compare": "kvviz.api",
    "Options": "kvviz.options",
    "model_names": "kvviz.families",
    "Model": "kvviz.families",
    # the plan, its pools and what a budget buys
    "Plan": "kvviz.core.plan",
    "Layout": "kvviz.core.layout",
    "Capacity": "kvviz.core.plan",
    "budget_bytes": "kvviz.core.capacity",
    # real memory (torch)
    "Pool": "kvviz.pool",
    "verify": "kvviz.verify",
    # figures (matplotlib) and the report
    "block_map": "kvviz.views",
    "before_after": "kvviz.views",
    "page_anatomy": "kvviz.views",
    "live_bytes": "kvviz.views",
    "render_report": "kvviz.views.report",
    # the explorer (ipywidgets)
    "Explorer": "kvviz.explorer.app",
    # the pool under traffic: kvviz.replay(plan, workload_or_trace, ...) is a package you call
    "replay": "kvviz.replay",
    "read_trace": "kvviz.replay",
    "occupancy": "kvviz.views.traffic_replay",
    "queues": "kvviz.views.traffic_replay",
    "pool_map": "kvviz.views.traffic_replay",
    "sweep": "kvviz.deploy.traffic",
}
_ALIASES = {"model_names": "preset_names"}
_PACKAGES = {"replay"}  # public names that are the (callable) package itself, not a name inside it

__all__ = list(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kvviz' has no attribute {name!r}")
    found = importlib.import_module(module)
    value = found if name in _PACKAGES else getattr(found, _ALIASES.get(name, name))
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keeps a public name bound to its function when a submodule of the same name (kvviz.verify,
    kvviz.plan's home kvviz.api) is first imported: the import system would otherwise rebind it."""

    def __setattr__(self, name: str, value) -> None:
        if (
            name in _PUBLIC
            and name not in _PACKAGES
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{__name__}.{name}"
        ):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
