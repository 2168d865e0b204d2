"""kvviz: byte-exact views of packed KV-cache layouts (DeepSeek V4 in vLLM).

Data flows one way: config -> specs -> groups -> layout -> pool / figures. A notebook needs one
import:

    import kvviz

    layout = kvviz.plan_model(kvviz.load_model("deepseek-v4-pro"), kvviz.CacheOptions(backend="flashmla"))
    print(layout)  # a text byte map with a legend

`import kvviz` is instant: each name below is imported from its module on first use (PEP 562), so
torch, matplotlib, pandas and ipywidgets load only when a name that needs them is touched.
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

# name -> module, grouped as a notebook meets them (the order of __all__).
_PUBLIC = {
    # load a model or a config
    "load_model": "kvviz.config", "load_config": "kvviz.config", "load_hf_config": "kvviz.hf",
    "model_names": "kvviz.config", "CacheOptions": "kvviz.specs",
    # plan and compare
    "plan_model": "kvviz.planners", "plan": "kvviz.planners", "compare_layouts": "kvviz.planners",
    "plan_hybrid": "kvviz.hybrid", "HybridOptions": "kvviz.hybrid",
    # the Layout, and what a budget buys
    "Layout": "kvviz.layout",
    "num_blocks": "kvviz.capacity", "budget_bytes": "kvviz.capacity", "max_concurrency": "kvviz.capacity",
    # real memory (torch)
    "Pool": "kvviz.pool", "verify": "kvviz.verify",
    # figures (matplotlib) and the report
    "block_map": "kvviz.plot", "before_after": "kvviz.plot", "page_anatomy": "kvviz.plot",
    "live_bytes": "kvviz.plot", "render_report": "kvviz.report",
    # the explorer (ipywidgets)
    "Explorer": "kvviz.explorer",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kvviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keeps a public name bound to its function when a submodule of the same name (kvviz.verify)
    is first imported: the import system would otherwise rebind kvviz.verify to the module."""

    def __setattr__(self, name: str, value) -> None:
        if name in _PUBLIC and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
