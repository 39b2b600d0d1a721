"""The constraint stage's reverse functions (kernels_constraint) against central finite differences in float64.

A plain step of each scene leaves the contact pool, the motion subspaces and the warm start; a test kernel then
runs solve_constraints from a given v_free and M~ (factorised in the kernel) and, on request, its reverse, whose
adjoints are compared with central differences of loss = sum of random weights * (final velocity, pseudo-velocity,
impulses written to contact_impulse[fn]). The tolerance stop is off (PF_TOL = 0) except in the test that checks
it replays the forward's sweep count. Relative errors are required under 1e-6.
"""

import os

import numpy as np
import taichi as ti
import torch

import genesis_core as gs
from genesis_rigid.kernels_collision import CF_DEPTH, CF_MU, CF_REST, CI_LINK_A, CI_LINK_B, CI_META, CI_PREV, \
    CM_SWEEPS
from genesis_rigid.kernels_constraint import GR_N, GV_N, RF_LAMBDA, solve_constraints, solve_constraints_reverse
from genesis_rigid.kernels_dynamics import factor_ldl
from genesis_rigid.kernels_integrate import advance_q, advance_q_reverse
from genesis_rigid.layout import (DF_N, DF_RANGE_HI, DF_RANGE_LO, DI_LINK, DI_PARENT, DI_Q, GD_FREE_VEL, GD_N,
                                  GD_PSEUDO, GD_VEL, PF_DT, PF_TOL, PP_ITERATIONS, RI_ITEM, SD_FREE_VEL, SD_PSEUDO,
                                  SD_VEL)

nd = ti.types.ndarray
TOL = 1e-6
ITERATIONS = 15  # few enough that no sweep of these cases reaches a fixed point (the stop would end it)


@ti.kernel
def constraint_kernel(mode: ti.i32, f: ti.i32, fn: ti.i32, vfree: nd(ndim=2), mass_in: nd(ndim=3), qpos: nd(ndim=3),
                      contact_impulse: nd(ndim=4), limit_impulse: nd(ndim=3), equality_impulse: nd(ndim=4),
                      eq_type: nd(ndim=2), eq_obj: nd(ndim=3), eq_data: nd(ndim=3), eq_active: nd(ndim=2),
                      params_f: nd(ndim=1), params_i: nd(ndim=1), link_i: nd(ndim=2),
                      dof_f: nd(ndim=3), dof_i: nd(ndim=2), ten_f: nd(ndim=2), ten_i: nd(ndim=2),
                      s_cdof: nd(ndim=2), s_ref: nd(ndim=2), s_R: nd(ndim=2), s_mass: nd(ndim=3), s_dof: nd(ndim=3),
                      s_con_f: nd(ndim=3),
                      s_con_i: nd(ndim=3), s_J: nd(ndim=3), s_W: nd(ndim=3), s_row_f: nd(ndim=3),
                      s_row_i: nd(ndim=3), s_hist: nd(ndim=3), g_dof: nd(ndim=3), g_mass: nd(ndim=3),
                      g_cdof: nd(ndim=2), g_con: nd(ndim=3), g_imp_in: nd(ndim=3), g_imp_out: nd(ndim=3),
                      g_qpos: nd(ndim=2), g_dof_f: nd(ndim=3), g_row: nd(ndim=3), g_J: nd(ndim=3), g_W: nd(ndim=3),
                      g_v: nd(ndim=3), g_lpos: nd(ndim=2), g_R: nd(ndim=2), G_limit: nd(ndim=3),
                      G_equality: nd(ndim=4)):
    """solve_constraints from v_free = vfree[b] and M~ = mass_in[b] (factorised here); mode 1: then its reverse."""
    ti.loop_config(serialize=True)
    for b in range(vfree.shape[0]):
        n = dof_i.shape[0]
        h = params_f[PF_DT]
        for i in range(n):
            for j in range(n):
                s_mass[b, i, j] = mass_in[b, i, j]
        factor_ldl(b, n, s_mass, dof_i)
        for d in range(n):
            s_dof[b, d, SD_VEL] = vfree[b, d]
        solve_constraints(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i, contact_impulse,
                          limit_impulse, eq_type, eq_obj, eq_data, eq_active, equality_impulse, s_cdof, s_ref, s_R,
                          s_mass, s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i, s_hist)
        if mode == 1:
            solve_constraints_reverse(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i,
                                      contact_impulse, eq_type, eq_obj, eq_data, eq_active, s_cdof, s_ref, s_R,
                                      s_mass, s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i, s_hist, g_dof,
                                      g_mass, g_cdof, g_con, g_imp_in, g_imp_out, g_qpos, g_dof_f, g_row, g_J, g_W,
                                      g_v, g_lpos, g_R, G_limit, G_equality)


