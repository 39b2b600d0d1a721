"""Genesis World's rigid entity, link and joint calls beyond the core set: the structure before scene.build(), geoms,
the mass matrix and inverse weights, joint anchors, link accelerations, free-joint dof positions and quaternion
setters. References: MuJoCo on the same MJCF (mass matrix, body_invweight0, xanchor / xaxis, geom poses, link
accelerations), all in float64, where both evaluate the same formulas (a tolerance of 1e-9 covers the rounding of
sums of a few dozen terms)."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.rotations import quat_to_mat
from genesis_rigid import assets

mujoco = pytest.importorskip("mujoco", reason="MuJoCo is the reference of these tests")

F64 = torch.float64
TOL = 1e-9

# A floating base, a hinge, a ball and a slide, and a welded tip: every joint kind, inertias off their principal
# axes, armature, frames turned away from the world's.
CHAIN = """<mujoco model="tail">
  <compiler angle="radian"/>
  <worldbody>
    <body name="base" pos="0.1 -0.2 1.0" quat="0.9 0.1 0.3 -0.2">
      <freejoint name="root"/>
      <inertial pos="0.02 -0.01 0.03" quat="0.8 0.2 -0.1 0.3" mass="2.0" diaginertia="0.03 0.05 0.04"/>
      <geom name="trunk" type="box" size="0.1 0.08 0.05" contype="0" conaffinity="0"/>
      <body name="arm" pos="0.12 0.0 0.02" quat="0.95 0 0.2 0.1">
        <joint name="shoulder" type="hinge" axis="0.2 1 0.1" pos="0 0 0.01" armature="0.02"/>
        <inertial pos="0 0.01 -0.15" mass="0.7" diaginertia="0.004 0.005 0.001"/>
        <geom name="upper" type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" contype="0" conaffinity="0"/>
        <body name="wrist" pos="0 0 -0.3">
          <joint name="wrist" type="ball" pos="0.01 0 0" armature="0.01"/>
          <inertial pos="0.01 0.02 -0.05" quat="0.7 0.1 0.1 0.7" mass="0.4" diaginertia="0.001 0.002 0.0015"/>
          <geom name="knuckle" type="sphere" size="0.03" contype="0" conaffinity="0"/>
          <body name="finger" pos="0.02 0 -0.08">
            <joint name="slide" type="slide" axis="1 0.3 0" armature="0.05"/>
            <inertial pos="0 0 -0.02" mass="0.15" diaginertia="0.0002 0.0002 0.0001"/>
            <geom name="pad" type="box" size="0.01 0.01 0.02" contype="0" conaffinity="0"/>
            <body name="tip" pos="0 0 -0.05">
              <inertial pos="0 0 -0.01" mass="0.05" diaginertia="0.00002 0.00002 0.00001"/>
              <geom name="nail" type="sphere" size="0.01" contype="0" conaffinity="0"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def chain_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tail") / "chain.xml"
    path.write_text(CHAIN)
    return str(path)


