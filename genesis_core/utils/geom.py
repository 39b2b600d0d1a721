"""Quaternions, rotation matrices, Euler angles and rigid transforms: Genesis World's `genesis.utils.geom` helpers,
with its names, argument orders and conventions, so that `import genesis_core.utils.geom as gu` serves its scripts.

Conventions
-----------
- Quaternions are (w, x, y, z). A function that reads a quaternion as a rotation (`quat_to_R`,
  `transform_by_quat`, ...) normalises it first; `inv_quat` is the conjugate.
- `R` is a rotation matrix [..., 3, 3] acting on column vectors; `T` a homogeneous transform [..., 4, 4].
- Euler angles are (x, y, z), in radians unless `degrees=True`. `rpy=False` (the default of `xyz_to_quat` and
  `quat_to_xyz`): intrinsic x-y-z, R = Rx(x) Ry(y) Rz(z) (scipy's "XYZ"). `rpy=True`: extrinsic x-y-z, i.e. roll,
  pitch, yaw about fixed axes, R = Rz(z) Ry(y) Rx(x) (scipy's "xyz", URDF's rpy). `euler_to_quat` and
  `euler_to_R` take degrees, extrinsic x-y-z: the convention of the morphs' `euler`.
- `transform_quat_by_quat(v, u)` is u * v: the rotation v followed by u (R_u @ R_v).
- `R_to_quat` returns the quaternion with w >= 0 (a rotation has two).
- `quat_to_xyz` / `R_to_xyz` give x and z in [-pi, pi] and y in [-pi/2, pi/2]; at gimbal lock (|cos y| below
  the square root of the dtype's epsilon) x is set to 0 and z carries the whole remaining turn.

Every function takes torch tensors or NumPy arrays, batched over any leading dimensions (broadcast against each
other), and returns the same kind: a tensor keeps its dtype, device and autograd graph; a NumPy array keeps a
float dtype (integers become float64); lists, tuples and numbers count as NumPy. Mixing tensors and arrays in one
call raises. Each formula is written once, on torch: NumPy inputs are viewed as tensors (no copy) and the result
converted back.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings

import numpy as np
import torch

from .. import rotations
from .._runtime import runtime
from ..errors import GenesisError, OptionError

# -- torch or NumPy in, the same kind out ------------------------------------------------------------------------


def _as_torch(x, like, np_dtype):
    """`x` as a float tensor: on `like`'s device and float dtype when the call is in torch, else a view of the
    NumPy array (integers become float64; lists and numbers take `np_dtype`, the float dtype of the call's arrays)."""
    if like is not None:
        if torch.is_tensor(x):
            return x if x.is_floating_point() else x.to(torch.get_default_dtype())
        dtype = like.dtype if like.is_floating_point() else torch.get_default_dtype()
        return torch.as_tensor(x, dtype=dtype, device=like.device)
    a = x if isinstance(x, np.ndarray) else np.asarray(x, dtype=np_dtype)
    if a.dtype.kind != "f":
        a = a.astype(np.float64)
    if not a.flags.writeable or any(s < 0 for s in a.strides) or not a.dtype.isnative:
        a = np.array(a, dtype=a.dtype.newbyteorder("="))  # torch.from_numpy takes none of these
    return torch.from_numpy(a)


def _to_numpy(out):
    if isinstance(out, tuple):
        return tuple(_to_numpy(o) for o in out)
    return out.numpy() if torch.is_tensor(out) else out


def _accepts_torch_and_numpy(**shapes):
    """Decorate a torch implementation so that it also serves NumPy arrays. `shapes` names the array arguments
    and the trailing shape each must have (() for any), checked at the call."""

    def decorate(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            given = {k: bound.arguments[k] for k in shapes if bound.arguments.get(k) is not None}
            tensors = [x for x in given.values() if torch.is_tensor(x)]
            if tensors and any(isinstance(x, np.ndarray) for x in given.values()):
                kinds = ", ".join(f"{k}: {type(x).__name__}" for k, x in given.items())
                raise GenesisError(f"geom.{fn.__name__}: the inputs mix torch tensors and NumPy arrays ({kinds}); "
                                   f"pass all of one kind.")
            like = tensors[0] if tensors else None
            np_dtype = next((x.dtype for x in given.values() if isinstance(x, np.ndarray) and x.dtype.kind == "f"),
                            np.float64)
            for k, x in given.items():
                x = _as_torch(x, like, np_dtype)
                tail = shapes[k]
                if tail and (x.dim() < len(tail) or tuple(x.shape[-len(tail):]) != tail):
                    expected = "[..., " + ", ".join(map(str, tail)) + "]"
                    raise OptionError(f"geom.{fn.__name__}: {k} has shape {tuple(x.shape)}; expected {expected}.")
                bound.arguments[k] = x
            out = fn(*bound.args, **bound.kwargs)
            return out if like is not None else _to_numpy(out)

        return wrapper

    return decorate


def quat_mul(a, b):
    """The Hamilton product a * b (the rotation b, then a) of torch tensors [..., 4], broadcast over leading
    dimensions, not normalised (the building block of transform_quat_by_quat; not one of Genesis World's)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], dim=-1)


def _eps(x):
    return torch.finfo(x.dtype).eps


# -- quaternions ---------------------------------------------------------------------------------------------------


@_accepts_torch_and_numpy(x=())
def normalize(x, eps: float = 1e-12):
    """x / |x| along the last axis (|x| clamped below at eps)."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp(min=eps)


@_accepts_torch_and_numpy(quat=(4,))
def inv_quat(quat):
    """The conjugate (w, -x, -y, -z): the inverse rotation of a unit quaternion."""
    return torch.cat([quat[..., :1], -quat[..., 1:]], dim=-1)


@_accepts_torch_and_numpy(v=(4,), u=(4,))
def transform_quat_by_quat(v, u):
    """The rotation v followed by u: the unit quaternion u * v (R_u @ R_v)."""
    return normalize(quat_mul(u, v))


@_accepts_torch_and_numpy(quat=(4,))
def quat_to_R(quat):
    """The rotation matrix [..., 3, 3] of quat [..., 4] (normalised first; a zero quaternion gives the identity)."""
    return rotations.quat_to_mat(normalize(quat))


@_accepts_torch_and_numpy(R=(3, 3))
def R_to_quat(R):
    """The unit quaternion (w >= 0) of the rotation matrix R [..., 3, 3] (Shepperd's method: of the four ways to
    read it off R, the one dividing by the largest of 4 w^2, 4 x^2, 4 y^2, 4 z^2)."""
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = R.flatten(-2).unbind(-1)
    t = torch.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1)
    candidates = torch.stack([  # row k: 4 q_k * q, the k-th component being t_k = 4 q_k^2
        torch.stack([t[..., 0], m21 - m12, m02 - m20, m10 - m01], -1),
        torch.stack([m21 - m12, t[..., 1], m01 + m10, m02 + m20], -1),
        torch.stack([m02 - m20, m01 + m10, t[..., 2], m12 + m21], -1),
        torch.stack([m10 - m01, m02 + m20, m12 + m21, t[..., 3]], -1),
    ], -2)
    k = t.argmax(-1, keepdim=True)
    quat = torch.gather(candidates, -2, k[..., None].expand(*k.shape, 4)).squeeze(-2)
    quat = normalize(quat / (2 * torch.gather(t, -1, k).sqrt()))
    return torch.where(quat[..., :1] < 0, -quat, quat)


@_accepts_torch_and_numpy(xyz=(3,))
def xyz_to_quat(xyz, rpy=False, degrees=False):
    """The quaternion of Euler angles xyz [..., 3]: intrinsic x-y-z (R = Rx Ry Rz), or with rpy=True extrinsic
    x-y-z (roll, pitch, yaw: R = Rz Ry Rx). Radians unless degrees=True."""
    if degrees:
        xyz = torch.deg2rad(xyz)
    c, s = (0.5 * xyz).cos(), (0.5 * xyz).sin()
    zero = torch.zeros_like(c[..., 0])
    qx = torch.stack([c[..., 0], s[..., 0], zero, zero], -1)
    qy = torch.stack([c[..., 1], zero, s[..., 1], zero], -1)
    qz = torch.stack([c[..., 2], zero, zero, s[..., 2]], -1)
    return quat_mul(quat_mul(qz, qy), qx) if rpy else quat_mul(quat_mul(qx, qy), qz)


def _R_to_xyz(R, rpy):
    """Euler angles of R: for rpy=False R = Rx(a) Ry(b) Rz(c), so R02 = sin b, R12 = -sin a cos b,
    R22 = cos a cos b, R01 = -cos b sin c, R00 = cos b cos c; for rpy=True R = Rz(c) Ry(b) Rx(a), so R20 = -sin b,
    R21 = cos b sin a, R22 = cos b cos a, R10 = cos b sin c, R00 = cos b cos c. At cos b = 0 only a +- c is
    defined (R10, R11, resp. -R01, R11 give it): a is set to 0."""
    r = lambda i, j: R[..., i, j]  # noqa: E731
    if rpy:
        sin_b, cos_b = -r(2, 0), torch.hypot(r(0, 0), r(1, 0))
        a, c = torch.atan2(r(2, 1), r(2, 2)), torch.atan2(r(1, 0), r(0, 0))
        c_locked = torch.atan2(-r(0, 1), r(1, 1))
    else:
        sin_b, cos_b = r(0, 2), torch.hypot(r(0, 0), r(0, 1))
        a, c = torch.atan2(-r(1, 2), r(2, 2)), torch.atan2(-r(0, 1), r(0, 0))
        c_locked = torch.atan2(r(1, 0), r(1, 1))
    # Below sqrt(eps) the rounding error of a and c (eps / cos b) outgrows the error of the locked reading (cos b).
    locked = cos_b < math.sqrt(_eps(R))
    a = torch.where(locked, torch.zeros_like(a), a)
    c = torch.where(locked, c_locked, c)
    return torch.stack([a, torch.atan2(sin_b, cos_b), c], -1)


@_accepts_torch_and_numpy(quat=(4,))
def quat_to_xyz(quat, rpy=False, degrees=False):
    """The Euler angles [..., 3] of quat [..., 4] in the convention of `xyz_to_quat` with the same rpy."""
    xyz = _R_to_xyz(quat_to_R(quat), rpy)
    return torch.rad2deg(xyz) if degrees else xyz


@_accepts_torch_and_numpy(R=(3, 3))
def R_to_xyz(R, rpy=False, degrees=False):
    """The Euler angles [..., 3] of the rotation matrix R, as `quat_to_xyz`."""
    xyz = _R_to_xyz(R, rpy)
    return torch.rad2deg(xyz) if degrees else xyz


@_accepts_torch_and_numpy(euler_xyz=(3,))
def euler_to_quat(euler_xyz):
    """Extrinsic x-y-z Euler angles in degrees (the morphs' `euler`) to a quaternion."""
    return xyz_to_quat(euler_xyz, rpy=True, degrees=True)


@_accepts_torch_and_numpy(euler_xyz=(3,))
def euler_to_R(euler_xyz):
    """Extrinsic x-y-z Euler angles in degrees to a rotation matrix."""
    return quat_to_R(euler_to_quat(euler_xyz))


@_accepts_torch_and_numpy(angle=(), axis=(3,))
def axis_angle_to_quat(angle, axis):
    """The unit quaternion of a rotation by `angle` (radians, [...]) about `axis` ([..., 3], any length)."""
    half = (0.5 * angle).unsqueeze(-1)
    w, xyz = torch.broadcast_tensors(half.cos(), normalize(axis) * half.sin())
    return normalize(torch.cat([w[..., :1], xyz], -1))


@_accepts_torch_and_numpy(axis=(3,), theta=())
def axis_angle_to_R(axis, theta):
    """The rotation matrix of a rotation by theta (radians) about axis (Genesis's argument order: axis first)."""
    return quat_to_R(axis_angle_to_quat(theta, axis))


@_accepts_torch_and_numpy(rotvec=(3,))
def rotvec_to_quat(rotvec):
    """The unit quaternion of a rotation vector (axis times angle in radians)."""
    angle = torch.linalg.vector_norm(rotvec, dim=-1, keepdim=True)
    small = angle < _eps(rotvec) ** 0.25
    # sin(angle / 2) / angle, by its series where the quotient loses precision
    k = torch.where(small, 0.5 - angle * angle / 48, (0.5 * angle).sin() / torch.where(small, 1.0, angle))
    return torch.cat([(0.5 * angle).cos(), k * rotvec], -1)


@_accepts_torch_and_numpy(quat=(4,))
def quat_to_rotvec(quat):
    """The rotation vector (axis times angle, the angle in [0, pi]) of a quaternion."""
    w, u = quat[..., :1], quat[..., 1:]
    s = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    angle = 2 * torch.atan2(s, w.abs())
    small = s < _eps(quat)
    scale = torch.where(small, 2 / w.abs().clamp(min=_eps(quat)), angle / torch.where(small, 1.0, s))
    return torch.where(w < 0, -scale, scale) * u


@_accepts_torch_and_numpy(rotvec=(3,))
def rotvec_to_R(rotvec):
    return quat_to_R(rotvec_to_quat(rotvec))


@_accepts_torch_and_numpy(R=(3, 3))
def R_to_rotvec(R):
    return quat_to_rotvec(R_to_quat(R))


@_accepts_torch_and_numpy(q0=(4,), q1=(4,), t=())
def slerp(q0, q1, t):
    """Spherical linear interpolation from q0 (t = 0) to q1 (t = 1) along the shorter arc. t has the
    quaternions' leading dimensions [...] (or broadcasts against them), or Genesis World's [..., 1]: a trailing
    axis of size 1 where t has as many dimensions as the quaternions. The result is [..., 4]."""
    q0, q1 = normalize(q0), normalize(q1)
    dot = (q0 * q1).sum(-1, keepdim=True)
    q1 = torch.where(dot < 0, -q1, q1)
    dot = dot.abs().clamp(max=1.0)
    if not (t.dim() >= 1 and t.dim() == max(q0.dim(), q1.dim()) and t.shape[-1] == 1):
        t = t.unsqueeze(-1)
    theta = torch.acos(dot)
    near = dot > 1 - 1e3 * _eps(dot)  # sin(theta) ~ 0: the chord is the arc
    sin_theta = torch.where(near, 1.0, theta.sin())
    s0 = torch.where(near, 1 - t, ((1 - t) * theta).sin() / sin_theta)
    s1 = torch.where(near, t, (t * theta).sin() / sin_theta)
    return normalize(s0 * q0 + s1 * q1)


@_accepts_torch_and_numpy(R=(3, 3))
def R_to_rot6d(R):
    """The 6D rotation representation of Zhou et al. (CVPR 2019, arXiv:1812.07035) of R [..., 3, 3]: its first two
    rows, concatenated, [..., 6] (continuous over rotations, unlike quaternions and Euler angles)."""
    return R[..., :2, :].flatten(-2)


@_accepts_torch_and_numpy(d6=(6,))
def rot6d_to_R(d6):
    """The rotation matrix [..., 3, 3] of a 6D representation d6 [..., 6] (any two independent 3-vectors, not only
    `R_to_rot6d`'s): Gram-Schmidt on its two halves gives the first two rows, their cross product the third
    (Zhou et al., section B)."""
    b1 = normalize(d6[..., :3])
    a2 = d6[..., 3:]
    b2 = normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1)
    return torch.stack([b1, b2, torch.linalg.cross(b1, b2, dim=-1)], -2)


