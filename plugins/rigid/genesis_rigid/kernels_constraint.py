"""Constraints of one environment b at the velocity level, solved by projected Gauss-Seidel, then integration.

Rows: per active contact a normal row (lambda >= 0) and two friction rows (|lambda_t| <= mu lambda_n, a friction
pyramid), and a row per violated joint limit (lambda >= 0). With W = M~^-1 J^T, the velocity after the impulses
is v = v_free + W lambda; a row's target is J v >= 0 for normals and limits (-e v_n, v_n the closing speed before
the impulses, for a contact of restitution e; depth / h for a contact farther apart than its pair's margin, which
may close that distance this substep), 0 for friction.

Penetrations and limit violations are undone by a second pass (split impulse, as in Box2D and Bullet): impulses
mu >= 0 on the normal and limit rows toward J u >= min(beta max(depth - slop, 0) / h, v_max) give a
pseudo-velocity u = W mu that moves this substep's positions (q advances with v + u) and is then dropped, so the
correction adds no momentum: a stack of bodies started 1 mm into each other stays at rest (with Baumgarte terms in
the velocity, a 50-layer tower launched its top at 0.9 m/s). Sweeps stop after `iterations`, or once a sweep
changes no impulse by more than the tolerance times the largest impulse. Contact impulses are
warm-started from the previous substep's contact of the same key (kernels_collision.finish_contacts), kept per pool
entry in the declared state `contact_impulse` (read at frame f, written at frame fn).
"""

import taichi as ti

from .kernels_collision import (CF_DEPTH, CF_MU, CF_NORMAL, CF_POS, CF_REST, CI_LINK_A, CI_LINK_B, CI_META, CI_PREV,
                                CM_SWEEPS)
from .kernels_dynamics import control_raw, entry, factor_ldl, ldl_solve
from .kernels_math import func, quat_integrate, tangent_basis
from .layout import (CTRL_FORCE, DF_DAMPING, PP_TENDONS, TF_DAMPING, TF_LIMITED, TF_RANGE_HI, TF_RANGE_LO,
                     TF_SPRING_HI, TF_SPRING_LO, TF_STIFFNESS, TI_COUNT, TI_START, DF_FORCE_HI, DF_FORCE_LO, DF_RANGE_HI,
                     DF_RANGE_LO, DF_SPRINGREF, DF_STIFFNESS, DI_LIMITED, DI_LINK, DI_PARENT, DI_Q, JI_DOF_START,
                     JI_Q_START, JI_TYPE, LI_LAST_DOF, LI_TREE_HI, LI_TREE_LO, PF_BAUMGARTE, PF_MAX_CORRECTION, PF_REG,
                     PF_SLOP, PF_TOL, PP_CG, PP_COLLISION, PP_ITERATIONS, PP_LIMITS, RI_HI, RI_HI2,
                     RI_KIND, RI_LO, RI_LO2, RI_NORMAL, RI_CONTACT, ROW_FRICTION, ROW_LIMIT, ROW_NORMAL)
from .model import BALL, FREE, HINGE, SLIDE

# closing speeds below this (m/s) do not bounce, whatever the restitution: resting contacts stay at rest
BOUNCE_THRESHOLD = 0.05
# s_row_f columns: 1 / (J W + reg), target velocity, impulse, friction coefficient, target and impulse of the
# position pass (split impulse), and the sweeps' own: the change of the impulse in the current sweep and the
# conjugate direction (`sweeps`)
RF_DINV, RF_TARGET, RF_LAMBDA, RF_MU, RF_PTARGET, RF_PLAMBDA, RF_STEP, RF_DIR, RF_N = range(9)
# s_dof columns the constraint stage reads and writes: the velocity (the unconstrained one on entry), the
# pseudo-velocity of the position pass, and the velocity at the start of a sweep (the last column: s_dof has
# SD_SWEEP + 1)
SD_VEL, SD_PSEUDO, SD_SWEEP = 2, 7, 8


@func
def tendon_length(b, f, t, qpos, dof_i, ten_f, ten_i):
    """Fixed tendon t's length sum coef q at qpos[f, b]."""
    length = 0.0
    for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
        length += ten_f[k, 0] * qpos[f, b, dof_i[ten_i[k, 0], DI_Q]]
    return length


@func
def tendon_rate(b, f, t, dofs_vel, ten_f, ten_i):
    """Its rate of change sum coef v at dofs_vel[f, b]."""
    rate = 0.0
    for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
        rate += ten_f[k, 0] * dofs_vel[f, b, ten_i[k, 0]]
    return rate


