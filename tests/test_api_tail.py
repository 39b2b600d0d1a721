"""Small public names of Genesis World that its users' scripts call: gs.EPS, gs.GenesisException,
gs.constants.backend; gs.utils.geom's polar decomposition, 6D rotations and its shapes for unbatched and batched
inputs; RigidOptions' choices of algorithm; the coupler options; and the scene's set_gravity, destroy, entity
names, get_entity and step(update_visualizer=...)."""

import inspect

import attrs
import numpy as np
import pytest
import torch

import genesis_core as gs
import genesis_core.utils.geom as gu
from genesis_core import errors, plugins
from genesis_core.testing import RUNTIME

from . import toy_plugin

# -- gs.EPS, gs.GenesisException, gs.constants.backend --------------------------------------------------------------


def test_eps_is_the_init_eps_or_the_machine_epsilon_of_the_precision():
    """Genesis World's gs.EPS = max(gs.init's eps, finfo(float).eps): 1e-15 (the default eps) in float64,
    float32's 1.19e-7 in float32, a larger eps as given; None once the engine is torn down."""
    assert gs.EPS == max(1e-15, np.finfo(gs.np_float).eps)
    try:
        gs.destroy()
        assert gs.EPS is None
        gs.init(backend=gs.constants.backend.cpu, precision="32", logging_level="warning")
        assert gs.EPS == float(np.finfo(np.float32).eps)
        gs.destroy()
        gs.init(backend=gs.cpu, precision="64", eps=1e-9, logging_level="warning")
        assert gs.EPS == 1e-9
    finally:
        gs.destroy()
        gs.init(backend=gs.cpu, **RUNTIME)
    assert gs.EPS == 1e-15


def test_genesis_exception_catches_every_error_of_the_engine():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)]
    assert len(classes) > 10 and all(issubclass(c, gs.GenesisException) for c in classes)
    with pytest.raises(gs.GenesisException, match="dt"):
        gs.options.SimOptions(dt=-1.0)
    with pytest.raises(gs.GenesisException, match="gs.destroy"):
        gs.init(backend=gs.cpu)  # already started


def test_constants_backend_names_the_backends_gs_init_takes():
    backend = gs.constants.backend
    assert backend.cpu == gs.cpu and backend.gpu == gs.gpu
    assert backend.cuda == backend.metal == backend.amdgpu == gs.gpu  # one GPU backend: Taichi picks the API


# -- gs.utils.geom -----------------------------------------------------------------------------------------------


def _rotations(shape, seed=0):
    return gu.rotvec_to_R(np.random.default_rng(seed).uniform(-2.0, 2.0, (*shape, 3)))


@pytest.mark.parametrize("side", ["right", "left"])
def test_polar_splits_a_rotation_times_a_stretch(side):
    """A = R S (right) or S R (left), R a rotation and S symmetric positive definite, has the polar
    decomposition (R, S) exactly: the result matches to rounding, batched over (10, 40, 25), in NumPy and torch."""
    rng = np.random.default_rng(1)
    shape = (10, 40, 25)
    R, Q = _rotations(shape, 1), _rotations(shape, 2)
    S = Q @ (rng.uniform(0.5, 2.0, (*shape, 3))[..., None] * np.swapaxes(Q, -1, -2))
    A = R @ S if side == "right" else S @ R
    U, P = gu.polar(A, side=side)
    assert isinstance(U, np.ndarray) and U.shape == P.shape == (*shape, 3, 3)
    np.testing.assert_allclose(U, R, atol=1e-10)
    np.testing.assert_allclose(P, S, atol=1e-10)
    U_t, P_t = gu.polar(torch.as_tensor(A), side=side)
    assert torch.is_tensor(U_t)
    np.testing.assert_allclose(U_t.numpy(), U, atol=1e-12)
    np.testing.assert_allclose(P_t.numpy(), P, atol=1e-12)
    U1, P1 = gu.polar(A[0, 0, 0], side=side)  # unbatched: (3, 3), Genesis World's shapes
    assert U1.shape == P1.shape == (3, 3)
    U2, P2 = gu.polar(np.random.default_rng(3).normal(size=(3, 5)), side=side)  # not square
    assert U2.shape == (3, 5) and P2.shape == ((5, 5) if side == "right" else (3, 3))


