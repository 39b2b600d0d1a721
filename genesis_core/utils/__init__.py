"""Helpers Genesis World scripts import from `genesis.utils`: `genesis_core.utils.geom` (quaternions, rotation
matrices, Euler angles and rigid transforms on torch tensors and NumPy arrays) and `genesis_core.utils.misc`
(tensor_to_array), `genesis_core.utils.terrain` (mesh_to_heightfield)."""

from . import geom, misc, terrain

__all__ = ["geom", "misc", "terrain"]
