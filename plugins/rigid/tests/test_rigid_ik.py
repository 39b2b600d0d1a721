"""Batched forward kinematics, link Jacobians and inverse kinematics (genesis_rigid.ik), in float64.

The forward kinematics is checked against the solver's own (the link poses `set_qpos` leaves in the state), the
Jacobian against central differences of it and against the link velocities a simulated step produces, and IK by
reaching targets made by forward kinematics of random in-limit configurations (so that they are reachable).
"""

import math
import os

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import shared_assets_path
from genesis_rigid import assets, ik
from genesis_rigid.model import FREE, HINGE, SLIDE

F64 = torch.float64
PANDA = "mjcf/franka_emika_panda/panda.xml"
N_TARGETS = 64

# a free torso with two limbs: hinges with offset anchors and limits, a body with two joints (hinge, slide), a ball
# joint with an offset anchor, an unlimited hinge on a slanted axis
TREE = """<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="torso" pos="0 0 1" quat="0.9 0.1 -0.2 0.3">
      <freejoint/>
      <inertial pos="0.01 0 0.02" mass="4" diaginertia="0.06 0.05 0.03"/>
      <body name="l1" pos="0 0.2 0.1" quat="0.8 0.3 0.1 -0.2">
        <joint name="a1" type="hinge" axis="1 0 0" pos="0 -0.05 0.01" range="-1.5 1.5"/>
        <inertial pos="0 0.15 0" mass="1" diaginertia="0.008 0.001 0.008"/>
        <body name="l2" pos="0 0.3 0">
          <joint name="a2" type="hinge" axis="0 0 1" pos="0.02 0 0" range="-2 2"/>
          <joint name="a3" type="slide" axis="0 1 0" range="-0.1 0.2"/>
          <inertial pos="0.12 0 0" mass="0.5" diaginertia="0.0005 0.003 0.003"/>
        </body>
      </body>
      <body name="r1" pos="0 -0.2 0.1">
        <joint name="b1" type="ball" pos="0 0.03 0"/>
        <inertial pos="0 -0.15 0" mass="1" diaginertia="0.008 0.001 0.008"/>
        <body name="r2" pos="0 -0.3 0.05">
          <joint name="b2" type="hinge" axis="0.6 0.8 0" pos="0 0.02 -0.01"/>
          <inertial pos="0.05 -0.1 -0.05" mass="0.3" diaginertia="0.0008 0.0006 0.0004"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def build(morph, n_envs, **sim):
    scene = gs.Scene(sim_options=gs.options.SimOptions(**sim),
                     rigid_options=gs.options.RigidOptions(enable_collision=False))
    entity = scene.add_entity(morph)
    scene.build(n_envs=n_envs)
    return scene, entity


def arm_morph():
    return gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True, pos=(0.1, -0.2, 0.3), quat=(0.9, 0.0, 0.1, 0.4))


def tree_morph(tmp_path):
    path = os.path.join(tmp_path, "tree.xml")
    with open(path, "w") as f:
        f.write(TREE)
    return gs.morphs.MJCF(file=path)


@pytest.fixture(scope="module")
def panda(request):
    """A 64-environment panda scene, built once for the module (the IK tests leave its state as they found it)."""
    path = shared_assets_path(str(request.config.rootpath))
    if not os.path.isdir(path):
        pytest.skip(f"robot models of ../shared/assets are absent ({path}); they exist beside CI's clone")
    return build(gs.morphs.MJCF(file=f"{path}/{PANDA}"), N_TARGETS)


def random_qpos(entity, n, seed):
    """n configurations: limited dofs uniform in their range, unlimited hinges in [-pi, pi), unlimited slides in
    [-0.2, 0.2], ball and free rotations uniform, free positions within 0.5 m of the origin."""
    tree = ik.kinematic_tree(entity)
    g = torch.Generator().manual_seed(seed)
    q = torch.zeros((n, entity.n_qs), dtype=F64)
    for link in tree.links:
        for jt in link.joints:
            if jt.type in (HINGE, SLIDE):
                lo, hi = tree.dof_lo[jt.dof], tree.dof_hi[jt.dof]
                if not math.isfinite(lo):
                    lo, hi = (-math.pi, math.pi) if jt.type == HINGE else (-0.2, 0.2)
                q[:, jt.q] = lo + torch.rand(n, generator=g, dtype=F64) * (hi - lo)
            else:
                quat = torch.randn((n, 4), generator=g, dtype=F64)
                quat = quat / quat.norm(dim=-1, keepdim=True)
                if jt.type == FREE:
                    q[:, jt.q:jt.q + 3] = torch.rand((n, 3), generator=g, dtype=F64) - 0.5
                    q[:, jt.q + 3:jt.q + 7] = quat
                else:
                    q[:, jt.q:jt.q + 4] = quat
    return q


def rot_angle(qa, qb):
    """The angle (rad) between orientations qa and qb [..., 4]."""
    return ik.quat_to_rotvec(ik.quat_mul(ik.quat_conj(qa), qb)).norm(dim=-1)


def state_copy(scene):
    return {(s.name, k): v.clone() for s in scene.solvers if s.is_active
            for k, v in s.state.tensors.items()}


def assert_state_unchanged(scene, before):
    after = state_copy(scene)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert not changed, f"fields changed: {changed}"


def in_limits(entity, qpos):
    tree = ik.kinematic_tree(entity)
    qs = tree.limited_qs
    return bool(((qpos[:, qs] >= tree.limited_lo) & (qpos[:, qs] <= tree.limited_hi)).all())


# -- forward kinematics ---------------------------------------------------------------------------------------------

def check_fk_matches_solver(scene, entity, seed):
    q = random_qpos(entity, scene.n_envs, seed)
    entity.set_qpos(q)
    before = state_copy(scene)
    pos, quat = ik.forward_kinematics(entity, q)
    assert (pos - entity.get_links_pos()).abs().max() < 1e-9
    assert rot_angle(quat, entity.get_links_quat()).max() < 1e-9
    # a subset of the qs (the others from the state) and of the links
    q2 = random_qpos(entity, scene.n_envs, seed + 1)
    qs, links = [0, entity.n_qs - 1], [entity.n_links - 1, 0]
    pos2, _ = ik.forward_kinematics(entity, q2[[1, 2]][:, qs], qs_idx_local=qs, links_idx_local=links, envs_idx=[1, 2])
    ik.forward_kinematics(entity, q2[:, qs], qs_idx_local=qs)
    assert_state_unchanged(scene, before)
    q[:, qs] = q2[:, qs]
    entity.set_qpos(q)
    assert (pos2 - entity.get_links_pos(links_idx_local=links)[[1, 2]]).abs().max() < 1e-9


def test_fk_matches_the_solver_arm_and_tree(tmp_path):
    """The arm fixed at an offset pose, and a free-based tree (ball, slide, a body with two joints, offset
    anchors): link poses equal the solver's within 1e-9 m / rad for random configurations; forward_kinematics does
    not touch the state."""
    for morph in (arm_morph(), tree_morph(tmp_path)):
        scene, entity = build(morph, 4)
        for seed in range(3):
            check_fk_matches_solver(scene, entity, seed)


def test_fk_matches_the_solver_panda(panda):
    scene, entity = panda
    for seed in range(3):
        check_fk_matches_solver(scene, entity, seed)


# -- Jacobian -------------------------------------------------------------------------------------------------------

def check_jacobian(scene, entity, link, local_point, seed):
    """get_jacobian against central differences of the forward kinematics, one dof at a time (hinge and slide
    positions, and ball / free joints along the velocity convention: q * exp(h w / 2))."""
    tree = ik.kinematic_tree(entity)
    q = random_qpos(entity, scene.n_envs, seed)
    entity.set_qpos(q)
    J = ik.get_jacobian(entity, link, local_point=local_point)
    assert J.shape == (scene.n_envs, 6, entity.n_dofs)
    lp = torch.as_tensor(local_point if local_point is not None else [0.0, 0.0, 0.0], dtype=F64)
    l = link.idx_local
    h = 1e-6
    fd = torch.zeros_like(J)
    for d in range(entity.n_dofs):
        dq = torch.zeros((scene.n_envs, entity.n_dofs), dtype=F64)
        dq[:, d] = h
        (pp, qp), (pm, qm) = [ik.forward_kinematics(entity, tree.integrate(q, s * dq)) for s in (1, -1)]
        point_p = pp[:, l] + (ik.quat_to_mat(qp[:, l]) @ lp)
        point_m = pm[:, l] + (ik.quat_to_mat(qm[:, l]) @ lp)
        fd[:, :3, d] = (point_p - point_m) / (2 * h)
        fd[:, 3:, d] = ik.quat_to_rotvec(ik.quat_mul(qp[:, l], ik.quat_conj(qm[:, l]))) / (2 * h)
    assert (J - fd).abs().max() < 1e-6, (J - fd).abs().max()
    assert J.abs().max() > 0.1


def test_jacobian_matches_central_differences(tmp_path):
    scene, arm = build(arm_morph(), 3)
    for seed, point in [(0, None), (1, [0.0, 0.02, 0.3])]:
        check_jacobian(scene, arm, arm.get_link("forearm"), point, seed)
    scene, tree = build(tree_morph(tmp_path), 3)
    for seed, (name, point) in enumerate([("l2", [0.1, 0.0, -0.05]), ("r2", None), ("r1", [0.0, -0.2, 0.0]),
                                          ("torso", [0.1, 0.2, 0.3])]):
        check_jacobian(scene, tree, tree.get_link(name), point, seed)


def test_jacobian_matches_central_differences_panda(panda):
    scene, entity = panda
    for seed, (name, point) in enumerate([("hand", None), ("hand", [0.0, 0.0, 0.1]), ("left_finger", None)]):
        check_jacobian(scene, entity, entity.get_link(name), point, seed)


def test_jacobian_gives_the_simulated_link_velocities(tmp_path):
    """No gravity or contacts: after one step of 1e-6 s from random positions and dof velocities, each link of the
    free-based tree has moved by J v dt (translation of a point off the origin, and rotation), to O(dt): the
    Jacobian's free and ball columns follow the solver's velocity convention."""
    dt = 1e-6
    scene, entity = build(tree_morph(tmp_path), 2, dt=dt, gravity=(0.0, 0.0, 0.0))
    q = random_qpos(entity, 2, 7)
    v = torch.randn((2, entity.n_dofs), generator=torch.Generator().manual_seed(8), dtype=F64)
    entity.set_qpos(q)
    entity.set_dofs_velocity(v)
    point = torch.tensor([0.05, -0.1, 0.2], dtype=F64)
    Js = {link.idx_local: ik.get_jacobian(entity, link, local_point=point) for link in entity.links}
    pos0, quat0 = entity.get_links_pos(), entity.get_links_quat()
    scene.step()
    pos1, quat1 = entity.get_links_pos(), entity.get_links_quat()
    for l, J in Js.items():
        expected = (J @ v.unsqueeze(-1)).squeeze(-1)
        moved = (pos1[:, l] + ik.quat_to_mat(quat1[:, l]) @ point - pos0[:, l] - ik.quat_to_mat(quat0[:, l]) @ point)
        turned = ik.quat_to_rotvec(ik.quat_mul(quat1[:, l], ik.quat_conj(quat0[:, l])))
        assert (moved / dt - expected[:, :3]).abs().max() < 1e-4 * (1 + expected.abs().max())
        assert (turned / dt - expected[:, 3:]).abs().max() < 1e-4 * (1 + expected.abs().max())
        assert expected.abs().max() > 0.1


def test_jacobian_unbatched_scene():
    scene, arm = build(arm_morph(), 0)
    J = ik.get_jacobian(arm, arm.get_link("forearm"))
    assert J.shape == (6, 3)
    assert torch.equal(J, ik.get_jacobian(arm, "forearm"))



def test_kinematics_keep_no_scene_alive():
    """The entity's kinematic tree is cached per entity in a weak dictionary: after a Jacobian and a forward
    kinematics call, dropping the scene frees the entity (a tree that held its entity strongly kept every scene
    IK had touched alive)."""
    import gc
    import weakref

    scene, arm = build(arm_morph(), 2)
    ik.get_jacobian(arm, "forearm")
    ik.forward_kinematics(arm, torch.zeros((2, arm.n_qs)))
    ref = weakref.ref(arm)
    del scene, arm
    gc.collect()
    assert ref() is None

# -- inverse kinematics ---------------------------------------------------------------------------------------------

def test_ik_reaches_64_random_panda_poses(panda):
    """The hand to 64 poses at once: every environment within 1 mm and 1 degree, inside the joint limits; the
    returned errors are the remaining ones; the fingers (they do not move the hand) keep their start values; the
    scene's state is bitwise unchanged."""
    scene, entity = panda
    hand = entity.get_link("hand")
    start = random_qpos(entity, N_TARGETS, 20)
    entity.set_qpos(start)
    pos, quat = ik.forward_kinematics(entity, random_qpos(entity, N_TARGETS, 21), links_idx_local=[hand.idx_local])
    before = state_copy(scene)
    qpos, err = ik.inverse_kinematics(entity, hand, pos=pos[:, 0], quat=quat[:, 0], return_error=True)
    assert_state_unchanged(scene, before)
    assert qpos.shape == (N_TARGETS, entity.n_qs) and err.shape == (N_TARGETS, 6)
    reached_pos, reached_quat = ik.forward_kinematics(entity, qpos, links_idx_local=[hand.idx_local])
    pos_err = (reached_pos[:, 0] - pos[:, 0]).norm(dim=-1)
    rot_err = rot_angle(reached_quat[:, 0], quat[:, 0])
    assert pos_err.max() < 1e-3 and rot_err.max() < math.radians(1.0), (pos_err.max(), rot_err.max())
    assert torch.allclose(err[:, :3].norm(dim=-1), pos_err, atol=1e-12)
    assert torch.allclose(err[:, 3:].norm(dim=-1), rot_err, atol=1e-9)
    assert in_limits(entity, qpos)
    assert torch.equal(qpos[:, 7:], start[:, 7:])
    # a subset of the environments; init_qpos shared by all of them
    sub = [3, 17, 40]
    qsub = ik.inverse_kinematics(entity, hand, pos=pos[sub, 0], quat=quat[sub, 0], envs_idx=sub,
                                 init_qpos=start[0])
    assert qsub.shape == (3, entity.n_qs) and in_limits(entity, qsub)
    p, r = ik.forward_kinematics(entity, qsub, links_idx_local=[hand.idx_local], envs_idx=sub)
    assert (p[:, 0] - pos[sub, 0]).norm(dim=-1).max() < 1e-3 and rot_angle(r[:, 0], quat[sub, 0]).max() < 0.0175
    assert_state_unchanged(scene, before)


