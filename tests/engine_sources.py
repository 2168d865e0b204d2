"""Where the engines' own sources are, for the tests that compile the engines' functions from them.

A source is found only where its environment variable points (KVVIZ_VLLM_SRC, KVVIZ_SGLANG_SRC,
KVVIZ_TRTLLM_SRC: a folder holding the package's tree, `vllm/`, `sglang/`, `tensorrt_llm/`), never
at a default absolute path. Where it is absent the check skips, unless KVVIZ_REQUIRE_<ENGINE>_SRC is
set: then a missing source is a failure. `.ci/run` fetches vLLM 0.33.0's and SGLang 0.5.23's wheels
from the package registry, points the variables at them and sets both REQUIRE variables.

TensorRT-LLM publishes no wheel with its Python source on the package registry (PyPI's
`tensorrt-llm` releases are stub sdists that fetch the real wheel from NVIDIA's own index at install
time), and its code is not committed here (tests/data/trtllm/PROVENANCE.md), so CI has no
TensorRT-LLM source: its checks run where KVVIZ_TRTLLM_SRC points at a local extract (same relative
paths as the repository) and KVVIZ_REQUIRE_TRTLLM_SRC=1 makes a missing file there a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENGINES = {
    "vllm": ("KVVIZ_VLLM_SRC", "KVVIZ_REQUIRE_VLLM_SRC", "vLLM 0.33.0"),
    "sglang": ("KVVIZ_SGLANG_SRC", "KVVIZ_REQUIRE_SGLANG_SRC", "SGLang 0.5.23"),
    "trtllm": ("KVVIZ_TRTLLM_SRC", "KVVIZ_REQUIRE_TRTLLM_SRC", "TensorRT-LLM"),
}


def source_root(engine: str) -> Path | None:
    """The folder the engine's variable points at, or None where it is unset."""
    value = os.environ.get(ENGINES[engine][0])
    return Path(value) if value else None


def required(engine: str) -> bool:
    return bool(os.environ.get(ENGINES[engine][1]))


def absent(engine: str, what: str, *, module: bool = False, where: str | None = None):
    """The engine's source lacks `what` (a path under its variable's folder, or under `where`):
    fail where it is required, else skip (`module`: at a test module's import, the whole module)."""
    var, require, name = ENGINES[engine]
    where = where or os.environ.get(var) or f"nowhere ({var} is unset)"
    if required(engine):
        pytest.fail(f"{require} is set but {name}'s {what} is not under {where}", pytrace=False)
    pytest.skip(f"{name}'s {what} is not on this machine ({var}: {where})", allow_module_level=module)
