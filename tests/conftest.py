"""Shared fixtures (the hybrid presets) and the `cuda` marker for every test that needs a CUDA device.

`pytest -m cuda tests/` runs exactly these (scripts/gpu_check.sh does, on a GPU machine). Tests
may carry the marker themselves (tests/test_parity.py); tests parametrized with a "cuda" device
(tests/test_pool.py's DEVICES) or with "cuda" in their name (tests/test_verify.py's
test_on_cuda; not "without_cuda", a test for machines without one) get it here, so no CUDA case
is left out of that run. Without CUDA they skip as they already do.
"""

from __future__ import annotations

import pytest

from kvviz.families import load_preset as load_model


def _on_cuda(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(str(v).startswith("cuda") for v in params.values() if isinstance(v, str) or type(v).__name__ == "device"):
        return True
    name = getattr(item, "originalname", item.name)
    return "cuda" in name and "without_cuda" not in name


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _on_cuda(item) and not item.get_closest_marker("cuda"):
            item.add_marker(pytest.mark.cuda)


# The hybrid presets, parsed once per test session (each goes through transformers).
@pytest.fixture(scope="session")
def qwen():
    return load_model("qwen3-next-80b-a3b")


@pytest.fixture(scope="session")
def gpt_oss():
    return load_model("gpt-oss-120b")


@pytest.fixture(scope="session")
def gemma():
    return load_model("gemma-3-27b")


@pytest.fixture(scope="session")
def scout():
    return load_model("llama-4-scout")
