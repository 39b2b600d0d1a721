"""The rigid model compiler: entity descriptions (genesis_rigid.robots) in, a `RigidModel` out, in NumPy alone.

`compile_model` lays the scene's bodies out as links, joints, dofs, geoms and fixed tendons (parents before
children, each entity's after the previous one's), and packs them into the arrays the kernels read, their columns
named in `layout.py`: the links' frames and inertias, the joints, the dofs' parameters, the geoms, their convex
hulls, the candidate collision pairs with their contact slots, the broadphase's tables and the solver's
parameters. It runs without a Taichi runtime; the solver copies the arrays to the device (`RigidSolver.model`).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

import genesis_core as gs
from genesis_core.rotations import mat_to_quat, quat_to_mat

from .kernels_collision import KEY_SPAN
from .layout import (DF_ARMATURE, DF_DAMPING, DF_FORCE_HI, DF_FORCE_LO, DF_N, DF_RANGE_HI, DF_RANGE_LO, DF_SPRINGREF,
                     DF_STIFFNESS, DI_N, GF_BCENTRE, GF_FRICTION, GF_GAP, GF_HULL_BOX, GF_MARGIN, GF_N, GF_POS,
                     GF_QUAT, GF_RESTITUTION, GF_SIZE, GI_FACE, GI_LINK, GI_N, GI_TYPE, GI_VERT, HF_N, HI_N, JF_AXIS,
                     JF_N, JF_POS, JF_REF, JI_N, LF_COM, LF_FLUID_BOX, LF_FLUID_DENSITY, LF_FLUID_IQUAT,
                     LF_FLUID_VISCOSITY, LF_FLUID_WIND, LF_GRAVCOMP, LF_INERTIA, LF_MASS, LF_N, LF_POS, LF_QUAT,
                     LI_DOF_END, LI_DOF_START, LI_JOINT_END, LI_JOINT_START, LI_LAST_DOF, LI_N, LI_PARENT,
                     LI_TREE_HI, LI_TREE_LO, PF_BAUMGARTE, PF_DT, PF_GRAVITY, PF_MAX_CORRECTION, PF_N, PF_REG, PF_SLOP,
                     PF_TOL, PI_N, PP_CG, PP_COLLISION, PP_ITERATIONS, PP_LIMITS, PP_MAX_CONTACTS, PP_N, PP_RK4,
                     PP_TENDONS, TF_DAMPING, TF_LIMITED, TF_N, TF_RANGE_HI, TF_RANGE_LO, TF_SPRING_HI, TF_SPRING_LO, TF_STIFFNESS,
                     TI_COUNT, TI_N, TI_START)
from .model import (BALL, BOX, CAPSULE, CYLINDER, ELLIPSOID, FREE, HFIELD, HINGE, JOINT_NQ, JOINT_NV, MESH, PLANE,
                    SLIDE, SPHERE)
from .neutral import neutral_overlaps

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
    # an ellipsoid is strictly convex: one point touches (the support point under a plane, a face clipped against
    # its support point, or the EPA witnesses)
    (PLANE, ELLIPSOID): 1, (SPHERE, ELLIPSOID): 1, (CAPSULE, ELLIPSOID): 1, (CYLINDER, ELLIPSOID): 1,
    (BOX, ELLIPSOID): 1, (ELLIPSOID, ELLIPSOID): 1, (ELLIPSOID, MESH): 1,
    # a height field keeps the deepest of its candidates and the four farthest along its frame's x and y axes
    # (kernels_terrain.N_SLOTS)
    **{(HFIELD, t): 5 for t in (SPHERE, CAPSULE, CYLINDER, BOX, ELLIPSOID, MESH)},
}
BIG_FORCE = 1e30
_RANK = {PLANE: 0, HFIELD: 0.5, SPHERE: 1, CAPSULE: 2, CYLINDER: 3, BOX: 4, ELLIPSOID: 5, MESH: 6}


def link_roots(links):
    """Each link's topmost ancestor (itself for a base): the root of its kinematic tree."""
    root = []
    for l, k in enumerate(links):  # parents come first
        root.append(l if k["parent"] < 0 else root[k["parent"]])
    return root