@_accepts_torch_and_numpy(A=())
def polar(A, pure_rotation: bool = True, side: str = "right"):
    """The polar decomposition of A [..., M, N] (batched over any leading dimensions): `side="right"` gives
    (U, P) with A = U P, P [..., N, N]; `side="left"` gives A = P U, P [..., M, M]; U [..., M, N] has orthonormal
    columns (or rows, where M < N) and P is symmetric positive semi-definite. From the SVD A = W S V^T:
    U = W V^T, P = V S V^T (right) or W S W^T (left).

    pure_rotation (square A only): U is a rotation, det U = +1, where det A < 0 too: the direction of the least
    singular value is then reflected in P instead (P = V diag(s_1, ..., -s_n) V^T keeps A = U P and becomes
    indefinite), the rotation closest to A with that stretch. With pure_rotation=False U may be a reflection
    (det U = -1) and P is always positive semi-definite."""
    if not isinstance(pure_rotation, bool):
        raise OptionError(f"geom.polar: pure_rotation={pure_rotation!r} must be a bool.")
    if side not in ("right", "left"):
        raise OptionError(f"geom.polar: side={side!r} is not accepted; choose 'right' (A = U P) or 'left' (A = P U).")
    if A.dim() < 2:
        raise OptionError(f"geom.polar: A has shape {tuple(A.shape)}; expected a matrix [..., M, N].")
    W, S, Vh = torch.linalg.svd(A, full_matrices=False)
    if pure_rotation and A.shape[-1] == A.shape[-2]:
        flip = torch.where(torch.linalg.det(W @ Vh) < 0, -1.0, 1.0).to(S.dtype)
        sign = torch.cat([torch.ones_like(S[..., :-1]), flip.unsqueeze(-1)], -1)
        W, S = W * sign.unsqueeze(-2), S * sign
    U = W @ Vh
    P = (Vh.mT * S.unsqueeze(-2)) @ Vh if side == "right" else (W * S.unsqueeze(-2)) @ W.mT
    return U, P


