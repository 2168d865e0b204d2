"""Which architectures SGLang and TensorRT-LLM serve, as each engine's own registry lists them.

The table is kvviz/engines/served.json, read from the engines' source by scripts/engine_registries.py
(never typed in):

* SGLang 0.5.23: the class names the `EntryClass` of each sglang/srt/models/*.py registers
  (models/registry.py import_model_classes), read from the sglang==0.5.23 wheel;
* TensorRT-LLM: the architectures of its PyTorch backend's model registry,
  tensorrt_llm/_torch/models/_arch_index.py MODEL_ARCH_TO_MODULE (the static index of its
  `@register_auto_model` decorators), at the commit the table cites.

kvviz's SGLang and TensorRT-LLM planners plan only an architecture their engine's table lists and
refuse any other in one line naming the engine. SGLang falls back to its generic Transformers
backend (registry.py _normalize_archs appends TransformersForCausalLM) for an architecture no
model file registers; kvviz does not size that fallback, and the refusal says so.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from kvviz.base.errors import KvvizError

TABLE = Path(__file__).resolve().parent / "served.json"


@functools.cache
def served_table() -> dict:
    """served.json: engine -> {engine, version or commit, source, architectures: {arch: file}}."""
    return json.loads(TABLE.read_text())


def served_architectures(engine: str) -> frozenset[str]:
    """The architectures `engine` ('sglang', 'trtllm') serves, from its own registry."""
    return frozenset(served_table()[engine]["architectures"])


def refusal(engine: str, architecture: str) -> str | None:
    """The one line saying `engine` does not serve `architecture`, or None where it does."""
    entry = served_table()[engine]
    if architecture in entry["architectures"]:
        return None
    if engine == "sglang":
        return (
            f"{entry['engine']} does not serve {architecture} with a model of its own: no EntryClass of "
            f"sglang/srt/models registers it (kvviz does not size SGLang's generic Transformers fallback)"
        )
    return (
        f"{entry['engine']} does not serve {architecture}: its PyTorch backend's model registry "
        f"(_torch/models/_arch_index.py MODEL_ARCH_TO_MODULE at commit {entry['commit'][:8]}) does not list it"
    )


def check_served(engine: str, model) -> None:
    """Refuse `model` in one line where `engine`'s registry does not list its architecture."""
    why = refusal(engine, model.architecture)
    if why:
        raise KvvizError(f"{model.name}: {why}")