def test_polar_of_a_reflection_is_a_rotation_only_when_asked():
    """det A < 0: with pure_rotation (the default) U is a rotation and A = U P still holds; without, U is the
    reflection and P positive semi-definite (P's eigenvalues are A's singular values)."""
    A = np.random.default_rng(4).normal(size=(5, 3, 3))
    A[..., 2] *= np.where(np.linalg.det(A) > 0, -1.0, 1.0)[:, None]  # every det A < 0
    U, P = gu.polar(A)
    np.testing.assert_allclose(np.linalg.det(U), 1.0, atol=1e-12)
    np.testing.assert_allclose(U @ P, A, atol=1e-12)
    U, P = gu.polar(A, pure_rotation=False)
    np.testing.assert_allclose(np.linalg.det(U), -1.0, atol=1e-12)
    np.testing.assert_allclose(U @ P, A, atol=1e-12)
    np.testing.assert_allclose(np.linalg.eigvalsh(P), np.sort(np.linalg.svd(A, compute_uv=False)), atol=1e-12)
    with pytest.raises(gs.OptionError, match="side='top'"):
        gu.polar(A, side="top")
    with pytest.raises(gs.OptionError, match=r"expected a matrix"):
        gu.polar(np.ones(3))


def test_rot6d_is_the_first_two_rows_and_gram_schmidt_gives_the_rotation_back():
    R = _rotations((10, 40, 25))
    d6 = gu.R_to_rot6d(R)
    assert d6.shape == (10, 40, 25, 6)
    np.testing.assert_array_equal(d6[..., :3], R[..., 0, :])
    np.testing.assert_allclose(gu.rot6d_to_R(d6), R, atol=1e-12)
    assert gu.R_to_rot6d(R[0, 0, 0]).shape == (6,) and gu.rot6d_to_R(torch.as_tensor(d6[0, 0, 0])).shape == (3, 3)
    any6 = torch.randn(7, 6, dtype=torch.float64)  # any two independent vectors name a rotation
    R6 = gu.rot6d_to_R(any6)
    torch.testing.assert_close(R6 @ R6.mT, torch.eye(3, dtype=torch.float64).expand(7, 3, 3))
    torch.testing.assert_close(torch.linalg.det(R6), torch.ones(7, dtype=torch.float64))


def test_slerp_takes_genesis_interpolation_parameter_shapes():
    """t of shape [...] or Genesis World's [..., 1]; unbatched quaternions with t of shape (1,) give (4,). The
    value: from the identity to a turn of theta about z, slerp at t is the turn of t * theta."""
    theta, t = 1.2, 0.3
    q0, q1 = np.array([1.0, 0, 0, 0]), np.array([np.cos(theta / 2), 0, 0, np.sin(theta / 2)])
    q = gu.slerp(q0, q1, np.array([t]))
    assert q.shape == (4,)
    np.testing.assert_allclose(q, [np.cos(t * theta / 2), 0, 0, np.sin(t * theta / 2)], atol=1e-12)
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(2, 10, 40, 25, 4))
    ts = rng.uniform(size=(10, 40, 25))
    q = gu.slerp(a, b, ts[..., None])
    assert q.shape == (10, 40, 25, 4)
    np.testing.assert_allclose(q, gu.slerp(a, b, ts), atol=1e-12)
    q_t = gu.slerp(torch.as_tensor(a), torch.as_tensor(b), torch.as_tensor(ts[..., None]))
    np.testing.assert_allclose(q_t.numpy(), q, atol=1e-12)
    assert gu.slerp(q0, q1, np.linspace(0, 1, 5)).shape == (5, 4)  # one pair, several t


