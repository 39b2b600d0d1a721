"""The dynamics stage's reverse functions (kernels_dynamics: bias_and_mass_reverse, smooth_acceleration_reverse,
ldl_solve_reverse) against central differences of the same forward functions, in float64.

One model: a free torso carrying a branched tree of hinge, slide and ball joints (armature, damping, stiffness,
springref), a second tree (a hinge and a slide), a fixed tendon stretched past its slack, gravity compensation on one
link, MuJoCo's fluid on all links but two, and controls of every mode: live and saturated PD laws, clamped and free
force commands. Two environments with different masses, inertias, centres of mass, damping, armature, gains and force
ranges. The adjoints are checked at the stage's boundary: the kinematic scratch (s_R, s_com, s_ref: the links'
origins, which the dynamics shift quantities between; s_cdof, s_cdof_dot, s_cvel, perturbed directly), qpos and
dofs_vel as the stage reads them, the per-env link and dof parameters, the controls and the external force. Relative
errors, per array and per parameter column, are required under 1e-5: they measure 1e-11 to 1e-6, the differences'
round-off (qacc reaches 600 m/s^2 or rad/s^2).
"""

import numpy as np
import taichi as ti
import torch

import genesis_core as gs
from genesis_rigid.kernels_dynamics import (bias_and_mass, bias_and_mass_reverse, factor_ldl, ldl_solve,
                                            ldl_solve_reverse, smooth_acceleration, smooth_acceleration_reverse)
from genesis_rigid.kernels_kinematics import dof_motions, forward_kinematics
from genesis_rigid.layout import (CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY, DF_ARMATURE, DF_DAMPING, DF_FORCE_HI,
                                  DF_FORCE_LO, DF_N, GD_ACC, GD_BIAS, GD_EXT, GD_N, GT_FORCE, GT_N, LF_COM,
                                  LF_FLUID_BOX, LF_FLUID_DENSITY, LF_FLUID_IQUAT, LF_FLUID_VISCOSITY, LF_FLUID_WIND,
                                  LF_GRAVCOMP, LF_INERTIA, LF_MASS, LF_N, PF_DT, SD_ACC, SD_BIAS, SD_EXT, SD_SATURATED)

MODEL = """<mujoco>
  <option density="1.3" viscosity="0.02" wind="0.4 -0.3 0.2"/>
  <worldbody>
    <body name="torso" pos="0 0 1">
      <freejoint/>
      <inertial pos="0.01 0 0.02" mass="4" fullinertia="0.06 0.05 0.03 0.002 -0.001 0.003"/>
      <body name="l1" pos="0 0.2 0.1">
        <joint name="a1" type="hinge" axis="1 0 0" damping="0.3" armature="0.02" stiffness="2" springref="10"/>
        <inertial pos="0 0.15 0" mass="1" diaginertia="0.008 0.001 0.008"/>
        <body name="l2" pos="0 0.3 0">
          <joint name="a2" type="hinge" axis="0 0.6 0.8" damping="0.1" armature="0.01" stiffness="1"
                 springref="-20"/>
          <inertial pos="0.12 0 0" mass="0.5" diaginertia="0.0005 0.003 0.003"/>
        </body>
      </body>
      <body name="r1" pos="0 -0.2 0.1">
        <joint name="b1" type="hinge" axis="0 1 0" damping="0.2" armature="0.03"/>
        <inertial pos="0 -0.15 0" mass="1" diaginertia="0.008 0.001 0.008"/>
        <body name="r2" pos="0 -0.3 0">
          <joint name="b2" type="slide" axis="0 1 0" damping="0.5" armature="0.05" stiffness="10" springref="0.02"/>
          <inertial pos="0 -0.05 0" mass="0.7" diaginertia="0.001 0.001 0.001"/>
        </body>
        <body name="r3" pos="0 -0.1 -0.05">
          <joint name="b3" type="ball" damping="0.05" armature="0.004"/>
          <inertial pos="0.05 0 -0.05" mass="0.3" diaginertia="0.0008 0.0006 0.0004"/>
        </body>
      </body>
    </body>
    <body name="p1" pos="1 0 1">
      <joint name="c1" type="hinge" axis="0 1 0" damping="0.1" armature="0.01"/>
      <inertial pos="0 0 -0.2" mass="0.8" diaginertia="0.004 0.004 0.001"/>
      <body name="p2" pos="0 0 -0.4">
        <joint name="c2" type="slide" axis="0 0 1" damping="0.4"/>
        <inertial pos="0 0 -0.1" mass="0.4" diaginertia="0.001 0.001 0.001"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t1" stiffness="3" damping="0.2" springlength="0.1 0.2">
      <joint joint="a1" coef="1"/>
      <joint joint="b1" coef="-0.5"/>
    </fixed>
  </tendon>
</mujoco>
"""
# dofs: 0-5 the torso's free joint, 6 a1, 7 a2, 8 b1, 9 b2 (slide), 10-12 b3 (ball), 13 c1, 14 c2 (slide)
P, V, F = CTRL_POSITION, CTRL_VELOCITY, CTRL_FORCE
MODES = [F, F, V, F, P, F, P, P, V, F, P, F, V, P, V]
SATURATED = [7, 12]  # PD laws outside their (narrow) force ranges
CLAMPED = {9: DF_FORCE_HI, 11: DF_FORCE_LO}  # force commands beyond their ranges
# the rows of the row-solve check: (lo, hi, shift) of each segment (the first spans both trees)
ROWS = [[0, 13, 0, 13, 15, 0], [13, 15, -13, 0, 0, 0]]
# kernel stages
KIN, BIAS, SMOOTH, SMOOTH_REV, BIAS_REV, ROW_SOLVE, ROW_REV = 1, 2, 4, 8, 16, 32, 64
# the differences' step and the largest relative error
EPS, TOL = 3e-6, 1e-5

