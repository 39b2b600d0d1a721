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
the velocity, a 50-layer tower launched its top at 0.9 m/s). The pass runs only when a limit is violated or a
contact is deeper than 1.1 times its slop (SLOP_DEADBAND). Sweeps stop after `iterations`, or once a sweep
changes no impulse by more than the tolerance times the largest impulse. Contact impulses are
warm-started from the previous substep's contact of the same key (kernels_collision.finish_contacts), kept per pool
entry in the declared state `contact_impulse` (read at frame f, written at frame fn).
"""

import taichi as ti

from .kernels_collision import (CF_DEPTH, CF_MU, CF_NORMAL, CF_POS, CF_REST, CI_FEATURE, CI_KEY, CI_LINK_A, CI_LINK_B,
                                CI_META, CI_PREV, CM_SWEEPS, KEY_SPAN)
from .kernels_dynamics import control_raw, entry, factor_ldl, ldl_solve, ldl_solve_reverse
from .kernels_kinematics import quat_mul_reverse, quat_normalize_reverse
from .kernels_math import func, quat_integrate, quat_mul, quat_to_mat, tangent_basis
from .layout import (CTRL_FORCE, DF_DAMPING, GF_POS, GF_QUAT, GF_SIZE, GI_TYPE, PI_GEOM_A, PI_GEOM_B, PP_TENDONS,
                     TF_DAMPING, TF_LIMITED, TF_RANGE_HI, TF_RANGE_LO,
                     TF_SPRING_HI, TF_SPRING_LO, TF_STIFFNESS, TI_COUNT, TI_START, DF_FORCE_HI, DF_FORCE_LO, DF_RANGE_HI,
                     DF_RANGE_LO, DF_SPRINGREF, DF_STIFFNESS, DI_LIMITED, DI_LINK, DI_PARENT, DI_Q, JI_DOF_START,
                     JI_Q_START, JI_TYPE, LI_LAST_DOF, LI_TREE_HI, LI_TREE_LO, PF_BAUMGARTE, PF_MAX_CORRECTION, PF_REG,
                     PF_SLOP, PF_TOL, PP_CG, PP_COLLISION, PP_ITERATIONS, PP_LIMITS, RI_HI, RI_HI2,
                     RI_ITEM, RI_KIND, RI_LO, RI_LO2, RI_NORMAL, RI_CONTACT, ROW_FRICTION, ROW_LIMIT, ROW_NORMAL)
from .model import BALL, BOX, CAPSULE, CYLINDER, FREE, HINGE, PLANE, SLIDE, SPHERE

# closing speeds below this (m/s) do not bounce, whatever the restitution: resting contacts stay at rest
BOUNCE_THRESHOLD = 0.05
# the position pass runs when a limit is violated or a contact is deeper than its slop by more than this fraction
# of the slop (it then corrects every row toward its target); below that it would move bodies by less than
# beta SLOP_DEADBAND slop, and its sweeps toward such targets ran to the iteration cap in most substeps of
# Genesis's settled pyramid of 15 cubes (94 of 100 a substep: its velocity pass took one)
SLOP_DEADBAND = 0.1
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
                s_dof[b, ten_i[k, 0], 1] = s_dof[b, ten_i[k, 0], 1] + ten_f[k, 0] * pull
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
        s_J[b, r, d + shift] = s_J[b, r, d + shift] + (direction[0] * cd[3] + direction[1] * cd[4]
                                                       + direction[2] * cd[5] + arm[0] * cd[0] + arm[1] * cd[1]
                                                       + arm[2] * cd[2])
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
            s_dof[b, d, col] = s_dof[b, d, col] + s_W[b, r, d + shift] * impulse


@func
def sweeps(b, n_rows, col, target_col, lambda_col, params_f, params_i, s_row_i, s_row_f, s_J, s_W, s_dof,
           s_hist):
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
    number of sweeps run.

    Differentiable mode (s_hist [B, 2 (iterations + 1), rows], not the [1, 1, 1] placeholder): s_hist[b, base + i]
    holds the impulses after sweep i (0: on entry), base 0 for the velocity pass and half of s_hist's second axis
    for the position pass (solve_constraints_reverse replays the sweeps from it; with CG a sweep is recorded before
    its conjugate step: CG is refused in differentiable mode)."""
    n = s_dof.shape[1]
    speed = 0.0
    count = 0
    last = 0.0  # |r|^2 of the previous sweep
    accelerate = params_i[PP_CG] != 0 and lambda_col == RF_LAMBDA
    if accelerate:
        for r in range(n_rows):
            s_row_f[b, r, RF_DIR] = 0.0
    record = s_hist.shape[1] > 1
    base = 0 if lambda_col == RF_LAMBDA else s_hist.shape[1] // 2
    if record:
        for r in range(n_rows):
            s_hist[b, base, r] = s_row_f[b, r, lambda_col]
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
        if record:
            for r in range(n_rows):
                s_hist[b, base + count, r] = s_row_f[b, r, lambda_col]
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
def warm_limit_row(b, f, r, item, limit_impulse, s_row_i, s_row_f):
    """Limit row r is entry `item` of limit_impulse: its warm start is that entry's impulse at frame f (the limit's
    impulse of the last substep; 0 if it was not engaged)."""
    s_row_i[b, r, RI_ITEM] = item
    s_row_f[b, r, RF_LAMBDA] = limit_impulse[f, b, item]


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
            s_J[b, r, d + shift] = s_J[b, r, d + shift] + sign * ten_f[k, 0]
        limit_row(b, r, lo - length if length < lo else length - hi, params_f, h, s_row_i, s_row_f)
        made = 1
    return made


