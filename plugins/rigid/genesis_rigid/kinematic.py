"""Kinematic entities (`gs.materials.Kinematic`, Genesis World's): robots and bodies moved only by setting their
configuration (set_qpos, set_dofs_position, set_pos, set_quat), with no dynamics, contacts or coupling of their own:
a reference motion drawn beside the simulated robot (a ghost), a marker, a target.

The rigid compiler lays such an entity out as links welded to the world (each link a jointless root, its geoms
colliding with nothing), so that the cameras draw it and the state carries it with no cost in the dynamics. Its
configuration is the state's `kinematic_qpos` (its joints' coordinates, laid out as a rigid entity's qpos) and each
link's pose the state's `fixed_base_pos` / `fixed_base_quat`: a setter writes the first, then the forward kinematics
below (torch, batched over environments, the solver kernels' conventions: kernels_kinematics.compose_joint) write
the second. Snapshots, `reset(state, envs_idx)` and checkpoints carry both."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs
from genesis_core.launch import torch_one_thread
from genesis_core.state import to_tensor

from .entity import RigidEntity
from .model import BALL, FREE, HINGE, JOINT_NQ, JOINT_NV, SLIDE


def _normalize(q):
    return q / q.norm(dim=-1, keepdim=True)


def _skew(axis):
    x, y, z = (float(c) for c in axis)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def _quat_mat(q):
    """Rotation matrices [B, 3, 3] of unit quaternions [B, 4] (w, x, y, z)."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1).reshape(-1, 3, 3)


class _Tree:
    """A robot description's bodies and joints as torch constants (per dtype and device), for body_poses."""

    def __init__(self, robot, dtype, device):
        from genesis_core.rotations import quat_to_mat

        t = lambda x: torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
        self.bodies = []
        q = 0
        for body in robot.bodies:
            joints = []
            for jd in body.joints:
                k = _skew(np.asarray(jd.axis, dtype=np.float64) / max(np.linalg.norm(jd.axis), 1e-300))
                joints.append((jd.type, q, t(jd.pos).reshape(1, 3, 1), t(jd.axis).reshape(1, 3, 1), float(jd.ref),
                               t(k)[None], t(k @ k)[None]))
                q += JOINT_NQ[jd.type]
            self.bodies.append((body.parent, t(body.pos).reshape(1, 3, 1), t(quat_to_mat(body.quat))[None], joints))
        self.eye = torch.eye(3, dtype=dtype, device=device)[None]


def body_poses(robot, qpos, roots, tree=None):
    """World poses ([B, n_bodies, 3], [B, n_bodies, 4]) of the bodies of `robot` at the configurations qpos [B, nq]
    (its joints' coordinates in order): each body's frame is its parent's composed with its offset, then moved by
    each of its joints (hinge and ball rotate about the joint's anchor, a slide translates along its axis, hinge and
    slide by q - ref; a free joint sets the pose), as kernels_kinematics.compose_joint. `roots` gives the pose of each
    root body without a free joint, {body index: (pos [B, 3], quat [B, 4])}: a jointless root's is its own, a
    jointed root's is its frame before its joints. Rotations compose as matrices (a dozen tensor operations a
    joint); `tree` (a _Tree of the robot) may be given to reuse its constants."""
    from genesis_core.utils.geom import R_to_quat

    tree = tree if tree is not None else _Tree(robot, qpos.dtype, qpos.device)
    pos, rot = [], []
    for bi, (parent, off_p, off_r, joints) in enumerate(tree.bodies):
        if parent < 0:
            if bi in roots:
                xp, xq = roots[bi]
                xpos, xrot = xp.to(qpos.dtype).reshape(-1, 3, 1), _quat_mat(_normalize(xq.to(qpos.dtype)))
            else:
                xpos, xrot = off_p, off_r
        else:
            xpos, xrot = pos[parent] + rot[parent] @ off_p, rot[parent] @ off_r
        for jtype, q, jpos, jaxis, ref, k, k2 in joints:
            if jtype == FREE:
                xpos, xrot = qpos[:, q:q + 3, None], _quat_mat(_normalize(qpos[:, q + 3:q + 7]))
                continue
            anchor = xrot @ jpos + xpos
            if jtype == SLIDE:
                xpos = xpos + (xrot @ jaxis) * (qpos[:, q] - ref)[:, None, None]
                continue
            if jtype == HINGE:
                angle = (qpos[:, q] - ref)[:, None, None]
                xrot = xrot @ (tree.eye + torch.sin(angle) * k + (1 - torch.cos(angle)) * k2)
            elif jtype == BALL:
                xrot = xrot @ _quat_mat(_normalize(qpos[:, q:q + 4]))
            xpos = anchor - xrot @ jpos
        B = qpos.shape[0]
        pos.append(xpos.expand(B, 3, 1))
        rot.append(xrot.expand(B, 3, 3))
    P = torch.stack(pos, 1)[..., 0]
    Q = R_to_quat(torch.stack(rot, 1))
    Q = torch.where(Q[..., :1] < 0, -Q, Q)  # (one sign, w >= 0, as the kernels' link quaternions mostly are)
    return P, Q