@ti.kernel
def aux_kernel(mode: ti.i32, scale: nd(ndim=1), qsrc: nd(ndim=3), vel: nd(ndim=3), qdst: nd(ndim=3),
               joint_i: nd(ndim=2), g_dst: nd(ndim=2), g_src: nd(ndim=2), g_vel: nd(ndim=2)):
    """advance_q of qsrc[0] by scale[0] * vel[0] into qdst[0]; mode 1: then advance_q_reverse."""
    ti.loop_config(serialize=True)
    for b in range(qsrc.shape[1]):
        advance_q(b, qsrc, 0, qdst, 0, vel, 0, scale[0], joint_i)
        if mode == 1:
            advance_q_reverse(b, qsrc, 0, vel, 0, scale[0], joint_i, g_dst, g_src, g_vel)


ARM = """<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" range="-0.5 0.5" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="b" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" range="-0.4 0.4"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
      <body name="b2" pos="0 0 -0.1">
        <joint name="j5" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02"/>
      </body>
    </body>
    <body name="c" pos="1 0 1">
      <joint name="j3" type="slide" axis="0 0 1" range="-0.1 0.1"/>
      <geom type="box" size="0.05 0.05 0.05"/>
    </body>
    <body name="d" pos="2 0 1">
      <joint name="j4" type="ball"/>
      <geom type="capsule" fromto="0 0 0 0.2 0.05 0" size="0.03"/>
    </body>
    <body name="e" pos="3 0 1">
      <freejoint/>
      <geom type="box" size="0.05 0.07 0.04"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t" range="-0.3 0.3"><joint joint="j5" coef="0.7"/><joint joint="j3" coef="2"/></fixed>
  </tendon>
</mujoco>"""


def contact_scene():
    """A box (friction 0.5) started 1 mm into the plane and a sphere 1 mm into the box, two steps from rest."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=1),
                     rigid_options=gs.options.RigidOptions(iterations=ITERATIONS))
    scene.add_entity(gs.morphs.Plane())
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.099), size=(0.2, 0.2, 0.2)), material=gs.materials.Rigid(friction=0.5))
    scene.add_entity(gs.morphs.Sphere(pos=(0.02, -0.01, 0.248), radius=0.05))
    scene.build(n_envs=2)
    scene.step()
    scene.step()
    return scene


def arm_scene(tmp_path, iterations=ITERATIONS):
    """A branched arm, a slider, a ball joint and a free body, no collisions, started past the joints' and the
    tendon's limits (differently in the two environments), one step."""
    path = tmp_path / "arm.xml"
    path.write_text(ARM)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=1),
                     rigid_options=gs.options.RigidOptions(iterations=iterations, enable_collision=False))
    arm = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(path)))
    scene.build(n_envs=2)
    q = arm.get_qpos().numpy().copy()
    q[0, :4] = [0.53, -0.43, 0.2, 0.11]  # j1, j2 (past 0.5, -0.4), j5, j3 (past 0.1)
    q[1, :4] = [-0.56, 0.45, -0.2, -0.12]  # j1, j2, j5, j3; the tendon past +-0.3 in both
    arm.set_qpos(q)
    arm.set_dofs_velocity(np.array([[0.3, -0.2, 0.1, 0.05, 0.2, -0.1, 0.3, 0.1, 0, 0, 0.2, -0.3, 0.1],
                                    [-0.4, 0.3, 0.0, -0.1, 0.1, 0.2, -0.2, 0, 0.1, 0, -0.1, 0.2, 0.3]]))
    scene.step()
    return scene


