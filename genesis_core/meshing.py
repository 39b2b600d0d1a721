"""Tetrahedral meshing of morphs, for the volumetric solvers (FEM, PBD volumes).

    verts, tets = tetrahedralize(morph)   # float64 (n, 3) in the world frame; int64 (m, 4)
    faces = surface_faces(tets)           # int64 (k, 3): the boundary triangles, normals pointing out
    vol = tet_volumes(verts, tets)        # float64 (m,): det([x1 - x0, x2 - x0, x3 - x0]) / 6

What every mesh returned here satisfies (tests/test_meshing.py checks each):

- every tet has a positive volume, every vertex is used by some tet, no two vertices coincide;
- the mesh is conforming: its boundary (the faces of exactly one tet) is closed, each boundary edge shared by
  exactly two boundary faces, and oriented outward;
- the same morph gives bitwise the same arrays (file meshes: through the cache, see below).

Primitives (Box, Sphere, Cylinder, Capsule) are meshed here with numpy, as structured hexahedra each split into 6
tets along its diagonal (Kuhn's split, conforming because every hex orders its axes alike across shared faces).
A box is one lattice. A sphere is an O-grid: a central cube of cells and six blocks of layers that blend the
cube's faces onto the sphere, so that every boundary vertex lies on the true surface; a cylinder is the 2-D
O-grid of its disc extruded along Z; a capsule is the sphere's O-grid cut at its equator with the cylinder's
layers inserted. The polyhedral boundary is inscribed in the curved one, so the volume falls short of the
analytic one by O(h^2) (3.3 % for a sphere at the default resolution, see docs/meshing.md). Minimum dihedral
angles measured: 45 deg for boxes of cubic cells, 24 deg or more for the curved primitives at every resolution.

Resolution: the cell size h is min(dimension) / DEFAULT_CELLS by default (maxvolume=-1); with maxvolume > 0 it
is (3 maxvolume)^(1/3), a cube of which splits into 6 tets of maxvolume / 2: a box's tets are all about
maxvolume / 2, a curved primitive's are maxvolume / 2 on average and up to ~1.9 maxvolume at the surface (so the
vertex counts are about those of Genesis World's TetGen meshes for the same maxvolume).

Mesh morphs (triangle meshes) are meshed by fTetWild through `pytetwild` (MPL-2.0, an optional
dependency: pip install "pytetwild<0.3"), after the file is scaled by `morph.scale`. fTetWild is not
repeatable from run to run, so its result is cached, keyed by the file's bytes and every option, in
$GENESIS_CORE_CACHE_DIR (default ~/.cache/genesis_core/tets) as .npz; `force_retet=True` meshes again and
rewrites the entry. A surface with holes is meshed with a warning: fTetWild keeps what its generalized winding
number puts inside; one that encloses nothing raises MeshNotWatertight.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
import warnings
import zipfile

import numpy as np

from . import morphs
from .errors import MeshNotWatertight, OptionError
from .rotations import quat_to_mat

DEFAULT_CELLS = 10  # cells across the smallest dimension at maxvolume=-1
CACHE_FORMAT = 2  # part of every cache key; bump when what is cached changes (2: pruned to a manifold boundary,
#                   with the surface's open-edge counts)

# The 4 faces of a positive tet (a, b, c, d), each ordered so that its right-hand normal points out of the tet.
_TET_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])
# Kuhn's split of a hex whose corner c has local coordinates (c & 1, c >> 1 & 1, c >> 2 & 1): one tet per
# ordering of the axes, walking from corner 0 to corner 7 along the edges.
_KUHN = np.array([[0, 1 << a, (1 << a) | (1 << b), 7] for a, b, _ in itertools.permutations(range(3))])
_CORNERS = np.array([[c & 1, c >> 1 & 1, c >> 2 & 1] for c in range(8)])


def tetrahedralize(morph) -> tuple[np.ndarray, np.ndarray]:
    """The morph as a tet mesh: vertices float64 (n, 3) in metres in the world frame (scale, then
    morph.quat, then morph.pos), tets int64 (m, 4) with positive volume. Box, Sphere, Cylinder, Capsule and
    Mesh morphs; any other raises OptionError."""
    if isinstance(morph, morphs.Box):
        verts, tets = _box(morph)
    elif isinstance(morph, morphs.Sphere):
        verts, tets = _ogrid(morph, morph.radius, 0.0, caps=True)
    elif isinstance(morph, morphs.Cylinder):
        verts, tets = _ogrid(morph, morph.radius, morph.height, caps=False)
    elif isinstance(morph, morphs.Capsule):
        verts, tets = _ogrid(morph, morph.radius, morph.height, caps=True)
    elif isinstance(morph, morphs.Mesh):
        verts, tets = _file_mesh(morph)
    else:
        raise OptionError(f"{type(morph).__name__} morphs cannot be meshed into tets: expected a Box, Sphere, "
                          "Cylinder, Capsule or Mesh morph.")
    return verts @ quat_to_mat(morph.quat).T + np.asarray(morph.pos), tets


def surface_faces(tets) -> np.ndarray:
    """The boundary triangles of a tet mesh of positive tets, int64 (k, 3): the faces that belong to exactly
    one tet, ordered so that the right-hand normal points out of the solid, in the order of their tets."""
    faces, boundary = _tet_faces(tets)
    return faces[boundary]


def _tet_faces(tets):
    """The faces of every tet [4 m, 3] (outward), and which of them are on the boundary (in one tet only)."""
    faces = np.asarray(tets, dtype=np.int64)[:, _TET_FACES].reshape(-1, 3)
    _, inverse, counts = np.unique(np.sort(faces, axis=1), axis=0, return_inverse=True, return_counts=True)
    return faces, counts[inverse.ravel()] == 1


def _edge_uses(faces):
    """The edges of triangles [k, 3], as sorted vertex pairs, and how many triangles each is on."""
    edges = np.sort(np.asarray(faces)[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    return np.unique(edges, axis=0, return_counts=True)


def mean_edge_lengths(verts, edges) -> np.ndarray:
    """[n_verts]: the mean length of the edges [E, 2] meeting at each vertex (0 for a vertex on none)."""
    verts, edges = np.asarray(verts, dtype=np.float64), np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    length = np.linalg.norm(verts[edges[:, 0]] - verts[edges[:, 1]], axis=1)
    total, count = np.zeros(len(verts)), np.zeros(len(verts))
    np.add.at(total, edges.ravel(), np.repeat(length, 2))
    np.add.at(count, edges.ravel(), 1.0)
    return total / np.maximum(count, 1.0)


def tet_volumes(verts, tets) -> np.ndarray:
    """Signed volumes, float64 (m,): det([x1 - x0, x2 - x0, x3 - x0]) / 6 (positive for a right-handed tet)."""
    x = np.asarray(verts, dtype=np.float64)[np.asarray(tets)]
    return np.linalg.det(x[:, 1:] - x[:, :1]) / 6


def dihedral_angles(verts, tets) -> np.ndarray:
    """The 6 interior dihedral angles of each tet, in degrees, float64 (m, 6) (a regular tet: 70.53 each).
    The angle at an edge is pi minus the angle between the outward normals of the two faces that share it."""
    x = np.asarray(verts, dtype=np.float64)[np.asarray(tets)][:, _TET_FACES]  # (m, 4 faces, 3 corners, 3)
    normals = np.cross(x[:, :, 1] - x[:, :, 0], x[:, :, 2] - x[:, :, 0])
    normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
    pairs = np.array(list(itertools.combinations(range(4), 2)))  # the faces opposite vertices k, l share edge i-j
    cos = np.einsum("mpi,mpi->mp", normals[:, pairs[:, 0]], normals[:, pairs[:, 1]])
    return 180.0 - np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def cache_dir() -> str:
    """Where file meshes' tets are cached: $GENESIS_CORE_CACHE_DIR, else ~/.cache/genesis_core/tets."""
    return os.environ.get("GENESIS_CORE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                       "genesis_core", "tets")


# ---- structured meshes of the primitives ------------------------------------------------------------------

def _cell_size(morph, smallest):
    """The nominal cell edge h: smallest / DEFAULT_CELLS, or for maxvolume > 0 (3 maxvolume)^(1/3), whose cube
    splits into 6 tets of maxvolume / 2 (TetGen's quality meshes under a maxvolume bound have most tets well
    below it: this gives about Genesis World's vertex counts; the measured spread is in docs/meshing.md)."""
    return (3 * morph.maxvolume) ** (1 / 3) if morph.maxvolume > 0 else smallest / DEFAULT_CELLS


def _cells(length, h):
    """How many cells of about h fit in length (at least 1; halves round up)."""
    return max(1, int(np.floor(length / h + 0.5)))


def _hex_tets(keys):
    """Conforming tets from hexes given by their corners' integer keys, int64 (n_hex, 8) in _CORNERS order:
    the unique keys become the vertices (in sorted order), each hex 6 Kuhn tets. Returns (keys, tets)."""
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, inverse.reshape(keys.shape)[:, _KUHN].reshape(-1, 4)


def _positive(verts, tets):
    """Reorder the tets whose corner order is left-handed (mirrored blocks) so that every volume is > 0."""
    flip = tet_volumes(verts, tets) < 0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]
    return verts, tets