@func
def smooth_acceleration(b, f, hi, qpos, dofs_vel, params_i, dof_f, dof_i, ten_f, ten_i, ctrl_mode, ctrl_force,
                        ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv, s_mass, s_dof):
    """qacc = M~^-1 (tau - c) into s_dof[b, :, 1] at (qpos[f, b], dofs_vel[f, b]); s_mass[b] is factorised.

    hi is the implicit step (h for Euler: PD laws read q + h v; 0 for RK4, where everything is explicit); joint
    springs are explicit in both, as MuJoCo's."""
    n = dof_i.shape[0]
    for d in range(n):
        v = dofs_vel[f, b, d]
        tau = -s_dof[b, d, 0] - dof_f[b, d, DF_DAMPING] * v
        qi = dof_i[d, DI_Q]
        if qi >= 0:
            q = qpos[f, b, qi]
            tau -= dof_f[b, d, DF_STIFFNESS] * (q - dof_f[b, d, DF_SPRINGREF])
        # the control: a command clamped to the force range; a PD law as it is (its gains are in the matrix), or
        # clamped where bias_and_mass found it saturated (s_dof[b, d, 5])
        force = control_raw(b, f, d, hi, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp,
                            ctrl_kv)
        if ctrl_mode[b, d] == CTRL_FORCE or s_dof[b, d, 5] != 0.0:
            force = ti.min(ti.max(force, dof_f[b, d, DF_FORCE_LO]), dof_f[b, d, DF_FORCE_HI])
        s_dof[b, d, 1] = tau + force + s_dof[b, d, 6]
    # fixed tendons: a spring outside the slack interval and a damper along the tendon, explicit (as MuJoCo's)
    for t in range(params_i[PP_TENDONS]):
        length = tendon_length(b, f, t, qpos, dof_i, ten_f, ten_i)
        rate = tendon_rate(b, f, t, dofs_vel, ten_f, ten_i)
        stretch = 0.0
        if length > ten_f[t, TF_SPRING_HI]:
            stretch = length - ten_f[t, TF_SPRING_HI]
        elif length < ten_f[t, TF_SPRING_LO]:
            stretch = length - ten_f[t, TF_SPRING_LO]
        pull = -ten_f[t, TF_STIFFNESS] * stretch - ten_f[t, TF_DAMPING] * rate
        if pull != 0.0:
            for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
                s_dof[b, ten_i[k, 0], 1] += ten_f[k, 0] * pull
    factor_ldl(b, n, s_mass, dof_i)
    ldl_solve(b, 0, n, s_mass, dof_i, s_dof, 1, False, 0)


@func
def add_point_jacobian(b, r, l, direction, point, shift, link_i, dof_i, s_cdof, s_J):
    """Row r of the Jacobian += d(direction . velocity of `point` fixed to link l)/d(qvel); dof d at column
    d + shift (seg_shift of the segment of l's tree)."""
    d = link_i[l, LI_LAST_DOF]
    arm = point.cross(direction)
    while d >= 0:
        cd = s_cdof[b, d]
        s_J[b, r, d + shift] += direction[0] * cd[3] + direction[1] * cd[4] + direction[2] * cd[5] + \
            arm[0] * cd[0] + arm[1] * cd[1] + arm[2] * cd[2]
        d = dof_i[d, DI_PARENT]


@func
def set_row_dofs(b, r, lo, hi, lo2, hi2, s_row_i):
    """Row r involves the dofs lo..hi-1 and lo2..hi2-1: the trees of its two links (one range if they share it;
    tree ranges are disjoint or equal). Its Jacobian row is compact: the first range's dofs at columns
    0..hi-lo-1, the second's after them (s_J and s_W are [B, rows, the widest pair of trees])."""
    same = lo2 == lo and hi2 == hi
    s_row_i[b, r, RI_LO] = lo
    s_row_i[b, r, RI_HI] = hi
    s_row_i[b, r, RI_LO2] = 0 if same else lo2
    s_row_i[b, r, RI_HI2] = 0 if same else hi2


@ti.func
def seg_shift(b, r, seg: ti.template(), s_row_i: ti.template()):
    """The column of dof d of segment seg (0, 1) of row r in the compact row arrays is d + seg_shift."""
    shift = -s_row_i[b, r, RI_LO]
    if ti.static(seg == 1):
        shift = s_row_i[b, r, RI_HI] - s_row_i[b, r, RI_LO] - s_row_i[b, r, RI_LO2]
    return shift