class ConstraintCase:
    """The test kernel's inputs (copies of what a plain step left, perturbable) and adjoints."""

    def __init__(self, scene, seed, vfree=None, tol=0.0):
        s = self.solver = scene.rigid_solver
        self.f = s.frames.prev(scene._frame)
        self.fn = scene._frame
        m, sc, st = s.model, s.scratch, s.state
        B, D = s.batch, max(s.n_dofs, 1)
        C, R, width = s.max_contacts, sc["s_J"].shape[1], sc["s_J"].shape[2]
        rng = np.random.default_rng(seed)
        self.dof_i = m["dof_i"].to_numpy()
        pf = m["params_f"].to_numpy()
        pf[PF_TOL] = tol
        m["params_f"].from_numpy(pf)
        # M~ = L^T D L from the factor the step left
        fac = sc["s_mass"].to_numpy()
        mass = np.zeros_like(fac)
        for b in range(B):
            low = np.eye(D)
            for k in range(D):
                i = self.dof_i[k, DI_PARENT]
                while i >= 0:
                    low[k, i] = fac[b, k, i]
                    i = self.dof_i[i, DI_PARENT]
            mass[b] = low.T @ np.diag(np.diag(fac[b])) @ low
        arr = s._taichi_array
        self.vfree = arr((B, D), values=sc["s_dof"].to_numpy()[:, :, SD_FREE_VEL] if vfree is None else vfree)
        self.mass = arr((B, D, D), values=mass)
        self.hist = arr((B, 2 * (int(m["params_i"].to_numpy()[PP_ITERATIONS]) + 1), R))
        self.g = dict(g_dof=arr((B, D, GD_N)), g_mass=arr((B, D, D)), g_cdof=arr((B, D), element=(6,)),
                      g_con=arr((B, C, 8)), g_imp_in=arr((B, C, 3)), g_imp_out=arr((B, C, 3)),
                      g_qpos=arr((B, st.qpos.shape[2])), g_dof_f=arr((B, D, DF_N)), g_J=arr((B, R, width)),
                      g_W=arr((B, R, width)), g_row=arr((B, R, GR_N)), g_v=arr((B, D, GV_N)),
                      g_lpos=arr((B, max(s.n_links, 1)), element=(3,)),
                      g_R=arr((B, max(s.n_links, 1)), element=(3, 3)))
        self.w_v, self.w_u = rng.normal(size=(B, D)), rng.normal(size=(B, D))
        self.w_imp = rng.normal(size=(B, C, 3))
        self.G_limit = arr(tuple(st.limit_impulse.shape))
        self.w_lim = rng.normal(size=tuple(st.limit_impulse.shape[1:]))
        self.G_equality = arr(tuple(st.equality_impulse.shape))
        self.w_eq = rng.normal(size=tuple(st.equality_impulse.shape[1:]))
        self.counts = set()

    def run(self, mode=0, hist=None):
        s = self.solver
        m, sc, st = s.model, s.scratch, s.state
        constraint_kernel(mode, self.f, self.fn, self.vfree, self.mass, st.qpos, st.contact_impulse,
                          st.limit_impulse, st.equality_impulse, st.eq_type, st.eq_obj, st.eq_data, st.eq_active,
                          m["params_f"], m["params_i"], m["link_i"], m["dof_f"], m["dof_i"], m["ten_f"], m["ten_i"],
                          sc["s_cdof"], sc["s_ref"], sc["s_R"], sc["s_mass"], sc["s_dof"], sc["s_con_f"],
                          sc["s_con_i"], sc["s_J"], sc["s_W"], sc["s_row_f"], sc["s_row_i"],
                          self.hist if hist is None else hist,
                          *(self.g[k] for k in ("g_dof", "g_mass", "g_cdof", "g_con", "g_imp_in", "g_imp_out",
                                                "g_qpos", "g_dof_f", "g_row", "g_J", "g_W", "g_v", "g_lpos", "g_R")),
                          self.G_limit, self.G_equality)
        self.counts.add(tuple(sc["s_con_i"][:, CI_META, CM_SWEEPS:CM_SWEEPS + 2].flatten().tolist()))

    def outputs(self):
        sd = self.solver.scratch["s_dof"].to_numpy()
        st = self.solver.state
        return (sd[:, :, SD_VEL], sd[:, :, SD_PSEUDO], st.contact_impulse[self.fn].numpy().copy(),
                st.limit_impulse[self.fn].numpy().copy(), st.equality_impulse[self.fn].numpy().copy())

    def loss(self):
        self.run(0)
        v, u, imp, lim, eq = self.outputs()
        return float((self.w_v * v).sum() + (self.w_u * u).sum() + (self.w_imp * imp).sum()
                     + (self.w_lim * lim).sum() + (self.w_eq * eq).sum())

    def gradients(self):
        for a in self.g.values():
            a.fill(0)
        g_dof = np.zeros(self.g["g_dof"].shape)
        g_dof[:, :, GD_VEL], g_dof[:, :, GD_PSEUDO] = self.w_v, self.w_u
        self.g["g_dof"].from_numpy(g_dof)
        self.g["g_imp_out"].from_numpy(self.w_imp)
        g_limit = np.zeros(self.G_limit.shape)
        g_limit[self.fn] = self.w_lim
        self.G_limit.from_numpy(g_limit)
        g_eq = np.zeros(self.G_equality.shape)
        g_eq[self.fn] = self.w_eq
        self.G_equality.from_numpy(g_eq)
        self.run(1)
        out = {k: self.g[k].to_numpy() for k in ("g_dof", "g_mass", "g_cdof", "g_con", "g_imp_in", "g_qpos",
                                                 "g_dof_f", "g_lpos", "g_R")}
        out["G_limit"] = self.G_limit.to_numpy()[self.f]
        out["G_equality"] = self.G_equality.to_numpy()[self.f]
        return out

    def differences(self, get, put, entries, eps=1e-6):
        """Central differences of the loss in the entries (index tuples) of the array get() returns (put(a) writes
        it back); eps: a step, or one per entry."""
        base = get()
        out = []
        for idx, eps in zip(entries, np.broadcast_to(eps, (len(entries),))):
            a = base.copy()
            a[idx] += eps
            put(a)
            up = self.loss()
            a[idx] -= 2 * eps
            put(a)
            down = self.loss()
            out.append((up - down) / (2 * eps))
        put(base)
        return np.array(out)

    def check(self, grads, name, get, put, entries, errors, moves=True, eps=1e-6):
        """The adjoint grads[entries] against the differences; the relative error goes into errors[name]."""
        fd = self.differences(get, put, entries, eps)
        g = np.array([grads[idx] for idx in entries])
        if moves:
            assert np.abs(fd).max() > 1e-6, f"{name}: the loss does not move"
        err = np.linalg.norm(g - fd) / max(np.linalg.norm(fd), 1e-300)
        errors[name] = err
        assert err < TOL, f"{name}: relative error {err:.2e}\nadjoint {g}\ndifferences {fd}"

    # perturbable inputs: (get, put) pairs
    def taichi(self, a):
        return a.to_numpy, lambda x: a.from_numpy(np.ascontiguousarray(x))

    def torch_view(self, t):
        return (lambda: t.numpy().copy()), (lambda x: t.copy_(torch.as_tensor(x)))

    def lower_entries(self):
        B, D = self.mass.shape[0], self.mass.shape[1]
        out = []
        for b in range(B):
            for k in range(D):
                i = k
                while i >= 0:
                    out.append((b, k, i))
                    i = self.dof_i[i, DI_PARENT]
        return out