@func
def solve_constraints(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i, contact_impulse,
                      limit_impulse, s_cdof, s_mass, s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i, s_hist):
    """Build the rows, warm start from contact_impulse[f] and limit_impulse[f], run PGS, store the impulses in
    contact_impulse[fn] and limit_impulse[fn]; the final velocity is left in s_dof[b, :, 2]."""
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
        item = 0  # the entry of limit_impulse: the limited dofs in order, then the limited tendons
        for d in range(n):
            if dof_i[d, DI_LIMITED] != 0:
                q = qpos[f, b, dof_i[d, DI_Q]]
                lo = dof_f[b, d, DF_RANGE_LO]
                hi = dof_f[b, d, DF_RANGE_HI]
                if (q < lo or q > hi) and n_rows < max_rows:
                    sign = 1.0 if q < lo else -1.0
                    link = dof_i[d, DI_LINK]
                    set_row_dofs(b, n_rows, link_i[link, LI_TREE_LO], link_i[link, LI_TREE_HI], 0, 0, s_row_i)
                    for k in range(s_row_i[b, n_rows, RI_HI] - s_row_i[b, n_rows, RI_LO]):
                        s_J[b, n_rows, k] = 0.0
                    s_J[b, n_rows, d - s_row_i[b, n_rows, RI_LO]] = sign
                    limit_row(b, n_rows, lo - q if q < lo else q - hi, params_f, h, s_row_i, s_row_f)
                    warm_limit_row(b, f, n_rows, item, limit_impulse, s_row_i, s_row_f)
                    n_rows += 1
                item += 1
        for t in range(params_i[PP_TENDONS]):
            if ten_f[t, TF_LIMITED] != 0.0:
                if n_rows < max_rows:
                    made = tendon_limit_row(b, f, n_rows, t, h, qpos, params_f, link_i, dof_i, ten_f, ten_i, s_J,
                                            s_row_f, s_row_i)
                    if made != 0:
                        warm_limit_row(b, f, n_rows, item, limit_impulse, s_row_i, s_row_f)
                    n_rows += made
                item += 1
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
                                                s_row_i, s_row_f, s_J, s_W, s_dof, s_hist)
    # the position pass (split impulse): penetrations and limit violations are undone by a pseudo-velocity that
    # moves the positions of this substep only, so correcting them adds no momentum (a stack of bodies started
    # into each other does not fly apart)
    for d in range(n):
        s_dof[b, d, SD_PSEUDO] = 0.0
    correct = 0
    for r in range(n_rows):
        if s_row_f[b, r, RF_PTARGET] > 0.0:
            s = s_row_i[b, r, RI_CONTACT]
            if s < 0:  # a limit
                correct = 1
            elif s_con_f[b, s, CF_DEPTH] - slop > SLOP_DEADBAND * slop:  # (the depth: max_correction caps the target)
                correct = 1
    if correct != 0:
        s_con_i[b, CI_META, CM_SWEEPS + 1] = sweeps(b, n_rows, SD_PSEUDO, RF_PTARGET, RF_PLAMBDA, params_f, params_i,
                                                    s_row_i, s_row_f, s_J, s_W, s_dof, s_hist)
    for s in range(n_contacts, contact_impulse.shape[2]):
        for k in ti.static(range(3)):
            if contact_impulse[fn, b, s, k] != 0.0:  # most entries are idle: reading leaves their cache lines clean
                contact_impulse[fn, b, s, k] = 0.0
    for j in range(limit_impulse.shape[2]):
        limit_impulse[fn, b, j] = 0.0
    for r in range(n_rows):
        s = s_row_i[b, r, RI_CONTACT]
        if s >= 0:
            contact_impulse[fn, b, s, r - s_row_i[b, r, RI_NORMAL]] = s_row_f[b, r, RF_LAMBDA]
        elif s_row_i[b, r, RI_KIND] == ROW_LIMIT:
            limit_impulse[fn, b, s_row_i[b, r, RI_ITEM]] = s_row_f[b, r, RF_LAMBDA]


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


# -- reverse (adjoint) functions of the differentiable substep ----------------------------------------------------
# Each reads the adjoints of its forward's outputs and accumulates (+=) into the adjoints of its inputs (g_* arrays,
# per environment; zeroed by the caller). Discrete decisions (which rows exist, which side of a projection each PGS
# update took, which target branch a row used) are the forward's, read from what it left or recomputed with its
# arithmetic.

# g_row columns (solve_constraints_reverse's per-row scratch [B, rows, GR_N]): the adjoints of the row's impulse in
# the velocity pass and in the position pass, of its target, position-pass target, 1 / (J W + reg) and friction
# coefficient
GR_LAM, GR_PLAM, GR_TARGET, GR_PTARGET, GR_DINV, GR_MU, GR_N = range(7)
# g_v columns (its per-dof scratch [B, D, GV_N]): the adjoints of the velocity and of the pseudo-velocity, and the
# velocity and pseudo-velocity as the replay rebuilds them backwards
GV_VEL, GV_PSEUDO, GV_V, GV_U, GV_N = range(5)


@func
def add_row_outer(b, r, s_row_i, g_W, x, col, scale):
    """g_W[b, r] += scale x[b, :, col] over row r's dofs (compact row layout)."""
    for seg in ti.static(range(2)):
        shift = seg_shift(b, r, seg, s_row_i)
        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
            g_W[b, r, d + shift] = g_W[b, r, d + shift] + scale * x[b, d, col]


@func
def add_row_scaled(b, r, s_row_i, g_J, s_W, scale):
    """g_J[b, r] += scale s_W[b, r] over row r's dofs (both compact rows)."""
    for seg in ti.static(range(2)):
        shift = seg_shift(b, r, seg, s_row_i)
        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
            g_J[b, r, d + shift] = g_J[b, r, d + shift] + scale * s_W[b, r, d + shift]


@func
def replay_row_undo(b, r, s_row_i, s_J, s_W, g_W, g_v, vcol, gcol, delta):
    """One pass over row r's dofs for the replay of its update: the velocity before it (v -= W_r delta), g_W_r +=
    delta g_v; returns (W_r . g_v, J_r . v before the update)."""
    wg = 0.0
    jv = 0.0
    for seg in ti.static(range(2)):
        shift = seg_shift(b, r, seg, s_row_i)
        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
            w = s_W[b, r, d + shift]
            gv = g_v[b, d, gcol]
            v = g_v[b, d, vcol] - w * delta
            g_v[b, d, vcol] = v
            g_W[b, r, d + shift] = g_W[b, r, d + shift] + delta * gv
            wg += w * gv
            jv += s_J[b, r, d + shift] * v
    return wg, jv


@func
def replay_row_project(b, r, s_row_i, s_J, g_J, g_v, vcol, gcol, scale):
    """One pass over row r's dofs for the adjoint of its free update u: g_J_r += scale v, g_v -= ... J_r scale."""
    for seg in ti.static(range(2)):
        shift = seg_shift(b, r, seg, s_row_i)
        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
            g_J[b, r, d + shift] = g_J[b, r, d + shift] + scale * g_v[b, d, vcol]
            g_v[b, d, gcol] = g_v[b, d, gcol] + s_J[b, r, d + shift] * scale


