"""Three conveniences Genesis World scripts rely on: `genesis_core.utils.geom` (its quaternion and transform helpers),
`gs.tc_float` and the other dtype names of the chosen precision, and model files found on an asset search path."""

import math
import os
import pathlib
import sys

import numpy as np
import pytest
import torch

import genesis_core as gs
import genesis_core.utils.geom as gu
from genesis_core import morphs, rotations

RNG = np.random.default_rng(7)


def random_quats(*shape):
    q = RNG.normal(size=shape + (4,))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def random_xyz(*shape):
    """Euler angles inside the principal ranges: x, z in (-pi, pi), y in (-pi/2, pi/2), off the gimbal lock."""
    return RNG.uniform(-1, 1, size=shape + (3,)) * np.array([math.pi, math.pi / 2, math.pi]) * 0.999


def assert_same_rotation(q1, q2, atol=1e-12):
    """q and -q are one rotation."""
    q1, q2 = np.asarray(q1), np.asarray(q2)
    sign = np.where(np.sum(q1 * q2, axis=-1, keepdims=True) < 0, -1.0, 1.0)
    np.testing.assert_allclose(q1, sign * q2, atol=atol)


E_X, E_Y, E_Z = np.eye(3)


# -- geom: conventions, checked on cases worked by hand ------------------------------------------------------------


def test_xyz_to_quat_intrinsic_by_default_extrinsic_with_rpy():
    """(90 deg, 90 deg, 0) tells the two orders apart: intrinsic Rx Ry sends e_x to Rx(90)(0, 0, -1) = (0, 1, 0);
    extrinsic Ry Rx sends it to Ry(90) e_x = (0, 0, -1)."""
    xyz = np.array([90.0, 90.0, 0.0])
    intrinsic = gu.xyz_to_quat(xyz, degrees=True)
    extrinsic = gu.xyz_to_quat(xyz, rpy=True, degrees=True)
    np.testing.assert_allclose(gu.transform_by_quat(E_X, intrinsic), E_Y, atol=1e-12)
    np.testing.assert_allclose(gu.transform_by_quat(E_X, extrinsic), -E_Z, atol=1e-12)
    # a single axis is the same in both: 90 deg about z is (cos 45, 0, 0, sin 45)
    for rpy in (False, True):
        np.testing.assert_allclose(gu.xyz_to_quat(np.array([0.0, 0.0, math.pi / 2]), rpy=rpy),
                                   [2 ** -0.5, 0, 0, 2 ** -0.5], atol=1e-15)


def test_euler_is_extrinsic_xyz_in_degrees_as_the_morphs():
    """Genesis World's `euler` (morphs, euler_to_quat, euler_to_R): degrees, scipy's extrinsic x-y-z."""
    for euler in [(0, 0, 90), (30, -45, 120), (90, 90, 0), (-170, 10, 5)]:
        q = gu.euler_to_quat(euler)
        assert isinstance(q, np.ndarray)
        assert_same_rotation(q, gu.xyz_to_quat(np.array(euler, dtype=float), rpy=True, degrees=True))
        assert_same_rotation(q, gs.morphs.Box(euler=euler).quat)
        assert_same_rotation(q, rotations.rpy_to_quat(np.deg2rad(euler)))
        np.testing.assert_allclose(gu.euler_to_R(euler), rotations.quat_to_mat(q), atol=1e-12)


def test_transform_quat_by_quat_is_u_times_v():
    """transform_quat_by_quat(v, u) = u * v: the rotation v first, then u (R_u @ R_v). With v = 90 deg about x and
    u = 90 deg about z, e_y goes to e_z (v), which u leaves in place; the other order would give -e_x."""
    v = gu.axis_angle_to_quat(np.array(math.pi / 2), E_X)
    u = gu.axis_angle_to_quat(np.array(math.pi / 2), E_Z)
    uv = gu.transform_quat_by_quat(v, u)
    np.testing.assert_allclose(gu.transform_by_quat(E_Y, uv), E_Z, atol=1e-12)
    np.testing.assert_allclose(gu.quat_to_R(uv), gu.quat_to_R(u) @ gu.quat_to_R(v), atol=1e-12)
    assert_same_rotation(uv, rotations.quat_mul(u, v))


