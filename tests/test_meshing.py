"""Tetrahedral meshing (genesis_core.meshing): the guarantees of its docstring, checked on every primitive and on
closed surface meshes.

Validity of a mesh (`check_mesh`): every tet has a positive volume and a minimum dihedral angle above a bound
(45 deg for boxes of cubic cells: Kuhn's split of a cube; 20 deg for the curved primitives, whose measured
minimum is 24 deg at every resolution; 10 deg for fTetWild, whose measured minimum is ~18 deg); every vertex is
used, none twice; the boundary is closed (each boundary edge on exactly two boundary faces) and outward (the
signed volumes of the cones from the origin to the boundary faces add up to the tets' volume, to rounding).

Volume: a box's tets fill it exactly; the curved primitives' boundary is a polyhedron inscribed in the true
surface, so their volume falls short by O(h^2): within 4 % at the default resolution (measured: sphere -3.3 %,
capsule -2.1 %, cylinder -1.3 %), and halving h divides the error by about 4.
"""

import sys
import time

import attrs
import numpy as np
import pytest
import trimesh
from hypothesis import given
from hypothesis import strategies as st

import genesis_core as gs
from genesis_core import meshing
from genesis_core.errors import MeshNotWatertight, OptionError
from genesis_core.meshing import dihedral_angles, surface_faces, tet_volumes, tetrahedralize
from genesis_core.rotations import quat_to_mat

PI = np.pi


def exact_volume(morph):
    if isinstance(morph, gs.morphs.Box):
        return float(np.prod(morph.size))
    if isinstance(morph, gs.morphs.Sphere):
        return 4 / 3 * PI * morph.radius ** 3
    if isinstance(morph, gs.morphs.Cylinder):
        return PI * morph.radius ** 2 * morph.height
    return PI * morph.radius ** 2 * morph.height + 4 / 3 * PI * morph.radius ** 3


