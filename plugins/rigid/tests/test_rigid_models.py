"""Models from ../shared/assets and the project's own, control, and the entity API with envs_idx."""


import pytest
import torch

import genesis_core as gs
from genesis_rigid import assets


def build(morphs, n_envs=0, dt=1e-2, **rigid):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt), rigid_options=gs.options.RigidOptions(**rigid))
    ents = [scene.add_entity(m) for m in morphs]
    scene.build(n_envs=n_envs)
    return scene, ents


@pytest.mark.parametrize("path, kind, n_dofs, n_qs", [
    ("mjcf/franka_emika_panda/scene.xml", "MJCF", 9, 9),
    ("urdf/panda_bullet/panda.urdf", "URDF", 15, 16),
    ("mjcf/ant.xml", "MJCF", 14, 15),
    ("mjcf/humanoid.xml", "MJCF", 27, 28),
])
def test_shared_models_load_and_step(shared_assets, path, kind, n_dofs, n_qs):
    """The panda (MJCF and URDF, floating base by default), MuJoCo's ant and humanoid load with their joint
    counts (a free joint: 6 dofs, 7 qs) and step without producing non-finite numbers."""
    scene, (robot,) = build([getattr(gs.morphs, kind)(file=f"{shared_assets}/{path}")])
    assert (robot.n_dofs, robot.n_qs) == (n_dofs, n_qs)
    for _ in range(20):
        scene.step()
    assert torch.isfinite(robot.get_qpos()).all() and torch.isfinite(robot.get_links_pos()).all()


def test_own_models_load():
    for name, dofs in [("pendulum.xml", 1), ("double_pendulum.xml", 2), ("cartpole.xml", 2)]:
        _, (robot,) = build([gs.morphs.MJCF(default_armature=None, file=assets.path(name))])
        assert robot.n_dofs == dofs
    _, (arm,) = build([gs.morphs.URDF(default_armature=None, file=assets.path("arm.urdf"), fixed=True)])
    assert arm.n_dofs == 3 and [l.name for l in arm.links] == ["base", "shoulder", "upper_arm", "forearm"]
    assert arm.get_link("forearm").idx == arm.link_start + 3


def test_bad_model_files_raise_option_error(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body><joint type='warp'/></body></worldbody></mujoco>")
    scene = gs.Scene()
    with pytest.raises(gs.OptionError, match="unknown type 'warp'"):
        scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(bad)))
    bad.write_text("<robot><link name='a'/><link name='b'/></robot>")
    with pytest.raises(gs.OptionError, match="one root link"):
        scene.add_entity(gs.morphs.URDF(default_armature=None, file=str(bad)))
    bad.write_text("<mujoco><worldbody>")
    with pytest.raises(gs.OptionError, match="not well-formed"):
        scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(bad)))


def test_panda_holds_a_target_pose_under_position_control(shared_assets):
    """With the MJCF actuators' gains (kp 2000-4500, kv 200-450) the arm holds a pose against gravity within
    1e-2 rad (the steady-state error is the gravity torque over kp)."""
    scene, (panda, _) = build([gs.morphs.MJCF(default_armature=None, file=f"{shared_assets}/mjcf/franka_emika_panda/panda.xml"),
                               gs.morphs.Plane()])
    target = torch.tensor([0.3, -0.5, 0.2, -2.0, 0.1, 1.8, 0.5, 0.02, 0.02], dtype=torch.float64)
    assert panda.get_dofs_kp()[:7].tolist() == [4500, 4500, 3500, 3500, 2000, 2000, 2000]
    panda.set_dofs_kp([100.0, 100.0], dofs_idx_local=[7, 8])
    panda.set_dofs_kv([10.0, 10.0], dofs_idx_local=[7, 8])
    panda.control_dofs_position(target)
    for _ in range(300):
        scene.step()
    assert (panda.get_dofs_position() - target).abs().max() < 1e-2
    assert panda.get_dofs_velocity().abs().max() < 1e-2


