"""set_pos / set_quat of an entity whose base is welded to the world (`fixed=True`, or a file's jointless root):
its pose per environment, a declared state (fixed_base_pos / fixed_base_quat) that snapshots, resets and
checkpoints carry, moved kinematically between steps; other environments untouched bit for bit."""

import math

import pytest
import torch

import genesis_core as gs

F64 = torch.float64


def table_and_ball(n_envs=3, **sensor):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    scene.add_entity(gs.morphs.Plane())
    table = scene.add_entity(gs.morphs.Box(size=(0.4, 0.4, 0.1), pos=(0, 0, 0.5), fixed=True))
    ball = scene.add_entity(gs.morphs.Sphere(radius=0.05, pos=(1.0, 0, 1.0)))
    sensors = [scene.add_sensor(gs.sensors.Raycaster(
        pattern=gs.sensors.GridPattern(resolution=1.0, size=(0.0, 0.0), direction=(0.0, 0.0, -1.0)),
        entity_idx=table.idx, pos_offset=(0.0, 0.0, -0.06), max_range=10.0))] if sensor else []
    scene.build(n_envs=n_envs)
    return scene, table, ball, sensors


def test_moved_table_catches_the_ball_in_its_environment_only():
    scene, table, ball, _ = table_and_ball()
    ref = [ball.get_pos().clone()]
    table.set_pos(torch.tensor([[1.0, 0.0, 0.5], [1.0, 0.0, 0.3]], dtype=F64), envs_idx=[1, 2])
    assert table.get_pos().tolist() == [[0, 0, 0.5], [1.0, 0, 0.5], [1.0, 0, 0.3]]
    for _ in range(120):
        scene.step()
        ref.append(ball.get_pos().clone())
    z = ball.get_pos()[:, 2]
    # env 0: the table is elsewhere, the ball rests on the ground; envs 1 and 2: on the table's top
    assert abs(float(z[0]) - 0.05) < 2e-3
    assert abs(float(z[1]) - 0.60) < 2e-3 and abs(float(z[2]) - 0.40) < 2e-3
    # env 0 follows the trajectory of a scene whose table was never moved, bit for bit
    scene2, _, ball2, _ = table_and_ball()
    for k in range(120):
        scene2.step()
    assert torch.equal(ball2.get_pos()[0], ball.get_pos()[0])


def test_turned_table_tilts_its_top_and_resets():
    scene, table, ball, _ = table_and_ball(n_envs=2)
    half = math.radians(30) / 2
    table.set_quat([math.cos(half), math.sin(half), 0.0, 0.0], envs_idx=[1])
    top = [g for g in table.geoms][0]
    normal = torch.tensor([0.0, -math.sin(2 * half), math.cos(2 * half)], dtype=F64)
    from genesis_core.utils.geom import transform_by_quat

    up = transform_by_quat(torch.tensor([0.0, 0.0, 1.0], dtype=F64).expand(2, 3), top.get_quat())
    assert torch.allclose(up[1], normal, atol=1e-12) and up[0].tolist() == [0.0, 0.0, 1.0]
    snap = scene.get_state()
    table.set_pos([[0, 0, 2.0], [0, 0, 2.0]])
    table.set_quat([1.0, 0.0, 0.0, 0.0])
    scene.reset(snap, envs_idx=[1])
    assert table.get_pos().tolist() == [[0, 0, 2.0], [0, 0, 0.5]]
    assert torch.allclose(table.get_quat()[1], torch.tensor([math.cos(half), math.sin(half), 0, 0], dtype=F64))


def test_ray_caster_rides_the_moved_base():
    """A downward ray from under the table reads the distance to the ground from where the table was moved."""
    scene, table, _, (ray,) = table_and_ball(n_envs=2, sensor=True)
    scene.step()
    assert torch.allclose(ray.read().distances.reshape(2), torch.tensor([0.44, 0.44], dtype=F64), atol=1e-9)
    table.set_pos([[0.0, 0.0, 1.5]], envs_idx=[0])
    scene.step()
    assert torch.allclose(ray.read().distances.reshape(2), torch.tensor([1.44, 0.44], dtype=F64), atol=1e-9)


MULTI_ROOT = """<mujoco>
  <worldbody>
    <body name="a" pos="0 0 1"><geom type="box" size="0.1 0.1 0.1"/></body>
    <body name="b" pos="1 0 1" euler="0 0 90"><geom type="box" size="0.1 0.2 0.1"/></body>
  </worldbody>
</mujoco>"""


def test_jointless_roots_of_a_file_move_as_one(tmp_path):
    path = tmp_path / "two.xml"
    path.write_text(MULTI_ROOT)
    scene = gs.Scene()
    two = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build(n_envs=2)
    half = math.pi / 4  # a quarter turn about z
    two.set_quat([math.cos(half), 0.0, 0.0, math.sin(half)], envs_idx=[0])
    two.set_pos([0.0, 0.0, 2.0], envs_idx=[0])
    pos = two.get_links_pos()
    assert torch.allclose(pos[0], torch.tensor([[0, 0, 2.0], [0, 1.0, 2.0]], dtype=F64), atol=1e-12)
    assert pos[1].tolist() == [[0, 0, 1.0], [1.0, 0, 1.0]]


def test_bad_moves_are_refused_with_nothing_changed(tmp_path):
    scene, table, ball, _ = table_and_ball(n_envs=2)
    st = scene.rigid_solver.state
    before = {k: st.tensors[k].clone() for k in ("fixed_base_pos", "fixed_base_quat", "links_pos")}
    with pytest.raises(gs.OptionError, match="finite"):
        table.set_pos([[0, 0, float("nan")]], envs_idx=[1])
    with pytest.raises(gs.OptionError, match="non-zero quaternions"):
        table.set_quat([0.0, 0.0, 0.0, 0.0])
    with pytest.raises(gs.OptionError, match="shape"):
        table.set_pos([1.0, 2.0])
    for k, v in before.items():
        assert torch.equal(st.tensors[k], v), k
    path = tmp_path / "hinged.xml"
    path.write_text('<mujoco><worldbody><body pos="0 0 1"><joint type="hinge"/><geom type="sphere" size="0.1"/>'
                    '</body></worldbody></mujoco>')
    scene = gs.Scene()
    hinged = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build()
    with pytest.raises(gs.OptionError, match="neither free nor welded"):
        hinged.set_pos([0, 0, 1])


def test_links_initial_pose_is_genesis_worlds_link_pos():
    """RigidLink.pos / .quat: the initial pose in the parent's frame (a base: where the morph put it), which
    set_pos of a base link's own pos brings a moved body back to."""
    scene, table, ball, _ = table_and_ball(n_envs=2)
    assert ball.base_link.pos.tolist() == [1.0, 0.0, 1.0] and ball.base_link.quat.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert table.base_link.pos.tolist() == [0.0, 0.0, 0.5]
    for _ in range(5):
        scene.step()
    ball.set_pos(ball.base_link.pos)
    assert ball.get_pos().tolist() == [[1.0, 0.0, 1.0]] * 2