nd = ti.types.ndarray


@ti.kernel
def run(stages: ti.i32, qpos: nd(ndim=3), vel: nd(ndim=3), ctrl_mode: nd(ndim=2), ctrl_force: nd(ndim=2),
        ctrl_pos: nd(ndim=2), ctrl_vel: nd(ndim=2), ctrl_kp: nd(ndim=2), ctrl_kv: nd(ndim=2), params_f: nd(ndim=1),
        params_i: nd(ndim=1), link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2), joint_i: nd(ndim=2),
        dof_f: nd(ndim=3), dof_i: nd(ndim=2), ten_f: nd(ndim=2), ten_i: nd(ndim=2), s_lpos: nd(ndim=3),
        s_lquat: nd(ndim=3), s_R: nd(ndim=2), s_com: nd(ndim=2), s_janchor: nd(ndim=2), s_jaxis: nd(ndim=2),
        s_ref: nd(ndim=2),
        s_cdof: nd(ndim=2), s_cdof_dot: nd(ndim=2), s_cvel: nd(ndim=2), s_cacc: nd(ndim=2), s_cfrc: nd(ndim=2),
        s_crb_m: nd(ndim=2), s_crb_mc: nd(ndim=2), s_crb_io: nd(ndim=2), s_mass: nd(ndim=3), s_dof: nd(ndim=3),
        rows: nd(ndim=2), s_X: nd(ndim=3), g_qpos: nd(ndim=2), g_vel: nd(ndim=2), g_R: nd(ndim=2),
        g_com: nd(ndim=2), g_lpos: nd(ndim=2), g_cdof: nd(ndim=2), g_cdof_dot: nd(ndim=2), g_cvel: nd(ndim=2),
        g_mass: nd(ndim=3),
        g_dof: nd(ndim=3), g_link_f: nd(ndim=3), g_dof_f: nd(ndim=3), g_ctrl: nd(ndim=3), g_cacc: nd(ndim=2),
        g_cfrc: nd(ndim=2), g_crb_m: nd(ndim=2), g_crb_mc: nd(ndim=2), g_crb_io: nd(ndim=2), g_X: nd(ndim=3)):
    h = params_f[PF_DT]
    n = dof_i.shape[0]
    for b in range(qpos.shape[1]):
        if stages & KIN:
            forward_kinematics(b, 0, qpos, s_lpos, s_lquat, link_f, link_i, joint_f, joint_i, s_R, s_com, s_janchor,
                               s_jaxis, s_ref)
            dof_motions(b, 0, vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel)
        if stages & BIAS:
            bias_and_mass(b, 0, qpos, vel, params_f, link_f, link_i, dof_f, dof_i, ctrl_mode, ctrl_force, ctrl_pos,
                          ctrl_vel, ctrl_kp, ctrl_kv, h, s_R, s_com, s_ref, s_cdof, s_cdof_dot, s_cvel, s_cacc,
                          s_cfrc, s_crb_m, s_crb_mc, s_crb_io, s_mass, s_dof)
        if stages & SMOOTH:
            smooth_acceleration(b, 0, h, qpos, vel, params_i, dof_f, dof_i, ten_f, ten_i, ctrl_mode, ctrl_force,
                                ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv, s_mass, s_dof)
        if stages & SMOOTH_REV:
            smooth_acceleration_reverse(b, 0, h, qpos, vel, params_i, dof_f, dof_i, ten_f, ten_i, ctrl_mode,
                                        ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv, s_crb_m, s_crb_mc, s_crb_io,
                                        s_cdof, s_mass, s_dof, g_qpos, g_vel, g_dof, g_mass, g_dof_f, g_ctrl)
        if stages & BIAS_REV:
            bias_and_mass_reverse(b, 0, qpos, vel, params_f, link_f, link_i, dof_f, dof_i, ctrl_mode, ctrl_force,
                                  ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv, h, s_R, s_com, s_ref, s_cdof, s_cdof_dot,
                                  s_cvel, s_cacc, s_cfrc, s_crb_m, s_crb_mc, s_crb_io, g_vel, g_R, g_com, g_lpos,
                                  g_cdof, g_cdof_dot, g_cvel, g_mass, g_dof, g_link_f, g_dof_f, g_ctrl, g_cacc, g_cfrc,
                                  g_crb_m, g_crb_mc, g_crb_io)
        if stages & ROW_SOLVE:
            factor_ldl(b, n, s_mass, dof_i)
            for r in range(rows.shape[0]):
                for seg in range(2):
                    ldl_solve(b, rows[r, 3 * seg], rows[r, 3 * seg + 1], s_mass, dof_i, s_X, r, True,
                              rows[r, 3 * seg + 2])
        if stages & ROW_REV:
            for r in range(rows.shape[0]):
                for seg in range(2):
                    ldl_solve_reverse(b, rows[r, 3 * seg], rows[r, 3 * seg + 1], s_mass, dof_i, s_X, r, True,
                                      rows[r, 3 * seg + 2], g_X, r, g_mass)


