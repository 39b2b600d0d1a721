"""The reverse functions of kernels_kinematics (forward_kinematics_reverse, dof_motions_reverse) against central
finite differences in float64.

One kernel runs forward_kinematics and dof_motions for frame f = 1 of its own two-frame arrays (frame 0 holds
noise that a wrong frame index would read), then, with `reverse` set, dof_motions_reverse, the reference points'
adjoints into their links' positions (add_ref_adjoint), overwrites s_R, s_com, s_janchor, s_jaxis and s_ref with noise
(forward_kinematics_reverse must not read them) and runs forward_kinematics_reverse. The loss is a random weighting
of every output (links_pos, links_quat, s_R, s_com, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel); its
gradients with respect to qpos, dofs_vel and the per-env link_f columns LF_POS, LF_QUAT, LF_COM are compared with
central differences (relative error < 1e-6; they measure ~2e-10 to 5e-10).
"""

import numpy as np
import pytest
import taichi as ti
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel
from genesis_rigid.kernels_kinematics import (add_ref_adjoint, dof_motions, dof_motions_reverse, forward_kinematics,
                                              forward_kinematics_reverse)
from genesis_rigid.layout import LF_COM, LF_POS, LF_QUAT
from genesis_rigid.model import BALL, FREE, HINGE, SLIDE