def root_placements(entity):
    """{body index: (pos, quat)} of the entity's roots without a free joint, as the rigid compiler places them (the
    morph's pose composed with the body's offset), numpy."""
    return {bi: entity.place(body.pos, body.quat) for bi, body in enumerate(entity.robot.bodies)
            if body.parent < 0 and not any(j.type == FREE for j in body.joints)}


def kinematic_sizes(robot):
    """(joints, dofs, qs) of a robot description, the kinematic layout of a Kinematic entity."""
    joints = [jd for body in robot.bodies for jd in body.joints]
    return len(joints), sum(JOINT_NV[j.type] for j in joints), sum(JOINT_NQ[j.type] for j in joints)


# the parts of the rigid entity's API that act on dynamics: a kinematic entity has none
_DYNAMICS = ("control_dofs_force", "control_dofs_position", "control_dofs_position_velocity", "control_dofs_velocity",
             "set_dofs_kp", "set_dofs_kv", "get_dofs_kp", "get_dofs_kv", "get_dofs_control_force", "get_dofs_force",
             "set_dofs_force_range", "get_dofs_force_range", "set_dofs_damping", "get_dofs_damping",
             "set_dofs_armature", "get_dofs_armature", "set_dofs_stiffness", "get_dofs_stiffness",
             "get_dofs_invweight", "apply_links_external_force", "apply_links_external_torque",
             "set_friction_ratio", "get_friction_ratio", "set_mass_shift", "set_links_mass_shift", "get_mass_shift",
             "get_links_mass_shift", "set_COM_shift", "set_links_COM_shift", "get_COM_shift", "get_links_COM_shift",
             "set_links_inertial_mass", "get_links_inertial_mass", "set_mass", "get_mass", "get_contacts",
             "get_links_net_contact_force", "inverse_kinematics", "inverse_kinematics_multilink",
             "forward_kinematics", "get_jacobian", "attach")


def _refused(name):
    def method(self, *args, **kwargs):
        raise gs.OptionError(f"{name}: entity {self.idx} is kinematic (gs.materials.Kinematic): it has no dynamics, "
                             "contacts or forces; it moves only through set_qpos, set_dofs_position, set_pos and "
                             "set_quat. Use gs.materials.Rigid for a simulated body.")

    method.__name__ = name
    method.__doc__ = f"Refused on a kinematic entity (no dynamics): {name}."
    return method