def test_ik_position_only_arm():
    """The three-joint arm's tip (a point 0.3 m along the forearm) to 16 positions, orientations free (an
    orientation target is ignored with rot_mask all False): within 1 mm, inside the limits; its error has no
    rotation part. An unreachable target gives the best configuration met (finite, inside the limits)."""
    scene, arm = build(arm_morph(), 16)
    forearm, tip = arm.get_link("forearm"), [0.0, 0.0, 0.3]
    target_q = random_qpos(arm, 16, 30)
    target, target_quat = ik.forward_kinematics(arm, target_q, links_idx_local=[forearm.idx_local])
    target = target[:, 0] + ik.quat_to_mat(target_quat[:, 0]) @ torch.tensor(tip, dtype=F64)
    wrong = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=F64).expand(16, 4)
    before = state_copy(scene)
    qpos, err = ik.inverse_kinematics(arm, forearm, pos=target, quat=wrong, local_point=tip,
                                      rot_mask=[False, False, False], return_error=True)
    assert_state_unchanged(scene, before)
    p, r = ik.forward_kinematics(arm, qpos, links_idx_local=[forearm.idx_local])
    reached = p[:, 0] + ik.quat_to_mat(r[:, 0]) @ torch.tensor(tip, dtype=F64)
    assert (reached - target).norm(dim=-1).max() < 1e-3
    assert in_limits(arm, qpos) and torch.equal(err[:, 3:], torch.zeros_like(err[:, 3:]))
    # out of reach (the arm spans 0.9 m above the shoulder): the best found, as close as the arm gets
    far = torch.tensor([2.0, 0.0, 0.3], dtype=F64)
    qpos, err = ik.inverse_kinematics(arm, forearm, pos=far, local_point=tip, max_samples=3, return_error=True)
    assert err[:, :3].norm(dim=-1).min() > 0.5 and torch.isfinite(qpos).all() and in_limits(arm, qpos)