# -- transforming points and frames -------------------------------------------------------------------------------


@_accepts_torch_and_numpy(v=(3,), quat=(4,))
def transform_by_quat(v, quat):
    """v [..., 3] rotated by quat [..., 4]."""
    return (quat_to_R(quat) @ v.unsqueeze(-1)).squeeze(-1)


@_accepts_torch_and_numpy(pos=(3,), quat=(4,))
def inv_transform_by_quat(pos, quat):
    """pos rotated by the inverse of quat."""
    return transform_by_quat(pos, inv_quat(quat))


@_accepts_torch_and_numpy(pos=(3,), xyz=(3,))
def transform_by_xyz(pos, xyz):
    """pos rotated by intrinsic x-y-z Euler angles (radians)."""
    return transform_by_quat(pos, xyz_to_quat(xyz))


@_accepts_torch_and_numpy(pos=(3,), trans=(3,), quat=(4,))
def transform_by_trans_quat(pos, trans, quat):
    """From the frame (trans, quat) to its parent: R(quat) pos + trans."""
    return transform_by_quat(pos, quat) + trans


@_accepts_torch_and_numpy(pos=(3,), trans=(3,), quat=(4,))
def inv_transform_by_trans_quat(pos, trans, quat):
    """From the parent into the frame (trans, quat): R(quat)^T (pos - trans)."""
    return transform_by_quat(pos - trans, inv_quat(quat))


