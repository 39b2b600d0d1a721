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

from .kernels_collision import (CF_DEPTH, CF_MU, CF_NORMAL, CF_POS, CF_REST, CI_LINK_A, CI_LINK_B, CI_META, CI_PREV,
                                CM_SWEEPS)
from .kernels_dynamics import entry, ldl_solve, ldl_solve_reverse, tendon_length
from .kernels_kinematics import add_ref_adjoint
from .kernels_math import func, quat_to_mat, tangent_basis
from .layout import (DF_RANGE_HI, DF_RANGE_LO, DI_LIMITED, DI_LINK, DI_PARENT, DI_Q, ED_ANCHOR1, ED_ANCHOR2, ED_POLY,
                     ED_REF, ED_RELQUAT, ED_TORQUESCALE, EQ_CONNECT, EQ_JOINT, EQ_NONE, EQ_ROWS, EQ_TENDON, EQ_WELD,
                     GC_DEPTH, GC_MU, GC_NORMAL,
                     GC_POS, GD_FREE_VEL, GD_PSEUDO, GD_VEL, LI_LAST_DOF, LI_TREE_HI, LI_TREE_LO, PF_BAUMGARTE,
                     PF_MAX_CORRECTION, PF_REG, PF_SLOP, PF_TOL, PP_CG, PP_COLLISION, PP_ITERATIONS, PP_LIMITS,
                     PP_TENDONS, RI_CONTACT, RI_HI, RI_HI2, RI_ITEM, RI_KIND, RI_LO, RI_LO2, RI_NORMAL, ROW_FRICTION,
                     ROW_EQUALITY, ROW_LIMIT, ROW_NORMAL, SD_PSEUDO, SD_SWEEP, SD_VEL, TF_LIMITED, TF_RANGE_HI, TF_RANGE_LO,
                     TI_COUNT, TI_START)

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


@func
def add_point_jacobian(b, r, l, direction, point, shift, link_i, dof_i, s_cdof, s_ref, s_J):
    """Row r of the Jacobian += d(direction . velocity of the world point `point` fixed to link l)/d(qvel); dof d at
    column d + shift (seg_shift of the segment of l's tree). A dof's motion subspace is about its link's origin
    s_ref[b, dof link]."""
    d = link_i[l, LI_LAST_DOF]
    while d >= 0:
        arm = (point - s_ref[b, dof_i[d, DI_LINK]]).cross(direction)
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
    (target_col) for v = s_dof[b, :, col]: normal and limit rows lambda >= 0, equality rows J v = target (any
    lambda), friction rows inside the friction pyramid of their normal row's impulse (none in the position pass: mu is read from RF_MU only for the velocity
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
                elif kind == ROW_EQUALITY:  # bilateral
                    new = lam + (s_row_f[b, r, target_col] - jv) * s_row_f[b, r, RF_DINV]
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
def add_angular_jacobian(b, r, l, direction, shift, link_i, dof_i, s_cdof, s_J):
    """Row r of the Jacobian += d(direction . angular velocity of link l)/d(qvel), columns as add_point_jacobian."""
    d = link_i[l, LI_LAST_DOF]
    while d >= 0:
        cd = s_cdof[b, d]
        s_J[b, r, d + shift] = s_J[b, r, d + shift] + direction[0] * cd[0] + direction[1] * cd[1] + direction[2] * cd[2]
        d = dof_i[d, DI_PARENT]


@func
def eq_vec(eq_data, b, e, col):
    """Columns col..col+2 of slot e's eq_data as a vector."""
    return ti.Vector([eq_data[b, e, col], eq_data[b, e, col + 1], eq_data[b, e, col + 2]])


@func
def equality_row(b, f, r, e, k, violation, params_f, h, equality_impulse, s_row_i, s_row_f):
    """The bookkeeping of row k of equality slot e, made as row r with its Jacobian set: a bilateral row toward
    J v = 0, the position pass's target undoing `violation` (the constraint's value, which J moves), and its warm
    start, equality_impulse[f, b, e, k]."""
    s_row_i[b, r, RI_KIND] = ROW_EQUALITY
    s_row_i[b, r, RI_CONTACT] = -1
    s_row_i[b, r, RI_NORMAL] = r
    s_row_i[b, r, RI_ITEM] = e * EQ_ROWS + k
    correction = ti.min(params_f[PF_BAUMGARTE] * ti.abs(violation) / h, params_f[PF_MAX_CORRECTION])
    s_row_f[b, r, RF_TARGET] = 0.0
    s_row_f[b, r, RF_PTARGET] = -correction if violation > 0.0 else correction
    if violation == 0.0:
        s_row_f[b, r, RF_PTARGET] = 0.0
    s_row_f[b, r, RF_PLAMBDA] = 0.0
    s_row_f[b, r, RF_LAMBDA] = equality_impulse[f, b, e, k]
    s_row_f[b, r, RF_MU] = 0.0


