"""Rigid bodies far from the world origin, in single precision.

The dynamics express each link's spatial quantities about its own origin (kernels_kinematics), not about the world
origin: about the origin, a body 1 km away has an inertia of m |c|^2 ~ 1e6 m beside its own ~1e-3 m, which float32
cannot hold, and such a scene went NaN at its second step. Here the same systems run side by side in one scene, one
copy at the origin and the others kilometres away, and move alike. One tree 300 m long moves in float32 as in
float64; a joint-space inertia float32 cannot factorise (mass 300 m from a light base) is refused at load.
"""

import numpy as np
import pytest
import torch

import genesis_core as gs

# a free ball dropped on the floor, a hinged pendulum swinging from the world, and a free two-body chain (a hinge
# between them) tumbling in the air: contacts, a fixed-base tree and a floating tree
SYSTEM = """
<mujoco>
  <worldbody>
    <body name="ball" pos="{x} {y} 0.3">
      <freejoint/>
      <geom type="sphere" size="0.1" density="500"/>
    </body>
    <body name="pendulum" pos="{x2} {y} 1.0">
      <joint type="hinge" axis="0 1 0" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0.1" size="0.04"/>
    </body>
    <body name="tumbler" pos="{x3} {y} 15.0">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.02"/>
      <body pos="0.15 0 0">
        <joint type="hinge" axis="0 0 1" pos="-0.05 0 0"/>
        <geom type="box" size="0.05 0.03 0.03"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
OFFSETS = [(0.0, 0.0), (1000.0, 1000.0), (-5000.0, 3000.0)]


@pytest.fixture
def float32():
    gs.destroy()
    gs.init(backend=gs.cpu, precision="32", seed=0, logging_level="warning")
    try:
        yield
    finally:
        gs.destroy()
        gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")


def test_systems_kilometres_away_move_as_at_the_origin_in_float32(float32, tmp_path):
    """Three copies of a system (a ball falling onto the floor, a pendulum, a tumbling two-body chain) at the origin,
    1.4 km and 5.8 km away, in one float32 scene, 1.5 s: every copy stays finite and its coordinates relative to its
    place match the origin copy's within what float32's resolution at that distance allows (the ball rests on the
    floor at its radius to 0.5 mm; the pendulum's angle within 1e-4 rad of the origin copy's; the tumbler's
    velocities within 1e-5 m/s per metre of distance). Before, the far copies went NaN at the second step."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.005))
    scene.add_entity(gs.morphs.Plane())
    systems = []
    for i, (x, y) in enumerate(OFFSETS):
        path = tmp_path / f"system{i}.xml"
        path.write_text(SYSTEM.format(x=x, y=y, x2=x + 0.6, x3=x - 0.6))
        systems.append(scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(path))))
    scene.build()
    spin = torch.tensor([0.3, -0.2, 1.0, 2.0, -1.0, 3.0, 4.0])  # the tumbler's dofs: free (lin, ang), then its hinge
    for e in systems:
        vel = torch.zeros(e.n_dofs)
        vel[7:] = spin
        vel[6] = 1.5  # the pendulum pushed
        e.set_dofs_velocity(vel)
    for _ in range(300):
        scene.step()
    q = [e.get_qpos().double() for e in systems]
    v = [e.get_dofs_velocity().double() for e in systems]
    for (x, y), qi, vi in zip(OFFSETS, q, v):
        print((x, y), "ball", (qi[:3] - torch.tensor([x, y, 0.0])).tolist(), "pendulum", float(qi[7] - q[0][7]),
              "tumbler", float(qi[8] - x - q[0][8]), float(qi[10] - q[0][10]), "velocities",
              float((vi - v[0]).abs().max()), "orientation", float((qi[11:] - q[0][11:]).abs().max()))
        assert torch.isfinite(qi).all() and torch.isfinite(vi).all(), (x, y)
        # the ball: resting on the floor where it fell
        assert float(qi[2]) == pytest.approx(0.1, abs=5e-4)
        assert float(qi[0] - x) == pytest.approx(0.0, abs=1e-3) and float(qi[1] - y) == pytest.approx(0.0, abs=1e-3)
        # the tumbler: its centre where the origin copy's is, relative to its place
        assert float(qi[8] - x) == pytest.approx(float(q[0][8]), abs=2e-3)
        assert float(qi[10]) == pytest.approx(float(q[0][10]), abs=2e-3)
    for (x, y), qi, vi in zip(OFFSETS[1:], q[1:], v[1:]):
        # float32 holds a world position to ~6e-5 m at 1 km and ~5e-4 m at 6 km: the tumbler's links, 0.15 m
        # apart, are placed that coarsely each step, so its motion departs from the origin copy's in proportion
        # (measured: velocities 1e-3 m/s at 1.4 km, 1.2e-2 at 5.8 km, of up to 14 m/s)
        tol = 1e-5 * float(np.hypot(x, y))
        assert float(qi[7]) == pytest.approx(float(q[0][7]), abs=1e-4)  # the pendulum's angle
        assert float((vi[6:] - v[0][6:]).abs().max()) < tol, (vi[6:], v[0][6:])  # pendulum and tumbler velocities
        assert float((qi[11:] - q[0][11:]).abs().max()) < 0.1 * tol  # the tumbler's orientation and hinge
    # the tumbler moved: a check that could not pass by standing still
    assert float(v[0][7:].abs().max()) > 0.5