# inputs (name -> trailing shape) and the trailing shape of each output, of every function of Genesis World's that
# gs.utils.geom has
GEOM_SHAPES = [
    ("inv_quat", dict(quat=(4,)), [(4,)]),
    ("normalize", dict(x=(4,)), [(4,)]),
    ("transform_quat_by_quat", dict(v=(4,), u=(4,)), [(4,)]),
    ("quat_to_R", dict(quat=(4,)), [(3, 3)]),
    ("R_to_quat", dict(R=(3, 3)), [(4,)]),
    ("xyz_to_quat", dict(xyz=(3,)), [(4,)]),
    ("quat_to_xyz", dict(quat=(4,)), [(3,)]),
    ("R_to_xyz", dict(R=(3, 3)), [(3,)]),
    ("euler_to_quat", dict(euler_xyz=(3,)), [(4,)]),
    ("euler_to_R", dict(euler_xyz=(3,)), [(3, 3)]),
    ("axis_angle_to_quat", dict(angle=(), axis=(3,)), [(4,)]),
    ("axis_angle_to_R", dict(axis=(3,), theta=()), [(3, 3)]),
    ("rotvec_to_quat", dict(rotvec=(3,)), [(4,)]),
    ("quat_to_rotvec", dict(quat=(4,)), [(3,)]),
    ("rotvec_to_R", dict(rotvec=(3,)), [(3, 3)]),
    ("R_to_rotvec", dict(R=(3, 3)), [(3,)]),
    ("slerp", dict(q0=(4,), q1=(4,), t=(1,)), [(4,)]),
    ("transform_by_quat", dict(v=(3,), quat=(4,)), [(3,)]),
    ("inv_transform_by_quat", dict(pos=(3,), quat=(4,)), [(3,)]),
    ("transform_by_xyz", dict(pos=(3,), xyz=(3,)), [(3,)]),
    ("transform_by_trans_quat", dict(pos=(3,), trans=(3,), quat=(4,)), [(3,)]),
    ("inv_transform_by_trans_quat", dict(pos=(3,), trans=(3,), quat=(4,)), [(3,)]),
    ("transform_pos_quat_by_trans_quat", dict(pos=(3,), quat=(4,), t_trans=(3,), t_quat=(4,)), [(3,), (4,)]),
    ("inv_transform_pos_quat_by_trans_quat", dict(pos=(3,), quat=(4,), t_trans=(3,), t_quat=(4,)), [(3,), (4,)]),
    ("transform_by_R", dict(pos=(3,), R=(3, 3)), [(3,)]),
    ("transform_by_trans_R", dict(pos=(3,), trans=(3,), R=(3, 3)), [(3,)]),
    ("transform_by_T", dict(pos=(3,), T=(4, 4)), [(3,)]),
    ("inv_transform_by_T", dict(pos=(3,), T=(4, 4)), [(3,)]),
    ("trans_R_to_T", dict(trans=(3,), R=(3, 3)), [(4, 4)]),
    ("trans_quat_to_T", dict(trans=(3,), quat=(4,)), [(4, 4)]),
    ("R_to_T", dict(R=(3, 3)), [(4, 4)]),
    ("trans_to_T", dict(trans=(3,)), [(4, 4)]),
    ("T_to_trans", dict(T=(4, 4)), [(3,)]),
    ("T_to_quat", dict(T=(4, 4)), [(4,)]),
    ("T_to_trans_quat", dict(T=(4, 4)), [(3,), (4,)]),
    ("inv_T", dict(T=(4, 4)), [(4, 4)]),
    ("R_to_rot6d", dict(R=(3, 3)), [(6,)]),
    ("rot6d_to_R", dict(d6=(6,)), [(3, 3)]),
    ("polar", dict(A=(3, 3)), [(3, 3), (3, 3)]),
]


