"""RigidSolver: articulated rigid bodies in generalized coordinates, batched over environments."""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import taichi as ti
import torch

import genesis_core as gs
from genesis_core.launch import Launcher, torch_one_thread
from genesis_core.state import first_entry
from genesis_core.coupler import ColliderView

from . import kernels_step
from .entity import RigidEntity
from .kernels_collision import (CF_N, CF_NORMAL, CF_POS, CI_ACTIVE, CI_KEY, CI_LINK_A, CI_LINK_B, CI_META,
                                CI_N, CM_SETTLED,
                                CM_SWEEPS,
                                HASH_FACTOR, KEY_SPAN)
from .kernels_constraint import RF_N, SD_SWEEP
from .kernels_convex import NAR_ROWS, NF_N, NI_N
from .layout import (DF_ARMATURE, DF_DAMPING, DF_FORCE_HI, DF_FORCE_LO, DF_N, DF_RANGE_HI, DF_RANGE_LO, DF_SPRINGREF,
                     DF_STIFFNESS, DI_N, GF_BCENTRE, GF_FRICTION, GF_GAP, GF_HULL_BOX, GF_MARGIN, GF_N, GF_POS,
                     GF_QUAT, GF_RESTITUTION, GF_SIZE, GI_FACE, GI_LINK, GI_N, GI_TYPE, GI_VERT, HF_N, HI_N, JF_AXIS,
                     JF_N, JF_POS, JF_REF, JI_N, LF_COM, LF_FLUID_BOX, LF_FLUID_DENSITY, LF_FLUID_IQUAT,
                     LF_FLUID_VISCOSITY, LF_FLUID_WIND, LF_GRAVCOMP, LF_INERTIA, LF_MASS, LF_N, LF_POS,
                     LF_QUAT, LI_DOF_END, LI_DOF_START, LI_JOINT_END, LI_JOINT_START, LI_LAST_DOF, LI_N, LI_PARENT,
                     LI_TREE_HI, LI_TREE_LO, PF_BAUMGARTE, PF_DT, PF_GRAVITY, PF_MAX_CORRECTION, PF_N, PF_REG, PF_SLOP, PF_TOL, PI_GEOM_A, PI_GEOM_B, PI_N,
                     PP_CG, PP_COLLISION, PP_ITERATIONS, PP_LIMITS, PP_MAX_CONTACTS, PP_N, PP_RK4, PP_TENDONS, RI_N, TF_DAMPING,
                     TF_LIMITED, TF_N, TF_RANGE_HI, TF_RANGE_LO, TF_SPRING_HI, TF_SPRING_LO, TF_STIFFNESS, TI_COUNT, TI_N,
                     TI_START)
from .material import Rigid
from .neutral import neutral_overlaps
from .model import BALL, BOX, CAPSULE, CYLINDER, FREE, HINGE, JOINT_NQ, JOINT_NV, MESH, PLANE, SLIDE, SPHERE
from .options import RigidOptions
from .robots import describe
from genesis_core.rotations import mat_to_quat, quat_to_mat
from genesis_core.utils.geom import quat_mul

# the ColliderView geom code of each geom type (the cameras' primitives)
GEOM_OF_TYPE = {BOX: gs.coupler.GEOM_BOX, SPHERE: gs.coupler.GEOM_SPHERE, CAPSULE: gs.coupler.GEOM_CAPSULE,
                CYLINDER: gs.coupler.GEOM_CYLINDER}
# visual meshes by (file, scale): vertices [V, 3] (scaled, float64) and faces [F, 3], read once per process
_VISUAL_MESHES: dict = {}


def _visual_mesh(path, scale):
    """The triangles of a visual mesh file (trimesh reads OBJ, STL, PLY, ...; every part of a scene file)."""
    key = (os.path.abspath(path), tuple(np.asarray(scale, dtype=np.float64).tolist()))
    if key not in _VISUAL_MESHES:
        from genesis_core.mesh_files import read_mesh

        mesh = read_mesh(path, process=False)  # (a gs.ModelFileError names a bad file)
        verts = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(scale, dtype=np.float64)
        faces = np.asarray(mesh.faces, dtype=np.int64).reshape(-1, 3)
        if not len(faces) or not np.isfinite(verts).all():
            raise gs.ModelFileError(f"visual mesh {path!r} scaled by {list(scale)}: no triangles, or vertices that "
                                    "are not finite")
        _VISUAL_MESHES[key] = (verts, faces)
    return _VISUAL_MESHES[key]


# contacts per geom pair when the pool is sized by RigidOptions.max_collision_pairs (Genesis World's budget for a
# convex pair without contact patches)
CONTACTS_PER_PAIR = 5
# contact slots a pair of geom types owns (types ordered so that the first <= the second)
PAIR_SLOTS = {
    (PLANE, SPHERE): 1, (PLANE, CAPSULE): 2, (PLANE, BOX): 8, (PLANE, CYLINDER): 8,
    (SPHERE, SPHERE): 1, (SPHERE, CAPSULE): 1, (SPHERE, BOX): 1, (SPHERE, CYLINDER): 1,
    (CAPSULE, CAPSULE): 1, (CAPSULE, BOX): 3, (CAPSULE, CYLINDER): 1,
    (BOX, BOX): 4, (CYLINDER, BOX): 3, (CYLINDER, CYLINDER): 1,
    # a mesh keeps a spread-out subset of its candidate points: 4 hold a face flat
    (PLANE, MESH): 4, (SPHERE, MESH): 1, (CAPSULE, MESH): 2, (CYLINDER, MESH): 2, (BOX, MESH): 4, (MESH, MESH): 4,
}
BIG_FORCE = 1e30
# a link's mass in the dynamics is at least this fraction of its inertial mass, whatever its links_mass_shift
MIN_MASS_FRACTION = 0.1
_RANK = {PLANE: 0, SPHERE: 1, CAPSULE: 2, CYLINDER: 3, BOX: 4, MESH: 5}


def _link_roots(links):
    """Each link's topmost ancestor (itself for a base): the root of its kinematic tree."""
    root = []
    for l, k in enumerate(links):  # parents come first
        root.append(l if k["parent"] < 0 else root[k["parent"]])
    return root


def _pair_order(ta, tb):
    """True if (ta, tb) is the order the narrowphase expects: planes first, then boxes, meshes last."""
    return _RANK[ta] <= _RANK[tb]


def _tangent_basis(n):
    """kernels_math.tangent_basis of torch unit normals [..., 3]: two unit tangents completing n to a right-handed
    frame."""
    nx, ny, nz = n.unbind(-1)
    zero = torch.zeros_like(nx)
    first = (torch.abs(nx) < 0.57).unsqueeze(-1)
    t1 = torch.where(first, torch.stack([zero, nz, -ny], -1), torch.stack([ny, -nx, zero], -1))
    t1 = t1 / t1.norm(dim=-1, keepdim=True)
    return t1, torch.cross(n, t1, dim=-1)


def _same_values(tensors, saved):
    """Whether the tensors hold the values `saved` (a list of copies, or None) bit for bit."""
    return saved is not None and all(torch.equal(t.detach(), c) for t, c in zip(tensors, saved))


def _versions(tensors):
    """(id, version counter) of each tensor: equal to an earlier key while no tensor was replaced or written in
    place (the parameter syncs and the applied wrenches look at the state only when it moved)."""
    return tuple((id(t), t._version) for t in tensors)


def _inverse_inertia(inertia):
    """The inverse of a link's inertia for the effective mass a contact sees; a principal moment of zero (a link
    that cannot turn about that axis in the model, a point mass) gives zero there, not infinity."""
    w, v = np.linalg.eigh(np.asarray(inertia, dtype=np.float64).reshape(3, 3))
    inv = np.where(w > 1e-12 * max(float(w.max()), 1e-300), 1.0 / np.where(w > 0, w, 1.0), 0.0)
    return (v * inv) @ v.T