def test_ant_dropped_on_the_plane_comes_to_rest_standing(shared_assets):
    """The ant starts with its ankles outside their limits and its legs flat: the limits lift it (gently:
    corrections are capped) and it settles upright on its four feet, torso clear of the floor."""
    scene, (ant,) = build([gs.morphs.MJCF(default_armature=None, file=f"{shared_assets}/mjcf/ant.xml", pos=(0, 0, 0.3))])
    floor_z = float(ant.get_link("world").get_pos()[2])
    highest = 0.0
    for _ in range(300):
        scene.step()
        highest = max(highest, float(ant.get_pos()[2]) - floor_z)
    torso = float(ant.get_pos()[2]) - floor_z
    assert torso > 0.25 + 0.05, f"torso centre {torso:.3f} m above the floor: lying on it"
    assert highest < 1.0, "the ant was launched"
    assert float(ant.get_quat()[0]) > 0.99, "not upright"
    assert ant.get_vel().norm() < 0.05 and ant.get_ang().norm() < 0.05
    feet = scene.rigid_solver.scratch["s_con_i"][0, 0]
    assert int(feet.sum()) == 4, "not standing on its four feet"


def test_humanoid_falls_and_lands_on_the_floor(shared_assets):
    scene, (hum,) = build([gs.morphs.MJCF(default_armature=None, file=f"{shared_assets}/mjcf/humanoid.xml")], dt=5e-3)
    for _ in range(400):
        scene.step()
    z = hum.get_links_pos()[:-1, 2]
    assert float(z.min()) > -0.05, "a link went through the floor"
    assert torch.isfinite(hum.get_qpos()).all()


def test_cartpole_force_control_and_envs_idx():
    """Force on the cart of environment 1 only. From rest with the pole upright, M qacc = (F, 0) with
    M = [[m_c + m_p, m_p l], [m_p l, I_p + m_p l^2]] gives the cart F (I_p + m_p l^2) / det M; environments 0 and
    2 stay bitwise as they were."""
    scene, (cp,) = build([gs.morphs.MJCF(default_armature=None, file=assets.path("cartpole.xml"))], n_envs=3, dt=1e-3)
    cp.control_dofs_force([[2.2]], dofs_idx_local=[0], envs_idx=[1])
    scene.step()
    vel = cp.get_dofs_velocity()
    m_c, m_p, l, i_p = 1.0, 0.1, 0.5, 0.00833
    det = (m_c + m_p) * (i_p + m_p * l * l) - (m_p * l) ** 2
    assert float(vel[1, 0]) == pytest.approx(2.2 * (i_p + m_p * l * l) / det * 1e-3, rel=1e-6)
    assert vel[0].abs().max() == 0 and vel[2].abs().max() == 0
    assert cp.get_dofs_control_force()[1, 0] == 2.2 and cp.get_dofs_control_force()[0, 0] == 0


def test_setters_and_controls_touch_only_envs_idx():
    scene, (_, box, arm) = build([gs.morphs.Plane(), gs.morphs.Box(pos=(0, 0, 0.5), size=(0.1, 0.1, 0.1)),
                                  gs.morphs.URDF(default_armature=None, file=assets.path("arm.urdf"), fixed=True, pos=(1, 0, 0))], n_envs=4)
    for _ in range(3):
        scene.step()
    before = {k: v.clone() for k, v in scene.rigid_solver.state.tensors.items()}
    box.set_pos(torch.tensor([[0.0, 0.0, 2.0], [0.5, 0.5, 1.0]], dtype=torch.float64), envs_idx=[1, 3])
    box.set_quat(torch.tensor([[0.0, 1.0, 0.0, 0.0]], dtype=torch.float64), envs_idx=[3])
    arm.set_dofs_position(torch.tensor([[0.5, -0.3, 0.2]], dtype=torch.float64), envs_idx=[2])
    arm.set_dofs_kp([50.0, 50.0, 50.0], envs_idx=[0])
    arm.control_dofs_position([[0.1, 0.2, 0.3]], envs_idx=[0])
    after = scene.rigid_solver.state.tensors
    touched = {"qpos": [1, 2, 3], "dofs_vel": [1, 2, 3], "links_pos": [1, 2, 3], "links_quat": [1, 2, 3],
               "dofs_kp": [0], "dofs_ctrl_pos": [0], "dofs_ctrl_mode": [0]}
    batched_by_frame = [n for n, spec in scene.rigid_solver.state.specs.items() if spec.frames]
    for name, x in after.items():
        for b in range(4):
            if b in touched.get(name, []):
                continue
            now, then = (x[:, b], before[name][:, b]) if name in batched_by_frame else (x[b], before[name][b])
            assert torch.equal(now, then), f"{name}: environment {b} was not in envs_idx but changed"
    assert box.get_pos()[3].tolist() == [0.5, 0.5, 1.0] and box.get_quat()[3].tolist() == [0, 1, 0, 0]
    assert arm.get_dofs_position()[2].tolist() == pytest.approx([0.5, -0.3, 0.2])