@func
def scalar_equality_value(b, o1, o2, kind, qpos, f, eq_data, e, dof_i, ten_f, ten_i):
    """A joint (o1, o2: dofs) or tendon (o1, o2: tendons) equality of slot e, y - y0 = sum_k a_k (x - x0)^k (y of o1,
    x of o2; none: x - x0 = 0) at qpos[f]: its value (y - y0) - poly(x - x0), the slope d poly / dx and the
    curvature d slope / dx."""
    x = 0.0
    y = 0.0
    if kind == EQ_JOINT:
        y = qpos[f, b, dof_i[o1, DI_Q]]
        if o2 >= 0:
            x = qpos[f, b, dof_i[o2, DI_Q]]
    else:
        for k in range(ten_i[o1, TI_START], ten_i[o1, TI_START] + ten_i[o1, TI_COUNT]):
            y += ten_f[k, 0] * qpos[f, b, dof_i[ten_i[k, 0], DI_Q]]
        if o2 >= 0:
            for k in range(ten_i[o2, TI_START], ten_i[o2, TI_START] + ten_i[o2, TI_COUNT]):
                x += ten_f[k, 0] * qpos[f, b, dof_i[ten_i[k, 0], DI_Q]]
    dx = 0.0
    if o2 >= 0:
        dx = x - eq_data[b, e, ED_REF + 1]
    value = y - eq_data[b, e, ED_REF]
    slope = 0.0
    curvature = 0.0
    power = 1.0
    for i in ti.static(range(5)):
        value -= eq_data[b, e, ED_POLY + i] * power
        if ti.static(i < 4):
            slope += (i + 1) * eq_data[b, e, ED_POLY + i + 1] * power
        if ti.static(i < 3):
            curvature += (i + 2) * (i + 1) * eq_data[b, e, ED_POLY + i + 2] * power
        power *= dx
    return value, slope, curvature


@func
def scalar_equality_row(b, r, o1, o2, kind, qpos, f, eq_data, e, params_i, link_i, dof_i, ten_f, ten_i, s_J, s_row_i):
    """Set row r's Jacobian for a joint or tendon equality of slot e (scalar_equality_value: 1 on y's dofs, -slope on
    x's) and return its value. The row's dofs are the trees of o1's and of o2's (a tendon's first dof, and its first
    dof outside that tree)."""
    value, slope, _ = scalar_equality_value(b, o1, o2, kind, qpos, f, eq_data, e, dof_i, ten_f, ten_i)
    # the trees: of o1's (first) dof, then of the first dof of the row outside it
    d1 = o1
    if kind == EQ_TENDON:
        d1 = ten_i[ten_i[o1, TI_START], 0]
    lo = link_i[dof_i[d1, DI_LINK], LI_TREE_LO]
    hi = link_i[dof_i[d1, DI_LINK], LI_TREE_HI]
    lo2 = 0
    hi2 = 0
    for side in range(2):
        o = o1
        if side == 1:
            o = o2
        if o >= 0:
            n_entries = 1
            if kind == EQ_TENDON:
                n_entries = ten_i[o, TI_COUNT]
            for k in range(n_entries):
                d = o
                if kind == EQ_TENDON:
                    d = ten_i[ten_i[o, TI_START] + k, 0]
                if (d < lo or d >= hi) and hi2 == 0:
                    lo2 = link_i[dof_i[d, DI_LINK], LI_TREE_LO]
                    hi2 = link_i[dof_i[d, DI_LINK], LI_TREE_HI]
    set_row_dofs(b, r, lo, hi, lo2, hi2, s_row_i)
    for c in range(hi - lo + s_row_i[b, r, RI_HI2] - s_row_i[b, r, RI_LO2]):
        s_J[b, r, c] = 0.0
    for side in range(2):
        o = o1
        if side == 1:
            o = o2
        if o >= 0:
            scale = 1.0
            if side == 1:
                scale = -slope
            n_entries = 1
            if kind == EQ_TENDON:
                n_entries = ten_i[o, TI_COUNT]
            for k in range(n_entries):
                d = o
                coef = 1.0
                if kind == EQ_TENDON:
                    d = ten_i[ten_i[o, TI_START] + k, 0]
                    coef = ten_f[ten_i[o, TI_START] + k, 0]
                shift = seg_shift(b, r, 0, s_row_i)
                if d < lo or d >= hi:
                    shift = seg_shift(b, r, 1, s_row_i)
                s_J[b, r, d + shift] = s_J[b, r, d + shift] + scale * coef
    return value