@func
def row_dot(b, r, s_row_i, s_J, x, fixed, by_row: ti.template()):
    """J_r . y over the row's dofs, for y = x[b, fixed, :] (by_row: a compact row, as s_W) or x[b, :, fixed]."""
    out = 0.0
    for seg in ti.static(range(2)):
        shift = seg_shift(b, r, seg, s_row_i)
        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
            out += s_J[b, r, d + shift] * entry(x, b, fixed, d, by_row, shift)
    return out


@func
def add_row_response(b, r, s_row_i, s_W, s_dof, impulse, col):
    """The velocity change of an impulse on row r: s_dof[b, :, col] += W_r impulse over the row's dofs."""
    for seg in ti.static(range(2)):
        shift = seg_shift(b, r, seg, s_row_i)
        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
            s_dof[b, d, col] += s_W[b, r, d + shift] * impulse


@func
def sweeps(b, n_rows, col, target_col, lambda_col, params_f, params_i, s_row_i, s_row_f, s_J, s_W, s_dof):
    """Projected Gauss-Seidel on the rows' impulses (column lambda_col of s_row_f) toward J v >= target
    (target_col) for v = s_dof[b, :, col]: normal and limit rows lambda >= 0, friction rows inside the friction
    pyramid of their normal row's impulse (none in the position pass: mu is read from RF_MU only for the velocity
    pass). With RigidOptions(constraint_solver=gs.constraint_solver.CG) (params_i[PP_CG]) the velocity pass is
    accelerated by nonsmooth nonlinear conjugate gradients (Silcowitz, Niebe and Erleben 2010): after a sweep that
    changed the impulses by r, they also move by beta p, p the previous direction and beta the ratio of this
    sweep's |r|^2 to the last one's (a ratio above 1 restarts: p = r), and p becomes beta p + r. Nearly dependent
    rows (two contacts of neighbouring links beside two joint limits, rows correlated at 0.98) leave plain
    Gauss-Seidel shrinking its error by a few per cent a sweep, and its tolerance test stops it short of the
    solution (docs/rigid.md, "Constraints"). Every sweep projects, and the sweeps end after a sweep, so the impulses
    returned are feasible. Without it beta is 0 and the sweeps are plain Gauss-Seidel.

    Stops after `iterations` sweeps, or once a sweep changes no impulse by more than the tolerance times the
    largest impulse, or no dof's velocity by more than the tolerance times the largest velocity seen (relative
    tests: rounding alone moves float32 values by more than any absolute bound small enough for float64). The
    velocity test ends the sweeps where the impulses drift along combinations that change no velocity (more rows
    than the dofs they move). Column SD_SWEEP of s_dof holds v at the start of the current sweep. Returns the
    number of sweeps run."""
    n = s_dof.shape[1]
    speed = 0.0
    count = 0
    last = 0.0  # |r|^2 of the previous sweep
    accelerate = params_i[PP_CG] != 0 and lambda_col == RF_LAMBDA
    if accelerate:
        for r in range(n_rows):
            s_row_f[b, r, RF_DIR] = 0.0
    for _ in range(params_i[PP_ITERATIONS]):
        count += 1
        largest = 0.0
        scale = 0.0
        for d in range(n):
            s_dof[b, d, SD_SWEEP] = s_dof[b, d, col]
        norm = 0.0
        for r in range(n_rows):
            kind = s_row_i[b, r, RI_KIND]
            delta = 0.0
            if lambda_col == RF_LAMBDA or kind != ROW_FRICTION:
                jv = row_dot(b, r, s_row_i, s_J, s_dof, col, False)
                lam = s_row_f[b, r, lambda_col]
                new = lam
                if kind == ROW_FRICTION:
                    bound = s_row_f[b, r, RF_MU] * s_row_f[b, s_row_i[b, r, RI_NORMAL], RF_LAMBDA]
                    new = ti.min(ti.max(lam - jv * s_row_f[b, r, RF_DINV], -bound), bound)
                else:
                    new = ti.max(lam + (s_row_f[b, r, target_col] - jv) * s_row_f[b, r, RF_DINV], 0.0)
                delta = new - lam
                largest = ti.max(largest, ti.abs(delta))
                scale = ti.max(scale, ti.abs(new))
                if delta != 0.0:
                    add_row_response(b, r, s_row_i, s_W, s_dof, delta, col)
                    s_row_f[b, r, lambda_col] = new
            if accelerate:
                s_row_f[b, r, RF_STEP] = delta
                norm += delta * delta
        moved = 0.0
        for d in range(n):
            moved = ti.max(moved, ti.abs(s_dof[b, d, col] - s_dof[b, d, SD_SWEEP]))
            speed = ti.max(speed, ti.max(ti.abs(s_dof[b, d, col]), ti.abs(s_dof[b, d, SD_SWEEP])))
        if largest <= params_f[PF_TOL] * scale or moved <= params_f[PF_TOL] * speed:
            break
        if accelerate:  # the conjugate step (plain Gauss-Seidel skips this bookkeeping)
            beta = 0.0
            if last > 0.0 and norm <= last:
                beta = norm / last
            last = norm
            for r in range(n_rows):
                step = beta * s_row_f[b, r, RF_DIR]
                if step != 0.0:
                    add_row_response(b, r, s_row_i, s_W, s_dof, step, col)
                    s_row_f[b, r, lambda_col] = s_row_f[b, r, lambda_col] + step
                s_row_f[b, r, RF_DIR] = step + s_row_f[b, r, RF_STEP]
    return count