def test_entity_api_errors():
    scene, (box, pend) = build([gs.morphs.Box(pos=(0, 0, 1)), gs.morphs.MJCF(default_armature=None, file=assets.path("pendulum.xml"))],
                               n_envs=2)
    with pytest.raises(gs.OptionError, match="finite"):
        box.control_dofs_position([float("nan")], dofs_idx_local=[3])
    with pytest.raises(gs.OptionError, match="dofs_idx_local: indices must lie in \\[0, 1\\)"):
        pend.control_dofs_force([1.0], dofs_idx_local=[3])
    with pytest.raises(gs.OptionError, match="neither free nor welded to the world"):
        pend.set_pos([0, 0, 1])
    with pytest.raises(gs.OptionError, match="expected a value of shape \\(2, 1\\)"):
        pend.control_dofs_force(torch.ones(3, 1))
    with pytest.raises(gs.OptionError, match=r"dofs_kp\[.*\] = -.*expected a value in \[0.0, inf\]"):
        pend.set_dofs_kp([-1.0])
    with pytest.raises(gs.OptionError, match="no link 'nope'"):
        pend.get_link("nope")
    assert box.get_pos().shape == (2, 3) and pend.get_dofs_position().shape == (2, 1)
    assert pend.get_links_quat().shape == (2, 1, 4) and box.get_ang().shape == (2, 3)


def test_a_scene_of_fixed_bodies_only_steps():
    """No joints at all: nothing moves, nothing is read out of range."""
    scene, (_, box) = build([gs.morphs.Plane(), gs.morphs.Box(pos=(0, 0, 0.5), fixed=True)], n_envs=2)
    for _ in range(3):
        scene.step()
    assert box.n_dofs == 0 and box.get_qpos().shape == (2, 0)
    assert box.get_pos().tolist() == [[0.0, 0.0, 0.5], [0.0, 0.0, 0.5]]


def test_each_link_knows_the_dofs_of_its_kinematic_tree():
    """A constraint row loops over the dofs of its links' trees only: the ranges come from the tree structure, and
    a layout whose tree dofs interleave falls back to all dofs (a range would take in another tree's dofs)."""
    import numpy as np

    from genesis_rigid.layout import LI_TREE_HI, LI_TREE_LO
    from genesis_rigid.compile import tree_dof_ranges

    scene, (_, box, arm) = build([gs.morphs.Plane(), gs.morphs.Box(pos=(0, 0, 0.5), size=(0.1, 0.1, 0.1)),
                                  gs.morphs.MJCF(default_armature=None, file=assets.path("double_pendulum.xml"))])
    solver = scene.rigid_solver
    link_i = solver.model["link_i"].to_numpy()[:solver.n_links]
    ranges = {tuple(r) for r in link_i[:, LI_TREE_LO:LI_TREE_HI + 1]}
    assert ranges == {(0, 0), (0, 6), (6, 8)}  # the plane's tree has no dofs; the box's six; the pendulum's two

    # two trees, each a root link with a child, whose dofs interleave: 0, 2 and 1, 3
    links = [dict(parent=-1, dofs=(0, 1)), dict(parent=-1, dofs=(1, 2)), dict(parent=0, dofs=(2, 3)),
             dict(parent=1, dofs=(3, 4))]
    assert np.array_equal(tree_dof_ranges(links, 4), [[0, 4]] * 4)
    links[1], links[2] = dict(parent=0, dofs=(1, 2)), dict(parent=-1, dofs=(2, 3))
    links[3] = dict(parent=2, dofs=(3, 4))
    assert np.array_equal(tree_dof_ranges(links, 4), [[0, 2], [0, 2], [2, 4], [2, 4]])


def test_the_taichi_arrays_of_a_dropped_scene_are_freed(monkeypatch):
    """Taichi frees a collected scalar ndarray but never a vector or matrix one: the runtime frees those of a
    collected scene itself (a process that builds many scenes would otherwise grow without bound)."""
    import gc

    import taichi as ti

    import genesis_core._runtime as rt

    freed = []
    free = rt._free_taichi_array
    monkeypatch.setattr(rt, "_free_taichi_array", lambda arr, generation: freed.append(arr) or free(arr, generation))
    scene, _ = build([gs.morphs.Plane(), gs.morphs.Box(pos=(0, 0, 0.1), size=(0.2, 0.2, 0.2))], n_envs=2)
    scene.step()
    kinds = [type(a) for a in scene.rigid_solver.scratch.values() if isinstance(a, ti.lang._ndarray.Ndarray)]
    vectors = sum(1 for k in kinds if getattr(k, "__del__", None) is None)
    assert vectors >= 10 and freed == []
    del scene, _
    gc.collect()
    assert len(freed) == vectors


