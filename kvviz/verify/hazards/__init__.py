"""The hazards verify can act out, one module each (kvviz.verify.hazards.base.Hazard).

Every module of this package that defines `HAZARD` (a Hazard subclass) is one; `HAZARDS` lists
their names in their `order`. docs/hazards.md explains each incident and how to add one.
"""

from __future__ import annotations

import importlib
import pkgutil

from ...errors import KvvizError
from .base import Hazard


def _discover() -> dict[str, type[Hazard]]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
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


__all__ = ["HAZARDS", "REGISTRY", "Hazard", "hazard_class"]