class Stage:
    """The model's arrays, the scratch and the adjoints of a built scene, and `run` over them."""

    def __init__(self, solver):
        self.solver, self.m, self.s, st = solver, solver.model, solver.scratch, solver.state
        B, D, L = solver.batch, solver.n_dofs, solver.n_links
        self.ctrl = [st.dofs_ctrl_mode, st.dofs_ctrl_force, st.dofs_ctrl_pos, st.dofs_ctrl_vel, st.dofs_kp,
                     st.dofs_kv]

        def z(*shape, element=(), kind="f"):
            return solver._taichi_array(shape, kind, element)

        v3, v6, m3 = (3,), (6,), (3, 3)
        self.g = dict(g_qpos=z(B, solver.n_qs), g_vel=z(B, D), g_R=z(B, L, element=m3), g_com=z(B, L, element=v3),
                      g_lpos=z(B, L, element=v3), g_cdof=z(B, D, element=v6), g_cdof_dot=z(B, D, element=v6), g_cvel=z(B, L, element=v6),
                      g_mass=z(B, D, D), g_dof=z(B, D, GD_N), g_link_f=z(B, L, LF_N), g_dof_f=z(B, D, DF_N),
                      g_ctrl=z(B, D, GT_N), g_cacc=z(B, L, element=v6), g_cfrc=z(B, L, element=v6), g_crb_m=z(B, L),
                      g_crb_mc=z(B, L, element=v3), g_crb_io=z(B, L, element=m3), g_X=z(B, len(ROWS), D))
        self.rows = solver._taichi_array((len(ROWS), 6), "i", values=np.array(ROWS, dtype=np.int32))
        self.X = z(B, len(ROWS), D)

    def __call__(self, stages):
        m, s = self.m, self.s
        run(stages, s["s_qs"], s["s_vs"], *self.ctrl, m["params_f"], m["params_i"], m["link_f"], m["link_i"],
            m["joint_f"], m["joint_i"], m["dof_f"], m["dof_i"], m["ten_f"], m["ten_i"], s["s_lpos"], s["s_lquat"],
            s["s_R"], s["s_com"], s["s_janchor"], s["s_jaxis"], s["s_ref"], s["s_cdof"], s["s_cdof_dot"], s["s_cvel"],
            s["s_cacc"], s["s_cfrc"], s["s_crb_m"], s["s_crb_mc"], s["s_crb_io"], s["s_mass"], s["s_dof"], self.rows,
            self.X, *self.g.values())

    def zero_adjoints(self):
        for a in self.g.values():
            a.fill(0)