@func
def sweeps_reverse(b, n_rows, count, base, vcol, gcol, target_col, glam_col, gtarget_col, velocity, s_row_i,
                   s_row_f, s_J, s_W, s_hist, g_J, g_W, g_row, g_v):
    """Adjoint of `count` Gauss-Seidel sweeps (the velocity pass if velocity != 0, else the position pass, which
    skips friction rows), replayed backwards from the impulses s_hist[b, base + i] after each sweep i. On entry
    g_v[b, :, vcol] holds the velocity the sweeps ended with and g_v[b, :, gcol] its adjoint, g_row[b, :, glam_col]
    the adjoint of the final impulses; on exit they hold the velocity, its adjoint and the impulses' adjoints at the
    start of the sweeps. Accumulates into g_J, g_W and g_row's target, 1 / (J W + reg) and friction coefficient
    columns. An update of row r: u = lambda_r + (target_r - J_r v) dinv_r (friction: no target), lambda_r <- P(u)
    (normal, limit: max(u, 0); friction: clamped to +-mu_r lambda_normal, the normal row's impulse of this sweep),
    v += W_r (P(u) - lambda_r). The side of each projection is read from the history (a friction row whose bound
    is 0 from the sign of u)."""
    for it_ in range(count):
        i = count - 1 - it_
        for r_ in range(n_rows):
            r = n_rows - 1 - r_
            kind = s_row_i[b, r, RI_KIND]
            if velocity != 0 or kind != ROW_FRICTION:
                old = s_hist[b, base + i, r]
                new = s_hist[b, base + i + 1, r]
                delta = new - old
                # whether this update reads the adjoint of its new impulse (its projection passes it on: a normal or
                # limit row that pushes, a friction row whose normal pushes; otherwise the forward's impulse stays at
                # zero, or at a bound of zero width whose own adjoint is dropped), and whether the sweep before reads
                # the adjoint of the impulse this one starts from (the same test one sweep earlier; the first sweep's
                # goes to the warm start)
                nr = s_row_i[b, r, RI_NORMAL]
                used_now = new > 0.0
                used_before = i == 0 or old > 0.0
                if kind == ROW_FRICTION:
                    used_now = s_hist[b, base + i + 1, nr] > 0.0
                    used_before = i == 0 or s_hist[b, base + i, nr] > 0.0
                if not (used_now or used_before):
                    if delta != 0.0:  # v before the update and g_W (the dot products are not read)
                        replay_row_undo(b, r, s_row_i, s_J, s_W, g_W, g_v, vcol, gcol, delta)
                    g_row[b, r, glam_col] = 0.0
                    continue
                # v before the update, g_W, W_r . g_v and J_r . v in one pass
                wg, jv = replay_row_undo(b, r, s_row_i, s_J, s_W, g_W, g_v, vcol, gcol, delta)
                g_new = g_row[b, r, glam_col] + wg
                glam = -wg
                dinv = s_row_f[b, r, RF_DINV]
                ubar = 0.0
                if used_now and kind == ROW_FRICTION:
                    mu = s_row_f[b, r, RF_MU]
                    lam_n = s_hist[b, base + i + 1, nr]
                    bound = mu * lam_n
                    side = 0.0
                    if bound > 0.0:
                        if new == bound:
                            side = 1.0
                        elif new == -bound:
                            side = -1.0
                    else:
                        u = old - jv * dinv
                        if u > 0.0:
                            side = 1.0
                        elif u < 0.0:
                            side = -1.0
                    if side != 0.0:
                        g_row[b, nr, glam_col] = g_row[b, nr, glam_col] + side * mu * g_new
                        g_row[b, r, GR_MU] = g_row[b, r, GR_MU] + side * lam_n * g_new
                    else:
                        ubar = g_new
                elif used_now:  # a normal or limit row that pushes (new > 0): its projection passes the adjoint on
                    ubar = g_new
                if ubar != 0.0:
                    glam += ubar
                    free = -jv
                    if kind != ROW_FRICTION:
                        free += s_row_f[b, r, target_col]
                        g_row[b, r, gtarget_col] = g_row[b, r, gtarget_col] + ubar * dinv
                    g_row[b, r, GR_DINV] = g_row[b, r, GR_DINV] + ubar * free
                    replay_row_project(b, r, s_row_i, s_J, g_J, g_v, vcol, gcol, -ubar * dinv)
                g_row[b, r, glam_col] = glam


@func
def point_jacobian_reverse(b, r, l, direction, point, shift, link_i, dof_i, s_cdof, g_J, g_cdof):
    """Adjoint of add_point_jacobian for row r's adjoint g_J[b, r]: into g_cdof of the dofs moving link l; returns
    the adjoints of direction and point."""
    g_dir = ti.Vector([0.0, 0.0, 0.0])
    g_point = ti.Vector([0.0, 0.0, 0.0])
    d = link_i[l, LI_LAST_DOF]
    arm = point.cross(direction)
    while d >= 0:
        gj = g_J[b, r, d + shift]
        cd = s_cdof[b, d]
        ang = ti.Vector([cd[0], cd[1], cd[2]])
        lin = ti.Vector([cd[3], cd[4], cd[5]])
        g_cdof[b, d] = g_cdof[b, d] + gj * ti.Vector([arm[0], arm[1], arm[2], direction[0], direction[1], direction[2]])
        g_dir += gj * (lin + ang.cross(point))
        g_point += gj * direction.cross(ang)
        d = dof_i[d, DI_PARENT]
    return g_dir, g_point


@ti.func
def tangent_basis_reverse(n, g_t1, g_t2):
    """The adjoint of the normal n of tangent_basis(n) = (t1, t2) for the adjoints g_t1, g_t2 of the tangents."""
    t1u = ti.Vector([0.0, 0.0, 0.0])
    if ti.abs(n[0]) < 0.57:
        t1u = ti.Vector([0.0, n[2], -n[1]])
    else:
        t1u = ti.Vector([n[1], -n[0], 0.0])
    norm = t1u.norm()
    t1 = t1u / norm
    g_n = t1.cross(g_t2)  # t2 = n x t1
    g1 = g_t1 + g_t2.cross(n)
    g_u = (g1 - t1 * t1.dot(g1)) / norm
    if ti.abs(n[0]) < 0.57:
        g_n += ti.Vector([0.0, -g_u[2], g_u[1]])
    else:
        g_n += ti.Vector([-g_u[1], g_u[0], 0.0])
    return g_n


@func
def count_rows(b, f, qpos, params_i, dof_f, dof_i, ten_f, ten_i, s_con_i, max_rows):
    """The rows solve_constraints made: 3 per contact, then the violated limits (its tests, replayed)."""
    n_rows = 0
    if params_i[PP_COLLISION] != 0:
        n_rows = 3 * s_con_i[b, CI_META, 0]
    if params_i[PP_LIMITS] != 0:
        for d in range(dof_i.shape[0]):
            if dof_i[d, DI_LIMITED] != 0 and n_rows < max_rows:
                q = qpos[f, b, dof_i[d, DI_Q]]
                if q < dof_f[b, d, DF_RANGE_LO] or q > dof_f[b, d, DF_RANGE_HI]:
                    n_rows += 1
        for t in range(params_i[PP_TENDONS]):
            if ten_f[t, TF_LIMITED] != 0.0 and n_rows < max_rows:
                length = tendon_length(b, f, t, qpos, dof_i, ten_f, ten_i)
                if length < ten_f[t, TF_RANGE_LO] or length > ten_f[t, TF_RANGE_HI]:
                    n_rows += 1
    return n_rows


@ti.func
def correction_slope(x, beta, h, max_correction):
    """d/dx of min(beta max(x, 0) / h, max_correction), on the side the forward took."""
    slope = 0.0
    if x > 0.0 and beta * x / h < max_correction:
        slope = beta / h
    return slope