TWO_FIXED = """<robot name="arm">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.01" iyy="0.01" izz="0.01"/></inertial></link>
  <link name="mount"><inertial><origin xyz="0.02 0 0.01"/><mass value="0.5"/>
    <inertia ixx="0.002" iyy="0.001" izz="0.003" ixy="0.0002"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="1.2"/>
    <inertia ixx="0.001" iyy="0.02" izz="0.02"/></inertial>
    <collision><origin xyz="0.2 0 0"/><geometry><box size="0.4 0.04 0.04"/></geometry></collision></link>
  <link name="tip"><inertial><origin xyz="0.03 0.01 0" rpy="0.3 0 0.2"/><mass value="0.7"/>
    <inertia ixx="0.0028" iyy="0.002" izz="0.001"/></inertial>
    <collision><geometry><sphere radius="0.05"/></geometry></collision></link>
  <link name="marker"/>
  <joint name="to_mount" type="fixed"><parent link="base"/><child link="mount"/>
    <origin xyz="0 0 0.1" rpy="0 0.2 0"/></joint>
  <joint name="shoulder" type="revolute"><parent link="mount"/><child link="arm"/><axis xyz="0 1 0"/>
    <origin xyz="0.05 0 0.02" rpy="0.1 0 0"/><limit lower="-3" upper="3"/></joint>
  <joint name="to_tip" type="fixed"><parent link="arm"/><child link="tip"/><origin xyz="0.4 0 0" rpy="0 0.5 0.3"/></joint>
  <joint name="to_marker" type="fixed"><parent link="tip"/><child link="marker"/><origin xyz="0.05 0 0"/></joint>
</robot>
"""


def test_urdf_fixed_links_merge_as_genesis_with_the_same_dynamics(tmp_path):
    """Genesis World's merge_fixed_links (its default): links on fixed joints join their parents (mass, centre of
    mass and inertia combined, geoms moved), so a free arm of five links becomes two, and it swings and tumbles
    exactly as the unmerged one (float64, 1e-10 after 0.5 s); links_to_keep keeps a link; asking for a merged link
    names its holder."""
    path = tmp_path / "arm.urdf"
    path.write_text(TWO_FIXED)

    def run(**kw):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, gravity=(0.0, 0.0, -9.81)))
        robot = scene.add_entity(gs.morphs.URDF(default_armature=None, file=str(path), **kw))
        scene.build()
        robot.set_dofs_velocity([0.3, -0.2, 0.1, 1.0, -2.0, 0.5, 3.0])
        for _ in range(250):
            scene.step()
        return robot, robot.get_qpos(), robot.get_links_pos()

    merged, q_m, _ = run()
    full, q_f, _ = run(merge_fixed_links=False)
    kept, q_k, pos_k = run(links_to_keep=["marker"])
    assert [l.name for l in merged.links] == ["base", "arm"]
    assert [l.name for l in full.links] == ["base", "mount", "arm", "tip", "marker"]
    assert [l.name for l in kept.links] == ["base", "arm", "marker"]
    assert float((q_m - q_f).abs().max()) < 1e-10 and float((q_k - q_f).abs().max()) < 1e-10
    assert abs(float(q_f[7])) > 0.1 and float(q_f[:3].norm()) > 0.1  # it swung and fell
    assert merged.get_mass() == pytest.approx(full.get_mass(), rel=1e-12)
    # the kept marker sits where the unmerged one does
    _, _, pos_f = run(merge_fixed_links=False)
    assert float((pos_k[2] - pos_f[4]).abs().max()) < 1e-10
    with pytest.raises(gs.OptionError, match="merged into 'arm'.*links_to_keep"):
        merged.get_link("tip")
    with pytest.raises(gs.OptionError, match="links_to_keep names no link"):
        gs.Scene().add_entity(gs.morphs.URDF(default_armature=None, file=str(path), links_to_keep=["nope"]))