@pytest.mark.parametrize("batch", [(), (10, 40, 25)], ids=["unbatched", "batched"])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_geom_functions_keep_genesis_shapes_and_agree_across_array_kinds(batch, kind):
    """Each function maps inputs [*batch, *in] to outputs [*batch, *out] with no extra axis (an unbatched
    quaternion gives (4,), not (1, 4)) and any leading batch dimensions; NumPy and torch give the same numbers."""
    rng = np.random.default_rng(6)
    for name, inputs, outputs in GEOM_SHAPES:
        args = {k: rng.uniform(0.1, 1.0, (*batch, *tail)) for k, tail in inputs.items()}
        np_out = getattr(gu, name)(**args)
        out = np_out if kind == "numpy" else getattr(gu, name)(**{k: torch.as_tensor(a) for k, a in args.items()})
        out = out if isinstance(out, tuple) else (out,)
        np_out = np_out if isinstance(np_out, tuple) else (np_out,)
        assert [tuple(o.shape) for o in out] == [(*batch, *tail) for tail in outputs], name
        for o, ref in zip(out, np_out):
            assert isinstance(o, np.ndarray if kind == "numpy" else torch.Tensor), name
            np.testing.assert_allclose(np.asarray(o), ref, atol=1e-12, err_msg=name)


# -- RigidOptions -----------------------------------------------------------------------------------------------

ACCEPTED_WITHOUT_EFFECT = dict(box_box_detection=False, use_gjk_collision=True, use_contact_island=True,
                               noslip_iterations=5, noslip_tolerance=1e-5, enable_mujoco_compatibility=True,
                               constraint_timeconst=0.02, use_hibernation=True, hibernation_thresh_vel=2e-3,
                               hibernation_thresh_acc=5e-2)


def test_rigid_algorithm_choices_are_accepted_and_leave_the_physics_as_it_is():
    """Genesis World's choices of algorithm read back as given; the options a checkpoint must match (as_dict)
    are the defaults', so a scene made with them is the default scene."""
    pytest.importorskip("genesis_rigid")
    opts = gs.options.RigidOptions(**ACCEPTED_WITHOUT_EFFECT)
    assert all(getattr(opts, k) == value for k, value in ACCEPTED_WITHOUT_EFFECT.items())
    assert opts.as_dict() == gs.options.RigidOptions().as_dict()
    assert gs.options.RigidOptions(box_box_detection=True) == gs.options.RigidOptions()  # what always runs
    assert gs.options.RigidOptions(use_gjk_collision=None).use_gjk_collision is None
    off = gs.options.RigidOptions(disable_constraint=True, enable_collision=True)
    assert off.disable_constraint and not off.enable_collision and not off.enable_joint_limit
    assert gs.options.RigidOptions(max_dynamic_constraints=16).max_dynamic_constraints == 16


@pytest.mark.parametrize("name, value, expected", [
    ("box_box_detection", None, "True or False"),
    ("use_gjk_collision", 1, "True or False"),
    ("use_contact_island", "yes", "True or False"),
    ("noslip_iterations", -1, "an int >= 0"),
    ("noslip_iterations", 2.0, "an int >= 0"),
    ("noslip_tolerance", 0.0, "a finite number > 0"),
    ("enable_mujoco_compatibility", 0, "True or False"),
    ("max_dynamic_constraints", -3, "an int >= 0"),
    ("disable_constraint", 1, "True or False"),
    ("constraint_timeconst", 0.0, "a finite number > 0"),
    ("constraint_timeconst", float("nan"), "a finite number > 0"),
    ("use_hibernation", 1, "True or False"),
    ("hibernation_thresh_vel", 0.0, "a finite number > 0"),
    ("hibernation_thresh_acc", -1.0, "a finite number > 0"),
])
def test_rigid_genesis_options_are_validated(name, value, expected):
    pytest.importorskip("genesis_rigid")
    with pytest.raises(gs.OptionError, match=rf"RigidOptions\.{name}=.*expected {expected}"):
        gs.options.RigidOptions(**{name: value})


