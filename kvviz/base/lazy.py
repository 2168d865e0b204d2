"""Lazy re-exports for a package `__init__` (PEP 562): each public name is imported from the submodule
that defines it on first use, so importing one light submodule of a package loads nothing heavy."""

from __future__ import annotations

import importlib


def lazy_exports(package: str, names: dict[str, str]):
    """`__getattr__` and `__dir__` for `package`, whose public `names` map to the submodule defining each."""

    def __getattr__(name: str):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(set(names) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__
