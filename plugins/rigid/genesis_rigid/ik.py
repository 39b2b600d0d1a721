"""Forward kinematics, link Jacobians and inverse kinematics of a rigid entity, batched over environments.

The kinematics are the solver's own kernel (`RigidSolver.probe_kinematics`: forward kinematics and the dofs' motion
axes, the code a substep runs), launched on any batch of candidate configurations; the Jacobians, the mass matrix
and the IK steps are torch algebra over what it returns. The scene's state is only read (the current qpos, as a
starting point) and never written, so IK leaves the robot where it was.

Conventions (those of the solver and of Genesis World):

- a body's frame is its parent's composed with its offset, then each of its joints in order rotates (hinge, ball)
  about the joint anchor or translates (slide) along its axis; a free joint sets the pose from qpos
  (kernels_kinematics.forward_kinematics);
- dof velocities: hinge and slide, rates along the joint axis; a free joint's first three, the world velocity of
  the body origin, its last three and a ball joint's three, the angular velocity in the frame right after the
  joint (qpos quaternion q advances as q * exp(w dt / 2));
- a Jacobian `([n_envs,] 6, n_dofs)` maps the entity's dof velocities to the world linear velocity of a point
  fixed in a link (rows 0-2) and the link's world angular velocity (rows 3-5).

Inverse kinematics is damped least squares, dq = J^T (J J^T + damping^2 I)^-1 e, each component clamped to
+-max_step_size, the joint limits enforced by clamping after each step, random restarts for the environments that
have not converged, best result kept: Genesis World's `inverse_kinematics` / `inverse_kinematics_multilink`.
The pose error of a link is (target position - position, world) and the rotation vector of
quat^-1 * target_quat (the link's frame), masked by pos_mask / rot_mask; a single True in rot_mask aligns that
axis of the link with the target's (the rotation about it is free), as in Genesis World. Two additions: a dof
resting on a limit that the step would push further out is held and the step solved again without it (clamping
alone stalls there), and once few environments are left unconverged, several of their restarts run side by side
(the batch costs about the same).
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import torch

import genesis_core as gs
from genesis_core.rotations import quat_to_mat
from genesis_core.state import to_index, to_tensor
from genesis_core.utils.geom import inv_quat as quat_conj, quat_mul, quat_to_rotvec, rotvec_to_quat

from .layout import (DF_RANGE_HI, DF_RANGE_LO, DI_LIMITED, DI_Q, JI_DOF_START, JI_Q_START, JI_TYPE, LI_JOINT_END,
                     LI_JOINT_START, LI_PARENT)
from .model import BALL, FREE, HINGE, JOINT_NV, SLIDE

# once few environments are left unconverged, IK runs about this many restarts side by side
_CANDIDATE_BATCH = 128

__all__ = ["forward_kinematics", "get_jacobian", "inverse_kinematics", "inverse_kinematics_multilink"]


def _normalize(q):
    return q / q.norm(dim=-1, keepdim=True)


def _spd_solve(A, b):
    """A^-1 b for symmetric positive (semi-)definite A [B, n, n], b [B, n, m]: Gauss-Jordan elimination without
    pivoting, in elementwise torch operations (for a batch of tiny systems this is faster and steadier than LAPACK's
    batched solvers on the CPU, whose per-call threading dominates at this size). A pivot that vanishes (a direction
    A does not act on) gives a zero component."""
    A, b = A.clone(), b.clone()
    n = A.shape[-1]
    tiny = torch.finfo(A.dtype).eps * 16 * A.diagonal(dim1=-2, dim2=-1).abs().amax(-1).clamp(min=1e-30)
    tiny = tiny.view(-1, 1, 1)
    for k in range(n):
        piv = A[:, k:k + 1, k:k + 1]
        ok = piv > tiny
        inv = torch.where(ok, 1.0 / torch.where(ok, piv, torch.ones_like(piv)), torch.zeros_like(piv))
        row, rb = A[:, k:k + 1, :] * inv, b[:, k:k + 1, :] * inv
        col = A[:, :, k:k + 1]
        A = A - col * row
        b = b - col * rb
        A[:, k:k + 1, :] = row
        b[:, k:k + 1, :] = rb
    return b


# -- the kinematic tree of an entity --------------------------------------------------------------------------------

class _Joint:
    __slots__ = ("type", "q", "dof")


class _Link:
    __slots__ = ("parent", "joints")


class KinematicTree:
    """An entity's links (local indices, parents first), joints and dof limits, the structure IK reads (the
    kinematics themselves are the solver's kernel: `kinematics`)."""

    def __init__(self, entity, dtype, device):
        a = entity.solver.compiled.arrays
        link_i, joint_i, dof_f, dof_i = (a[k] for k in ("link_i", "joint_i", "dof_f", "dof_i"))
        ls, le, q0, d0 = entity.link_start, entity.link_end, entity.q_start, entity.dof_start
        # (a weak reference: the trees are kept in a WeakKeyDictionary keyed by the entity)
        self._entity, self.dtype, self.device = weakref.ref(entity), dtype, device
        self.n_links, self.n_qs, self.n_dofs = le - ls, entity.n_qs, entity.n_dofs

        def t(x):
            return torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=dtype, device=device)

        self.links = []
        dof_type = np.zeros(self.n_dofs, dtype=np.int64)
        self.dof_link = np.zeros(self.n_dofs, dtype=np.int64)
        for l in range(ls, le):
            k = _Link()
            parent = int(link_i[l, LI_PARENT])
            if parent >= 0 and not ls <= parent < l:
                raise gs.GenesisError(f"kinematics: link {l} of entity {entity.idx} has parent {parent} outside "
                                      "the entity or after it.")
            k.parent = parent - ls if parent >= 0 else -1
            k.joints = []
            for j in range(int(link_i[l, LI_JOINT_START]), int(link_i[l, LI_JOINT_END])):
                jt = _Joint()
                jt.type, jt.q, jt.dof = int(joint_i[j, JI_TYPE]), int(joint_i[j, JI_Q_START]) - q0, \
                    int(joint_i[j, JI_DOF_START]) - d0
                for i in range(JOINT_NV[jt.type]):
                    dof_type[jt.dof + i] = jt.type
                    self.dof_link[jt.dof + i] = l - ls
                k.joints.append(jt)
            self.links.append(k)
        self.dof_type = dof_type
        self.dof_link_t = torch.as_tensor(self.dof_link, device=device)
        # chain[l, d]: 1 where dof d moves link l (a dof of the link's joints or of an ancestor's)
        chain = np.zeros((self.n_links, self.n_dofs))
        for l in range(self.n_links):
            chain[l, self.chain_dofs(l)] = 1.0
        self.chain = t(chain)
        # hinge and slide dofs: their qpos index, limits (+-inf where unlimited)
        dofs = range(d0, d0 + self.n_dofs)
        self.dof_q = np.array([int(dof_i[d, DI_Q]) - q0 if dof_i[d, DI_Q] >= 0 else -1 for d in dofs], dtype=np.int64)
        limited = np.array([bool(dof_i[d, DI_LIMITED]) for d in dofs], dtype=bool)
        self.dof_limited = limited
        self.dof_lo = np.where(limited, dof_f[d0:d0 + self.n_dofs, DF_RANGE_LO], -np.inf)
        self.dof_hi = np.where(limited, dof_f[d0:d0 + self.n_dofs, DF_RANGE_HI], np.inf)
        lim = np.nonzero(limited & (self.dof_q >= 0))[0]
        self.limited_qs = torch.as_tensor(self.dof_q[lim], device=device)
        self.limited_lo, self.limited_hi = t(self.dof_lo[lim]), t(self.dof_hi[lim])

    def ancestors(self, links):
        """The local links in the chains from the roots to `links` (sorted: parents first)."""
        out = set()
        for l in links:
            while l >= 0 and l not in out:
                out.add(l)
                l = self.links[l].parent
        return sorted(out)

    def chain_dofs(self, link):
        """The dofs that move `link` (those of its ancestors' joints and its own)."""
        chain = set(self.ancestors([link]))
        return [d for d in range(self.n_dofs) if self.dof_link[d] in chain]

    # -- kinematics: the solver's kernel ----------------------------------------------------------------------------

    def kinematics(self, qpos, envs):
        """The entity's kinematics at qpos [n, n_qs] (environment envs[i] for row i: its model parameters, and the
        other entities' coordinates as the state has them): dict pos, quat [n, n_links, 3 / 4], rot [n, n_links, 3,
        3], com [n, n_links, 3], cdof [n, n_dofs, 6] (each dof's motion axis: angular, then the linear velocity of the
        body point at its link's origin), ref [n, n_links, 3] (the links' origins, world), from
        RigidSolver.probe_kinematics."""
        e = self._entity()
        solver = e.solver
        full = solver.state.at("qpos", solver.frame)[envs].clone()
        full[:, e.q_start:e.q_end] = qpos
        k = solver.probe_kinematics(full, envs)
        quat = k["links_quat"][:, e.link_start:e.link_end]
        return dict(pos=k["links_pos"][:, e.link_start:e.link_end], quat=quat, rot=quat_to_mat(quat),
                    com=k["com"][:, e.link_start:e.link_end], cdof=k["cdof"][:, e.dof_start:e.dof_end],
                    ref=k["ref"][:, e.link_start:e.link_end])

    def jacobian(self, kin, link, point):
        """[n, 6, n_dofs]: the velocity (rows 0-2) of the world point `point` [n, 3] fixed in `link` and the link's
        angular velocity (rows 3-5) per unit velocity of each dof, world axes: for a dof that moves the link, its
        motion axis (w, v_O) about its own link's origin O gives v_O + w x (point - O) and w; zero for the
        others."""
        cdof = kin["cdof"]
        ang, lin = cdof[..., :3], cdof[..., 3:]
        arm = point.unsqueeze(1) - kin["ref"][:, self.dof_link_t]
        v = lin + torch.cross(ang, arm, dim=-1)
        return torch.cat([v, ang], -1).transpose(1, 2) * self.chain[link]

    # -- configurations ---------------------------------------------------------------------------------------------

    def integrate(self, qpos, dq):
        """qpos [B, n_qs] moved by dof displacements dq [B, n_dofs] (the velocity convention above, unit time)."""
        out = qpos.clone()
        for k in self.links:
            for jt in k.joints:
                if jt.type in (HINGE, SLIDE):
                    out[:, jt.q] = qpos[:, jt.q] + dq[:, jt.dof]
                elif jt.type == BALL:
                    out[:, jt.q:jt.q + 4] = _normalize(quat_mul(qpos[:, jt.q:jt.q + 4],
                                                                rotvec_to_quat(dq[:, jt.dof:jt.dof + 3])))
                elif jt.type == FREE:
                    out[:, jt.q:jt.q + 3] = qpos[:, jt.q:jt.q + 3] + dq[:, jt.dof:jt.dof + 3]
                    out[:, jt.q + 3:jt.q + 7] = _normalize(quat_mul(qpos[:, jt.q + 3:jt.q + 7],
                                                                    rotvec_to_quat(dq[:, jt.dof + 3:jt.dof + 6])))
        return out

    def clamp_limits(self, qpos):
        if self.limited_qs.numel():
            qpos[:, self.limited_qs] = torch.maximum(torch.minimum(qpos[:, self.limited_qs], self.limited_hi),
                                                     self.limited_lo)
        return qpos