@_accepts_torch_and_numpy(pos=(3,), quat=(4,), t_trans=(3,), t_quat=(4,))
def transform_pos_quat_by_trans_quat(pos, quat, t_trans, t_quat):
    """The pose (pos, quat) given in the frame (t_trans, t_quat), expressed in that frame's parent."""
    return t_trans + transform_by_quat(pos, t_quat), transform_quat_by_quat(quat, t_quat)


@_accepts_torch_and_numpy(pos=(3,), quat=(4,), t_trans=(3,), t_quat=(4,))
def inv_transform_pos_quat_by_trans_quat(pos, quat, t_trans, t_quat):
    """The pose (pos, quat) given in the parent, expressed in the frame (t_trans, t_quat)."""
    t_inv = inv_quat(t_quat)
    return transform_by_quat(pos - t_trans, t_inv), transform_quat_by_quat(quat, t_inv)


@_accepts_torch_and_numpy(pos=(3,), R=(3, 3))
def transform_by_R(pos, R):
    """pos rotated by R. pos [..., 3] with one point per matrix R [..., 3, 3], or pos [..., N, 3] (as many
    dimensions as R) with N points per matrix."""
    if pos.dim() == R.dim():
        return pos @ R.transpose(-1, -2)
    if pos.dim() == R.dim() - 1:
        return (R @ pos.unsqueeze(-1)).squeeze(-1)
    raise OptionError(f"geom.transform_by_R: pos has shape {tuple(pos.shape)} and R {tuple(R.shape)}; expected pos "
                      f"[..., 3] (one point per matrix) or [..., N, 3] (N points per matrix) with R [..., 3, 3].")


