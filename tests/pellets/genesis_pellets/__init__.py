"""genesis-pellets: point particles under gravity that collide with every collider through the particle kit's
coupling. The smallest particle plugin: plugin.py (hooks), solver.py, options.py, materials.py, kernels.py."""

from .materials import Pellet
from .options import PelletOptions
from .solver import PelletEntity, PelletSolver

__all__ = ["Pellet", "PelletEntity", "PelletOptions", "PelletSolver"]