def check_mesh(verts, tets, min_dihedral):
    """The validity every mesh of genesis_core.meshing has (module docstring); returns the boundary faces."""
    assert verts.dtype == np.float64 and verts.ndim == 2 and verts.shape[1] == 3
    assert tets.dtype == np.int64 and tets.ndim == 2 and tets.shape[1] == 4 and len(tets) > 0
    vol = tet_volumes(verts, tets)
    assert vol.min() > 0
    assert dihedral_angles(verts, tets).min() > min_dihedral
    assert np.array_equal(np.unique(tets), np.arange(len(verts))), "every vertex used by some tet"
    assert len(np.unique(verts, axis=0)) == len(verts), "no duplicate vertices"
    faces = surface_faces(tets)
    edges = np.sort(faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    assert np.all(np.unique(edges, axis=0, return_counts=True)[1] == 2), "closed: each edge on two faces"
    x = verts[faces]
    cones = np.einsum("fi,fi->f", x[:, 0], np.cross(x[:, 1], x[:, 2])) / 6
    assert cones.sum() == pytest.approx(vol.sum(), rel=1e-9), "outward: the boundary encloses the tets' volume"
    return faces


PRIMITIVES = {
    "cube": gs.morphs.Box(size=(0.1, 0.1, 0.1)),
    "slab": gs.morphs.Box(size=(0.3, 0.2, 0.05), pos=(1, 0, 0.5), euler=(10, 20, 30)),
    "sphere": gs.morphs.Sphere(radius=0.1, pos=(0, 0, 0.5)),
    "cylinder": gs.morphs.Cylinder(radius=0.05, height=0.2),
    "disc": gs.morphs.Cylinder(radius=0.1, height=0.05, euler=(90, 0, 0)),
    "capsule": gs.morphs.Capsule(radius=0.05, height=0.1, pos=(0.2, -0.1, 0.3), quat=(0.5, 0.5, 0.5, 0.5)),
}


@pytest.mark.parametrize("name", PRIMITIVES)
def test_primitive_mesh_is_valid_and_holds_the_analytic_volume(name):
    morph = PRIMITIVES[name]
    verts, tets = tetrahedralize(morph)
    check_mesh(verts, tets, 44.99 if name == "cube" else 20)
    error = tet_volumes(verts, tets).sum() / exact_volume(morph) - 1
    assert abs(error) < (1e-12 if isinstance(morph, gs.morphs.Box) else 0.04)
    assert error <= 1e-12, "the boundary is inscribed in the true surface"


@pytest.mark.parametrize("name", ["sphere", "disc", "capsule"])
def test_curved_boundary_vertices_lie_on_the_true_surface(name):
    """Local frame (the pose undone): sphere |x| = r; cylinder r_xy = r or |z| = h / 2; capsule: distance r from
    its axis segment."""
    morph = PRIMITIVES[name]
    verts, tets = tetrahedralize(morph)
    local = (verts - np.asarray(morph.pos)) @ quat_to_mat(morph.quat)
    x = local[np.unique(surface_faces(tets))]
    r = morph.radius
    if name == "sphere":
        np.testing.assert_allclose(np.linalg.norm(x, axis=1), r, rtol=1e-12)
    elif name == "disc":
        on_side = np.isclose(np.hypot(x[:, 0], x[:, 1]), r, rtol=1e-12)
        on_cap = np.isclose(np.abs(x[:, 2]), morph.height / 2, rtol=1e-12)
        assert np.all(on_side | on_cap) and on_side.any() and on_cap.any()
    else:
        axis_point = np.clip(x[:, 2], -morph.height / 2, morph.height / 2)
        np.testing.assert_allclose(np.linalg.norm(x - np.c_[0 * x[:, :2], axis_point], axis=1), r, rtol=1e-12)


@pytest.mark.parametrize("name", ["sphere", "cylinder", "capsule"])
def test_volume_error_converges_as_h_squared(name):
    """Cells of h = radius / 4, / 8, / 16 (maxvolume = h^3 / 3, so that every cell count is exact): the inscribed
    boundary's error falls by about 4 each time h halves."""
    base = PRIMITIVES[name]
    errors = []
    for cells_per_radius in (4, 8, 16):
        verts, tets = tetrahedralize(attrs.evolve(base, maxvolume=(base.radius / cells_per_radius) ** 3 / 3))
        errors.append(1 - tet_volumes(verts, tets).sum() / exact_volume(base))
    assert all(e > 0 for e in errors)
    assert errors[0] / errors[1] > 3 and errors[1] / errors[2] > 3, errors
    assert errors[2] < 0.006


def test_genesis_sphere_resolution_matches_genesis_world():
    """Genesis World meshes Sphere(radius=0.1, maxvolume=2e-7) with TetGen to about 6,000 vertices. Here each
    cell holds tets of maxvolume / 2: the mean tet is maxvolume / 2, the largest (mid-patch on the surface) ~1.9
    maxvolume; vertex count within 30 % of Genesis World's."""
    verts, tets = tetrahedralize(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.1, maxvolume=2e-7))
    vol = tet_volumes(verts, tets)
    print(f"Sphere(radius=0.1, maxvolume=2e-7): {len(verts)} vertices, {len(tets)} tets, "
          f"min dihedral {dihedral_angles(verts, tets).min():.1f} deg, largest tet {vol.max():.2e} m^3")
    assert 0.7 * 6000 < len(verts) < 1.3 * 6000
    assert vol.mean() < 2e-7 and vol.max() < 2 * 2e-7


def test_box_maxvolume_bounds_every_tet():
    verts, tets = tetrahedralize(gs.morphs.Box(size=(0.1, 0.2, 0.3), maxvolume=1e-6))
    vol = tet_volumes(verts, tets)
    assert vol.max() < 1e-6 and vol.max() == pytest.approx(vol.min())


def test_default_resolution_is_ten_cells_across_the_smallest_dimension():
    verts, _ = tetrahedralize(gs.morphs.Box(size=(0.1, 0.2, 0.05)))
    assert len(verts) == 21 * 41 * 11
    verts, _ = tetrahedralize(gs.morphs.Box(size=(0.1, 0.1, 0.1)))
    assert len(verts) == 11 ** 3


def test_pose_is_applied_to_the_local_mesh():
    local = gs.morphs.Capsule(radius=0.05, height=0.1)
    moved = attrs.evolve(local, pos=(1.0, -2.0, 0.5), quat=None, euler=(30.0, -40.0, 75.0))
    v0, t0 = tetrahedralize(local)
    v1, t1 = tetrahedralize(moved)
    assert np.array_equal(t0, t1)
    np.testing.assert_allclose(v1, v0 @ quat_to_mat(moved.quat).T + np.array(moved.pos), atol=1e-15)
    np.testing.assert_allclose(tet_volumes(v1, t1), tet_volumes(v0, t0), rtol=1e-9)


