"""The hazards verify can act out, one module each (kvviz.verify.hazards.base.Hazard).

Every module of this package that defines `HAZARD` (a Hazard subclass) is one; `HAZARDS` lists
their names in their `order` (`catalog` finds them). docs/hazards.md explains each incident and how
to add one.
"""

from kvviz.verify.hazards.base import Hazard
from kvviz.verify.hazards.catalog import HAZARDS, REGISTRY, hazard_class

__all__ = ["HAZARDS", "REGISTRY", "Hazard", "hazard_class"]
