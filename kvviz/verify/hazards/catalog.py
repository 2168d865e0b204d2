"""The hazards verify can act out, one module each (kvviz.verify.hazards.base.Hazard).

Every module of this package that defines `HAZARD` (a Hazard subclass) is one; `HAZARDS` lists
their names in their `order`. docs/hazards.md explains each incident and how to add one.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from kvviz.base.errors import KvvizError
from kvviz.verify.hazards.base import Hazard


def _discover() -> dict[str, type[Hazard]]:
    found = []
    package = __name__.rpartition(".")[0]
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{package}.{info.name}")
        cls = getattr(module, "HAZARD", None)
        if cls is not None:
            found.append(cls)
    return {c.name: c for c in sorted(found, key=lambda c: (c.order, c.name))}


REGISTRY: dict[str, type[Hazard]] = _discover()
HAZARDS: tuple[str, ...] = tuple(REGISTRY)


def hazard_class(name: str) -> type[Hazard]:
    """The Hazard subclass called `name`; KvvizError naming hazard= and the choices otherwise."""
    cls = REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise KvvizError(f"hazard={name!r}: unknown; choose one of {', '.join(HAZARDS)}")
    return cls