_TREES = weakref.WeakKeyDictionary()


def kinematic_tree(entity) -> KinematicTree:
    """The entity's KinematicTree in the solver's float dtype on gs.device (made once per entity)."""
    solver = entity.solver
    if getattr(solver, "compiled", None) is None or getattr(entity, "link_start", None) is None:
        raise gs.SceneError("kinematics: build the scene first (scene.build()).")
    key = (solver.float_dtype, str(gs.device))
    per_entity = _TREES.setdefault(entity, {})
    if key not in per_entity:
        per_entity[key] = KinematicTree(entity, solver.float_dtype, gs.device)
    return per_entity[key]


# -- argument handling ----------------------------------------------------------------------------------------------

def _current_qpos(entity, envs):
    """The entity's qpos [len(envs) or 1, n_qs] in the state now (a copy; the state is only read)."""
    solver = entity.solver
    q = solver.state.at("qpos", solver.frame)[:, entity.q_start:entity.q_end]
    return (q if envs is None else q[envs]).clone()


def _envs(entity, envs_idx):
    """(envs tensor or None, batch size, batched scene)."""
    envs = entity._envs_idx(envs_idx)  # also checks that the scene is built
    n_envs = entity.scene.n_envs
    batched = n_envs > 0
    return envs, (len(envs) if envs is not None else max(n_envs, 1)), batched