class KinematicEntity(RigidEntity):
    """A rigid description moved only by its configuration (genesis_rigid.kinematic). Its links, geoms, visual
    geoms, joints and the pose and configuration accessors are a rigid entity's; its joints' dofs and qs index the
    state's `kinematic_qpos` (dofs_idx_local and qs_idx_local as for a rigid entity of the same file). Velocities
    read zero; dynamics, contacts, forces and inverse kinematics are refused."""

    kinematic = True

    for _name in _DYNAMICS:
        locals()[_name] = _refused(_name)
    del _name

    # -- layout: links in the rigid model, joints in the kinematic configuration ------------------------------------

    def _layout(self):
        links = kin_joints = kin_dofs = kin_qs = 0
        for e in self.solver.entities:
            if e is self:
                break
            links += len(e.robot.bodies)
            if getattr(e, "kinematic", False):
                nj, nd, nq = kinematic_sizes(e.robot)
                kin_joints, kin_dofs, kin_qs = kin_joints + nj, kin_dofs + nd, kin_qs + nq
        if self._ranges is not None:
            links = self._ranges[0]
        joints, dof, q = [], kin_dofs, kin_qs
        for bi, body in enumerate(self.robot.bodies):
            for jd in body.joints:
                joints.append(dict(type=jd.type, name=jd.name, dof=dof, q=q, link=links + bi))
                dof, q = dof + JOINT_NV[jd.type], q + JOINT_NQ[jd.type]
        ranges = (links, links + len(self.robot.bodies), kin_dofs, dof, kin_qs, q, kin_joints,
                  kin_joints + len(joints))
        return ranges, [b.name for b in self.robot.bodies], joints

    def _setup(self, link_start, link_end, dof_start, dof_end, q_start, q_end, link_names, joints=(), joint_start=0):
        self._ranges = (link_start, link_end)
        ranges, names, joints = self._layout()
        self._ranges = ranges
        self._sync_objects(names, joints)

    # -- state: the configuration in kinematic_qpos, no velocity ---------------------------------------------------

    _FIELDS = {"qpos": "kinematic_qpos"}

    def _field(self, field, what):
        """The state field a rigid entity's access to `field` goes to: the configuration to kinematic_qpos, the
        velocities to none (they read zero), the link fields to themselves; the dofs' other fields are dynamics."""
        if field == "dofs_vel":
            return None
        if field.startswith("dofs_"):
            _refused(what)(self)
        return self._FIELDS.get(field, field)

    def _write(self, field, value, cols, envs_idx, what):
        name = self._field(field, what)
        if name is None:  # a velocity: only zero (zero_velocity=True) is meaningful, and it is what it reads
            v = to_tensor(value, self.solver.float_dtype, gs.device, what)
            if not bool((v == 0).all()):
                _refused(what)(self)
            return
        super()._write(name, value, cols, envs_idx, what)

    def _read(self, field, cols, envs_idx):
        name = self._field(field, "read")
        if name is None:
            shape = self.solver.state.get_rows("kinematic_qpos", self.solver.frame, self._envs_idx(envs_idx),
                                               (torch.zeros(len(cols), dtype=torch.long, device=gs.device),)).shape
            return torch.zeros(shape, dtype=self.solver.float_dtype, device=gs.device)
        return super()._read(name, cols, envs_idx)

    def _fixed_rows(self, what):
        if self.robot.bodies[0].joints:
            raise gs.OptionError(f"{what}: entity {self.idx}'s base is on a {self.joints[0].type_name} joint; move it "
                                 "through that joint (set_qpos, set_dofs_position).")
        return super()._fixed_rows(what)

    def _moved(self, envs_idx=None):
        """The links' poses from the configuration (the forward kinematics above) into fixed_base_pos / _quat, then
        the solver's link poses, in the environments envs_idx (small tensors: on one thread, whose operations cost
        microseconds where the thread pool's cost milliseconds on a busy machine)."""
        with torch_one_thread():
            self._pose_links(envs_idx)

    def _pose_links(self, envs_idx):
        st, f, envs = self.solver.state, self.solver.frame, self._envs_idx(envs_idx)
        fixed = self.solver.fixed_bases
        rows = torch.as_tensor([fixed.index(l) for l in range(self.link_start, self.link_end)], dtype=torch.long,
                               device=gs.device)
        n_q = self.q_end - self.q_start
        qpos = st.get_rows("kinematic_qpos", f, envs, (torch.arange(self.q_start, self.q_end, device=gs.device),))
        base_pos = st.get_rows("fixed_base_pos", f, envs, (rows,))
        base_quat = st.get_rows("fixed_base_quat", f, envs, (rows,))
        batched = bool(self.scene.n_envs)
        if not batched:
            qpos, base_pos, base_quat = qpos[None], base_pos[None], base_quat[None]
        B = qpos.shape[0]
        key = (qpos.dtype, qpos.device)
        if self.__dict__.get("_tree_key") != key:  # the constants: the tree, and the jointed roots' placements
            placed = {bi: tuple(torch.as_tensor(np.asarray(x), dtype=qpos.dtype, device=gs.device)[None] for x in pq)
                      for bi, pq in root_placements(self).items() if self.robot.bodies[bi].joints}
            self._tree, self._placed, self._tree_key = _Tree(self.robot, *key), placed, key
        roots = {bi: (p.expand(B, 3), q.expand(B, 4)) for bi, (p, q) in self._placed.items()}
        for bi, body in enumerate(self.robot.bodies):
            if body.parent < 0 and not body.joints:  # a jointless root: where set_pos / set_quat put it
                roots[bi] = (base_pos[:, bi], base_quat[:, bi])
        pos, quat = body_poses(self.robot, qpos.reshape(B, n_q), roots, self._tree)
        super()._write("fixed_base_pos", pos if batched else pos[0], rows, envs_idx, "kinematics")
        super()._write("fixed_base_quat", quat if batched else quat[0], rows, envs_idx, "kinematics")
        self.solver.kinematics(f, envs)

    def get_links_vel(self, links_idx_local=None, envs_idx=None, ref="link_origin"):
        return torch.zeros_like(self.get_links_pos(links_idx_local, envs_idx))

    def get_links_ang(self, links_idx_local=None, envs_idx=None):
        return torch.zeros_like(self.get_links_pos(links_idx_local, envs_idx))

    def get_vel(self, envs_idx=None):
        return torch.zeros_like(self.get_pos(envs_idx))

    def get_ang(self, envs_idx=None):
        return torch.zeros_like(self.get_pos(envs_idx))


