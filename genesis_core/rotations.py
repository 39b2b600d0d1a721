"""Rotations, quaternions (w, x, y, z), on NumPy arrays and, where named, on torch tensors batched over leading
dimensions. Kernels use the Taichi functions of genesis_core.ti_math."""

import math

import numpy as np
import torch


def quat_mul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


def quat_normalize(q):
    q = np.asarray(q, dtype=np.float64)
    n = np.linalg.norm(q)
    if n < 1e-12:
        raise ValueError(f"zero quaternion {q}")
    return q / n


def quat_to_mat(q):
    """The rotation matrix of q: a NumPy (3, 3) of the normalised quaternion, or for a torch tensor [..., 4] of
    unit quaternions a tensor [..., 3, 3] (differentiable)."""
    if torch.is_tensor(q):
        return _quat_to_mat_torch(q)
    w, x, y, z = quat_normalize(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def mat_to_quat(m):
    m = np.asarray(m, dtype=np.float64)
    tr = np.trace(m)
    if tr > 0:
        s = np.sqrt(tr + 1.0) * 2
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    return q if q[0] >= 0 else -q


def axis_angle(axis, angle):
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def euler_to_quat(angles, seq="xyz"):
    """MJCF euler: lower-case axes rotate with the frame (intrinsic), upper-case stay fixed (extrinsic)."""
    if all(a == 0 and math.copysign(1.0, a) > 0 for a in angles):  # (most files' origins: the same bits, sooner)
        return np.array([1.0, 0.0, 0.0, 0.0])
    q = np.array([1.0, 0, 0, 0])
    for angle, ax in zip(angles, seq):
        r = axis_angle({"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}[ax.lower()], angle)
        q = quat_mul(q, r) if ax.islower() else quat_mul(r, q)
    return q


def rpy_to_quat(rpy):
    """URDF roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll) about fixed axes."""
    return euler_to_quat(rpy, "XYZ")


def rotate(q, v):
    return quat_to_mat(q) @ np.asarray(v, dtype=np.float64)


def frame_from_z(z):
    """A rotation whose z axis is the unit vector z (the shortest rotation from +Z)."""
    z = np.asarray(z, dtype=np.float64)
    z = z / np.linalg.norm(z)
    c = z[2]
    if c < -1 + 1e-12:
        return np.array([0.0, 1.0, 0.0, 0.0])
    axis = np.cross([0, 0, 1.0], z)
    s = np.linalg.norm(axis)
    if s < 1e-12:
        return np.array([1.0, 0, 0, 0])
    return axis_angle(axis / s, np.arctan2(s, c))


def _quat_to_mat_table():
    """T [16, 9]: the rotation matrix of a unit quaternion q is I + (q q^T).flatten() @ T (the entries
    1 - 2 (y^2 + z^2), 2 (x y - w z), ...): one matrix product for a whole batch."""
    t = np.zeros((4, 4, 3, 3))
    w, x, y, z = range(4)
    for (a, b), k, l, c in [((y, y), 0, 0, -2), ((z, z), 0, 0, -2), ((x, y), 0, 1, 2), ((w, z), 0, 1, -2),
                            ((x, z), 0, 2, 2), ((w, y), 0, 2, 2), ((x, y), 1, 0, 2), ((w, z), 1, 0, 2),
                            ((x, x), 1, 1, -2), ((z, z), 1, 1, -2), ((y, z), 1, 2, 2), ((w, x), 1, 2, -2),
                            ((x, z), 2, 0, 2), ((w, y), 2, 0, -2), ((y, z), 2, 1, 2), ((w, x), 2, 1, 2),
                            ((x, x), 2, 2, -2), ((y, y), 2, 2, -2)]:
        t[a, b, k, l] += c
    return t.reshape(16, 9)


_QUAT_TO_MAT = _quat_to_mat_table()
_QUAT_TO_MAT_CACHE = {}


def _quat_to_mat_torch(q):
    key = (q.dtype, q.device)
    table = _QUAT_TO_MAT_CACHE.get(key)
    if table is None:
        table = _QUAT_TO_MAT_CACHE[key] = (torch.as_tensor(_QUAT_TO_MAT, dtype=q.dtype, device=q.device),
                                           torch.eye(3, dtype=q.dtype, device=q.device).reshape(9))
    outer = (q.unsqueeze(-1) * q.unsqueeze(-2)).reshape(q.shape[:-1] + (16,))
    return (outer @ table[0] + table[1]).reshape(q.shape[:-1] + (3, 3))
