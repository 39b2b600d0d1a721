"""Taichi functions shared by solver kernels: quaternions are (w, x, y, z)."""

import taichi as ti


@ti.func
def quat_mul(a, b):
    return ti.Vector([
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    ])


@ti.func
def quat_normalize(q):
    return q / ti.max(q.norm(), 1e-30)


@ti.func
def quat_to_mat(q):
    """The rotation matrix of a unit quaternion."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return ti.Matrix([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


@ti.func
def axis_angle_quat(axis, angle):
    s = ti.sin(0.5 * angle)
    return ti.Vector([ti.cos(0.5 * angle), axis[0] * s, axis[1] * s, axis[2] * s])