def _box(morph):
    size = np.asarray(morph.size)
    h = _cell_size(morph, size.min())
    dims = np.array([_cells(x, h) for x in size])
    cells = np.stack(np.meshgrid(*map(np.arange, dims), indexing="ij"), -1).reshape(-1, 1, 3) + _CORNERS
    keys, tets = _hex_tets(np.ravel_multi_index(cells.transpose(2, 0, 1), dims + 1))
    ijk = np.stack(np.unravel_index(keys, dims + 1), -1)
    return _positive((ijk / dims - 0.5) * size, tets)


# The sphere's core: a cube of half-edge _CORE * radius whose shells are rounded half-way (_ROUND) towards
# spheres, so that the layers above its corners keep a thickness (0.32 radius, against 0.5 at its faces'
# centres) and the surface cells are not much larger than the core's (pi / 4 _CORE). Chosen by measuring the
# minimum dihedral angle over _CORE in 0.4..0.6 and _ROUND in 0..0.7: 25 deg here, 8 deg for a plain cube.
_CORE = 0.5
_ROUND = 0.5


def _ogrid(morph, radius, height, caps):
    """Sphere (height 0, caps), cylinder (no caps) or capsule (caps) along local Z, centred at the origin.

    Index space: an inner box of m x m x nk cells (nk = m + nz with caps, the cylinder's nz layers inserted at
    the equator), and on each of its faces (the +-Z ones only with caps) a block of `layers` cells outwards.
    A vertex is keyed by (i, j, k) on or in the inner box and its layer l. It is placed through p in [-1, 1]^3,
    the point of the unit cube that (i, j, k) stands for (p_z = 0 along the cylinder): the inner box at
    _CORE * radius * p rounded by _ROUND towards the sphere through it, the layers blending linearly from there
    to the surface point radius * p / |p|.
    """
    h = _cell_size(morph, min(2 * radius, height or np.inf))
    m = 2 * _cells(_CORE * radius, h)
    layers = _cells((1 - _CORE) * radius, h)
    nz = _cells(height, h) if height > 0 else 0
    half = m // 2 if caps else 0
    dims = np.array([m, m, nz + 2 * half])
    shape = (*(dims + 1), layers + 1)

    blocks = [np.stack(np.meshgrid(*map(np.arange, dims), [0], indexing="ij"), -1).reshape(-1, 1, 4)
              + np.pad(_CORNERS, ((0, 0), (0, 1)))]
    for axis in range(3) if caps else range(2):
        t1, t2 = [a for a in range(3) if a != axis]
        for side in (0, dims[axis]):
            u, w, l = np.meshgrid(np.arange(dims[t1]), np.arange(dims[t2]), np.arange(layers), indexing="ij")
            cell = np.zeros((u.size, 8, 4), np.int64)  # local axes: t1, t2, outwards
            cell[..., axis] = side
            cell[..., t1] = u.reshape(-1, 1) + _CORNERS[:, 0]
            cell[..., t2] = w.reshape(-1, 1) + _CORNERS[:, 1]
            cell[..., 3] = l.reshape(-1, 1) + _CORNERS[:, 2]
            blocks.append(cell)
    cells = np.concatenate(blocks)
    keys, tets = _hex_tets(np.ravel_multi_index(cells.transpose(2, 0, 1), shape))

    i, j, k, l = np.unravel_index(keys, shape)
    band = np.clip(k - half, 0, nz)  # how far up the cylinder's layers a vertex is
    p = np.stack([i, j, k - band], -1) * (2.0 / m) - 1.0
    if not caps:
        p[:, 2] = 0.0
    t = (l / layers)[:, None]
    direction = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)
    core = _CORE * radius * ((1 - _ROUND) * p + _ROUND * np.abs(p).max(axis=1, keepdims=True) * direction)
    verts = (1 - t) * core + t * radius * direction
    verts[:, 2] += (band / nz - 0.5) * height if nz else 0.0
    return _positive(verts, tets)