@func
def limit_row(b, r, violation, params_f, h, s_row_i, s_row_f):
    """The bookkeeping of a limit row r (joint or tendon) whose Jacobian is set: impulse >= 0 toward J v >= 0, and
    the position pass's target for its violation."""
    s_row_i[b, r, RI_KIND] = ROW_LIMIT
    s_row_i[b, r, RI_CONTACT] = -1
    s_row_i[b, r, RI_NORMAL] = r
    s_row_f[b, r, RF_TARGET] = 0.0
    s_row_f[b, r, RF_PTARGET] = ti.min(params_f[PF_BAUMGARTE] * ti.max(violation, 0.0) / h,
                                       params_f[PF_MAX_CORRECTION])
    s_row_f[b, r, RF_PLAMBDA] = 0.0
    s_row_f[b, r, RF_LAMBDA] = 0.0
    s_row_f[b, r, RF_MU] = 0.0


@func
def tendon_limit_row(b, f, r, t, h, qpos, params_f, link_i, dof_i, ten_f, ten_i, s_J, s_row_f, s_row_i):
    """Row r for fixed tendon t if its length is outside its range: J = +-coef on its dofs (the trees of its
    first dof and of the first dof outside that tree; the build checks there is no third). 1 if a row was made."""
    length = tendon_length(b, f, t, qpos, dof_i, ten_f, ten_i)
    lo = ten_f[t, TF_RANGE_LO]
    hi = ten_f[t, TF_RANGE_HI]
    made = 0
    if length < lo or length > hi:
        sign = 1.0 if length < lo else -1.0
        start = ten_i[t, TI_START]
        end = start + ten_i[t, TI_COUNT]
        link = dof_i[ten_i[start, 0], DI_LINK]
        tlo = link_i[link, LI_TREE_LO]
        thi = link_i[link, LI_TREE_HI]
        tlo2 = 0
        thi2 = 0
        for k in range(start, end):
            d = ten_i[k, 0]
            if (d < tlo or d >= thi) and thi2 == 0:
                other = dof_i[d, DI_LINK]
                tlo2 = link_i[other, LI_TREE_LO]
                thi2 = link_i[other, LI_TREE_HI]
        set_row_dofs(b, r, tlo, thi, tlo2, thi2, s_row_i)
        for c in range(thi - tlo + s_row_i[b, r, RI_HI2] - s_row_i[b, r, RI_LO2]):
            s_J[b, r, c] = 0.0
        for k in range(start, end):
            d = ten_i[k, 0]
            shift = seg_shift(b, r, 0, s_row_i)
            if d < tlo or d >= thi:
                shift = seg_shift(b, r, 1, s_row_i)
            s_J[b, r, d + shift] += sign * ten_f[k, 0]
        limit_row(b, r, lo - length if length < lo else length - hi, params_f, h, s_row_i, s_row_f)
        made = 1
    return made