@pytest.mark.parametrize("name", PRIMITIVES)
def test_same_morph_gives_bitwise_same_arrays(name):
    (v0, t0), (v1, t1) = tetrahedralize(PRIMITIVES[name]), tetrahedralize(PRIMITIVES[name])
    assert v0.tobytes() == v1.tobytes() and t0.tobytes() == t1.tobytes()


def test_a_hundred_thousand_tets_take_well_under_a_second():
    morph = gs.morphs.Sphere(radius=0.1, maxvolume=6e-8)
    tetrahedralize(morph)
    start = time.perf_counter()
    _, tets = tetrahedralize(morph)
    elapsed = time.perf_counter() - start
    assert len(tets) > 100_000
    assert elapsed < 1.0, f"{len(tets)} tets in {elapsed:.2f} s"  # measured ~0.1 s (the machine may be busy)


@given(shape=st.sampled_from(["box", "sphere", "cylinder", "capsule"]),
       a=st.floats(0.01, 2.0), ratio=st.floats(0.25, 4.0), ratio2=st.floats(0.25, 4.0))
def test_property_every_primitive_mesh_is_valid(shape, a, ratio, ratio2):
    """Over physically valid sizes (aspect ratios 1:4 to 4:1) at the default resolution."""
    morph = {"box": lambda: gs.morphs.Box(size=(a, a * ratio, a * ratio2)),
             "sphere": lambda: gs.morphs.Sphere(radius=a),
             "cylinder": lambda: gs.morphs.Cylinder(radius=a, height=2 * a * ratio),
             "capsule": lambda: gs.morphs.Capsule(radius=a, height=2 * a * ratio)}[shape]()
    verts, tets = tetrahedralize(morph)
    check_mesh(verts, tets, 20)
    assert tet_volumes(verts, tets).sum() / exact_volume(morph) - 1 == pytest.approx(0, abs=0.04)


def test_surface_faces_and_volumes_of_two_tets():
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], float)
    tets = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    np.testing.assert_allclose(tet_volumes(verts, tets), [1 / 6, 1 / 3])
    faces = surface_faces(tets)
    assert faces.dtype == np.int64 and faces.shape == (6, 3)
    assert not any(sorted(f) == [1, 2, 3] for f in faces.tolist()), "the shared face is interior"
    np.testing.assert_allclose(np.sort(dihedral_angles(verts, tets[:1])[0]),
                               [np.degrees(np.arccos(1 / np.sqrt(3)))] * 3 + [90] * 3)


# ---- options --------------------------------------------------------------------------------------------------

def test_morphs_carry_genesis_tet_options_with_genesis_defaults():
    for morph in (gs.morphs.Box(), gs.morphs.Sphere(), gs.morphs.Cylinder(), gs.morphs.Capsule()):
        assert (morph.order, morph.mindihedral, morph.minratio, morph.nobisect, morph.quality, morph.maxvolume,
                morph.verbose, morph.force_retet) == (1, 10, 1.1, True, True, -1.0, 0, False)
        assert morph.as_dict()["maxvolume"] == -1.0


@pytest.mark.parametrize("kwargs, field", [
    (dict(order=2), "order=2"), (dict(maxvolume=0), "maxvolume=0"), (dict(maxvolume=-2.0), "maxvolume=-2.0"),
    (dict(mindihedral=90), "mindihedral=90"), (dict(minratio=0.5), "minratio=0.5"),
    (dict(verbose=-1), "verbose=-1"), (dict(quality=1), "quality=1"), (dict(force_retet="yes"), "force_retet")])
def test_tet_options_are_validated(kwargs, field):
    with pytest.raises(OptionError, match=f"Sphere.{field}"):
        gs.morphs.Sphere(**kwargs)


def test_quadratic_tets_are_refused_with_the_reason():
    with pytest.raises(OptionError, match="linear"):
        gs.morphs.Box(order=2)


def test_a_plane_cannot_be_meshed():
    with pytest.raises(OptionError, match="Plane"):
        tetrahedralize(gs.morphs.Plane())


# ---- surface meshes, through the cache ------------------------------------------------------------------------