@pytest.fixture(scope="module")
def batched(chain_file):
    """A free box (added first: the chain's indices start after its own) and the chain, 2 environments, no
    contacts (the geoms do not collide, and nothing is under the box)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    box = scene.add_entity(gs.morphs.Box(pos=(2.0, 0.0, 1.0), size=(0.1, 0.2, 0.3)))
    chain = scene.add_entity(gs.morphs.MJCF(file=chain_file))
    scene.build(n_envs=2)
    return scene, box, chain


@pytest.fixture
def fresh(batched):
    scene, box, chain = batched
    scene.reset()
    return scene, box, chain


def random_qpos(rng, m):
    """A MuJoCo qpos of the chain away from qpos0: every quaternion random, the hinge and slide moved."""
    q = m.qpos0.copy()
    q[:3] += rng.normal(size=3) * 0.1
    for s in (3, 8):
        u = rng.normal(size=4)
        q[s:s + 4] = u / np.linalg.norm(u)
    q[7], q[12] = rng.uniform(-1, 1), rng.uniform(-0.05, 0.05)
    return q


def mujoco_at(m, qpos, qvel=None, qacc=None):
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    if qvel is not None:
        d.qvel[:] = qvel
    mujoco.mj_forward(m, d)
    if qacc is not None:  # the accelerations given, not the model's (mj_rnePostConstraint reads d.qacc)
        d.qacc[:] = qacc
        mujoco.mj_rnePostConstraint(m, d)
    return d


def rxyz(a, b, c):
    """R = Rx(a) Ry(b) Rz(c) (intrinsic x-y-z Euler angles), written out."""
    ca, sa, cb, sb, cc, sc = np.cos(a), np.sin(a), np.cos(b), np.sin(b), np.cos(c), np.sin(c)
    rx = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]])
    ry = np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    rz = np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]])
    return rx @ ry @ rz


def quat_mat(q):
    q = np.asarray(q, dtype=np.float64)
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, q / np.linalg.norm(q))
    return out.reshape(3, 3)


# -- the structure, before and after the build ---------------------------------------------------------------------

def test_links_joints_and_geoms_are_known_before_build_and_stay_the_same_objects(chain_file):
    scene = gs.Scene()
    plane = scene.add_entity(gs.morphs.Plane())
    arm = scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True))
    chain = scene.add_entity(gs.morphs.MJCF(file=chain_file))
    # (get_link before the build raised AttributeError: 'RigidEntity' object has no attribute 'links')
    wrist = chain.get_link("wrist")
    assert (chain.n_links, chain.n_joints, chain.n_dofs, chain.n_qs) == (5, 4, 11, 13)
    assert [l.name for l in chain.links] == ["base", "arm", "wrist", "finger", "tip"]
    assert chain.link_start == plane.n_links + arm.n_links == 5 and wrist.idx == 7 and wrist.idx_local == 2
    assert (chain.dof_start, chain.q_start, chain.joint_start) == (3, 3, 3)
    slide = chain.get_joint("slide")
    assert slide.dofs_idx_local == [10] and slide.dof_start == 13 and slide.qs_idx_local == [12]
    assert chain.get_joint("wrist").link is wrist and wrist.joints == [chain.get_joint("wrist")]
    assert chain.base_link is chain.links[0] and chain.base_joint.type_name == "FREE"
    assert wrist.parent_idx == chain.get_link("arm").idx and chain.get_link("tip").root_idx == chain.link_start
    # is_fixed: no joint between the link and the world (Genesis World's meaning)
    assert plane.base_link.is_fixed and arm.base_link.is_fixed and arm.base_joint is None
    assert not arm.get_link("forearm").is_fixed and not chain.base_link.is_fixed
    assert not chain.get_link("tip").is_fixed  # no joint of its own, but its parents move
    assert [g.name for g in chain.geoms] == ["trunk", "upper", "knuckle", "pad", "nail"]
    assert chain.geoms[0].idx == plane.n_geoms + arm.n_geoms and chain.get_link("tip").geoms[0].name == "nail"
    assert chain.geoms[2].type == gs.geoms.GeomKind.SPHERE and chain.geoms[0].is_fixed is False
    assert [g.link.name for g in chain.vgeoms] == ["base", "arm", "wrist", "finger", "tip"]
    links, joints, geoms = list(chain.links), list(chain.joints), list(chain.geoms)
    with pytest.raises(gs.SceneError, match="build the scene first"):
        wrist.get_pos()
    scene.build()
    assert all(a is b for a, b in zip(chain.links, links)) and all(a is b for a, b in zip(chain.joints, joints))
    compiled = scene.rigid_solver.compiled
    assert [compiled.link_names[l.idx] for l in chain.links] == [l.name for l in links]
    assert [(j["name"], j["dof"], j["q"]) for j in compiled.joints[chain.joint_start:chain.joint_end]] == [
        (j.name, j.dof_start, j.q_start) for j in joints]
    assert all(compiled.geoms[g.idx]["desc"] is g.desc for e in (plane, arm, chain) for g in e.geoms)
    assert [g.idx for g in chain.geoms] == [g.idx for g in geoms]
    # poses after the build: unbatched shapes, and the geoms where MuJoCo puts them
    m = mujoco.MjModel.from_xml_path(chain_file)
    d = mujoco_at(m, m.qpos0)
    assert wrist.get_pos().shape == (3,) and chain.get_mass_mat().shape == (11, 11)
    for k, g in enumerate(chain.geoms):
        assert np.allclose(g.get_pos().numpy(), d.geom_xpos[k], atol=TOL)
        R, ref = quat_mat(g.get_quat().numpy()), d.geom_xmat[k].reshape(3, 3)
        if g.type == gs.geoms.GeomKind.CAPSULE:  # (its frame is fixed up to a turn about its axis, either way up)
            assert abs(abs(float(R[:, 2] @ ref[:, 2])) - 1) < TOL
        else:
            assert np.allclose(R, ref, atol=TOL)
    assert np.allclose(chain.vgeoms[1].get_pos().numpy(), d.geom_xpos[1], atol=TOL)


def test_an_attached_box_rides_on_the_arms_link(chain_file):
    """attach: the box's free joint is removed and it keeps its morph pose in the forearm's frame while the arm
    swings (the shipped arm, no robot files needed)."""
    scene = gs.Scene()
    arm = scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True))
    box = scene.add_entity(gs.morphs.Box(size=(0.05, 0.05, 0.05), pos=(0.1, 0.0, 0.05), euler=(0, 0, 30)))
    assert box.n_dofs == 6
    box.attach(arm, "forearm")
    assert box.n_dofs == 0 and box.base_link.parent_idx == arm.get_link("forearm").idx
    scene.build()
    forearm = arm.get_link("forearm")
    for _ in range(20):
        scene.step()
    R = quat_to_mat(forearm.get_quat())
    offset = R.T @ (box.get_pos() - forearm.get_pos())
    assert torch.allclose(offset, torch.tensor([0.1, 0.0, 0.05], dtype=offset.dtype), atol=1e-12)
    assert float(arm.get_dofs_velocity().abs().max()) > 1e-3  # (the arm swings under gravity)


# -- dynamics quantities against MuJoCo ------------------------------------------------------------------------------

def test_mass_matrix_is_mujocos_in_each_environment(fresh, chain_file):
    scene, box, chain = fresh
    m = mujoco.MjModel.from_xml_path(chain_file)
    rng = np.random.default_rng(0)
    qs = np.stack([random_qpos(rng, m) for _ in range(2)])
    chain.set_qpos(torch.as_tensor(qs))
    M = chain.get_mass_mat()
    assert M.shape == (2, 11, 11)
    for b in range(2):
        ref = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, mujoco_at(m, qs[b]), ref)
        assert np.allclose(M[b].numpy(), ref, rtol=0, atol=TOL)
    assert torch.equal(chain.get_mass_mat(envs_idx=[1])[0], M[1])
    # Genesis World's factors: M = L^T diag(1 / D_inv) L with L unit lower triangular
    L, D_inv = chain.get_mass_mat(decompose=True)
    assert L.shape == (2, 11, 11) and D_inv.shape == (2, 11)
    assert torch.equal(torch.triu(L, 1), torch.zeros_like(L)) and torch.allclose(torch.diagonal(L, dim1=1, dim2=2),
                                                                                  torch.ones(2, 11, dtype=F64))
    assert torch.allclose(L.transpose(1, 2) @ torch.diag_embed(1 / D_inv) @ L, M, rtol=0, atol=TOL)
    assert box.get_mass_mat()[0].diagonal()[:3].tolist() == pytest.approx([1.2] * 3)  # 200 kg/m^3 * 6e-3 m^3


def test_links_invweight_is_mujocos_body_invweight0_with_each_environments_masses(fresh, chain_file):
    scene, box, chain = fresh
    m = mujoco.MjModel.from_xml_path(chain_file)
    chain.set_qpos(torch.as_tensor(random_qpos(np.random.default_rng(1), m)))  # (read at qpos0 all the same)
    arm = chain.get_link("arm").idx_local
    chain.set_links_inertial_mass([[0.7], [1.05]], links_idx_local=[arm])
    w = chain.get_links_invweight()
    assert w.shape == (2, 5, 2)
    assert np.allclose(w[0].numpy(), m.body_invweight0[1:], rtol=1e-9, atol=0)
    m.body_mass[2] *= 1.5  # env 1's arm: 1.5 times the mass, its rotational inertia with it
    m.body_inertia[2] *= 1.5
    mujoco.mj_setConst(m, mujoco.MjData(m))
    assert np.allclose(w[1].numpy(), m.body_invweight0[1:], rtol=1e-9, atol=0)
    assert torch.equal(chain.get_links_invweight([arm, 4], envs_idx=[1]), w[1:, [arm, 4]])


def test_joint_anchors_and_axes_are_mujocos_xanchor_and_xaxis(fresh, chain_file):
    scene, box, chain = fresh
    m = mujoco.MjModel.from_xml_path(chain_file)
    rng = np.random.default_rng(2)
    qs = np.stack([random_qpos(rng, m) for _ in range(2)])
    chain.set_qpos(torch.as_tensor(qs))
    for b in range(2):
        d = mujoco_at(m, qs[b])
        for k, joint in enumerate(chain.joints):
            assert joint.get_anchor_pos().shape == (2, 3)
            assert np.allclose(joint.get_anchor_pos()[b].numpy(), d.xanchor[k], atol=TOL), joint.name
            if joint.type_name in ("REVOLUTE", "PRISMATIC"):
                assert np.allclose(joint.get_anchor_axis(envs_idx=[b])[0].numpy(), d.xaxis[k], atol=TOL)
    assert torch.equal(box.joints[0].get_anchor_pos(), box.get_pos())  # a free joint's: its link's origin


def test_links_acceleration_is_mujocos_classical_acceleration_without_gravity(fresh, chain_file):
    """With the state's q, v and its last substep's accelerations set to MuJoCo's, each link origin's linear
    acceleration is MuJoCo's (mj_objectAcceleration of the body frame, whose cacc carries -gravity: added back)
    and its angular acceleration too."""
    scene, box, chain = fresh
    m = mujoco.MjModel.from_xml_path(chain_file)
    rng = np.random.default_rng(3)
    qs = np.stack([random_qpos(rng, m) for _ in range(2)])
    vel, acc = rng.normal(size=(2, m.nv)), rng.normal(size=(2, m.nv))
    chain.set_qpos(torch.as_tensor(qs))
    state = scene.get_state()
    s = state.solvers_state[scene.solvers.index(scene.rigid_solver)]
    dofs = slice(chain.dof_start, chain.dof_end)
    s.dofs_vel[:, dofs], s.dofs_acc[:, dofs] = torch.as_tensor(vel), torch.as_tensor(acc)
    scene.reset(state=state)
    lin, ang = chain.get_links_acc(), chain.get_links_acc_ang()
    assert lin.shape == ang.shape == (2, 5, 3)
    for b in range(2):
        d = mujoco_at(m, qs[b], vel[b], acc[b])
        for k in range(5):
            ref = np.zeros(6)
            mujoco.mj_objectAcceleration(m, d, mujoco.mjtObj.mjOBJ_XBODY, k + 1, ref, 0)
            assert np.allclose(lin[b, k].numpy(), ref[3:] + m.opt.gravity, atol=TOL)
            assert np.allclose(ang[b, k].numpy(), ref[:3], atol=TOL)
    solver_links = [chain.link_start + 1, chain.link_start + 4]
    assert torch.equal(scene.rigid_solver.get_links_acc(solver_links, envs_idx=[1]), lin[1:, [1, 4]])


def test_a_falling_box_accelerates_at_g(fresh):
    scene, box, chain = fresh
    scene.step()
    acc = box.get_links_acc()
    assert acc.shape == (2, 1, 3)
    assert torch.allclose(acc, torch.tensor([0.0, 0.0, -9.81], dtype=F64).expand(2, 1, 3), rtol=0, atol=1e-12)


# -- setters ---------------------------------------------------------------------------------------------------------

def test_free_and_ball_dof_positions_are_xyz_euler_angles_of_their_quaternions(fresh):
    """Genesis World's set_dofs_position on a free joint: xyz the base position, the rotation dofs intrinsic x-y-z
    Euler angles (R = Rx Ry Rz) made into its quaternion; a ball joint's likewise; rotation dofs not given keep
    their angles; zero_velocity zeroes every dof of the entity; env 0 is left bitwise."""
    scene, box, chain = fresh
    chain.set_dofs_velocity(torch.ones(2, 11, dtype=F64))
    q_env0 = chain.get_qpos(envs_idx=[0]).clone()
    angles = [0.2, -0.4, 0.7]
    chain.set_dofs_position([[0.3, 0.1, 1.2] + angles + [0.1, -0.3, 0.5, 0.25]], dofs_idx_local=list(range(10)),
                            envs_idx=[1])
    q = chain.get_qpos(envs_idx=[1])[0].numpy()
    assert q[:3].tolist() == [0.3, 0.1, 1.2]
    assert np.allclose(quat_mat(q[3:7]), rxyz(*angles), atol=1e-12) and abs(np.linalg.norm(q[3:7]) - 1) < 1e-12
    assert np.allclose(quat_mat(q[8:12]), rxyz(-0.3, 0.5, 0.25), atol=1e-12) and q[7] == 0.1
    assert np.allclose(quat_mat(chain.get_quat()[1].numpy()), rxyz(*angles), atol=1e-12)  # the links moved
    assert torch.equal(chain.get_dofs_velocity(envs_idx=[1]), torch.zeros(1, 11, dtype=F64))
    assert torch.equal(chain.get_qpos(envs_idx=[0]), q_env0)
    assert torch.equal(chain.get_dofs_velocity(envs_idx=[0]), torch.ones(1, 11, dtype=F64))
    pos = chain.get_dofs_position(envs_idx=[1])[0]
    assert np.allclose(pos[:10].numpy(), [0.3, 0.1, 1.2] + angles + [0.1, -0.3, 0.5, 0.25], atol=1e-12)
    chain.set_dofs_position([[-0.9]], dofs_idx_local=[4], envs_idx=[1], zero_velocity=False)  # the pitch alone
    assert np.allclose(quat_mat(chain.get_qpos(envs_idx=[1])[0, 3:7].numpy()), rxyz(0.2, -0.9, 0.7), atol=1e-12)
    box.set_dofs_position([0.0, 0.0, 0.5, 0.0, 0.0, np.pi / 2])
    assert box.get_pos().tolist() == [[0.0, 0.0, 0.5]] * 2
    assert np.allclose(box.get_quat().numpy(), [[np.sqrt(0.5), 0, 0, np.sqrt(0.5)]] * 2, atol=1e-15)
    with pytest.raises(gs.OptionError, match="angles must be finite"):
        box.set_dofs_position([float("nan")], dofs_idx_local=[5])


def test_set_qpos_normalises_a_rounded_quaternion_and_refuses_a_zero_one(fresh):
    scene, box, chain = fresh
    q = chain.get_qpos()[0].clone()
    q[3:7] = torch.tensor([0.5, 0.5, 0.5, 0.5001], dtype=F64) * 3  # scaled and rounded
    q[8:12] = torch.tensor([0.0, 0.0, 0.0, 2.0], dtype=F64)
    chain.set_qpos(q)
    got = chain.get_qpos()
    assert torch.allclose(got[:, 3:7], (q[3:7] / q[3:7].norm()).expand(2, 4), rtol=0, atol=1e-15)
    assert got[:, 8:12].tolist() == [[0.0, 0.0, 0.0, 1.0]] * 2 and got[:, 7].tolist() == [float(q[7])] * 2
    assert torch.allclose(chain.get_quat(), got[:, 3:7], rtol=0, atol=1e-15)
    before = chain.get_qpos().clone()
    bad = before.clone()
    bad[1, 8:12] = 0.0
    with pytest.raises(gs.OptionError, match="joint 'wrist' .* in environment 1 .* norm >= 1e-09"):
        chain.set_qpos(bad)
    bad[1, 8:12] = float("nan")
    with pytest.raises(gs.OptionError, match="joint 'wrist'"):
        chain.set_qpos(bad)
    assert torch.equal(chain.get_qpos(), before)  # refused before anything was written


def test_zero_all_dofs_velocity_zeroes_the_entity_in_the_environments_given(fresh):
    scene, box, chain = fresh
    chain.set_dofs_velocity(torch.arange(22, dtype=F64).reshape(2, 11) + 1)
    box.set_dofs_velocity(torch.ones(2, 6, dtype=F64))
    chain.zero_all_dofs_velocity(envs_idx=[1])
    v = chain.get_dofs_velocity()
    assert torch.equal(v[1], torch.zeros(11, dtype=F64)) and torch.equal(v[0], torch.arange(11, dtype=F64) + 1)
    assert torch.equal(box.get_dofs_velocity(), torch.ones(2, 6, dtype=F64))


def test_the_euler_angles_of_a_free_joint_carry_their_gradient():
    """Differentiable mode: a free box tumbling (no contact), loss = weighted Euler angles of its rotation dofs
    (get_dofs_position, which reads the quaternion once for its three angles) after 5 steps; its gradient w.r.t. the
    initial velocities matches central differences (a read that named the quaternion's columns once per angle lost
    all but one angle's gradient: 5.7e-2 relative error on a ball joint, 2.8e-3 on this box)."""
    from genesis_core.testing import assert_close_rel, central_differences

    def build(requires_grad):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=requires_grad))
        box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.2, 0.3), euler=(10, 20, 30)))
        scene.build()
        return scene, box

    (scene, box), (ref, ref_box) = build(True), build(False)
    weights = torch.tensor([1.0, -0.7, 0.4], dtype=torch.float64)

    def rollout(scene, box, v):
        box.set_dofs_velocity(v)
        for _ in range(5):
            scene.step()
        return (box.get_dofs_position([3, 4, 5]) * weights).sum()

    v00 = torch.tensor([0.1, 0.2, 0.3, 2.0, -1.0, 0.5], dtype=torch.float64)
    v0 = v00.clone().requires_grad_(True)
    rollout(scene, box, v0).backward()
    fd = central_differences(lambda v: (ref.reset(), float(rollout(ref, ref_box, v)))[1], v00)
    assert_close_rel(v0.grad, fd, tol=1e-6)