def test_helpers_agree_with_the_engine_rotations():
    for q in random_quats(20):
        np.testing.assert_allclose(gu.quat_to_R(q), rotations.quat_to_mat(q), atol=1e-12)
        assert_same_rotation(gu.R_to_quat(rotations.quat_to_mat(q)), rotations.mat_to_quat(rotations.quat_to_mat(q)))
        v = RNG.normal(size=3)
        np.testing.assert_allclose(gu.transform_by_quat(v, q), rotations.rotate(q, v), atol=1e-12)
    for xyz in random_xyz(20):
        assert_same_rotation(gu.xyz_to_quat(xyz), rotations.euler_to_quat(xyz, "xyz"))  # intrinsic
        assert_same_rotation(gu.xyz_to_quat(xyz, rpy=True), rotations.euler_to_quat(xyz, "XYZ"))  # extrinsic
    axis, angle = RNG.normal(size=3), 0.7
    assert_same_rotation(gu.axis_angle_to_quat(np.array(angle), axis), rotations.axis_angle(axis, angle))
    expected = rotations.quat_to_mat(rotations.axis_angle(axis, angle))
    np.testing.assert_allclose(gu.axis_angle_to_R(axis, angle), expected, atol=1e-12)


def test_helpers_agree_with_scipy():
    Rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    xyz = random_xyz(50)
    q = gu.xyz_to_quat(xyz, rpy=True)
    assert_same_rotation(q, Rotation.from_euler("xyz", xyz).as_quat()[:, [3, 0, 1, 2]])  # scalar-last there
    assert_same_rotation(gu.xyz_to_quat(xyz), Rotation.from_euler("XYZ", xyz).as_quat()[:, [3, 0, 1, 2]])
    np.testing.assert_allclose(gu.quat_to_R(q), Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_matrix(), atol=1e-12)
    np.testing.assert_allclose(gu.quat_to_xyz(q, rpy=True), Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_euler("xyz"),
                               atol=1e-10)
    np.testing.assert_allclose(gu.quat_to_rotvec(q), Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_rotvec(), atol=1e-10)


# -- geom: round trips ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rpy", [False, True])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_euler_round_trips_batched(rpy, kind):
    xyz = random_xyz(4, 5)
    x = torch.tensor(xyz) if kind == "torch" else xyz
    q = gu.xyz_to_quat(x, rpy=rpy)
    back = gu.quat_to_xyz(q, rpy=rpy)
    assert q.shape == (4, 5, 4) and back.shape == (4, 5, 3)
    assert isinstance(back, torch.Tensor if kind == "torch" else np.ndarray)
    np.testing.assert_allclose(np.asarray(back), xyz, atol=1e-10)
    np.testing.assert_allclose(np.asarray(gu.quat_to_xyz(gu.xyz_to_quat(x, rpy, True), rpy, True)), xyz, atol=1e-10)
    np.testing.assert_allclose(np.asarray(gu.R_to_xyz(gu.quat_to_R(q), rpy=rpy)), xyz, atol=1e-10)


@pytest.mark.parametrize("rpy", [False, True])
def test_gimbal_lock_keeps_the_rotation(rpy):
    """At y = +-90 deg only x +- z is defined: quat_to_xyz sets x to 0 and the angles still give the rotation."""
    for y in (math.pi / 2, -math.pi / 2):
        q = gu.xyz_to_quat(np.array([0.3, y, -0.4]), rpy=rpy)
        xyz = gu.quat_to_xyz(q, rpy=rpy)
        assert xyz[0] == 0.0 and abs(xyz[1] - y) < 1e-7
        assert_same_rotation(gu.xyz_to_quat(xyz, rpy=rpy), q, atol=1e-7)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_matrix_round_trips(kind):
    q = random_quats(3, 7)
    q[0, 0] = (0.0, 1.0, 0.0, 0.0)  # half turns: w = 0, each of Shepperd's branches
    q[0, 1] = (0.0, 0.0, 1.0, 0.0)
    q[0, 2] = (0.0, 0.0, 0.0, 1.0)
    q[0, 3] = (1.0, 0.0, 0.0, 0.0)
    x = torch.tensor(q) if kind == "torch" else q
    R = gu.quat_to_R(x)
    assert R.shape == (3, 7, 3, 3)
    np.testing.assert_allclose(np.asarray(R @ R.swapaxes(-1, -2)), np.broadcast_to(np.eye(3), (3, 7, 3, 3)), atol=1e-12)
    q_back = gu.R_to_quat(R)
    assert (np.asarray(q_back)[..., 0] >= 0).all()
    assert_same_rotation(q_back, q)
    np.testing.assert_allclose(np.asarray(gu.quat_to_R(q_back)), np.asarray(R), atol=1e-12)
    rotvec = gu.quat_to_rotvec(x)
    assert (np.linalg.norm(np.asarray(rotvec), axis=-1) <= math.pi + 1e-12).all()
    assert_same_rotation(gu.rotvec_to_quat(rotvec), q)
    np.testing.assert_allclose(np.asarray(gu.rotvec_to_R(gu.R_to_rotvec(R))), np.asarray(R), atol=1e-12)


