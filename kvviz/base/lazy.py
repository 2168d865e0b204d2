"""Lazy re-exports for a package `__init__` (PEP 562): each public name is imported from the submodule
that defines it on first use, so importing one light submodule of a package loads nothing heavy."""

from __future__ import annotations

import importlib
import sys
import types


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


class CallablePackage(types.ModuleType):
    """A package that is also a function: calling it calls the function `callable_package` gave it, so one
    name is both (`kvviz.replay(plan, ...)` and `kvviz.replay.chat`)."""

    def __call__(self, *args, **kwargs):
        return vars(self)["__call_target__"](*args, **kwargs)


def callable_package(package: str, function) -> None:
    """Make the imported module `package` callable: calling it calls `function` (a package `__init__` may only
    re-export, so it asks this instead of defining the class itself)."""
    module = sys.modules[package]
    module.__call_target__ = function
    module.__class__ = CallablePackage
