"""Helpers Genesis World scripts import from `genesis.utils`: `genesis_core.utils.geom` (quaternions, rotation
matrices, Euler angles and rigid transforms on torch tensors and NumPy arrays)."""

from . import geom

__all__ = ["geom"]