# a free-floating base with two branches: a hinge arm ending in a body with a slide and a ball joint, a ball leg
# ending in a body with a hinge and a slide joint (non-zero refs, rotated body frames, off-centre anchors)
MJCF = """
<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="base" pos="0.1 -0.2 0.8" quat="0.9 0.1 0.3 -0.2">
      <freejoint/>
      <geom type="sphere" size="0.1" pos="0.02 0.01 -0.03"/>
      <body name="arm" pos="0.3 0.1 -0.05" quat="0.8 -0.3 0.2 0.4">
        <joint name="hinge_a" type="hinge" axis="0.3 1 0.2" pos="0.05 -0.02 0.03" ref="0.4"/>
        <geom type="sphere" size="0.05" pos="0.1 0 0"/>
        <body name="hand" pos="0.25 0.05 0.1" quat="0.7 0.2 -0.5 0.1">
          <joint name="slide_h" type="slide" axis="1 0.4 -0.3" pos="0.02 0.01 -0.04" ref="0.15"/>
          <joint name="ball_h" type="ball" pos="-0.03 0.06 0.02"/>
          <geom type="sphere" size="0.04" pos="0.05 0.02 0"/>
        </body>
      </body>
      <body name="leg" pos="-0.2 0.15 -0.1" quat="0.6 0.5 -0.1 0.3">
        <joint name="ball_l" type="ball" pos="0.01 -0.04 0.05"/>
        <geom type="sphere" size="0.03" pos="0 0 -0.1"/>
        <body name="foot" pos="0.05 -0.1 -0.2" quat="0.95 0 0.3 0.1">
          <joint name="hinge_f" type="hinge" axis="1 0.2 0.1" pos="0.02 0.03 -0.01" ref="-0.3"/>
          <joint name="slide_f" type="slide" axis="0.1 -0.2 1" pos="0 0.02 0.01" ref="0.05"/>
          <geom type="sphere" size="0.04" pos="0.01 -0.02 0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

nd = ti.types.ndarray
OUTPUTS = ("lpos", "lquat", "R", "com", "janchor", "jaxis", "ref", "cdof", "cdof_dot", "cvel")
F = 1  # the frame the kernel reads and writes


@ti.kernel
def kinematics_and_reverse(f: ti.i32, reverse: ti.i32, qpos: nd(ndim=3), dofs_vel: nd(ndim=3), links_pos: nd(ndim=3),
                           links_quat: nd(ndim=3), link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2),
                           joint_i: nd(ndim=2), s_R: nd(ndim=2), s_com: nd(ndim=2), s_janchor: nd(ndim=2),
                           s_jaxis: nd(ndim=2), s_ref: nd(ndim=2), s_cdof: nd(ndim=2), s_cdof_dot: nd(ndim=2),
                           s_cvel: nd(ndim=2), g_qpos: nd(ndim=2), g_vel: nd(ndim=2), g_link_f: nd(ndim=3),
                           g_lpos: nd(ndim=2), g_lquat: nd(ndim=2), g_R: nd(ndim=2), g_com: nd(ndim=2),
                           g_janchor: nd(ndim=2), g_jaxis: nd(ndim=2), g_ref: nd(ndim=2), g_cdof: nd(ndim=2),
                           g_cdof_dot: nd(ndim=2), g_cvel: nd(ndim=2)):
    for b in range(qpos.shape[1]):
        forward_kinematics(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)
        dof_motions(b, f, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel)
        if reverse != 0:
            dof_motions_reverse(b, f, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cvel, g_vel,
                                g_R, g_janchor, g_jaxis, g_lpos, g_cdof, g_cdof_dot, g_cvel)
            for l in range(s_R.shape[1]):
                add_ref_adjoint(b, l, g_ref[b, l], g_lpos)
            for l in range(s_R.shape[1]):
                s_R[b, l] = ti.Matrix([[7.0, -3.0, 5.0], [2.0, 11.0, -13.0], [1.0, 4.0, 9.0]])
                s_com[b, l] = ti.Vector([17.0, -19.0, 23.0])
                s_ref[b, l] = ti.Vector([-53.0, 59.0, 61.0])
            for j in range(s_janchor.shape[1]):
                s_janchor[b, j] = ti.Vector([-29.0, 31.0, 37.0])
                s_jaxis[b, j] = ti.Vector([41.0, 43.0, -47.0])
            forward_kinematics_reverse(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R,
                                       g_qpos, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis, g_link_f)


@pytest.fixture(scope="module")
def scene_solver(tmp_path_factory):
    path = tmp_path_factory.mktemp("mjcf") / "branched.xml"
    path.write_text(MJCF)
    scene = gs.Scene()
    scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build(n_envs=2)
    return scene, scene.sim.rigid_solver


class Case:
    """The kernel's arrays for one scene: inputs (qpos, dofs_vel of frame F; link_f), outputs, random weights."""

    def __init__(self, solver, rng, unit_quats):
        self.solver = solver
        B, L, J, D, Q = solver.batch, solver.n_links, solver.n_joints, solver.n_dofs, solver.n_qs
        arr = solver._taichi_array
        m, s = solver.model, solver.scratch
        self.shapes = dict(lpos=(B, L, 3), lquat=(B, L, 4), R=(B, L, 3, 3), com=(B, L, 3), janchor=(B, J, 3),
                           jaxis=(B, J, 3), ref=(B, L, 3), cdof=(B, D, 6), cdof_dot=(B, D, 6), cvel=(B, L, 6))
        self.weights = {k: rng.normal(size=shape) for k, shape in self.shapes.items()}
        self.g = {k: arr(shape[:2], element=shape[2:]) for k, shape in self.shapes.items()}
        self.g_qpos, self.g_vel = arr((B, Q)), arr((B, D))
        self.g_link_f = arr(tuple(m["link_f"].shape))
        # frame 0: noise
        qpos = rng.normal(size=(2, B, Q))
        qpos[F] = rng.uniform(-1.0, 1.0, size=(B, Q))
        for q in solver.state_dims()["qpos_quats"]:
            quat = rng.normal(size=(B, 4))
            quat /= np.linalg.norm(quat, axis=1, keepdims=True)
            if not unit_quats:
                quat *= rng.uniform(0.6, 1.5, size=(B, 1))
            qpos[F, :, q:q + 4] = quat
        self.qpos0 = qpos
        self.vel0 = rng.normal(size=(2, B, D))
        link_f = m["link_f"].to_numpy()
        for c in list(range(LF_POS, LF_POS + 3)) + list(range(LF_QUAT, LF_QUAT + 4)) + list(range(LF_COM, LF_COM + 3)):
            link_f[1, :, c] += rng.uniform(-0.1, 0.1, size=L)
        self.link_f0 = link_f
        self.qpos, self.vel = arr((2, B, Q)), arr((2, B, D))
        self.links_pos = arr((2, B, L), element=(3,))
        self.links_quat = arr((2, B, L), element=(4,))
        self.links_pos.from_numpy(rng.normal(size=(2, B, L, 3)))
        self.links_quat.from_numpy(rng.normal(size=(2, B, L, 4)))
        self.m, self.s = m, s

    def run(self, qpos, vel, link_f, reverse):
        self.qpos.from_numpy(qpos)
        self.vel.from_numpy(vel)
        self.m["link_f"].from_numpy(link_f)
        if reverse:
            for k, w in self.weights.items():
                self.g[k].from_numpy(w)
            for a in (self.g_qpos, self.g_vel, self.g_link_f):
                a.fill(0)
        m, s, g = self.m, self.s, self.g
        kinematics_and_reverse(F, int(reverse), self.qpos, self.vel, self.links_pos, self.links_quat, m["link_f"],
                               m["link_i"], m["joint_f"], m["joint_i"], s["s_R"], s["s_com"], s["s_janchor"],
                               s["s_jaxis"], s["s_ref"], s["s_cdof"], s["s_cdof_dot"], s["s_cvel"], self.g_qpos,
                               self.g_vel,
                               self.g_link_f, *(g[k] for k in OUTPUTS))

    def loss(self, qpos, vel, link_f):
        self.run(qpos, vel, link_f, False)
        s = self.s
        out = dict(lpos=self.links_pos.to_numpy()[F], lquat=self.links_quat.to_numpy()[F], R=s["s_R"].to_numpy(),
                   com=s["s_com"].to_numpy(), janchor=s["s_janchor"].to_numpy(), jaxis=s["s_jaxis"].to_numpy(),
                   ref=s["s_ref"].to_numpy(), cdof=s["s_cdof"].to_numpy(), cdof_dot=s["s_cdof_dot"].to_numpy(),
                   cvel=s["s_cvel"].to_numpy())
        return sum(float((self.weights[k] * out[k]).sum()) for k in OUTPUTS)

    def gradients(self):
        self.run(self.qpos0, self.vel0, self.link_f0, True)
        return self.g_qpos.to_numpy(), self.g_vel.to_numpy(), self.g_link_f.to_numpy()