@_accepts_torch_and_numpy(pos=(3,), trans=(3,), R=(3, 3))
def transform_by_trans_R(pos, trans, R):
    """R pos + trans, with pos laid out as in `transform_by_R`."""
    return transform_by_R(pos, R) + (trans.unsqueeze(-2) if pos.dim() == R.dim() else trans)


@_accepts_torch_and_numpy(pos=(3,), T=(4, 4))
def transform_by_T(pos, T):
    """pos mapped by the homogeneous transform T, with pos laid out as in `transform_by_R`."""
    return transform_by_trans_R(pos, T[..., :3, 3], T[..., :3, :3])


@_accepts_torch_and_numpy(pos=(3,), T=(4, 4))
def inv_transform_by_T(pos, T):
    """pos mapped by the inverse of T, with pos laid out as in `transform_by_R`."""
    trans, R = T[..., :3, 3], T[..., :3, :3]
    return transform_by_R(pos - (trans.unsqueeze(-2) if pos.dim() == T.dim() else trans), R.transpose(-1, -2))


# -- homogeneous transforms ---------------------------------------------------------------------------------------


@_accepts_torch_and_numpy(trans=(3,), R=(3, 3))
def trans_R_to_T(trans=None, R=None):
    """The transform [..., 4, 4] of a translation and a rotation matrix (either may be None: zero, identity)."""
    given = [x for x in (trans, R) if x is not None]
    if not given:
        return torch.eye(4, dtype=torch.float64)
    batch = torch.broadcast_shapes(*([trans.shape[:-1]] if trans is not None else []),
                                   *([R.shape[:-2]] if R is not None else []))
    dtype = functools.reduce(torch.promote_types, [x.dtype for x in given])
    T = torch.zeros(*batch, 4, 4, dtype=dtype, device=given[0].device)
    T[..., :3, :3] = R if R is not None else torch.eye(3, dtype=dtype, device=T.device)
    if trans is not None:
        T[..., :3, 3] = trans
    T[..., 3, 3] = 1
    return T


