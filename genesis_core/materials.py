"""Materials. A material picks the solver that simulates an entity and carries its physical parameters.

The core defines only the base class; each plugin contributes its materials (`gs.materials.Rigid`,
`gs.materials.MPM.Elastic`, ...). Asking for a material whose plugin is not installed raises an error that names
the distribution to install.
"""

from __future__ import annotations

from .bases import Material
from .plugins.manager import plugin_namespace

__all__ = ["Material"]
__getattr__, __dir__ = plugin_namespace("materials", globals())