def _env_rows(entity, envs, B):
    """The scene's environment (a long tensor on gs.device) of each of the B rows _envs gave."""
    return envs.to(gs.device) if envs is not None else torch.arange(B, device=gs.device)


def _batch(value, B, tail, dtype, what):
    """`value` broadcast to [B, *tail] (the scene's batch; an unbatched value is shared by all environments)."""
    x = to_tensor(value, dtype, gs.device, what).detach()
    want = (B,) + tuple(tail)
    if tuple(x.shape) == want:
        return x.clone()
    if tuple(x.shape) == tuple(tail):
        return x.expand(want).clone()
    raise gs.OptionError(f"{what}: expected shape {tuple(tail)} or {want}, got {tuple(x.shape)}.")


def _link_index(entity, link, what):
    """The local index of `link`: a RigidLink of this entity, its name, or a local index."""
    if isinstance(link, str):
        return entity.get_link(link).idx_local
    if isinstance(link, (int, np.integer)) and not isinstance(link, bool):
        if not 0 <= int(link) < entity.n_links:
            raise gs.OptionError(f"{what}: link index {link} is not in [0, {entity.n_links}).")
        return int(link)
    if getattr(link, "entity", None) is not entity:
        raise gs.OptionError(f"{what}: {link!r} is not a link of this entity ({entity!r}).")
    return link.idx_local