class RigidSolver(gs.SolverBase):
    """Articulated bodies from primitives, URDF and MJCF; contacts and joint limits by projected Gauss-Seidel."""

    short_name = "rigid"
    order = 10
    options_class = RigidOptions
    material_class = Rigid
    entity_class = RigidEntity
    supports_grad = True
    # every this many collision passes (and at the first), the contacts found are counted against max_contacts
    CONTACT_CHECK_EVERY = 32
    _n_collides = 0
    _contacts_warned = False
    state_fields = (
        gs.FieldSpec("qpos", ("n_qs",), grad=True, quat="qpos_quats", sentinel=True,
                     doc="generalized positions (free: xyz + wxyz quat; ball: wxyz), m / rad"),
        gs.FieldSpec("dofs_vel", ("n_dofs",), grad=True, sentinel=True,
                     doc="generalized velocities (free: world linear, body angular)"),
        gs.FieldSpec("dofs_acc", ("n_dofs",), grad=True, doc="generalized accelerations of the last substep"),
        gs.FieldSpec("links_pos", ("n_links", 3), grad=True, doc="link frame origins, world, m"),
        gs.FieldSpec("links_quat", ("n_links", 4), grad=True, quat=True, doc="link orientations, world, (w, x, y, z)"),
        gs.FieldSpec("contact_impulse", ("n_contacts", 3), grad=True,
                     doc="warm start: the impulses (normal, 2 tangents) of the contacts of the substep that led to "
                         "this frame, per entry of the contact pool, N s"),
        gs.FieldSpec("contact_key", ("n_contacts",), dtype="int", bounds=(-1, None),
                     doc="the key of each contact_impulse entry, (candidate pair) * 4096 + feature; -1: none"),
        gs.FieldSpec("limit_impulse", ("n_limits",), grad=True,
                     doc="warm start: the impulse of each joint or tendon limit's row in the substep that led to this "
                         "frame (the limited dofs in order, then the limited tendons; 0 where the limit was not "
                         "engaged; one unused entry when the model has no limits), N s or N m s"),
        gs.FieldSpec("links_ext_impulse", ("n_links", 6), grad=True,
                     doc="impulses couplings handed to the links, applied by the substep that starts at this frame: "
                         "linear (N s), angular about the link's centre of mass (N m s), world axes"),
        gs.FieldSpec("dofs_ctrl_mode", ("n_dofs",), dtype="int", frames=False, codes=(0, 1, 2),
                     doc="0 force, 1 position, 2 velocity"),
        gs.FieldSpec("dofs_ctrl_force", ("n_dofs",), frames=False, grad=True, doc="force/torque command, N or N m"),
        gs.FieldSpec("dofs_ctrl_pos", ("n_dofs",), frames=False, grad=True, doc="position target"),
        gs.FieldSpec("dofs_ctrl_vel", ("n_dofs",), frames=False, grad=True, doc="velocity target"),
        gs.FieldSpec("dofs_kp", ("n_dofs",), frames=False, grad=True, bounds=(0, None), doc="position gain"),
        gs.FieldSpec("dofs_kv", ("n_dofs",), frames=False, grad=True, bounds=(0, None), doc="velocity gain"),
        # the dofs' parameters, per environment (set_dofs_damping, ...; a checkpoint carries them)
        gs.FieldSpec("dofs_damping", ("n_dofs",), frames=False, grad=True, bounds=(0, None),
                     doc="joint damping, N m s/rad or N s/m"),
        gs.FieldSpec("dofs_armature", ("n_dofs",), frames=False, grad=True, bounds=(0, None),
                     doc="armature (reflected rotor inertia) added to the mass matrix, kg m^2 or kg"),
        gs.FieldSpec("dofs_stiffness", ("n_dofs",), frames=False, grad=True, bounds=(0, None),
                     doc="joint spring stiffness toward the spring reference (hinge and slide dofs), N m/rad or N/m"),
        gs.FieldSpec("dofs_force_lo", ("n_dofs",), frames=False,
                     doc="lower end of the control force range (commands and PD laws are clamped to it), N or N m"),
        gs.FieldSpec("dofs_force_hi", ("n_dofs",), frames=False,
                     doc="upper end of the control force range, N or N m"),
        gs.FieldSpec("links_applied_wrench", ("n_links", 6), frames=False,
                     doc="external forces applied to the links for the next step (apply_links_external_force / "
                         "_torque): force (N) and torque about the link's centre of mass (N m), world axes"),
        # the links' inertial parameters and the geoms' friction, per environment (domain randomization)
        gs.FieldSpec("links_inertial_mass", ("n_links",), frames=False, grad=True, bounds=(0, None),
                     doc="each link's mass before its shift, kg (set_links_inertial_mass, link.set_mass)"),
        gs.FieldSpec("links_mass_shift", ("n_links",), frames=False, grad=True,
                     doc="mass added to each link, kg (set_mass_shift; the dynamics keep at least MIN_MASS_FRACTION of "
                         "links_inertial_mass); the rotational inertia scales with the mass"),
        gs.FieldSpec("links_com_shift", ("n_links", 3), frames=False,
                     doc="offset of each link's centre of mass, link frame, m (set_COM_shift)"),
        gs.FieldSpec("geoms_friction_ratio", ("n_geoms",), frames=False, grad=True, bounds=(0, None),
                     doc="factor on each geom's friction coefficient (set_friction_ratio)"),
        gs.FieldSpec("links_step_wrench", ("n_links", 6), frames=False,
                     doc="the applied wrenches of the step under way (or the last one), as links_applied_wrench; "
                         "each of its substeps applies wrench * dt"),
    )
    DOF_PARAMS = (("dofs_damping", DF_DAMPING), ("dofs_armature", DF_ARMATURE), ("dofs_stiffness", DF_STIFFNESS),
                  ("dofs_force_lo", DF_FORCE_LO), ("dofs_force_hi", DF_FORCE_HI))

    _view = None  # the ColliderView, made at the first collider_view call
    _diff_tape = None  # differentiable mode: the frame whose substep the backward re-ran, awaiting its reverse
    _view_tape = None  # differentiable mode: the frame whose collider view the backward re-made, awaiting its reverse

    def add_entity(self, idx, morph, material):
        robot = describe(morph, material)  # parse now: a bad file fails at add_entity, before the entity is added
        entity = super().add_entity(idx, morph, material)
        entity.robot = robot
        return entity

    # -- model ------------------------------------------------------------------------------------------------------

    def build_model(self):
        so, o = self.sim_options, self.options
        if o.dt is not None and abs(o.dt - so.dt) > 1e-12 * so.dt:
            raise gs.OptionError(f"RigidOptions(dt={o.dt!r}) differs from SimOptions(dt={so.dt!r}): every solver steps "
                                 "with the scene; set the step with SimOptions(dt=...) (RigidOptions(dt=None)).")
        if o.gravity is not None and tuple(o.gravity) != tuple(so.gravity):
            raise gs.OptionError(f"RigidOptions(gravity={o.gravity!r}) differs from SimOptions(gravity={so.gravity!r}): "
                                 "gravity is the scene's; set it with SimOptions(gravity=...).")
        if self.sim_options.requires_grad and self.options.integrator != "euler":
            raise gs.OptionError(f"RigidOptions(integrator={self.options.integrator!r}) is not available with "
                                 "SimOptions(requires_grad=True): the differentiable substep is semi-implicit Euler; "
                                 "use integrator='euler'.")
        if self.sim_options.requires_grad and o.constraint_solver == gs.constraint_solver.CG:
            raise gs.OptionError("RigidOptions(constraint_solver=gs.constraint_solver.CG) is not available with "
                                 "SimOptions(requires_grad=True): the backward differentiates plain Gauss-Seidel "
                                 "sweeps, not the conjugate-gradient steps; leave constraint_solver at its default.")
        links, joints, dofs, geoms, tendons = [], [], [], [], []
        qpos0, kp0, kv0 = [], [], []
        link_names = []
        n_q = 0
        for e in self.entities:
            robot = e.robot
            link0, dof0, q0, joint0 = len(links), len(dofs), n_q, len(joints)
            body_to_link = {}
            joint_names = {}
            for bi, body in enumerate(robot.bodies):
                li = len(links)
                body_to_link[bi] = li
                parent = -1 if body.parent < 0 else body_to_link[body.parent]
                pos, quat = body.pos, body.quat
                j_start, d_start = len(joints), len(dofs)
                for jd in body.joints:
                    ji = len(joints)
                    joint_names[jd.name] = ji
                    joints.append(dict(type=jd.type, q=n_q, dof=len(dofs), pos=jd.pos, axis=jd.axis, name=jd.name,
                                       link=li, ref=jd.ref))
                    nv = JOINT_NV[jd.type]
                    for k in range(nv):
                        one_to_one = jd.type in (HINGE, SLIDE)
                        rng = jd.range if one_to_one else None
                        dofs.append(dict(link=li, q=n_q if one_to_one else -1, damping=jd.damping,
                                         armature=jd.armature, stiffness=jd.stiffness if one_to_one else 0.0,
                                         springref=jd.springref, range=rng, force=(-BIG_FORCE, BIG_FORCE)))
                    qpos0.extend(self._joint_qpos0(jd, body, e, bi))
                    n_q += JOINT_NQ[jd.type]
                if body.parent < 0 and not any(j.type == FREE for j in body.joints):
                    # a base fixed to the world is placed at the morph's pose
                    pos, quat = e.place(pos, quat)
                links.append(dict(parent=parent, pos=pos, quat=quat, mass=body.mass, com=body.com,
                                  gravcomp=e.material.gravity_compensation, fluid=robot.fluid,
                                  inertia=body.inertia, joints=(j_start, len(joints)), dofs=(d_start, len(dofs))))
                link_names.append(body.name)
                for g in body.geoms:
                    friction = e.material.friction if e.material.friction is not None else g.friction
                    coup = e.material.coup_friction if e.material.coup_friction is not None else friction
                    geoms.append(dict(type=g.type, link=li, pos=g.pos, quat=g.quat, size=g.size, friction=friction,
                                      coup_friction=coup,
                                      restitution=e.material.restitution,
                                      contype=g.contype, conaffinity=g.conaffinity, entity=e.idx, desc=g))
            for k in range(dof0, len(dofs)):
                kp0.append(0.0)
                kv0.append(0.0)
            for act in robot.actuators:
                if act.joint in joint_names:
                    d = joints[joint_names[act.joint]]["dof"]
                    kp0[d], kv0[d] = act.kp, act.kv
                    if act.forcerange is not None:
                        dofs[d]["force"] = tuple(act.forcerange)
            for td in robot.tendons:
                entries = []
                for name, coef in td.joints:
                    jt = joints[joint_names[name]]
                    if jt["type"] not in (HINGE, SLIDE):
                        raise gs.OptionError(f"entity {e.idx} ({e.robot.name}): tendon {td.name!r} runs over joint "
                                             f"{name!r}, which is not a hinge or a slide joint (a fixed tendon's "
                                             "length is sum coef q).")
                    entries.append((jt["dof"], coef))
                spring = td.springlength
                if spring is None:  # the length at the springs' reference positions (MuJoCo's qpos_spring)
                    length = sum(c * dofs[d]["springref"] for d, c in entries)
                    spring = (length, length)
                tendons.append(dict(name=td.name, entries=entries, stiffness=td.stiffness, damping=td.damping,
                                    spring=spring, range=td.range))
            e._setup(link0, len(links), dof0, len(dofs), q0, n_q, link_names[link0:], joints[joint0:], joint0)
        self._links, self._joints, self._dofs, self._geoms = links, joints, dofs, geoms
        self._tendons = tendons
        self._qpos0 = np.array(qpos0, dtype=np.float64)
        self._kp0, self._kv0 = np.array(kp0), np.array(kv0)
        self._compile_arrays()

    def _joint_qpos0(self, jd, body, entity, body_index):
        if jd.type == FREE:
            pos, quat = entity.place(body.pos, body.quat) if body.parent < 0 else (body.pos, body.quat)
            return list(pos) + list(quat)
        if jd.type == BALL:
            return [1.0, 0.0, 0.0, 0.0]
        return [jd.ref]  # (MuJoCo's qpos0: the body where the file places it)

    def _tree_dof_ranges(self):
        """[L, 2]: the dofs of each link's kinematic tree (the links under its topmost ancestor), a range. A
        constraint row on a link only involves its tree's dofs (the mass matrix is block diagonal over trees), so
        its loops run over that range alone. If some tree's dofs are not contiguous, every range is all dofs."""
        links = self._links
        root = _link_roots(links)
        dofs = {}
        for l, k in enumerate(links):
            dofs.setdefault(root[l], []).extend(range(*k["dofs"]))
        ranges = {r: (min(d), max(d) + 1) if d else (0, 0) for r, d in dofs.items()}
        if any(hi - lo != len(dofs[r]) for r, (lo, hi) in ranges.items()):
            ranges = {r: (0, len(self._dofs)) for r in ranges}
        return np.array([ranges[root[l]] for l in range(len(links))], dtype=np.int32).reshape(-1, 2)

    def _compile_arrays(self):
        links, joints, dofs, geoms = self._links, self._joints, self._dofs, self._geoms
        L, J, D, G = len(links), len(joints), len(dofs), len(geoms)
        link_f = np.zeros((max(L, 1), LF_N))
        link_i = np.full((max(L, 1), LI_N), -1, dtype=np.int32)
        last_dof = []
        for l, k in enumerate(links):
            link_f[l, LF_POS:LF_POS + 3] = k["pos"]
            link_f[l, LF_QUAT:LF_QUAT + 4] = k["quat"]
            link_f[l, LF_MASS] = k["mass"]
            link_f[l, LF_COM:LF_COM + 3] = k["com"]
            link_f[l, LF_INERTIA:LF_INERTIA + 9] = np.asarray(k["inertia"]).reshape(9)
            link_f[l, LF_GRAVCOMP] = k["gravcomp"]
            link_f[l, LF_FLUID_IQUAT] = 1.0
            if k["fluid"] is not None and k["mass"] > 0:
                # the equivalent box of the principal inertias (MuJoCo's mj_inertiaBoxFluidModel)
                w, axes = np.linalg.eigh(np.asarray(k["inertia"], dtype=np.float64))
                if np.linalg.det(axes) < 0:
                    axes[:, 2] *= -1
                link_f[l, LF_FLUID_DENSITY] = k["fluid"].density
                link_f[l, LF_FLUID_VISCOSITY] = k["fluid"].viscosity
                link_f[l, LF_FLUID_WIND:LF_FLUID_WIND + 3] = k["fluid"].wind
                link_f[l, LF_FLUID_BOX:LF_FLUID_BOX + 3] = [
                    np.sqrt(max(1e-15, w[(i + 1) % 3] + w[(i + 2) % 3] - w[i]) / k["mass"] * 6.0) for i in range(3)]
                link_f[l, LF_FLUID_IQUAT:LF_FLUID_IQUAT + 4] = mat_to_quat(axes)
            link_i[l, LI_PARENT] = k["parent"]
            link_i[l, LI_JOINT_START], link_i[l, LI_JOINT_END] = k["joints"]
            link_i[l, LI_DOF_START], link_i[l, LI_DOF_END] = k["dofs"]
            own_last = k["dofs"][1] - 1 if k["dofs"][1] > k["dofs"][0] else -1
            last = own_last if own_last >= 0 else (last_dof[k["parent"]] if k["parent"] >= 0 else -1)
            last_dof.append(last)
            link_i[l, LI_LAST_DOF] = last
        trees = self._tree_dof_ranges()
        link_i[:L, LI_TREE_LO:LI_TREE_HI + 1] = trees
        # the width of a compact constraint row: the dofs of two trees (kernels_constraint.set_row_dofs)
        self._row_width = int(max(1, min(D, 2 * int((trees[:, 1] - trees[:, 0]).max(initial=0)))))
        joint_f = np.zeros((max(J, 1), JF_N))
        joint_i = np.full((max(J, 1), JI_N), -1, dtype=np.int32)  # a padding row (no joints) has type -1
        for j, jt in enumerate(joints):
            joint_f[j, JF_POS:JF_POS + 3] = jt["pos"]
            joint_f[j, JF_AXIS:JF_AXIS + 3] = jt["axis"]
            joint_f[j, JF_REF] = jt["ref"]
            joint_i[j] = (jt["type"], jt["q"], jt["dof"])
        dof_f = np.zeros((D, DF_N))
        dof_i = np.zeros((D, DI_N), dtype=np.int32)
        for d, df in enumerate(dofs):
            dof_f[d, DF_DAMPING] = df["damping"]
            dof_f[d, DF_ARMATURE] = df["armature"]
            dof_f[d, DF_STIFFNESS] = df["stiffness"]
            dof_f[d, DF_SPRINGREF] = df["springref"]
            lo, hi = df["range"] if df["range"] is not None else (0.0, 0.0)
            dof_f[d, DF_RANGE_LO], dof_f[d, DF_RANGE_HI] = lo, hi
            dof_f[d, DF_FORCE_LO], dof_f[d, DF_FORCE_HI] = df["force"]
            link = df["link"]
            start = links[link]["dofs"][0]
            parent = d - 1 if d > start else (last_dof[links[link]["parent"]] if links[link]["parent"] >= 0 else -1)
            dof_i[d] = (parent, link, int(df["range"] is not None), df["q"])
        ten_f, ten_i = self._tendon_arrays(trees)
        pairs = self._collision_pairs(last_dof)
        colliding = {g for pair in pairs for g in pair}
        geom_f = np.zeros((max(G, 1), GF_N))
        geom_i = np.zeros((max(G, 1), GI_N), dtype=np.int32)
        rbound = np.zeros(max(G, 1))
        hull_rows = []
        face_loops = {}  # hull_f face row -> its loop (hull_f vertex rows), laid after the rows aligned with hull_f
        for g, gm in enumerate(geoms):
            geom_f[g, GF_POS:GF_POS + 3] = gm["pos"]
            geom_f[g, GF_QUAT:GF_QUAT + 4] = gm["quat"]
            geom_f[g, GF_SIZE:GF_SIZE + 3] = gm["size"]
            geom_f[g, GF_FRICTION] = gm["friction"]
            geom_f[g, GF_RESTITUTION] = gm["restitution"]
            geom_f[g, GF_BCENTRE:GF_BCENTRE + 3] = gm["pos"]
            geom_f[g, GF_MARGIN], geom_f[g, GF_GAP] = gm["desc"].margin, gm["desc"].gap
            geom_i[g, GI_TYPE], geom_i[g, GI_LINK] = gm["type"], gm["link"]
            s = np.asarray(gm["size"])
            rbound[g] = {SPHERE: s[0], CAPSULE: s[0] + s[1], BOX: np.linalg.norm(s),
                         CYLINDER: np.hypot(s[0], s[1])}.get(gm["type"], 0.0)
            hull = gm["desc"].hull() if g in colliding and gm["type"] in (BOX, MESH) else None
            if hull is not None:
                # the bounding sphere about the centre of the hull's box (tighter than about the geom origin)
                lo, hi = hull.vertices.min(axis=0), hull.vertices.max(axis=0)
                centre = (lo + hi) / 2
                rbound[g] = np.linalg.norm(hull.vertices - centre, axis=1).max()
                geom_f[g, GF_HULL_BOX:GF_HULL_BOX + 6] = *centre, *(hi - lo) / 2
                geom_f[g, GF_BCENTRE:GF_BCENTRE + 3] = np.asarray(gm["pos"]) + quat_to_mat(gm["quat"]) @ centre
                v0 = len(hull_rows)
                hull_rows.extend([*v, 0.0] for v in hull.vertices)
                f0 = len(hull_rows)
                for n, d, loop in zip(hull.face_normals, hull.face_offsets, hull.face_loops):
                    face_loops[len(hull_rows)] = [v0 + i for i in loop]
                    hull_rows.append([*n, d])
                geom_i[g, GI_VERT:GI_VERT + 2] = v0, len(hull.vertices)
                geom_i[g, GI_FACE:GI_FACE + 2] = f0, len(hull.face_loops)
        # the broadphase looks as far as a pair's margins and gaps (planes are tested against the other geom's bound)
        reach = geom_f[:, GF_MARGIN] + geom_f[:, GF_GAP]
        rbound += reach + reach.max()
        for ga, gb in pairs:  # margins are modelled between primitives (kernels_collision), not by the hull kernel
            if self._hull_pair(ga, gb) and max(geom_f[ga, GF_MARGIN], geom_f[gb, GF_MARGIN], geom_f[ga, GF_GAP],
                                 geom_f[gb, GF_GAP]) > 0:
                names = [geoms[g]["desc"].name or f"geom {g}" for g in (ga, gb)]
                raise gs.OptionError(f"{self.name}: {names[0]!r} and {names[1]!r} collide through the convex-hull "
                                     "narrowphase (a mesh, an ellipsoid, or two boxes), which has no contact margin; "
                                     "set their margin and gap to 0.")
        if self.sim_options.requires_grad and (geom_f[:, GF_MARGIN].any() or geom_f[:, GF_GAP].any()):
            raise gs.OptionError(f"{self.name}: contact margins and gaps are not available with "
                                 "SimOptions(requires_grad=True); set the geoms' margin and gap to 0.")
        hull_f = np.array(hull_rows, dtype=np.float64).reshape(-1, HF_N) if hull_rows else np.zeros((1, HF_N))
        hull_i = np.zeros((len(hull_f) + sum(len(l) for l in face_loops.values()), HI_N), dtype=np.int32)
        row = len(hull_f)
        for r, loop in face_loops.items():
            hull_i[r] = row, len(loop)
            hull_i[row:row + len(loop), 0] = loop
            row += len(loop)
        pair_i = np.zeros((max(len(pairs), 1), PI_N), dtype=np.int32)
        n_slots, n_sep = 0, 0
        for p, (ga, gb) in enumerate(pairs):
            k = PAIR_SLOTS[(geoms[ga]["type"], geoms[gb]["type"])] if (geoms[ga]["type"], geoms[gb]["type"]) in \
                PAIR_SLOTS else PAIR_SLOTS[(geoms[gb]["type"], geoms[ga]["type"])]
            # the pairs GJK tests (kernels_convex.convex_contacts) keep a separating direction in s_sep[:, PI_SEP]
            gjk = self._hull_pair(ga, gb) and not (geoms[ga]["type"] == geoms[gb]["type"] == BOX) and \
                PLANE not in (geoms[ga]["type"], geoms[gb]["type"])
            pair_i[p] = (ga, gb, n_slots, k, n_sep if gjk else -1)
            n_slots += k
            n_sep += gjk
        # the broadphase: pairs with a plane are tested directly, the others found by sweep and prune over the
        # geoms that take part in them, through a table of the candidate pairs
        pair_lut = np.full((max(G, 1), max(G, 1)), -1, dtype=np.int32)
        plane_pairs, sap_geoms, bound_geoms = [], set(), set()
        for p, (ga, gb) in enumerate(pairs):
            bound_geoms.update((ga, gb))
            if geoms[ga]["type"] == PLANE:
                plane_pairs.append(p)
            else:
                pair_lut[ga, gb] = pair_lut[gb, ga] = p
                sap_geoms.update((ga, gb))
        # never empty (an empty array would be a torch tensor where other scenes pass a Taichi ndarray, and the
        # kernel compiled for one crashed on the other): one geom sweeps nothing, pair -1 is no pair
        self._sap_geoms = np.array(sorted(sap_geoms) or [0], dtype=np.int32)
        plane_pairs = plane_pairs or [-1]
        bound_geoms = np.array(sorted(bound_geoms) or [0], dtype=np.int32)  # (never empty, as above)
        self.n_pairs, self.n_slots = len(pairs), n_slots
        if len(pairs) * KEY_SPAN >= 2**31:
            raise gs.OptionError(f"RigidSolver: {len(pairs)} candidate geom pairs, more than the {2**31 // KEY_SPAN} "
                                 "contact keys can name; narrow them with collision filters (contype/conaffinity) or "
                                 "RigidOptions(enable_self_collision=False).")
        self.collision = bool(self.options.enable_collision and pairs)
        # pairs the mesh kernel handles: with a mesh, or two boxes
        self.n_mesh_pairs = sum(self._hull_pair(ga, gb) for ga, gb in pairs)
        self.n_gjk_pairs = n_sep
        opts, sim = self.options, self.sim_options
        params_f = np.zeros(PF_N)
        params_f[PF_GRAVITY:PF_GRAVITY + 3] = sim.gravity
        params_f[PF_DT], params_f[PF_BAUMGARTE], params_f[PF_SLOP] = sim.substep_dt, opts.baumgarte, opts.contact_slop
        params_f[PF_REG] = opts.regularization
        params_f[PF_TOL] = opts.tolerance if opts.tolerance is not None else \
            (1e-9 if self.float_dtype == torch.float64 else 1e-5)
        params_f[PF_MAX_CORRECTION] = opts.max_correction_velocity
        params_i = np.zeros(PP_N, dtype=np.int32)
        params_i[PP_ITERATIONS] = opts.iterations
        # max_contacts=None: sized from the model, 16 contacts per moving body (a box resting on two others and
        # touched by two more), at least 64; never more than the candidate slots
        moving = sum(1 for k in self._links if k["dofs"][1] > k["dofs"][0])
        # max_collision_pairs counts geom pairs, as in Genesis World, which keeps up to 5 contacts per convex pair
        wanted = (opts.max_contacts if opts.max_contacts is not None else CONTACTS_PER_PAIR * opts.max_collision_pairs
                  if opts.max_collision_pairs is not None else max(64, 16 * moving))
        self.max_contacts = int(max(1, min(max(self.n_slots, 1), wanted)))
        params_i[PP_MAX_CONTACTS] = self.max_contacts
        params_i[PP_COLLISION] = int(self.collision)
        params_i[PP_LIMITS] = int(opts.enable_joint_limit)
        params_i[PP_RK4] = int(opts.integrator == "rk4")
        params_i[PP_TENDONS] = len(self._tendons)
        params_i[PP_CG] = int(opts.constraint_solver == gs.constraint_solver.CG)
        fl, dev = self.float_dtype, self.device

        def t(a, dtype=None):
            return torch.as_tensor(a, dtype=dtype or (torch.int32 if a.dtype.kind == "i" else fl), device=dev).contiguous()

        def nd(a):
            return self._taichi_array(a.shape, "i" if a.dtype.kind == "i" else "f", values=a)

        self._arrays_np = dict(link_f=link_f, link_i=link_i, joint_f=joint_f, joint_i=joint_i, dof_f=dof_f,
                               dof_i=dof_i, geom_f=geom_f, geom_i=geom_i, pair_i=pair_i, ten_f=ten_f, ten_i=ten_i)
        self.model = dict(params_f=nd(params_f), params_i=nd(params_i), link_f=nd(link_f), link_i=nd(link_i),
                          joint_f=nd(joint_f), joint_i=nd(joint_i), dof_f=nd(dof_f), dof_i=nd(dof_i),
                          geom_f=nd(geom_f), geom_i=nd(geom_i), geom_rbound=nd(rbound), hull_f=nd(hull_f),
                          hull_i=nd(hull_i), pair_i=nd(pair_i), pair_lut=nd(pair_lut),
                          plane_pairs=nd(np.array(plane_pairs, dtype=np.int32)),
                          bound_geoms=nd(bound_geoms), ten_f=nd(ten_f), ten_i=nd(ten_i))
        self.n_links, self.n_joints, self.n_dofs, self.n_qs, self.n_geoms = L, J, D, len(self._qpos0), G
        self.n_limited = int(sum(df["range"] is not None for df in dofs)
                             + sum(td["range"] is not None for td in self._tendons))
        # what collider_view needs without reading the Taichi arrays back
        self._geom_f_np, self._last_dof = geom_f, last_dof
        self._geom_type_np = np.array([g["type"] for g in geoms] or [-1], dtype=np.int32)  # -1: a padding row
        self._geom_link_np = [g["link"] for g in geoms] or [0]
        self.dof_q = torch.tensor([df["q"] for df in dofs], dtype=torch.long, device=dev)

    def _hull_pair(self, ga, gb):
        """Whether the pair (ordered as _collision_pairs orders it) goes through the convex-hull narrowphase
        (collide_meshes): a mesh (or ellipsoid), or two boxes."""
        ta, tb = self._geoms[ga]["type"], self._geoms[gb]["type"]
        return tb == MESH or ta == tb == BOX

    def _tendon_arrays(self, trees):
        """ten_f, ten_i (layout): the fixed tendons' parameters and joint entries. A tendon's limit row holds the
        dofs of at most two kinematic trees, as a contact's."""
        T = len(self._tendons)
        K = sum(len(td["entries"]) for td in self._tendons)
        ten_f = np.zeros((max(T + K, 1), TF_N))
        ten_i = np.zeros((max(T + K, 1), TI_N), dtype=np.int32)
        row = T
        for t, td in enumerate(self._tendons):
            tree_set = {tuple(trees[self._dofs[d]["link"]]) for d, _ in td["entries"]}
            if td["range"] is not None and len(tree_set) > 2:
                raise gs.OptionError(f"{self.name}: the limited tendon {td['name']!r} runs over joints of "
                                     f"{len(tree_set)} kinematic trees; a tendon limit can couple at most two.")
            ten_f[t, TF_STIFFNESS], ten_f[t, TF_DAMPING] = td["stiffness"], td["damping"]
            ten_f[t, TF_SPRING_LO], ten_f[t, TF_SPRING_HI] = td["spring"]
            if td["range"] is not None:
                ten_f[t, TF_RANGE_LO], ten_f[t, TF_RANGE_HI] = td["range"]
                ten_f[t, TF_LIMITED] = 1.0
            ten_i[t, TI_START], ten_i[t, TI_COUNT] = row, len(td["entries"])
            for d, coef in td["entries"]:
                ten_i[row, 0], ten_f[row, 0] = d, coef
                row += 1
        return ten_f, ten_i

    def _collision_pairs(self, last_dof):
        """Candidate geom pairs: MuJoCo's contype/conaffinity rule, not on one link or on links welded together
        (no joint between them), not both fixed to the world, not parent-child links unless enabled (links
        welded together count as one, as MuJoCo's weld bodies), not within one entity unless enabled."""
        opts = self.options
        links, geoms = self._links, self._geoms
        weld = []  # the link each link is rigidly attached to: itself if it has dofs or is a base
        for l, k in enumerate(links):
            weld.append(l if k["dofs"][1] > k["dofs"][0] or k["parent"] < 0 else weld[k["parent"]])

        def parent_weld(w):
            return weld[links[w]["parent"]] if links[w]["parent"] >= 0 else -1

        pairs = []
        for a in range(len(geoms)):
            for b in range(a + 1, len(geoms)):
                ga, gb = geoms[a], geoms[b]
                if ga["type"] == gb["type"] == PLANE:
                    continue
                if not (ga["contype"] & gb["conaffinity"] or gb["contype"] & ga["conaffinity"]):
                    continue
                wa, wb = weld[ga["link"]], weld[gb["link"]]
                if wa == wb or (last_dof[wa] < 0 and last_dof[wb] < 0):
                    continue
                if not opts.enable_adjacent_collision and (parent_weld(wa) == wb or parent_weld(wb) == wa):
                    continue
                if ga["entity"] == gb["entity"] and not opts.enable_self_collision:
                    continue
                pairs.append((a, b) if _pair_order(ga["type"], gb["type"]) else (b, a))
        if opts.enable_self_collision and not opts.enable_neutral_collision:
            pairs = self._drop_neutral_overlaps(pairs)
        return pairs

    def _drop_neutral_overlaps(self, pairs):
        """`pairs` without the pairs of one kinematic tree that overlap at qpos0 (RigidOptions'
        enable_neutral_collision; genesis_rigid.neutral), with a warning naming them."""
        links, geoms = self._links, self._geoms
        root = _link_roots(links)
        same_tree = [p for p in pairs if root[geoms[p[0]]["link"]] == root[geoms[p[1]]["link"]]]
        if not same_tree:
            return pairs
        dropped = set(neutral_overlaps(same_tree, geoms, links, self._joints, self._qpos0))
        if dropped:
            names = ", ".join(f"{self._geom_label(a)} / {self._geom_label(b)}" for a, b in sorted(dropped))
            warnings.warn(f"RigidSolver: {len(dropped)} geom pair(s) overlap in the neutral configuration (qpos0) "
                              f"and will not collide: {names}. RigidOptions(enable_neutral_collision=True) keeps "
                              "them.")
        return [p for p in pairs if p not in dropped]

    def _geom_label(self, g):
        """A geom as a warning names it: entity, link and geom name."""
        gm = self._geoms[g]
        entity = next(e for e in self.entities if e.idx == gm["entity"])
        geom = f" geom {gm['desc'].name!r}" if gm["desc"].name else f" geom {g}"
        return f"(entity {entity.idx} link {entity.links[gm['link'] - entity.link_start].name!r}{geom})"

    def state_dims(self):
        quats = [j["q"] + (3 if j["type"] == FREE else 0) for j in self._joints if j["type"] in (FREE, BALL)]
        return {"n_qs": self.n_qs, "n_dofs": self.n_dofs, "n_links": self.n_links, "n_geoms": self.n_geoms,
                "n_contacts": self.max_contacts, "n_limits": max(self.n_limited, 1),
                "qpos_quats": quats}

    def init_state(self, f):
        st = self.state
        st.rules = self._state_rules  # reset(state) and checkpoints meet the rules across entries and fields
        st.at("qpos", f)[:] = torch.as_tensor(self._qpos0, dtype=self.float_dtype)
        st.at("dofs_kp", f)[:] = torch.as_tensor(self._kp0, dtype=self.float_dtype)
        st.at("dofs_kv", f)[:] = torch.as_tensor(self._kv0, dtype=self.float_dtype)
        st.at("contact_key", f)[:] = -1
        dof_f = self._arrays_np["dof_f"]
        for name, col in self.DOF_PARAMS:
            st.at(name, f)[:] = torch.as_tensor(dof_f[:self.n_dofs, col], dtype=self.float_dtype)
        st.at("links_inertial_mass", f)[:] = torch.as_tensor(self._arrays_np["link_f"][:self.n_links, LF_MASS],
                                                             dtype=self.float_dtype)
        st.at("geoms_friction_ratio", f)[:] = 1.0
        self._allocate_scratch()
        self._choose_launch_mode()
        self.kinematics(f)

    def _taichi_array(self, shape, kind="f", element=(), values=None):
        """Zeros (or `values`) as a Taichi ndarray of `element`-shaped vectors or matrices (() scalars): through
        Taichi's own launch path (GENESIS_CORE_BOUND_LAUNCH=0) a Taichi-ndarray argument costs ~3 us against ~9 us
        for a torch tensor, and the substep takes dozens. An empty array (Taichi has none) is a torch tensor:
        kernels take either."""
        dtype = ti.i32 if kind == "i" else (ti.f64 if self.float_dtype == torch.float64 else ti.f32)
        if 0 in shape:
            return torch.zeros(tuple(shape) + tuple(element), dtype=torch.int32 if kind == "i" else self.float_dtype,
                               device=self.device)
        if len(element) == 1:
            a = ti.Vector.ndarray(element[0], dtype, shape=tuple(shape))
        elif len(element) == 2:
            a = ti.Matrix.ndarray(element[0], element[1], dtype, shape=tuple(shape))
        else:
            a = ti.ndarray(dtype, shape=tuple(shape))
        if values is None:
            a.fill(0)
        else:
            a.from_numpy(np.ascontiguousarray(values, dtype=np.int32 if kind == "i" else
                                              (np.float64 if dtype == ti.f64 else np.float32)))
        return gs.runtime.track_taichi_array(a)

    def _allocate_scratch(self):
        B, L, J, D = self.batch, max(self.n_links, 1), max(self.n_joints, 1), max(self.n_dofs, 1)
        self._fk_key, self._fk_tensors = None, (self.state.qpos, self.state.links_pos, self.state.links_quat)
        C = self.max_contacts
        R = 3 * C + self.n_limited

        def z(*shape, element=(), kind="f"):
            return self._taichi_array(shape, kind, element)

        v3, v6, m3 = (3,), (6,), (3, 3)
        # the broadphase's sweep order and axis, kept from substep to substep
        order = np.tile(self._sap_geoms, (B, 1))
        sap, sap_axis = self._taichi_array(order.shape, "i", values=order), z(B, kind="i")
        # finish_contacts' table, empty (-1) between its calls
        n_hash = 1 << (HASH_FACTOR * C - 1).bit_length()
        table = self._taichi_array((B, n_hash), "i", values=np.full((B, n_hash), -1))
        self.scratch = dict(
            s_qs=z(1, B, max(self.n_qs, 1)), s_vs=z(1, B, D), s_lpos=z(1, B, L, element=v3),
            s_lquat=z(1, B, L, element=(4,)), s_R=z(B, L, element=m3), s_com=z(B, L, element=v3),
            s_janchor=z(B, J, element=v3), s_jaxis=z(B, J, element=v3), s_cdof=z(B, D, element=v6),
            s_cdof_dot=z(B, D, element=v6), s_cvel=z(B, L, element=v6), s_cacc=z(B, L, element=v6),
            s_cfrc=z(B, L, element=v6), s_crb_m=z(B, L), s_crb_mc=z(B, L, element=v3), s_crb_io=z(B, L, element=m3),
            s_mass=z(B, D, D), s_dof=z(B, D, SD_SWEEP + 1), s_J=z(B, R, self._row_width), s_W=z(B, R, self._row_width),
            s_row_f=z(B, R, RF_N),
            s_row_i=z(B, R, RI_N, kind="i"),
            # differentiable mode: the impulses after each sweep of the two passes, for the constraint stage's
            # reverse (kernels_constraint); a placeholder otherwise
            s_hist=z(1, 1, 1),
            s_geom_f=z(B, max(self.n_geoms, 1), 2, element=v3),
            s_near_i=z(B, self.n_mesh_pairs + 1, kind="i"), s_nar_f=z(B, NAR_ROWS, NF_N),
            s_nar_i=z(B, NAR_ROWS, NI_N, kind="i"), s_sep=z(B, max(self.n_gjk_pairs, 1), 3),
            s_sap=sap, s_sap_axis=sap_axis, s_hash=table,
            # the contact pool (kernels_collision), read from Python (the contacts of the last substep): torch
            s_con_f=torch.zeros((B, C, CF_N), dtype=self.float_dtype, device=self.device),
            s_con_i=torch.zeros((B, CI_N, max(C, CM_SETTLED + 1)), dtype=torch.int32, device=self.device))
        # the dofs' parameters per environment, as the kernels read them: the model's, with the columns of the
        # state's dofs_* parameters (_sync_dof_params)
        base = self._arrays_np["dof_f"][:self.n_dofs]
        self.model["dof_f"] = self._taichi_array((B, self.n_dofs, DF_N), "f",
                                                 values=np.broadcast_to(base, (B,) + base.shape))
        self._dof_params_seen = self._dof_params_values = None
        # the links' inertial columns and the geoms' friction per environment (_sync_link_params)
        link_f = self._arrays_np["link_f"]
        self.model["link_f"] = self._taichi_array((B,) + link_f.shape, "f",
                                                  values=np.broadcast_to(link_f, (B,) + link_f.shape))
        mu = self._geom_f_np[:, GF_FRICTION]
        self.model["geom_mu"] = self._taichi_array((B, len(mu)), "f", values=np.broadcast_to(mu, (B, len(mu))))
        self._link_params_seen = self._link_params_values = None
        self._args = self._reverse_args = None
        self.adjoint = self._allocate_adjoints() if self.sim_options.requires_grad else None

    def _allocate_adjoints(self):
        """Differentiable mode: the reverse kernels' per-substep arrays (kernels_step.substep_reverse_*): the
        adjoints g_* of what a substep computes, and the impulses after each sweep of the constraint passes."""
        B, L, J, D = self.batch, max(self.n_links, 1), max(self.n_joints, 1), max(self.n_dofs, 1)
        C, Q = self.max_contacts, max(self.n_qs, 1)
        R = 3 * C + self.n_limited

        def z(*shape, element=()):
            return self._taichi_array(shape, "f", element)

        def t(*shape):  # read from Python afterwards (_parameter_gradients): torch
            return torch.zeros(shape, dtype=self.float_dtype, device=self.device)

        v3, v6, m3 = (3,), (6,), (3, 3)
        return dict(
            s_hist=z(B, 2 * (self.options.iterations + 1), R), g_q1=z(B, Q), g_q2=z(B, Q), g_v=z(B, D),
            g_vu=z(B, D), g_lpos=z(B, L, element=v3), g_lquat=z(B, L, element=(4,)), g_R=z(B, L, element=m3),
            g_com=z(B, L, element=v3), g_janchor=z(B, J, element=v3), g_jaxis=z(B, J, element=v3),
            g_cdof=z(B, D, element=v6), g_cdof_dot=z(B, D, element=v6), g_cvel=z(B, L, element=v6),
            g_mass=z(B, D, D), g_dof=z(B, D, 6), g_con=t(B, C, 8), g_imp_in=z(B, C, 3), g_imp_out=z(B, C, 3),
            g_link_f=t(B, L, LF_N), g_dof_f=t(B, D, DF_N), g_ctrl=t(B, D, 5), g_cacc=z(B, L, element=v6),
            g_cfrc=z(B, L, element=v6), g_crb_m=z(B, L), g_crb_mc=z(B, L, element=v3), g_crb_io=z(B, L, element=m3),
            g_row=z(B, R, RF_N), g_J=z(B, R, self._row_width), g_W=z(B, R, self._row_width), g_vs=z(B, D, 4))

    def memory_per_env(self) -> dict:
        """Bytes per environment of each state field (all its frames) and scratch array: what a batch costs."""
        out = {}
        for name, t in self.state.tensors.items():
            out[name] = t.numel() * t.element_size() // self.batch
        for name, a in self.scratch.items():
            if isinstance(a, torch.Tensor):
                n, size = a.numel(), a.element_size()
            else:
                n = int(np.prod(a.shape)) * int(np.prod(a.element_shape or (1,)))
                size = 8 if a.dtype == ti.f64 else 4
            out[name] = n * size // self.batch
        return out

    # -- launch mode ------------------------------------------------------------------------------------------------
    # Every kernel has two copies: the parallel one, each environment's loop on Taichi's thread pool, and the serial
    # one (kernels_step.SERIAL_OF), the same code on the calling thread. One environment, or a pool of one thread,
    # runs the serial copies. A batch of up to TRIAL_MAX_BATCH environments on the CPU times its first substeps on
    # both copies and keeps the faster (TRIAL_PLAN); not in differentiable mode, whose reverse kernels would then
    # compile twice too (about 20 s each cold on 2 cores), for a forward that is a fraction of the backward. A
    # parallel launch waits until every worker of the pool has woken, and a virtual machine's idle core takes long
    # to wake: on the 2-core machine the panda held at home took 249-256 us a step at 64 environments on the serial
    # copies against 341-393 on the pool, the folding one 519-526 against 628-678, and at 128 the folding one was
    # about even; above 256 the pool always won (more cores: sooner; docs/rigid.md, "Launch mode"). The copies
    # compute the same bits (compiled without fast math; test_rigid_launch_mode), so the choice changes no result,
    # only the time.
    TRIAL_MAX_BATCH = 256
    # the trial: TRIAL_LEAD untimed substeps on the parallel copies (a scene's first substeps are its slowest: the
    # held panda at 512 environments took 2-4x its later time over its first 15 steps on either copy), then blocks
    # serial-parallel-parallel-serial (a drift of the work over the substeps, an arm falling, weighs the same on
    # both): each block runs one untimed substep (a switch of copy leaves the other copy's caches cold, the pool's
    # cores asleep; the first compiles), then TRIAL_BLOCK timed; the copy with the least time of a substep is kept
    # (the least: what it takes when nothing else on the machine gets in its way)
    TRIAL_LEAD = 10
    TRIAL_BLOCK = 4
    TRIAL_PLAN = (((False, False),) * TRIAL_LEAD + (((True, False),) + ((True, True),) * TRIAL_BLOCK)
                  + (((False, False),) + ((False, True),) * TRIAL_BLOCK) * 2
                  + (((True, False),) + ((True, True),) * TRIAL_BLOCK))  # ((serial copy, timed), ...)
    LAUNCH_MODES = ("auto", "parallel", "serial")

    _serial = True  # the kernels run as their serial copies (_kernel)
    _trial = None  # while the launch mode is being chosen: [substeps of TRIAL_PLAN done, serial times, parallel times]
    _trial_result = None  # its outcome, {"serial_s": least time of a substep, "parallel_s": ...}
    _launch_mode = "auto"

    @property
    def launch_mode(self) -> str:
        """"serial" or "parallel": the copy of the kernels this solver runs now (see TRIAL_PLAN above). Assign
        "serial", "parallel" or "auto" (the default: choose by timing both) to set it; no result depends on it."""
        return "serial" if self._serial else "parallel"

    @launch_mode.setter
    def launch_mode(self, mode):
        if mode not in self.LAUNCH_MODES:
            raise gs.OptionError(f"RigidSolver.launch_mode={mode!r} is not accepted; choose one of "
                                 f"{', '.join(map(repr, self.LAUNCH_MODES))}.")
        self._launch_mode = mode
        self._choose_launch_mode()

    def _choose_launch_mode(self):
        """The copy to run from the batch, the backend and launch_mode; starts the timing trial for "auto"."""
        cpu = gs.runtime.arch in (ti.x64, ti.arm64)
        mode = self._launch_mode
        if mode == "auto":
            if self.batch == 1 or (cpu and ti.lang.impl.current_cfg().cpu_max_num_threads <= 1):
                mode = "serial"
            elif not cpu or self.batch > self.TRIAL_MAX_BATCH or self.sim_options.requires_grad:
                mode = "parallel"
        self._trial = [0, [], []] if mode == "auto" else None
        self._set_serial(self.TRIAL_PLAN[0][0] if mode == "auto" else mode == "serial")

    def _set_serial(self, serial):
        if serial != self._serial:
            self._serial = serial
            self._args = None  # its kernels are the other copy's (the reverse picks its kernels at each launch)

    def _time_trial(self, seconds):
        """A substep of the trial took `seconds`: recorded if timed, then the plan's next copy; at its end, the
        faster copy."""
        trial = self._trial
        serial, timed = self.TRIAL_PLAN[trial[0]]
        if timed:
            trial[1 if serial else 2].append(seconds)
        trial[0] += 1
        if trial[0] < len(self.TRIAL_PLAN):
            self._set_serial(self.TRIAL_PLAN[trial[0]][0])
            return
        self._trial = None
        serial, parallel = min(trial[1]), min(trial[2])
        self._trial_result = {"serial_s": serial, "parallel_s": parallel}
        self._set_serial(serial <= parallel)

    # -- stepping ---------------------------------------------------------------------------------------------------

    def _kernel(self, kernel):
        """The kernel's copy this solver runs (launch_mode): the parallel one, or its serial copy."""
        return kernels_step.SERIAL_OF[kernel] if self._serial else kernel

    @property
    def _launch(self):
        """The launcher of every kernel but a plain substep's own (_step_launch): such a kernel may write the scratch
        the last substep's final kinematics left, so the next substep computes them again (_fresh_kinematics)."""
        self._fk_key = None
        return self._step_launch

    @property
    def _step_launch(self):
        if "_launcher" not in self.__dict__:
            self._launcher = Launcher()
        return self._launcher

    _fk_key = None  # _kinematics_key of the frame whose kinematics the scratch holds, if a plain substep left them

    def _kinematics_key(self, f):
        """What the kinematics of frame f in the scratch (s_R, s_com, s_janchor, s_jaxis; the substep's final
        forward_kinematics writes them) depend on: the frame, the state tensors it reads and writes (a reset, a
        setter or a checkpoint writes them in place, which moves their version counters; the kernels' writes do
        not) and the links' parameters (_sync_link_params)."""
        q, pos, quat = self._fk_tensors  # (the state's tensors are never replaced; a new scratch drops the key)
        return f, q._version, pos._version, quat._version, self._link_params_seen

    def _fresh_kinematics(self, f) -> int:
        """1 if the scratch holds the kinematics of frame f as a plain substep ending there left them, with nothing
        written since: the substep and `collide` then take them instead of computing them again (the same code on
        the same bits gives the same values, so a trajectory does not depend on it); else 0."""
        return int(self._fk_key is not None and self._fk_key == self._kinematics_key(f))

    def kinematics(self, f, envs_idx=None):
        """The link poses of frame f from its qpos; envs_idx (a long tensor): only those environments' poses change,
        the others are put back as they were."""
        self._sync_link_params()
        m, s, st = self.model, self.scratch, self.state
        keep = None
        if envs_idx is not None and self.batch > 1:
            keep = st.at("links_pos", f).clone(), st.at("links_quat", f).clone()
        self._launch(self._kernel(kernels_step.kinematics), f, st.qpos, st.links_pos, st.links_quat, m["link_f"], m["link_i"],
                     m["joint_f"], m["joint_i"], s["s_R"], s["s_com"], s["s_janchor"], s["s_jaxis"])
        if keep is not None:
            others = torch.ones(self.batch, dtype=torch.bool, device=keep[0].device)
            others[envs_idx.to(keep[0].device)] = False
            st.at("links_pos", f)[others] = keep[0][others]
            st.at("links_quat", f)[others] = keep[1][others]

    def _collide(self, f, fresh=0):
        """Contacts at the link poses of frame f into s_con_f / s_con_i: primitive pairs, then mesh pairs. fresh:
        the scratch holds frame f's rotations (_fresh_kinematics)."""
        fn, (collide, collide_meshes, _), (a_collide, a_meshes, _, _) = self.frames.next(f), *self._step_args()
        # (of the kinematics' scratch, these write only frame f's rotations, the values the kinematics give them:
        # they keep _fresh_kinematics' key)
        launch = self._step_launch
        launch(collide, f, fn, fresh, *a_collide)
        if collide_meshes is not None:
            launch(collide_meshes, f, fn, *a_meshes)
        self._n_collides += 1
        if not self._contacts_warned and self._n_collides % self.CONTACT_CHECK_EVERY == 1:
            self._check_contact_capacity()

    def _check_contact_capacity(self):
        """Warn once when an environment has more contacts than the pool holds: the deepest are kept, the others
        dropped (bodies may sink through each other)."""
        found = int(self.scratch["s_con_i"][:, CI_META, 1].max())
        if found > self.max_contacts:
            self._contacts_warned = True
            warnings.warn(f"RigidSolver: {found} contacts in one environment, more than max_contacts="
                          f"{self.max_contacts}; the deepest {self.max_contacts} are kept and bodies may sink "
                          f"through each other. Raise the limit: gs.Scene(rigid_options=gs.options.RigidOptions("
                          f"max_contacts={2 * found})).", stacklevel=2)

    def _sync_dof_params(self):
        """Hand the state's dofs_* parameters to the kernels (and the differentiable step) after they changed (a
        setter, a reset, a checkpoint): checked by the tensors' version counters, so an unchanged state costs
        nothing."""
        st = self.state
        tensors = [st.tensors[name] for name, _ in self.DOF_PARAMS]
        key = _versions(tensors)
        if key == self._dof_params_seen:
            return
        if _same_values(tensors, self.__dict__.get("_dof_params_values")):  # rewritten with the same values (a
            self._dof_params_seen = key  # backward's restore of each substep's frame): nothing to hand over
            return
        self._dof_params_values = [t.detach().clone() for t in tensors]
        found = self._param_rule({"dofs_force_lo": st.tensors["dofs_force_lo"],
                                  "dofs_force_hi": st.tensors["dofs_force_hi"]})
        if found is not None:
            raise gs.InvalidStateError(st.entry_message("step", *found))
        if self.n_dofs:
            arr = np.array(np.broadcast_to(self._arrays_np["dof_f"][:self.n_dofs], (self.batch, self.n_dofs, DF_N)))
            for (name, col), t in zip(self.DOF_PARAMS, tensors):
                arr[:, :, col] = t.detach().double().cpu().numpy()
            self.model["dof_f"].from_numpy(arr.astype(self._np_float))
        self._dof_params_seen = key

    _applied_zeroed = None  # (id, version) of links_applied_wrench right after process_input zeroed it
    _step_zero = None  # (id, version) of links_step_wrench when it was last seen to be zero
    _wrench_any = (None, False)  # ((id, version) of links_step_wrench, whether it holds a non-zero wrench)

    def process_input(self):
        """The wrenches applied since the last step act during this one, as in Genesis World: they move from
        links_applied_wrench to links_step_wrench (each substep applies wrench * dt), replacing the last step's.
        Nothing to do (no tensor touched) while nothing is applied and nothing was."""
        st = self.state
        applied, step = st.tensors["links_applied_wrench"], st.tensors["links_step_wrench"]
        if _versions([applied]) == self._applied_zeroed and _versions([step]) == self._step_zero:
            return
        with torch.no_grad():
            step.copy_(applied)
            applied.zero_()
        self._applied_zeroed = _versions([applied])
        self._step_zero = None if bool(step.any()) else _versions([step])

    def _step_wrench(self):
        """links_step_wrench * dt ([B, L, 6]), or None when no wrench acts in this step."""
        step = self.state.tensors["links_step_wrench"]
        key = _versions([step])
        if self._wrench_any[0] != key:
            self._wrench_any = (key, bool(step.any()))
        return step.detach() * self.sim_options.substep_dt if self._wrench_any[1] else None

    def _ext_impulse(self, f):
        """The links' external impulses the substep at frame f applies: the couplings' (the state's frame f), plus
        the applied wrenches of the step (in a copy, so the state's frame keeps what the couplings handed; the state's
        frame f + 1, which the couplings fill next, is cleared here as the kernel clears the tensor it is handed)."""
        st = self.state
        wrench = self._step_wrench()
        if wrench is None:
            return st.links_ext_impulse
        if self.__dict__.get("_ext_copy") is None:
            self._ext_copy = torch.zeros_like(st.links_ext_impulse.detach())
        with torch.no_grad():
            torch.add(st.at("links_ext_impulse", f).detach(), wrench, out=self._ext_copy[f])
            # the kernel clears the copy's frame f + 1; the couplings of this substep fill the state's
            st.at("links_ext_impulse", self.frames.next(f)).zero_()
        return self._ext_copy

    LINK_PARAMS = ("links_inertial_mass", "links_mass_shift", "links_com_shift", "geoms_friction_ratio")

    def _state_rules(self, rows):
        """The rules across entries and fields (StateStore.rules) on rows {name: [R, ...]}: the contact pool's keys
        compact, the entries in use first and then -1 (finish_contacts stops at the first -1; the first key after a
        -1 is named as an entry), then _param_rule's."""
        keys = rows.get("contact_key")
        if keys is not None and keys.numel():
            bad = torch.zeros_like(keys, dtype=torch.bool)
            bad[:, 1:] = (keys[:, 1:] >= 0) & (keys[:, :-1] < 0)
            if bad.any():
                return ("contact_key", *first_entry(bad, keys),
                        "-1 after a -1 (the contact pool's entries in use come first, then -1)")
        return self._param_rule(rows)

    def _param_rule(self, rows):
        """The rules across the parameter fields, on rows {name: [R, ...]} of the fields present: each dof's force
        range lower <= upper; each link's inertial mass >= 0, and > 0 for a moving link that has mass in the model
        (a shift may take the sum lower: the dynamics floor it, _sync_link_params). The first entry that breaks one,
        (name, row, index, value, expected) as StateStore.rules names it, or None."""
        lo, hi = rows.get("dofs_force_lo"), rows.get("dofs_force_hi")
        if lo is not None and hi is not None and lo.numel():
            bad = lo > hi
            if bad.any():
                row, index, value = first_entry(bad, lo)
                return ("dofs_force_lo", row, index, value, f"a value <= dofs_force_hi there "
                        f"({hi[(row, *index)].item()!r}): a force range needs lower <= upper")
        mass0 = rows.get("links_inertial_mass")
        if mass0 is not None and mass0.numel():
            mass = mass0.double()
            m_model = torch.as_tensor(self._arrays_np["link_f"][:self.n_links, LF_MASS], device=mass.device)
            moving = torch.as_tensor([self._last_dof[l] >= 0 for l in range(self.n_links)], device=mass.device)
            bad = (mass < 0) | ((mass <= 0) & moving & (m_model > 0))
            if bad.any():
                return ("links_inertial_mass", *first_entry(bad, mass0),
                        "> 0 for a link that moves and has mass in the model, >= 0 for every link")
        return None

    def _sync_link_params(self):
        """Hand the state's link inertial parameters and friction ratios to the kernels after they changed (as
        _sync_dof_params): mass = inertial mass + shift, at least MIN_MASS_FRACTION of the inertial mass (the
        rotational inertia scaled by it over the model's mass), centre of mass = the model's + shift, each geom's
        friction = the model's times its ratio."""
        st = self.state
        tensors = [st.tensors[name] for name in self.LINK_PARAMS]
        key = _versions(tensors)
        if key == self._link_params_seen:
            return
        if _same_values(tensors, self.__dict__.get("_link_params_values")):
            self._link_params_seen = key
            return
        self._link_params_values = [t.detach().clone() for t in tensors]
        found = self._param_rule(dict(zip(self.LINK_PARAMS[:2], tensors[:2])))
        if found is not None:
            raise gs.InvalidStateError(st.entry_message("step", *found))
        mass0, shift, com_shift, ratio = (t.detach().double().cpu().numpy() for t in tensors)
        L, base = self.n_links, self._arrays_np["link_f"]
        if L:
            mass = np.maximum(mass0 + shift, MIN_MASS_FRACTION * mass0)
            low = mass0 + shift < MIN_MASS_FRACTION * mass0
            if low.any() and not self.__dict__.get("_mass_floor_warned"):
                self._mass_floor_warned = True
                warnings.warn(
                    f"{self.name}: links_mass_shift takes {int(low.sum())} (environment, link) mass(es) below "
                    f"{MIN_MASS_FRACTION:g} of their inertial mass (lowest {float((mass0 + shift).min()):.4g} kg); the "
                    f"dynamics use {MIN_MASS_FRACTION:g} of the inertial mass for them (a mass <= 0 has no motion; "
                    "Genesis World would integrate it as given). get_links_mass_shift reads the shift as set; said once "
                    "per scene.", stacklevel=2)
            m_model = base[:L, LF_MASS]
            arr = np.array(np.broadcast_to(base, (self.batch,) + base.shape))
            scale = np.where(m_model > 0, mass / np.where(m_model > 0, m_model, 1.0), 1.0)
            arr[:, :L, LF_MASS] = mass
            arr[:, :L, LF_COM:LF_COM + 3] = base[None, :L, LF_COM:LF_COM + 3] + com_shift
            arr[:, :L, LF_INERTIA:LF_INERTIA + 9] = base[None, :L, LF_INERTIA:LF_INERTIA + 9] * scale[..., None]
            self.model["link_f"].from_numpy(arr.astype(self._np_float))
        if self.n_geoms:
            mu = self._geom_f_np[None, :self.n_geoms, GF_FRICTION] * ratio
            self.model["geom_mu"].from_numpy(np.ascontiguousarray(mu, dtype=self._np_float))
        self._link_params_seen = key

    @property
    def _np_float(self):
        return np.float64 if self.float_dtype == torch.float64 else np.float32

    def substep_pre_coupling(self, f):
        self._sync_link_params()
        self._sync_dof_params()
        if self._recording():
            self._rerun_substep(f)
            return
        if self._static_world(f):
            self._fk_key = None
            return
        trial = self._trial
        start = time.perf_counter() if trial is not None else 0.0
        fresh, fn = self._fresh_kinematics(f), self.frames.next(f)
        if self.collision:
            self._collide(f, fresh)
            self._log_contacts()
        (_, _, substep), (_, _, head, tail) = self._step_args()
        self._step_launch(substep, f, fn, fresh, *head, self._ext_impulse(f), *tail)
        self._fk_key = self._kinematics_key(fn)
        if trial is not None:
            self._time_trial(time.perf_counter() - start)

    def _log_contacts(self):
        """Differentiable mode, a forward that records: keep the contacts this substep's collision pass found (the
        pool's entries in use, in every environment, and the pool's counts) in the tape. The backward's re-run of
        the substep puts them back (_rerun_substep) instead of colliding again: it saves the collision passes, and
        the re-run has the forward's contacts in the forward's order whatever the broadphase's sweep order and
        axis, which carry over from substep to substep while the re-runs go last first."""
        tape = self.state.tape if self.sim_options.requires_grad else None
        if tape is None or tape.consumed:
            return
        con_f, con_i = self.scratch["s_con_f"], self.scratch["s_con_i"]
        if con_f.device.type == "cpu":  # numpy views: a third of torch's cost per call on these small copies
            views = self.__dict__.get("_pool_views")
            if views is None or views[0] is not con_f:
                views = self._pool_views = (con_f, con_f.numpy(), con_i.numpy())
            _, cf, ci = views
            n = int(ci[:, CI_META, 0].max())
            record = (torch.from_numpy(cf[:, :n].copy()), torch.from_numpy(ci[:, :, :max(n, CM_SETTLED + 1)].copy()))
        else:
            n = int(con_i[:, CI_META, 0].max())
            record = (con_f[:, :n].clone(), con_i[:, :, :max(n, CM_SETTLED + 1)].clone())
        tape.keep(self.state.owner, record)

    def _restore_contacts(self):
        """The backward's re-run of a substep: the contacts the forward's collision pass found (_log_contacts)."""
        record = self.state.tape.take(self.state.owner)
        if record is None:
            raise gs.GenesisError("RigidSolver: the backward found no contacts kept for a substep it re-runs.")
        con_f, con_i = record
        self.scratch["s_con_f"][:, :con_f.shape[1]] = con_f
        self.scratch["s_con_i"][:, :, :con_i.shape[2]] = con_i

    _args = None  # _step_args' tuples, made once per allocation of the scratch arrays
    _reverse_args = None  # _reverse_arrays' lists, the same

    def _step_args(self):
        """The kernels a plain substep launches, (collide, collide_meshes or None, substep) for this batch, and
        their array arguments after the frame indices: (collide's, collide_meshes', substep's before the external
        impulses, substep's after them). Made once: the state's tensors are never replaced, and the model's and
        scratch arrays only by _allocate_scratch, which drops these."""
        if self._args is None:
            st, m, s = self.state, self.model, self.scratch
            meshes = self.n_mesh_pairs > 0
            kernels = (self._kernel(kernels_step.collide),
                       self._kernel(kernels_step.collide_meshes) if meshes else None,
                       self._kernel(kernels_step.substep))
            collide = (int(not meshes), st.links_pos, st.links_quat, st.contact_key, m["geom_f"], m["geom_mu"],
                       m["geom_i"], m["geom_rbound"], m["pair_i"], m["pair_lut"], m["plane_pairs"], m["bound_geoms"],
                       s["s_sap"], s["s_sap_axis"], s["s_R"], s["s_con_f"], s["s_con_i"], s["s_geom_f"], s["s_near_i"],
                       s["s_hash"])
            collide_meshes = (st.links_pos, st.contact_key, m["geom_f"], m["geom_mu"], m["geom_i"], m["hull_f"],
                              m["hull_i"], m["pair_i"], s["s_R"], s["s_con_f"], s["s_con_i"], s["s_near_i"],
                              s["s_nar_f"], s["s_nar_i"], s["s_sep"], s["s_hash"])
            head = (st.qpos, st.dofs_vel, st.dofs_acc, st.links_pos, st.links_quat, st.contact_impulse,
                    st.limit_impulse)
            tail = (st.dofs_ctrl_mode, st.dofs_ctrl_force, st.dofs_ctrl_pos, st.dofs_ctrl_vel, st.dofs_kp,
                    st.dofs_kv, m["params_f"], m["params_i"], m["link_f"], m["link_i"], m["joint_f"], m["joint_i"],
                    m["dof_f"], m["dof_i"], m["ten_f"], m["ten_i"]) + tuple(s[name] for name in (
                        "s_qs", "s_vs", "s_lpos", "s_lquat", "s_R", "s_com", "s_janchor", "s_jaxis", "s_cdof",
                        "s_cdof_dot", "s_cvel", "s_cacc", "s_cfrc", "s_crb_m", "s_crb_mc", "s_crb_io", "s_mass",
                        "s_dof", "s_con_f", "s_con_i", "s_J", "s_W", "s_row_f", "s_row_i", "s_hist"))
            self._args = (kernels, (collide, collide_meshes, head, tail))
        return self._args

    _view_key = None  # the static world's key when the collider view's geometry was computed
    _static = (None, 0)  # (the static world's key at the last full substep, how many such substeps in a row)

    def _static_key(self):
        """What a substep reads of a world without dofs: every state tensor's version (the model's arrays change
        only through the parameter setters, which write state first), except the couplings' impulse accumulator,
        which moves no fixed body."""
        return tuple((id(t), t._version) for name, t in self.state.tensors.items() if name != "links_ext_impulse")

    def _static_world(self, f) -> bool:
        """A world with no dofs and no collisions writes the same frame at every substep (the fixed links' poses,
        no contacts) while nothing it reads changes: once each frame of the ring holds that frame, a substep only
        clears frame fn's impulse accumulator, as the kernel would. Returns whether the substep is done."""
        if self.n_dofs or self.collision:
            return False
        key = self._static_key()
        same = key == self._static[0]
        if same and self._static[1] >= self.frames.n_frames:
            with torch.no_grad():
                self.state.at("links_ext_impulse", self.frames.next(f)).zero_()
            return True
        self._static = (key, self._static[1] + 1 if same else 1)
        return False

    # -- differentiable mode ----------------------------------------------------------------------------------------

    def _recording(self) -> bool:
        """Differentiable mode while the backward re-runs a substep (which then records what its reverse reads). The
        forward of a run, the re-run and the reverse all run the plain kernels' physics, so a differentiable run's
        trajectory is the plain one, bit for bit."""
        if not self.sim_options.requires_grad:
            return False
        tape = self.state.tape
        return tape is not None and tape.consumed

    def _rerun_substep(self, f):
        """The backward's re-run of the substep at frame f on the plain kernels, recording the constraint sweeps'
        impulses (s_hist): every scratch array then holds what the reverse kernels read."""
        fn = self.frames.next(f)
        if self.collision:
            self._restore_contacts()
        (_, _, substep), (_, _, head, tail) = self._step_args()
        if self.__dict__.get("_rerun_launch") is None:  # (its own bound arguments: s_hist is not the forward's)
            self._rerun_launch = Launcher()
        self._rerun_launch(substep, f, fn, 0, *head, self._ext_impulse(f), *tail[:-1], self.adjoint["s_hist"])
        self._fk_key = None
        self._diff_tape = f
        self._view_tape = None

    def _reverse_substep(self, f):
        """The reverse kernels of the substep at frame f (after _rerun_substep): the gradients of frame fn's fields
        into frame f's, the controls' and the parameters'."""
        st, fn = self.state, self.frames.next(f)
        if not self.n_dofs:  # nothing moves: no gradient flows through the substep
            return
        ext = self._ext_copy if self._step_wrench() is not None else st.links_ext_impulse
        run, k = self._launch, self._kernel
        head, dynamics, kinematics = self._reverse_arrays(ext)
        run(k(kernels_step.substep_reverse_head), f, fn, *head)
        run(k(kernels_step.substep_reverse_dynamics), f, *dynamics)
        run(k(kernels_step.substep_reverse_kinematics), f, *kinematics)
        self._parameter_gradients(f)

    def _reverse_arrays(self, ext):
        """The array arguments of the three reverse kernels (after their frame indices), made once per set of arrays
        (the state's gradients, the scratch and adjoint arrays, the external impulses' array)."""
        st, m, s, a = self.state, self.model, self.scratch, self.adjoint
        G = {name: st.tensors[name].grad for name in ("qpos", "dofs_vel", "dofs_acc", "links_pos", "links_quat",
                                                       "contact_impulse", "limit_impulse", "links_ext_impulse")}
        key = (id(s), id(a), id(ext)) + tuple(id(g) for g in G.values())
        cached = self.__dict__.get("_reverse_args")
        if cached is not None and cached[0] == key:
            return cached[1]

        def arrays(names):  # the arrays of kernels_step's reverse kernels, by their parameter names
            return [m[n] if n in m else a[n] if n in a else s[n] if n in s else G[n[2:]] for n in names.split()]

        head = [st.qpos, st.dofs_vel, st.links_pos, st.links_quat, st.contact_impulse] + arrays(
            "params_f params_i link_f link_i joint_f joint_i dof_f dof_i ten_f ten_i s_vs s_R s_com s_janchor "
            "s_jaxis s_cdof s_cdof_dot s_cvel s_mass s_dof s_con_f s_con_i s_J s_W s_row_f s_row_i s_hist g_q1 "
            "g_q2 g_v g_vu g_lpos g_lquat g_R g_com g_janchor g_jaxis g_cdof g_mass g_dof g_con g_imp_in "
            "g_imp_out g_link_f g_dof_f g_row g_J g_W g_vs G_qpos G_dofs_vel G_dofs_acc G_links_pos "
            "G_links_quat G_contact_impulse G_limit_impulse")
        dynamics = [st.qpos, st.dofs_vel, ext, st.dofs_ctrl_mode, st.dofs_ctrl_force, st.dofs_ctrl_pos,
                    st.dofs_ctrl_vel, st.dofs_kp, st.dofs_kv] + arrays(
            "params_f params_i link_f link_i dof_f dof_i ten_f ten_i s_R s_com s_cdof s_cdof_dot s_cvel s_cacc "
            "s_cfrc s_crb_m s_crb_mc s_crb_io s_mass s_dof g_q1 g_v g_R g_com g_cdof g_cdof_dot g_cvel g_mass "
            "g_dof g_link_f g_dof_f g_ctrl g_cacc g_cfrc g_crb_m g_crb_mc g_crb_io G_links_ext_impulse")
        kinematics = [st.qpos, st.dofs_vel, st.links_pos, st.links_quat] + arrays(
            "link_f link_i joint_f joint_i pair_i geom_i geom_f s_con_f s_con_i g_con s_R s_janchor s_jaxis "
            "s_cdof s_cvel g_q1 g_v g_lpos g_lquat g_R g_com g_janchor g_jaxis g_cdof g_cdof_dot g_cvel "
            "g_link_f G_qpos G_dofs_vel")
        self._reverse_args = (key, (head, dynamics, kinematics))
        return head, dynamics, kinematics

    def _reverse_view(self, fn):
        """The gradients of the collider view's arrays (their .grad, which the couplings' backward filled) into those
        of qpos[fn] and dofs_vel[fn] (kernels_step.collider_geometry_reverse); the view's gradients are then zeroed."""
        v, st, m, s, a = self._view, self.state, self.model, self.scratch, self.adjoint
        grads = [getattr(v, n).grad for n in ("geom_pos", "geom_quat", "body_com", "body_lin_vel", "body_ang_vel",
                                               "body_quat")]
        if any(g is not None and bool(g.any()) for g in grads) and self.n_links and self.n_dofs:
            self._launch(self._kernel(kernels_step.collider_geometry_reverse), fn, st.qpos, st.dofs_vel, st.links_pos,
                         st.links_quat, m["link_f"], m["link_i"], m["joint_f"], m["joint_i"], m["geom_f"],
                         m["geom_i"], s["s_R"], s["s_com"], s["s_janchor"], s["s_jaxis"], s["s_cdof"],
                         s["s_cdof_dot"], s["s_cvel"], a["g_q2"], a["g_vu"], a["g_lpos"], a["g_lquat"], a["g_R"],
                         a["g_com"], a["g_janchor"], a["g_jaxis"], a["g_cdof"], a["g_cdof_dot"], a["g_cvel"],
                         a["g_link_f"], *[g.contiguous() for g in grads], st.tensors["qpos"].grad,
                         st.tensors["dofs_vel"].grad)
        for g in grads:
            if g is not None:
                g.zero_()

    def _parameter_gradients(self, f):
        """The controls' and the parameters' gradients from the reverse kernels' adjoints of the arrays the kernels
        read (g_ctrl, g_dof_f, g_link_f, and each contact's friction in g_con), into the state fields that carry a
        gradient."""
        st, a = self.state, self.adjoint
        D, L, G = self.n_dofs, self.n_links, self.n_geoms
        wanted = self._wanted_gradients()
        g_ctrl = a["g_ctrl"][:, :D]
        for k, name in enumerate(("dofs_ctrl_force", "dofs_ctrl_pos", "dofs_ctrl_vel", "dofs_kp", "dofs_kv")):
            if name in wanted:
                st.grad_at(name, f).add_(g_ctrl[..., k])
        g_dof_f = a["g_dof_f"][:, :D]
        for name, col in self.DOF_PARAMS:
            if name in wanted:
                st.grad_at(name, f).add_(g_dof_f[..., col])
        if L and ("links_inertial_mass" in wanted or "links_mass_shift" in wanted):
            # mass = max(inertial mass + shift, MIN_MASS_FRACTION inertial mass); the rotational inertia is the
            # model's times mass / the model's mass (_sync_link_params)
            g_link_f = a["g_link_f"][:, :L]
            base = self._link_base()
            m_model, inertia = base[:, 0], base[:, 1:]
            g_mass = g_link_f[..., LF_MASS] + torch.where(
                m_model > 0, (g_link_f[..., LF_INERTIA:LF_INERTIA + 9] * inertia).sum(-1) / m_model.clamp_min(1e-300),
                torch.zeros_like(m_model))
            mass0, shift = st.tensors["links_inertial_mass"].detach(), st.tensors["links_mass_shift"].detach()
            floored = mass0 + shift < MIN_MASS_FRACTION * mass0
            if "links_inertial_mass" in wanted:
                st.grad_at("links_inertial_mass", f).add_(torch.where(floored, MIN_MASS_FRACTION * g_mass, g_mass))
            if "links_mass_shift" in wanted:
                st.grad_at("links_mass_shift", f).add_(torch.where(floored, torch.zeros_like(g_mass), g_mass))
        if G and self.max_contacts and "geoms_friction_ratio" in wanted:
            # an entry's friction is the larger of its geoms' (kernels_collision.finish_contacts): its gradient
            # goes to that geom's ratio, times the geom's friction in the model
            g_mu = a["g_con"][..., 7]
            con_i = self.scratch["s_con_i"]
            C = self.max_contacts
            active = con_i[:, CI_ACTIVE, :C] == 1
            ga, gb = self._entry_geoms(con_i, C)
            base = torch.as_tensor(self._geom_f_np[:G, GF_FRICTION], dtype=self.float_dtype, device=self.device)
            mu = base * st.tensors["geoms_friction_ratio"].detach()  # (geom_mu, as _sync_link_params wrote it)
            mu_a, mu_b = torch.gather(mu, 1, ga), torch.gather(mu, 1, gb)
            g = torch.where(active, g_mu, torch.zeros_like(g_mu))
            geom = torch.where(mu_a >= mu_b, ga, gb)
            out = torch.zeros_like(st.grad_at("geoms_friction_ratio", f))
            out.scatter_add_(1, geom, g * base[geom])
            st.grad_at("geoms_friction_ratio", f).add_(out)

    def _link_base(self):
        """The model's link masses and rotational inertias [L, 1 + 9] (torch, made once)."""
        if self.__dict__.get("_link_base_t") is None:
            link_f = self._arrays_np["link_f"][:self.n_links]
            self._link_base_t = torch.as_tensor(np.concatenate([link_f[:, LF_MASS:LF_MASS + 1],
                                                                link_f[:, LF_INERTIA:LF_INERTIA + 9]], 1),
                                                dtype=self.float_dtype, device=self.device)
        return self._link_base_t

    def _wanted_gradients(self) -> set:
        """The frameless fields of this solver whose gradient the backward under way hands to a user's tensor: those
        a setter wrote with a tensor that requires grad during the forward (Tape.events; the core reads a frameless
        field's gradient only there). The controls' and parameters' gradients are accumulated for these alone."""
        tape = self.state.tape
        key = (id(tape), tape.k0, tape.k, sum(len(e) for e in tape.events.values()))
        cached = self.__dict__.get("_wanted")
        if cached is None or cached[0] != key:
            names = {name for events in tape.events.values() for store, name, _, _, value in events
                     if store is self.state and value is not None and self.state.has_grad(name)}
            cached = self._wanted = (key, names)
        return cached[1]

    def _entry_geoms(self, con_i, C):
        """The two geoms of each of the first C pool entries, [B, C] each, from their keys (pair * KEY_SPAN +
        feature; an unused entry's key reads as pair 0)."""
        if self.__dict__.get("_pair_i_t") is None:
            self._pair_i_t = torch.as_tensor(self._arrays_np["pair_i"], dtype=torch.long, device=self.device)
        pair_i = self._pair_i_t
        pair = (con_i[:, CI_KEY, :C].long().clamp(min=0) // KEY_SPAN).clamp(max=pair_i.shape[0] - 1)
        return pair_i[pair, PI_GEOM_A], pair_i[pair, PI_GEOM_B]

    def substep_post_coupling_grad(self, f):
        pass  # the couplings read the adjoint of the impulses they add from the view (frame fn's gradient)

    def substep_pre_coupling_grad(self, f):
        """The couplings' gradients of the view (geom poses, centres of mass, velocities at frame fn) into the
        gradients of frame fn; then the substep's adjoint: dL/d(frame f) and the controls' gradients."""
        self.adjoint["g_link_f"].zero_()
        if self._view_tape is not None:
            self._reverse_view(self._view_tape)
            self._view_tape = None
        if self._diff_tape != f:
            raise gs.GenesisError(f"{self.name}: the adjoint of the substep at frame {f} needs its forward first "
                                  "(the core re-runs it before the backward of each substep).")
        self._diff_tape = None
        self._reverse_substep(f)

    # -- the geometry other solvers collide with (genesis_core.coupler.ColliderView) -------------------------------

    def collider_view(self, f) -> ColliderView:
        """Geoms and links after this substep's rigid step (frame f + 1); body_impulse accumulates the impulses
        for `links_ext_impulse` of frame f + 1, which the next substep applies. Mesh geoms are reported with their
        type; a coupling that cannot collide with one skips it.

        In differentiable mode the pose and velocity arrays carry a `.grad` the couplings' backward accumulates
        into (the rigid backward carries it on into the state of frame f + 1), and body_impulse, frame f + 1's
        impulses as in plain mode, has frame f + 1's gradient as its `.grad`: a solver that adds impulses in its
        post-coupling part (after this solver's) adds them to that frame, and reads their adjoint in its reverse
        whatever the solvers' order."""
        fn = self.frames.next(f)
        st = self.state
        if self._view is None:
            B, G, L, fl, dev = self.batch, max(self.n_geoms, 1), max(self.n_links, 1), self.float_dtype, self.device
            geom_f = self._geom_f_np
            body = [link if self._last_dof[link] >= 0 else -1 for link in self._geom_link_np]
            grad = self.sim_options.requires_grad

            def zeros(*shape):
                x = torch.zeros(shape, dtype=fl, device=dev)
                if grad:
                    x.requires_grad_(True)
                    x.grad = torch.zeros_like(x)
                return x

            # what a coupling needs for the effective mass at a contact, and the hulls of the mesh geoms
            links = self._links
            moving = [self._last_dof[l] >= 0 and links[l]["mass"] > 0 for l in range(len(links))]
            inv_mass = [1.0 / links[l]["mass"] if moving[l] else 0.0 for l in range(len(links))] or [0.0]
            inv_inertia = [_inverse_inertia(links[l]["inertia"]) if moving[l] else np.zeros((3, 3))
                           for l in range(len(links))] or [np.zeros((3, 3))]
            self._link_inv_inertia = torch.as_tensor(np.stack(inv_inertia), dtype=fl, device=dev)
            hull_rows, geom_hull = [], np.zeros((G, 2), dtype=np.int32)
            for g, gm in enumerate(self._geoms):
                hull = gm["desc"].hull() if gm["type"] == MESH else None
                if hull is not None:
                    geom_hull[g] = len(hull_rows), len(hull.face_normals)
                    hull_rows.extend([*n, d] for n, d in zip(hull.face_normals, hull.face_offsets))
            self._view = ColliderView(
                body_inv_mass=torch.as_tensor(inv_mass, dtype=fl, device=dev),
                body_inv_inertia=torch.zeros((B, L, 3, 3), dtype=fl, device=dev),
                geom_hull=torch.as_tensor(geom_hull, device=dev),
                hull_planes=torch.as_tensor(np.asarray(hull_rows or [[0.0, 0.0, 1.0, 0.0]], dtype=np.float64),
                                            dtype=fl, device=dev).contiguous(),
                geom_type=torch.as_tensor(self._geom_type_np, dtype=torch.int32, device=dev),
                geom_size=torch.as_tensor(geom_f[:, GF_SIZE:GF_SIZE + 3], dtype=fl, device=dev).contiguous(),
                geom_friction=torch.as_tensor([gm["coup_friction"] for gm in self._geoms] or [0.0], dtype=fl,
                                              device=dev)[:G].contiguous(),
                geom_body=torch.as_tensor(body, dtype=torch.int32, device=dev),
                geom_pos=zeros(B, G, 3), geom_quat=zeros(B, G, 4), body_com=zeros(B, L, 3),
                body_lin_vel=zeros(B, L, 3), body_ang_vel=zeros(B, L, 3),
                body_impulse=zeros(B, L, 6) if grad and not self.n_links else st.at("links_ext_impulse", fn),
                body_quat=zeros(B, L, 4) if grad else None)
        v, m, s = self._view, self.model, self.scratch
        # a static world whose every frame holds the same poses (`_static_world`): the geometry computed then holds
        ready = not self.sim_options.requires_grad and not self.n_dofs and self._static[1] >= self.frames.n_frames
        if ready and self._view_key is not None and self._view_key == self._static[0] == self._static_key():
            v.body_impulse = st.at("links_ext_impulse", fn)
            v.body_quat = st.at("links_quat", fn) if self.n_links else None
            return v
        self._view_key = self._static[0] if ready and self._static[0] == self._static_key() else None
        with torch.no_grad(), torch_one_thread():  # the inverse inertia in world axes at frame fn: R I^-1 R^T
            n_links = self._link_inv_inertia.shape[0]
            if self.n_links:
                rot = quat_to_mat(st.at("links_quat", fn).detach())
                v.body_inv_inertia[:, :n_links] = rot @ self._link_inv_inertia @ rot.transpose(-1, -2)
        if not self.sim_options.requires_grad:
            v.body_impulse = st.at("links_ext_impulse", fn)
            v.body_quat = st.at("links_quat", fn) if self.n_links else None
        elif self.n_links:
            impulse = st.at("links_ext_impulse", fn).requires_grad_(True)
            if st.has_grad("links_ext_impulse"):
                impulse.grad = st.grad_at("links_ext_impulse", fn)
            v.body_impulse = impulse
            with torch.no_grad():
                v.body_quat[:, :self.n_links].copy_(st.at("links_quat", fn))
        self._launch(self._kernel(kernels_step.collider_geometry), fn, st.qpos, st.dofs_vel, st.links_pos, st.links_quat,
                     m["link_f"], m["link_i"], m["joint_f"], m["joint_i"], m["geom_f"], m["geom_i"], s["s_R"],
                     s["s_com"], s["s_janchor"], s["s_jaxis"], s["s_cdof"], s["s_cdof_dot"], s["s_cvel"], v.geom_pos,
                     v.geom_quat, v.body_com, v.body_lin_vel, v.body_ang_vel)
        if self._recording():
            self._view_tape = fn
        return v

    # -- what the cameras draw (genesis_core.render.RenderView) ---------------------------------------------------

    def render_view(self, f):
        """The scene's rigid bodies after this substep (frame f + 1), exact entity ids. Per entity, by its
        surface's `vis_mode` (Genesis World's): "visual" (the default) draws its visuals (URDF <visual> elements,
        MJCF geoms with contype = conaffinity = 0, a Mesh morph's file), meshes as their triangles in the link's
        frame, when it has some; "collision", or an entity without visuals, draws its collision geoms (primitives
        and convex pieces). A visual mesh that cannot be read is warned about once, and its entity drawn by its
        collision geoms. The rigid state and physics are not touched."""
        from genesis_core.render import RenderView

        v = self.collider_view(f)
        fn = self.frames.next(f)
        if getattr(self, "_render_model", None) is None:
            self._render_model = self._visual_model()
        rm = self._render_model
        dev = v.geom_pos.device
        keep = torch.as_tensor(rm["geoms"], dtype=torch.long, device=dev)
        B = v.geom_pos.shape[0]
        geom_pos, geom_quat = v.geom_pos.detach()[:, keep], v.geom_quat.detach()[:, keep]
        geom_type, geom_size, geom_hull = v.geom_type[keep], v.geom_size.detach()[keep], v.geom_hull[keep]
        colors, entity = list(rm["geom_colors"]), list(rm["geom_entity"])
        if rm["prims"] or rm["meshes"]:
            links_pos = self.state.at("links_pos", fn).detach().reshape(B, -1, 3).double()
            links_quat = self.state.at("links_quat", fn).detach().reshape(B, -1, 4).double()

        def posed(items):  # world poses [B, n, 3], [B, n, 4] of items (link, pos, quat, ...) in their link frames
            link = torch.as_tensor([it[0] for it in items], dtype=torch.long, device=dev)
            lp, lq = links_pos[:, link], links_quat[:, link]
            p = torch.as_tensor(np.stack([it[1] for it in items]), dtype=torch.float64, device=dev)
            q = torch.as_tensor(np.stack([it[2] for it in items]), dtype=torch.float64, device=dev)
            # p rotated by the unit quaternion (w, u): p + 2 w (u x p) + 2 u x (u x p), elementwise (a batched
            # matmul of these small shapes costs milliseconds beside the Taichi thread pool)
            lq = torch.nn.functional.normalize(lq, dim=-1)
            w, u = lq[..., :1], lq[..., 1:]
            p = p.expand_as(lp)
            t = 2.0 * torch.linalg.cross(u, p)
            return lp + p + w * t + torch.linalg.cross(u, t), quat_mul(lq, q.expand_as(lq))

        if rm["prims"]:  # visual primitives that are not geoms (URDF <visual> boxes, spheres, ...)
            items = rm["prims"]
            pos, quat = posed(items)
            geom_pos = torch.cat([geom_pos, pos.to(geom_pos.dtype)], dim=1)
            geom_quat = torch.cat([geom_quat, quat.to(geom_quat.dtype)], dim=1)
            geom_type = torch.cat([geom_type, torch.as_tensor([it[3] for it in items], dtype=geom_type.dtype,
                                                              device=dev)])
            geom_size = torch.cat([geom_size, torch.as_tensor(np.stack([it[4] for it in items]),
                                                              dtype=geom_size.dtype, device=dev)])
            geom_hull = torch.cat([geom_hull, torch.zeros((len(items), 2), dtype=geom_hull.dtype, device=dev)])
            colors += [it[5] for it in items]
            entity += [it[6] for it in items]
        view = RenderView(
            geom_type=geom_type, geom_size=geom_size, geom_pos=geom_pos, geom_quat=geom_quat,
            geom_entity=torch.as_tensor(entity, dtype=torch.int32), geom_hull=geom_hull,
            geom_color=torch.as_tensor(np.asarray(colors, dtype=np.float32).reshape(-1, 3)),
            hull_planes=None if v.hull_planes is None else v.hull_planes.detach(),
            geom_link=rm["geom_link"], geom_id=rm["geom_id"])
        if rm["meshes"]:
            view.mesh_pos, view.mesh_quat = posed(rm["meshes"])
            view.mesh_verts, view.mesh_faces, view.mesh_range = rm["mesh_arrays"]
            view.mesh_entity, view.mesh_color = rm["mesh_entity"], rm["mesh_color"]
            view.mesh_link, view.mesh_id = rm["mesh_link"], rm["mesh_id"]
        return view

    def _visual_model(self) -> dict:
        """What render_view draws, fixed at the first render: the geoms kept (indices, colours, entities), the
        visual primitives and meshes that are not geoms (link, pose in the link frame, ...), and the meshes'
        triangles packed once (the same tensors at every render, so that the renderer keeps their BVH)."""
        from genesis_core.render.view import entity_color

        scene = self.scene
        geoms, geom_colors, geom_entity, prims, meshes, mesh_colors = [], [], [], [], [], []
        verts, faces, ranges = [], [], []
        n_verts = n_faces = 0
        for e in self.entities:
            surface = scene.entity_surface(e.idx) if hasattr(scene, "entity_surface") else None
            options = getattr(surface, "options", None) or {}
            base = entity_color(scene, e.idx)

            def color_of(desc):  # the surface's colour, else the file's, else the palette's
                if options.get("color") is not None or desc.rgba is None:
                    return base
                return np.asarray(desc.rgba, dtype=np.float32)

            index = {id(gm["desc"]): g for g, gm in enumerate(self._geoms) if gm["entity"] == e.idx}
            use_visuals = (options.get("vis_mode", "visual") != "collision"
                           and any(body.visuals for body in e.robot.bodies))
            drawn, e_prims, e_meshes = [], [], []
            if use_visuals:
                try:
                    for bi, body in enumerate(e.robot.bodies):
                        for g in body.visuals:
                            if g.type == MESH and g.mesh_file is not None:
                                e_meshes.append(((e.link_start + bi, g.pos, g.quat),
                                                 _visual_mesh(g.mesh_file, g.mesh_scale), color_of(g)))
                            elif id(g) in index:  # a geom (an MJCF plane, ellipsoid, ...): its own arrays
                                drawn.append((index[id(g)], color_of(g)))
                            elif g.type in GEOM_OF_TYPE:
                                e_prims.append((e.link_start + bi, g.pos, g.quat, GEOM_OF_TYPE[g.type],
                                                np.asarray(g.size, dtype=np.float64), color_of(g), e.idx))
                except Exception as exc:  # an unreadable visual mesh: this entity is drawn by its collision geoms
                    warnings.warn(f"entity {e.idx} ({e.robot.name}): a visual mesh could not be read ({exc}); the "
                                  "cameras draw its collision geometry.", stacklevel=2)
                    use_visuals = False
            if not use_visuals:
                mine = sorted(index.values())
                colliding = [g for g in mine if self._geoms[g]["contype"] or self._geoms[g]["conaffinity"]]
                drawn = [(g, base) for g in (colliding or mine)]
                e_prims, e_meshes = [], []
            for g, color in sorted(drawn, key=lambda x: x[0]):
                geoms.append(g)
                geom_colors.append(color)
                geom_entity.append(e.idx)
            prims += e_prims
            for item, (vv, ff), color in e_meshes:
                meshes.append(item)
                mesh_colors.append((color, e.idx))
                verts.append(vv)
                faces.append(ff + n_verts)
                ranges.append((n_faces, len(ff)))
                n_verts += len(vv)
                n_faces += len(ff)
        out = dict(geoms=geoms, geom_colors=geom_colors, geom_entity=geom_entity, prims=prims, meshes=meshes)
        # segmentation: each drawn element's link, and a geom id unique in the solver (a collision geom's index;
        # visual primitives and meshes numbered after the collision geoms)
        n_geoms = len(self._geoms)
        out["geom_link"] = torch.as_tensor([self._geoms[g]["link"] for g in geoms] + [it[0] for it in prims],
                                           dtype=torch.int32)
        out["geom_id"] = torch.as_tensor(list(geoms) + [n_geoms + k for k in range(len(prims))], dtype=torch.int32)
        out["mesh_link"] = torch.as_tensor([it[0] for it in meshes], dtype=torch.int32)
        out["mesh_id"] = torch.as_tensor([n_geoms + len(prims) + k for k in range(len(meshes))], dtype=torch.int32)
        if meshes:
            out["mesh_arrays"] = (torch.as_tensor(np.concatenate(verts), dtype=torch.float64),
                                  torch.as_tensor(np.concatenate(faces), dtype=torch.int32),
                                  torch.as_tensor(ranges, dtype=torch.int32))
            out["mesh_entity"] = torch.as_tensor([c[1] for c in mesh_colors], dtype=torch.int32)
            out["mesh_color"] = torch.as_tensor(np.stack([c[0] for c in mesh_colors]), dtype=torch.float32)
        return out

    # -- external forces (Genesis World's solver-level API: links_idx are the solver's link indices) --------------

    def apply_links_external_force(self, force, links_idx=None, envs_idx=None, ref="link_origin", local=False):
        """Apply `force` (N, `([n_envs,] n_links, 3)`, or one 3-vector for all) to the links `links_idx` (None:
        all) during the next step: at each link frame's origin (ref="link_origin", Genesis World's default) or
        at its centre of mass (ref="link_com"); world axes, or the link's own (local=True). Forces applied before
        one step add up; the step applies them at every substep and then they are gone."""
        self._apply_wrench(force, links_idx, envs_idx, ref, local, torque=False)

    def apply_links_external_torque(self, torque, links_idx=None, envs_idx=None, ref="link_origin", local=False):
        """Apply `torque` (N m) to the links during the next step, as apply_links_external_force (a torque acts
        the same about any point: ref is accepted for Genesis World's scripts)."""
        self._apply_wrench(torque, links_idx, envs_idx, ref, local, torque=True)

    @property
    def links_info(self):
        """Genesis World's links_info names, read-only (genesis_rigid.info): inertial_mass, inertial_pos,
        inertial_i."""
        from .info import links_info

        return links_info(self)

    @property
    def dofs_info(self):
        """Genesis World's dofs_info names, read-only (genesis_rigid.info): damping, armature, stiffness, kp, kv,
        force_range, limit."""
        from .info import dofs_info

        return dofs_info(self)

    def get_error_envs_mask(self):
        """Genesis World's: a bool tensor [n_envs], True for the environments the last step left non-finite
        (scene.invalid_envs)."""
        mask = torch.zeros(max(self.scene.n_envs, 1), dtype=torch.bool, device=self.device)
        mask[self.scene.invalid_envs.to(self.device)] = True
        return mask

    def _solver_links(self, links_idx, envs_idx):
        from genesis_core.state import to_index

        links = torch.arange(self.n_links) if links_idx is None else to_index(links_idx, self.n_links, "links_idx")
        envs = None if envs_idx is None else to_index(envs_idx, self.batch, "envs_idx").to(self.device)
        return links.to(self.device), envs

    def get_links_pos(self, links_idx=None, envs_idx=None):
        """Link frame origins `([n_envs,] n, 3)`, world (the solver's link indices, as Genesis World's solver)."""
        links, envs = self._solver_links(links_idx, envs_idx)
        return self.state.get_rows("links_pos", self.frame, envs, (links,))

    def get_links_quat(self, links_idx=None, envs_idx=None):
        links, envs = self._solver_links(links_idx, envs_idx)
        return self.state.get_rows("links_quat", self.frame, envs, (links,))

    def _apply_wrench(self, value, links_idx, envs_idx, ref, local, torque):
        from genesis_core.state import to_index, to_tensor

        what = "apply_links_external_" + ("torque" if torque else "force")
        if ref not in ("link_origin", "link_com"):
            raise gs.OptionError(f"{what}: ref={ref!r} is not accepted: expected 'link_origin' or 'link_com'.")
        links = (torch.arange(self.n_links) if links_idx is None else to_index(links_idx, self.n_links, "links_idx"))
        links = links.to(self.device)
        st, f = self.state, self.frame
        envs = None if envs_idx is None else to_index(envs_idx, self.batch, "envs_idx").to(self.device)
        rows = torch.arange(self.batch, device=self.device) if envs is None else envs
        n_rows = len(rows)
        x = to_tensor(value, self.float_dtype, self.device, what)
        try:
            x = torch.broadcast_to(x, (n_rows, len(links), 3))
        except RuntimeError:
            raise gs.OptionError(f"{what}: expected ([n_envs,] n_links, 3) values for {len(links)} links and "
                                 f"{n_rows} environments, got shape {tuple(x.shape)}.") from None
        if not bool(torch.isfinite(x).all()):
            raise gs.OptionError(f"{what}: the values must be finite.")
        quat = st.at("links_quat", f).detach()[rows][:, links]
        if local:
            x = (quat_to_mat(quat) @ x.unsqueeze(-1)).squeeze(-1)
        wrench = torch.zeros((n_rows, len(links), 6), dtype=self.float_dtype, device=self.device)
        if torque:
            wrench[..., 3:] = x
        else:
            wrench[..., :3] = x
            if ref == "link_origin":
                com = self.link_motion()[0][rows][:, links]
                arm = st.at("links_pos", f).detach()[rows][:, links] - com
                wrench[..., 3:] = torch.cross(arm, x, dim=-1)
        applied = st.tensors["links_applied_wrench"]
        with torch.no_grad():
            applied[rows[:, None], links[None, :]] += wrench

    # -- contacts ----------------------------------------------------------------------------------------------------

    def contacts(self) -> dict:
        """The contacts of the last substep, per environment, as [B, C] arrays (C = the pool's size; `valid` marks
        the entries in use): geom_a, geom_b, link_a, link_b (the solver's indices), position [B, C, 3] (world),
        normal [B, C, 3] (from a to b), force_a, force_b [B, C, 3] (N: the constraint impulses of that substep,
        normal and friction, over its dt; b takes +, a the opposite). Also sweeps [B, 2]: the Gauss-Seidel sweeps
        of that substep's constraint solve, velocity pass and position pass (at most RigidOptions.iterations; 0
        where it had no rows or nothing to correct)."""
        s, st = self.scratch, self.state
        con_f, con_i = s["s_con_f"], s["s_con_i"]
        C = con_f.shape[1]
        n = con_i[:, CI_META, 0].long()
        valid = torch.arange(C, device=self.device)[None, :] < n[:, None]
        geom_a, geom_b = self._entry_geoms(con_i, C)
        normal = con_f[:, :, CF_NORMAL:CF_NORMAL + 3]
        t1, t2 = _tangent_basis(normal)  # kernels_math.tangent_basis's (nan for unused entries: masked below)
        lam = st.at("contact_impulse", self.frame).detach()[:, :C]
        force = (lam[..., :1] * normal + lam[..., 1:2] * t1 + lam[..., 2:3] * t2) / self.sim_options.substep_dt
        zero = torch.zeros_like(force)
        force = torch.where(valid[..., None], force, zero)
        return dict(geom_a=geom_a, geom_b=geom_b,
                    link_a=con_i[:, CI_LINK_A, :C].long(), link_b=con_i[:, CI_LINK_B, :C].long(),
                    position=con_f[:, :, CF_POS:CF_POS + 3].clone(), normal=normal.clone(), force_a=-force,
                    force_b=force, valid=valid, sweeps=con_i[:, CI_META, CM_SWEEPS:CM_SWEEPS + 2].long())

    def link_motion(self):
        """(centre of mass, its linear velocity, angular velocity), each [B, L, 3] world, of every link at the
        current frame (the collider view's kernel, into arrays of their own)."""
        self._sync_link_params()
        f, st, m, s = self.frame, self.state, self.model, self.scratch
        B, L, G, fl, dev = self.batch, max(self.n_links, 1), max(self.n_geoms, 1), self.float_dtype, self.device
        out = self.__dict__.get("_motion")
        if out is None:
            out = self._motion = tuple(torch.zeros(shape, dtype=fl, device=dev) for shape in
                                       ((B, G, 3), (B, G, 4), (B, L, 3), (B, L, 3), (B, L, 3)))
        with torch.no_grad():
            self._launch(self._kernel(kernels_step.collider_geometry), f, st.qpos.detach(), st.dofs_vel.detach(),
                         st.links_pos.detach(), st.links_quat.detach(), m["link_f"], m["link_i"], m["joint_f"],
                         m["joint_i"], m["geom_f"], m["geom_i"], s["s_R"], s["s_com"], s["s_janchor"],
                         s["s_jaxis"], s["s_cdof"], s["s_cdof_dot"], s["s_cvel"], *out)
        n = self.n_links
        return out[2][:, :n].clone(), out[3][:, :n].clone(), out[4][:, :n].clone()