def test_transforms_batched_and_inverse():
    pos, trans, quat = RNG.normal(size=(6, 3)), RNG.normal(size=(6, 3)), random_quats(6)
    moved = gu.transform_by_trans_quat(pos, trans, quat)
    np.testing.assert_allclose(moved, np.einsum("bij,bj->bi", gu.quat_to_R(quat), pos) + trans, atol=1e-12)
    np.testing.assert_allclose(gu.inv_transform_by_trans_quat(moved, trans, quat), pos, atol=1e-12)
    np.testing.assert_allclose(gu.inv_transform_by_quat(gu.transform_by_quat(pos, quat), quat), pos, atol=1e-12)
    np.testing.assert_allclose(gu.transform_by_quat(pos, gu.inv_quat(quat)),
                               np.einsum("bji,bj->bi", gu.quat_to_R(quat), pos), atol=1e-12)

    T = gu.trans_quat_to_T(trans, quat)
    assert T.shape == (6, 4, 4)
    np.testing.assert_allclose(T[:, 3], np.broadcast_to([0, 0, 0, 1.0], (6, 4)))
    np.testing.assert_allclose(gu.transform_by_T(pos, T), moved, atol=1e-12)
    np.testing.assert_allclose(gu.inv_transform_by_T(moved, T), pos, atol=1e-12)
    np.testing.assert_allclose(gu.inv_T(T) @ T, np.broadcast_to(np.eye(4), (6, 4, 4)), atol=1e-12)
    t_back, q_back = gu.T_to_trans_quat(T)
    np.testing.assert_allclose(t_back, trans)
    assert_same_rotation(q_back, quat)

    # N points per frame: pos [B, N, 3] with T [B, 4, 4]; one frame for N points: quat [4] with pos [N, 3]
    cloud = RNG.normal(size=(6, 5, 3))
    np.testing.assert_allclose(gu.transform_by_T(cloud, T)[:, 2], gu.transform_by_T(cloud[:, 2], T), atol=1e-12)
    np.testing.assert_allclose(gu.inv_transform_by_T(gu.transform_by_T(cloud, T), T), cloud, atol=1e-12)
    np.testing.assert_allclose(gu.transform_by_quat(cloud[0], quat[0]), cloud[0] @ gu.quat_to_R(quat[0]).T, atol=1e-12)

    new_pos, new_quat = gu.transform_pos_quat_by_trans_quat(pos, quat[::-1], trans, quat)
    np.testing.assert_allclose(new_pos, moved, atol=1e-12)
    back_pos, back_quat = gu.inv_transform_pos_quat_by_trans_quat(new_pos, new_quat, trans, quat)
    np.testing.assert_allclose(back_pos, pos, atol=1e-12)
    assert_same_rotation(back_quat, quat[::-1])
    np.testing.assert_allclose(gu.trans_quat_to_T(trans=trans[0]), gu.trans_to_T(trans[0]))
    np.testing.assert_allclose(gu.trans_quat_to_T(quat=quat[0]), gu.R_to_T(gu.quat_to_R(quat[0])))