# ---- file meshes: fTetWild and the cache -------------------------------------------------------------------

def _file_mesh(morph):
    """The file's tets in its own frame, scaled; through the cache."""
    with open(morph.file, "rb") as fh:
        content = hashlib.sha256(fh.read()).hexdigest()
    options = {name: getattr(morph, name) for name in
               ("scale", "order", "mindihedral", "minratio", "nobisect", "quality", "maxvolume")}
    key = json.dumps({"format": CACHE_FORMAT, "file_sha256": content, "mesher": _mesher_version(), **options},
                     sort_keys=True)
    path = os.path.join(cache_dir(), hashlib.sha256(key.encode()).hexdigest() + ".npz")
    if not morph.force_retet:
        cached = _load(path)
        if cached is not None:
            _warn_open(morph, cached[2])
            return cached[:2]

    from .mesh_files import read_mesh

    mesh = read_mesh(morph.file)  # merges coincident vertices, so seams are not open
    _, uses = _edge_uses(mesh.faces)
    if len(mesh.faces) == 0:
        raise MeshNotWatertight(f"Mesh.file={morph.file!r} has no faces: there is no surface to fill with tets.")
    surface = np.array([np.sum(uses == 1), np.sum(uses > 2), len(uses)], dtype=np.int64)
    vertices = np.asarray(mesh.vertices, np.float64) * morph.scale
    _warn_open(morph, surface)
    _check_volume(vertices, morph)
    verts, tets = _run_mesher(vertices, np.asarray(mesh.faces), morph)
    if len(tets) == 0:
        raise MeshNotWatertight(
            f"Mesh.file={morph.file!r} encloses no volume: the mesher found no tet inside its surface "
            f"({surface[0]} open edges of {surface[2]}). Tets need a surface around a volume.")
    verts, tets = _positive(*_compact(verts, _manifold(tets, f"Mesh.file={morph.file!r}")))
    _save(path, verts, tets, surface)
    return verts, tets


