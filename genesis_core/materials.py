"""Materials. A material picks the solver that simulates an entity and carries its physical parameters.

The core defines only the base class; each plugin contributes its materials (`gs.materials.Rigid`,
`gs.materials.MPM.Elastic`, ...). Asking for a material whose plugin is not installed raises an error that names
the distribution to install.
"""

from __future__ import annotations

import attrs

from .plugins.manager import plugin_namespace


@attrs.define(frozen=True, kw_only=True)
class Material:
    """Base of every material.

    Subclasses set the class attribute `solver` to the class name of the solver that simulates them
    (for instance ``"RigidSolver"``); `scene.add_entity` routes the entity by it.
    """

    solver = None  # class attribute, set by subclasses

    def as_dict(self) -> dict:
        d = {k: (list(x) if isinstance(x, tuple) else x) for k, x in attrs.asdict(self).items()}
        d["type"] = type(self).__qualname__
        return d


__getattr__, __dir__ = plugin_namespace("materials", globals())
