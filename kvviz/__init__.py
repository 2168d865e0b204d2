"""kvviz: byte-exact views of packed KV-cache layouts (DeepSeek V4 in vLLM).

Data flows one way: config -> specs -> groups -> layout -> pool / figures.

    from kvviz.config import load_model
    from kvviz.specs import CacheOptions
    from kvviz.planners import plan_model

    layout = plan_model(load_model("deepseek-v4-pro"), CacheOptions(backend="flashmla"))
    print(layout)  # a text byte map with a legend
"""

__version__ = "0.1.0"

from .hf import load_hf_config  # noqa: E402,F401  (light: transformers is imported only when a config is parsed)
