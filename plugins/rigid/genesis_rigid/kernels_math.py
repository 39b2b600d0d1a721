"""Small Taichi functions shared by the kernels: quaternions (w, x, y, z), rotations and spatial algebra.

Spatial vectors are 6-vectors (angular, linear) expressed in world axes at a reference point O (a link's origin,
kernels_kinematics): a motion (omega, v_O) where v_O is the velocity of the body point at O; a force (torque about
O, force). motion_shift, force_shift and inertia_shift move them to another point.
"""

import taichi as ti

from genesis_core.ti_math import axis_angle_quat, quat_mul, quat_normalize, quat_to_mat  # noqa: F401

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
V6 = ti.types.vector(6, float)
M3 = ti.types.matrix(3, 3, float)

def _is_array(value) -> bool:
    """Whether a Taichi function's argument is an array (a kernel's ndarray, a field), which it must take by
    reference."""
    from taichi.lang.any_array import AnyArray
    from taichi.lang.field import Field

    return isinstance(value, (AnyArray, Field))


def func(fn):
    """ti.func whose parameters that receive an array are passed by reference (ti.template()), the others by value
    (unless annotated: func_ref). Which receive one is read from the first call, inside the first kernel that
    compiles it, so a function takes a new array (a new state field, a scratch array) without a list of names to
    extend."""
    import functools
    import inspect

    signature = inspect.signature(fn)
    compiled = []

    @functools.wraps(fn)
    def decorated(*args, **kwargs):
        if not compiled:
            for name, value in signature.bind(*args, **kwargs).arguments.items():
                if name not in fn.__annotations__ and _is_array(value):
                    fn.__annotations__[name] = ti.template()
            compiled.append(ti.func(fn))
            decorated.func = compiled[0].func
        return compiled[0](*args, **kwargs)

    decorated._is_taichi_function = True
    decorated._is_real_function = False
    return decorated


def func_ref(*names):
    """`func` that also passes the named parameters by reference: vectors and matrices the function only reads.
    A by-value argument is a copy per call site, which Taichi scalarises (compile time grows with it)."""

    def wrap(fn):
        for name in names:
            fn.__annotations__[name] = ti.template()
        return func(fn)

    return wrap


@func
def v3(a, i, c):
    return ti.Vector([a[i, c], a[i, c + 1], a[i, c + 2]])


@func
def v3e(a, b, i, c):
    """a[b, i, c:c + 3] of a per-environment array."""
    return ti.Vector([a[b, i, c], a[b, i, c + 1], a[b, i, c + 2]])


@func
def v4e(a, b, i, c):
    return ti.Vector([a[b, i, c], a[b, i, c + 1], a[b, i, c + 2], a[b, i, c + 3]])


@func
def v4(a, i, c):
    return ti.Vector([a[i, c], a[i, c + 1], a[i, c + 2], a[i, c + 3]])


@ti.func
def quat_integrate(q, omega_local, h):
    """q * exp(omega h / 2): rotate by the body-frame angular velocity omega for time h (MuJoCo's convention)."""
    angle = omega_local.norm() * h
    out = q
    if angle > 1e-30:
        axis = omega_local / omega_local.norm()
        out = quat_normalize(quat_mul(q, axis_angle_quat(axis, angle)))
    return out


@ti.func
def motion_cross(a, b):
    """a x_m b for spatial motions a = (w, v), b = (bw, bv): (w x bw, w x bv + v x bw)."""
    w = ti.Vector([a[0], a[1], a[2]])
    v = ti.Vector([a[3], a[4], a[5]])
    bw = ti.Vector([b[0], b[1], b[2]])
    bv = ti.Vector([b[3], b[4], b[5]])
    r1 = w.cross(bw)
    r2 = w.cross(bv) + v.cross(bw)
    return ti.Vector([r1[0], r1[1], r1[2], r2[0], r2[1], r2[2]])


@ti.func
def force_cross(a, f):
    """a x_f f for a spatial motion a = (w, v) and force f = (n, fl): (w x n + v x fl, w x fl)."""
    w = ti.Vector([a[0], a[1], a[2]])
    v = ti.Vector([a[3], a[4], a[5]])
    n = ti.Vector([f[0], f[1], f[2]])
    fl = ti.Vector([f[3], f[4], f[5]])
    r1 = w.cross(n) + v.cross(fl)
    r2 = w.cross(fl)
    return ti.Vector([r1[0], r1[1], r1[2], r2[0], r2[1], r2[2]])


@ti.func
def spatial(ang, lin):
    return ti.Vector([ang[0], ang[1], ang[2], lin[0], lin[1], lin[2]])


@ti.func
def inertia_apply(m, mc, inertia_o, a):
    """Spatial inertia (mass m, first moment mc = m c, rotational inertia about the reference point) times motion a."""
    w = ti.Vector([a[0], a[1], a[2]])
    v = ti.Vector([a[3], a[4], a[5]])
    return spatial(inertia_o @ w + mc.cross(v), m * v - mc.cross(w))


@ti.func
def motion_shift(a, d):
    """The spatial motion a = (w, v) about a point P, about P + d: (w, v + w x d)."""
    w = ti.Vector([a[0], a[1], a[2]])
    v = ti.Vector([a[3], a[4], a[5]])
    return spatial(w, v + w.cross(d))


@ti.func
def force_shift(f, d):
    """The spatial force f = (n, fl) about a point P, about P + d: (n - d x fl, fl)."""
    n = ti.Vector([f[0], f[1], f[2]])
    fl = ti.Vector([f[3], f[4], f[5]])
    return spatial(n - d.cross(fl), fl)