def check_constraints(case, errors, contacts=True, limits=False, same_counts=True, warm_limits=False):
    """Every input adjoint of the case against differences; same_counts: every run made the same sweeps."""
    s, st, sc, m = case.solver, case.solver.state, case.solver.scratch, case.solver.model
    B, D = case.mass.shape[0], case.mass.shape[1]
    grads = case.gradients()
    gd = grads["g_dof"]
    case.check(gd[:, :, GD_FREE_VEL], "v_free", *case.taichi(case.vfree), list(np.ndindex(B, D)), errors)
    mass, entries = case.mass.to_numpy(), case.lower_entries()  # steps relative to the entries' scale
    steps = [1e-6 * np.sqrt(mass[b, k, k] * mass[b, i, i]) for b, k, i in entries]
    case.check(grads["g_mass"], "mass", *case.taichi(case.mass), entries, errors, eps=steps)
    n_con = sc["s_con_i"][:, CI_META, 0].numpy()
    if contacts:
        case.check(grads["g_cdof"], "cdof", *case.taichi(sc["s_cdof"]), list(np.ndindex(B, D, 6)), errors)
        entries = [(b, c, k) for b in range(B) for c in range(n_con[b]) for k in range(8)]
        case.check(grads["g_con"], "con", *case.torch_view(sc["s_con_f"]), entries, errors)
        # the links' origins (the reference points of their dofs' motion axes: the Jacobians' points are taken
        # relative to them): their adjoint goes to the link's g_lpos
        owners = sorted({int(d) for d in case.dof_i[:s.n_dofs, DI_LINK]})
        base_ref = sc["s_ref"].to_numpy()
        shifts = np.zeros((B, s.n_links, 3))
        entries = [(b, l, k) for b in range(B) for l in owners for k in range(3)]
        case.check(grads["g_lpos"], "ref", lambda: shifts.copy(),
                   lambda a: sc["s_ref"].from_numpy(np.ascontiguousarray(base_ref + a)), entries, errors)
        prev = sc["s_con_i"][:, CI_PREV].numpy()
        entries = [(b, int(prev[b, c]), k) for b in range(B) for c in range(n_con[b]) if prev[b, c] >= 0
                   for k in range(3)]
        assert entries, "no warm start"
        case.check(grads["g_imp_in"], "imp_in", *case.torch_view(st.contact_impulse[case.f]), entries, errors)
    if limits:
        q_idx = sorted({int(case.dof_i[d, DI_Q]) for d in range(s.n_dofs) if case.dof_i[d, DI_Q] >= 0})
        case.check(grads["g_qpos"], "qpos", *case.torch_view(st.qpos[case.f]),
                   [(b, i) for b in range(B) for i in q_idx], errors)
        entries = [(b, d, c) for b in range(B) for d in range(s.n_dofs) for c in (DF_RANGE_LO, DF_RANGE_HI)]
        case.check(grads["g_dof_f"], "range", *case.taichi(m["dof_f"]), entries, errors)
        if warm_limits:  # the limit rows' warm start, limit_impulse[f] (entries of limits not engaged: no row)
            case.check(grads["G_limit"], "limit_warm", *case.torch_view(st.limit_impulse[case.f]),
                       list(np.ndindex(*grads["G_limit"].shape)), errors, eps=1e-5)
    assert len(case.counts) == 1 or not same_counts, f"the sweep counts changed: {case.counts}"


