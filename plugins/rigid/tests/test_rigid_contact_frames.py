"""The contacts' frames carried by their links (kernels_collision.contact_frame_reverse) against the narrowphase.

For each kind of primitive contact, a scene is placed (qpos per environment, two environments) so that the
narrowphase finds a stable set of contacts; a test kernel runs the kinematics of frame f, the reverse of the contact
frames with random adjoints of each entry's point, normal and depth, and the kinematics' reverse: the gradient of
loss = sum of weights * (point, normal, depth) with respect to qpos. It is compared with central differences of
the same loss through the solver's own kinematics and narrowphase at perturbed qpos (the contact set must stay the
same). A frame that ignored how the narrowphase's points slide (a capsule's segment point, a box's edge, a cylinder's
rim) is off by 1e-2 to 1e0 here.
"""

import numpy as np
import pytest
import taichi as ti
import torch

import genesis_core as gs
from genesis_rigid.kernels_collision import CF_POS, CI_KEY, CI_META, contact_frame_reverse
from genesis_rigid.kernels_kinematics import forward_kinematics, forward_kinematics_reverse
from genesis_rigid.kernels_math import V3, V4
from genesis_rigid.layout import GC_MU, GC_N

nd = ti.types.ndarray


@ti.kernel
def frames_reverse(f: ti.i32, qpos: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3), links_quat: nd(dtype=V4, ndim=3),
                   link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2), joint_i: nd(ndim=2),
                   pair_i: nd(ndim=2), geom_i: nd(ndim=2), geom_f: nd(ndim=2), s_R: nd(ndim=2), s_com: nd(ndim=2),
                   s_janchor: nd(ndim=2), s_jaxis: nd(ndim=2), s_ref: nd(ndim=2), s_con_f: nd(ndim=3),
                   s_con_i: nd(ndim=3),
                   g_con: nd(ndim=3), g_qpos: nd(ndim=2), g_lpos: nd(ndim=2), g_lquat: nd(ndim=2), g_R: nd(ndim=2),
                   g_com: nd(ndim=2), g_janchor: nd(ndim=2), g_jaxis: nd(ndim=2), g_link_f: nd(ndim=3)):
    ti.loop_config(serialize=True)
    for b in range(qpos.shape[1]):
        forward_kinematics(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)
        contact_frame_reverse(b, f, links_pos, pair_i, geom_i, geom_f, s_R, s_con_f, s_con_i, g_con, g_lpos, g_R)
        forward_kinematics_reverse(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, g_qpos,
                                   g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis, g_link_f)