def test_normalize_axis_angle_and_slerp():
    x = RNG.normal(size=(4, 3))
    np.testing.assert_allclose(np.linalg.norm(gu.normalize(x), axis=-1), 1.0)
    np.testing.assert_array_equal(gu.normalize(np.zeros(3)), np.zeros(3))
    angles = np.array([0.0, 0.5, math.pi, -1.0])
    q = gu.axis_angle_to_quat(angles, np.array([0.0, 0.0, 2.0]))  # the axis need not be unit
    np.testing.assert_allclose(q, np.stack([np.cos(angles / 2), 0 * angles, 0 * angles, np.sin(angles / 2)], -1),
                               atol=1e-15)
    q0, q1 = gu.identity_quat().astype(float), gu.axis_angle_to_quat(np.array(1.2), E_Z)
    np.testing.assert_allclose(gu.slerp(q0, q1, 0.0), q0, atol=1e-12)
    np.testing.assert_allclose(gu.slerp(q0, q1, 1.0), q1, atol=1e-12)
    np.testing.assert_allclose(gu.slerp(q0, q1, 0.25), gu.axis_angle_to_quat(np.array(0.3), E_Z), atol=1e-12)
    np.testing.assert_allclose(gu.slerp(q0, -q1, 0.25), gu.axis_angle_to_quat(np.array(0.3), E_Z), atol=1e-12)
    halfway = gu.slerp(np.stack([q0, q1]), np.stack([q1, q1]), np.array([0.5, 0.5]))
    assert_same_rotation(halfway, np.stack([gu.axis_angle_to_quat(np.array(0.6), E_Z), q1]))


# -- geom: torch and NumPy -----------------------------------------------------------------------------------------


def test_torch_and_numpy_give_the_same_numbers_and_keep_their_kind():
    xyz, pos, quat = random_xyz(8), RNG.normal(size=(8, 3)), random_quats(8)
    cases = [(gu.xyz_to_quat, (xyz,)), (gu.quat_to_xyz, (quat,)), (gu.quat_to_R, (quat,)),
             (gu.transform_by_quat, (pos, quat)), (gu.transform_by_trans_quat, (pos, pos, quat)),
             (gu.trans_quat_to_T, (pos, quat)), (gu.inv_quat, (quat,)), (gu.transform_quat_by_quat, (quat, quat[::-1])),
             (gu.R_to_quat, (gu.quat_to_R(quat),)), (gu.quat_to_rotvec, (quat,)), (gu.normalize, (pos,))]
    for fn, args in cases:
        out_np = fn(*args)
        out_tc = fn(*(torch.tensor(a.copy()) for a in args))
        assert isinstance(out_np, np.ndarray) and out_np.dtype == np.float64, fn.__name__
        assert isinstance(out_tc, torch.Tensor) and out_tc.dtype == torch.float64, fn.__name__
        np.testing.assert_allclose(out_tc.numpy(), out_np, atol=1e-12, err_msg=fn.__name__)
    # float32 stays float32, in both kinds; a list counts as NumPy; a gs.Tensor stays one
    assert gu.xyz_to_quat(xyz.astype(np.float32)).dtype == np.float32
    assert gu.transform_by_quat(torch.ones(3, dtype=torch.float32), [1.0, 0, 0, 0]).dtype == torch.float32
    assert isinstance(gu.euler_to_quat([0, 0, 90]), np.ndarray)
    assert isinstance(gu.quat_to_R(gs.tensor(quat)), gs.Tensor)


def test_numpy_inputs_are_left_untouched():
    quat, pos = random_quats(5), RNG.normal(size=(5, 3))
    before = quat.copy(), pos.copy()
    gu.inv_quat(quat), gu.transform_by_trans_quat(pos, pos, quat), gu.slerp(quat, quat[::-1], 0.3)
    np.testing.assert_array_equal(quat, before[0])
    np.testing.assert_array_equal(pos, before[1])
    quat.flags.writeable = False
    np.testing.assert_allclose(gu.quat_to_R(quat[::-1]), gu.quat_to_R(before[0][::-1].copy()))