def test_solve_constraints_reverse_contacts():
    """A box on a plane with friction and a warm start, a sphere on the box (rows over two trees): env 0 at rest
    (friction sticking, the position pass at work), env 1 sliding and spinning into the plane (friction on the
    pyramid's bounds, restitution 0.5 through the approach speed, one contact short of the surface: target
    depth / h). Also: recording the history leaves the forward bitwise unchanged."""
    scene = contact_scene()
    s = scene.rigid_solver
    sc = s.scratch
    vfree = sc["s_dof"].to_numpy()[:, :, SD_FREE_VEL].copy()
    vfree[1, :6] += [0.8, 0.3, -0.4, 0.6, -0.5, 0.4]
    vfree[1, 6:] += [0.2, -0.1, -0.7, 0.3, 0.1, -0.2]
    con = sc["s_con_f"]
    con[1, :, CF_REST] = 0.5
    con[1, 1, CF_DEPTH] = -2e-3
    case = ConstraintCase(scene, seed=1, vfree=vfree)
    n_con = sc["s_con_i"][:, CI_META, 0].numpy()
    assert n_con.tolist() == [5, 5]
    assert {int(sc["s_con_i"][0, CI_LINK_A, 4]), int(sc["s_con_i"][0, CI_LINK_B, 4])} == {1, 2}  # sphere, box
    case.run(0, hist=s._taichi_array((1, 1, 1)))
    plain = case.outputs()
    case.run(0)
    for a, b in zip(plain, case.outputs()):
        assert np.array_equal(a, b)
    # the branches the case is meant to cover
    rows = sc["s_row_f"].to_numpy()
    lam = rows[:, :15, 2].reshape(2, 5, 3)
    mu = con[:, :5, CF_MU].numpy()
    assert (np.abs(lam[0, :4, 1:]) < 0.999 * mu[0, :4, None] * lam[0, :4, :1]).any()  # sticking
    assert np.isclose(np.abs(lam[1, :, 1:]), mu[1, :, None] * lam[1, :, :1]).any()  # sliding
    assert (rows[1, :15:3, 1] > 0).any() and rows[1, 3, 1] < 0  # bounce targets, a contact short of the surface
    assert (rows[0, :15:3, 4] > 0).any()  # position-pass targets
    errors = {}
    check_constraints(case, errors)
    print(errors)