def _pair_order(ta, tb):
    """True if (ta, tb) is the order the narrowphase expects: planes first, then boxes, ellipsoids, meshes last."""
    return _RANK[ta] <= _RANK[tb]


def convex_pair(ta, tb) -> bool:
    """Whether a pair of geom types (ordered as the candidate pairs are) goes through the convex-hull narrowphase
    (collide_meshes), as kernels_collision.narrow_pair routes it: a mesh, an ellipsoid with anything but a plane (a
    plane's contact with it is its support point, found with the primitives), or two boxes. A height field's pairs
    are its own (kernels_terrain)."""
    if ta == HFIELD:
        return False
    return tb == MESH or (tb == ELLIPSOID and ta != PLANE) or ta == tb == BOX


def tree_dof_ranges(links, n_dofs):
    """[L, 2]: the dofs of each link's kinematic tree (the links under its topmost ancestor), a range. A
    constraint row on a link only involves its tree's dofs (the mass matrix is block diagonal over trees), so
    its loops run over that range alone. If some tree's dofs are not contiguous, every range is all dofs."""
    root = link_roots(links)
    dofs = {}
    for l, k in enumerate(links):
        dofs.setdefault(root[l], []).extend(range(*k["dofs"]))
    ranges = {r: (min(d), max(d) + 1) if d else (0, 0) for r, d in dofs.items()}
    if any(hi - lo != len(dofs[r]) for r, (lo, hi) in ranges.items()):
        ranges = {r: (0, n_dofs) for r in ranges}
    return np.array([ranges[root[l]] for l in range(len(links))], dtype=np.int32).reshape(-1, 2)


@dataclasses.dataclass(eq=False)
class RigidModel:
    """A compiled rigid model (NumPy): what `compile_model` made of the scene's entities.

    The descriptions, one dict per element in solver order: `links` (parent, pos, quat, mass, com, inertia,
    gravcomp, fluid, joints and dofs as (start, end) ranges), `joints` (type, q, dof, pos, axis, name, link, ref),
    `dofs` (link, q or -1, damping, armature, stiffness, springref, range or None, force), `geoms` (type, link,
    pos, quat, size, friction, coup_friction, restitution, contype, conaffinity, entity, desc: the parsed geom) and
    `tendons` (name, entries as (dof, coef), stiffness, damping, spring, range). `link_names` names the links;
    `entity_ranges[k]` is entity k's (link start, link end, dof start, dof end, q start, q end, joint start, joint
    end). `qpos0`, `kp0`, `kv0`: the initial generalized positions and PD gains. `arrays`: the packed arrays the
    kernels read, by their kernel parameter names (columns in `layout.py`; arrays never empty: a model without
    joints has one padding row). The counts and sizes follow."""

    links: list
    joints: list
    dofs: list
    geoms: list
    tendons: list
    equalities: list  # dicts: name, kind, obj (two indices), anchor, anchor2, relpose, torquescale, polycoef, ref, active
    link_names: list
    entity_ranges: list
    qpos0: np.ndarray
    kp0: np.ndarray
    kv0: np.ndarray
    arrays: dict
    n_links: int
    n_joints: int
    n_dofs: int
    n_qs: int
    n_geoms: int
    n_pairs: int  # candidate geom pairs
    n_slots: int  # contact slots of all candidate pairs
    n_mesh_pairs: int  # pairs through the convex-hull narrowphase
    n_gjk_pairs: int  # of those, the pairs GJK tests (each keeps a separating direction)
    n_hfield_pairs: int  # pairs with a height field (kernels_step.collide_terrain)
    n_limited: int  # joint and tendon limit rows
    max_contacts: int  # the contact pool's size per environment
    row_width: int  # dofs of a compact constraint row (two kinematic trees)
    collision: bool  # whether any pair can collide
    sap_geoms: np.ndarray  # the geoms the broadphase sweeps (never empty)
    last_dof: list  # each link's last dof, or its nearest ancestor's (-1: welded to the world)
    gravity: tuple = (0.0, 0.0, -9.81)  # m/s^2, world: RigidOptions.gravity, else SimOptions'

    @property
    def dof_q(self) -> list:
        """Each dof's generalized coordinate (hinge and slide), or -1."""
        return [d["q"] for d in self.dofs]

    @property
    def geom_type(self) -> np.ndarray:
        """[max(G, 1)] int32: each geom's type (-1 in the padding row of a model without geoms)."""
        return np.array([g["type"] for g in self.geoms] or [-1], dtype=np.int32)

    @property
    def geom_link(self) -> list:
        return [g["link"] for g in self.geoms] or [0]

    def moving(self, link) -> bool:
        """Whether the link has a dof or an ancestor with one (else it is welded to the world)."""
        return self.last_dof[link] >= 0

    def hull_pair(self, ga, gb) -> bool:
        """Whether the pair (ordered as the candidate pairs are) goes through the convex-hull narrowphase
        (collide_meshes): a mesh, an ellipsoid with anything but a plane, or two boxes."""
        return convex_pair(self.geoms[ga]["type"], self.geoms[gb]["type"])