MIN_MESH_EXTENT = 1e-5  # m: the smallest bounding box a surface handed to the mesher may have


def _check_volume(vertices, morph):
    """Refuse (MeshNotWatertight, before the mesher: fTetWild crashes the process on such input) a surface whose
    vertices span no volume: fewer than 4, all on a plane or a line (the smallest principal extent under 1e-6 of
    the largest), or a bounding box under MIN_MESH_EXTENT."""
    extent = float(np.ptp(vertices, axis=0).max()) if len(vertices) else 0.0
    spread = np.linalg.svd(vertices - vertices.mean(axis=0), compute_uv=False) if len(vertices) >= 4 else np.zeros(3)
    if extent < MIN_MESH_EXTENT or spread[2] <= 1e-6 * spread[0]:
        raise MeshNotWatertight(f"Mesh.file={morph.file!r} (scale {morph.scale:g}) spans no volume: {len(vertices)} "
                                f"vertices, a bounding box of {extent:.3g} m (at least {MIN_MESH_EXTENT:g} m), "
                                "flat or on a line. Tets need a surface around a volume.")


def _warn_open(morph, surface):
    """Warn (each time the mesh is used, from the cache too) when the surface was not closed: surface holds its
    counts of open edges, of edges on more than two faces, and of edges."""
    n_open, n_multi, n_edges = (int(x) for x in surface)
    if n_open or n_multi:
        warnings.warn(
            f"Mesh.file={morph.file!r} is not a closed surface: {n_open} open edges (on one face only) and "
            f"{n_multi} edges on more than two faces, of {n_edges}. fTetWild fills the volume its generalized "
            "winding number puts inside, as if the holes were closed; check the result, or close the surface "
            "first (for instance trimesh's fill_holes, or a remesher).", stacklevel=5)