def _mask3(mask, what):
    m = np.asarray(mask.detach().cpu() if torch.is_tensor(mask) else mask)
    if m.shape != (3,):
        raise gs.OptionError(f"{what}: expected 3 booleans, got {mask!r}.")
    return m.astype(bool)


# -- public functions -----------------------------------------------------------------------------------------------

def forward_kinematics(entity, qpos, qs_idx_local=None, links_idx_local=None, envs_idx=None):
    """Link poses for configurations `qpos` `([n_envs,] n_qs)` (or for the qs `qs_idx_local`, the others taken from
    the current state), without touching the scene: (links_pos `([n_envs,] n_links, 3)`, links_quat
    `([n_envs,] n_links, 4)`) of the links `links_idx_local` (None: all)."""
    tree = kinematic_tree(entity)
    envs, B, batched = _envs(entity, envs_idx)
    qs = None if qs_idx_local is None else to_index(qs_idx_local, entity.n_qs, "forward_kinematics: qs_idx_local")
    n = entity.n_qs if qs is None else len(qs)
    q_in = _batch(qpos, B, (n,), tree.dtype, "forward_kinematics: qpos")
    q = _current_qpos(entity, envs)
    if qs is None:
        q = q_in
    else:
        q[:, qs.to(gs.device)] = q_in
    links = list(range(entity.n_links)) if links_idx_local is None else \
        to_index(links_idx_local, entity.n_links, "forward_kinematics: links_idx_local").tolist()
    kin = tree.kinematics(q, _env_rows(entity, envs, B))
    pos, quat = kin["pos"][:, links], kin["quat"][:, links]
    return (pos, quat) if batched else (pos[0], quat[0])


def get_jacobian(entity, link, local_point=None):
    """The Jacobian `([n_envs,] 6, n_dofs)` of `link` at the current state: rows 0-2 the world linear velocity of
    the point `local_point` (link frame, `(3,)` or `([n_envs,] 3)`; None: the link frame's origin), rows 3-5 the
    link's world angular velocity, per unit velocity of each of the entity's dofs (columns, in order)."""
    tree = kinematic_tree(entity)
    if entity.n_dofs == 0:
        raise gs.OptionError("get_jacobian: the entity has no dofs.")
    l = _link_index(entity, link, "get_jacobian")
    envs, B, batched = _envs(entity, None)
    kin = tree.kinematics(_current_qpos(entity, envs), _env_rows(entity, envs, B))
    point = kin["pos"][:, l]
    if local_point is not None:
        lp = _batch(local_point, B, (3,), tree.dtype, "get_jacobian: local_point")
        point = point + (kin["rot"][:, l] @ lp.unsqueeze(-1)).squeeze(-1)
    J = tree.jacobian(kin, l, point)
    return J if batched else J[0]