def test_ik_multilink_tree_two_limbs(tmp_path):
    """Two limbs of the free-based tree at once (a position for one end, a pose for the other): the base moves
    too; every environment within 1 mm and 1 degree."""
    scene, tree = build(tree_morph(tmp_path), 8)
    l2, r2 = tree.get_link("l2"), tree.get_link("r2")
    pos, quat = ik.forward_kinematics(tree, random_qpos(tree, 8, 40), links_idx_local=[l2.idx_local, r2.idx_local])
    before = state_copy(scene)
    qpos, err = ik.inverse_kinematics_multilink(tree, [l2, r2], poss=[pos[:, 0], pos[:, 1]], quats=[None, quat[:, 1]],
                                                return_error=True)
    assert_state_unchanged(scene, before)
    assert err.shape == (8, 2, 6) and torch.equal(err[:, 0, 3:], torch.zeros_like(err[:, 0, 3:]))
    p, r = ik.forward_kinematics(tree, qpos, links_idx_local=[l2.idx_local, r2.idx_local])
    assert (p - pos).norm(dim=-1).max() < 1e-3
    assert rot_angle(r[:, 1], quat[:, 1]).max() < math.radians(1.0)
    assert in_limits(tree, qpos)


def test_ik_multilink_panda_hand_and_finger(panda):
    """The hand's pose and the left finger's position: the finger's slide joint opens to match; and one axis
    of the hand aligned (rot_mask with a single True: the rotation about that axis is free)."""
    scene, entity = panda
    hand, finger = entity.get_link("hand"), entity.get_link("left_finger")
    links = [hand.idx_local, finger.idx_local]
    pos, quat = ik.forward_kinematics(entity, random_qpos(entity, N_TARGETS, 50), links_idx_local=links)
    envs = list(range(0, N_TARGETS, 4))
    before = state_copy(scene)
    qpos = ik.inverse_kinematics_multilink(entity, [hand, finger], poss=[pos[envs, 0], pos[envs, 1]],
                                           quats=[quat[envs, 0], None], envs_idx=envs)
    p, r = ik.forward_kinematics(entity, qpos, links_idx_local=links, envs_idx=envs)
    assert (p - pos[envs]).norm(dim=-1).max() < 1e-3
    assert rot_angle(r[:, 0], quat[envs, 0]).max() < math.radians(1.0)
    assert in_limits(entity, qpos)
    # the hand's z axis along the target's: within 1 degree, the rotation about it left free
    qpos = ik.inverse_kinematics(entity, hand, pos=pos[envs, 0], quat=quat[envs, 0], rot_mask=[False, False, True],
                                 envs_idx=envs)
    p, r = ik.forward_kinematics(entity, qpos, links_idx_local=[hand.idx_local], envs_idx=envs)
    z, z_target = ik.quat_to_mat(r[:, 0])[..., 2], ik.quat_to_mat(quat[envs, 0])[..., 2]
    assert (p[:, 0] - pos[envs, 0]).norm(dim=-1).max() < 1e-3
    assert (z * z_target).sum(-1).min() > math.cos(math.radians(1.0))
    assert_state_unchanged(scene, before)


