"""The per-entity API of the rigid solver. Every getter returns torch tensors on gs.device shaped
`([n_envs,] ...)`; every setter takes `envs_idx` (None: all environments) and leaves the others untouched;
`dofs_idx_local` / `qs_idx_local` / `links_idx_local` index within the entity (None: all of them).

The structure (links, joints, geoms, their indices in the solver's arrays) is known from the parsed description
when the entity is added, as Genesis World's is: `links`, `joints`, `get_link`, `n_dofs`, ... work before
scene.build(); what reads the state (poses, velocities, parameters per environment) needs the built scene."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs
from genesis_core.geoms import GeomKind
from genesis_core.rotations import quat_to_mat as _quat_to_mat
from genesis_core.state import to_index, to_tensor

from .layout import CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY, DF_SPRINGREF, DI_PD_Q, DI_ROT_AXIS, DI_ROT_Q
from .model import BALL, BOX, CAPSULE, CYLINDER, ELLIPSOID, FREE, HINGE, JOINT_NQ, JOINT_NV, MESH, SLIDE, SPHERE

# a quaternion shorter than this is refused by the setters (it names no rotation); a longer one is normalised
MIN_QUAT_NORM = 1e-9
# MuJoCo's mjMINVAL: an inverse weight below it counts as zero (a link that cannot translate or cannot turn)
_MIN_INVWEIGHT = 1e-15


def _posed(link_pos, link_quat, pos, quat):
    """World pose of a frame given in a link's frame: link_pos `[..., 3]`, link_quat `[..., 4]` (w, x, y, z), the
    frame's pos `(3,)` and quat `(4,)` in the link frame."""
    from genesis_core.utils.geom import quat_mul, transform_by_quat

    p = torch.as_tensor(np.asarray(pos, dtype=np.float64), dtype=link_pos.dtype, device=link_pos.device)
    q = torch.as_tensor(np.asarray(quat, dtype=np.float64), dtype=link_quat.dtype, device=link_quat.device)
    return link_pos + transform_by_quat(p.expand_as(link_pos), link_quat), quat_mul(link_quat, q.expand_as(link_quat))


class RigidLink:
    """A link of an entity: `name`, `idx` (in the solver), `idx_local` (in the entity). Its structure (parent,
    joints, geoms, whether it is fixed) is known before scene.build(); its pose and velocity after."""

    def __init__(self, entity, idx_local, name):
        self.entity, self.idx_local, self.name = entity, idx_local, name

    @property
    def idx(self):
        return self.entity.link_start + self.idx_local

    @property
    def _body(self):
        return self.entity.robot.bodies[self.idx_local]

    def _initial_pose(self):
        body = self._body
        if body.parent < 0 and self.entity._attached is None:
            return self.entity.place(body.pos, body.quat)
        return body.pos, body.quat

    @property
    def pos(self) -> np.ndarray:
        """The link's initial position in its parent's frame; a base link's in the world, where its morph places
        it (Genesis World's `link.pos`; the current one: get_pos())."""
        return np.array(self._initial_pose()[0], dtype=np.float64)

    @property
    def quat(self) -> np.ndarray:
        """The link's initial orientation (w, x, y, z) in its parent's frame, as `pos`."""
        return np.array(self._initial_pose()[1], dtype=np.float64)

    def get_pos(self, envs_idx=None):
        """The link frame's origin, world, m, `([n_envs,] 3)` (the solver's links_pos, as the entity's
        get_links_pos reads it)."""
        return self.entity.get_links_pos(links_idx_local=[self.idx_local], envs_idx=envs_idx)[..., 0, :]

    def get_quat(self, envs_idx=None):
        """The link frame's orientation, world, (w, x, y, z), `([n_envs,] 4)`."""
        return self.entity.get_links_quat(links_idx_local=[self.idx_local], envs_idx=envs_idx)[..., 0, :]

    def _attached_parent(self):
        """The link this base hangs on (RigidEntity.attach), or None."""
        attached = self.entity._attached
        if self.idx_local != 0 or attached is None:
            return None
        return attached[0].links[attached[1]]

    @property
    def parent_idx(self) -> int:
        """The solver-wide index of the parent link, -1 for a base (an attached base: the link it hangs on)."""
        parent = self._body.parent
        if parent < 0:
            above = self._attached_parent()
            return above.idx if above is not None else -1
        return self.entity.link_start + parent

    @property
    def root_idx(self) -> int:
        """The solver-wide index of the base of the link's kinematic tree (itself for a base)."""
        bodies, i = self.entity.robot.bodies, self.idx_local
        while bodies[i].parent >= 0:
            i = bodies[i].parent
        above = self.entity.links[i]._attached_parent()
        return above.root_idx if above is not None else self.entity.link_start + i

    @property
    def is_fixed(self) -> bool:
        """True if the link cannot move in the world: neither it nor any link above it has a joint (Genesis World's
        meaning: no joint other than a fixed one on the path to the world)."""
        bodies, i = self.entity.robot.bodies, self.idx_local
        while i >= 0:
            if bodies[i].joints:
                return False
            if bodies[i].parent < 0:
                above = self.entity.links[i]._attached_parent()
                return above.is_fixed if above is not None else True
            i = bodies[i].parent
        return True

    @property
    def joints(self) -> list:
        """The RigidJoints that move this link relative to its parent, in order."""
        return [j for j in self.entity.joints if j.link is self]

    @property
    def n_joints(self) -> int:
        return len(self._body.joints)

    @property
    def n_dofs(self) -> int:
        return sum(JOINT_NV[j.type] for j in self._body.joints)

    @property
    def n_qs(self) -> int:
        return sum(JOINT_NQ[j.type] for j in self._body.joints)

    @property
    def geoms(self) -> list:
        """The link's collision geoms (RigidGeom), in the solver's order."""
        return [g for g in self.entity.geoms if g.link is self]

    @property
    def vgeoms(self) -> list:
        """The link's visual geoms (RigidVisGeom)."""
        return [g for g in self.entity.vgeoms if g.link is self]

    @property
    def n_geoms(self) -> int:
        return len(self._body.geoms)

    @property
    def inertial_mass(self) -> float:
        """The model's mass of the link, kg (the file's; per-environment values: entity.get_links_inertial_mass)."""
        return float(self._body.mass)

    def get_mass(self) -> float:
        """The link's mass (its inertial mass plus its shift) in the first environment, kg; `entity.
        get_links_inertial_mass` reads every environment's."""
        own = [self.idx_local]
        mass = self.entity.get_links_inertial_mass(own) + self.entity.get_links_mass_shift(own)
        return float(mass.reshape(-1)[0])

    def set_mass(self, mass):
        """Set the link's inertial mass (kg, > 0) in every environment; its rotational inertia scales with it."""
        self.entity.set_links_inertial_mass(_positive_number(mass, "RigidLink.set_mass"), [self.idx_local])

    def get_vel(self, envs_idx=None):
        """Linear velocity of the link frame's origin, world, m/s, `([n_envs,] 3)`."""
        return self.entity.get_links_vel([self.idx_local], envs_idx)[..., 0, :]

    def get_ang(self, envs_idx=None):
        """Angular velocity, world, rad/s, `([n_envs,] 3)`."""
        return self.entity.get_links_ang([self.idx_local], envs_idx)[..., 0, :]

    def __repr__(self):
        return f"<RigidLink {self.name!r} of entity {self.entity.idx}>"


class _GeomBase:
    """What collision and visual geoms share: the description they come from, their link, their pose."""

    def __init__(self, link, desc, idx_local):
        self.link, self.desc, self.idx_local = link, desc, idx_local

    @property
    def entity(self):
        return self.link.entity

    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def type(self) -> GeomKind:
        """The geom's shape (genesis_core.geoms.GeomKind: PLANE, SPHERE, CAPSULE, BOX, CYLINDER, MESH, ELLIPSOID)."""
        return GeomKind(self.desc.type)

    @property
    def init_pos(self) -> np.ndarray:
        """Position in the link frame, m (Genesis World's name: the pose it keeps relative to its link)."""
        return np.asarray(self.desc.pos, dtype=np.float64).copy()

    @property
    def init_quat(self) -> np.ndarray:
        """Orientation in the link frame, (w, x, y, z)."""
        return np.asarray(self.desc.quat, dtype=np.float64).copy()

    @property
    def is_fixed(self) -> bool:
        return self.link.is_fixed

    def _pose(self, envs_idx):
        lp, lq = self.link.get_pos(envs_idx), self.link.get_quat(envs_idx)
        return _posed(lp, lq, self.desc.pos, self.desc.quat)

    def get_pos(self, envs_idx=None):
        """The geom frame's origin, world, m, `([n_envs,] 3)`: its link's pose composed with init_pos."""
        return self._pose(envs_idx)[0]

    def get_quat(self, envs_idx=None):
        """The geom frame's orientation, world, (w, x, y, z), `([n_envs,] 4)`."""
        return self._pose(envs_idx)[1]