@func
def equality_slot_rows(b, e, room, params_i, link_i, dof_i, eq_type, eq_obj, eq_data, eq_active):
    """The rows slot e of environment b makes when `room` rows are left (0 if it makes none): 3 for a connect, 6
    for a weld (3 with torquescale 0), 1 for a joint or tendon equality; none for a free or inactive slot, one
    whose objects are out of the model's ranges (the state's validation refuses them), one whose links have no
    dofs, or one whose rows do not fit (the row budget holds every slot's)."""
    kind = eq_type[b, e]
    o1 = eq_obj[b, e, 0]
    o2 = eq_obj[b, e, 1]
    n_eq = 0
    if kind != EQ_NONE and eq_active[b, e] != 0:
        if kind == EQ_CONNECT or kind == EQ_WELD:
            n_links = link_i.shape[0]
            if o1 >= 0 and o1 < n_links and o2 >= -1 and o2 < n_links:
                moves = link_i[o1, LI_TREE_HI] > link_i[o1, LI_TREE_LO]
                if o2 >= 0:
                    if link_i[o2, LI_TREE_HI] > link_i[o2, LI_TREE_LO]:
                        moves = True
                if moves:
                    n_eq = 3
                    if kind == EQ_WELD and eq_data[b, e, ED_TORQUESCALE] != 0.0:
                        n_eq = 6
        elif kind == EQ_JOINT:
            n_dofs = dof_i.shape[0]
            if o1 >= 0 and o1 < n_dofs and o2 >= -1 and o2 < n_dofs:
                if dof_i[o1, DI_Q] >= 0:
                    n_eq = 1
                    if o2 >= 0:
                        if dof_i[o2, DI_Q] < 0:
                            n_eq = 0
        elif kind == EQ_TENDON:
            if o1 >= 0 and o1 < params_i[PP_TENDONS] and o2 >= -1 and o2 < params_i[PP_TENDONS]:
                n_eq = 1
    if n_eq > room:
        n_eq = 0
    return n_eq


@func
def weld_geometry(b, e, o1, o2, eq_data, s_ref, s_R):
    """A connect's or weld's points p1 (on o1) and p2 (on o2, or the world's), world, and E = R1 Rrel R2^T (R2 the
    identity for the world), whose rotation vector is a weld's rotational violation."""
    p1 = s_ref[b, o1] + s_R[b, o1] @ eq_vec(eq_data, b, e, ED_ANCHOR1)
    p2 = eq_vec(eq_data, b, e, ED_ANCHOR2)
    R2 = ti.Matrix.identity(float, 3)
    if o2 >= 0:
        p2 = s_ref[b, o2] + s_R[b, o2] @ p2
        R2 = s_R[b, o2]
    rel = quat_to_mat(ti.Vector([eq_data[b, e, ED_RELQUAT], eq_data[b, e, ED_RELQUAT + 1],
                                 eq_data[b, e, ED_RELQUAT + 2], eq_data[b, e, ED_RELQUAT + 3]]))
    E = s_R[b, o1] @ rel @ R2.transpose()
    return p1, p2, rel, R2, E


@ti.func
def unit_axis(k):
    c = k % 3
    return ti.Vector([ti.select(c == 0, 1.0, 0.0), ti.select(c == 1, 1.0, 0.0), ti.select(c == 2, 1.0, 0.0)])