def build(tmp_path):
    """The scene (two environments that differ in their parameters), its state at the stage, and the controls."""
    path = tmp_path / "tree.xml"
    path.write_text(MODEL)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, gravity=(0.4, -0.3, -9.81)),
                     rigid_options=gs.options.RigidOptions(enable_collision=False))
    scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build(n_envs=2)
    solver = scene.rigid_solver
    rng = np.random.default_rng(3)
    stage = Stage(solver)
    B, D, L = solver.batch, solver.n_dofs, solver.n_links
    assert (D, L, solver.n_qs) == (15, 8, 17)
    link_f = stage.m["link_f"].to_numpy()
    link_f[1, :, LF_MASS] *= 1.0 + 0.3 * rng.random(L)
    for l in range(L):
        a = 0.002 * rng.standard_normal((3, 3))
        link_f[1, l, LF_INERTIA:LF_INERTIA + 9] += (a @ a.T).reshape(9)
    link_f[1, :, LF_COM:LF_COM + 3] += 0.03 * rng.standard_normal((L, 3))
    link_f[:, 3, LF_GRAVCOMP] = [0.6, 0.35]
    link_f[:, 7, LF_FLUID_DENSITY:LF_FLUID_VISCOSITY + 1] = 0.0  # no fluid on p2, nor on l2 in env 1
    link_f[1, 2, LF_FLUID_DENSITY:LF_FLUID_VISCOSITY + 1] = 0.0
    assert link_f[0, 2, LF_FLUID_DENSITY] > 0
    stage.m["link_f"].from_numpy(link_f)
    dof_f = stage.m["dof_f"].to_numpy()
    dof_f[1, :, DF_DAMPING] += 0.2 * rng.random(D)
    dof_f[1, :, DF_ARMATURE] += 0.01 * rng.random(D)
    dof_f[:, 7, DF_FORCE_LO], dof_f[:, 7, DF_FORCE_HI] = -0.05, 0.05
    dof_f[:, 12, DF_FORCE_LO], dof_f[:, 12, DF_FORCE_HI] = [-0.02, -0.03], [0.02, 0.01]
    dof_f[:, 9, DF_FORCE_LO], dof_f[:, 9, DF_FORCE_HI] = -2.0, [1.5, 2.0]
    dof_f[:, 11, DF_FORCE_LO], dof_f[:, 11, DF_FORCE_HI] = [-1.0, -0.5], 3.0
    stage.m["dof_f"].from_numpy(dof_f)
    mode, force, pos, vel, kp, kv = stage.ctrl
    mode[:] = torch.tensor(MODES, dtype=torch.int32)
    force[:] = torch.as_tensor(rng.uniform(-1.0, 1.0, (B, D)))
    force[:, 9], force[:, 11] = 5.0, -4.0
    pos[:] = torch.as_tensor(rng.uniform(-0.5, 0.5, (B, D)))
    pos[:, 7] = 1.5
    vel[:] = torch.as_tensor(rng.uniform(-1.0, 1.0, (B, D)))
    vel[:, 12] = 3.0
    kp[:] = torch.as_tensor(rng.uniform(20.0, 80.0, (B, D)))
    kv[:] = torch.as_tensor(rng.uniform(1.0, 5.0, (B, D)))
    qpos = np.zeros((1, B, 17))
    for b in range(B):
        quat = rng.standard_normal(4)
        ball = rng.standard_normal(4)
        qpos[0, b] = np.concatenate([[0.1, -0.2, 1.0], quat / np.linalg.norm(quat), [0.5 + 0.1 * b, -0.3, 0.2, 0.04],
                                     ball / np.linalg.norm(ball), [0.3, -0.05]])
    assert (qpos[0, :, 7] - 0.5 * qpos[0, :, 9] > 0.2).all()  # the tendon a1 - b1 / 2 is past its slack
    stage.s["s_qs"].from_numpy(qpos)
    stage.s["s_vs"].from_numpy(rng.uniform(-1.5, 1.5, (1, B, D)))
    s_dof = stage.s["s_dof"].to_numpy()
    s_dof[:, :, SD_EXT] = rng.uniform(-2.0, 2.0, (B, D))  # the external forces (external_forces' output)
    stage.s["s_dof"].from_numpy(s_dof)
    return scene, stage, rng


