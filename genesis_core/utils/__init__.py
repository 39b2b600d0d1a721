"""Helpers Genesis World scripts import from `genesis.utils`: `genesis_core.utils.geom` (quaternions, rotation
matrices, Euler angles and rigid transforms on torch tensors and NumPy arrays) and `genesis_core.utils.misc`
(tensor_to_array)."""

from . import geom, misc

__all__ = ["geom", "misc"]