def _import_pytetwild():
    try:
        import pytetwild
    except ImportError as e:
        raise OptionError(
            "Meshing a Mesh morph into tets needs fTetWild: pip install 'pytetwild<0.3' (or genesis-core[mesh]); "
            f"pytetwild 0.3 and later also need pyvista. The import failed with: {e}") from e
    return pytetwild


def _mesher_version():
    return "pytetwild " + getattr(_import_pytetwild(), "__version__", "unknown")


def _run_mesher(verts, faces, morph):
    """fTetWild (Hu et al. 2020). Its resolution is an ideal edge length: for maxvolume > 0 the edge of the
    regular tet of volume maxvolume / 2, (3 sqrt(2) maxvolume)^(1/3), as the primitives' cells hold tets of
    maxvolume / 2 (measured: the mean tet is then about maxvolume / 2, the largest about 1.7 maxvolume); else
    fTetWild's default, 1/20 of the bounding box's diagonal. quality=False skips its shape optimisation."""
    pytetwild = _import_pytetwild()
    edge = (3 * np.sqrt(2) * morph.maxvolume) ** (1 / 3) if morph.maxvolume > 0 else None
    # fTetWild writes a scratch file (__tracked_surface.stl) into the working directory: run it in a temporary one
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="genesis-core-tetwild-") as scratch:
        os.chdir(scratch)
        try:
            verts, tets = pytetwild.tetrahedralize(verts, faces.astype(np.int32), edge_length_abs=edge,
                                                   optimize=morph.quality, quiet=morph.verbose == 0,
                                                   loglevel=max(0, 4 - morph.verbose))
        finally:
            os.chdir(here)
    return np.asarray(verts, np.float64), np.asarray(tets, np.int64)


MAX_PRUNED = 0.01  # the largest fraction of a mesher's tets _manifold may drop


def _manifold(tets, where):
    """The tets without those that make the boundary non-manifold. fTetWild now and then leaves two tets that
    meet along an edge only (measured: once in three runs on a box with a missing face), so that the edge lies on
    four boundary faces. Each round drops the tets that hold such an edge and have a boundary face, until every
    boundary edge is on two faces; more than MAX_PRUNED of the tets dropped raises."""
    tets = np.asarray(tets, dtype=np.int64)
    n0 = len(tets)
    while len(tets):
        faces, boundary = _tet_faces(tets)
        keys, uses = _edge_uses(faces[boundary])
        bad = keys[uses != 2]
        if not len(bad):
            break
        on_boundary = boundary.reshape(-1, 4).any(axis=1)
        n = int(tets.max()) + 1
        tet_edges = np.sort(tets[:, [0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3]].reshape(-1, 6, 2), axis=2)
        holds = np.isin(tet_edges[..., 0] * n + tet_edges[..., 1], bad[:, 0] * n + bad[:, 1]).any(axis=1)
        if not (holds & on_boundary).any():  # (nothing to drop: another round would find the same edges)
            tets = tets[:0]
            break
        tets = tets[~(holds & on_boundary)]
        if n0 - len(tets) > MAX_PRUNED * n0:
            break
    if not len(tets) or n0 - len(tets) > MAX_PRUNED * n0:
        raise MeshNotWatertight(f"{where}: the mesher's tets do not bound a closed surface (edges on more than "
                                "two boundary faces, which dropping 1 % of the tets did not mend).")
    return tets


def _compact(verts, tets):
    """Drop the vertices no tet uses."""
    used, tets = np.unique(tets, return_inverse=True)
    return verts[used], tets.reshape(-1, 4)


def _load(path):
    """The cached (verts, tets, surface counts), or None if absent or unreadable (then it is meshed again and
    rewritten)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            verts, tets, surface = z["verts"], z["tets"], z["surface"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    ok = (verts.dtype == np.float64 and verts.ndim == 2 and verts.shape[1] == 3 and tets.dtype == np.int64
          and tets.ndim == 2 and tets.shape[1] == 4 and tets.size > 0 and tets.min() >= 0
          and tets.max() < len(verts) and surface.dtype == np.int64 and surface.shape == (3,))
    return (verts, tets, surface) if ok else None


def _save(path, verts, tets, surface):
    """Write atomically (a temporary file renamed), so that a concurrent reader never sees half a file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, verts=verts, tets=tets, surface=surface)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