@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("GENESIS_CORE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def fake_mesher(monkeypatch):
    """Stands in for fTetWild where a test checks the cache, not the mesher: the tets of the file's bounding
    box, counting its calls."""
    calls = []

    def run(verts, faces, morph):
        calls.append(morph)
        lo, hi = verts.min(0), verts.max(0)
        v, t = tetrahedralize(gs.morphs.Box(size=tuple(hi - lo), maxvolume=1e-3 * np.prod(hi - lo)))
        return v + (lo + hi) / 2, t

    monkeypatch.setattr(meshing, "_run_mesher", run)
    monkeypatch.setattr(meshing, "_mesher_version", lambda: "fake 1")
    return calls


def write_box(path, extents=(1.0, 2.0, 3.0)):
    trimesh.creation.box(extents=extents).export(path)
    return str(path)


def test_open_mesh_is_meshed_with_a_warning_naming_the_file_and_its_open_edges(tmp_path, cache, fake_mesher):
    box = trimesh.creation.box()
    open_box = trimesh.Trimesh(box.vertices, box.faces[1:], process=False)
    path = str(tmp_path / "open_box.stl")
    open_box.export(path)
    with pytest.warns(UserWarning, match=r"open_box\.stl.*not a closed surface: 3 open edges"):
        verts, tets = tetrahedralize(gs.morphs.Mesh(file=path))
    check_mesh(verts, tets, 10)
    assert len(fake_mesher) == 1 and issubclass(MeshNotWatertight, OptionError)
    with pytest.warns(UserWarning, match="3 open edges"):  # from the cache too
        v2, t2 = tetrahedralize(gs.morphs.Mesh(file=path))
    assert len(fake_mesher) == 1 and v2.tobytes() == verts.tobytes() and t2.tobytes() == tets.tobytes()


def test_a_surface_enclosing_nothing_is_refused(tmp_path, cache, monkeypatch):
    """A mesher that finds no tet inside (fTetWild in an open tent of two triangles returns none) gives
    MeshNotWatertight, naming the file, and nothing is cached. A flat sheet is refused before the mesher sees it
    (fTetWild crashed the process on flat and degenerate surfaces)."""
    tent = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [0.5, 1, 0.5], [0.5, -1, 0.5]], [[0, 1, 2], [1, 0, 3]], process=False)
    path = str(tmp_path / "tent.stl")
    tent.export(path)
    monkeypatch.setattr(meshing, "_run_mesher", lambda v, f, m: (np.zeros((0, 3)), np.zeros((0, 4), np.int64)))
    monkeypatch.setattr(meshing, "_mesher_version", lambda: "fake 1")
    with pytest.warns(UserWarning, match="4 open edges"), \
            pytest.raises(MeshNotWatertight, match=r"tent\.stl.*encloses no volume"):
        tetrahedralize(gs.morphs.Mesh(file=path))
    assert not cache.exists() or not any(cache.iterdir())

    def never(v, f, m):
        raise AssertionError("the mesher was handed a surface with no volume")

    monkeypatch.setattr(meshing, "_run_mesher", never)
    sheet = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], [[0, 1, 2], [0, 2, 3]], process=False)
    for name, vertices in (("sheet", sheet.vertices), ("line", [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]),
                           ("speck", np.asarray(sheet.vertices) * 1e-6 + [[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 1e-6]])):
        path = str(tmp_path / f"{name}.stl")
        trimesh.Trimesh(vertices, [[0, 1, 2], [0, 2, 3]], process=False).export(path)
        with pytest.warns(UserWarning, match="open edges"), \
                pytest.raises(MeshNotWatertight, match=rf"{name}\.stl.*spans no volume"):
            tetrahedralize(gs.morphs.Mesh(file=path))


def test_missing_pytetwild_names_the_install(tmp_path, cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "pytetwild", None)  # `import pytetwild` now raises ImportError
    with pytest.raises(OptionError, match="pip install 'pytetwild<0.3'"):
        tetrahedralize(gs.morphs.Mesh(file=write_box(tmp_path / "box.obj")))