def central(fn, x, index, eps=1e-6):
    """d fn / d x[index] by central differences (x: a numpy array, not changed)."""
    xp, xm = x.copy(), x.copy()
    xp[index] += eps
    xm[index] -= eps
    return (fn(xp) - fn(xm)) / (2 * eps)


@pytest.mark.parametrize("unit_quats", [True, False], ids=["unit_quats", "scaled_quats"])
def test_kinematics_reverse_matches_central_differences(scene_solver, unit_quats):
    """Gradients of a random weighting of every output of forward_kinematics and dof_motions with respect to qpos
    (free, ball, hinge and slide joints; free and ball quaternions unit or scaled), dofs_vel and the per-env link
    offsets, orientations and centres of mass, from the reverse functions, against central differences."""
    _, solver = scene_solver
    joint_types = set(solver.model["joint_i"].to_numpy()[:solver.n_joints, 0].tolist())
    assert joint_types == {FREE, BALL, HINGE, SLIDE}
    case = Case(solver, np.random.default_rng(1 if unit_quats else 2), unit_quats)
    g_qpos, g_vel, g_link_f = case.gradients()
    q0, v0, lf0 = case.qpos0, case.vel0, case.link_f0
    B, L = solver.batch, solver.n_links

    fd_qpos = np.zeros_like(g_qpos)
    for b in range(B):
        for i in range(solver.n_qs):
            fd_qpos[b, i] = central(lambda x: case.loss(x, v0, lf0), q0, (F, b, i))
    fd_vel = np.zeros_like(g_vel)
    for b in range(B):
        for d in range(solver.n_dofs):
            fd_vel[b, d] = central(lambda x: case.loss(q0, x, lf0), v0, (F, b, d))
    cols = list(range(LF_POS, LF_POS + 3)) + list(range(LF_QUAT, LF_QUAT + 4)) + list(range(LF_COM, LF_COM + 3))
    fd_link_f = np.zeros((B, L, len(cols)))
    for b in range(B):
        for l in range(L):
            for k, c in enumerate(cols):
                fd_link_f[b, l, k] = central(lambda x: case.loss(q0, v0, x), lf0, (b, l, c))
    case.m["link_f"].from_numpy(lf0)

    for name, grad, fd in (("qpos", g_qpos, fd_qpos), ("dofs_vel", g_vel, fd_vel),
                           ("link_f", g_link_f[:, :L, cols], fd_link_f)):
        err = np.linalg.norm(grad - fd) / np.linalg.norm(fd)
        print(f"{name}: relative error {err:.2e} (|fd| {np.linalg.norm(fd):.3g})")
        assert np.abs(fd).max() > 1e-3
        assert_close_rel(torch.as_tensor(grad), torch.as_tensor(fd), tol=1e-6)
    # the other link_f columns get no adjoint
    other = np.ones(g_link_f.shape[2], dtype=bool)
    other[cols] = False
    assert not g_link_f[:, :, other].any()