@_accepts_torch_and_numpy(trans=(3,), quat=(4,))
def trans_quat_to_T(trans=None, quat=None):
    """The transform [..., 4, 4] of a translation and a quaternion (either may be None)."""
    return trans_R_to_T(trans, None if quat is None else quat_to_R(quat))


@_accepts_torch_and_numpy(R=(3, 3))
def R_to_T(R):
    return trans_R_to_T(None, R)


@_accepts_torch_and_numpy(trans=(3,))
def trans_to_T(trans):
    return trans_R_to_T(trans, None)


@_accepts_torch_and_numpy(T=(4, 4))
def T_to_trans(T):
    return T[..., :3, 3]


@_accepts_torch_and_numpy(T=(4, 4))
def T_to_quat(T):
    return R_to_quat(T[..., :3, :3])


@_accepts_torch_and_numpy(T=(4, 4))
def T_to_trans_quat(T):
    """(trans [..., 3], quat [..., 4]) of the transform T."""
    return T_to_trans(T), T_to_quat(T)


@_accepts_torch_and_numpy(T=(4, 4))
def inv_T(T):
    """The inverse of a rigid transform: (R^T, -R^T trans)."""
    R_inv = T[..., :3, :3].transpose(-1, -2)
    return trans_R_to_T(-(R_inv @ T[..., :3, 3].unsqueeze(-1)).squeeze(-1), R_inv)


# -- constants in the engine's precision ---------------------------------------------------------------------------


def identity_quat():
    """(1, 0, 0, 0) as a NumPy array of gs.np_float."""
    return np.array([1.0, 0.0, 0.0, 0.0], dtype=runtime.np_float)


def zero_pos():
    return np.zeros(3, dtype=runtime.np_float)