class RigidGeom(_GeomBase):
    """A collision geom: `idx` indexes the solver's geoms (get_contacts' geom_a / geom_b), `idx_local` the
    entity's. Shape parameters are the file's, as `size` (sphere: radius; capsule: radius, half-length; box:
    half-extents; cylinder: radius, half-height; ellipsoid: semi-axes)."""

    @property
    def idx(self) -> int:
        return self.entity.geom_start + self.idx_local

    @property
    def size(self) -> np.ndarray:
        return np.asarray(self.desc.size, dtype=np.float64).copy()

    @property
    def metadata(self) -> dict:
        """Genesis World's geom metadata: for a height field (gs.morphs.Terrain), "height_field" (the raw heights
        [nx, ny], units of the terrain's vertical_scale) and "horizontal_scale"; empty otherwise."""
        morph = self.entity.morph
        if self.desc.heights is None or not isinstance(morph, gs.morphs.Terrain):
            return {}
        return {"height_field": np.array(morph.raw_heights()), "horizontal_scale": morph.horizontal_scale}

    @property
    def init_verts(self) -> np.ndarray | None:
        """The collision shape's vertices in the geom frame, m, `(n, 3)`: a mesh geom's convex hull (what the
        solver collides), a box's 8 corners; None for a plane and for the round primitives (sphere, capsule,
        cylinder, ellipsoid), which the solver treats as exact shapes (their `size` describes them)."""
        hull = self.desc.hull()
        return None if hull is None else np.asarray(hull.vertices, dtype=np.float64).copy()

    @property
    def init_faces(self) -> np.ndarray | None:
        """The triangles of that shape, `(m, 3)` indices into `init_verts`, counter-clockwise seen from outside
        (None where init_verts is None)."""
        hull = self.desc.hull()
        return None if hull is None else np.asarray(hull.triangles, dtype=np.int64).copy()

    @property
    def friction(self) -> float:
        """The geom's friction coefficient (the entity's material's, where it sets one)."""
        mu = self.entity.material.friction
        return float(mu if mu is not None else self.desc.friction)

    @property
    def contype(self) -> int:
        return int(self.desc.contype)

    @property
    def conaffinity(self) -> int:
        return int(self.desc.conaffinity)

    def __repr__(self):
        return f"<RigidGeom {self.idx} ({self.type.name}) of link {self.link.name!r}>"


class RigidVisGeom(_GeomBase):
    """A visual geom: what the cameras draw for a link (URDF <visual> elements, MJCF geoms of the visible groups, a
    Mesh morph's file; a link of an entity without visuals, or drawn with vis_mode="collision", looks like its
    collision geoms). `idx` numbers the solver's visual geoms, entity by entity, link by link."""

    @property
    def idx(self) -> int:
        return self.entity.vgeom_start + self.idx_local

    def __repr__(self):
        return f"<RigidVisGeom {self.idx} ({self.type.name}) of link {self.link.name!r}>"


def _named(items, name, what, kind):
    """The item of `items` (links or joints) whose name is `name`, or an OptionError listing the names."""
    if name is None:
        raise gs.OptionError(f"{what}: give the {kind}'s name (name=... or uid=...).")
    for item in items:
        if item.name == name:
            return item
    raise gs.OptionError(f"{what}: no {kind} {name!r}; {kind}s: {[i.name for i in items]}.")


def _positive_number(value, what):
    """value as a finite float > 0, or an OptionError naming `what`."""
    try:
        x = float(value) if not isinstance(value, (bool, np.bool_)) else float("nan")
    except (TypeError, ValueError):
        x = float("nan")
    if not (x > 0 and x < float("inf")):
        raise gs.OptionError(f"{what}: expected a finite number > 0 (kg), got {value!r:.60}.")
    return x


class RigidJoint:
    """A joint of an entity, with Genesis World's attributes. `idx` and `dof_start`, `q_start` ... index the
    solver's arrays; `*_idx_local` the entity's (what the entity's `dofs_idx_local` arguments take)."""

    TYPE_NAMES = {FREE: "FREE", BALL: "SPHERICAL", SLIDE: "PRISMATIC", HINGE: "REVOLUTE"}

    def __init__(self, entity, idx_local, desc, idx):
        self.entity = entity
        self._update(idx_local, desc, idx)

    def _update(self, idx_local, desc, idx):
        """(Re)read the joint's place from a layout entry `desc` (type, name, dof, q, link: solver indices)."""
        entity = self.entity
        self.idx_local, self.idx = idx_local, idx
        self.name = desc["name"]
        self.type = desc["type"]
        self.n_dofs, self.n_qs = JOINT_NV[self.type], JOINT_NQ[self.type]
        self.dof_start, self.q_start = desc["dof"], desc["q"]
        self.dof_end, self.q_end = self.dof_start + self.n_dofs, self.q_start + self.n_qs
        self.link = entity._link_objs[desc["link"] - entity.link_start]

    @property
    def type_name(self) -> str:
        """"REVOLUTE", "PRISMATIC", "SPHERICAL" or "FREE" (Genesis World's joint type names)."""
        return self.TYPE_NAMES[self.type]

    @property
    def dofs_idx(self) -> list:
        return list(range(self.dof_start, self.dof_end))

    @property
    def dofs_idx_local(self) -> list:
        return [d - self.entity.dof_start for d in self.dofs_idx]

    @property
    def dof_idx(self):
        """The joint's dof (an int) for a one-dof joint, its list of dofs otherwise (Genesis World's)."""
        return self.dof_start if self.n_dofs == 1 else self.dofs_idx

    @property
    def dof_idx_local(self):
        return self.dof_start - self.entity.dof_start if self.n_dofs == 1 else self.dofs_idx_local

    @property
    def qs_idx(self) -> list:
        return list(range(self.q_start, self.q_end))

    @property
    def qs_idx_local(self) -> list:
        return [q - self.entity.q_start for q in self.qs_idx]

    @property
    def q_idx_local(self):
        return self.q_start - self.entity.q_start if self.n_qs == 1 else self.qs_idx_local

    def get_anchor_pos(self, envs_idx=None):
        """The joint's anchor, world, m, `([n_envs,] 3)`: the point fixed in the parent's frame (after the joints
        before this one on the link) that coincides with the joint; the child turns about it (a hinge, a ball) or
        slides from it. A free joint's anchor is its link's origin. MuJoCo's xanchor, Genesis World's
        get_anchor_pos (which takes no envs_idx: all environments)."""
        return self.entity._joint_frames(envs_idx)[0][..., self.idx - self.entity.joint_start, :]

    def get_anchor_axis(self, envs_idx=None):
        """The joint's axis, world, unit, `([n_envs,] 3)` (a hinge's rotation axis, a slide's direction; a ball or
        free joint's: the frame's z axis), at the current state."""
        return self.entity._joint_frames(envs_idx)[1][..., self.idx - self.entity.joint_start, :]

    def __repr__(self):
        return f"<RigidJoint {self.name!r} ({self.type_name}) of entity {self.entity.idx}>"


class RigidEquality:
    """An equality constraint of an entity's file (MJCF <equality>), with Genesis World's attributes. type: its
    gs.EQUALITY_TYPE code (connect 0, weld 1, joint 2; tendon 3, a kind Genesis World does not load); eq_obj1id,
    eq_obj2id: the solver's indices of what it relates, links for connect and weld (-1: the world), joints for a
    joint equality (-1: none), tendons for a tendon one; eq_data: the slot's `eq_data` row (layout.ED_*) in the
    first environment after build, None before (the points and rotation that depend on where the file places the
    bodies are computed at build). The slot itself is state: get_active/set_active read and switch it per
    environment (RigidSolver's eq_active)."""

    TYPE = {"connect": 0, "weld": 1, "joint": 2, "tendon": 3}

    def __init__(self, entity, idx_local, desc):
        self.entity, self.idx_local, self._desc = entity, idx_local, desc
        self.name = desc.name

    @property
    def solver(self):
        return self.entity.solver

    @property
    def is_built(self) -> bool:
        return bool(getattr(self.entity.scene, "_built", False))

    @property
    def type(self) -> int:
        return self.TYPE[self._desc.kind]

    @property
    def idx(self) -> int:
        """The slot of the solver's equality state (model equalities first, entity by entity); after build."""
        self.entity.scene._require_built("RigidEquality.idx")
        before = sum(1 for eq in self.solver.compiled.equalities if eq["entity"] < self.entity.idx)
        return before + self.idx_local

    def _obj(self, k):
        o = int(self.solver.compiled.equalities[self.idx]["obj"][k])
        if self._desc.kind == "joint" and o >= 0:  # (the slot holds the joint's dof; Genesis World names the joint)
            return next(j.idx for j in self.entity.joints if j.dof_start == o)
        return o

    @property
    def eq_obj1id(self) -> int:
        return self._obj(0)

    @property
    def eq_obj2id(self) -> int:
        return self._obj(1)

    @property
    def eq_data(self):
        if not self.is_built:
            return None
        return self.solver.state.at("eq_data", self.solver.frame)[0, self.idx].clone()

    def get_active(self, envs_idx=None):
        """Whether the constraint acts, `([n_envs,])` bool (RigidSolver's eq_active)."""
        self.entity.scene._require_built("RigidEquality.get_active")
        solver = self.solver
        rows = solver._envs_rows(envs_idx, "RigidEquality.get_active")
        on = solver.state.at("eq_active", solver.frame)[rows, self.idx] != 0
        return on if self.entity.scene.n_envs else on[0]

    def set_active(self, active, envs_idx=None):
        """Switch the constraint on or off in the environments envs_idx (None: all) from the next step on, its
        warm start cleared there; the other environments are untouched."""
        self.entity.scene._require_built("RigidEquality.set_active")
        if not isinstance(active, (bool, np.bool_)):
            raise gs.OptionError(f"RigidEquality.set_active: active={active!r} must be a bool.")
        solver = self.solver
        rows = solver._envs_rows(envs_idx, "RigidEquality.set_active")
        with torch.no_grad():
            solver.state.at("eq_active", solver.frame)[rows, self.idx] = int(bool(active))
            solver.state.tensors["equality_impulse"].detach()[:, rows, self.idx] = 0.0  # (every frame)

    def __repr__(self):
        return f"<RigidEquality {self.name!r} ({self._desc.kind}) of entity {self.entity.idx}>"


def _description_sizes(robot):
    """(links, joints, dofs, qs, geoms) a robot description adds to the solver's arrays (genesis_rigid.compile: one
    link per body; each body's joints, their dofs and qpos, its geoms, in order)."""
    joints = [jd for body in robot.bodies for jd in body.joints]
    return (len(robot.bodies), len(joints), sum(JOINT_NV[j.type] for j in joints),
            sum(JOINT_NQ[j.type] for j in joints), sum(len(body.geoms) for body in robot.bodies))