def entity_qpos0(entity) -> list:
    """An entity's initial configuration, its joints' coordinates in order (compile.joint_qpos0's)."""
    from .compile import joint_qpos0

    return [x for body in entity.robot.bodies for jd in body.joints for x in joint_qpos0(jd, body, entity)]


def kinematic_qpos0(entities):
    """The initial kinematic configuration of every Kinematic entity in order (numpy) and the offsets where a
    quaternion starts in it (free joints after xyz, ball joints)."""
    values, quats = [], []
    for e in entities:
        if not getattr(e, "kinematic", False):
            continue
        n = len(values)
        for s, _ in e._quat_slots():
            quats.append(n + s)
        values += entity_qpos0(e)
    return np.asarray(values, dtype=np.float64), quats


def initial_poses(entity):
    """The world poses (numpy [n_bodies, 3], [n_bodies, 4]) of a Kinematic entity's bodies at its initial
    configuration: where the rigid compiler welds its links."""
    roots = {bi: (torch.as_tensor(p, dtype=torch.float64)[None], torch.as_tensor(q, dtype=torch.float64)[None])
             for bi, (p, q) in root_placements(entity).items()}
    pos, quat = body_poses(entity.robot, torch.as_tensor([entity_qpos0(entity)], dtype=torch.float64).reshape(1, -1),
                           roots)
    return pos[0].numpy(), quat[0].numpy()