# -- coupler options ---------------------------------------------------------------------------------------------


def test_legacy_coupler_is_the_coupler_here_and_sap_and_ipc_are_refused():
    assert gs.Scene().coupler_options == gs.options.LegacyCouplerOptions()
    legacy = gs.options.LegacyCouplerOptions(rigid_mpm=True)
    assert gs.Scene(coupler_options=legacy).coupler_options is legacy
    assert isinstance(legacy, gs.options.BaseCouplerOptions)
    for cls in (gs.options.SAPCouplerOptions, gs.options.IPCCouplerOptions):
        with pytest.raises(gs.OptionError, match=rf"{cls.__name__}.*not implemented here.*LegacyCouplerOptions"):
            gs.Scene(coupler_options=cls())
    with pytest.raises(gs.OptionError, match=r"rigid_mpm=False, fem_sph=False\)\) is not accepted"):
        gs.Scene(coupler_options=gs.options.LegacyCouplerOptions(rigid_mpm=False, fem_sph=False))
    with pytest.raises(gs.OptionError, match="must be a gs.options.LegacyCouplerOptions"):
        gs.Scene(coupler_options=gs.options.SimOptions())


@pytest.mark.parametrize("cls, kwargs", [
    (gs.options.LegacyCouplerOptions, dict(rigid_sph=1)),
    (gs.options.SAPCouplerOptions, dict(n_sap_iterations=0)),
    (gs.options.SAPCouplerOptions, dict(fem_floor_contact_type="face")),
    (gs.options.IPCCouplerOptions, dict(contact_d_hat=-0.01)),
    (gs.options.IPCCouplerOptions, dict(linear_system_solver="cholesky")),
])
def test_coupler_options_are_validated_as_genesis_world_does(cls, kwargs):
    (name, value), = kwargs.items()
    with pytest.raises(gs.OptionError, match=rf"{cls.__name__}\.{name}={value!r}"):
        cls(**kwargs)


# -- the scene: gravity, entity names, step, destroy -----------------------------------------------------------

DT, G_NEW = 0.01, (0.0, 1.0, -5.0)


@pytest.fixture(scope="module")
def falling():
    """A 0.1 m box 0.2 m above a plane, with every constraint off (disable_constraint=True): nothing but
    gravity, set to G_NEW by scene.set_gravity before build, acts on it."""
    pytest.importorskip("genesis_rigid")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT),
                     rigid_options=gs.options.RigidOptions(disable_constraint=True))
    plane = scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.2), size=(0.1, 0.1, 0.1)), name="crate")
    scene.set_gravity(G_NEW)
    scene.build()
    return scene, plane, box


def test_gravity_set_before_build_is_the_one_the_box_falls_with(falling):
    """Semi-implicit Euler from rest under g: after n steps v = g n dt and x = x0 + g dt^2 n (n + 1) / 2, exactly
    up to rounding. With the constraints off the box falls through the plane (z < 0 at the end)."""
    scene, _, box = falling
    assert scene.sim_options.gravity == G_NEW and scene.sim.sim_options.gravity == G_NEW
    x0, n = box.get_pos().clone(), 40
    for _ in range(n):
        scene.step(update_visualizer=False, refresh_visualizer=False)
    g = torch.tensor(G_NEW, dtype=x0.dtype)
    torch.testing.assert_close(box.get_vel(), g * n * DT, atol=1e-9, rtol=0)
    torch.testing.assert_close(box.get_pos(), x0 + g * DT**2 * n * (n + 1) / 2, atol=1e-9, rtol=0)
    assert box.get_pos()[2] < 0
    with pytest.raises(gs.OptionError, match="update_visualizer=1"):
        scene.step(update_visualizer=1)