@func
def equality_rows(b, f, h, n_rows, qpos, params_f, params_i, link_i, dof_i, ten_f, ten_i, eq_type, eq_obj, eq_data,
                  eq_active, equality_impulse, s_cdof, s_ref, s_R, s_J, s_row_f, s_row_i):
    """The rows of the active equality constraints of environment b from row n_rows on (kernels' layout:
    layout.ED_*), each warm-started from equality_impulse[f]; returns the new row count. connect: three rows,
    e_k . (velocity of the point on obj1 - of the point on obj2) = 0 at the points ED_ANCHOR1 / ED_ANCHOR2 (world
    axes e_k), value (p1 - p2)_k. weld: those, and unless torquescale is 0 three rows e_k . (omega1 - omega2) = 0,
    value the k-th component of the rotation vector (sin(angle) axis, world axes) of R1 Rrel R2^T. joint and tendon:
    scalar_equality_row. A slot whose objects are out of the model's ranges (the state's validation refuses them)
    makes no row, as does one whose rows would not fit (the row budget holds every slot's)."""
    max_rows = s_J.shape[1]
    for e in range(eq_type.shape[1]):
        kind = eq_type[b, e]
        o1 = eq_obj[b, e, 0]
        o2 = eq_obj[b, e, 1]
        n_eq = equality_slot_rows(b, e, max_rows - n_rows, params_i, link_i, dof_i, eq_type, eq_obj, eq_data,
                                  eq_active)
        if n_eq > 0 and (kind == EQ_CONNECT or kind == EQ_WELD):
            p1, p2, rel, R2, E = weld_geometry(b, e, o1, o2, eq_data, s_ref, s_R)
            rot = 0.5 * ti.Vector([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]])
            lo2 = 0
            hi2 = 0
            if o2 >= 0:
                lo2 = link_i[o2, LI_TREE_LO]
                hi2 = link_i[o2, LI_TREE_HI]
            for k in range(n_eq):
                r = n_rows + k
                set_row_dofs(b, r, link_i[o1, LI_TREE_LO], link_i[o1, LI_TREE_HI], lo2, hi2, s_row_i)
                for c in range(s_row_i[b, r, RI_HI] - s_row_i[b, r, RI_LO] + s_row_i[b, r, RI_HI2]
                               - s_row_i[b, r, RI_LO2]):
                    s_J[b, r, c] = 0.0
                shift1 = seg_shift(b, r, 0, s_row_i)
                shift2 = shift1
                if s_row_i[b, r, RI_HI2] > s_row_i[b, r, RI_LO2]:
                    shift2 = seg_shift(b, r, 1, s_row_i)
                axis = unit_axis(k)
                value = 0.0
                if k < 3:
                    add_point_jacobian(b, r, o1, axis, p1, shift1, link_i, dof_i, s_cdof, s_ref, s_J)
                    if o2 >= 0:
                        add_point_jacobian(b, r, o2, -axis, p2, shift2, link_i, dof_i, s_cdof, s_ref, s_J)
                    value = axis.dot(p1 - p2)
                else:
                    add_angular_jacobian(b, r, o1, axis, shift1, link_i, dof_i, s_cdof, s_J)
                    if o2 >= 0:
                        add_angular_jacobian(b, r, o2, -axis, shift2, link_i, dof_i, s_cdof, s_J)
                    value = axis.dot(rot)
                equality_row(b, f, r, e, k, value, params_f, h, equality_impulse, s_row_i, s_row_f)
        elif n_eq > 0:
            value = scalar_equality_row(b, n_rows, o1, o2, kind, qpos, f, eq_data, e, params_i, link_i, dof_i, ten_f,
                                        ten_i, s_J, s_row_i)
            equality_row(b, f, n_rows, e, 0, value, params_f, h, equality_impulse, s_row_i, s_row_f)
        n_rows += n_eq
    return n_rows