def test_torch_results_carry_gradients():
    xyz = torch.tensor(random_xyz(3), requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: gu.quat_to_R(gu.xyz_to_quat(x, rpy=True)), (xyz,))
    quat = torch.tensor(random_quats(3), requires_grad=True)
    assert torch.autograd.gradcheck(lambda q: gu.quat_to_xyz(q), (quat,))
    assert torch.autograd.gradcheck(lambda q: gu.R_to_quat(gu.quat_to_R(q)), (quat,))
    pos = torch.tensor(RNG.normal(size=(3, 3)), requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, q: gu.transform_by_trans_quat(p, p, q), (pos, quat))


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(gs.GenesisError, match="mix torch tensors and NumPy arrays"):
        gu.transform_by_quat(torch.zeros(3), np.array([1.0, 0, 0, 0]))
    with pytest.raises(gs.OptionError, match=r"geom.quat_to_R: quat has shape \(5, 3\); expected \[..., 4\]"):
        gu.quat_to_R(np.zeros((5, 3)))
    with pytest.raises(gs.OptionError, match="transform_by_R"):
        gu.transform_by_R(np.zeros((2, 2, 2, 3)), np.eye(3))


def test_genesis_import_style():
    """`import genesis.utils.geom as gu` becomes `import genesis_core.utils.geom as gu`; gs.utils.geom also works."""
    assert gs.utils.geom is gu
    assert callable(gs.utils.geom.xyz_to_quat)
    # `from genesis.vis.camera import Camera` (drone/fly_route.py's type hints): the cameras' class
    from genesis_core.render.camera import Camera
    from genesis_core.vis.camera import Camera as VisCamera

    assert VisCamera is Camera


# -- gs.tc_float and friends ---------------------------------------------------------------------------------------


@pytest.fixture
def restart_runtime():
    """Start the engine again with the precision asked; afterwards restart it as it was."""
    rt = gs.runtime
    was = (rt.backend, rt.precision, rt.seed) if rt.initialized else None

    def restart(precision):
        gs.destroy()
        gs.init(backend=gs.cpu, precision=precision, seed=0, logging_level="warning")

    yield restart
    gs.destroy()
    if was is not None:
        gs.init(backend=was[0], precision=was[1], seed=was[2], logging_level="warning")


def test_dtype_names_follow_the_precision(restart_runtime):
    import taichi as ti

    expected = {"32": (torch.float32, np.float32, ti.f32), "64": (torch.float64, np.float64, ti.f64)}
    for precision in ("32", "64", "32"):
        restart_runtime(precision)
        tc_float, np_float, ti_float = expected[precision]
        assert gs.tc_float is tc_float and gs.np_float is np_float and gs.ti_float == ti_float
        assert gs.tc_int is torch.int32 and gs.np_int is np.int32 and gs.ti_int == ti.i32
        assert torch.zeros(2, dtype=gs.tc_float).dtype == tc_float
        assert gs.zeros(2, dtype=gs.tc_float).dtype == tc_float
        assert np.zeros(2, dtype=gs.np_float).dtype == np_float
        assert gu.tc_identity_quat().dtype == tc_float and gu.identity_quat().dtype == np_float
        assert "tc_float" not in vars(gs)  # read from the runtime, never a stale copy


def test_dtype_names_need_init(restart_runtime):
    gs.destroy()
    for name in ("tc_float", "np_float", "tc_int", "np_int"):
        with pytest.raises(AttributeError, match=r"call gs.init\(\) first"):
            getattr(gs, name)
        assert not hasattr(gs, name)


# -- model files on the asset search path --------------------------------------------------------------------------