def test_gravity_after_build_goes_through_each_solver_or_is_refused_naming_it(falling):
    scene, _, box = falling
    with pytest.raises(gs.OptionError, match="envs_idx"):
        scene.set_gravity((0, 0, -9.81), envs_idx=[0])
    with pytest.raises(gs.OptionError, match="3 finite numbers"):
        scene.set_gravity((0, 0, float("nan")))
    if callable(getattr(scene.rigid_solver, "set_gravity", None)):
        scene.set_gravity((0.0, 0.0, -9.81))
        v0 = box.get_vel().clone()
        scene.step()
        torch.testing.assert_close(box.get_vel() - v0, torch.tensor([0, 0, -9.81 * DT], dtype=v0.dtype),
                                   atol=1e-9, rtol=0)
    else:
        with pytest.raises(gs.SceneError, match="RigidSolver compiled the gravity.*before scene.build"):
            scene.set_gravity((0.0, 0.0, -9.81))
        assert scene.sim_options.gravity == G_NEW  # nothing changed


@attrs.define(frozen=True, kw_only=True)
class FallingBall(gs.materials.Material):
    solver = "FallingBallSolver"


class FallingBallSolver(toy_plugin.ToyBallSolver):
    """The toy balls (pure torch), which read SimOptions.gravity every substep: set_gravity has nothing to
    recompute."""

    short_name = "falling_ball"
    material_class = FallingBall
    order = 3

    def set_gravity(self, gravity):
        self.gravity_given = gravity


class _FallingBallPlugin:
    @gs.hookimpl
    def register_solvers(self, register):
        register(FallingBallSolver)

    @gs.hookimpl
    def register_materials(self, register):
        register("FallingBall", FallingBall)


def test_gravity_after_build_changes_the_acceleration_of_a_solver_that_takes_it():
    """v after n1 steps under g1 then n2 under g2 is (g1 n1 + g2 n2) dt, in every environment."""
    name = plugins.register_plugin(_FallingBallPlugin(), name="falling-ball")
    try:
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT, gravity=(0, 0, -9.81)))
        scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 1), radius=0.05), material=FallingBall())
        scene.build(n_envs=2)
        for _ in range(3):
            scene.step()
        scene.set_gravity(torch.tensor(G_NEW))
        assert scene.falling_ball_solver.gravity_given == G_NEW
        for _ in range(4):
            scene.step()
        expected = (torch.tensor([0, 0, -9.81], dtype=torch.float64) * 3 + torch.tensor(G_NEW) * 4) * DT
        vel = scene.get_state().solvers_state[scene.solvers.index(scene.falling_ball_solver)].vel
        torch.testing.assert_close(vel, expected.to(vel.dtype).expand(2, 1, 3), atol=1e-12, rtol=0)
    finally:
        plugins.unregister_plugin(name)


def test_entities_are_named_and_found_by_name_or_uid(falling):
    scene, plane, box = falling
    assert box.name == "crate" and plane.name == f"plane_{plane.uid.short()}"  # Genesis World's default
    assert len(plane.uid.short()) == 7 and plane.uid.short() != box.uid.short()
    assert scene.entity_names == (plane.name, "crate")
    assert scene.get_entity("crate") is box and scene.get_entity(uid=plane.uid.short()) is plane
    with pytest.raises(gs.OptionError, match=r"no entity of this scene has name='barrel'.*'crate'"):
        scene.get_entity("barrel")
    with pytest.raises(gs.OptionError, match=r"no entity of this scene has uid='zzzzzzz'"):
        scene.get_entity(uid="zzzzzzz")
    with pytest.raises(gs.OptionError, match="exactly one of name and uid"):
        scene.get_entity()
    with pytest.raises(gs.OptionError, match="exactly one of name and uid"):
        scene.get_entity("crate", uid=box.uid.short())