def test_solve_constraints_reverse_limits(tmp_path):
    """Joint limits of a branched arm and a slider, and a fixed tendon's limit over two trees: the velocity rows,
    the position pass's targets from qpos and the per-environment ranges (env 1's differ)."""
    scene = arm_scene(tmp_path)
    s = scene.rigid_solver
    dof_f = s.model["dof_f"].to_numpy()
    dof_f[1, 0, DF_RANGE_LO] = -0.52
    dof_f[1, 1, DF_RANGE_HI] = 0.43
    s.model["dof_f"].from_numpy(dof_f)
    rng = np.random.default_rng(3)
    vfree = s.scratch["s_dof"].to_numpy()[:, :, SD_FREE_VEL] + 0.1 * rng.normal(size=(2, s.n_dofs))
    case = ConstraintCase(scene, seed=2, vfree=vfree)
    case.run(0)
    kinds = s.scratch["s_row_i"].to_numpy()[:, :, 0]
    assert (kinds[:, :4] == 3).all()  # j1, j2, j3 or the tendon in each environment
    errors = {}
    # (these rows are independent: the sweeps reach a fixed point, where a sweep changes nothing and ends them, after
    # 12 or 13 sweeps depending on the perturbation; the fixed point does not depend on it)
    check_constraints(case, errors, contacts=False, limits=True, same_counts=False)
    print(errors)


def test_solve_constraints_reverse_limit_warm_start(tmp_path):
    """The limit rows start from the impulses of the last substep (limit_impulse[f]): with 4 sweeps the coupled
    rows of the arm's chain do not reach their fixed point, so the start matters and its adjoint is checked."""
    scene = arm_scene(tmp_path, iterations=4)
    s = scene.rigid_solver
    f = s.frames.prev(scene._frame)
    warm = s.state.limit_impulse[f]
    assert warm.shape[1] == s.n_limited
    warm.copy_(torch.as_tensor(np.random.default_rng(5).uniform(0.0, 0.05, size=tuple(warm.shape))))
    case = ConstraintCase(scene, seed=4)
    errors = {}
    check_constraints(case, errors, contacts=False, limits=True, same_counts=False, warm_limits=True)
    print(errors)
    # the forward writes each engaged limit's impulse to frame fn, and zero for the others
    case.run(0)
    rows = s.scratch["s_row_i"].to_numpy()
    lam = s.scratch["s_row_f"].to_numpy()[:, :, RF_LAMBDA]
    out = s.state.limit_impulse[case.fn].numpy()
    for b in range(2):
        engaged = {int(rows[b, r, RI_ITEM]): lam[b, r] for r in range(rows.shape[1]) if rows[b, r, 0] == 3}
        assert engaged
        for j in range(out.shape[1]):
            assert out[b, j] == engaged.get(j, 0.0)