def write(path, text="<robot/>"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def fake_genesis_world(tmp_path, monkeypatch):
    """An installed Genesis World: a `genesis` package with an `assets` folder, whose import would fail (the
    lookup must find it without importing it)."""
    site = tmp_path / "site"
    write(site / "genesis" / "__init__.py", "raise ImportError('genesis must not be imported by the lookup')\n")
    assets = site / "genesis" / "assets"
    write(assets / "xml" / "franka_emika_panda" / "panda.xml", "<mujoco/>")
    write(assets / "meshes" / "cloth.obj", "v 0 0 0\n")
    monkeypatch.syspath_prepend(str(site))
    return assets


@pytest.fixture
def search(tmp_path, monkeypatch, fake_genesis_world):
    """A working directory and two $GENESIS_CORE_ASSETS folders, all empty."""
    cwd, first, second = tmp_path / "cwd", tmp_path / "first", tmp_path / "second"
    for d in (cwd, first, second):
        d.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv(morphs.ASSETS_ENV, os.pathsep.join([str(first), "", str(second)]))
    return cwd, first, second, fake_genesis_world


def test_a_genesis_world_model_path_resolves_in_its_assets(search):
    model = gs.morphs.MJCF(file="xml/franka_emika_panda/panda.xml")
    assert model.file == str(search[3] / "xml" / "franka_emika_panda" / "panda.xml")
    assert "genesis" not in sys.modules


def test_the_order_of_precedence(search):
    cwd, first, second, genesis_assets = search
    name = "urdf/arm/arm.urdf"
    write(genesis_assets / name)
    assert gs.morphs.URDF(file=name).file == str(genesis_assets / name)
    write(second / name)
    assert gs.morphs.URDF(file=name).file == str(second / name)
    write(first / name)
    assert gs.morphs.URDF(file=name).file == str(first / name)
    write(cwd / name)
    assert gs.morphs.URDF(file=name).file == name  # found from the working directory: kept as given
    assert gs.morphs.URDF(file=pathlib.Path(name)).file == name

    # the files genesis-core ships come after the environment's folders and before Genesis World's
    shipped = os.path.join(morphs.ASSETS, "meshes", "cloth.obj")
    assert gs.morphs.Mesh(file="meshes/cloth.obj").file == shipped
    write(second / "meshes" / "cloth.obj", "v 0 0 0\n")
    assert gs.morphs.Mesh(file="meshes/cloth.obj").file == str(second / "meshes" / "cloth.obj")


def test_a_missing_file_lists_every_place_looked(search):
    cwd, first, second, genesis_assets = search
    name = os.path.join("urdf", "missing.urdf")
    with pytest.raises(gs.OptionError) as info:
        gs.morphs.URDF(file=name)
    message = str(info.value)
    places = [str(cwd / name), str(first / name), str(second / name), os.path.join(morphs.ASSETS, name),
              str(genesis_assets / name)]
    assert message.startswith(f"URDF.file={name!r} is not accepted: no such file")
    positions = [message.index(p) for p in places]
    assert positions == sorted(positions), message
    assert "GENESIS_CORE_ASSETS" in message
    assert morphs.find_file(name) == (None, places)
    # an absolute path is looked for where it says only
    with pytest.raises(gs.OptionError, match="no such file") as info:
        gs.morphs.Mesh(file=str(cwd / "nowhere.obj"))
    assert str(first) not in str(info.value)


def test_without_genesis_world_or_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(morphs.ASSETS_ENV, raising=False)
    monkeypatch.setattr(morphs, "_genesis_world_assets", lambda: None)
    assert morphs.asset_dirs() == [morphs.ASSETS]
    assert morphs.find_file("a.obj") == (None, [str(tmp_path / "a.obj"), os.path.join(morphs.ASSETS, "a.obj")])


def test_grid_points_on_a_plane():
    """gu.generate_grid_points_on_plane: an (ny, nx, 3) grid spanning [lo, hi] in the plane of the normal, corners
    at lo and hi, evenly spaced; on a tilted plane every point satisfies n . p = n . lo; bad input refused."""
    import genesis_core.utils.geom as gu

    g = gu.generate_grid_points_on_plane((-0.1, -0.2, 0.05), (0.1, 0.2, 0.05), (0, 0, 1), 3, 5)
    assert g.shape == (5, 3, 3)
    assert np.allclose(g[0, 0], (-0.1, -0.2, 0.05)) and np.allclose(g[-1, -1], (0.1, 0.2, 0.05))
    assert np.allclose(np.diff(g[0, :, 0]), 0.1) and np.allclose(np.diff(g[:, 0, 1]), 0.1)
    n = np.array([1.0, 1.0, 1.0]) / np.sqrt(3)
    lo, hi = np.array([0.5, -0.5, 0.0]), np.array([-0.5, 0.5, 0.0])  # both on n . p = 0
    t = gu.generate_grid_points_on_plane(lo, hi, n, 4, 4)
    assert np.allclose(t @ n, 0.0)
    t0, t1 = gu.orthogonals(n)
    assert np.allclose(np.cross(t0, t1), n) and abs(t0 @ t1) < 1e-12
    with pytest.raises(gs.OptionError, match="normal"):
        gu.generate_grid_points_on_plane(lo, hi, (0, 0, 0), 2, 2)
    with pytest.raises(gs.OptionError, match="nx"):
        gu.generate_grid_points_on_plane(lo, hi, n, 0, 2)