@func
def solve_constraints_reverse(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i,
                              contact_impulse, s_cdof, s_mass, s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i,
                              s_hist, g_dof, g_mass, g_cdof, g_con, g_imp_in, g_imp_out, g_qpos, g_dof_f, g_row, g_J,
                              g_W, g_v, G_limit):
    """Adjoint of solve_constraints (Euler, plain Gauss-Seidel) from what its forward left: the rows (s_J, s_W,
    s_row_f, s_row_i), the factorised M~ (s_mass), the final velocity and pseudo-velocity (s_dof[b, :, 2],
    s_dof[b, :, SD_PSEUDO]), the sweeps' impulses (s_hist) and counts (s_con_i[b, CI_META, CM_SWEEPS + 0/1]), the
    contact pool (s_con_f, s_con_i) and qpos[f].

    Reads g_dof[b, :, 3] (the final velocity's adjoint), g_dof[b, :, 4] (the pseudo-velocity's) and g_imp_out[b, s, k]
    (contact_impulse[fn, b, s, k]'s). Accumulates into g_dof[b, :, 2] (v_free), g_mass (the lower entries of M~,
    symmetric counterpart folded in), g_cdof, g_con[b, s] (point 0:3, normal 3:6, depth 6, friction coefficient 7),
    g_imp_in[b, prev, k] (the warm start contact_impulse[f, b, prev, k]), g_qpos[b] and g_dof_f[b, d, DF_RANGE_LO /
    DF_RANGE_HI] (the limits' violations; a fixed tendon's limit row through its length); the limit rows' impulses
    (limit_impulse) through the state's gradient G_limit: read at frame fn, accumulated at frame f (the warm start).
    Restitution, the regularisation, Baumgarte's factor, the slop and the largest correction are constants. Scratch:
    g_row [B, rows, >= GR_N], g_J and g_W ([B, rows, row width], as s_J / s_W), g_v [B, D, >= GV_N]; the function
    zeroes what it uses."""
    n = dof_i.shape[0]
    max_rows = s_J.shape[1]
    n_contacts = 0
    if params_i[PP_COLLISION] != 0:
        n_contacts = s_con_i[b, CI_META, 0]
    n_rows = count_rows(b, f, qpos, params_i, dof_f, dof_i, ten_f, ten_i, s_con_i, max_rows)
    for r in range(n_rows):
        for c in ti.static(range(GR_N)):
            g_row[b, r, c] = 0.0
        for c in range(s_row_i[b, r, RI_HI] - s_row_i[b, r, RI_LO] + s_row_i[b, r, RI_HI2] - s_row_i[b, r, RI_LO2]):
            g_J[b, r, c] = 0.0
            g_W[b, r, c] = 0.0
    for r in range(3 * n_contacts):
        g_row[b, r, GR_LAM] = g_imp_out[b, r // 3, r % 3]
    for r in range(3 * n_contacts, n_rows):  # the limit rows: their impulses written to limit_impulse[fn]
        g_row[b, r, GR_LAM] = G_limit[fn, b, s_row_i[b, r, RI_ITEM]]
    for d in range(n):
        g_v[b, d, GV_VEL] = g_dof[b, d, 3]
        g_v[b, d, GV_PSEUDO] = g_dof[b, d, 4]
        g_v[b, d, GV_V] = s_dof[b, d, SD_VEL]
        g_v[b, d, GV_U] = s_dof[b, d, SD_PSEUDO]
    # the position pass, from zero impulses and pseudo-velocity: nothing flows past its start
    sweeps_reverse(b, n_rows, s_con_i[b, CI_META, CM_SWEEPS + 1], s_hist.shape[1] // 2, GV_U, GV_PSEUDO, RF_PTARGET,
                   GR_PLAM, GR_PTARGET, 0, s_row_i, s_row_f, s_J, s_W, s_hist, g_J, g_W, g_row, g_v)
    sweeps_reverse(b, n_rows, s_con_i[b, CI_META, CM_SWEEPS], 0, GV_V, GV_VEL, RF_TARGET, GR_LAM, GR_TARGET, 1,
                   s_row_i, s_row_f, s_J, s_W, s_hist, g_J, g_W, g_row, g_v)
    # the warm start v = v_free + W lambda0 (g_v[b, :, GV_V] becomes v_free)
    for r in range(n_rows):
        lam0 = s_hist[b, 0, r]
        if lam0 != 0.0:
            add_row_response(b, r, s_row_i, s_W, g_v, -lam0, GV_V)
            add_row_outer(b, r, s_row_i, g_W, g_v, GV_VEL, lam0)
        g_row[b, r, GR_LAM] = g_row[b, r, GR_LAM] + row_dot(b, r, s_row_i, s_W, g_v, GV_VEL, False)
    for d in range(n):
        g_dof[b, d, 2] = g_dof[b, d, 2] + g_v[b, d, GV_VEL]
    for r in range(3 * n_contacts, n_rows):  # the limit rows' warm starts, limit_impulse[f]
        G_limit[f, b, s_row_i[b, r, RI_ITEM]] = G_limit[f, b, s_row_i[b, r, RI_ITEM]] + g_row[b, r, GR_LAM]
    for s in range(n_contacts):
        prev = s_con_i[b, CI_PREV, s]
        if prev >= 0:
            for k in ti.static(range(3)):
                g_imp_in[b, prev, k] = g_imp_in[b, prev, k] + g_row[b, 3 * s + k, GR_LAM]
    # the rows' targets, 1 / (J W + reg) and W = M~^-1 J^T into the Jacobian's adjoint and g_mass
    beta = params_f[PF_BAUMGARTE]
    slop = params_f[PF_SLOP]
    max_correction = params_f[PF_MAX_CORRECTION]
    for r in range(n_rows):
        s = s_row_i[b, r, RI_CONTACT]
        if s >= 0:
            if r == s_row_i[b, r, RI_NORMAL]:
                depth = s_con_f[b, s, CF_DEPTH]
                g_t = g_row[b, r, GR_TARGET]
                if depth < 0.0:
                    g_con[b, s, 6] = g_con[b, s, 6] + g_t / h
                elif s_row_f[b, r, RF_TARGET] != 0.0:  # a bounce: target -e J v_free
                    g_approach = -s_con_f[b, s, CF_REST] * g_t
                    add_row_outer(b, r, s_row_i, g_J, g_v, GV_V, g_approach)
                    for seg in ti.static(range(2)):
                        shift = seg_shift(b, r, seg, s_row_i)
                        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
                            g_dof[b, d, 2] = g_dof[b, d, 2] + g_approach * s_J[b, r, d + shift]
                g_con[b, s, 6] = g_con[b, s, 6] + g_row[b, r, GR_PTARGET] * correction_slope(depth - slop, beta, h,
                                                                                              max_correction)
            else:
                g_con[b, s, 7] = g_con[b, s, 7] + g_row[b, r, GR_MU]
        dinv = s_row_f[b, r, RF_DINV]
        g_sum = -g_row[b, r, GR_DINV] * dinv * dinv  # dinv = 1 / (reg + J_r . W_r)
        if g_sum != 0.0:
            add_row_scaled(b, r, s_row_i, g_J, s_W, g_sum)
            add_row_scaled(b, r, s_row_i, g_W, s_J, g_sum)
        for seg in ti.static(range(2)):
            shift = seg_shift(b, r, seg, s_row_i)
            lo = s_row_i[b, r, RI_LO + 2 * seg]
            hi = s_row_i[b, r, RI_HI + 2 * seg]
            ldl_solve_reverse(b, lo, hi, s_mass, dof_i, s_W, r, True, shift, g_W, r, g_mass)
            for d in range(lo, hi):
                g_J[b, r, d + shift] = g_J[b, r, d + shift] + g_W[b, r, d + shift]
    # the contact rows' Jacobians: the point, the normal and its tangents, the motion subspaces
    for s in range(n_contacts):
        normal = ti.Vector([s_con_f[b, s, CF_NORMAL], s_con_f[b, s, CF_NORMAL + 1], s_con_f[b, s, CF_NORMAL + 2]])
        point = ti.Vector([s_con_f[b, s, CF_POS], s_con_f[b, s, CF_POS + 1], s_con_f[b, s, CF_POS + 2]])
        t1, t2 = tangent_basis(normal)
        la = s_con_i[b, CI_LINK_A, s]
        lb = s_con_i[b, CI_LINK_B, s]
        g_point = ti.Vector([0.0, 0.0, 0.0])
        g_n = ti.Vector([0.0, 0.0, 0.0])
        g_t1 = ti.Vector([0.0, 0.0, 0.0])
        g_t2 = ti.Vector([0.0, 0.0, 0.0])
        for k in ti.static(range(3)):
            r = 3 * s + k
            direction = normal
            if ti.static(k == 1):
                direction = t1
            if ti.static(k == 2):
                direction = t2
            shift_b = seg_shift(b, r, 0, s_row_i)
            shift_a = shift_b
            if s_row_i[b, r, RI_HI2] > s_row_i[b, r, RI_LO2]:
                shift_a = seg_shift(b, r, 1, s_row_i)
            gd_b, gp_b = point_jacobian_reverse(b, r, lb, direction, point, shift_b, link_i, dof_i, s_cdof, g_J,
                                                g_cdof)
            gd_a, gp_a = point_jacobian_reverse(b, r, la, -direction, point, shift_a, link_i, dof_i, s_cdof, g_J,
                                                g_cdof)
            g_point += gp_b + gp_a
            g_dir = gd_b - gd_a
            if ti.static(k == 0):
                g_n += g_dir
            if ti.static(k == 1):
                g_t1 += g_dir
            if ti.static(k == 2):
                g_t2 += g_dir
        g_n += tangent_basis_reverse(normal, g_t1, g_t2)
        for c in ti.static(range(3)):
            g_con[b, s, c] = g_con[b, s, c] + g_point[c]
            g_con[b, s, 3 + c] = g_con[b, s, 3 + c] + g_n[c]
    # the limit rows' position-pass targets: the violations of the joints' ranges and of the tendons'
    if params_i[PP_LIMITS] != 0:
        r = 3 * n_contacts
        for d in range(n):
            if dof_i[d, DI_LIMITED] != 0 and r < max_rows:
                qi = dof_i[d, DI_Q]
                q = qpos[f, b, qi]
                lo = dof_f[b, d, DF_RANGE_LO]
                hi = dof_f[b, d, DF_RANGE_HI]
                if q < lo or q > hi:
                    violation = lo - q if q < lo else q - hi
                    g = g_row[b, r, GR_PTARGET] * correction_slope(violation, beta, h, max_correction)
                    if q < lo:
                        g_dof_f[b, d, DF_RANGE_LO] = g_dof_f[b, d, DF_RANGE_LO] + g
                        g_qpos[b, qi] = g_qpos[b, qi] - g
                    else:
                        g_qpos[b, qi] = g_qpos[b, qi] + g
                        g_dof_f[b, d, DF_RANGE_HI] = g_dof_f[b, d, DF_RANGE_HI] - g
                    r += 1
        for t in range(params_i[PP_TENDONS]):
            if ten_f[t, TF_LIMITED] != 0.0 and r < max_rows:
                length = tendon_length(b, f, t, qpos, dof_i, ten_f, ten_i)
                lo = ten_f[t, TF_RANGE_LO]
                hi = ten_f[t, TF_RANGE_HI]
                if length < lo or length > hi:
                    violation = lo - length if length < lo else length - hi
                    g = g_row[b, r, GR_PTARGET] * correction_slope(violation, beta, h, max_correction)
                    g_length = -g if length < lo else g
                    for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
                        qi = dof_i[ten_i[k, 0], DI_Q]
                        g_qpos[b, qi] = g_qpos[b, qi] + ten_f[k, 0] * g_length
                    r += 1


# how a contact's frame is carried by its links (contact_frame_reverse): a face of geom a or b against a point of the
# other; two core points (the normal joins them); two edge lines (the normal is their cross product); a box's corner
# projected onto the other box's face; else witness points and normal fixed in the links' frames
FRAME_GENERIC, FRAME_FACE_A, FRAME_FACE_B, FRAME_CORES, FRAME_EDGES, FRAME_PROJECTED = range(6)
# how a core point (or a face's opposite point) moves: fixed in its link's frame; along a line fixed in its frame,
# to the closest point of the other side's (a capsule's segment, a box's edge); a capsule's segment point closest to
# a box's centre; an edge of the incident box where it crosses a side plane of the reference box; a cylinder's rim
# point, which turns with the plane's normal about the cylinder's axis
POINT_FIXED, POINT_LINE, POINT_TO_CENTRE, POINT_CROSSING, POINT_RIM = range(5)


@ti.func
def geom_axis(geom_f: ti.template(), g, k):
    """Geom g's local axis k in its link's frame."""
    q = ti.Vector([geom_f[g, GF_QUAT], geom_f[g, GF_QUAT + 1], geom_f[g, GF_QUAT + 2], geom_f[g, GF_QUAT + 3]])
    return quat_to_mat(q) @ ti.Vector([1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0])


@func
def geom_local(b, f, l, g, x, links_pos, s_R, geom_f):
    """World point x in geom g's frame (g on link l)."""
    q = ti.Vector([geom_f[g, GF_QUAT], geom_f[g, GF_QUAT + 1], geom_f[g, GF_QUAT + 2], geom_f[g, GF_QUAT + 3]])
    centre = ti.Vector([geom_f[g, GF_POS], geom_f[g, GF_POS + 1], geom_f[g, GF_POS + 2]])
    return quat_to_mat(q).transpose() @ (s_R[b, l].transpose() @ (x - links_pos[f, b, l]) - centre)


@func
def swept_point(b, f, l, g, kind, x, links_pos, s_R, geom_f):
    """How the core point x of a sphere or capsule (geom g on link l) moves: a sphere's centre and a capsule's end
    are fixed; a point inside a capsule's segment moves along it. Returns (mode, axis in the link's frame)."""
    mode = POINT_FIXED
    axis = geom_axis(geom_f, g, 2)
    if kind == CAPSULE:
        z = geom_local(b, f, l, g, x, links_pos, s_R, geom_f)[2]
        if ti.abs(z) < geom_f[g, GF_SIZE + 1] * (1.0 - 1e-9):
            mode = POINT_LINE
    return mode, axis


@func
def add_point_adjoint(b, l, f, point, g_point, links_pos, s_R, g_lpos, g_R):
    """point = x_l + R_l local, local fixed: its adjoint g_point into link l's position and rotation (l < 0: none)."""
    if l >= 0:
        g_lpos[b, l] = g_lpos[b, l] + g_point
        g_R[b, l] = g_R[b, l] + g_point.outer_product(s_R[b, l].transpose() @ (point - links_pos[f, b, l]))


@func
def add_axis_adjoint(b, l, axis_local, g_axis, g_R):
    """axis = R_l axis_local: its adjoint into link l's rotation."""
    if l >= 0:
        g_R[b, l] = g_R[b, l] + g_axis.outer_product(axis_local)


@func
def projection_reverse(b, f, l, x, line_point, axis_local, g_x, g_line, links_pos, s_R, g_lpos, g_R):
    """y = the point of the line through line_point (fixed in link l's frame) along R_l axis_local closest to x,
    at x's own projection there (the line point is that projection): returns the adjoint of x, and accumulates the
    line's into link l, for the adjoint g_line of y."""
    u = s_R[b, l] @ axis_local if l >= 0 else axis_local
    uu = u.dot(u)
    g_t = g_line.dot(u) / uu
    add_point_adjoint(b, l, f, line_point, g_line - g_t * u, links_pos, s_R, g_lpos, g_R)
    add_axis_adjoint(b, l, axis_local, g_t * (x - line_point), g_R)
    return g_x + g_t * u


@func
def lines_reverse(b, f, la, lb, pa, pb, ua_local, ub_local, g_pa, g_pb, links_pos, s_R, g_lpos, g_R):
    """The closest points pa, pb of two lines fixed in links la, lb (through pa and pb, along R ua_local and
    R ub_local, not parallel; pa - pb is perpendicular to both): their adjoints g_pa, g_pb into the links."""
    u = s_R[b, la] @ ua_local if la >= 0 else ua_local
    v = s_R[b, lb] @ ub_local if lb >= 0 else ub_local
    w = pa - pb
    a = u.dot(u)
    bb = u.dot(v)
    c = v.dot(v)
    den = ti.max(a * c - bb * bb, 1e-30)
    g_s = g_pa.dot(u)  # pa moves by s u and pb by t v, s = (bb e - c d) / den, t = (a e - bb d) / den
    g_t = g_pb.dot(v)  # with d = u . w, e = v . w (both 0 at the closest points)
    g_d = (-c * g_s - bb * g_t) / den
    g_e = (bb * g_s + a * g_t) / den
    g_w = g_d * u + g_e * v
    add_point_adjoint(b, la, f, pa, g_pa + g_w, links_pos, s_R, g_lpos, g_R)
    add_point_adjoint(b, lb, f, pb, g_pb - g_w, links_pos, s_R, g_lpos, g_R)
    add_axis_adjoint(b, la, ua_local, g_d * w, g_R)
    add_axis_adjoint(b, lb, ub_local, g_e * w, g_R)


@func
def contact_frame_reverse(b, f, links_pos, pair_i, geom_i, geom_f, s_R, s_con_f, s_con_i, g_con, g_lpos, g_R):
    """Adjoint of the contacts' geometry (point p, normal n from geom a to geom b, depth d) as functions of the poses
    of their links (CI_LINK_A / CI_LINK_B) at frame f (links_pos[f, b], s_R[b]), the narrowphase's decisions held:
    each contact is a frame carried by the links the way the narrowphase's geometry moves, with witness points
    wa = p + d n / 2 and wb = p - d n / 2 (r: the radius of a sphere or capsule, 0 for other geoms):
    - a face of F (a plane; a box's face under a vertex, a ball or an incident edge) against a point c of V (a
      vertex, a ball's centre, a capsule's segment point, an edge crossing a side plane): n and a point q on the
      face are fixed in F's frame, d = sigma n . (q - c) + r, p = c + sigma (d / 2 - r) n (sigma = +1 if V is geom
      b, -1 if it is a);
    - two cores c_a, c_b (balls, or a ball against a box's edge or corner): n = (c_b - c_a) / L,
      d = ra + rb - L, p = c_a + (ra - d / 2) n;
    - two box edges: c_a, c_b their lines' closest points, n = +-(e_a x e_b) / |e_a x e_b|, d = n . (c_a - c_b),
      p = (c_a + c_b) / 2;
    - a reference box's corner k (fixed) and the incident face (m, q fixed): x = k + lambda n on that face,
      d = -+lambda, p = k + lambda n / 2;
    - otherwise (meshes, cylinders against other than a plane) wa, n fixed in a's frame and wb in b's.
    A point c that slides moves to the closest point of a line fixed in its link (a capsule's segment, a box's
    edge) to what it was closest to. Each is the narrowphase's value at the forward's poses. Reads g_con[b, s, 0:7]
    (column 7, the friction coefficient, is no function of the poses) and accumulates into g_lpos[b, l] and
    g_R[b, l]."""
    for s in range(s_con_i[b, CI_META, 0]):
        p = ti.Vector([s_con_f[b, s, CF_POS], s_con_f[b, s, CF_POS + 1], s_con_f[b, s, CF_POS + 2]])
        n = ti.Vector([s_con_f[b, s, CF_NORMAL], s_con_f[b, s, CF_NORMAL + 1], s_con_f[b, s, CF_NORMAL + 2]])
        depth = s_con_f[b, s, CF_DEPTH]
        g_p = ti.Vector([g_con[b, s, 0], g_con[b, s, 1], g_con[b, s, 2]])
        g_n = ti.Vector([g_con[b, s, 3], g_con[b, s, 4], g_con[b, s, 5]])
        g_d = g_con[b, s, 6]
        wa = p + 0.5 * depth * n
        wb = p - 0.5 * depth * n
        la = s_con_i[b, CI_LINK_A, s]
        lb = s_con_i[b, CI_LINK_B, s]
        key = s_con_i[b, CI_KEY, s]
        pair = key // KEY_SPAN
        feature = key % KEY_SPAN
        ga = pair_i[pair, PI_GEOM_A]
        gb = pair_i[pair, PI_GEOM_B]
        ta = geom_i[ga, GI_TYPE]
        tb = geom_i[gb, GI_TYPE]
        swept_a = ta == SPHERE or ta == CAPSULE
        swept_b = tb == SPHERE or tb == CAPSULE
        ra = geom_f[ga, GF_SIZE] if swept_a else 0.0
        rb = geom_f[gb, GF_SIZE] if swept_b else 0.0
        kind = FRAME_GENERIC
        mode_a = POINT_FIXED  # how c_a (or V's point) moves, and the axis of its line (link frame)
        mode_b = POINT_FIXED
        axis_a = ti.Vector([0.0, 0.0, 1.0])
        axis_b = ti.Vector([0.0, 0.0, 1.0])
        code = s_con_i[b, CI_FEATURE, s]
        if ta == PLANE:
            kind = FRAME_FACE_A
            if tb == CYLINDER:
                axis_a = geom_axis(geom_f, ga, 2)  # the plane's normal and the cylinder's axis, link frames
                axis_b = geom_axis(geom_f, gb, 2)
                za = s_R[b, la] @ axis_a if la >= 0 else axis_a
                zb = s_R[b, lb] @ axis_b
                if (za - zb * zb.dot(za)).norm() >= 1e-9:  # (an upright cylinder's rim points are fixed in it)
                    mode_b = POINT_RIM
        elif swept_a and swept_b:
            kind = FRAME_CORES
            mode_a, axis_a = swept_point(b, f, la, ga, ta, wa - ra * n, links_pos, s_R, geom_f)
            mode_b, axis_b = swept_point(b, f, lb, gb, tb, wb + rb * n, links_pos, s_R, geom_f)
        elif swept_a and tb == BOX:
            # the box's point: inside a face (the normal is the face's), on an edge, or a corner
            local = geom_local(b, f, lb, gb, wb, links_pos, s_R, geom_f)
            at_bound = 0
            free = 0
            for k in ti.static(range(3)):
                if ti.abs(local[k]) >= geom_f[gb, GF_SIZE + k] * (1.0 - 1e-9):
                    at_bound += 1
                else:
                    free = k
            kind = FRAME_FACE_B if at_bound <= 1 else FRAME_CORES
            if at_bound == 2:
                mode_b = POINT_LINE
                axis_b = geom_axis(geom_f, gb, free)
            if ta == CAPSULE and feature == 0:  # the segment's point closest to the box's centre
                mode_a, axis_a = swept_point(b, f, la, ga, ta, wa - ra * n, links_pos, s_R, geom_f)
                if mode_a == POINT_LINE:
                    mode_a = POINT_TO_CENTRE
        elif ta == BOX and tb == BOX:
            axis = code // 256
            row = code % 32
            if axis >= 6:
                kind = FRAME_EDGES
                axis_a = geom_axis(geom_f, ga, (axis - 6) // 3)
                axis_b = geom_axis(geom_f, gb, (axis - 6) % 3)
            else:
                ref_is_a = axis < 3
                incident = (code // 32) % 8 // 2
                if row < 4 or row >= 8:
                    kind = FRAME_FACE_A if ref_is_a else FRAME_FACE_B
                    if row >= 8:  # an incident edge crossing a side plane of the reference face
                        e = (row - 8) // 4
                        plane = (row - 8) % 4
                        i = axis % 3
                        edge_axis = geom_axis(geom_f, gb if ref_is_a else ga,
                                              (incident + 1) % 3 if e % 2 == 0 else (incident + 2) % 3)
                        plane_axis = geom_axis(geom_f, ga if ref_is_a else gb,
                                               (i + 1) % 3 if plane < 2 else (i + 2) % 3)
                        if ref_is_a:
                            mode_b, axis_b, axis_a = POINT_CROSSING, edge_axis, plane_axis
                        else:
                            mode_a, axis_a, axis_b = POINT_CROSSING, edge_axis, plane_axis
                else:  # a reference corner projected onto the incident face
                    kind = FRAME_PROJECTED
                    if ref_is_a:
                        axis_b = geom_axis(geom_f, gb, incident)
                    else:
                        axis_a = geom_axis(geom_f, ga, incident)
        if kind == FRAME_FACE_A or kind == FRAME_FACE_B:
            sigma = 1.0 if kind == FRAME_FACE_A else -1.0
            lf = la if kind == FRAME_FACE_A else lb
            lv = lb if kind == FRAME_FACE_A else la
            q = wa if kind == FRAME_FACE_A else wb
            r = rb if kind == FRAME_FACE_A else ra
            c = (wb + r * n) if kind == FRAME_FACE_A else (wa - r * n)
            mode = mode_b if kind == FRAME_FACE_A else mode_a
            axis_v = axis_b if kind == FRAME_FACE_A else axis_a
            axis_f = axis_a if kind == FRAME_FACE_A else axis_b
            g_c = g_p
            g_dt = g_d + 0.5 * sigma * g_p.dot(n)
            g_nt = g_n + sigma * (0.5 * depth - r) * g_p + sigma * g_dt * (q - c)
            g_c -= sigma * g_dt * n
            g_q = sigma * g_dt * n
            if mode == POINT_TO_CENTRE:  # toward the box's centre, fixed in F's frame
                centre = links_pos[f, b, lf] + s_R[b, lf] @ ti.Vector([geom_f[gb, GF_POS], geom_f[gb, GF_POS + 1],
                                                                        geom_f[gb, GF_POS + 2]])
                add_point_adjoint(b, lf, f, centre,
                                  projection_reverse(b, f, lv, centre, c, axis_v, ti.Vector([0.0, 0.0, 0.0]), g_c,
                                                     links_pos, s_R, g_lpos, g_R), links_pos, s_R, g_lpos, g_R)
            elif mode == POINT_RIM:
                # c = the cap's centre (fixed in V) + radius * (u, w, -u or -w: feature % 4), u the unit direction
                # of -z_plane across the axis z_cyl, w = z_cyl x u
                za = s_R[b, lf] @ axis_f if lf >= 0 else axis_f
                zb = s_R[b, lv] @ axis_v
                v = -za + zb * zb.dot(za)
                u = v / v.norm()
                j = feature % 4
                g_rim = geom_f[gb, GF_SIZE] * g_c
                g_u = g_rim if j == 0 else (-g_rim if j == 2 else ti.Vector([0.0, 0.0, 0.0]))
                g_w = g_rim if j == 1 else (-g_rim if j == 3 else ti.Vector([0.0, 0.0, 0.0]))
                g_zb = u.cross(g_w)
                g_u += g_w.cross(zb)
                g_v = (g_u - u * u.dot(g_u)) / v.norm()
                g_za = -g_v + zb * zb.dot(g_v)
                g_zb += zb.dot(za) * g_v + za * zb.dot(g_v)
                add_axis_adjoint(b, lf, axis_f, g_za, g_R)
                add_axis_adjoint(b, lv, axis_v, g_zb, g_R)
                rim = u if j == 0 else (zb.cross(u) if j == 1 else (-u if j == 2 else -zb.cross(u)))
                add_point_adjoint(b, lv, f, c - geom_f[gb, GF_SIZE] * rim, g_c, links_pos, s_R, g_lpos, g_R)
            elif mode == POINT_CROSSING:  # on V's edge line (fixed in V) where it crosses F's side plane
                u = s_R[b, lv] @ axis_v
                m = s_R[b, lf] @ axis_f
                g_t = g_c.dot(u) / m.dot(u)
                add_point_adjoint(b, lv, f, c, g_c - g_t * m, links_pos, s_R, g_lpos, g_R)
                add_point_adjoint(b, lf, f, c, g_t * m, links_pos, s_R, g_lpos, g_R)
            else:
                add_point_adjoint(b, lv, f, c, g_c, links_pos, s_R, g_lpos, g_R)
            add_point_adjoint(b, lf, f, q, g_q, links_pos, s_R, g_lpos, g_R)
            if lf >= 0:  # n = R_F n_local
                g_R[b, lf] = g_R[b, lf] + g_nt.outer_product(s_R[b, lf].transpose() @ n)
        elif kind == FRAME_CORES:
            ca = wa - ra * n
            cb = wb + rb * n
            length = (cb - ca).norm()
            g_dt = g_d - 0.5 * g_p.dot(n)
            g_nt = g_n + (ra - 0.5 * depth) * g_p
            g_delta = -g_dt * n + (g_nt - n * n.dot(g_nt)) / ti.max(length, 1e-30)
            g_ca = g_p - g_delta
            g_cb = g_delta
            if mode_a == POINT_LINE and mode_b == POINT_LINE:
                lines_reverse(b, f, la, lb, ca, cb, axis_a, axis_b, g_ca, g_cb, links_pos, s_R, g_lpos, g_R)
            elif mode_b == POINT_LINE:  # b's point: the closest of its line to c_a
                g_ca = projection_reverse(b, f, lb, ca, cb, axis_b, g_ca, g_cb, links_pos, s_R, g_lpos, g_R)
                g_cb = ti.Vector([0.0, 0.0, 0.0])
            elif mode_a == POINT_LINE:
                g_cb = projection_reverse(b, f, la, cb, ca, axis_a, g_cb, g_ca, links_pos, s_R, g_lpos, g_R)
                g_ca = ti.Vector([0.0, 0.0, 0.0])
            if mode_a == POINT_TO_CENTRE:  # (a capsule against a box's edge or corner)
                centre = links_pos[f, b, lb] + s_R[b, lb] @ ti.Vector([geom_f[gb, GF_POS], geom_f[gb, GF_POS + 1],
                                                                       geom_f[gb, GF_POS + 2]])
                add_point_adjoint(b, lb, f, centre,
                                  projection_reverse(b, f, la, centre, ca, axis_a, ti.Vector([0.0, 0.0, 0.0]), g_ca,
                                                     links_pos, s_R, g_lpos, g_R), links_pos, s_R, g_lpos, g_R)
            elif mode_a != POINT_LINE or mode_b != POINT_LINE:
                add_point_adjoint(b, la, f, ca, g_ca, links_pos, s_R, g_lpos, g_R)
            if mode_b != POINT_LINE or mode_a != POINT_LINE:
                add_point_adjoint(b, lb, f, cb, g_cb, links_pos, s_R, g_lpos, g_R)
        elif kind == FRAME_EDGES:
            ua = s_R[b, la] @ axis_a
            ub = s_R[b, lb] @ axis_b
            x = ua.cross(ub)
            g_dt = g_d
            g_nt = g_n + g_dt * (wa - wb)
            g_x = (g_nt - n * n.dot(g_nt)) / ti.max(x.norm(), 1e-30) * (1.0 if x.dot(n) >= 0 else -1.0)
            add_axis_adjoint(b, la, axis_a, ub.cross(g_x), g_R)
            add_axis_adjoint(b, lb, axis_b, g_x.cross(ua), g_R)
            lines_reverse(b, f, la, lb, wa, wb, axis_a, axis_b, 0.5 * g_p + g_dt * n, 0.5 * g_p - g_dt * n,
                          links_pos, s_R, g_lpos, g_R)
        elif kind == FRAME_PROJECTED:
            # corner k of the reference box (lr), the incident face (li: normal m, point x = k + lambda n on it)
            sign = -1.0 if code // 256 < 3 else 1.0  # d = sign lambda
            lr = la if sign < 0 else lb
            li = lb if sign < 0 else la
            m_axis = axis_b if sign < 0 else axis_a
            k = wa if sign < 0 else wb
            x = wb if sign < 0 else wa
            lam = sign * depth
            m = s_R[b, li] @ m_axis
            den = m.dot(n)
            g_k = g_p
            g_lam = 0.5 * g_p.dot(n) + sign * g_d
            g_nt = g_n + 0.5 * lam * g_p
            g_a = g_lam / den  # lambda = m . (x - k) / (m . n)
            g_b = -g_lam * lam / den
            add_axis_adjoint(b, li, m_axis, g_a * (x - k) + g_b * n, g_R)
            add_point_adjoint(b, li, f, x, g_a * m, links_pos, s_R, g_lpos, g_R)
            add_point_adjoint(b, lr, f, k, g_k - g_a * m, links_pos, s_R, g_lpos, g_R)
            g_nt += g_b * m
            if lr >= 0:  # n is the reference face's
                g_R[b, lr] = g_R[b, lr] + g_nt.outer_product(s_R[b, lr].transpose() @ n)
        else:
            g_wa = 0.5 * g_p + g_d * n
            g_wb = 0.5 * g_p - g_d * n
            g_nt = g_n + g_d * (wa - wb)
            add_point_adjoint(b, la, f, wa, g_wa, links_pos, s_R, g_lpos, g_R)
            add_point_adjoint(b, lb, f, wb, g_wb, links_pos, s_R, g_lpos, g_R)
            if la >= 0:
                g_R[b, la] = g_R[b, la] + g_nt.outer_product(s_R[b, la].transpose() @ n)


@ti.func
def quat_integrate_reverse(q, omega, h, g_out):
    """The adjoints of q and omega for the adjoint g_out of quat_integrate(q, omega, h). At an angle the forward
    does not rotate by (|omega| h <= 1e-30, h > 0) omega gets the derivative's limit at omega = 0."""
    a = omega.norm()
    angle = a * h
    g_q = g_out
    g_w = ti.Vector([0.0, 0.0, 0.0])
    if angle > 1e-30:
        half = 0.5 * angle
        c = ti.cos(half)
        sn = ti.sin(half)
        e = ti.Vector([c, sn * omega[0] / a, sn * omega[1] / a, sn * omega[2] / a])
        g_q, g_e = quat_mul_reverse(q, e, quat_normalize_reverse(quat_mul(q, e), g_out))
        g_ev = ti.Vector([g_e[1], g_e[2], g_e[3]])
        unit = omega / a
        # e = (cos(a h / 2), sin(a h / 2) / a * omega)
        g_w = (g_e[0] * (-sn * 0.5 * h) + g_ev.dot(omega) * (c * 0.5 * h / a - sn / (a * a))) * unit + \
            (sn / a) * g_ev
    elif h > 0.0:
        _, g_e = quat_mul_reverse(q, ti.Vector([1.0, 0.0, 0.0, 0.0]), g_out)
        g_w = 0.5 * h / ti.max(q.norm(), 1e-30) * ti.Vector([g_e[1], g_e[2], g_e[3]])
    return g_q, g_w


@func
def advance_q_reverse(b, src, fs, vel, fv, scale, joint_i, g_dst, g_src, g_vel):
    """Adjoint of advance_q(b, src, fs, dst, fd, vel, fv, scale, joint_i) for the adjoint g_dst[b, :] of dst[fd, b];
    accumulates into g_src[b, :] (src[fs, b]) and g_vel[b, :] (vel[fv, b]). Hinge, slide, ball and free joints
    (quat_integrate's normalisation included)."""
    for j in range(joint_i.shape[0]):
        jtype = joint_i[j, JI_TYPE]
        qs = joint_i[j, JI_Q_START]
        d0 = joint_i[j, JI_DOF_START]
        if jtype == HINGE or jtype == SLIDE:
            g = g_dst[b, qs]
            g_src[b, qs] = g_src[b, qs] + g
            g_vel[b, d0] = g_vel[b, d0] + scale * g
        elif jtype == FREE or jtype == BALL:
            r0 = 0
            if jtype == FREE:
                for k in ti.static(range(3)):
                    g = g_dst[b, qs + k]
                    g_src[b, qs + k] = g_src[b, qs + k] + g
                    g_vel[b, d0 + k] = g_vel[b, d0 + k] + scale * g
                r0 = 3
            q = ti.Vector([src[fs, b, qs + r0], src[fs, b, qs + r0 + 1], src[fs, b, qs + r0 + 2],
                           src[fs, b, qs + r0 + 3]])
            omega = ti.Vector([vel[fv, b, d0 + r0], vel[fv, b, d0 + r0 + 1], vel[fv, b, d0 + r0 + 2]])
            g_out = ti.Vector([g_dst[b, qs + r0], g_dst[b, qs + r0 + 1], g_dst[b, qs + r0 + 2],
                               g_dst[b, qs + r0 + 3]])
            g_q, g_w = quat_integrate_reverse(q, omega, scale, g_out)
            for k in ti.static(range(4)):
                g_src[b, qs + r0 + k] = g_src[b, qs + r0 + k] + g_q[k]
            for k in ti.static(range(3)):
                g_vel[b, d0 + r0 + k] = g_vel[b, d0 + r0 + k] + g_w[k]