def joint_qpos0(jd, body, entity) -> list:
    """A joint's initial coordinates (MuJoCo's qpos0): a free joint's the body's pose (a root's placed by the
    entity's morph), a ball joint's the identity, a hinge's or slide's its reference (the body where the file
    places it)."""
    if jd.type == FREE:
        pos, quat = entity.place(body.pos, body.quat) if body.parent < 0 else (body.pos, body.quat)
        return list(pos) + list(quat)
    if jd.type == BALL:
        return [1.0, 0.0, 0.0, 0.0]
    return [jd.ref]


def compile_model(entities, options, sim_options, float64: bool, name: str = "RigidSolver") -> RigidModel:
    """The RigidModel of `entities` (each with .robot, .material, .idx and .place) under the rigid options and the
    scene's sim options; float64: the precision the kernels run in (it sets the default solver tolerance)."""
    c = _Compiler(entities, options, sim_options, float64, name)
    return RigidModel(
        links=c._links, joints=c._joints, dofs=c._dofs, geoms=c._geoms, tendons=c._tendons, equalities=c._equalities,
        link_names=c._link_names,
        entity_ranges=c.entity_ranges, qpos0=c._qpos0, kp0=c._kp0, kv0=c._kv0, arrays=c.arrays, n_links=c.n_links,
        n_joints=c.n_joints, n_dofs=c.n_dofs, n_qs=c.n_qs, n_geoms=c.n_geoms, n_pairs=c.n_pairs, n_slots=c.n_slots,
        n_mesh_pairs=c.n_mesh_pairs, n_gjk_pairs=c.n_gjk_pairs, n_hfield_pairs=c.n_hfield_pairs, n_limited=c.n_limited, max_contacts=c.max_contacts,
        row_width=c._row_width, collision=c.collision, sap_geoms=c._sap_geoms, last_dof=c._last_dof,
        gravity=c.gravity)