def test_a_duplicate_name_is_refused_at_add_entity_and_adds_nothing(tmp_path):
    pytest.importorskip("genesis_rigid")
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1)), name="crate")
    with pytest.raises(gs.OptionError, match="name='crate' is already the name of another entity"):
        scene.add_entity(gs.morphs.Sphere(radius=0.1), name="crate")
    with pytest.raises(gs.OptionError, match="name=3 must be a non-empty string"):
        scene.add_entity(gs.morphs.Sphere(radius=0.1), name=3)
    assert scene.entity_names == ("crate",)
    urdf = tmp_path / "arm_file.urdf"
    urdf.write_text('<robot name="tiny_arm"><link name="base"><inertial><mass value="1"/>'
                    '<inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>')
    robot = scene.add_entity(gs.morphs.URDF(file=str(urdf)))
    assert robot.name == f"tiny_arm_{robot.uid.short()}"  # the robot's own name, as Genesis World's default
    capsule = scene.add_entity(gs.morphs.Capsule(radius=0.05, height=0.2))
    assert capsule.name == f"rigid_{capsule.uid.short()}"


def test_a_destroyed_scene_refuses_every_later_call():
    pytest.importorskip("genesis_rigid")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)))
    scene.build()
    scene.step()
    scene.destroy()
    assert scene.coupler is None and scene.solvers == []  # what the scene held is let go
    for call in (scene.step, scene.get_state, scene.reset, box.get_pos, lambda: scene.rigid_solver,
                 lambda: scene.set_gravity((0, 0, -1)), scene.build, lambda: scene.get_entity(box.name),
                 lambda: scene.add_entity(gs.morphs.Sphere(radius=0.1))):
        with pytest.raises(gs.SceneError, match=r"the scene was destroyed \(scene.destroy\(\)\); make a new scene"):
            call()
    scene.destroy()  # again: nothing to do


# -- what Genesis World's example scripts call: the solver's qpos field, visualizer.update, a camera looking down --

def test_rigid_solver_qpos_is_genesis_field_of_every_entity_qpos():
    """rigid/closed_loop.py reads `scene.sim.rigid_solver.qpos.to_numpy()[:, 0]` and writes it back with
    `from_numpy(q[:, None])`: [n_qs, n_envs], the entities' qpos in solver order; a write moves the links and keeps
    the velocities (a field write, not set_qpos' zeroing)."""
    pytest.importorskip("genesis_rigid")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)))
    ball = scene.add_entity(gs.morphs.Sphere(pos=(1, 0, 1), radius=0.1))
    scene.build()
    rigid = scene.sim.rigid_solver
    assert rigid.qpos.shape == (14, 1)
    q = rigid.qpos.to_numpy()
    np.testing.assert_allclose(q[:, 0], [0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0], atol=1e-12)
    box.set_dofs_velocity([0.0, 0.0, 2.0, 0.0, 0.0, 0.0])
    q[7:10, 0] = (2.0, 3.0, 4.0)
    q[3:7, 0] = (2.0, 0.0, 0.0, 0.0)  # a quaternion of norm 2: normalised, as set_qpos does
    rigid.qpos.from_numpy(q)
    np.testing.assert_allclose(ball.get_pos().cpu().numpy(), (2.0, 3.0, 4.0), atol=1e-12)  # the link moved
    np.testing.assert_allclose(box.get_quat().cpu().numpy(), (1.0, 0.0, 0.0, 0.0), atol=1e-12)
    np.testing.assert_allclose(box.get_dofs_velocity().cpu().numpy()[2], 2.0)  # kept
    rigid.set_qpos([0.5], qs_idx=[2])
    np.testing.assert_allclose(rigid.get_qpos(qs_idx=[2, 9]).cpu().numpy(), (0.5, 4.0), atol=1e-12)
    with pytest.raises(gs.InvalidStateError, match=r"shape \(14,\), expected \(14, 1\)"):
        rigid.qpos.from_numpy(q[:, 0])


def test_rigid_solver_qpos_is_per_environment():
    pytest.importorskip("genesis_rigid")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)))
    scene.build(n_envs=3)
    q = scene.sim.rigid_solver.qpos.to_numpy()
    assert q.shape == (7, 3)
    q[2] = (1.0, 2.0, 3.0)
    scene.sim.rigid_solver.qpos.from_numpy(q)
    np.testing.assert_allclose(box.get_pos().cpu().numpy()[:, 2], (1.0, 2.0, 3.0), atol=1e-12)