def test_ik_arguments():
    scene, arm = build(arm_morph(), 0)
    forearm = arm.get_link("forearm")
    target, _ = ik.forward_kinematics(arm, [0.3, 0.5, -0.7], links_idx_local=[forearm.idx_local])
    qpos = ik.inverse_kinematics(arm, forearm, pos=target[0])
    assert qpos.shape == (3,)
    qpos, err = ik.inverse_kinematics(arm, forearm, pos=target[0], return_error=True)
    assert err.shape == (6,) and err.norm() < 5e-4
    with pytest.raises(gs.OptionError, match="rot_mask"):
        ik.inverse_kinematics(arm, forearm, pos=target[0], quat=[1, 0, 0, 0], rot_mask=[True, True, False])
    with pytest.raises(gs.OptionError, match="neither"):
        ik.inverse_kinematics_multilink(arm, [forearm, "upper_arm"], poss=[target[0], None])
    with pytest.raises(gs.OptionError, match="entries"):
        ik.inverse_kinematics_multilink(arm, [forearm], poss=[target[0], target[0]])
    with pytest.raises(gs.OptionError, match="shape"):
        ik.inverse_kinematics(arm, forearm, pos=[1.0, 2.0])
    # only the selected dofs move
    start = torch.tensor([0.1, 0.2, 0.3], dtype=F64)
    qpos = ik.inverse_kinematics(arm, forearm, pos=target[0], init_qpos=start, dofs_idx_local=[1, 2], max_samples=2)
    assert qpos[0] == start[0] and not torch.equal(qpos[1:], start[1:])