@func
def solve_constraints(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i, contact_impulse,
                      s_cdof, s_mass, s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i):
    """Build the rows, warm start from contact_impulse[f], run PGS, store the impulses in contact_impulse[fn];
    the final velocity is left in s_dof[b, :, 2]."""
    n = dof_i.shape[0]
    max_rows = s_J.shape[1]
    beta = params_f[PF_BAUMGARTE]
    slop = params_f[PF_SLOP]
    max_correction = params_f[PF_MAX_CORRECTION]
    n_rows = 0
    n_contacts = 0
    if params_i[PP_COLLISION] != 0:
        n_contacts = s_con_i[b, CI_META, 0]  # every pool entry fits: max_rows >= 3 max_contacts
        for s in range(n_contacts):
            prev = s_con_i[b, CI_PREV, s]
            normal = ti.Vector([s_con_f[b, s, CF_NORMAL], s_con_f[b, s, CF_NORMAL + 1],
                                s_con_f[b, s, CF_NORMAL + 2]])
            point = ti.Vector([s_con_f[b, s, CF_POS], s_con_f[b, s, CF_POS + 1], s_con_f[b, s, CF_POS + 2]])
            t1, t2 = tangent_basis(normal)
            la = s_con_i[b, CI_LINK_A, s]
            lb = s_con_i[b, CI_LINK_B, s]
            for k in range(3):
                r = n_rows + k
                direction = ti.select(k == 0, normal, ti.select(k == 1, t1, t2))
                set_row_dofs(b, r, link_i[lb, LI_TREE_LO], link_i[lb, LI_TREE_HI], link_i[la, LI_TREE_LO],
                             link_i[la, LI_TREE_HI], s_row_i)
                for c in range(s_row_i[b, r, RI_HI] - s_row_i[b, r, RI_LO] + s_row_i[b, r, RI_HI2]
                               - s_row_i[b, r, RI_LO2]):
                    s_J[b, r, c] = 0.0
                shift_b = seg_shift(b, r, 0, s_row_i)
                shift_a = shift_b  # (la's tree is lb's, or the second segment)
                if s_row_i[b, r, RI_HI2] > s_row_i[b, r, RI_LO2]:
                    shift_a = seg_shift(b, r, 1, s_row_i)
                add_point_jacobian(b, r, lb, direction, point, shift_b, link_i, dof_i, s_cdof, s_J)
                add_point_jacobian(b, r, la, -direction, point, shift_a, link_i, dof_i, s_cdof, s_J)
                s_row_i[b, r, RI_KIND] = ROW_NORMAL if k == 0 else ROW_FRICTION
                s_row_i[b, r, RI_CONTACT] = s
                s_row_i[b, r, RI_NORMAL] = n_rows
                s_row_f[b, r, RF_TARGET] = 0.0
                s_row_f[b, r, RF_PTARGET] = 0.0
                s_row_f[b, r, RF_PLAMBDA] = 0.0
                if k == 0:
                    approach = row_dot(b, r, s_row_i, s_J, s_dof, SD_VEL, False)  # before the impulses (< 0: closing)
                    depth = s_con_f[b, s, CF_DEPTH]
                    if depth < 0.0:  # short of the pair's target distance (a margin): it may close that much
                        s_row_f[b, r, RF_TARGET] = depth / h
                    elif approach < -BOUNCE_THRESHOLD:
                        s_row_f[b, r, RF_TARGET] = -s_con_f[b, s, CF_REST] * approach
                    s_row_f[b, r, RF_PTARGET] = ti.min(beta * ti.max(s_con_f[b, s, CF_DEPTH] - slop, 0.0) / h,
                                                       max_correction)
                s_row_f[b, r, RF_MU] = s_con_f[b, s, CF_MU]
                s_row_f[b, r, RF_LAMBDA] = 0.0
                if prev >= 0:  # (not a select: both of its sides are read)
                    s_row_f[b, r, RF_LAMBDA] = contact_impulse[f, b, prev, k]
            n_rows += 3
    if params_i[PP_LIMITS] != 0:
        for d in range(n):
            if dof_i[d, DI_LIMITED] != 0 and n_rows < max_rows:
                q = qpos[f, b, dof_i[d, DI_Q]]
                lo = dof_f[b, d, DF_RANGE_LO]
                hi = dof_f[b, d, DF_RANGE_HI]
                if q < lo or q > hi:
                    sign = 1.0 if q < lo else -1.0
                    link = dof_i[d, DI_LINK]
                    set_row_dofs(b, n_rows, link_i[link, LI_TREE_LO], link_i[link, LI_TREE_HI], 0, 0, s_row_i)
                    for k in range(s_row_i[b, n_rows, RI_HI] - s_row_i[b, n_rows, RI_LO]):
                        s_J[b, n_rows, k] = 0.0
                    s_J[b, n_rows, d - s_row_i[b, n_rows, RI_LO]] = sign
                    limit_row(b, n_rows, lo - q if q < lo else q - hi, params_f, h, s_row_i, s_row_f)
                    n_rows += 1
        for t in range(params_i[PP_TENDONS]):
            if ten_f[t, TF_LIMITED] != 0.0 and n_rows < max_rows:
                n_rows += tendon_limit_row(b, f, n_rows, t, h, qpos, params_f, link_i, dof_i, ten_f, ten_i, s_J,
                                           s_row_f, s_row_i)
    # W = M~^-1 J^T, the inverse effective masses, and the warm start v = v_free + W lambda
    for r in range(n_rows):
        for seg in ti.static(range(2)):
            d_lo = s_row_i[b, r, RI_LO + 2 * seg]
            d_hi = s_row_i[b, r, RI_HI + 2 * seg]
            shift = seg_shift(b, r, seg, s_row_i)
            for d in range(d_lo, d_hi):
                s_W[b, r, d + shift] = s_J[b, r, d + shift]
            ldl_solve(b, d_lo, d_hi, s_mass, dof_i, s_W, r, True, shift)
        s_row_f[b, r, RF_DINV] = 1.0 / (params_f[PF_REG] + row_dot(b, r, s_row_i, s_J, s_W, r, True))
        add_row_response(b, r, s_row_i, s_W, s_dof, s_row_f[b, r, RF_LAMBDA], SD_VEL)
    s_con_i[b, CI_META, CM_SWEEPS] = 0
    s_con_i[b, CI_META, CM_SWEEPS + 1] = 0
    if n_rows > 0:
        s_con_i[b, CI_META, CM_SWEEPS] = sweeps(b, n_rows, SD_VEL, RF_TARGET, RF_LAMBDA, params_f, params_i,
                                                s_row_i, s_row_f, s_J, s_W, s_dof)
    # the position pass (split impulse): penetrations and limit violations are undone by a pseudo-velocity that
    # moves the positions of this substep only, so correcting them adds no momentum (a stack of bodies started
    # into each other does not fly apart)
    for d in range(n):
        s_dof[b, d, SD_PSEUDO] = 0.0
    correct = 0
    for r in range(n_rows):
        if s_row_f[b, r, RF_PTARGET] > 0.0:
            correct = 1
    if correct != 0:
        s_con_i[b, CI_META, CM_SWEEPS + 1] = sweeps(b, n_rows, SD_PSEUDO, RF_PTARGET, RF_PLAMBDA, params_f, params_i,
                                                    s_row_i, s_row_f, s_J, s_W, s_dof)
    for s in range(n_contacts, contact_impulse.shape[2]):
        for k in ti.static(range(3)):
            if contact_impulse[fn, b, s, k] != 0.0:  # most entries are idle: reading leaves their cache lines clean
                contact_impulse[fn, b, s, k] = 0.0
    for r in range(n_rows):
        s = s_row_i[b, r, RI_CONTACT]
        if s >= 0:
            contact_impulse[fn, b, s, r - s_row_i[b, r, RI_NORMAL]] = s_row_f[b, r, RF_LAMBDA]