def differences(loss, eps, arrays):
    """Central differences of loss() with respect to every entry of each (name, numpy getter, setter) input."""
    out = {}
    for name, array, put in arrays:
        x0 = array.copy()
        grad = np.zeros_like(x0)
        for i in range(x0.size):
            for sign in (1.0, -1.0):
                x = x0.copy()
                x.flat[i] += sign * eps
                put(x)
                grad.flat[i] += sign * loss() / (2 * eps)
        put(x0)
        out[name] = grad
    return out


def ti_input(a):
    return a.to_numpy(), a.from_numpy


def torch_input(t):
    def put(x):
        t[:] = torch.as_tensor(x, dtype=t.dtype)
    return t.numpy().copy(), put


def relative_error(grad, fd):
    """|grad - fd| / |fd|; 0 where both are (near) zero, inf where only fd is."""
    if np.linalg.norm(fd) < 1e-10:
        return 0.0 if np.linalg.norm(grad) < 1e-8 else float("inf")
    return float(np.linalg.norm(grad - fd) / np.linalg.norm(fd))


def assert_small(errors, tol):
    bad = {k: f"{v:.1e}" for k, v in errors.items() if not v < tol}
    assert not bad, f"relative errors over {tol}: {bad}"


def test_smooth_acceleration_and_bias_and_mass_reverse_match_differences(tmp_path):
    """The adjoints of qacc = M~^-1 (tau - c) with respect to everything the dynamics stage reads, through
    smooth_acceleration_reverse then bias_and_mass_reverse (the saturation flags in s_dof[:, :, SD_SATURATED]
    overwritten in between: the reverse recomputes them), against central differences of bias_and_mass + smooth_acceleration."""
    scene, stage, rng = build(tmp_path)
    s, g = stage.s, stage.g
    stage(KIN | BIAS | SMOOTH)
    flags = s["s_dof"].to_numpy()[:, :, SD_SATURATED]
    assert [d for d in range(15) if (flags[:, d] != 0).any()] == SATURATED and (flags[:, SATURATED] != 0).all()
    weights = rng.standard_normal((2, 15))

    def loss():
        stage(BIAS | SMOOTH)
        return float((s["s_dof"].to_numpy()[:, :, SD_ACC] * weights).sum())

    base = loss()
    s_dof = s["s_dof"].to_numpy()
    s_dof[:, :, SD_SATURATED] = rng.standard_normal((2, 15))  # (not read by the reverse)
    s["s_dof"].from_numpy(s_dof)
    stage.zero_adjoints()
    g_dof = np.zeros((2, 15, GD_N))
    g_dof[:, :, GD_ACC] = weights
    g["g_dof"].from_numpy(g_dof)
    stage(SMOOTH_REV | BIAS_REV)
    ours = {k: a.to_numpy() for k, a in g.items()}
    s_dof = s["s_dof"].to_numpy()

    def put_ext(x):
        s_dof[:, :, SD_EXT] = x
        s["s_dof"].from_numpy(s_dof)

    mode, force, pos, vel, kp, kv = stage.ctrl
    inputs = [(k, *ti_input(s[k])) for k in ("s_R", "s_com", "s_ref", "s_cdof", "s_cdof_dot", "s_cvel", "s_qs",
                                             "s_vs")]
    inputs += [("link_f", *ti_input(stage.m["link_f"])), ("dof_f", *ti_input(stage.m["dof_f"])),
               ("ext", s_dof[:, :, SD_EXT].copy(), put_ext)]
    inputs += [(f"ctrl{k}", *torch_input(t)) for k, t in enumerate((force, pos, vel, kp, kv))]
    fd = differences(loss, EPS, inputs)
    assert loss() == base
    # no fluid on a link whose density and viscosity are 0 (bias_and_mass's branch, held): the adjoints of those two
    # are 0 there, where central differences straddle the branch
    link_f = stage.m["link_f"].to_numpy()
    off = link_f[:, :, LF_FLUID_DENSITY] + link_f[:, :, LF_FLUID_VISCOSITY] == 0
    assert off.sum() == 3
    fluid_off = ours["g_link_f"][:, :, LF_FLUID_DENSITY:LF_FLUID_VISCOSITY + 1][off]
    assert (fluid_off == 0).all() and (fd["link_f"][:, :, LF_FLUID_DENSITY][off] != 0).all()
    fd["link_f"][:, :, LF_FLUID_DENSITY:LF_FLUID_VISCOSITY + 1][off] = 0.0
    errors = {}
    for key, name in (("s_R", "g_R"), ("s_com", "g_com"), ("s_ref", "g_lpos"), ("s_cdof", "g_cdof"),
                      ("s_cdof_dot", "g_cdof_dot"), ("s_cvel", "g_cvel")):
        errors[name] = relative_error(ours[name], fd[key])
    errors["g_qpos"] = relative_error(ours["g_qpos"], fd["s_qs"][0])
    errors["g_vel"] = relative_error(ours["g_vel"], fd["s_vs"][0])
    errors["g_dof[GD_EXT] (external)"] = relative_error(ours["g_dof"][:, :, GD_EXT], fd["ext"])
    for k, name in enumerate(("force", "pos", "vel", "kp", "kv")):
        errors[f"g_ctrl {name}"] = relative_error(ours["g_ctrl"][:, :, k], fd[f"ctrl{k}"])
    for c, name in enumerate(("damping", "armature", "stiffness", "springref", "range_lo", "range_hi", "force_lo",
                              "force_hi")):
        errors[f"g_dof_f {name}"] = relative_error(ours["g_dof_f"][:, :, c], fd["dof_f"][:, :, c])
    for c0, c1, name in ((0, LF_MASS, "pos quat"), (LF_MASS, LF_COM, "mass"), (LF_COM, LF_INERTIA, "com"),
                         (LF_INERTIA, LF_GRAVCOMP, "inertia"), (LF_GRAVCOMP, LF_FLUID_DENSITY, "gravcomp"),
                         (LF_FLUID_DENSITY, LF_FLUID_VISCOSITY, "density"),
                         (LF_FLUID_VISCOSITY, LF_FLUID_WIND, "viscosity"), (LF_FLUID_WIND, LF_FLUID_BOX, "wind"),
                         (LF_FLUID_BOX, LF_FLUID_IQUAT, "box"), (LF_FLUID_IQUAT, LF_N, "iquat")):
        errors[f"g_link_f {name}"] = relative_error(ours["g_link_f"][:, :, c0:c1], fd["link_f"][:, :, c0:c1])
    print("\n" + " ".join(f"{k}: {v:.1e}" for k, v in errors.items()))
    assert_small(errors, TOL)
    # the clamped commands and the saturated laws move the loss through their force range, the others through
    # their gains; gravity compensation and the fluid move it
    for d, col in CLAMPED.items():
        assert (np.abs(ours["g_dof_f"][:, d, col]) > 1e-3).all() and (ours["g_ctrl"][:, d, GT_FORCE] == 0).all()
    for d in SATURATED:
        assert (np.abs(ours["g_dof_f"][:, d, DF_FORCE_LO:DF_FORCE_HI + 1]).max(axis=1) > 1e-3).all()
    assert np.abs(fd["link_f"][:, 3, LF_GRAVCOMP]).min() > 1e-3
    assert np.abs(fd["s_ref"]).max() > 1e-2  # the links' origins move the loss (the shifts between them)
    assert np.abs(fd["link_f"][:, :, LF_FLUID_DENSITY:LF_N]).max() > 1e-3