def test_ik_reaches_the_tolerance_it_is_asked_for(panda):
    """pos_tol=1e-9 m and rot_tol=1e-9 rad on the hand's pose and a finger's position, float64, 16 reachable
    targets: every environment ends within them, and the returned errors say so (the errors of the configuration
    returned: their norms, recomputed by forward kinematics here)."""
    scene, entity = panda
    hand, finger = entity.get_link("hand"), entity.get_link("left_finger")
    links = [hand.idx_local, finger.idx_local]
    envs = list(range(16))
    pos, quat = ik.forward_kinematics(entity, random_qpos(entity, N_TARGETS, 77), links_idx_local=links)
    before = state_copy(scene)
    qpos, err = ik.inverse_kinematics_multilink(entity, [hand, finger], poss=[pos[envs, 0], pos[envs, 1]],
                                                quats=[quat[envs, 0], None], pos_tol=1e-9, rot_tol=1e-9,
                                                max_solver_iters=100, return_error=True, envs_idx=envs)
    p, r = ik.forward_kinematics(entity, qpos, links_idx_local=links, envs_idx=envs)
    pos_err = (p - pos[envs]).norm(dim=-1)
    assert pos_err.max() <= 1e-9 and rot_angle(r[:, 0], quat[envs, 0]).max() <= 1e-9, (pos_err.max(),)
    assert err[..., :3].norm(dim=-1).max() <= 1e-9 and err[:, 0, 3:].norm(dim=-1).max() <= 1e-9
    assert torch.allclose(err[..., :3].norm(dim=-1), pos_err, atol=1e-12)
    assert in_limits(entity, qpos)
    assert_state_unchanged(scene, before)