def test_cache_hit_applies_the_pose_after_loading(tmp_path, cache, fake_mesher):
    path = write_box(tmp_path / "box.obj")
    v0, t0 = tetrahedralize(gs.morphs.Mesh(file=path, scale=0.1))
    assert len(fake_mesher) == 1 and len(list(cache.glob("*.npz"))) == 1
    moved = gs.morphs.Mesh(file=path, scale=0.1, pos=(0.0, 0.0, 1.0), euler=(0, 0, 90))
    v1, t1 = tetrahedralize(moved)
    assert len(fake_mesher) == 1, "a moved morph hits the cache"
    assert np.array_equal(t0, t1)
    np.testing.assert_allclose(v1, v0 @ quat_to_mat(moved.quat).T + np.array(moved.pos), atol=1e-15)
    with np.load(next(cache.glob("*.npz")), allow_pickle=False) as z:
        assert sorted(z.files) == ["surface", "tets", "verts"] and z["surface"].tolist() == [0, 0, 18]


def test_cache_key_covers_content_scale_and_options(tmp_path, cache, fake_mesher):
    path = write_box(tmp_path / "box.obj")
    tetrahedralize(gs.morphs.Mesh(file=path))
    tetrahedralize(gs.morphs.Mesh(file=path, scale=2.0))
    tetrahedralize(gs.morphs.Mesh(file=path, maxvolume=1e-2))
    tetrahedralize(gs.morphs.Mesh(file=path, quality=False))
    write_box(path, extents=(1.0, 1.0, 1.0))
    tetrahedralize(gs.morphs.Mesh(file=path))
    assert len(fake_mesher) == 5 and len(list(cache.glob("*.npz"))) == 5


def test_force_retet_bypasses_and_rewrites_the_cache(tmp_path, cache, fake_mesher):
    path = write_box(tmp_path / "box.obj")
    tetrahedralize(gs.morphs.Mesh(file=path))
    entry = next(cache.glob("*.npz"))
    with open(entry, "wb") as fh:  # a valid entry that is not what the mesher gives
        np.savez(fh, verts=np.eye(4, 3), tets=np.array([[0, 1, 2, 3]]), surface=np.zeros(3, dtype=np.int64))
    assert len(tetrahedralize(gs.morphs.Mesh(file=path))[1]) == 1
    verts, tets = tetrahedralize(gs.morphs.Mesh(file=path, force_retet=True))
    assert len(fake_mesher) == 2 and len(tets) > 1
    with np.load(entry, allow_pickle=False) as z:
        assert np.array_equal(z["tets"], tets)


def test_corrupt_cache_entry_is_ignored_and_rewritten(tmp_path, cache, fake_mesher):
    path = write_box(tmp_path / "box.obj")
    v0, t0 = tetrahedralize(gs.morphs.Mesh(file=path))
    entry = next(cache.glob("*.npz"))
    for garbage in (b"not a zip file", entry.read_bytes()[:100]):
        entry.write_bytes(garbage)
        v1, t1 = tetrahedralize(gs.morphs.Mesh(file=path))
        assert np.array_equal(v0, v1) and np.array_equal(t0, t1)
        with np.load(entry, allow_pickle=False) as z:
            assert np.array_equal(z["tets"], t0)
    assert len(fake_mesher) == 3


def test_cache_entry_holding_a_pickle_is_refused(tmp_path, cache, fake_mesher):
    path = write_box(tmp_path / "box.obj")
    tetrahedralize(gs.morphs.Mesh(file=path))
    entry = next(cache.glob("*.npz"))
    with open(entry, "wb") as fh:
        np.savez(fh, verts=np.array([object()]), tets=np.zeros((1, 4), np.int64))
    tetrahedralize(gs.morphs.Mesh(file=path))
    assert len(fake_mesher) == 2, "the pickled entry was not loaded but meshed again"


# ---- fTetWild ---------------------------------------------------------------------------------------------------

@pytest.fixture
def ftetwild():
    try:
        import pytetwild  # noqa: F401
    except ImportError:
        pytest.skip("pytetwild (fTetWild) is not installed: pip install 'pytetwild<0.3'")