def mass_matrix(entity, qpos, envs_idx=None):
    """The joint-space mass matrix `[B, n_dofs, n_dofs]` of the entity at qpos `[B, n_qs]`, armature on the
    diagonal, with each environment's link and dof parameters: the solver's CRBA on the configurations
    (RigidSolver.probe_mass_matrix; the other entities' coordinates as the state has them, and the matrix is
    block diagonal over kinematic trees)."""
    envs, B, _ = _envs(entity, envs_idx)
    solver = entity.solver
    full = solver.state.at("qpos", solver.frame)[_env_rows(entity, envs, B)].clone()
    full[:, entity.q_start:entity.q_end] = qpos
    M = solver.probe_mass_matrix(full, _env_rows(entity, envs, B))
    return M[:, entity.dof_start:entity.dof_end, entity.dof_start:entity.dof_end]


def get_dofs_invweight(entity, dofs_idx_local=None, envs_idx=None):
    """Genesis World's dof inverse weights `([n_envs,] n)`: the diagonal of the inverse mass matrix at the model's
    initial configuration, with each environment's current inertial parameters and armature; averaged over the
    translations and over the rotations of a free joint, and over a ball joint's three dofs."""
    tree = kinematic_tree(entity)
    envs, B, batched = _envs(entity, envs_idx)
    if entity.n_dofs == 0:
        return torch.zeros((B, 0) if batched else (0,), dtype=tree.dtype, device=gs.device)
    q0 = torch.as_tensor(entity.solver.compiled.qpos0[entity.q_start:entity.q_end], dtype=tree.dtype, device=gs.device)
    diag = torch.diagonal(torch.linalg.inv(mass_matrix(entity, q0.expand(B, -1), envs_idx)), dim1=1, dim2=2).clone()
    for k in tree.links:
        for jt in k.joints:
            groups = {FREE: ((0, 3), (3, 6)), BALL: ((0, 3),)}.get(jt.type, ())
            for a, b in groups:
                diag[:, jt.dof + a:jt.dof + b] = diag[:, jt.dof + a:jt.dof + b].mean(-1, keepdim=True)
    out = diag[:, entity._local(dofs_idx_local, entity.n_dofs, "dofs_idx_local").to(diag.device)]
    return out if batched else out[0]


def inverse_kinematics(entity, link, pos=None, quat=None, local_point=None, init_qpos=None, respect_joint_limit=True,
                       max_samples=50, max_solver_iters=20, damping=0.01, pos_tol=5e-4, rot_tol=5e-3,
                       pos_mask=[True, True, True], rot_mask=[True, True, True], max_step_size=0.5,
                       dofs_idx_local=None, return_error=False, envs_idx=None):
    """qpos `([n_envs,] n_qs)` (or `(len(envs_idx), n_qs)`) that puts `link` (the point `local_point` of it) at `pos`
    `([n_envs,] 3)` and turns it to `quat` `([n_envs,] 4)` (w, x, y, z); None: that part is free. The scene is
    left as it was. With return_error, also the pose error `([n_envs,] 6)`: target position - position (world),
    then the rotation vector of quat^-1 * target (link frame), masked. See inverse_kinematics_multilink."""
    ret = inverse_kinematics_multilink(
        entity, [link], poss=[pos] if pos is not None else [], quats=[quat] if quat is not None else [],
        local_points=[local_point] if local_point is not None else [], init_qpos=init_qpos,
        respect_joint_limit=respect_joint_limit, max_samples=max_samples, max_solver_iters=max_solver_iters,
        damping=damping, pos_tol=pos_tol, rot_tol=rot_tol, pos_mask=pos_mask, rot_mask=rot_mask,
        max_step_size=max_step_size, dofs_idx_local=dofs_idx_local, return_error=return_error, envs_idx=envs_idx)
    if return_error:
        qpos, err = ret
        return qpos, err[..., 0, :]
    return ret