@ti.func
def inertia_shift(m, mc, inertia_o, d):
    """A spatial inertia (mass m, first moment mc = m (c - P), rotational inertia about P) about P + d: (m,
    mc - m d, inertia_o - 2 (mc . d) E + mc d^T + d mc^T + m (|d|^2 E - d d^T)), E the identity."""
    eye = ti.Matrix.identity(float, 3)
    io = (inertia_o - 2.0 * mc.dot(d) * eye + mc.outer_product(d) + d.outer_product(mc)
          + m * (d.dot(d) * eye - d.outer_product(d)))
    return m, mc - m * d, io


@ti.func
def tangent_basis(n):
    """Two unit tangents completing the unit normal n to a right-handed frame (deterministic)."""
    t1 = ti.Vector([0.0, 0.0, 0.0])
    if ti.abs(n[0]) < 0.57:
        t1 = ti.Vector([0.0, n[2], -n[1]])
    else:
        t1 = ti.Vector([n[1], -n[0], 0.0])
    t1 = t1 / t1.norm()
    return t1, n.cross(t1)


# -- adjoints of the functions above (the differentiable substep) ----------------------------------------------------

@ti.func
def quat_conj(q):
    return ti.Vector([q[0], -q[1], -q[2], -q[3]])


@ti.func
def quat_mul_reverse(a, b, g):
    """Adjoints (of a, of b) of c = quat_mul(a, b) for the adjoint g of c."""
    return quat_mul(g, quat_conj(b)), quat_mul(quat_conj(a), g)


@ti.func
def quat_normalize_reverse(q, g):
    """Adjoint of q for n = quat_normalize(q) and the adjoint g of n."""
    norm = q.norm()
    scale = 1.0 / ti.max(norm, 1e-30)
    out = g * scale
    if norm > 1e-30:
        u = q * scale
        out -= u * (u.dot(g) * scale)
    return out


@ti.func
def quat_to_mat_reverse(q, g):
    """Adjoint of q (any quaternion: the polynomial quat_to_mat) for the adjoint g (3x3) of R = quat_to_mat(q)."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    gw = 2.0 * (-z * g[0, 1] + y * g[0, 2] + z * g[1, 0] - x * g[1, 2] - y * g[2, 0] + x * g[2, 1])
    gx = 2.0 * (y * g[0, 1] + z * g[0, 2] + y * g[1, 0] - 2.0 * x * g[1, 1] - w * g[1, 2] + z * g[2, 0]
                + w * g[2, 1] - 2.0 * x * g[2, 2])
    gy = 2.0 * (-2.0 * y * g[0, 0] + x * g[0, 1] + w * g[0, 2] + x * g[1, 0] + z * g[1, 2] - w * g[2, 0]
                + z * g[2, 1] - 2.0 * y * g[2, 2])
    gz = 2.0 * (-2.0 * z * g[0, 0] - w * g[0, 1] + x * g[0, 2] + w * g[1, 0] - 2.0 * z * g[1, 1] + y * g[1, 2]
                + x * g[2, 0] + y * g[2, 1])
    return ti.Vector([gw, gx, gy, gz])


@ti.func
def axis_angle_quat_reverse(axis, angle, g):
    """Adjoint of the angle for q = axis_angle_quat(axis, angle) (axis held fixed) and the adjoint g of q."""
    s = ti.sin(0.5 * angle)
    c = ti.cos(0.5 * angle)
    return -0.5 * s * g[0] + 0.5 * c * (axis[0] * g[1] + axis[1] * g[2] + axis[2] * g[3])


@ti.func
def motion_shift_reverse(a, d, g):
    """Adjoints (of a, of d) of motion_shift(a, d) for its adjoint g."""
    w = ti.Vector([a[0], a[1], a[2]])
    gv = ti.Vector([g[3], g[4], g[5]])
    return spatial(ti.Vector([g[0], g[1], g[2]]) + d.cross(gv), gv), gv.cross(w)


@ti.func
def force_shift_reverse(f, d, g):
    """Adjoints (of f, of d) of force_shift(f, d) for its adjoint g."""
    fl = ti.Vector([f[3], f[4], f[5]])
    gn = ti.Vector([g[0], g[1], g[2]])
    return spatial(gn, ti.Vector([g[3], g[4], g[5]]) + d.cross(gn)), gn.cross(fl)


@ti.func
def inertia_shift_reverse(m, mc, d, m_bar, mc_bar, io_bar):
    """Adjoints (of m, of mc, of inertia_o, of d) of inertia_shift(m, mc, inertia_o, d) for the adjoints (m_bar,
    mc_bar, io_bar) of its three outputs."""
    tr = io_bar.trace()
    sym = io_bar + io_bar.transpose()
    mc_new = mc - m * d
    g_m = m_bar - mc_bar.dot(d) + tr * d.dot(d) - d.dot(io_bar @ d)
    g_mc = mc_bar - 2.0 * tr * d + sym @ d
    g_d = -m * mc_bar + sym @ mc_new - 2.0 * tr * mc_new
    return g_m, g_mc, io_bar, g_d


@ti.func
def motion_cross_reverse(a, b, g):
    """Adjoints (of a, of b) of r = motion_cross(a, b) for the adjoint g of r."""
    w = ti.Vector([a[0], a[1], a[2]])
    v = ti.Vector([a[3], a[4], a[5]])
    bw = ti.Vector([b[0], b[1], b[2]])
    bv = ti.Vector([b[3], b[4], b[5]])
    g1 = ti.Vector([g[0], g[1], g[2]])
    g2 = ti.Vector([g[3], g[4], g[5]])
    return spatial(bw.cross(g1) + bv.cross(g2), bw.cross(g2)), spatial(g1.cross(w) + g2.cross(v), g2.cross(w))