@pytest.mark.parametrize("kind", ["box", "icosphere"])
def test_ftetwild_mesh_is_valid_and_holds_the_surface_volume(tmp_path, cache, ftetwild, kind):
    surface = trimesh.creation.box(extents=(1, 2, 3)) if kind == "box" else trimesh.creation.icosphere(3)
    path = str(tmp_path / f"{kind}.stl")
    surface.export(path)
    morph = gs.morphs.Mesh(file=path, scale=0.05, pos=(0.1, 0.2, 0.3), euler=(0, 30, 0))
    verts, tets = tetrahedralize(morph)
    check_mesh(verts, tets, 10)
    # fTetWild keeps its surface within an envelope of 1e-3 of the bounding box's diagonal
    assert tet_volumes(verts, tets).sum() == pytest.approx(surface.volume * 0.05 ** 3, rel=0.015)
    lo = (verts - np.array(morph.pos)) @ quat_to_mat(morph.quat)
    np.testing.assert_allclose(lo.min(0), surface.bounds[0] * 0.05, atol=0.05 * 0.01 * 4)
    v1, t1 = tetrahedralize(morph)
    assert v1.tobytes() == verts.tobytes() and t1.tobytes() == tets.tobytes(), "same arrays through the cache"


def test_ftetwild_fills_a_box_with_a_missing_face_as_the_closed_box(tmp_path, cache, ftetwild):
    """A box surface without one of its faces (3 open edges): fTetWild's winding number fills the box, so the
    mesh is valid and closed and holds the closed box's volume (fTetWild's envelope: within 1.5 %); and fTetWild
    itself finds no tet in a single sheet, which tetrahedralize refuses."""
    box = trimesh.creation.box(extents=(1, 2, 3))
    path = str(tmp_path / "open.stl")
    trimesh.Trimesh(box.vertices, box.faces[1:], process=False).export(path)
    with pytest.warns(UserWarning, match="3 open edges"):
        verts, tets = tetrahedralize(gs.morphs.Mesh(file=path, scale=0.05))
    check_mesh(verts, tets, 5)
    assert tet_volumes(verts, tets).sum() == pytest.approx(6 * 0.05 ** 3, rel=0.015)
    sheet = str(tmp_path / "sheet.stl")
    trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], [[0, 1, 2], [0, 2, 3]], process=False).export(sheet)
    with pytest.warns(UserWarning), pytest.raises(MeshNotWatertight, match="spans no volume"):
        tetrahedralize(gs.morphs.Mesh(file=sheet))


def test_tets_meeting_along_an_edge_only_are_pruned_to_a_closed_boundary():
    """A tet hanging on one boundary edge of a box lattice (the edge then lies on four boundary faces, as fTetWild
    leaves now and then): meshing._manifold drops it and the few lattice tets at that edge, so the boundary is
    closed again; a mesh that cannot be mended within 1 % of its tets is refused."""
    verts, tets = tetrahedralize(gs.morphs.Box(size=(1.0, 1.0, 1.0)))
    a, b = surface_faces(tets)[0][:2]
    mid = (verts[a] + verts[b]) / 2
    out = mid + 0.3 * (mid - verts.mean(0)) / np.linalg.norm(mid - verts.mean(0))
    extra = np.array([out + [0.05, 0, 0], out + [0, 0.05, 0.02]])
    verts2 = np.concatenate([verts, extra])
    hang = np.array([[a, b, len(verts), len(verts) + 1]])
    mended = meshing._manifold(np.concatenate([tets, hang]), "test")
    assert len(tets) - len(mended) <= 0.01 * len(tets) and not (mended == len(verts)).any()
    check_mesh(*meshing._positive(*meshing._compact(verts2, mended)), 10)
    with pytest.raises(MeshNotWatertight, match="closed surface"):
        meshing._manifold(np.array([[0, 1, 2, 3], [0, 1, 4, 5]]), "two tets on an edge")


def test_ftetwild_maxvolume_gives_the_primitive_resolution(tmp_path, cache, ftetwild):
    """An icosphere at the Genesis sphere's maxvolume: about the Sphere primitive's vertex count."""
    path = str(tmp_path / "ball.stl")
    trimesh.creation.icosphere(subdivisions=3, radius=0.1).export(path)
    verts, tets = tetrahedralize(gs.morphs.Mesh(file=path, maxvolume=2e-7))
    primitive, _ = tetrahedralize(gs.morphs.Sphere(radius=0.1, maxvolume=2e-7))
    print(f"fTetWild icosphere r=0.1 maxvolume=2e-7: {len(verts)} vertices, {len(tets)} tets, "
          f"min dihedral {dihedral_angles(verts, tets).min():.1f} deg")
    assert 0.7 < len(verts) / len(primitive) < 1.3
    assert tet_volumes(verts, tets).mean() < 2e-7