def test_solve_constraints_reverse_tolerance_stop(tmp_path):
    """The tolerance stop on: the reverse replays the number of sweeps the forward ran (the same at every
    perturbation here, and fewer than the iterations)."""
    scene = arm_scene(tmp_path, iterations=60)
    rng = np.random.default_rng(4)
    vfree = scene.rigid_solver.scratch["s_dof"].to_numpy()[:, :, SD_FREE_VEL] + 0.1 * rng.normal(size=(2, 13))
    case = ConstraintCase(scene, seed=5, vfree=vfree, tol=1e-7)
    errors = {}
    check_constraints(case, errors, contacts=False, limits=True)
    counts = next(iter(case.counts))
    assert 2 < max(counts) < 60, counts
    print(counts, errors)


def test_advance_q_reverse(tmp_path):
    """Hinges, a slide, a ball and a free joint; env 0's ball joint does not turn (quat_integrate's zero-angle
    branch), the free joint's quaternion is off unit length (the normalisation)."""
    scene = arm_scene(tmp_path)
    s = scene.rigid_solver
    B, n_q, D = 2, s.state.qpos.shape[2], s.n_dofs
    rng = np.random.default_rng(6)
    q = rng.normal(size=(1, B, n_q))
    for b in range(B):
        q[0, b, 4:8] /= np.linalg.norm(q[0, b, 4:8])
        q[0, b, 11:15] *= 1.1 / np.linalg.norm(q[0, b, 11:15])
    vel = rng.normal(size=(1, B, D))
    vel[0, 0, 4:7] = 0.0
    arr = s._taichi_array
    qsrc, vsrc, qdst = arr((1, B, n_q), values=q), arr((1, B, D), values=vel), arr((1, B, n_q))
    scale = arr((1,), values=np.array([0.03]))
    w = rng.normal(size=(B, n_q))
    g_dst, g_src, g_vel = arr((B, n_q), values=w), arr((B, n_q)), arr((B, D))

    def loss(qv=None, vv=None):
        if qv is not None:
            qsrc.from_numpy(qv)
        if vv is not None:
            vsrc.from_numpy(vv)
        aux_kernel(0, scale, qsrc, vsrc, qdst, s.model["joint_i"], g_dst, g_src, g_vel)
        qsrc.from_numpy(q)
        vsrc.from_numpy(vel)
        return float((qdst.to_numpy()[0] * w).sum())

    aux_kernel(1, scale, qsrc, vsrc, qdst, s.model["joint_i"], g_dst, g_src, g_vel)
    gq, gv = g_src.to_numpy(), g_vel.to_numpy()
    eps = 1e-5  # (the angular velocities' derivatives carry a factor h: smaller steps leave round-off)
    errors = {}
    for name, x, g in (("q", q, gq), ("vel", vel, gv)):
        fd = np.zeros_like(g)
        for idx in np.ndindex(*g.shape):
            a = x.copy()
            a[(0,) + idx] += eps
            up = loss(**{"qv" if name == "q" else "vv": a})
            a[(0,) + idx] -= 2 * eps
            down = loss(**{"qv" if name == "q" else "vv": a})
            fd[idx] = (up - down) / (2 * eps)
        errors[name] = np.linalg.norm(g - fd) / np.linalg.norm(fd)
        assert errors[name] < TOL, f"{name}: {errors[name]:.2e}\n{g}\n{fd}"
    assert np.abs(gv[0, 4:7]).max() > 1e-3  # the zero-angle branch passes a derivative to omega
    print(errors)