def inverse_kinematics_multilink(entity, links, poss=None, quats=None, local_points=None, init_qpos=None,
                                 respect_joint_limit=True, max_samples=50, max_solver_iters=20, damping=0.01,
                                 pos_tol=5e-4, rot_tol=5e-3, pos_mask=[True, True, True],
                                 rot_mask=[True, True, True], max_step_size=0.5, dofs_idx_local=None,
                                 return_error=False, envs_idx=None):
    """Inverse kinematics for several links at once, batched over environments, without touching the scene.

    links: RigidLinks of the entity (or their names). poss / quats: one target per link (`([n_envs,] 3)` /
    `([n_envs,] 4)`, None for a link whose position / orientation is free), or empty / None: positions /
    orientations free for every link. local_points: per link, a point in its frame that is put at the target
    (None: the origin). init_qpos `([n_envs,] n_qs)`: the start (None: the current qpos). dofs_idx_local: the dofs
    IK may move (None: all); the others keep their start values, as do dofs that move none of the links.

    Per environment, damped least squares runs up to max_solver_iters steps from the start; an environment whose
    every link is within pos_tol (m, norm of the masked position error) and rot_tol (rad, norm of the masked
    rotation vector) stops there; the others restart from random values of their limited hinge and slide dofs
    (unlimited hinges: in [-pi, pi)), up to max_samples starts in all. The result is the converged configuration, or
    else the best one met (every link's position and rotation errors no larger than the best so far).
    respect_joint_limit clamps limited dofs into their range after each step (a dof on a limit that the step would
    push further out is held, the step solved again without it). The random draws are seeded (gs.init's seed, else
    0): the same call gives the same result.

    Returns qpos `([n_envs,] n_qs)` and with return_error the errors `([n_envs,] n_links, 6)`.
    """
    what = "inverse_kinematics"
    tree = kinematic_tree(entity)
    if entity.n_dofs == 0:
        raise gs.OptionError(f"{what}: the entity has no dofs.")
    links = list(links) if isinstance(links, (list, tuple)) else [links]
    if not links:
        raise gs.OptionError(f"{what}: no target link given.")
    K = len(links)
    link_ids = [_link_index(entity, l, what) for l in links]
    envs, B, batched = _envs(entity, envs_idx)
    dtype, dev = tree.dtype, gs.device

    pos_mask, rot_mask = _mask3(pos_mask, f"{what}: pos_mask"), _mask3(rot_mask, f"{what}: rot_mask")
    poss = list(poss) if poss is not None else []
    quats = list(quats) if quats is not None else []
    local_points = list(local_points) if local_points is not None else []
    if not poss:
        poss, pos_mask = [None] * K, np.zeros(3, dtype=bool)
    if not quats:
        quats, rot_mask = [None] * K, np.zeros(3, dtype=bool)
    if not local_points:
        local_points = [None] * K
    for name, seq in (("poss", poss), ("quats", quats), ("local_points", local_points)):
        if len(seq) != K:
            raise gs.OptionError(f"{what}: `{name}` has {len(seq)} entries for {K} links (give one per link, or "
                                 "none).")
    if int(rot_mask.sum()) == 1:
        rot_mask = ~rot_mask  # align that axis: the error about it is dropped, the other two components kept
    elif int(rot_mask.sum()) == 2:
        raise gs.OptionError(f"{what}: rot_mask can align no axis, one axis, or all three; got {rot_mask.tolist()}.")

    tgt_pos = torch.zeros((B, K, 3), dtype=dtype, device=dev)
    tgt_quat = torch.zeros((B, K, 4), dtype=dtype, device=dev)
    tgt_quat[..., 0] = 1.0
    lpts = torch.zeros((B, K, 3), dtype=dtype, device=dev)
    row_mask = np.zeros((K, 6), dtype=bool)
    for k in range(K):
        if poss[k] is None and quats[k] is None:
            raise gs.OptionError(f"{what}: link {k} has neither a target position nor a target orientation.")
        if poss[k] is not None:
            tgt_pos[:, k] = _batch(poss[k], B, (3,), dtype, f"{what}: target position of link {k}")
            row_mask[k, :3] = pos_mask
        if quats[k] is not None:
            q = _batch(quats[k], B, (4,), dtype, f"{what}: target quat of link {k}")
            norm = q.norm(dim=-1, keepdim=True)
            if not bool(torch.isfinite(q).all()) or bool((norm < 1e-9).any()):
                raise gs.OptionError(f"{what}: target quats must be finite and non-zero (w, x, y, z).")
            tgt_quat[:, k] = q / norm
            row_mask[k, 3:] = rot_mask
        if local_points[k] is not None:
            lpts[:, k] = _batch(local_points[k], B, (3,), dtype, f"{what}: local point of link {k}")
    if not bool(torch.isfinite(tgt_pos).all()):
        raise gs.OptionError(f"{what}: target positions must be finite.")
    row_mask_t = torch.as_tensor(row_mask.reshape(6 * K), dtype=dtype, device=dev)

    # the dofs IK moves: those selected that move at least one of the links
    selected = set(range(entity.n_dofs)) if dofs_idx_local is None else \
        set(to_index(dofs_idx_local, entity.n_dofs, f"{what}: dofs_idx_local").tolist())
    if not selected:
        raise gs.OptionError(f"{what}: no dofs selected (dofs_idx_local).")
    moving = set()
    for l in link_ids:
        moving.update(tree.chain_dofs(l))
    active = sorted(selected & moving)
    active_t = torch.as_tensor(active, dtype=torch.long, device=dev)
    # restart values: limited hinge / slide dofs uniformly in their range, unlimited hinges in [-pi, pi)
    resample = [d for d in active if tree.dof_q[d] >= 0 and (tree.dof_limited[d] or tree.dof_type[d] == HINGE)]
    rs_q = torch.as_tensor([tree.dof_q[d] for d in resample], dtype=torch.long, device=dev)
    rs_lo = torch.as_tensor([tree.dof_lo[d] if tree.dof_limited[d] else -math.pi for d in resample], dtype=dtype,
                            device=dev)
    rs_hi = torch.as_tensor([tree.dof_hi[d] if tree.dof_limited[d] else math.pi for d in resample], dtype=dtype,
                            device=dev)

    if init_qpos is None:
        q = _current_qpos(entity, envs)
    else:
        q = _batch(init_qpos, B, (entity.n_qs,), dtype, f"{what}: init_qpos")
        if not bool(torch.isfinite(q).all()):
            raise gs.OptionError(f"{what}: init_qpos must be finite.")
    q = tree.integrate(q, torch.zeros((B, entity.n_dofs), dtype=dtype, device=dev))  # normalises quaternions
    if respect_joint_limit:
        q = tree.clamp_limits(q)

    scene_rows = _env_rows(entity, envs, B)  # the scene's environment of each of the B rows

    def errors(qb, env_rows):
        """[b, K, 6] masked errors and the kinematics at qb."""
        kin = tree.kinematics(qb, scene_rows[env_rows])
        err, pts = [], []
        for k, l in enumerate(link_ids):
            pt = kin["pos"][:, l] + (kin["rot"][:, l] @ lpts[env_rows, k].unsqueeze(-1)).squeeze(-1)
            e_rot = quat_to_rotvec(quat_mul(quat_conj(kin["quat"][:, l]), tgt_quat[env_rows, k]))
            err.append(torch.cat([tgt_pos[env_rows, k] - pt, e_rot], -1))
            pts.append(pt)
        err = torch.stack(err, 1) * row_mask_t.view(K, 6)
        return err, kin, pts

    def converged(err):
        return ((err[..., :3].norm(dim=-1) <= pos_tol) & (err[..., 3:].norm(dim=-1) <= rot_tol)).all(-1)

    def step(J, e):
        Jt = J.transpose(-1, -2)
        if len(active) <= 6 * K:  # (J^T J + d^2 I)^-1 J^T e, the same as J^T (J J^T + d^2 I)^-1 e
            return _spd_solve(Jt @ J + eye_dofs, Jt @ e).squeeze(-1)
        return (Jt @ _spd_solve(J @ Jt + eye_rows, e)).squeeze(-1)

    # the active dofs with limits: their columns, qpos indices and ranges
    lim_c = [c for c, d in enumerate(active) if tree.dof_limited[d] and tree.dof_q[d] >= 0]
    lim_cols = torch.as_tensor(lim_c, dtype=torch.long, device=dev)
    lim_qs = torch.as_tensor([tree.dof_q[active[c]] for c in lim_c], dtype=torch.long, device=dev)
    lim_lo = torch.as_tensor([tree.dof_lo[active[c]] for c in lim_c], dtype=dtype, device=dev)
    lim_hi = torch.as_tensor([tree.dof_hi[active[c]] for c in lim_c], dtype=dtype, device=dev)

    def solve(qb, env_rows):
        """Damped least squares from qb for the environments env_rows (one row each), a row stopping once it
        converges: the final qb, its errors and convergence."""
        n = len(env_rows)
        for _ in range(int(max_solver_iters)):
            err, kin, pts = errors(qb, env_rows)
            ok = converged(err)
            if bool(ok.all()):
                return qb, err, ok
            # the stacked Jacobian of the errors' rows over the active dofs, rotation rows in the link frame
            Js = []
            for k, l in enumerate(link_ids):
                Jk = tree.jacobian(kin, l, pts[k])[:, :, active_t]
                Js.append(torch.cat([Jk[:, :3], kin["rot"][:, l].transpose(-1, -2) @ Jk[:, 3:]], 1))
            J = torch.cat(Js, 1) * row_mask_t.view(1, 6 * K, 1)
            e = err.reshape(n, 6 * K, 1)
            dq_active = step(J, e)
            if respect_joint_limit and lim_cols.numel():
                # a dof at a limit that the step pushes further out is held, and the step solved again without it
                ql = qb[:, lim_qs]
                d = dq_active[:, lim_cols]
                held = ((ql <= lim_lo) & (d < 0)) | ((ql >= lim_hi) & (d > 0))
                if bool(held.any()):
                    keep = torch.ones((n, len(active)), dtype=dtype, device=dev)
                    keep[:, lim_cols] = (~held).to(dtype)
                    dq_active = step(J * keep.unsqueeze(1), e)
            dq_active = dq_active.clamp(-max_step_size, max_step_size) * (~ok).unsqueeze(-1).to(dtype)
            dq = torch.zeros((n, entity.n_dofs), dtype=dtype, device=dev)
            dq[:, active_t] = dq_active
            qb = tree.integrate(qb, dq)
            if respect_joint_limit:
                qb = tree.clamp_limits(qb)
        err, _, _ = errors(qb, env_rows)
        return qb, err, converged(err)

    gen = torch.Generator(device=dev)
    gen.manual_seed(gs.runtime.seed if getattr(gs.runtime, "seed", None) is not None else 0)
    eye_rows = torch.eye(6 * K, dtype=dtype, device=dev) * damping ** 2
    eye_dofs = torch.eye(len(active), dtype=dtype, device=dev) * damping ** 2
    max_samples = max(int(max_samples), 1)
    best_q, last_q = q.clone(), q.clone()
    best_err = torch.full((B, K, 6), float("inf"), dtype=dtype, device=dev)
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    used = 0  # samples (starts) spent so far by every environment still running
    while used < max_samples:
        rows = torch.nonzero(~done).squeeze(-1)
        r = rows.numel()
        if r == 0:
            break
        # the starts of this round: sample 0 is the initial qpos; a later one restarts from the best so far with its
        # resampled dofs drawn anew; once few environments are left, several of their samples run side by side
        # (the batch costs about the same). Without dofs to resample, a sample continues from the previous one.
        m = min(max_samples - used, max(1, _CANDIDATE_BATCH // r)) if len(resample) else 1
        if len(resample):
            starts = best_q[rows].unsqueeze(1).repeat(1, m, 1)
            u = torch.rand((r, m, len(resample)), generator=gen, device=dev, dtype=dtype)
            starts[:, :, rs_q] = rs_lo + u * (rs_hi - rs_lo)
            if used == 0:
                starts[:, 0] = q[rows]
        else:
            starts = last_q[rows].unsqueeze(1)
        env_rows = rows.repeat_interleave(m)
        qb, err, ok = solve(starts.reshape(r * m, -1), env_rows)
        qb, err, ok = qb.view(r, m, -1), err.view(r, m, K, 6), ok.view(r, m)
        last_q[rows] = qb[:, -1]
        # in sample order: the first converged sample ends the search; until then a sample replaces the best if
        # none of its links' position and rotation errors is larger
        finished = torch.zeros(r, dtype=torch.bool, device=dev)
        for j in range(m):
            prev = best_err[rows]
            better = (err[:, j, :, :3].norm(dim=-1) <= prev[..., :3].norm(dim=-1)) \
                & (err[:, j, :, 3:].norm(dim=-1) <= prev[..., 3:].norm(dim=-1))
            take = ~finished & (ok[:, j] | better.all(-1))
            best_q[rows[take]] = qb[take, j]
            best_err[rows[take]] = err[take, j]
            finished |= ok[:, j]
        done[rows[finished]] = True
        used += m
    if not batched:
        best_q, best_err = best_q[0], best_err[0]
    return (best_q, best_err) if return_error else best_q