def tc_identity_quat():
    """(1, 0, 0, 0) as a tensor of gs.tc_float on gs.device."""
    return torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=runtime.tc_float, device=runtime.device)


def tc_zero_pos():
    return torch.zeros(3, dtype=runtime.tc_float, device=runtime.device)


def orthogonals(a):
    """Two unit vectors (t0, t1) orthogonal to the unit vector(s) `a` (NumPy, `(..., 3)`), with (t0, t1, a) a
    right-handed frame: t1 is world y (or z, where a is within 60 degrees of y) made orthogonal to a, t0 = t1 x a."""
    a = np.asarray(a, dtype=np.float64)
    flat = a.reshape(-1, 3)
    y = np.array([0.0, 1.0, 0.0])
    z = np.array([0.0, 0.0, 1.0])
    ref = np.where((np.abs(flat[:, 1]) < 0.5)[:, None], y, z)
    t1 = ref - np.sum(ref * flat, axis=-1, keepdims=True) * flat
    t1 /= np.linalg.norm(t1, axis=-1, keepdims=True)
    t0 = np.cross(t1, flat)
    return t0.reshape(a.shape), t1.reshape(a.shape)


def generate_grid_points_on_plane(lo, hi, normal, nx: int, ny: int) -> np.ndarray:
    """An (ny, nx, 3) grid of points spanning the box [lo, hi] on the plane through it with the given normal (the
    plane's axes from `orthogonals(normal)`; nx points along the first, ny along the second). Genesis World's
    helper, used to lay out tactile probes."""
    from ..errors import OptionError

    normal = np.asarray(normal, dtype=np.float64).reshape(3)
    n = float(np.linalg.norm(normal))
    if not np.isfinite(normal).all() or n < 1e-12:
        raise OptionError(f"generate_grid_points_on_plane: normal={normal.tolist()} must be a finite non-zero vector.")
    for name, k in (("nx", nx), ("ny", ny)):
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise OptionError(f"generate_grid_points_on_plane: {name}={k!r} must be an int >= 1.")
    normal = normal / n
    t0, t1 = orthogonals(normal)
    rot = np.stack([t0, t1, normal])
    bounds = np.stack([np.asarray(lo, dtype=np.float64).reshape(3), np.asarray(hi, dtype=np.float64).reshape(3)], 1)
    (lo_u, hi_u), (lo_v, hi_v), (lo_w, hi_w) = rot @ bounds
    if abs(hi_w - lo_w) > 1e-9:
        warnings.warn(f"generate_grid_points_on_plane: lo and hi differ by {abs(hi_w - lo_w):.3g} along the normal; "
                      "the grid lies half way between.", stacklevel=2)
    vv, uu = np.meshgrid(np.linspace(lo_v, hi_v, ny), np.linspace(lo_u, hi_u, nx), indexing="ij")
    return t0 * uu[..., None] + t1 * vv[..., None] + normal * (0.5 * (lo_w + hi_w))


__all__ = [
    "R_to_T", "R_to_quat", "R_to_rot6d", "R_to_rotvec", "R_to_xyz", "T_to_quat", "T_to_trans", "T_to_trans_quat",
    "axis_angle_to_R", "axis_angle_to_quat", "euler_to_R", "euler_to_quat", "generate_grid_points_on_plane",
    "identity_quat", "inv_T", "inv_quat", "inv_transform_by_T", "inv_transform_by_quat",
    "inv_transform_by_trans_quat", "inv_transform_pos_quat_by_trans_quat", "normalize", "orthogonals", "polar",
    "quat_mul", "quat_to_R", "quat_to_rotvec", "quat_to_xyz", "rot6d_to_R", "rotvec_to_R", "rotvec_to_quat", "slerp",
    "tc_identity_quat", "tc_zero_pos", "trans_R_to_T", "trans_quat_to_T", "trans_to_T", "transform_by_R",
    "transform_by_T", "transform_by_quat", "transform_by_trans_R", "transform_by_trans_quat", "transform_by_xyz",
    "transform_pos_quat_by_trans_quat", "transform_quat_by_quat", "xyz_to_quat", "zero_pos",
]