def test_visualizer_update_sends_the_current_state_to_the_viewer(monkeypatch):
    """The IK scripts (rigid/ik_franka.py) set a pose without stepping and call `scene.visualizer.update()`: with
    a viewer the state is sent to it, without one nothing happens."""
    from genesis_core.render.debug import Visualizer

    scene = gs.Scene()
    scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1)))
    scene.build()
    assert scene.visualizer.update() is None  # no viewer: nothing to do

    class FakeViewer:
        def __init__(self):
            self.calls = []

        def update(self, force=False):
            self.calls.append(force)

    fake = FakeViewer()
    monkeypatch.setattr(Visualizer, "viewer", property(lambda self: fake))
    scene.visualizer.update()
    scene.visualizer.update(force=False, auto=True)
    assert fake.calls == [True, False]


def test_a_camera_looking_straight_down_with_up_z_keeps_the_world_axes():
    """rendering/moving_camera.py moves its camera over its lookat point (pos (0, 0, 2.5), lookat (0, 0, 0.5),
    up +z): Genesis World then keeps the world's axes (right +x, up +y); one looking straight up keeps +y as its up
    (right -x)."""
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1)))
    cam = scene.add_camera(res=(32, 24), pos=(3.5, 0.0, 2.5), lookat=(0, 0, 0.5))
    scene.build()
    cam.set_pose(pos=(0.0, 0.0, 2.5))
    T = cam.transform.cpu().numpy()
    np.testing.assert_allclose(T[:3, :3], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(T[:3, 3], (0.0, 0.0, 2.5))
    cam.set_pose(pos=(0.0, 0.0, -1.0))  # looking up: back is -z, up +y, right -x
    np.testing.assert_allclose(cam.transform.cpu().numpy()[:3, :3], np.diag([-1.0, 1.0, -1.0]), atol=1e-12)
    assert cam.render(rgb=True)[0].shape[-3:] == (24, 32, 3)
    with pytest.raises(gs.OptionError, match="is zero"):
        cam.set_pose(up=(0.0, 0.0, 0.0))


def test_add_entity_takes_the_surface_third_as_genesis_world():
    """coupling/cloth_attached_to_rigid.py calls `scene.add_entity(morph, material, surface)`."""
    scene = gs.Scene()
    surface = gs.surfaces.Default(color=(0.2, 0.4, 0.8, 1.0))
    box = scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1)), gs.materials.Rigid(), surface)
    assert scene._surfaces[box.idx] is surface
    with pytest.raises(TypeError):
        scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1)), None, surface, "extra")


def test_fem_entity_init_positions_are_its_vertices_at_build():
    """fem_hard_and_soft_constraint.py pins vertices at `entity.init_positions[idx]`: the vertices where the morph
    put them, which the state holds at build and keeps after the entity moves."""
    pytest.importorskip("genesis_fem")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3))
    cube = scene.add_entity(morph=gs.morphs.Box(pos=(0.3, 0.2, 1.0), size=(0.2, 0.2, 0.2)),
                            material=gs.materials.FEM.Elastic())
    scene.build()
    p0 = cube.init_positions
    assert isinstance(p0, torch.Tensor) and p0.shape == (cube.n_vertices, 3)
    np.testing.assert_allclose(p0.cpu().numpy(), cube.get_particles_pos().cpu().numpy())
    np.testing.assert_allclose(p0.cpu().numpy().min(0), (0.2, 0.1, 0.9), atol=1e-6)
    scene.step()
    assert not torch.equal(cube.get_particles_pos(), p0)  # fallen a little; init_positions stays
    np.testing.assert_allclose(cube.init_positions.cpu().numpy(), p0.cpu().numpy())