def test_spatial_quantities_are_about_each_links_origin(float32, tmp_path):
    """The solver's per-link reference point is the link's position, and the centres of mass the dynamics use are
    relative to it (small numbers) while the collider view gives them in the world."""
    x, y = 1000.0, -2000.0
    path = tmp_path / "system.xml"
    path.write_text(SYSTEM.format(x=x, y=y, x2=x + 0.6, x3=x - 0.6))
    scene = gs.Scene()
    e = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(path)))
    scene.build()
    solver = scene.rigid_solver
    scene.step()
    ref = solver.scratch["s_ref"].to_numpy()[0]
    com = solver.scratch["s_com"].to_numpy()[0]
    pos = solver.state.at("links_pos", solver.frame)[0].cpu().numpy()
    links = list(range(e.link_start, e.link_end))
    assert np.abs(com[links]).max() < 1.0
    np.testing.assert_array_equal(ref[links], pos[links])
    view = solver.collider_view(solver.frame)
    np.testing.assert_allclose(view.body_com[0].cpu().numpy()[links], (ref + com)[links], rtol=0, atol=1e-3)
    assert abs(float(view.body_com[0, e.link_start, 0]) - x) < 1.0


# a free base carrying, 300 m away on a hinge, a small link (10 g, inertia 1e-5): one kinematic tree 300 m long
LONG_TREE = """
<mujoco>
  <worldbody>
    <body name="base" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" density="1000"/>
      <body name="far" pos="300 0 0">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <inertial pos="0 0 -0.05" mass="0.01" diaginertia="1e-5 1e-5 1e-5"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _spin_long_tree(path, steps=50):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.005),
                     rigid_options=gs.options.RigidOptions(enable_collision=False))
    e = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(path)))
    scene.build()
    e.set_dofs_velocity(torch.tensor([0.1, 0.2, 0.0, 0.3, -0.2, 0.1, 2.0]))
    for _ in range(steps):
        scene.step()
    return e.get_qpos().double().cpu().numpy(), e.get_dofs_velocity().double().cpu().numpy()


def test_a_tree_300_m_long_moves_in_float32_as_in_float64(tmp_path):
    """The small link 300 m from its free base, spinning and swinging under gravity for 0.25 s: float32 follows
    float64. About the tree's root, the link's own inertia (1e-5) was what was left of terms m r^2 ~ 900 that
    cancel, and the float32 step went NaN; about each link's origin the numbers are the link's."""
    path = tmp_path / "long.xml"
    path.write_text(LONG_TREE)
    q64, v64 = _spin_long_tree(path)
    gs.destroy()
    gs.init(backend=gs.cpu, precision="32", seed=0, logging_level="warning")
    try:
        q32, v32 = _spin_long_tree(path)
    finally:
        gs.destroy()
        gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")
    print("qpos", np.abs(q32 - q64).max(), "vel", np.abs(v32 - v64).max(), "hinge", q64[7], v64[6])
    assert np.isfinite(q32).all() and np.isfinite(v32).all()
    assert abs(v64[6] - 2.0) > 0.1  # the hinge's speed changed: the link swung under gravity and the spin
    np.testing.assert_allclose(v32, v64, rtol=0, atol=1e-3)
    np.testing.assert_allclose(q32[7], q64[7], rtol=0, atol=1e-4)  # the hinge angle


def test_mass_far_from_a_light_base_is_refused_in_float32_by_name(float32, tmp_path):
    """An 8 kg base whose arm (on a hinge at the base) has its 5 kg centre of mass 300 m away: the base's rotation
    keeps 1e-7 of the inertia around it once the arm is free, which float32 cannot factorise (such a base stepped
    to NaN): refused at load, naming the joint, the link and the offset. In float64 the same file loads."""
    text = LONG_TREE.replace('<body name="far" pos="300 0 0">', '<body name="far" pos="0 0 0">').replace(
        '<inertial pos="0 0 -0.05" mass="0.01" diaginertia="1e-5 1e-5 1e-5"/>',
        '<inertial pos="300 0 -0.05" mass="5" diaginertia="1e-3 1e-3 1e-3"/>')
    path = tmp_path / "heavy.xml"
    path.write_text(text)
    with pytest.raises(gs.ModelFileError, match=r"heavy\.xml.*'base'.*single precision.*'far' carries 5 kg 300 m "
                                                r"from it \(its centre of mass is 300 m from its origin.*precision='64'"):
        gs.Scene().add_entity(gs.morphs.MJCF(default_armature=None, file=str(path)))
    gs.destroy()
    gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")
    gs.Scene().add_entity(gs.morphs.MJCF(default_armature=None, file=str(path)))