class _Compiler:
    """One compilation: the layout (`_describe`), then the arrays (`_compile_arrays`)."""

    def __init__(self, entities, options, sim_options, float64, name):
        self.entities, self.options, self.sim_options, self.float64, self.name = (entities, options, sim_options,
                                                                                   float64, name)
        self.entity_ranges = []
        self._describe()

    def _describe(self):
        so, o = self.sim_options, self.options
        if o.dt is not None and abs(o.dt - so.dt) > 1e-12 * so.dt:
            raise gs.OptionError(f"RigidOptions(dt={o.dt!r}) differs from SimOptions(dt={so.dt!r}): every solver steps "
                                 "with the scene; set the step with SimOptions(dt=...) (RigidOptions(dt=None)).")
        if self.sim_options.requires_grad and self.options.integrator != "euler":
            raise gs.OptionError(f"RigidOptions(integrator={self.options.integrator!r}) is not available with "
                                 "SimOptions(requires_grad=True): the differentiable substep is semi-implicit Euler; "
                                 "use integrator='euler'.")
        if self.sim_options.requires_grad and o.constraint_solver == gs.constraint_solver.CG:
            raise gs.OptionError("RigidOptions(constraint_solver=gs.constraint_solver.CG) is not available with "
                                 "SimOptions(requires_grad=True): the backward differentiates plain Gauss-Seidel "
                                 "sweeps, not the conjugate-gradient steps; leave constraint_solver at its default.")
        links, joints, dofs, geoms, tendons = [], [], [], [], []
        self._equalities = []
        qpos0, kp0, kv0 = [], [], []
        link_names = self._link_names_so_far = []
        n_q = 0
        for e in self.entities:
            robot = e.robot
            link0, dof0, q0, joint0, tendon0 = len(links), len(dofs), n_q, len(joints), len(tendons)
            if getattr(e, "kinematic", False):
                self._describe_kinematic(e, links, geoms, link_names)
                self.entity_ranges.append((link0, len(links), dof0, dof0, q0, q0, joint0, joint0))
                continue
            body_to_link = {}
            joint_names = {}
            for bi, body in enumerate(robot.bodies):
                li = len(links)
                body_to_link[bi] = li
                parent = -1 if body.parent < 0 else body_to_link[body.parent]
                attached = getattr(e, "_attached", None)
                if bi == 0 and attached is not None:  # (RigidEntity.attach: the base hangs on another's link)
                    parent = attached[0].link_start + attached[1]
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
                        # a ball joint's dofs, a free joint's last three: rotation about the axes of its quaternion
                        rot = k - (3 if jd.type == FREE else 0) if not one_to_one else -1
                        pd_q = n_q if one_to_one else (n_q + k if jd.type == FREE and k < 3 else -1)
                        dofs.append(dict(link=li, q=n_q if one_to_one else -1, damping=jd.damping, pd_q=pd_q,
                                         rot=(n_q + (3 if jd.type == FREE else 0), rot) if rot >= 0 else (-1, -1),
                                         armature=jd.armature, stiffness=jd.stiffness if one_to_one else 0.0,
                                         springref=jd.springref, range=rng, force=(-BIG_FORCE, BIG_FORCE)))
                    qpos0.extend(joint_qpos0(jd, body, e))
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
                                      coup_friction=coup, needs_coup=e.material.needs_coup,
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
            self._entity_equalities(e, robot, body_to_link, joint_names, joints, tendons, tendon0)
            self.entity_ranges.append((link0, len(links), dof0, len(dofs), q0, n_q, joint0, len(joints)))
        self._links, self._joints, self._dofs, self._geoms = links, joints, dofs, geoms
        self._tendons = tendons
        self._qpos0 = np.array(qpos0, dtype=np.float64)
        self._kp0, self._kv0 = np.array(kp0), np.array(kv0)
        self._link_names = link_names
        self._compile_arrays()

    @staticmethod
    def _describe_kinematic(e, links, geoms, link_names):
        """A Kinematic entity (genesis_rigid.kinematic): each body a link welded to the world at its pose in the
        initial configuration, massless, its geoms colliding with nothing; no joints, dofs, actuators, tendons or
        equalities (nothing acts on it)."""
        from .kinematic import initial_poses

        poses = initial_poses(e)
        for bi, body in enumerate(e.robot.bodies):
            li = len(links)
            links.append(dict(parent=-1, pos=tuple(poses[0][bi]), quat=tuple(poses[1][bi]), mass=0.0,
                              com=(0.0, 0.0, 0.0), gravcomp=0.0, fluid=None, inertia=np.zeros((3, 3)),
                              joints=(0, 0), dofs=(0, 0), kinematic=True))
            link_names.append(body.name)
            for g in body.geoms:
                geoms.append(dict(type=g.type, link=li, pos=g.pos, quat=g.quat, size=g.size, friction=g.friction,
                                  coup_friction=g.friction, restitution=0.0, contype=0, conaffinity=0, entity=e.idx,
                                  desc=g, kinematic=True))

    def _entity_equalities(self, e, robot, body_to_link, joint_names, joints, tendons, tendon0):
        """The entity's equality constraints (model.EqualityDesc) with their objects as the solver's indices: links
        (connect, weld; -1 the world), the dofs of hinge/slide joints, tendons. What depends on the bodies' poses
        where the file places them (a connect's point on obj2, a weld's point on obj1 and rotation) is computed by
        the solver from its own kinematics at qpos0 (RigidSolver._equality_rest_data); the reference positions and
        lengths are set here, after qpos0."""
        links_of = {self._link_names_so_far[li]: li for li in body_to_link.values()}
        tendon_of = {td["name"]: tendon0 + k for k, td in enumerate(tendons[tendon0:])}
        for eq in robot.equalities:
            what = f"entity {e.idx} ({robot.name}): equality {eq.name!r}"
            if eq.kind in ("connect", "weld"):
                o1, o2 = links_of[eq.obj1], (-1 if eq.obj2 is None else links_of[eq.obj2])
                if o1 == o2:
                    raise gs.ModelFileError(f"{what} relates {robot.body_word} {eq.obj1!r} to itself: expected two "
                                            f"{robot.body_word}s.")
            elif eq.kind == "joint":
                o1 = joints[joint_names[eq.obj1]]["dof"]
                o2 = -1 if eq.obj2 is None else joints[joint_names[eq.obj2]]["dof"]
            else:
                o1, o2 = tendon_of[eq.obj1], (-1 if eq.obj2 is None else tendon_of[eq.obj2])
            self._equalities.append(dict(name=eq.name, kind=eq.kind, obj=(o1, o2), anchor=np.asarray(eq.anchor),
                                         anchor2=eq.anchor2, relpose=eq.relpose, torquescale=float(eq.torquescale),
                                         polycoef=np.asarray(eq.polycoef, dtype=np.float64), active=eq.active,
                                         entity=e.idx, what=what))

    def _equality_refs(self, trees):
        """Each equality's reference positions (lengths) at qpos0, and the two-tree check of a tendon equality
        (its row spans the trees of both tendons' dofs: at most two)."""
        for eq in self._equalities:
            o1, o2 = eq["obj"]
            refs = [0.0, 0.0]
            if eq["kind"] == "joint":
                refs = [self._qpos0[self._dofs[o]["q"]] if o >= 0 else 0.0 for o in (o1, o2)]
            elif eq["kind"] == "tendon":
                tree_set = set()
                for k, o in enumerate((o1, o2)):
                    if o >= 0:
                        entries = self._tendons[o]["entries"]
                        refs[k] = sum(c * self._qpos0[self._dofs[d]["q"]] for d, c in entries)
                        tree_set |= {tuple(trees[self._dofs[d]["link"]]) for d, _ in entries}
                if len(tree_set) > 2:
                    raise gs.ModelFileError(f"{eq['what']}: its tendons run over joints of {len(tree_set)} kinematic "
                                            "trees; a tendon equality can couple at most two.")
            eq["ref"] = refs

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
        trees = tree_dof_ranges(links, D)
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
            dof_i[d] = (parent, link, int(df["range"] is not None), df["q"], df["pd_q"], *df["rot"])
        ten_f, ten_i = self._tendon_arrays(trees)
        self._equality_refs(trees)
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
                         CYLINDER: np.hypot(s[0], s[1]), ELLIPSOID: s.max()}.get(gm["type"], 0.0)
            if gm["type"] == HFIELD and last_dof[gm["link"]] >= 0:
                raise gs.ModelFileError(f"{self.name}: the height field {self._geom_label(g)} is on a moving body; a "
                                        "height field must be static (on the world body or a body welded to it).")
            if gm["type"] == HFIELD:  # its heights as rows of hull_f, its grid's box
                z = np.asarray(gm["desc"].heights, dtype=np.float64)
                nx, ny = z.shape
                geom_f[g, GF_SIZE:GF_SIZE + 3] = gm["size"][0], gm["size"][1], ny
                lo = np.array([0.0, 0.0, z.min()])
                hi = np.array([(nx - 1) * gm["size"][0], (ny - 1) * gm["size"][1], z.max()])
                geom_f[g, GF_HULL_BOX:GF_HULL_BOX + 6] = *(lo + hi) / 2, *(hi - lo) / 2
                geom_i[g, GI_VERT:GI_VERT + 2] = len(hull_rows), nx
                geom_i[g, GI_FACE:GI_FACE + 2] = len(hull_rows), ny
                hull_rows.extend([h, 0.0, 0.0, 0.0] for h in z.ravel())
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
                                     "narrowphase (a mesh, an ellipsoid with anything but a plane, or two boxes), "
                                     "which has no contact margin; set their margin and gap to 0.")
        if self.sim_options.requires_grad and any(gm["type"] == HFIELD for gm in geoms):
            raise gs.OptionError(f"{self.name}: height-field terrain is not available with "
                                 "SimOptions(requires_grad=True): its contacts have no adjoint yet.")
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
        plane_pairs, hfield_pairs, sap_geoms, bound_geoms = [], [], set(), set()
        for p, (ga, gb) in enumerate(pairs):
            bound_geoms.update((ga, gb))
            if geoms[ga]["type"] == PLANE:
                plane_pairs.append(p)
            elif geoms[ga]["type"] == HFIELD:  # (a kernel of their own: kernels_step.collide_terrain)
                hfield_pairs.append(p)
            else:
                pair_lut[ga, gb] = pair_lut[gb, ga] = p
                sap_geoms.update((ga, gb))
        # never empty (an empty array would be a torch tensor where other scenes pass a Taichi ndarray, and the
        # kernel compiled for one crashed on the other): one geom sweeps nothing, pair -1 is no pair
        self._sap_geoms = np.array(sorted(sap_geoms) or [0], dtype=np.int32)
        plane_pairs = plane_pairs or [-1]
        self.n_hfield_pairs = len(hfield_pairs)
        bound_geoms = np.array(sorted(bound_geoms) or [0], dtype=np.int32)  # (never empty, as above)
        self.n_pairs, self.n_slots = len(pairs), n_slots
        if len(pairs) * KEY_SPAN >= 2**31:
            raise gs.OptionError(f"RigidSolver: {len(pairs)} candidate geom pairs, more than the {2**31 // KEY_SPAN} "
                                 "contact keys can name; narrow them with collision filters (contype/conaffinity) or "
                                 "RigidOptions(enable_self_collision=False).")
        self.collision = bool(self.options.enable_collision and pairs)
        # pairs the mesh kernel handles: with a mesh, an ellipsoid (but on a plane), or two boxes (the rows of
        # s_near_i: narrow_pair lists exactly these)
        self.n_mesh_pairs = sum(self._hull_pair(ga, gb) for ga, gb in pairs)
        self.n_gjk_pairs = n_sep
        opts, sim = self.options, self.sim_options
        params_f = np.zeros(PF_N)
        self.gravity = tuple(opts.gravity if opts.gravity is not None else sim.gravity)  # (RigidOptions' own)
        params_f[PF_GRAVITY:PF_GRAVITY + 3] = self.gravity
        params_f[PF_DT], params_f[PF_BAUMGARTE], params_f[PF_SLOP] = sim.substep_dt, opts.baumgarte, opts.contact_slop
        params_f[PF_REG] = opts.regularization
        params_f[PF_TOL] = opts.tolerance if opts.tolerance is not None else \
            (1e-9 if self.float64 else 1e-5)
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
        self.arrays = dict(params_f=params_f, params_i=params_i, link_f=link_f, link_i=link_i, joint_f=joint_f,
                           joint_i=joint_i, dof_f=dof_f, dof_i=dof_i, geom_f=geom_f, geom_i=geom_i, geom_rbound=rbound,
                           hull_f=hull_f, hull_i=hull_i, pair_i=pair_i, pair_lut=pair_lut,
                           plane_pairs=np.array(plane_pairs, dtype=np.int32), bound_geoms=bound_geoms, ten_f=ten_f,
                           hfield_pairs=np.array(hfield_pairs or [-1], dtype=np.int32),
                           ten_i=ten_i)
        self.n_links, self.n_joints, self.n_dofs, self.n_qs, self.n_geoms = L, J, D, len(self._qpos0), G
        self.n_limited = int(sum(df["range"] is not None for df in dofs)
                             + sum(td["range"] is not None for td in self._tendons))
        self._last_dof = last_dof

    def _hull_pair(self, ga, gb):
        """Whether the pair (ordered as _collision_pairs orders it) goes through the convex-hull narrowphase
        (collide_meshes): a mesh, an ellipsoid with anything but a plane, or two boxes."""
        return convex_pair(self._geoms[ga]["type"], self._geoms[gb]["type"])

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
        root = link_roots(links)
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
        geom = f" geom {gm['desc'].name!r}" if gm["desc"].name else f" geom {g}"
        return f"(entity {gm['entity']} link {self._link_names[gm['link']]!r}{geom})"