R = 0.05
# a fixed geom (or the plane) and a free one, its two environments' poses (pos, euler in degrees): each pose
# leaves the free geom slightly sunk into the other, in contact by the feature the name says
CASES = {
    "plane-sphere": (gs.morphs.Plane(), gs.morphs.Sphere(radius=R), [((0, 0, R - 1e-3), (10, 20, 30))] * 2),
    "plane-capsule lying": (gs.morphs.Plane(), gs.morphs.Capsule(radius=R, height=0.3),
                            [((0, 0, R - 1e-3), (0, 88, 10)), ((0.1, 0, R - 2e-3), (3, 92, 40))]),
    "plane-box corner": (gs.morphs.Plane(), gs.morphs.Box(size=(0.2, 0.1, 0.15)),
                         [((0, 0, None), (30, 40, 0)), ((0, 0, None), (20, 35, 60))]),
    "plane-cylinder rim": (gs.morphs.Plane(), gs.morphs.Cylinder(radius=0.1, height=0.1),
                           [((0, 0, 0.065), (20, 0, 0)), ((0, 0, 0.06), (10, 15, 30))]),
    "sphere-box face": (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True), gs.morphs.Sphere(radius=R),
                        [((0.05, 0.02, 0.249), (10, 0, 0))] * 2),
    "sphere-box edge": (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True), gs.morphs.Sphere(radius=R),
                        [((0.22, 0.05, 0.22), (0, 0, 0)), ((0.225, -0.03, 0.225), (0, 0, 0))]),
    "sphere-box corner": (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True), gs.morphs.Sphere(radius=R),
                          [((0.225, 0.225, 0.225), (0, 0, 0)), ((0.226, -0.224, 0.224), (0, 0, 0))]),
    "capsule-box": (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True), gs.morphs.Capsule(radius=R, height=0.2),
                    [((0.03, 0.01, 0.249), (0, 88, 10)), ((0.0, 0.02, 0.248), (2, 91, 40))]),
    "capsule-box edge": (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True), gs.morphs.Capsule(radius=R,
                                                                                                  height=0.3),
                         [((0.235, 0.01, 0.235), (90, 0, 10)), ((0.235, -0.02, 0.234), (85, 0, 20))]),
    "sphere-sphere": (gs.morphs.Sphere(pos=(0, 0, 0.1), radius=0.1, fixed=True), gs.morphs.Sphere(radius=0.1),
                      [((0.05, 0.02, 0.28), (0, 0, 0)), ((-0.03, 0.04, 0.275), (5, 5, 5))]),
    "capsule-capsule crossed": (gs.morphs.Capsule(pos=(0, 0, 0.1), radius=R, height=0.3, euler=(0, 90, 0), fixed=True),
                                gs.morphs.Capsule(radius=R, height=0.3),
                                [((0.0, 0.02, 0.198), (90, 0, 20)), ((0.03, -0.01, 0.197), (80, 10, 50))]),
    "box-box face": (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True), gs.morphs.Box(size=(0.1, 0.2, 0.1)),
                     [((0.05, 0, 0.249), (0, 0, 10)), ((0.02, 0.03, 0.2485), (0.5, 0.3, 40))]),
    "box-box crossed": (gs.morphs.Box(pos=(0, 0, 0.05), size=(0.6, 0.1, 0.1), fixed=True), gs.morphs.Box(size=(0.15, 0.6, 0.1)),
                        [((0.01, 0, 0.149), (0.4, 0.3, 5)), ((0.0, 0.01, 0.1485), (0.3, -0.2, 12))]),
    "box-box pedestal": (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.1, 0.12, 0.2), fixed=True), gs.morphs.Box(size=(0.4, 0.3, 0.1)),
                         [((0.01, 0, 0.249), (0.3, 0.5, 10)), ((0.0, 0.01, 0.2485), (0.4, 0.2, 25))]),
    # the reference face (the fixed box's) under the free box, its side planes crossed by the free box's edges
    "box-box crossed, the fixed box's face": (
        gs.morphs.Box(pos=(0, 0, 0.05), size=(0.6, 0.3, 0.1), fixed=True), gs.morphs.Box(size=(0.1, 0.6, 0.1)),
        [((0.01, 0, 0.149), (0.3, 0.4, 5)), ((0.0, 0.01, 0.1485), (0.3, -0.2, 12))]),
    # parallel faces: the pedestal's top is the reference face, its corners projected onto the wide box (a tilt
    # makes the wide box's face the reference: only translations and turns about the vertical keep the features)
    "box-box projected corners": (
        gs.morphs.Box(pos=(0, 0, 0.1), size=(0.1, 0.12, 0.2), fixed=True), gs.morphs.Box(size=(0.4, 0.3, 0.1)),
        [((0.01, 0, 0.249), (0, 0, 10)), ((0.0, 0.01, 0.2485), (0, 0, 25))], "translations and yaw"),
    # the same with the free box as the reference (added first: geom a): its bottom corners on the fixed box's top
    "box-box projected corners, the free box's face": (
        gs.morphs.Box(pos=(0, 0, 0.1), size=(0.6, 0.5, 0.2), fixed=True), gs.morphs.Box(size=(0.1, 0.12, 0.2)),
        [((0.01, 0, 0.2985), (0, 0, 10)), ((0.0, 0.01, 0.299), (0, 0, 25))], "translations and yaw", "free first"),
    "box-box edge": (gs.morphs.Box(pos=(0, 0, 0.2), size=(0.2, 0.2, 0.2), euler=(45, 0, 0), fixed=True),
                     gs.morphs.Box(size=(0.2, 0.2, 0.2)),
                     [((0.01, 0.005, 0.4818), (0, 45, 0)), ((-0.01, 0.01, 0.481), (3, 44, 5))]),
}


def euler_quat(e):
    from genesis_core.rotations import euler_to_quat
    return np.asarray(euler_to_quat(np.radians(np.asarray(e, dtype=np.float64))), dtype=np.float64)


