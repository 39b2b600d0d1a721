"""The validation pass over a model description: what every robot the rigid solver loads (URDF, MJCF, a mesh, a
primitive) must satisfy before anything is built from it.

The loaders read numbers (each must be a finite number, `number`) and build a RobotDesc; `check_geom` runs on each
geom before its volume is used, `check_robot` on the whole description. Each refusal is a ModelError naming the
element (link, body, joint, geom, actuator, tendon by name) and the value; `genesis_rigid.robots.describe` adds
the file. What MuJoCo's compiler refuses but Genesis World loads (a moving link without mass, a tiny inertia) loads
with a warning naming it. docs/bad-input.md lists the rules and the limits.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from genesis_core.rotations import quat_to_mat

from .model import BOX, CAPSULE, CYLINDER, ELLIPSOID, FREE, HFIELD, MESH, PLANE, SPHERE, ModelError

# limits of one model file (documented in docs/bad-input.md)
MAX_BODIES = 10_000  # links or bodies
MAX_DEPTH = 1_000  # links from the root to the deepest one
MAX_GEOMS = 100_000  # collision and visual shapes
MAX_LENGTH = 1e5  # m: every position, size, centre of mass and mesh vertex, in magnitude
MIN_SIZE = 1e-6  # m: a primitive's radius, half-height or half-extent (a capsule's half-length may be 0)
MAX_MASS = 1e9  # kg: a body that can move (a fixed one's mass never enters the dynamics)
MAX_INERTIA = MAX_MASS * MAX_LENGTH ** 2  # kg m^2
MAX_COEF = 1e12  # gains, damping, stiffness, armature, densities, forces (each in its own SI unit)
MAX_MESH_SCALE = 1e5
MIN_MASS = 1e-15  # kg: a mass between 0 and this is refused (MuJoCo's mjMINVAL; float32 flushes 1e-40 to 0)
TINY_INERTIA = 1e-15  # kg m^2: a jointed body's smallest principal moment below this loads with a warning
INERTIA_RTOL = 1e-6  # the principal moments may break A + B >= C by this fraction of C (rounding of the file)
# the joint-space inertia where the file places the bodies (check_conditioning): a dof's pivot over the largest
# diagonal entry among it and the dofs below it. Under PIVOT_SINGULAR even float64 cannot tell it from 0 (a dof
# without inertia of its own once those below it are free: loads with a warning); single precision (resolution
# 1.2e-7) is refused under PIVOT_FLOAT32. The robots Genesis World ships measure 2e-3 and more.
PIVOT_SINGULAR = 1e-12
PIVOT_FLOAT32 = 1e-6

GEOM_WORDS = {PLANE: "plane", SPHERE: "sphere", CAPSULE: "capsule", CYLINDER: "cylinder", BOX: "box", MESH: "mesh",
              ELLIPSOID: "ellipsoid", HFIELD: "height field"}
# what a GeomDesc's size holds, per type (half of what a URDF box or a Genesis Box morph gives)
SIZE_WORDS = {SPHERE: "size (radius, -, -)", CAPSULE: "size (radius, half-length, -)", BOX: "size (half-extents)",
              CYLINDER: "size (radius, half-height, -)", ELLIPSOID: "size (semi-axes)",
              HFIELD: "size (cell size along x, along y, -)"}


def numbers(text, what, attr):
    """The floats of an attribute's text of numbers separated by white space, each a finite number (a ModelError
    names the element, the attribute, its text and the number that is not)."""
    try:
        values = [float(x) for x in text.split()]
        if all(map(math.isfinite, values)):
            return values
    except ValueError:
        pass
    return [number(x, what, attr, text) for x in text.split()]


def number(text, what, attr, whole=None):
    """The float of an attribute's text (or of one of the numbers of its text `whole`); a ModelError names the
    element (`what`), the attribute and the text when it is not a finite number."""
    try:
        x = float(text)
    except (TypeError, ValueError):
        x = None
    if x is None or not math.isfinite(x):
        shown = f"{attr}={text!r}" if whole is None else f"{attr}={whole!r}: {text!r}"
        raise ModelError(f"{what}: {shown} is " + ("not a number" if x is None else
                                                 "not accepted: expected a finite number"))
    return x


def _refuse(what, name, value, expected):
    if isinstance(value, np.ndarray):
        value = value.astype(np.float64).tolist()
    raise ModelError(f"{what}: {name} = {value} is not accepted: expected {expected}")


def _values(value):
    """The numbers of a number or an array, as Python floats (the checks run per number: a model's arrays are a
    few numbers each, where NumPy's per-call cost would dominate)."""
    if isinstance(value, float):
        return (value,)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value.tolist()
    if isinstance(value, int):
        return (float(value),)
    return np.asarray(value, dtype=np.float64).ravel().tolist()


def _finite(what, name, value, bound=math.inf):
    """value (a number or an array): finite, and within +-bound; its numbers (Python floats)."""
    values = _values(value)
    for x in values:
        if not math.isfinite(x):
            _refuse(what, name, value, "finite numbers")
        if abs(x) > bound:
            _refuse(what, name, value, f"a magnitude of at most {bound:g}")
    return values


def _norm(values):
    return math.sqrt(sum(x * x for x in values))


def _range(what, name, value, lo=0.0, hi=MAX_COEF):
    """A finite number in [lo, hi]."""
    (v,) = _finite(what, name, value)
    if not lo <= v <= hi:
        _refuse(what, name, value, f"a number >= {lo:g} and <= {hi:g}")


def check_geom(g, where):
    """A geom's numbers: finite pose, sizes > 0 for its type (within MAX_LENGTH), friction, margin and gap >= 0,
    a non-zero mesh scale, finite vertices of a convex part; `where` names its body."""
    what = f"{where}, geom {g.name!r}" if g.name else f"{where}, a {GEOM_WORDS.get(g.type, 'geom')} geom"
    _finite(what, "pos", g.pos, MAX_LENGTH)
    if _norm(_finite(what, "quat", g.quat)) < 1e-9:
        _refuse(what, "quat", g.quat, "a non-zero quaternion")
    size_word = SIZE_WORDS.get(g.type, "size")
    size = _finite(what, size_word, g.size, MAX_LENGTH)
    need = {SPHERE: 1, CAPSULE: 1, CYLINDER: 2, BOX: 3, ELLIPSOID: 3, HFIELD: 2}.get(g.type, 0)
    if need and min(size[:need]) < MIN_SIZE:
        _refuse(what, size_word, g.size, f"{GEOM_WORDS[g.type]} dimensions of at least {MIN_SIZE:g} m (> 0)")
    if g.type == CAPSULE and size[1] < 0:
        _refuse(what, size_word, g.size, "a capsule's half-length >= 0")
    _range(what, "friction", g.friction)
    _range(what, "margin", g.margin, hi=MAX_LENGTH)
    _range(what, "gap", g.gap, hi=MAX_LENGTH)
    if g.type == HFIELD:
        z = np.asarray(g.heights, dtype=np.float64) if g.heights is not None else np.zeros((0, 0))
        if z.ndim != 2 or min(z.shape) < 2:
            _refuse(what, "heights", getattr(g.heights, "shape", g.heights), "a grid of at least 2 x 2 heights")
        if not (np.isfinite(z).all() and np.abs(z).max() <= MAX_LENGTH):
            _refuse(what, "heights", f"array of {z.shape}", f"finite heights of magnitude at most {MAX_LENGTH:g} m")
    if g.type == MESH:
        scale = _finite(what, "mesh scale", g.mesh_scale, MAX_MESH_SCALE)
        if min(abs(x) for x in scale) < 1e-12:
            _refuse(what, "mesh scale", g.mesh_scale, "non-zero factors")
        if g.vertices is not None:
            v = np.asarray(g.vertices, dtype=np.float64)
            if not (np.isfinite(v).all() and np.abs(v).max(initial=0.0) <= MAX_LENGTH):
                _finite(what, "vertices", v, MAX_LENGTH)
    return what


def _inertia_facts(inertias):
    """(largest magnitude, largest asymmetry, principal moments ascending) of finite inertias [N, 3, 3], in one
    NumPy pass over a model's bodies."""
    scale = np.maximum(np.abs(inertias).max(axis=(1, 2)), 1e-300)
    asymmetry = np.abs(inertias - inertias.transpose(0, 2, 1)).max(axis=(1, 2))
    return scale.tolist(), asymmetry.tolist(), np.linalg.eigvalsh(inertias)


def check_inertia(what, mass, inertia, moving, jointed=False, carries_mass=True, facts=None, fixed_to_parent=False):
    """A body's mass (kg) and inertia about its centre of mass (kg m^2): finite, mass >= 0, the inertia symmetric
    and positive semi-definite with principal moments A + B >= C (MuJoCo's compiler checks); a moving body within
    MAX_MASS and MAX_INERTIA. A body with joints of its own loads with a warning where neither it nor the bodies it
    carries have mass (`carries_mass`), or where it has a principal moment under TINY_INERTIA. A body that cannot
    move (welded to the world) needs only a finite inertia: it never enters the dynamics. A moving body fixed to its
    parent (`fixed_to_parent`: no joint of its own) that breaks A + B >= C loads with a warning: its inertia acts
    only within the rigid composite it belongs to (MuJoCo fuses such bodies before it checks; Genesis World's
    anymal_c has such a camera link). `facts`: the inertia's _inertia_facts, where the caller computed them for
    many bodies at once."""
    _finite(what, "mass", mass)
    if mass < 0 or 0 < mass < MIN_MASS:
        _refuse(what, "mass", mass, f"0 or a mass of at least {MIN_MASS:g} kg")
    inertia = np.asarray(inertia, dtype=np.float64)
    if not moving:  # (welded to the world: its inertia never enters the dynamics)
        _finite(what, "inertia", inertia)
        return
    if facts is None:
        _finite(what, "inertia", inertia)
        facts = [x[0] for x in _inertia_facts(inertia[None])]
    scale, asymmetry, moments = facts
    if asymmetry > 1e-9 * scale:
        _refuse(what, "inertia", inertia, "a symmetric matrix")
    if moments[0] < -1e-9 * scale:
        _refuse(what, "inertia", inertia, f"a positive semi-definite matrix (its principal moments are "
                                          f"{[float(m) for m in moments]})")
    a, b, c = (max(float(m), 0.0) for m in moments)
    if a + b < c * (1 - INERTIA_RTOL):
        triangle = (f"principal moments with A + B >= C, as a rigid body's are (they are "
                    f"{[float(m) for m in moments]})")
        if not fixed_to_parent:
            _refuse(what, "inertia", inertia, triangle)
        warnings.warn(f"{what} (fixed to its parent) has an inertia no rigid body has: expected {triangle}; it acts "
                      "only within the rigid composite the link belongs to", stacklevel=4)
    _bounded(what, mass, inertia, c)
    if not jointed:
        return
    if mass == 0 and not carries_mass:
        warnings.warn(f"{what} has joints but neither it nor the bodies it carries have mass: it does not respond "
                      "to forces", stacklevel=4)
    elif mass > 0 and a < TINY_INERTIA:
        warnings.warn(f"{what} has joints and a principal moment of inertia of {a:.3g} kg m^2 (under "
                      f"{TINY_INERTIA:g})", stacklevel=4)


def _bounded(what, mass, inertia, c):
    if mass > MAX_MASS:
        _refuse(what, "mass", mass, f"at most {MAX_MASS:g} kg for a body that can move")
    if c > MAX_INERTIA:
        _refuse(what, "inertia", inertia,
                f"principal moments of at most {MAX_INERTIA:g} kg m^2 for a body that can move")


def check_robot(robot, body_word="body"):
    """Every number and reference of a RobotDesc (see the module doc); bodies are named `body_word` ("link" for
    URDF files)."""
    bodies = robot.bodies
    if len(bodies) > MAX_BODIES:
        raise ModelError(f"{len(bodies)} {body_word}s: at most {MAX_BODIES} are accepted")
    n_geoms = sum(len(b.geoms) + sum(not any(v is g for g in b.geoms) for v in b.visuals) for b in bodies)
    if n_geoms > MAX_GEOMS:
        raise ModelError(f"{n_geoms} geoms: at most {MAX_GEOMS} are accepted")
    carries = [b.mass > 0 for b in bodies]  # whether a body or one it carries has mass
    for i in range(len(bodies) - 1, 0, -1):
        p = bodies[i].parent
        if 0 <= p < i:
            carries[p] = carries[p] or carries[i]
    inertias = np.array([np.asarray(b.inertia, dtype=np.float64).reshape(3, 3) for b in bodies]).reshape(-1, 3, 3)
    facts = _inertia_facts(inertias) if np.isfinite(inertias).all() else None  # (else each body's, to name it)
    depth, moving = [], []
    for i, b in enumerate(bodies):
        what = f"{body_word} {b.name!r}"
        if not -1 <= b.parent < i:
            raise ModelError(f"{what}: parent index {b.parent} is not an earlier {body_word}")
        depth.append(depth[b.parent] + 1 if b.parent >= 0 else 1)
        if depth[-1] > MAX_DEPTH:
            raise ModelError(f"{what} is {depth[-1]} {body_word}s deep: at most {MAX_DEPTH} are accepted")
        moving.append(bool(b.joints) or (b.parent >= 0 and moving[b.parent]))
        placed = f"{what} (placed by {b.attached_by})" if b.attached_by else what
        _finite(placed, "pos", b.pos, MAX_LENGTH)
        if _norm(_finite(placed, "quat", b.quat)) < 1e-9:
            _refuse(placed, "quat", b.quat, "a non-zero quaternion")
        _finite(what, "centre of mass", b.com, MAX_LENGTH)
        computed = f"{what} (mass and inertia from {b.mass_from})" if b.mass_from else what
        check_inertia(computed, float(b.mass), b.inertia, moving[-1], bool(b.joints), carries[i],
                      None if facts is None else (facts[0][i], facts[1][i], facts[2][i]),
                      fixed_to_parent=not b.joints)
        for g in b.geoms:
            check_geom(g, what)
        for g in b.visuals:
            if not any(g is c for c in b.geoms):
                check_geom(g, what)
        for j in b.joints:
            check_joint(j, what)
    for a in robot.actuators:
        what = f"actuator {a.name!r} on joint {a.joint!r}" if a.name else f"actuator on joint {a.joint!r}"
        _range(what, "kp", a.kp, lo=-MAX_COEF)
        _range(what, "kv", a.kv, lo=-MAX_COEF)
        if a.forcerange is not None:
            _check_interval(what, "forcerange", a.forcerange, MAX_COEF)
    for t in robot.tendons:
        what = f"tendon {t.name!r}"
        for joint, coef in t.joints:
            _range(what, f"coef of joint {joint!r}", coef, lo=-MAX_COEF)
        _range(what, "stiffness", t.stiffness)
        _range(what, "damping", t.damping)
        for name, interval in (("springlength", t.springlength), ("range", t.range)):
            if interval is not None:
                _check_interval(what, name, interval, MAX_LENGTH)
    if robot.fluid is not None:
        _range("<option>", "density", robot.fluid.density)
        _range("<option>", "viscosity", robot.fluid.viscosity)
        _finite("<option>", "wind", robot.fluid.wind, MAX_LENGTH)
    return robot


def check_joint(j, where):
    what = f"{where}, joint {j.name!r}"
    _finite(what, "pos", j.pos, MAX_LENGTH)
    if j.type != FREE and _norm(_finite(what, "axis", j.axis)) < 1e-12:
        _refuse(what, "axis", j.axis, "a non-zero axis")
    for name in ("damping", "armature", "stiffness"):
        _range(what, name, getattr(j, name))
    _finite(what, "springref", j.springref, MAX_LENGTH)
    _finite(what, "ref", j.ref, MAX_LENGTH)
    if j.range is not None:
        _check_interval(what, "range", j.range, MAX_LENGTH)


def _check_interval(what, name, interval, bound):
    lo, hi = _finite(what, name, [float(x) for x in interval], bound)
    if lo > hi:
        _refuse(what, name, np.array([lo, hi]), "lower <= upper")


def _cross_mats(c):
    """[N, 3, 3]: the cross-product matrices of the vectors c [N, 3]."""
    out = np.zeros(c.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2], out[..., 1, 2] = -c[..., 2], c[..., 1], -c[..., 0]
    out[..., 1, 0], out[..., 2, 0], out[..., 2, 1] = c[..., 2], -c[..., 1], c[..., 0]
    return out


def _rest_frames(bodies):
    """World positions (relative to the first body's) and rotations of the bodies where the file places them."""
    n = len(bodies)
    pos, rot = np.zeros((n, 3)), np.zeros((n, 3, 3))
    origin = np.asarray(bodies[0].pos, dtype=np.float64) if n else np.zeros(3)
    for i, b in enumerate(bodies):
        r = quat_to_mat(np.asarray(b.quat, dtype=np.float64))
        if b.parent >= 0:
            pos[i] = pos[b.parent] + rot[b.parent] @ np.asarray(b.pos, dtype=np.float64)
            rot[i] = rot[b.parent] @ r
        else:
            pos[i], rot[i] = np.asarray(b.pos, dtype=np.float64) - origin, r
    return pos, rot


def rest_mass_matrix(robot):
    """(M, parent, owner): the joint-space mass matrix (float64, armature on the diagonal) of a checked RobotDesc
    where the file places its bodies (every joint at its reference), by CRBA about the first body's origin; each
    dof's parent dof (the previous one of its body, or its nearest ancestor body's last; -1: none), and its
    (body index, joint), in solver order."""
    from .model import HINGE, JOINT_NV, SLIDE

    bodies = robot.bodies
    n = len(bodies)
    pos, rot = _rest_frames(bodies)
    axes, points, turns, owner, armature, chain = [], [], [], [], [], []
    for i, b in enumerate(bodies):
        own = []
        for j in b.joints:
            axis = np.asarray(j.axis, dtype=np.float64)
            axis = rot[i] @ (axis / max(float(np.linalg.norm(axis)), 1e-300))
            anchor = pos[i] if j.type == FREE else pos[i] + rot[i] @ np.asarray(j.pos, dtype=np.float64)
            for k in range(JOINT_NV[j.type]):
                if j.type == SLIDE or (j.type == FREE and k < 3):
                    axes.append(axis if j.type == SLIDE else np.eye(3)[k])
                    turns.append(False)
                else:
                    axes.append(axis if j.type == HINGE else rot[i][:, k % 3])
                    turns.append(True)
                points.append(anchor)
                own.append(len(owner))
                owner.append((i, j))
                armature.append(float(j.armature))
        chain.append((chain[b.parent] if b.parent >= 0 else []) + own)
    D = len(owner)
    axes, points, turns = np.array(axes).reshape(D, 3), np.array(points).reshape(D, 3), np.array(turns, dtype=bool)
    S = np.zeros((D, 6))  # motion subspaces about the origin: (axis, anchor x axis) or (0, axis)
    S[turns, :3] = axes[turns]
    S[turns, 3:] = np.cross(points[turns], axes[turns])
    S[~turns, 3:] = axes[~turns]
    mass = np.array([float(b.mass) for b in bodies])
    com = pos + np.einsum("nij,nj->ni", rot, np.array([np.asarray(b.com, dtype=np.float64) for b in bodies]))
    inertia = np.array([np.asarray(b.inertia, dtype=np.float64).reshape(3, 3) for b in bodies])
    cx = _cross_mats(com) * mass[:, None, None]
    crb = np.zeros((n, 6, 6))  # spatial inertias about the origin, then their subtree sums
    crb[:, :3, :3] = rot @ inertia @ rot.transpose(0, 2, 1) - cx @ _cross_mats(com)
    crb[:, :3, 3:], crb[:, 3:, :3] = cx, -cx
    crb[:, 3:, 3:] = mass[:, None, None] * np.eye(3)
    for i in range(n - 1, 0, -1):
        if bodies[i].parent >= 0:
            crb[bodies[i].parent] += crb[i]
    M = np.diag(np.array(armature, dtype=np.float64).reshape(D))
    parent = np.full(D, -1)
    for d in range(D):
        i = owner[d][0]
        anc = chain[i][:chain[i].index(d) + 1]
        col = S[anc] @ (crb[i] @ S[d])
        M[anc, d] = col
        M[d, anc] = col
        if len(anc) > 1:
            parent[d] = anc[-2]
    return M, parent, owner


def pivot_ratios(M, parent):
    """Each dof's pivot of M = L^T D L eliminated from the last dof up (the solver's order, factor_ldl) over the
    largest diagonal entry among it and the dofs below it (parent: each dof's parent dof): the pivot is what is
    left of terms of up to that size, so single precision keeps it only where this ratio is well above its
    resolution. 0 where a pivot is not positive in float64; 1 for a dof without inertia below it."""
    D = M.shape[0]
    diag = np.diag(M).copy()
    scale = diag.copy()
    for j in range(D - 1, -1, -1):  # (a dof's descendants come after it)
        if parent[j] >= 0:
            scale[parent[j]] = max(scale[parent[j]], scale[j])
    try:
        piv = np.diag(np.linalg.cholesky(M[::-1, ::-1]))[::-1] ** 2
    except np.linalg.LinAlgError:
        A = M.copy()
        piv = np.zeros(D)
        for k in range(D - 1, -1, -1):
            piv[k] = A[k, k]
            if piv[k] > 0:
                A[:k, :k] -= np.outer(A[:k, k], A[k, :k]) / piv[k]
    return np.where(scale > 0, np.maximum(piv, 0.0) / np.where(scale > 0, scale, 1.0), 1.0)


def check_conditioning(robot, float64, body_word="body"):
    """The joint-space mass matrix of a checked RobotDesc where the file places its bodies, against the precision
    the kernels run in: in single precision a dof whose pivot ratio (pivot_ratios) is under PIVOT_FLOAT32 is
    refused, naming its joint and body and the body that dominates the inertia around it (_dominant; the solver's
    factorisation would lose the pivot to rounding: a wrong acceleration, then NaN); in either precision one under
    PIVOT_SINGULAR loads with a warning (a dof with no inertia of its own: it moves as the factorisation's clamp
    lets it)."""
    if not any(b.joints for b in robot.bodies):
        return robot
    M, parent, owner = rest_mass_matrix(robot)
    ratios = pivot_ratios(M, parent)
    singular = ratios < PIVOT_SINGULAR
    lost = (ratios < PIVOT_FLOAT32) & ~singular & (not float64)
    for d, flagged in ((int(np.argmax(singular)), singular.any()), (int(np.argmin(np.where(lost, ratios, 1.0))),
                                                                    lost.any())):
        if not flagged:
            continue
        r = float(ratios[d])
        body, joint = owner[d]
        what = f"joint {joint.name!r} of {body_word} {robot.bodies[body].name!r}"
        if singular[d]:
            warnings.warn(f"{what}: its pivot in the joint-space mass matrix is {r:.1e} of the inertia around it: it "
                          "has no inertia of its own once the joints below it are free (a massless link carrying "
                          "joints that repeat its motion), or too little for the factorisation to keep; "
                          f"{_dominant(robot, body, body_word)}; give it mass or armature, or fix it", stacklevel=3)
        else:
            raise ModelError(
                f"{what}: in single precision its inertia cannot be resolved: its pivot in the joint-space mass matrix "
                f"is {r:.1e} of the inertia around it (single precision keeps at least {PIVOT_FLOAT32:g}): "
                f"{_dominant(robot, body, body_word)}; load it under gs.init(precision='64')")
    return robot


def _dominant(robot, body, body_word):
    """What dominates the inertia around `body` (where the file places the bodies): the body at or below it with
    the largest moment about its origin, m d^2 + its own largest principal moment, and why it is large (its mass
    far away and the largest offset that puts it there, or its own inertia), with where a loader computed its mass
    from."""
    bodies = robot.bodies
    pos, rot = _rest_frames(bodies)
    below = [False] * len(bodies)
    best, score, dist, own = body, -1.0, 0.0, 0.0
    for i, b in enumerate(bodies):
        below[i] = i == body or (b.parent >= 0 and below[b.parent])
        if below[i] and b.mass > 0:
            d = float(np.linalg.norm(pos[i] + rot[i] @ np.asarray(b.com, dtype=np.float64) - pos[body]))
            moment = float(np.linalg.eigvalsh(np.asarray(b.inertia, dtype=np.float64).reshape(3, 3))[-1])
            if float(b.mass) * d * d + moment > score:
                best, score, dist, own = i, float(b.mass) * d * d + moment, d, moment
    fb = bodies[best]
    computed = f" (mass and inertia from {fb.mass_from})" if fb.mass_from else ""
    if own >= float(fb.mass) * dist * dist:
        return f"{body_word} {fb.name!r} has a moment of inertia of {own:.3g} kg m^2{computed}"
    cause = (float(np.linalg.norm(fb.com)), "its centre of mass is {:.3g} m from its origin")
    i = best
    while i != body and i >= 0:
        b = bodies[i]
        placed = f" (placed by {b.attached_by})" if b.attached_by else ""
        offset = float(np.linalg.norm(b.pos))
        if offset > cause[0]:
            cause = (offset, f"{body_word} {b.name!r}{placed} is placed {{:.3g}} m from its parent")
        i = b.parent
    return (f"{body_word} {fb.name!r} carries {float(fb.mass):.3g} kg{computed} {dist:.3g} m from it ("
            + cause[1].format(cause[0]) + ")")