def test_smooth_acceleration_reverse_mass_and_bias_adjoints(tmp_path):
    """smooth_acceleration_reverse alone: its adjoints of M~ (the lower entries, the symmetric ones folded in; the
    others 0) and of the bias c, against differences of smooth_acceleration from a perturbed M~ and c; and
    ldl_solve_reverse on compact rows (by_row, with a shift, over two trees), as the constraint stage uses it."""
    scene, stage, rng = build(tmp_path)
    s, g = stage.s, stage.g
    stage(KIN | BIAS)
    mass0, dof0 = s["s_mass"].to_numpy(), s["s_dof"].to_numpy()
    weights = rng.standard_normal((2, 15))

    mass, dof = mass0.copy(), dof0.copy()

    def loss():
        s["s_mass"].from_numpy(mass)
        s["s_dof"].from_numpy(dof)
        stage(SMOOTH)
        return float((s["s_dof"].to_numpy()[:, :, SD_ACC] * weights).sum())

    def put_mass(v):
        mass[:] = v

    def put_bias(v):
        dof[:, :, SD_BIAS] = v

    fd = differences(loss, EPS, [("mass", mass0.copy(), put_mass), ("bias", dof0[:, :, SD_BIAS].copy(), put_bias)])
    loss()
    stage.zero_adjoints()
    g_dof = np.zeros((2, 15, GD_N))
    g_dof[:, :, GD_ACC] = weights
    g["g_dof"].from_numpy(g_dof)
    stage(SMOOTH_REV)
    errors = {"g_mass": relative_error(g["g_mass"].to_numpy(), fd["mass"]),
              "g_dof[0] (bias)": relative_error(g["g_dof"].to_numpy()[:, :, GD_BIAS], fd["bias"])}
    lower = np.zeros((15, 15), dtype=bool)
    dof_i = stage.m["dof_i"].to_numpy()
    for k in range(15):
        i = k
        while i >= 0:
            lower[k, i] = True
            i = dof_i[i, 0]
    assert (fd["mass"][:, ~lower] == 0).all() and (np.abs(fd["mass"][:, lower]) > 0).mean() > 0.9

    # rows: W = M~^-1 J^T per row segment, the loss sum(weights * W)
    row_w = rng.standard_normal((2, len(ROWS), 15))
    row_w[:, 1, 2:] = 0.0  # the second row has two columns
    x0 = rng.standard_normal((2, len(ROWS), 15))
    x0[:, 1, 2:] = 0.0

    def row_loss():
        s["s_mass"].from_numpy(mass)
        stage.X.from_numpy(x)
        stage(ROW_SOLVE)
        return float((stage.X.to_numpy() * row_w).sum())

    mass, x = mass0.copy(), x0.copy()

    def put_x(v):
        x[:] = v

    fd = differences(row_loss, EPS, [("mass", mass0.copy(), put_mass), ("x", x0.copy(), put_x)])
    mass, x = mass0.copy(), x0.copy()
    stage.zero_adjoints()
    g["g_X"].from_numpy(row_w)
    s["s_mass"].from_numpy(mass)
    stage.X.from_numpy(x)
    stage(ROW_SOLVE | ROW_REV)
    errors["rows: g_mass"] = relative_error(g["g_mass"].to_numpy(), fd["mass"])
    errors["rows: the rows' J"] = relative_error(g["g_X"].to_numpy(), fd["x"])
    assert np.abs(fd["x"][:, 1, :2]).min() > 0 and np.abs(fd["mass"][:, 13:, 13:]).max() > 0
    print("\n" + " ".join(f"{k}: {v:.1e}" for k, v in errors.items()))
    assert_small(errors, TOL)