class RigidEntity(gs.Entity):
    _ranges = None  # once built: (link_start, link_end, dof_start, dof_end, q_start, q_end, joint_start, joint_end)
    _attached = None  # (parent entity, its link's local index) once `attach` hung this entity's base on that link
    _link_objs = None
    _joint_objs = None
    _geom_objs = None
    _vgeom_objs = None

    def _setup(self, link_start, link_end, dof_start, dof_end, q_start, q_end, link_names, joints=(), joint_start=0):
        """At build: the entity's place in the compiled model (genesis_rigid.compile). The link and joint objects
        handed out before the build stay the ones in use."""
        self._ranges = (link_start, link_end, dof_start, dof_end, q_start, q_end, joint_start,
                        joint_start + len(joints))
        self._sync_objects(link_names, joints)

    def _layout(self):
        """(ranges, link names, joint entries) of the entity: the compiled model's once built, before that the
        layout compile_model gives (entities in the order they were added, their descriptions as parsed)."""
        if self._ranges is not None and getattr(self.solver, "compiled", None) is not None:
            m = self.solver.compiled
            r = self._ranges
            return r, m.link_names[r[0]:r[1]], m.joints[r[6]:r[7]]
        starts = np.zeros(5, dtype=np.int64)
        for e in self.solver.entities:
            if e is self:
                break
            sizes = _description_sizes(e.robot)
            if getattr(e, "kinematic", False):  # (its joints are not the model's: genesis_rigid.kinematic)
                sizes = (sizes[0], 0, 0, 0, sizes[4])
            starts += sizes
        l0, j0, d0, q0, _ = (int(x) for x in starts)
        joints, dof, q = [], d0, q0
        for bi, body in enumerate(self.robot.bodies):
            for jd in body.joints:
                joints.append(dict(type=jd.type, name=jd.name, dof=dof, q=q, link=l0 + bi))
                dof, q = dof + JOINT_NV[jd.type], q + JOINT_NQ[jd.type]
        ranges = (l0, l0 + len(self.robot.bodies), d0, dof, q0, q, j0, j0 + len(joints))
        return ranges, [b.name for b in self.robot.bodies], joints

    def _sync_objects(self, link_names, joints):
        """Make the link and joint objects match a layout, keeping those already handed out where they fit."""
        old = self._link_objs or []
        self._link_objs = [old[i] if i < len(old) and old[i].name == name else RigidLink(self, i, name)
                           for i, name in enumerate(link_names)]
        old = {(j.idx_local, j.name): j for j in (self._joint_objs or [])}
        j0 = self.joint_start
        objs = []
        for i, desc in enumerate(joints):
            joint = old.get((i, desc["name"]))
            if joint is None:
                joint = RigidJoint(self, i, desc, j0 + i)
            else:
                joint._update(i, desc, j0 + i)
            objs.append(joint)
        self._joint_objs = objs
        self._geom_objs = self._vgeom_objs = None

    def _objects(self):
        """Before the build the description may still change (a URDF morph's merged links are final at
        add_entity, but another entity added before this one is not): refresh the objects from the layout."""
        if self._ranges is None or self._link_objs is None:
            _, names, joints = self._layout()
            self._sync_objects(names, joints)

    @property
    def links(self) -> list:
        """The entity's RigidLinks, parents before children (available before scene.build())."""
        self._objects()
        return self._link_objs

    @property
    def joints(self) -> list:
        """The entity's RigidJoints in order (available before scene.build())."""
        self._objects()
        return self._joint_objs

    @property
    def base_link(self) -> RigidLink:
        """The entity's first link, the base of its kinematic tree (Genesis World's name)."""
        return self.links[0]

    @property
    def base_joint(self):
        """The base link's first joint (its free joint for a floating base), or None for a base fixed in the world."""
        joints = self.base_link.joints
        return joints[0] if joints else None

    @property
    def geoms(self) -> list:
        """The entity's collision geoms (RigidGeom), link by link, in the solver's order."""
        self._objects()
        if self._geom_objs is None or self._ranges is None:
            self._geom_objs = [RigidGeom(link, g, k) for k, (link, g) in enumerate(
                (link, g) for link, body in zip(self._link_objs, self.robot.bodies) for g in body.geoms)]
        return self._geom_objs

    def _visual_descs(self):
        """(body index, GeomDesc) of what the cameras draw for each link (genesis_rigid.views.render_view's rule:
        its visuals where the entity has some and is not drawn with vis_mode="collision", else its geoms)."""
        surface = self.scene.entity_surface(self.idx) if hasattr(self.scene, "entity_surface") else None
        options = getattr(surface, "options", None) or {}
        bodies = self.robot.bodies
        visual = options.get("vis_mode", "visual") != "collision" and any(b.visuals for b in bodies)
        return [(bi, g) for bi, b in enumerate(bodies) for g in (b.visuals if visual else b.geoms)]

    @property
    def vgeoms(self) -> list:
        """The entity's visual geoms (RigidVisGeom), link by link."""
        self._objects()
        if self._vgeom_objs is None or self._ranges is None:
            self._vgeom_objs = [RigidVisGeom(self._link_objs[bi], g, k)
                                for k, (bi, g) in enumerate(self._visual_descs())]
        return self._vgeom_objs

    @property
    def _free_base(self) -> bool:
        base = self.robot.bodies[0]
        return bool(base.joints) and base.joints[0].type == FREE

    def place(self, pos, quat, morph=None):
        """Compose a base pose with the morph's pose (another morph's: a heterogeneous entity's variant)."""
        from genesis_core.rotations import quat_mul, rotate

        morph = self.morph if morph is None else morph
        return np.asarray(morph.pos) + rotate(morph.quat, pos), quat_mul(morph.quat, quat)

    def attach(self, parent_entity, parent_link_name=None):
        """Genesis World's RigidEntity.attach: hang this entity's base link on the link `parent_link_name` of
        `parent_entity` (None: its last link), rigidly, before scene.build(). The base's own joints (a free base's
        free joint) are removed; the base then sits at this entity's morph pose (pos, quat/euler) in the parent
        link's frame, and the two entities move as one kinematic tree (a gripper on an arm's flange, a tool in a
        finger). Contacts between the base and the parent link are filtered as a parent and child's are. The
        parent must be a rigid entity of the same scene added before this one; an entity is attached once."""
        what = "RigidEntity.attach"
        if getattr(self.scene, "_built", False):
            raise gs.SceneError(f"{what} after scene.build(): attach entities before the build.")
        if self._attached is not None:
            raise gs.OptionError(f"{what}: entity {self.idx} is already attached to entity "
                                 f"{self._attached[0].idx}; an entity is attached once.")
        if not isinstance(parent_entity, RigidEntity) or parent_entity.solver is not self.solver:
            raise gs.OptionError(f"{what}: parent_entity={parent_entity!r} is not a rigid entity of this scene.")
        if parent_entity is self:
            raise gs.OptionError(f"{what}: an entity cannot be attached to itself.")
        if parent_entity.idx > self.idx:
            raise gs.OptionError(f"{what}: the parent (entity {parent_entity.idx}) must be added to the scene before "
                                 f"the attached entity (entity {self.idx}): attach the later one to the earlier.")
        if parent_link_name is None:
            parent_link = parent_entity.links[-1]
        elif isinstance(parent_link_name, str):
            parent_link = parent_entity.get_link(parent_link_name)
        else:
            raise gs.OptionError(f"{what}: parent_link_name={parent_link_name!r} must be a link name (str) or None.")
        base = self.robot.bodies[0]
        base.joints = []  # (its free joint, or whatever joints the file gave the base: the link is welded now)
        self._attached = (parent_entity, parent_link.idx_local)
        self._link_objs = self._joint_objs = self._geom_objs = self._vgeom_objs = None

    # -- sizes and lookup -------------------------------------------------------------------------------------------

    def _range(self, k):
        return (self._ranges if self._ranges is not None else self._layout()[0])[k]

    @property
    def link_start(self) -> int:
        """The solver-wide index of the entity's first link (known before scene.build())."""
        return self._range(0)

    @property
    def link_end(self) -> int:
        return self._range(1)

    @property
    def dof_start(self) -> int:
        return self._range(2)

    @property
    def dof_end(self) -> int:
        return self._range(3)

    @property
    def q_start(self) -> int:
        return self._range(4)

    @property
    def q_end(self) -> int:
        return self._range(5)

    @property
    def joint_start(self) -> int:
        return self._range(6)

    @property
    def joint_end(self) -> int:
        return self._range(7)

    @property
    def geom_start(self) -> int:
        """The solver-wide index of the entity's first collision geom."""
        return int(sum(_description_sizes(e.robot)[4] for e in self.solver.entities[:self._solver_position()]))

    @property
    def geom_end(self) -> int:
        return self.geom_start + self.n_geoms

    @property
    def n_geoms(self) -> int:
        return _description_sizes(self.robot)[4]

    @property
    def vgeom_start(self) -> int:
        """The solver-wide index of the entity's first visual geom (RigidVisGeom.idx)."""
        return sum(len(e._visual_descs()) for e in self.solver.entities[:self._solver_position()])

    @property
    def n_vgeoms(self) -> int:
        return len(self._visual_descs())

    def _solver_position(self) -> int:
        return next(i for i, e in enumerate(self.solver.entities) if e is self)

    @property
    def base_link_idx(self) -> int:
        """The solver-wide index of the entity's base link (Genesis World's name)."""
        return self.link_start

    @property
    def n_links(self):
        return self.link_end - self.link_start

    @property
    def n_dofs(self):
        return self.dof_end - self.dof_start

    @property
    def n_qs(self):
        return self.q_end - self.q_start

    @property
    def n_joints(self):
        return self.joint_end - self.joint_start

    def get_link(self, name=None, uid=None):
        """The link named `name` (Genesis World's `uid` is accepted as a name too); before scene.build() as well."""
        name = name if name is not None else uid
        merged = getattr(getattr(self, "robot", None), "merged", {})
        if name in merged and all(l.name != name for l in self.links):
            raise gs.OptionError(f"get_link: link {name!r} was merged into {merged[name]!r} (it hangs on a fixed "
                                 f"joint and the URDF morph merges such links, as Genesis World does); keep it with "
                                 f"gs.morphs.URDF(..., links_to_keep=[{name!r}]) or merge_fixed_links=False.")
        return _named(self.links, name, "get_link", "link")

    def get_joint(self, name=None, uid=None):
        """The joint named `name` (`uid` accepted as a name): its `dofs_idx_local`, `dof_idx_local`,
        `qs_idx_local`, `dof_start`, ... index the entity's dofs and qpos; before scene.build() as well."""
        return _named(self.joints, name if name is not None else uid, "get_joint", "joint")

    def _local(self, idx, n, what):
        if idx is None:
            return torch.arange(n)
        return to_index(idx, n, what)

    def _dofs(self, dofs_idx_local):
        return (self.dof_start + self._local(dofs_idx_local, self.n_dofs, "dofs_idx_local")).to(gs.device)

    def _write(self, field, value, cols, envs_idx, what):
        st = self.solver.state
        st.set_rows(field, self.solver.frame, value, self._envs_idx(envs_idx), (cols,), what=what)

    def _write_ruled(self, field, value, cols, envs_idx, what):
        """_write, then the solver's rules across the parameter fields (RigidSolver._param_rule) on the result:
        a value that breaks them is taken back and refused."""
        st = self.solver.state
        before = st.tensors[field].detach().clone()
        mark = st.tape.mark() if st.tape is not None else None
        self._write(field, value, cols, envs_idx, what)
        found = self.solver._param_rule({name: st.tensors[name] for name in
                                         ("dofs_force_lo", "dofs_force_hi", "links_inertial_mass")})
        if found is not None:
            with torch.no_grad():
                st.tensors[field].copy_(before)
            if mark is not None:  # a differentiable run forgets the write too
                st.tape.undo_to(mark)
            raise gs.InvalidStateError(st.entry_message(what, *found))

    def _read(self, field, cols, envs_idx):
        return self.solver.state.get_rows(field, self.solver.frame, self._envs_idx(envs_idx), (cols,))

    def _moved(self, envs_idx=None):
        """The link poses after a setter changed qpos, in the environments it wrote (the others keep theirs bit for
        bit: the standalone kinematics may round differently from the step that wrote them)."""
        self.solver.kinematics(self.solver.frame, self._envs_idx(envs_idx))

    # -- control ----------------------------------------------------------------------------------------------------

    def _control(self, mode, field, value, dofs, envs_idx, what):
        self._write(field, value, dofs, envs_idx, what)  # validates the value before the mode changes
        self._write("dofs_ctrl_mode", mode, dofs, envs_idx, what)

    def control_dofs_force(self, force, dofs_idx_local=None, envs_idx=None):
        """Apply generalized forces (N or N m) from the next step on, until another control replaces them."""
        self._control(CTRL_FORCE, "dofs_ctrl_force", force, self._dofs(dofs_idx_local), envs_idx,
                      "control_dofs_force")

    def control_dofs_position(self, position, dofs_idx_local=None, envs_idx=None):
        """PD control toward `position` (velocity target 0) with the gains of set_dofs_kp / set_dofs_kv (implicit
        in the step), its force clamped to the dofs' force range.

        Positions are get_dofs_position's: for a ball joint's dofs and a free joint's last three, the intrinsic
        x-y-z Euler angles of the joint's target orientation. Those three dofs' targets make one orientation; each
        dof's error is its component of the rotation vector from the joint's orientation to it, in the joint's
        child frame (the frame of their velocities), the shorter way round, exact at any angle. A rotation dof
        given alone keeps its siblings' last targets (0 until set)."""
        dofs = self._dofs(dofs_idx_local)
        self._write("dofs_ctrl_vel", 0.0, dofs, envs_idx, "control_dofs_position")
        self._control(CTRL_POSITION, "dofs_ctrl_pos", position, dofs, envs_idx, "control_dofs_position")

    def control_dofs_position_velocity(self, position, velocity, dofs_idx_local=None, envs_idx=None):
        """PD control toward `position` and `velocity`: kp (position - q) + kv (velocity - v), implicit in the
        step, clamped to the dofs' force range (rotation dofs as control_dofs_position's)."""
        dofs = self._dofs(dofs_idx_local)
        self._write("dofs_ctrl_pos", position, dofs, envs_idx, "control_dofs_position_velocity")
        self._control(CTRL_POSITION, "dofs_ctrl_vel", velocity, dofs, envs_idx, "control_dofs_position_velocity")

    def control_dofs_velocity(self, velocity, dofs_idx_local=None, envs_idx=None):
        """Damping control toward `velocity` with the gains of set_dofs_kv."""
        self._control(CTRL_VELOCITY, "dofs_ctrl_vel", velocity, self._dofs(dofs_idx_local), envs_idx,
                      "control_dofs_velocity")

    def set_dofs_kp(self, kp, dofs_idx_local=None, envs_idx=None):
        """Position gains (>= 0, the field's declared bound)."""
        self._write("dofs_kp", kp, self._dofs(dofs_idx_local), envs_idx, "set_dofs_kp")

    def set_dofs_kv(self, kv, dofs_idx_local=None, envs_idx=None):
        """Velocity gains (>= 0, the field's declared bound)."""
        self._write("dofs_kv", kv, self._dofs(dofs_idx_local), envs_idx, "set_dofs_kv")

    def get_dofs_kp(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_kp", self._dofs(dofs_idx_local), envs_idx)

    def get_dofs_kv(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_kv", self._dofs(dofs_idx_local), envs_idx)

    def _dof_q(self, dofs, envs_idx):
        """The dofs' scalar positions (0 for ball and free dofs) and velocities at the current frame."""
        qs = self.solver.dof_q[dofs]
        q = self._read("qpos", qs.clamp(min=0), envs_idx)
        return torch.where(qs >= 0, q, torch.zeros_like(q)), self._read("dofs_vel", dofs, envs_idx)

    def _position_errors(self, dofs, envs_idx):
        """Each dof's PD position error at the current frame: target - q for a hinge or slide dof and a free
        joint's translations (its base position), and for a rotation dof of a ball or free joint its component of the rotation
        vector from the joint's quaternion to its targets' (kernels_dynamics.rotation_error)."""
        from genesis_core.utils.geom import inv_quat, quat_mul, quat_to_rotvec, xyz_to_quat

        dof_i = self.solver.compiled.arrays["dof_i"][dofs.cpu().numpy()]
        pd_q = torch.as_tensor(dof_i[:, DI_PD_Q], dtype=torch.long, device=gs.device)
        q = self._read("qpos", pd_q.clamp(min=0), envs_idx)
        err = self._read("dofs_ctrl_pos", dofs, envs_idx) - torch.where(pd_q >= 0, q, torch.zeros_like(q))
        rot_q, axis = dof_i[:, DI_ROT_Q], dof_i[:, DI_ROT_AXIS]
        for k in np.flatnonzero(rot_q >= 0):
            d0 = int(dofs[k]) - int(axis[k])
            quat = self._read("qpos", torch.arange(rot_q[k], rot_q[k] + 4, device=gs.device), envs_idx)
            target = xyz_to_quat(self._read("dofs_ctrl_pos", torch.arange(d0, d0 + 3, device=gs.device), envs_idx))
            err[..., k] = quat_to_rotvec(quat_mul(inv_quat(quat), target))[..., int(axis[k])]
        return err

    def get_dofs_control_force(self, dofs_idx_local=None, envs_idx=None):
        """The control force each dof receives at the current state (N or N m), clamped to its force range: the
        command (force control) or the PD law kp (target - q) + kv (target_v - v) (position and velocity control,
        evaluated explicitly; the step integrates it implicitly)."""
        dofs = self._dofs(dofs_idx_local)
        mode = self._read("dofs_ctrl_mode", dofs, envs_idx)
        v = self._read("dofs_vel", dofs, envs_idx)
        kp, kv = self._read("dofs_kp", dofs, envs_idx), self._read("dofs_kv", dofs, envs_idx)
        vel_target = self._read("dofs_ctrl_vel", dofs, envs_idx)
        pos = kp * self._position_errors(dofs, envs_idx) + kv * (vel_target - v)
        vel = kv * (vel_target - v)
        raw = torch.where(mode == CTRL_POSITION, pos, torch.where(mode == CTRL_VELOCITY, vel,
                                                                  self._read("dofs_ctrl_force", dofs, envs_idx)))
        lo, hi = self.get_dofs_force_range(dofs_idx_local, envs_idx)
        return torch.minimum(torch.maximum(raw, lo), hi)

    def get_dofs_force(self, dofs_idx_local=None, envs_idx=None):
        """The generalized force each dof experiences from its joint and its actuator at the current state (N or
        N m): the control force (get_dofs_control_force) plus the joint's passive forces, -damping v - stiffness
        (q - springref). Constraint (contact, limit) and bias (gravity, Coriolis) forces are not included."""
        dofs = self._dofs(dofs_idx_local)
        q, v = self._dof_q(dofs, envs_idx)
        springref = torch.as_tensor(self.solver.compiled.arrays["dof_f"][:, DF_SPRINGREF], dtype=q.dtype,
                                    device=q.device)[dofs]
        has_q = self.solver.dof_q[dofs] >= 0
        spring = torch.where(has_q, self._read("dofs_stiffness", dofs, envs_idx) * (q - springref),
                             torch.zeros_like(q))
        return (self.get_dofs_control_force(dofs_idx_local, envs_idx)
                - self._read("dofs_damping", dofs, envs_idx) * v - spring)

    # -- dof parameters, per environment (state: checkpoints carry them) -------------------------------------------

    def set_dofs_force_range(self, lower, upper, dofs_idx_local=None, envs_idx=None):
        """The control force range [lower, upper] (N or N m): commands and PD laws are clamped to it (a PD law
        that exceeds it acts as its clamped force). `([n_envs,] n)` values or numbers."""
        dofs = self._dofs(dofs_idx_local)
        lo = to_tensor(lower, self.solver.float_dtype, gs.device, "set_dofs_force_range(lower)")
        hi = to_tensor(upper, self.solver.float_dtype, gs.device, "set_dofs_force_range(upper)")
        if bool((torch.broadcast_to(lo, torch.broadcast_shapes(lo.shape, hi.shape))
                 > torch.broadcast_to(hi, torch.broadcast_shapes(lo.shape, hi.shape))).any()):
            raise gs.OptionError(f"set_dofs_force_range: lower must not exceed upper (got lower={lower!r}, "
                                 f"upper={upper!r}).")
        self._write("dofs_force_lo", lo, dofs, envs_idx, "set_dofs_force_range(lower)")
        self._write("dofs_force_hi", hi, dofs, envs_idx, "set_dofs_force_range(upper)")

    def get_dofs_force_range(self, dofs_idx_local=None, envs_idx=None):
        """(lower, upper), each `([n_envs,] n)`."""
        dofs = self._dofs(dofs_idx_local)
        return self._read("dofs_force_lo", dofs, envs_idx), self._read("dofs_force_hi", dofs, envs_idx)

    def set_dofs_damping(self, damping, dofs_idx_local=None, envs_idx=None):
        """Joint damping (>= 0), N m s/rad or N s/m."""
        self._write("dofs_damping", damping, self._dofs(dofs_idx_local), envs_idx, "set_dofs_damping")

    def get_dofs_damping(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_damping", self._dofs(dofs_idx_local), envs_idx)

    def set_dofs_armature(self, armature, dofs_idx_local=None, envs_idx=None):
        """Armature (>= 0) added to the mass matrix's diagonal, kg m^2 or kg."""
        self._write("dofs_armature", armature, self._dofs(dofs_idx_local), envs_idx, "set_dofs_armature")

    def get_dofs_armature(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_armature", self._dofs(dofs_idx_local), envs_idx)

    def set_dofs_stiffness(self, stiffness, dofs_idx_local=None, envs_idx=None):
        """Joint spring stiffness (>= 0) toward the spring reference, N m/rad or N/m (hinge and slide dofs; a
        ball or free dof has no scalar position, and its stiffness is not used)."""
        self._write("dofs_stiffness", stiffness, self._dofs(dofs_idx_local), envs_idx, "set_dofs_stiffness")

    def get_dofs_stiffness(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_stiffness", self._dofs(dofs_idx_local), envs_idx)

    # -- state setters ----------------------------------------------------------------------------------------------

    def _quat_slots(self):
        """Entity-local qpos index where each quaternion starts (free joints: after xyz; ball joints), with its
        joint."""
        return [(j.q_start - self.q_start + (3 if j.type == FREE else 0), j) for j in self.joints
                if j.type in (FREE, BALL)]

    def _unit_quats(self, qpos, qs_local, envs_idx, what):
        """`qpos` for the entity-local qs `qs_local` with every quaternion it gives whole (its 4 entries) scaled to
        unit length, as Genesis World's kinematics read it: a rounded quaternion is a rotation. A quaternion of norm
        below MIN_QUAT_NORM, or with an entry that is not finite, names no rotation: refused, naming the joint and
        the environment. A quaternion given in part is left to the state's check (unit within QUAT_TOL)."""
        where = {int(q): k for k, q in enumerate(qs_local)}
        slots = [(s, j, [where[s + i] for i in range(4)]) for s, j in self._quat_slots()
                 if all(s + i in where for i in range(4))]
        if not slots:
            return qpos
        x = to_tensor(qpos, self.solver.float_dtype, gs.device, what)
        envs = self._envs_idx(envs_idx)
        rows = len(envs) if envs is not None else max(self.scene.n_envs, 1)
        want = (rows, len(qs_local)) if self.scene.n_envs else (len(qs_local),)
        try:
            x = x.expand(want).clone()
        except RuntimeError:
            return qpos  # (set_rows names the expected shape)
        for s, joint, cols in slots:
            quat = x[..., cols]
            norm = quat.norm(dim=-1, keepdim=True)
            bad = ~(torch.isfinite(quat).all(-1) & (norm[..., 0] >= MIN_QUAT_NORM))
            if bool(bad.any()):
                k = int(bad.reshape(-1).nonzero()[0])
                env = "" if not self.scene.n_envs else (
                    f" in environment {int(envs[k]) if envs is not None else k}")
                raise gs.OptionError(
                    f"{what}: the quaternion of joint {joint.name!r} (qs_idx_local {s}..{s + 3}){env} is "
                    f"{quat.reshape(-1, 4)[k].tolist()}: a quaternion (w, x, y, z) must be finite with norm >= "
                    f"{MIN_QUAT_NORM:g} (it is normalised); the identity is [1, 0, 0, 0].")
            x[..., cols] = quat / norm
        return x

    def set_qpos(self, qpos, qs_idx_local=None, envs_idx=None, zero_velocity=True, skip_forward=False):
        """Generalized positions `([n_envs,] n)` of the qs `qs_idx_local` (free joints: x, y, z, then the
        quaternion w, x, y, z; ball joints: a quaternion; hinge and slide: the angle or offset). A quaternion given
        whole is normalised (a rounded one is the rotation it rounds); a zero or non-finite one is refused.
        zero_velocity (Genesis World's default True) zeroes all the entity's dof velocities. (skip_forward,
        Genesis World's: accepted; the link poses are always brought up to date.)"""
        qs_local = self._local(qs_idx_local, self.n_qs, "qs_idx_local")
        qpos = self._unit_quats(qpos, qs_local.tolist(), envs_idx, "set_qpos")
        qs = self.q_start + qs_local.to(gs.device)
        self._write("qpos", qpos, qs, envs_idx, "set_qpos")
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs(None), envs_idx, "set_qpos")
        self._moved(envs_idx)

    def _dof_coordinates(self, dofs_local):
        """For each entity-local dof: ("q", local qpos index) for a hinge or slide dof and a free joint's
        translations (the dof's position is that qpos entry), or ("rot", local quaternion start, component) for a
        ball or free joint's rotation dofs (their positions are the x-y-z Euler angles of the quaternion)."""
        table = {}
        for j in self.joints:
            d0, q0 = j.dof_start - self.dof_start, j.q_start - self.q_start
            if j.type in (HINGE, SLIDE):
                table[d0] = ("q", q0, 0)
            elif j.type == FREE:
                for i in range(3):
                    table[d0 + i] = ("q", q0 + i, 0)
                    table[d0 + 3 + i] = ("rot", q0 + 3, i)
            else:
                for i in range(3):
                    table[d0 + i] = ("rot", q0, i)
        return [table[int(d)] for d in dofs_local]

    def set_dofs_position(self, position, dofs_idx_local=None, envs_idx=None, zero_velocity=True, skip_forward=False):
        """Dof positions `([n_envs,] n)`, as Genesis World's: a hinge's angle (rad), a slide's offset (m), a free
        joint's translation dofs its base position (m, world) and its rotation dofs, like a ball joint's, intrinsic
        x-y-z Euler angles (rad; R = Rx Ry Rz, genesis_core.utils.geom.xyz_to_quat) that become the joint's
        quaternion; rotation dofs not given keep their current angles. zero_velocity (Genesis World's default True)
        zeroes all the entity's dof velocities."""
        dofs_local = self._local(dofs_idx_local, self.n_dofs, "dofs_idx_local")
        coords = self._dof_coordinates(dofs_local.tolist())
        dofs = (self.dof_start + dofs_local).to(gs.device)
        if all(c[0] == "q" for c in coords):
            qs = self.q_start + torch.as_tensor([c[1] for c in coords], dtype=torch.long, device=gs.device)
            self._write("qpos", position, qs, envs_idx, "set_dofs_position")
        else:
            self._set_rotation_dofs(position, coords, envs_idx)
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs(None), envs_idx, "set_dofs_position")
        self._moved(envs_idx)

    def _set_rotation_dofs(self, position, coords, envs_idx):
        """set_dofs_position's write when some dofs are rotation dofs: one write of the qpos entries they give (so
        that a refused value leaves the state as it was)."""
        from genesis_core.utils.geom import quat_to_xyz, xyz_to_quat

        envs = self._envs_idx(envs_idx)
        batched = bool(self.scene.n_envs)
        rows = len(envs) if envs is not None else max(self.scene.n_envs, 1)
        want = (rows, len(coords)) if batched else (len(coords),)
        x = to_tensor(position, self.solver.float_dtype, gs.device, "set_dofs_position")
        try:
            x = x.expand(want)
        except RuntimeError:
            raise gs.OptionError(f"set_dofs_position: expected a value of shape {want}, got "
                                 f"{tuple(x.shape)}.") from None
        x = x if batched else x.unsqueeze(0)
        cols, vals, groups = [], [], {}
        for k, (kind, q, comp) in enumerate(coords):
            if kind == "q":
                cols.append(q)
                vals.append(x[:, k])
            else:
                groups.setdefault(q, {})[comp] = k
        for q, comps in groups.items():
            given = x[:, list(comps.values())]
            if not bool(torch.isfinite(given).all()):
                raise gs.OptionError(f"set_dofs_position: the rotation dofs' angles must be finite, got "
                                     f"{given.tolist() if given.numel() <= 12 else tuple(given.shape)}.")
            if len(comps) < 3:
                current = self.get_qpos(list(range(q, q + 4)), envs_idx)
                angles = quat_to_xyz(current if batched else current.unsqueeze(0))
            else:
                angles = torch.zeros((rows, 3), dtype=x.dtype, device=x.device)
            angles = torch.stack([x[:, comps[i]] if i in comps else angles[:, i] for i in range(3)], -1)
            quat = xyz_to_quat(angles)
            cols += [q + i for i in range(4)]
            vals += [quat[:, i] for i in range(4)]
        value = torch.stack(vals, -1)
        qs = self.q_start + torch.as_tensor(cols, dtype=torch.long, device=gs.device)
        self._write("qpos", value if batched else value[0], qs, envs_idx, "set_dofs_position")

    def set_dofs_velocity(self, velocity, dofs_idx_local=None, envs_idx=None, skip_forward=False):
        self._write("dofs_vel", velocity, self._dofs(dofs_idx_local), envs_idx, "set_dofs_velocity")

    def zero_all_dofs_velocity(self, envs_idx=None, skip_forward=False):
        """Set every dof velocity of the entity to zero (in the environments envs_idx)."""
        self._write("dofs_vel", 0.0, self._dofs(None), envs_idx, "zero_all_dofs_velocity")

    def _fixed_rows(self, what):
        """The entity's rows of the state's fixed_base_pos / _quat, its base's first; refused unless the base is
        welded to the world (a free base moves through qpos; a base on a joint or attached to another entity
        moves with its joints or its parent)."""
        fixed = self.solver.fixed_bases
        rows = [i for i, l in enumerate(fixed) if self.link_start <= l < self.link_start + self.n_links]
        if self._free_base or not rows or fixed[rows[0]] != self.link_start:
            raise gs.OptionError(f"{what}: entity {self.idx}'s base is neither free nor welded to the world (it "
                                 "hangs on a joint, or on another entity's link); move it through its joints "
                                 "(set_qpos, set_dofs_position) or its parent.")
        return rows

    def _moved_fixed_base(self, rows, envs_idx, what, pos=None, quat=None):
        """Move the entity's world-welded links rigidly with its base: the base to `pos` / `quat` (checked, in the
        environments envs_idx), the other jointless roots of its file (rows[1:]) keeping their poses relative to
        the base. No velocity: a welded link is kinematic, moved between steps."""
        from genesis_core.utils.geom import inv_quat, quat_mul, transform_by_quat

        st, f, envs = self.solver.state, self.solver.frame, self._envs_idx(envs_idx)
        base = lambda name: st.get_rows(name, f, envs, (rows[0],))  # noqa: E731
        old_pos, old_quat = base("fixed_base_pos"), base("fixed_base_quat")
        if pos is not None:
            self._write("fixed_base_pos", pos, rows[0], envs_idx, what)
        else:
            self._write("fixed_base_quat", quat, rows[0], envs_idx, what)
        if len(rows) > 1:
            others = torch.as_tensor(rows[1:], dtype=torch.long, device=gs.device)
            r_pos, r_quat = (st.get_rows(name, f, envs, (others,)) for name in ("fixed_base_pos", "fixed_base_quat"))
            new_pos, new_quat = base("fixed_base_pos"), base("fixed_base_quat")
            turn = quat_mul(new_quat, inv_quat(old_quat)).unsqueeze(-2).expand(r_quat.shape)
            r_pos = new_pos.unsqueeze(-2) + transform_by_quat(r_pos - old_pos.unsqueeze(-2), turn)
            self._write("fixed_base_pos", r_pos, others, envs_idx, what)
            self._write("fixed_base_quat", quat_mul(turn, r_quat), others, envs_idx, what)
        self._moved(envs_idx)

    def set_pos(self, pos, envs_idx=None, zero_velocity=True):
        """Base position, `([n_envs,] 3)` m, world: a free base's (its velocity zeroed unless zero_velocity=False),
        or a base welded to the world (a fixed entity: its pose per environment, moved kinematically between
        steps; the other jointless roots of its file move with it)."""
        if not self._free_base:
            self._moved_fixed_base(self._fixed_rows("set_pos"), envs_idx, "set_pos", pos=pos)
            return
        self._write("qpos", pos, torch.arange(self.q_start, self.q_start + 3, device=gs.device), envs_idx, "set_pos")
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs([0, 1, 2, 3, 4, 5]), envs_idx, "set_pos")
        self._moved(envs_idx)

    def set_quat(self, quat, envs_idx=None, zero_velocity=True):
        """Base orientation, `([n_envs,] 4)` (w, x, y, z), normalised here: a free base's, or a base welded to the
        world (as set_pos; the other jointless roots turn about the base's origin)."""
        q = to_tensor(quat, self.solver.float_dtype, gs.device, "set_quat")
        norm = q.norm(dim=-1, keepdim=True)
        if q.shape[-1:] != (4,) or not bool(torch.isfinite(q).all()) or bool((norm < 1e-9).any()):
            raise gs.OptionError(f"set_quat: expected finite, non-zero quaternions (w, x, y, z), shaped "
                                 f"([n_envs,] 4), got {q.tolist() if q.numel() <= 16 else tuple(q.shape)}.")
        if not self._free_base:
            self._moved_fixed_base(self._fixed_rows("set_quat"), envs_idx, "set_quat", quat=q / norm)
            return
        qs = torch.arange(self.q_start + 3, self.q_start + 7, device=gs.device)
        self._write("qpos", q / norm, qs, envs_idx, "set_quat")
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs([0, 1, 2, 3, 4, 5]), envs_idx, "set_quat")
        self._moved(envs_idx)

    # -- getters ----------------------------------------------------------------------------------------------------

    def get_qpos(self, qs_idx_local=None, envs_idx=None):
        qs = self.q_start + self._local(qs_idx_local, self.n_qs, "qs_idx_local").to(gs.device)
        return self._read("qpos", qs, envs_idx)

    def get_dofs_position(self, dofs_idx_local=None, envs_idx=None):
        """Dof positions `([n_envs,] n)` in set_dofs_position's terms: hinge angles, slide offsets, a free joint's
        base position and, for free and ball joints' rotation dofs, the x-y-z Euler angles of their quaternion."""
        from genesis_core.utils.geom import quat_to_xyz

        dofs_local = self._local(dofs_idx_local, self.n_dofs, "dofs_idx_local")
        coords = self._dof_coordinates(dofs_local.tolist())
        qs = self.q_start + torch.as_tensor([c[1] for c in coords], dtype=torch.long, device=gs.device)
        if all(c[0] == "q" for c in coords):
            return self._read("qpos", qs, envs_idx)
        # each qpos column read once (a read's gradient does not add up over repeated columns): the scalar ones,
        # and each quaternion whole
        cols = []
        for kind, q, comp in coords:
            for c in ([q] if kind == "q" else [q, q + 1, q + 2, q + 3]):
                if c not in cols:
                    cols.append(c)
        qpos = self._read("qpos", self.q_start + torch.as_tensor(cols, device=gs.device), envs_idx)
        euler = {}
        out = []
        for kind, q, comp in coords:
            if kind == "q":
                out.append(qpos[..., cols.index(q)])
            else:
                if q not in euler:
                    k = cols.index(q)
                    euler[q] = quat_to_xyz(qpos[..., k:k + 4])
                out.append(euler[q][..., comp])
        return torch.stack(out, -1)

    def get_dofs_velocity(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_vel", self._dofs(dofs_idx_local), envs_idx)

    def _links(self, links_idx_local):
        return (self.link_start + self._local(links_idx_local, self.n_links, "links_idx_local")).to(gs.device)

    def get_links_pos(self, links_idx_local=None, envs_idx=None):
        return self._read("links_pos", self._links(links_idx_local), envs_idx)

    def get_links_quat(self, links_idx_local=None, envs_idx=None):
        return self._read("links_quat", self._links(links_idx_local), envs_idx)

    def apply_links_external_force(self, force, links_idx_local=None, envs_idx=None, ref="link_origin", local=False):
        """`force` (N) on the entity's links during the next step (RigidSolver.apply_links_external_force)."""
        self.solver.apply_links_external_force(force, self._links(links_idx_local), envs_idx, ref=ref, local=local)

    def apply_links_external_torque(self, torque, links_idx_local=None, envs_idx=None, ref="link_origin",
                                    local=False):
        """`torque` (N m) on the entity's links during the next step."""
        self.solver.apply_links_external_torque(torque, self._links(links_idx_local), envs_idx, ref=ref, local=local)

    # -- kinematics without stepping: Jacobians and inverse kinematics (genesis_rigid.ik) -----------------------------

    def get_jacobian(self, link, local_point=None):
        """The geometric Jacobian `([n_envs,] 6, n_dofs)` of a point of `link` (default its frame's origin) at the
        current state: rows linear then angular velocity, world frame (genesis_rigid.ik.get_jacobian)."""
        from . import ik

        return ik.get_jacobian(self, link, local_point=local_point)

    def get_dofs_invweight(self, dofs_idx_local=None, envs_idx=None):
        """Genesis World's dof inverse weights `([n_envs,] n)`: the diagonal of the inverse mass matrix at the
        model's initial configuration, with each environment's inertial parameters and armature
        (genesis_rigid.ik.get_dofs_invweight)."""
        from . import ik

        return ik.get_dofs_invweight(self, dofs_idx_local, envs_idx)

    def get_mass_mat(self, envs_idx=None, decompose=False):
        """The joint-space mass matrix `([n_envs,] n_dofs, n_dofs)` at the current state, armature on the diagonal,
        with each environment's inertial parameters (kg, kg m, kg m^2 by dof kind): MuJoCo's qM, the solver's own
        CRBA (RigidSolver.probe_mass_matrix). With decompose=True, Genesis World's factors (L, D_inv): L `([n_envs,]
        n, n)` unit lower triangular and D_inv `([n_envs,] n)` with M = L^T diag(1 / D_inv) L (MuJoCo's L^T D L
        order: the factorisation that keeps a tree's sparsity)."""
        from . import ik

        envs, B, batched = ik._envs(self, envs_idx)
        if self.n_dofs == 0:
            M = torch.zeros((B, 0, 0), dtype=self.solver.float_dtype, device=gs.device)
        else:
            M = ik.mass_matrix(self, ik._current_qpos(self, envs), envs_idx)
        if not decompose:
            return M if batched else M[0]
        if self.n_dofs == 0:
            D_inv = torch.zeros((B, 0), dtype=M.dtype, device=M.device)
            return (M, D_inv) if batched else (M[0], D_inv[0])
        # M = L^T D L, L unit lower: with P the reversal, P M P = (P L^T P) D' (P L P), an LDL^T of P M P
        flip = torch.arange(self.n_dofs - 1, -1, -1, device=M.device)
        C = torch.linalg.cholesky(M[:, flip][:, :, flip])
        diag = torch.diagonal(C, dim1=1, dim2=2)
        lower = C / diag[:, None, :]  # P L^T P: unit lower triangular
        L = lower.transpose(1, 2)[:, flip][:, :, flip]
        D_inv = (1.0 / diag ** 2)[:, flip]
        return (L, D_inv) if batched else (L[0], D_inv[0])

    def get_links_invweight(self, links_idx_local=None, envs_idx=None):
        """Genesis World's and MuJoCo's link inverse weights (body_invweight0) `([n_envs,] n, 2)`: for each link,
        the mean of the diagonal of J M^-1 J^T over its translational rows (1/kg) and over its rotational rows (1/(kg
        m^2)), J the Jacobian of the link's centre of mass, M the mass matrix, both at the model's initial
        configuration with each environment's current inertial parameters and armature. Where one of the two is 0
        and the other not, both take the other's value (MuJoCo's rule); a link no dof moves has (0, 0)."""
        from . import ik

        envs, B, batched = ik._envs(self, envs_idx)
        links = self._local(links_idx_local, self.n_links, "links_idx_local").tolist()
        out = torch.zeros((B, len(links), 2), dtype=self.solver.float_dtype, device=gs.device)
        if self.n_dofs:
            tree = ik.kinematic_tree(self)
            q0 = torch.as_tensor(self.solver.compiled.qpos0[self.q_start:self.q_end], dtype=tree.dtype,
                                 device=gs.device).expand(B, -1)
            M_inv = torch.linalg.inv(ik.mass_matrix(self, q0, envs_idx))
            kin = tree.kinematics(q0, ik._env_rows(self, envs, B))
            for k, l in enumerate(links):
                J = tree.jacobian(kin, l, kin["com"][:, l])
                A = torch.diagonal(J @ M_inv @ J.transpose(1, 2), dim1=1, dim2=2)
                out[:, k, 0], out[:, k, 1] = A[:, :3].mean(-1), A[:, 3:].mean(-1)
            trans, rot = out[..., 0].clone(), out[..., 1].clone()
            out[..., 0] = torch.where((trans < _MIN_INVWEIGHT) & (rot > _MIN_INVWEIGHT), rot, trans)
            out[..., 1] = torch.where((rot < _MIN_INVWEIGHT) & (trans > _MIN_INVWEIGHT), trans, rot)
        return out if batched else out[0]

    def get_links_acc(self, links_idx_local=None, envs_idx=None):
        """Linear accelerations of the links' frame origins, world, m/s^2, `([n_envs,] n, 3)`: the classical
        acceleration (the spatial one plus omega x v) that the last substep's dof accelerations give at the current
        configuration and velocities, gravity not included (RigidSolver.get_links_acc)."""
        return self.solver.get_links_acc(self._links(links_idx_local), envs_idx)

    def get_links_acc_ang(self, links_idx_local=None, envs_idx=None):
        """Angular accelerations of the links, world, rad/s^2, `([n_envs,] n, 3)` (RigidSolver.get_links_acc_ang)."""
        return self.solver.get_links_acc_ang(self._links(links_idx_local), envs_idx)

    def _joint_frames(self, envs_idx):
        """(anchors, axes) of the entity's joints at the current state, world, `([n_envs,] n_joints, 3)` each: the
        solver's kinematics kernel run on the state's qpos (RigidSolver.probe_kinematics)."""
        from . import ik

        envs, B, batched = ik._envs(self, envs_idx)
        rows = ik._env_rows(self, envs, B)
        k = self.solver.probe_kinematics(self.solver.state.at("qpos", self.solver.frame)[rows].clone(), rows)
        anchor = k["janchor"][:, self.joint_start:self.joint_end]
        axis = k["jaxis"][:, self.joint_start:self.joint_end]
        return (anchor, axis) if batched else (anchor[0], axis[0])

    def inverse_kinematics(self, link, pos=None, quat=None, *args, **kwargs):
        """qpos `([n_envs,] n_qs)` that puts `link` at `pos` / `quat`, by batched damped least squares within the
        joint limits, with restarts; the scene's state is left as it is (genesis_rigid.ik.inverse_kinematics:
        Genesis World's parameters)."""
        from . import ik

        return ik.inverse_kinematics(self, link, pos, quat, *args, **kwargs)

    def inverse_kinematics_multilink(self, links, poss=None, quats=None, *args, **kwargs):
        """inverse_kinematics for several links at once (genesis_rigid.ik.inverse_kinematics_multilink)."""
        from . import ik

        return ik.inverse_kinematics_multilink(self, links, poss, quats, *args, **kwargs)

    def forward_kinematics(self, qpos, qs_idx_local=None, links_idx_local=None, envs_idx=None):
        """(links_pos, links_quat) at `qpos`, without touching the scene (genesis_rigid.ik.forward_kinematics)."""
        from . import ik

        return ik.forward_kinematics(self, qpos, qs_idx_local=qs_idx_local, links_idx_local=links_idx_local,
                                     envs_idx=envs_idx)

    # -- the links' inertial parameters and friction, per environment (domain randomization; state) ------------------

    def set_links_inertial_mass(self, mass, links_idx_local=None, envs_idx=None):
        """The links' masses before their shift (kg, `([n_envs,] n)`); a link's rotational inertia scales with its
        mass. A moving link's inertial mass must be > 0."""
        self._write_ruled("links_inertial_mass", mass, self._links(links_idx_local), envs_idx,
                          "set_links_inertial_mass")

    def get_links_inertial_mass(self, links_idx_local=None, envs_idx=None):
        return self._read("links_inertial_mass", self._links(links_idx_local), envs_idx)

    def set_mass_shift(self, mass_shift, links_idx_local=None, envs_idx=None):
        """Mass added to each link (kg, `([n_envs,] n)`, negative removes), on top of its inertial mass. A shift
        may take the sum below zero (Genesis World's domain randomization does, on light links): the dynamics then
        use a tenth of the inertial mass (`MIN_MASS_FRACTION`) and a warning says so once per scene."""
        self._write("links_mass_shift", mass_shift, self._links(links_idx_local), envs_idx, "set_mass_shift")

    set_links_mass_shift = set_mass_shift

    def get_links_mass_shift(self, links_idx_local=None, envs_idx=None):
        return self._read("links_mass_shift", self._links(links_idx_local), envs_idx)

    def set_COM_shift(self, com_shift, links_idx_local=None, envs_idx=None):
        """Offset of each link's centre of mass in the link's frame (m, `([n_envs,] n, 3)`)."""
        self._write("links_com_shift", com_shift, self._links(links_idx_local), envs_idx, "set_COM_shift")

    set_links_COM_shift = set_COM_shift

    def get_links_COM_shift(self, links_idx_local=None, envs_idx=None):
        return self._read("links_com_shift", self._links(links_idx_local), envs_idx)

    def _geoms_of(self, links):
        """The solver's geoms on the given (global) links, and for each the position of its link in `links`."""
        where = {int(l): i for i, l in enumerate(links.tolist())}
        geoms = [(g, where[k["link"]]) for g, k in enumerate(self.solver.compiled.geoms) if k["link"] in where]
        return [g for g, _ in geoms], [i for _, i in geoms]

    def set_friction_ratio(self, friction_ratio, links_idx_local=None, envs_idx=None):
        """Factor (>= 0) on the friction coefficient of every geom of each link, `([n_envs,] n_links)`: a contact
        takes the larger of its two geoms' products (Genesis World's domain randomization)."""
        links = self._links(links_idx_local)
        geoms, col = self._geoms_of(links)
        ratio = to_tensor(friction_ratio, self.solver.float_dtype, gs.device, "set_friction_ratio")
        if ratio.shape[-1:] != (len(links),) and ratio.dim() > 0:
            raise gs.OptionError(f"set_friction_ratio: expected ([n_envs,] {len(links)}) ratios (one per link), got "
                                 f"shape {tuple(ratio.shape)}.")
        if geoms:
            per_geom = ratio[..., col] if ratio.dim() else ratio
            self._write("geoms_friction_ratio", per_geom, torch.as_tensor(geoms, device=gs.device), envs_idx,
                        "set_friction_ratio")

    def get_friction_ratio(self, links_idx_local=None, envs_idx=None):
        """Each link's friction ratio (that of its first geom; 1 for a link without geoms), `([n_envs,] n)`."""
        links = self._links(links_idx_local)
        geoms, col = self._geoms_of(links)
        out = torch.ones(((max(self.scene.n_envs, 1),) if self._envs_idx(envs_idx) is None else
                          (len(self._envs_idx(envs_idx)),)) + (len(links),), dtype=self.solver.float_dtype,
                         device=gs.device)
        if geoms:
            vals = self._read("geoms_friction_ratio", torch.as_tensor(geoms, device=gs.device), envs_idx)
            vals = vals if self.scene.n_envs else vals.unsqueeze(0)
            for k in reversed(range(len(geoms))):  # the first geom of each link wins
                out[:, col[k]] = vals[:, k]
        return out if self.scene.n_envs else out[0]

    @property
    def n_equalities(self) -> int:
        """The equality constraints of the entity's file (MJCF <equality>), as Genesis World's RigidEntity counts
        them (run-time welds are the solver's: RigidSolver.get_weld_constraints)."""
        return len(self.robot.equalities)

    @property
    def equalities(self) -> list:
        """The RigidEquality of each of the file's equality constraints, in the file's order (available before
        scene.build(); their slots and data after)."""
        if getattr(self, "_equality_objs", None) is None:
            self._equality_objs = [RigidEquality(self, i, eq) for i, eq in enumerate(self.robot.equalities)]
        return self._equality_objs

    @property
    def equality_start(self) -> int:
        """The entity's first slot in the solver's equality state (after build)."""
        return self.equalities[0].idx if self.robot.equalities else 0

    def get_mass(self):
        """The entity's total mass in the first environment, kg (inertial masses plus shifts); a heterogeneous
        entity's (add_entity(morph=[...])), as Genesis World's: a NumPy array `(n_envs,)`, each environment's."""
        m = (self.get_links_inertial_mass() + self.get_links_mass_shift()).reshape(-1, self.n_links)
        if getattr(self, "variants", None):
            return m.sum(-1).double().cpu().numpy()
        return float(m[0].sum())

    def set_mass(self, mass):
        """Scale every link's inertial mass so that the entity's total is `mass` (kg, > 0) in every environment."""
        mass = _positive_number(mass, "set_mass")
        m = self.get_links_inertial_mass()
        total = float(m.reshape(-1, self.n_links)[0].sum())
        if not total > 0:
            raise gs.OptionError("set_mass: the entity has no mass to scale.")
        self.set_links_inertial_mass(m * (float(mass) / total))

    def get_AABB(self, envs_idx=None):
        """The entity's axis-aligned bounding box, `([n_envs,] 2, 3)` (min, max corner), world, m, over its geoms
        at the current state (planes left out; meshes by their hull's vertices, cylinders by their box; an
        ellipsoid's exact: along world axis i it reaches sqrt(sum_j (R_ij r_j)^2) from its centre, R its world
        rotation, r its semi-axes)."""

        links = self._links(None)
        geoms, _ = self._geoms_of(links)
        pos = self._read("links_pos", links, envs_idx)
        quat = self._read("links_quat", links, envs_idx)
        if not self.scene.n_envs:
            pos, quat = pos.unsqueeze(0), quat.unsqueeze(0)
        rot = _quat_to_mat(quat)  # [B, n, 3, 3]
        lo = torch.full((pos.shape[0], 3), float("inf"), dtype=pos.dtype, device=pos.device)
        hi = -lo.clone()
        for g in geoms:
            k = self.solver.compiled.geoms[g]
            desc = k["desc"]
            if k["type"] == SPHERE:
                pts = np.zeros((1, 3))
                pad = float(k["size"][0])
            elif k["type"] == CAPSULE:
                pts = np.array([[0, 0, 1.0], [0, 0, -1.0]]) * float(k["size"][1])
                pad = float(k["size"][0])
            elif k["type"] in (BOX, CYLINDER):
                s = np.asarray(k["size"][:3], dtype=np.float64)
                half = s if k["type"] == BOX else np.array([s[0], s[0], s[1]])
                pts = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
                pad = 0.0
            elif k["type"] == MESH:
                hull = desc.hull()
                if hull is None:
                    continue
                pts, pad = np.asarray(hull.vertices, dtype=np.float64), 0.0
            elif k["type"] == ELLIPSOID:
                li = int(k["link"]) - self.link_start
                r_geom = torch.as_tensor(_quat_to_mat(np.asarray(k["quat"], dtype=np.float64)), dtype=pos.dtype,
                                         device=pos.device)
                centre = pos[:, li] + torch.einsum("bij,j->bi", rot[:, li],
                                                   torch.as_tensor(np.asarray(k["pos"], dtype=np.float64),
                                                                   dtype=pos.dtype, device=pos.device))
                axes = (rot[:, li] @ r_geom) * torch.as_tensor(np.asarray(k["size"][:3], dtype=np.float64),
                                                               dtype=pos.dtype, device=pos.device)
                half = axes.square().sum(-1).sqrt()  # [B, 3]: row i of R diag(r), its length
                lo = torch.minimum(lo, centre - half)
                hi = torch.maximum(hi, centre + half)
                continue
            else:  # planes: unbounded
                continue
            local = np.asarray(k["pos"], dtype=np.float64) + pts @ _quat_to_mat(np.asarray(k["quat"],
                                                                                        dtype=np.float64)).T
            li = int(k["link"]) - self.link_start
            world = pos[:, li, None, :] + torch.einsum("bij,nj->bni", rot[:, li],
                                                       torch.as_tensor(local, dtype=pos.dtype, device=pos.device))
            g_lo, g_hi = world.min(1).values - pad, world.max(1).values + pad
            if desc.variant >= 0:  # a heterogeneous entity's variant: only in its environments
                rows = self._envs_idx(envs_idx)
                which = self.variant_of_env if rows is None else self.variant_of_env[rows.cpu().numpy()]
                here = torch.as_tensor(which == desc.variant, device=pos.device)[:, None]
                g_lo = torch.where(here, g_lo, torch.full_like(g_lo, float("inf")))
                g_hi = torch.where(here, g_hi, torch.full_like(g_hi, -float("inf")))
            lo = torch.minimum(lo, g_lo)
            hi = torch.maximum(hi, g_hi)
        out = torch.stack([lo, hi], 1)
        return out if self.scene.n_envs else out[0]

    # -- contacts ----------------------------------------------------------------------------------------------------

    def get_contacts(self, with_entity=None, exclude_self_contact=False):
        """The contacts of the last substep that involve this entity (and `with_entity`, if given; with_entity=self:
        its self-contacts only), Genesis World's dict: geom_a, geom_b, link_a, link_b (the solver's indices),
        position (world), force_a, force_b (N, on geoms a and b), normal (a to b), penetration (m, the depth: the
        overlap plus the pair's margin). Batched: each `(n_envs,
        n_contacts, ...)` with `valid_mask`; unbatched: the valid contacts only, `(n_contacts, ...)`."""
        c = self.solver.contacts()
        mine_a = (c["link_a"] >= self.link_start) & (c["link_a"] < self.link_end)
        mine_b = (c["link_b"] >= self.link_start) & (c["link_b"] < self.link_end)
        if with_entity is self:
            if exclude_self_contact:
                raise gs.OptionError("get_contacts: with_entity is this entity, and exclude_self_contact=True leaves "
                                     "nothing.")
            mask = mine_a & mine_b
        else:
            mask = (mine_a ^ mine_b) if exclude_self_contact else (mine_a | mine_b)
            if with_entity is not None:
                if not isinstance(with_entity, RigidEntity):
                    raise gs.OptionError(f"get_contacts: with_entity must be a rigid entity, got "
                                         f"{type(with_entity).__name__}.")
                lo, hi = with_entity.link_start, with_entity.link_end
                mask = mask & (((c["link_a"] >= lo) & (c["link_a"] < hi)) | ((c["link_b"] >= lo) & (c["link_b"] < hi)))
        mask = mask & c.pop("valid")
        sweeps = c.pop("sweeps", None)  # per environment, not per contact: never masked
        if not self.scene.n_envs:
            out = {k: v[0][mask[0]] for k, v in c.items()}
            if sweeps is not None:
                out["sweeps"] = sweeps[0]
            return out
        c["valid_mask"] = mask
        if sweeps is not None:
            c["sweeps"] = sweeps
        return c

    def get_links_net_contact_force(self, envs_idx=None):
        """The net contact force on each of the entity's links over the last substep, `([n_envs,] n_links, 3)`, N,
        world."""
        c = self.solver.contacts()
        B, L = c["force_b"].shape[0], self.n_links
        net = torch.zeros((B, L + 1, 3), dtype=c["force_b"].dtype, device=c["force_b"].device)
        for side in ("a", "b"):
            link = c[f"link_{side}"] - self.link_start
            inside = c["valid"] & (link >= 0) & (link < L)
            net.scatter_add_(1, torch.where(inside, link, L)[..., None].expand(-1, -1, 3),
                             torch.where(inside[..., None], c[f"force_{side}"], torch.zeros_like(c["force_b"])))
        net = net[:, :L]
        envs = self._envs_idx(envs_idx)
        if envs is not None:
            net = net[envs]
        return net if self.scene.n_envs else net[0]

    def _link_motion(self, links_idx_local, envs_idx):
        links = self._links(links_idx_local)
        com, v_com, omega = (x[:, links] for x in self.solver.link_motion())
        envs = self._envs_idx(envs_idx)
        if envs is not None:
            com, v_com, omega = com[envs], v_com[envs], omega[envs]
        if not self.scene.n_envs:
            com, v_com, omega = com[0], v_com[0], omega[0]
        return links, com, v_com, omega

    def get_links_vel(self, links_idx_local=None, envs_idx=None, ref="link_origin"):
        """Linear velocities of the links, world, m/s, `([n_envs,] n_links, 3)`: of each link frame's origin
        (ref="link_origin", Genesis World's default) or of its centre of mass (ref="link_com")."""
        if ref not in ("link_origin", "link_com"):
            raise gs.OptionError(f"get_links_vel: ref={ref!r} is not accepted: expected 'link_origin' or 'link_com'.")
        links, com, v_com, omega = self._link_motion(links_idx_local, envs_idx)
        if ref == "link_com":
            return v_com
        origin = self._read("links_pos", links, envs_idx)
        return v_com + torch.cross(omega, origin.to(com.dtype) - com, dim=-1)

    def get_links_ang(self, links_idx_local=None, envs_idx=None):
        """Angular velocities of the links, world, rad/s, `([n_envs,] n_links, 3)`."""
        return self._link_motion(links_idx_local, envs_idx)[3]

    def get_pos(self, envs_idx=None):
        """Base link position, `([n_envs,] 3)`."""
        return self.get_links_pos([0], envs_idx)[..., 0, :]

    def get_quat(self, envs_idx=None):
        return self.get_links_quat([0], envs_idx)[..., 0, :]

    def get_vel(self, envs_idx=None):
        """Base linear velocity (of the base frame origin), world, m/s; zero for a fixed base."""
        if not self._free_base:
            return torch.zeros_like(self.get_pos(envs_idx))
        return self._read("dofs_vel", self._dofs([0, 1, 2]), envs_idx)

    def get_ang(self, envs_idx=None):
        """Base angular velocity, world axes, rad/s; zero for a fixed base."""
        if not self._free_base:
            return torch.zeros_like(self.get_pos(envs_idx))
        local = self._read("dofs_vel", self._dofs([3, 4, 5]), envs_idx)
        return (_quat_to_mat(self.get_quat(envs_idx)) @ local.unsqueeze(-1)).squeeze(-1)