@pytest.mark.parametrize("case", list(CASES))
def test_contact_frames_follow_the_narrowphase(case):
    fixed, free, poses, *only = CASES[case]
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, gravity=(0, 0, 0)))
    for morph in (free, fixed) if "free first" in only else (fixed, free):
        scene.add_entity(morph)
    scene.build(n_envs=2)
    s = scene.rigid_solver
    st, m, sc = s.state, s.model, s.scratch
    f = scene._frame
    q0 = st.qpos[f].numpy().copy()
    for b, (pos, euler) in enumerate(poses):
        q0[b, 3:7] = euler_quat(euler)
        if pos[2] is None:  # a box's lowest corner 1 mm into the plane
            from genesis_core.rotations import quat_to_mat
            half = np.asarray(free.size) / 2
            pos = (pos[0], pos[1], float(np.abs(quat_to_mat(q0[b, 3:7])[2]) @ half) - 1e-3)
        q0[b, :3] = pos

    def contacts(q):
        with torch.no_grad():
            st.qpos[f] = torch.as_tensor(q)
        s.kinematics(f)
        s._collide(f)
        n = sc["s_con_i"][:, CI_META, 0].numpy().copy()
        keys = [tuple(sc["s_con_i"][b, CI_KEY, :n[b]].tolist()) for b in range(2)]
        return sc["s_con_f"].numpy()[..., CF_POS:CF_POS + 7].copy(), n, keys

    con0, n0, keys0 = contacts(q0)
    assert n0.min() >= 1, f"{case}: no contact ({n0})"
    rng = np.random.default_rng(3)
    w = rng.normal(size=(2, s.max_contacts, GC_N))
    for b in range(2):
        w[b, n0[b]:] = 0.0
    w[..., GC_MU] = 0.0

    def loss(q):
        con, n, keys = contacts(q)
        assert keys == keys0, f"{case}: the contact set changed under the perturbation: {keys0} -> {keys}"
        return float((con * w[..., :7]).sum())

    arr = s._taichi_array
    L, J, Q = s.n_links, max(s.n_joints, 1), q0.shape[1]
    g = dict(g_con=arr((2, s.max_contacts, GC_N), values=w), g_qpos=arr((2, Q)), g_lpos=arr((2, L), element=(3,)),
             g_lquat=arr((2, L), element=(4,)), g_R=arr((2, L), element=(3, 3)), g_com=arr((2, L), element=(3,)),
             g_janchor=arr((2, J), element=(3,)), g_jaxis=arr((2, J), element=(3,)),
             g_link_f=arr((2, L, m["link_f"].shape[2])))
    contacts(q0)
    frames_reverse(f, st.qpos, st.links_pos, st.links_quat, m["link_f"], m["link_i"], m["joint_f"], m["joint_i"],
                   m["pair_i"], m["geom_i"], m["geom_f"], sc["s_R"], sc["s_com"], sc["s_janchor"], sc["s_jaxis"],
                   sc["s_ref"], sc["s_con_f"], sc["s_con_i"], g["g_con"], g["g_qpos"], g["g_lpos"], g["g_lquat"], g["g_R"],
                   g["g_com"], g["g_janchor"], g["g_jaxis"], g["g_link_f"])
    grad = g["g_qpos"].to_numpy()
    eps = 1e-7
    directions = []  # (direction in qpos [2, Q]): every coordinate, or translations and the turn about z
    for b in range(2):
        for i in range(q0.shape[1]) if not only else range(3):
            u = np.zeros_like(q0)
            u[b, i] = 1.0
            directions.append(u)
        if only:
            u = np.zeros_like(q0)
            qw, qx, qy, qz = q0[b, 3:7]
            u[b, 3:7] = 0.5 * np.array([-qz, qy, -qx, qw])  # d/dt of q * (cos t/2, 0, 0, sin t/2) at 0
            directions.append(u)
    fd = np.array([(loss(q0 + eps * u) - loss(q0 - eps * u)) / (2 * eps) for u in directions])
    grad = np.array([(grad * u).sum() for u in directions])
    error = np.linalg.norm(grad - fd) / np.linalg.norm(fd)
    assert error < 1e-5, f"{case}: relative error {error:.2e}\ngrad {grad}\nfd   {fd}"