@func
def advance_q(b, src, fs, dst, fd, vel, fv, scale, joint_i):
    """dst[fd, b] = src[fs, b] moved by scale * vel[fv, b]: hinge and slide add, ball and free rotate their
    quaternion by the body-frame angular velocity, free joints translate by the world linear velocity."""
    for j in range(joint_i.shape[0]):
        jtype = joint_i[j, JI_TYPE]
        qs = joint_i[j, JI_Q_START]
        d0 = joint_i[j, JI_DOF_START]
        if jtype == HINGE or jtype == SLIDE:
            dst[fd, b, qs] = src[fs, b, qs] + scale * vel[fv, b, d0]
        elif jtype == FREE or jtype == BALL:  # (the padding row of a model without joints has type -1)
            r0 = 0
            if jtype == FREE:
                for k in ti.static(range(3)):
                    dst[fd, b, qs + k] = src[fs, b, qs + k] + scale * vel[fv, b, d0 + k]
                r0 = 3
            q = ti.Vector([src[fs, b, qs + r0], src[fs, b, qs + r0 + 1], src[fs, b, qs + r0 + 2],
                           src[fs, b, qs + r0 + 3]])
            omega = ti.Vector([vel[fv, b, d0 + r0], vel[fv, b, d0 + r0 + 1], vel[fv, b, d0 + r0 + 2]])
            qn = quat_integrate(q, omega, scale)
            for k in ti.static(range(4)):
                dst[fd, b, qs + r0 + k] = qn[k]
