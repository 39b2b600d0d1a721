"""The kinds of collision geometry, one enumeration for every solver and coupling (ColliderView.geom_type, the
rigid solver's model, the particle kit's signed distances). Kernels compare the plain ints below."""

import enum


class GeomKind(enum.IntEnum):
    PLANE = 0  # the local plane z = 0, outward normal +Z
    SPHERE = 1  # size (radius, -, -)
    CAPSULE = 2  # size (radius, half-length of the segment, -), along local Z
    BOX = 3  # size (half-extents)
    CYLINDER = 4  # size (radius, half-height, -), along local Z
    MESH = 5  # a convex mesh (a decomposed mesh is several), its hull in ColliderView's hull arrays
    ELLIPSOID = 6  # size (the semi-axes along local X, Y, Z)
    HFIELD = 7  # a height field (genesis_core.terrain): size (cell size along local X, along Y, vertices per row ny);
    # its heights (metres) are rows of the hull arrays, row-major over the nx x ny grid, vertex (i, j) at local
    # (i * size[0], j * size[1], height)


PLANE, SPHERE, CAPSULE, BOX, CYLINDER, MESH, ELLIPSOID, HFIELD = (int(k) for k in GeomKind)
