"""The base classes of what plugins contribute through the registry: `Options` and `Material`.

A leaf module: it imports nothing from genesis_core, so that both the modules that expose these classes
(`genesis_core.options`, `genesis_core.materials`, whose missing names are looked up in the plugin registry) and
the plugin manager (which checks every registration against them) can import it at module level without an
import cycle. Users and plugins reach the classes as `gs.options.Options` and `gs.materials.Material`.

(The solver base, `gs.SolverBase`, lives in `genesis_core.solver`: the manager checks a registered solver by the
members of the `gs.Solver` protocol, not by its base class, so it needs no import of it.)
"""

from __future__ import annotations

import attrs


def _plain(x):
    return list(x) if isinstance(x, tuple) else x


@attrs.define(frozen=True, kw_only=True)
class Options:
    """Base of every options class. Plugins subclass it with `attrs.define(frozen=True, kw_only=True)`."""

    def as_dict(self) -> dict:
        """The option values as plain Python data (used to check that a checkpoint fits a scene)."""
        return attrs.asdict(self, recurse=True, value_serializer=lambda _i, _a, x: _plain(x))


@attrs.define(frozen=True, kw_only=True)
class Material:
    """Base of every material.

    Subclasses set the class attribute `solver` to the class name of the solver that simulates them
    (for instance ``"RigidSolver"``); `scene.add_entity` routes the entity by it. A plugin registers a material
    class, or a namespace class holding several (``MPM`` with ``MPM.Elastic``); the registry refuses any that
    does not derive from this class or does not name its solver.
    """

    solver = None  # class attribute, set by subclasses

    def as_dict(self) -> dict:
        d = {k: _plain(x) for k, x in attrs.asdict(self).items()}
        d["type"] = type(self).__qualname__
        return d


class Inert:
    """What a Genesis World script passes for rendering (`gs.surfaces.*`, `gs.options.VisOptions`, ...): the
    arguments are kept (`self.options`) so that the script runs unchanged. Only what genesis-core draws reads
    them: the cameras take a surface's `color` (genesis_core.render.view.entity_color) and, for rigid entities, its
    `vis_mode` (visual or collision geometry); the other arguments have no effect."""

    namespace = "gs"

    def __init__(self, **options):
        self.options = dict(options)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{self.namespace}.{type(self).__name__}({args})"


__all__ = ["Inert", "Material", "Options"]
