"""`gs.force_fields`: Genesis World's force fields (acceleration fields) for `scene.add_force_field(ff)`:
`Constant`, `Wind`, `Point`, `Drag`, `Noise`, `Vortex`, `Turbulence`, `Custom` (docs/force-fields.md). They act on
every particle solver's particles and on the rigid links, per environment; their state lives in
genesis_core.force_fields.manager."""

from .fields import Constant, Custom, Drag, ForceField, Noise, Point, Turbulence, Vortex, Wind
from .manager import ForceFieldManager

__all__ = ["Constant", "Custom", "Drag", "ForceField", "ForceFieldManager", "Noise", "Point", "Turbulence", "Vortex",
           "Wind"]