@func
def solve_constraints(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i, contact_impulse,
                      limit_impulse, eq_type, eq_obj, eq_data, eq_active, equality_impulse, s_cdof, s_ref, s_R,
                      s_mass, s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i, s_hist):
    """Build the rows, warm start from contact_impulse[f], limit_impulse[f] and equality_impulse[f], run PGS, store
    the impulses in contact_impulse[fn], limit_impulse[fn] and equality_impulse[fn]; the final velocity is left in
    s_dof[b, :, SD_VEL]."""
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
                add_point_jacobian(b, r, lb, direction, point, shift_b, link_i, dof_i, s_cdof, s_ref, s_J)
                add_point_jacobian(b, r, la, -direction, point, shift_a, link_i, dof_i, s_cdof, s_ref, s_J)
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
    n_rows = equality_rows(b, f, h, n_rows, qpos, params_f, params_i, link_i, dof_i, ten_f, ten_i, eq_type, eq_obj,
                           eq_data, eq_active, equality_impulse, s_cdof, s_ref, s_R, s_J, s_row_f, s_row_i)
    # W = M~^-1 J^T, the inverse effective masses, and the warm start v = v_free + W lambda
    for r in range(n_rows):
        for seg in ti.static(range(2)):
            d_lo = s_row_i[b, r, RI_LO + 2 * seg]
            d_hi = s_row_i[b, r, RI_HI + 2 * seg]
            shift = seg_shift(b, r, seg, s_row_i)
            for d in range(d_lo, d_hi):
                s_W[b, r, d + shift] = s_J[b, r, d + shift]
            ldl_solve(b, d_lo, d_hi, s_mass, dof_i, s_W, r, True, shift)
        # a row whose Jacobian is zero (a planar loop's connect across its plane) moves nothing: its impulse stays
        # put (with 1 / reg, rounding in its position-pass target grew it every sweep and no sweep converged)
        jw = row_dot(b, r, s_row_i, s_J, s_W, r, True)
        s_row_f[b, r, RF_DINV] = 0.0
        if jw > 0.0:
            s_row_f[b, r, RF_DINV] = 1.0 / (params_f[PF_REG] + jw)
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
        if s_row_f[b, r, RF_PTARGET] != 0.0:  # (negative only for an equality)
            s = s_row_i[b, r, RI_CONTACT]
            if s_row_i[b, r, RI_KIND] == ROW_LIMIT:
                correct = 1
            elif s_row_i[b, r, RI_KIND] == ROW_EQUALITY:  # violated by more than the slop (m or rad)
                if ti.abs(s_row_f[b, r, RF_PTARGET]) > beta * slop / h:
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
    for e in range(equality_impulse.shape[2]):
        for k in ti.static(range(EQ_ROWS)):
            equality_impulse[fn, b, e, k] = 0.0
    for r in range(n_rows):
        s = s_row_i[b, r, RI_CONTACT]
        if s >= 0:
            contact_impulse[fn, b, s, r - s_row_i[b, r, RI_NORMAL]] = s_row_f[b, r, RF_LAMBDA]
        elif s_row_i[b, r, RI_KIND] == ROW_LIMIT:
            limit_impulse[fn, b, s_row_i[b, r, RI_ITEM]] = s_row_f[b, r, RF_LAMBDA]
        elif s_row_i[b, r, RI_KIND] == ROW_EQUALITY:
            item = s_row_i[b, r, RI_ITEM]
            equality_impulse[fn, b, item // EQ_ROWS, item % EQ_ROWS] = s_row_f[b, r, RF_LAMBDA]


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
                if kind == ROW_EQUALITY:  # bilateral: no projection
                    used_now = True
                    used_before = True
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
                elif used_now:  # an equality row, or a normal or limit row that pushes (new > 0): its projection
                    # passes the adjoint on
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
def point_jacobian_reverse(b, r, l, direction, point, shift, link_i, dof_i, s_cdof, s_ref, g_J, g_cdof, g_lpos):
    """Adjoint of add_point_jacobian for row r's adjoint g_J[b, r]: into g_cdof of the dofs moving link l and, for
    their links' origins, into those links' g_lpos; returns the adjoints of direction and point."""
    g_dir = ti.Vector([0.0, 0.0, 0.0])
    g_point = ti.Vector([0.0, 0.0, 0.0])
    d = link_i[l, LI_LAST_DOF]
    while d >= 0:
        gj = g_J[b, r, d + shift]
        ld = dof_i[d, DI_LINK]
        rel = point - s_ref[b, ld]
        arm = rel.cross(direction)
        cd = s_cdof[b, d]
        ang = ti.Vector([cd[0], cd[1], cd[2]])
        lin = ti.Vector([cd[3], cd[4], cd[5]])
        g_cdof[b, d] = g_cdof[b, d] + gj * ti.Vector([arm[0], arm[1], arm[2], direction[0], direction[1], direction[2]])
        g_dir += gj * (lin + ang.cross(rel))
        g_rel = gj * direction.cross(ang)
        g_point += g_rel
        add_ref_adjoint(b, ld, -g_rel, g_lpos)
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
def count_rows(b, f, qpos, params_i, link_i, dof_f, dof_i, ten_f, ten_i, eq_type, eq_obj, eq_data, eq_active,
               s_con_i, max_rows):
    """The rows solve_constraints made: 3 per contact, then the violated limits (its tests, replayed), then the
    equality slots' (equality_slot_rows); returns (all rows, rows before the equalities')."""
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
    first = n_rows
    for e in range(eq_type.shape[1]):
        n_rows += equality_slot_rows(b, e, max_rows - n_rows, params_i, link_i, dof_i, eq_type, eq_obj, eq_data,
                                     eq_active)
    return n_rows, first


@ti.func
def correction_slope(x, beta, h, max_correction):
    """d/dx of min(beta max(x, 0) / h, max_correction), on the side the forward took."""
    slope = 0.0
    if x > 0.0 and beta * x / h < max_correction:
        slope = beta / h
    return slope


@func
def solve_constraints_reverse(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i,
                              contact_impulse, eq_type, eq_obj, eq_data, eq_active, s_cdof, s_ref, s_R, s_mass,
                              s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i, s_hist, g_dof, g_mass, g_cdof,
                              g_con, g_imp_in, g_imp_out, g_qpos, g_dof_f, g_row, g_J, g_W, g_v, g_lpos, g_R,
                              G_limit, G_equality):
    """Adjoint of solve_constraints (Euler, plain Gauss-Seidel) from what its forward left: the rows (s_J, s_W,
    s_row_f, s_row_i), the factorised M~ (s_mass), the final velocity and pseudo-velocity (s_dof[b, :, SD_VEL],
    s_dof[b, :, SD_PSEUDO]), the sweeps' impulses (s_hist) and counts (s_con_i[b, CI_META, CM_SWEEPS + 0/1]), the
    contact pool (s_con_f, s_con_i) and qpos[f].

    Reads g_dof[b, :, GD_VEL] (the final velocity's adjoint), g_dof[b, :, GD_PSEUDO] (the pseudo-velocity's) and
    g_imp_out[b, s, k] (contact_impulse[fn, b, s, k]'s). Accumulates into g_dof[b, :, GD_FREE_VEL] (v_free), g_mass
    (the lower entries of M~, symmetric counterpart folded in), g_cdof, g_con[b, s] (the GC_* columns),
    g_imp_in[b, prev, k] (the warm start contact_impulse[f, b, prev, k]), g_qpos[b] and g_dof_f[b, d, DF_RANGE_LO /
    DF_RANGE_HI] (the limits' violations; a fixed tendon's limit row through its length), g_lpos and g_R (the
    equality rows' points and rotations: equality_rows_reverse); the limit and equality rows' impulses
    (limit_impulse, equality_impulse) through the state's gradients G_limit, G_equality: read at frame fn,
    accumulated at frame f (the warm start). The equality slots' parameters (eq_data) are constants.
    Restitution, the regularisation, Baumgarte's factor, the slop and the largest correction are constants. Scratch:
    g_row [B, rows, >= GR_N], g_J and g_W ([B, rows, row width], as s_J / s_W), g_v [B, D, >= GV_N]; the function
    zeroes what it uses."""
    n = dof_i.shape[0]
    max_rows = s_J.shape[1]
    n_contacts = 0
    if params_i[PP_COLLISION] != 0:
        n_contacts = s_con_i[b, CI_META, 0]
    n_rows, first_eq = count_rows(b, f, qpos, params_i, link_i, dof_f, dof_i, ten_f, ten_i, eq_type, eq_obj,
                                  eq_data, eq_active, s_con_i, max_rows)
    for r in range(n_rows):
        for c in ti.static(range(GR_N)):
            g_row[b, r, c] = 0.0
        for c in range(s_row_i[b, r, RI_HI] - s_row_i[b, r, RI_LO] + s_row_i[b, r, RI_HI2] - s_row_i[b, r, RI_LO2]):
            g_J[b, r, c] = 0.0
            g_W[b, r, c] = 0.0
    for r in range(3 * n_contacts):
        g_row[b, r, GR_LAM] = g_imp_out[b, r // 3, r % 3]
    for r in range(3 * n_contacts, n_rows):  # the limit and equality rows: their impulses written at frame fn
        item = s_row_i[b, r, RI_ITEM]
        if r < first_eq:
            g_row[b, r, GR_LAM] = G_limit[fn, b, item]
        else:
            g_row[b, r, GR_LAM] = G_equality[fn, b, item // EQ_ROWS, item % EQ_ROWS]
    for d in range(n):
        g_v[b, d, GV_VEL] = g_dof[b, d, GD_VEL]
        g_v[b, d, GV_PSEUDO] = g_dof[b, d, GD_PSEUDO]
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
        g_dof[b, d, GD_FREE_VEL] = g_dof[b, d, GD_FREE_VEL] + g_v[b, d, GV_VEL]
    for r in range(3 * n_contacts, n_rows):  # the limit and equality rows' warm starts, at frame f
        item = s_row_i[b, r, RI_ITEM]
        if r < first_eq:
            G_limit[f, b, item] = G_limit[f, b, item] + g_row[b, r, GR_LAM]
        else:
            G_equality[f, b, item // EQ_ROWS, item % EQ_ROWS] = (G_equality[f, b, item // EQ_ROWS, item % EQ_ROWS]
                                                                 + g_row[b, r, GR_LAM])
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
                    g_con[b, s, GC_DEPTH] = g_con[b, s, GC_DEPTH] + g_t / h
                elif s_row_f[b, r, RF_TARGET] != 0.0:  # a bounce: target -e J v_free
                    g_approach = -s_con_f[b, s, CF_REST] * g_t
                    add_row_outer(b, r, s_row_i, g_J, g_v, GV_V, g_approach)
                    for seg in ti.static(range(2)):
                        shift = seg_shift(b, r, seg, s_row_i)
                        for d in range(s_row_i[b, r, RI_LO + 2 * seg], s_row_i[b, r, RI_HI + 2 * seg]):
                            g_dof[b, d, GD_FREE_VEL] = g_dof[b, d, GD_FREE_VEL] + g_approach * s_J[b, r, d + shift]
                g_con[b, s, GC_DEPTH] = g_con[b, s, GC_DEPTH] + g_row[b, r, GR_PTARGET] * correction_slope(depth - slop, beta, h,
                                                                                              max_correction)
            else:
                g_con[b, s, GC_MU] = g_con[b, s, GC_MU] + g_row[b, r, GR_MU]
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
            gd_b, gp_b = point_jacobian_reverse(b, r, lb, direction, point, shift_b, link_i, dof_i, s_cdof, s_ref,
                                                g_J, g_cdof, g_lpos)
            gd_a, gp_a = point_jacobian_reverse(b, r, la, -direction, point, shift_a, link_i, dof_i, s_cdof, s_ref,
                                                g_J, g_cdof, g_lpos)
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
            g_con[b, s, GC_POS + c] = g_con[b, s, GC_POS + c] + g_point[c]
            g_con[b, s, GC_NORMAL + c] = g_con[b, s, GC_NORMAL + c] + g_n[c]
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
    equality_rows_reverse(b, f, h, first_eq, n_rows, qpos, params_f, params_i, link_i, dof_i, ten_f, ten_i, eq_type,
                          eq_obj, eq_data, eq_active, s_cdof, s_ref, s_R, s_J, s_row_f, s_row_i, g_row, g_J, g_cdof,
                          g_qpos, g_lpos, g_R)


@func
def angular_jacobian_reverse(b, r, l, direction, shift, link_i, dof_i, g_J, g_cdof):
    """Adjoint of add_angular_jacobian for row r's adjoint g_J[b, r] into g_cdof (the direction is a constant)."""
    d = link_i[l, LI_LAST_DOF]
    while d >= 0:
        gj = g_J[b, r, d + shift]
        g_cdof[b, d] = g_cdof[b, d] + gj * ti.Vector([direction[0], direction[1], direction[2], 0.0, 0.0, 0.0])
        d = dof_i[d, DI_PARENT]


@func
def equality_rows_reverse(b, f, h, first, n_rows, qpos, params_f, params_i, link_i, dof_i, ten_f, ten_i, eq_type,
                          eq_obj, eq_data, eq_active, s_cdof, s_ref, s_R, s_J, s_row_f, s_row_i, g_row, g_J, g_cdof,
                          g_qpos, g_lpos, g_R):
    """Adjoint of equality_rows (rows first..n_rows-1) for the adjoints of their Jacobians (g_J) and of their
    position-pass targets (g_row[:, :, GR_PTARGET], through the violation: -min(beta |v| / h, max_correction)
    sign(v)): into g_cdof (the rows' motion subspaces), g_lpos and g_R (a connect's or weld's points and a weld's
    rotations, at the links' origins and rotations) and g_qpos (a joint or tendon relation's positions). The
    target's slope in v is -correction_slope(|v|) on either side."""
    beta = params_f[PF_BAUMGARTE]
    max_correction = params_f[PF_MAX_CORRECTION]
    r = first
    for e in range(eq_type.shape[1]):
        kind = eq_type[b, e]
        o1 = eq_obj[b, e, 0]
        o2 = eq_obj[b, e, 1]
        n_eq = equality_slot_rows(b, e, n_rows - r, params_i, link_i, dof_i, eq_type, eq_obj, eq_data, eq_active)
        if n_eq > 0 and (kind == EQ_CONNECT or kind == EQ_WELD):
            p1, p2, rel, R2, E = weld_geometry(b, e, o1, o2, eq_data, s_ref, s_R)
            rot = 0.5 * ti.Vector([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]])
            g_p1 = ti.Vector([0.0, 0.0, 0.0])
            g_p2 = ti.Vector([0.0, 0.0, 0.0])
            g_rot = ti.Vector([0.0, 0.0, 0.0])
            for k in range(n_eq):
                row = r + k
                shift1 = seg_shift(b, row, 0, s_row_i)
                shift2 = shift1
                if s_row_i[b, row, RI_HI2] > s_row_i[b, row, RI_LO2]:
                    shift2 = seg_shift(b, row, 1, s_row_i)
                axis = unit_axis(k)
                if k < 3:
                    value = axis.dot(p1 - p2)
                    g_value = -correction_slope(ti.abs(value), beta, h, max_correction) * g_row[b, row, GR_PTARGET]
                    _, gp = point_jacobian_reverse(b, row, o1, axis, p1, shift1, link_i, dof_i, s_cdof, s_ref, g_J,
                                                   g_cdof, g_lpos)
                    g_p1 += gp + g_value * axis
                    g_p2 -= g_value * axis
                    if o2 >= 0:
                        _, gq = point_jacobian_reverse(b, row, o2, -axis, p2, shift2, link_i, dof_i, s_cdof, s_ref,
                                                       g_J, g_cdof, g_lpos)
                        g_p2 += gq
                else:
                    value = axis.dot(rot)
                    g_value = -correction_slope(ti.abs(value), beta, h, max_correction) * g_row[b, row, GR_PTARGET]
                    g_rot += g_value * axis
                    angular_jacobian_reverse(b, row, o1, axis, shift1, link_i, dof_i, g_J, g_cdof)
                    if o2 >= 0:
                        angular_jacobian_reverse(b, row, o2, -axis, shift2, link_i, dof_i, g_J, g_cdof)
            # p1 = s_ref[o1] + R1 a1, p2 = s_ref[o2] + R2 a2; rot = vee(E - E^T) / 2 with E = R1 Rrel R2^T
            add_ref_adjoint(b, o1, g_p1, g_lpos)
            g_R[b, o1] = g_R[b, o1] + g_p1.outer_product(eq_vec(eq_data, b, e, ED_ANCHOR1))
            g_E = 0.5 * ti.Matrix([[0.0, -g_rot[2], g_rot[1]], [g_rot[2], 0.0, -g_rot[0]],
                                   [-g_rot[1], g_rot[0], 0.0]])
            g_R[b, o1] = g_R[b, o1] + g_E @ R2 @ rel.transpose()
            if o2 >= 0:
                add_ref_adjoint(b, o2, g_p2, g_lpos)
                g_R[b, o2] = (g_R[b, o2] + g_p2.outer_product(eq_vec(eq_data, b, e, ED_ANCHOR2))
                              + g_E.transpose() @ s_R[b, o1] @ rel)
        elif n_eq > 0:
            scalar_equality_row_reverse(b, r, o1, o2, kind, qpos, f, h, eq_data, e, params_f, ten_f, ten_i, dof_i,
                                        s_row_i, g_row, g_J, g_qpos)
        r += n_eq


@func
def scalar_equality_row_reverse(b, r, o1, o2, kind, qpos, f, h, eq_data, e, params_f, ten_f, ten_i, dof_i, s_row_i,
                                g_row, g_J, g_qpos):
    """Adjoint of scalar_equality_row (row r) for its Jacobian's adjoint g_J[b, r] (through o2's entries, -slope
    coef) and its position-pass target's (through its value) into g_qpos."""
    value, slope, curvature = scalar_equality_value(b, o1, o2, kind, qpos, f, eq_data, e, dof_i, ten_f, ten_i)
    g_value = (-correction_slope(ti.abs(value), params_f[PF_BAUMGARTE], h, params_f[PF_MAX_CORRECTION])
               * g_row[b, r, GR_PTARGET])
    g_y = g_value
    g_dx = -g_value * slope
    if o2 >= 0:  # o2's Jacobian entries: -slope coef
        lo = s_row_i[b, r, RI_LO]
        hi = s_row_i[b, r, RI_HI]
        n_entries = 1
        if kind == EQ_TENDON:
            n_entries = ten_i[o2, TI_COUNT]
        g_slope = 0.0
        for k in range(n_entries):
            d = o2
            coef = 1.0
            if kind == EQ_TENDON:
                d = ten_i[ten_i[o2, TI_START] + k, 0]
                coef = ten_f[ten_i[o2, TI_START] + k, 0]
            shift = seg_shift(b, r, 0, s_row_i)
            if d < lo or d >= hi:
                shift = seg_shift(b, r, 1, s_row_i)
            g_slope -= g_J[b, r, d + shift] * coef
        g_dx += g_slope * curvature
    if kind == EQ_JOINT:
        g_qpos[b, dof_i[o1, DI_Q]] = g_qpos[b, dof_i[o1, DI_Q]] + g_y
        if o2 >= 0:
            g_qpos[b, dof_i[o2, DI_Q]] = g_qpos[b, dof_i[o2, DI_Q]] + g_dx
    else:
        for k in range(ten_i[o1, TI_START], ten_i[o1, TI_START] + ten_i[o1, TI_COUNT]):
            qi = dof_i[ten_i[k, 0], DI_Q]
            g_qpos[b, qi] = g_qpos[b, qi] + ten_f[k, 0] * g_y
        if o2 >= 0:
            for k in range(ten_i[o2, TI_START], ten_i[o2, TI_START] + ten_i[o2, TI_COUNT]):
                qi = dof_i[ten_i[k, 0], DI_Q]
                g_qpos[b, qi] = g_qpos[b, qi] + ten_f[k, 0] * g_dx