def equality_scene(iterations=ITERATIONS):
    """The equality models of test_rigid_equality (a four-bar's connect, a weld to a pendulum, a joint and a tendon
    relation), moved off their constraints and given velocities differently in two environments, one step."""
    path = os.path.join(os.path.dirname(__file__), "data", "equalities.xml")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=1),
                     rigid_options=gs.options.RigidOptions(iterations=iterations))
    robot = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=path))
    scene.build(n_envs=2)
    rng = np.random.default_rng(7)
    q = robot.get_qpos().numpy().copy()
    for b in range(2):
        q[b, [0, 1, 2, 3, 11, 12, 13, 14]] += 0.05 * rng.normal(size=8)
        q[b, 4:7] += 0.01 * rng.normal(size=3)
    robot.set_qpos(q)
    robot.set_dofs_velocity(0.3 * rng.normal(size=(2, robot.n_dofs)))
    scene.step()
    return scene


def test_solve_constraints_reverse_equalities():
    """Connect, weld, joint and tendon rows (test_rigid_equality's models, off their constraints): the velocity rows
    from the motion subspaces, the position pass's targets from the links' origins and rotations (a connect's and a
    weld's points, a weld's rotation) and from qpos (the joint and tendon relations, a quadratic among them), and
    the warm start, equality_impulse[f]."""
    scene = equality_scene()
    s = scene.rigid_solver
    f = s.frames.prev(scene._frame)
    warm = s.state.equality_impulse[f]
    warm.copy_(torch.as_tensor(np.random.default_rng(8).uniform(-0.02, 0.02, size=tuple(warm.shape))))
    case = ConstraintCase(scene, seed=6)
    case.run(0)
    kinds = s.scratch["s_row_i"].to_numpy()[:, :, 0]
    assert ((kinds == 4).sum(axis=1) == 3 + 6 + 1 + 1).all()
    assert s.scratch["s_con_i"][:, CI_META, CM_SWEEPS + 1].min() > 0  # the position pass ran
    errors = {}
    B, D = case.mass.shape[0], case.mass.shape[1]
    grads = case.gradients()
    sc, st = s.scratch, s.state
    case.check(grads["g_dof"][:, :, GD_FREE_VEL], "v_free", *case.taichi(case.vfree), list(np.ndindex(B, D)),
               errors)
    mass, entries = case.mass.to_numpy(), case.lower_entries()
    steps = [1e-6 * np.sqrt(mass[b, k, k] * mass[b, i, i]) for b, k, i in entries]
    case.check(grads["g_mass"], "mass", *case.taichi(case.mass), entries, errors, eps=steps)
    # (the motion subspaces' entries that are not zero by the joints' axes: the four-bar is planar, so its connect's
    # row across the plane is zero, its impulse stays 0 whatever 1 / (reg + J W), and its adjoint w.r.t. an entry
    # that would tilt the plane is of the order of 1 / reg, which no physical input moves)
    cdof = sc["s_cdof"].to_numpy()
    case.check(grads["g_cdof"], "cdof", *case.taichi(sc["s_cdof"]),
               [i for i in np.ndindex(B, D, 6) if cdof[i] != 0.0], errors)
    base_ref, shifts = sc["s_ref"].to_numpy(), np.zeros((B, s.n_links, 3))
    case.check(grads["g_lpos"], "ref", lambda: shifts.copy(),
               lambda a: sc["s_ref"].from_numpy(np.ascontiguousarray(base_ref + a)),
               list(np.ndindex(B, s.n_links, 3)), errors)
    case.check(grads["g_R"], "R", *case.taichi(sc["s_R"]), list(np.ndindex(B, s.n_links, 3, 3)), errors)
    q_idx = [11, 12, 13, 14]
    case.check(grads["g_qpos"], "qpos", *case.torch_view(st.qpos[case.f]), [(b, i) for b in range(B) for i in q_idx],
               errors)
    case.check(grads["G_equality"], "equality_warm", *case.torch_view(st.equality_impulse[case.f]),
               [(b, e, k) for b in range(B) for e, n in enumerate((3, 6, 1, 1)) for k in range(n)], errors, eps=1e-5)
    print(errors)
