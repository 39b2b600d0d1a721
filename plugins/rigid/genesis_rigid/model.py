"""Robot descriptions as the loaders produce them: bodies in topological order (parents first), each with its
joints, geoms and inertia, plus actuators. The solver compiles them into flat arrays."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from genesis_core.geoms import BOX, CAPSULE, CYLINDER, ELLIPSOID, HFIELD, MESH, PLANE, SPHERE  # noqa: F401  (geom types)


class ModelError(ValueError):
    """A model file (or a description built from one) holds something the engine cannot simulate; the message
    names the element and the value. genesis_rigid.robots.describe raises it as gs.ModelFileError, naming the
    file."""

# joint types (MuJoCo's codes)
FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3
JOINT_NQ = {FREE: 7, BALL: 4, SLIDE: 1, HINGE: 1}
JOINT_NV = {FREE: 6, BALL: 3, SLIDE: 1, HINGE: 1}


@dataclass
class JointDesc:
    name: str
    type: int
    pos: np.ndarray = field(default_factory=lambda: np.zeros(3))  # anchor in the body frame
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    range: tuple | None = None  # (lo, hi) in rad or m: a joint limit
    damping: float = 0.0  # N m s/rad or N s/m
    armature: float = 0.0  # kg m^2 or kg, added to the mass matrix diagonal
    stiffness: float = 0.0  # passive spring toward springref
    springref: float = 0.0
    ref: float = 0.0  # hinge/slide: the position at which the body is as the file places it (MuJoCo's joint ref)
    armature_given: bool = False  # the file gives the armature (an MJCF joint or its default class): kept as is


@dataclass
class GeomDesc:
    name: str
    type: int
    size: np.ndarray  # sphere (r,-,-); capsule (r, half-length, -); box half-extents; cylinder (r, half-height, -);
    # ellipsoid: its semi-axes
    pos: np.ndarray = field(default_factory=lambda: np.zeros(3))  # in the body frame
    quat: np.ndarray = field(default_factory=lambda: np.array([1.0, 0, 0, 0]))
    friction: float = 1.0
    contype: int = 1
    conaffinity: int = 1
    mesh_file: str | None = None
    mesh_scale: np.ndarray = field(default_factory=lambda: np.ones(3))  # per-axis scale of the mesh vertices
    vertices: np.ndarray | None = None  # a convex part of a decomposed mesh (geom frame, scaled), instead of a file
    margin: float = 0.0  # MuJoCo's contact margin (m): a pair (the sum of its geoms') is held this far apart
    gap: float = 0.0  # and its contacts are reported from margin + gap on
    rgba: np.ndarray | None = None  # the file's colour of a visual geom (RGBA in [0, 1]); None: the entity's
    asset: str | None = None  # the file's named mesh asset it draws (MJCF <mesh name=...>), for messages
    variant: int = -1  # a heterogeneous entity's variant it belongs to (genesis_rigid.variants); -1: every one
    heights: np.ndarray | None = None  # a height field's heights (metres) [nx, ny] (genesis_core.terrain)
    triangles: tuple | None = None  # a visual mesh given as (vertices [V, 3], faces [F, 3]) instead of a file

    def hull(self):
        """The convex hull of a mesh geom (geom frame, scaled), or of a box; None for other types."""
        from .hull import box_hull, hull_of_points, mesh_hull

        if self.type == MESH and self.vertices is not None:
            if getattr(self, "_part_hull", None) is None:
                self._part_hull = hull_of_points(self.vertices)
            return self._part_hull
        if self.type == MESH:
            return mesh_hull(self.mesh_file, self.mesh_scale)
        return box_hull(self.size) if self.type == BOX else None


@dataclass
class BodyDesc:
    name: str
    parent: int  # index in the robot's bodies, -1 for the world
    pos: np.ndarray  # body frame relative to the parent body frame (before joints)
    quat: np.ndarray
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))  # in the body frame
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))  # about the com, body axes
    joints: list = field(default_factory=list)
    geoms: list = field(default_factory=list)
    # what the body looks like, for the cameras only (GeomDescs in the body frame: URDF <visual> elements, MJCF
    # geoms of the visible groups, which are in `geoms` too; a Mesh morph's file); empty: it looks like its geoms
    visuals: list = field(default_factory=list)
    attached_by: str | None = None  # the file's element that places it, where that is not the body (a URDF joint)
    mass_from: str = ""  # where the file's loader computed the mass and inertia from (its geoms), for messages


@dataclass
class ActuatorDesc:
    joint: str
    kp: float = 0.0  # position gain, N m/rad
    kv: float = 0.0  # velocity gain, N m s/rad
    forcerange: tuple | None = None
    name: str = ""  # the file's actuator


@dataclass
class TendonDesc:
    """A fixed tendon: length L = sum coef_k q_k over hinge/slide joints, a passive spring-damper along it and an
    optional limit lo <= L <= hi (MuJoCo's <tendon><fixed>)."""
    name: str
    joints: list  # [(joint name, coefficient)]
    stiffness: float = 0.0
    damping: float = 0.0
    springlength: tuple | None = None  # (lo, hi): no spring force between them; None: the length at springref
    range: tuple | None = None


@dataclass
class EqualityDesc:
    """An equality constraint of the file (MuJoCo's <equality>), held exactly by the constraint stage.

    kind "connect": the point `anchor` of body obj1 (its frame) stays at the same point of body obj2 (None: the
    world) that it is at where the file places the bodies. "weld": connect at `anchor` given in obj2's frame (the
    world's for None), and the two frames keep the rotation between them there; `relpose` (pos in obj1's frame,
    quat (w, x, y, z) of obj2's frame in obj1's) instead gives that point on obj1 and that rotation; torquescale 0
    holds the point only. "joint": q1 - q1_0 = sum_k polycoef[k] (q2 - q2_0)^k over hinge/slide joints obj1, obj2
    (None: q1 - q1_0 = polycoef[0]), q_0 the joints' reference positions. "tendon": the same over fixed tendons'
    lengths."""
    kind: str
    name: str
    obj1: str
    obj2: str | None = None
    anchor: np.ndarray = field(default_factory=lambda: np.zeros(3))
    relpose: np.ndarray | None = None  # (x, y, z, w, qx, qy, qz), or None: from the bodies where the file places them
    anchor2: np.ndarray | None = None  # connect: the point of obj2 (its frame) given by a site, instead of computed
    torquescale: float = 1.0
    polycoef: np.ndarray = field(default_factory=lambda: np.array([0.0, 1.0, 0.0, 0.0, 0.0]))
    active: bool = True


@dataclass
class FluidDesc:
    """MuJoCo's inertia-box fluid model (<option density viscosity wind>): quadratic drag and viscous
    resistance of each body's equivalent box, in a medium moving at `wind`."""
    density: float = 0.0
    viscosity: float = 0.0
    wind: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass
class RobotDesc:
    name: str
    bodies: list
    actuators: list = field(default_factory=list)
    tendons: list = field(default_factory=list)
    fluid: FluidDesc | None = None
    equalities: list = field(default_factory=list)  # EqualityDesc
    merged: dict = field(default_factory=dict)  # a merged fixed link's name -> the body that holds it

    body_word: str = "body"  # what the file calls a body: "link" in URDF files

    def validate(self):
        """The validation pass (genesis_rigid.checks.check_robot): a ModelError names what is refused."""
        from .checks import check_robot

        return check_robot(self, self.body_word)


def geom_volume_inertia(g: GeomDesc):
    """Volume (m^3), centroid (geom frame) and unit-density inertia about the centroid in geom axes: MuJoCo's
    formulas for primitives, the convex hull's for meshes."""
    centre = np.zeros(3)
    if g.type == SPHERE:
        r = g.size[0]
        v = 4 / 3 * np.pi * r ** 3
        return v, centre, np.eye(3) * 0.4 * v * r * r
    if g.type == CAPSULE:
        r, h = g.size[0], 2 * g.size[1]
        sphere_m = 4 * np.pi * r ** 3 / 3
        sphere_i = 2 * sphere_m * r * r / 5
        cyl_m = np.pi * r * r * h
        cyl_i = cyl_m * (3 * r * r + h * h) / 12
        ixx = cyl_i + sphere_i + sphere_m * (h * h / 4 + 3 * h * r / 8)
        return sphere_m + cyl_m, centre, np.diag([ixx, ixx, cyl_m * r * r / 2 + sphere_i])
    if g.type == CYLINDER:
        r, h = g.size[0], 2 * g.size[1]
        v = np.pi * r * r * h
        ixx = v * (3 * r * r + h * h) / 12
        return v, centre, np.diag([ixx, ixx, v * r * r / 2])
    if g.type == BOX:
        a, b, c = 2 * g.size
        v = a * b * c
        return v, centre, np.diag([v * (b * b + c * c), v * (a * a + c * c), v * (a * a + b * b)]) / 12
    if g.type == ELLIPSOID:
        a, b, c = g.size
        v = 4 / 3 * np.pi * a * b * c
        return v, centre, np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * v / 5
    if g.type == MESH:
        return g.hull().mass_properties()
    return 0.0, centre, np.zeros((3, 3))


def inertia_from_geoms(geoms, density_of, where="the body"):
    """Mass, com and inertia (about the com, body axes) of a body made of `geoms`; density_of(g) -> (density, mass).
    Each geom's numbers are checked first (genesis_rigid.checks.check_geom; `where` names the body), and the
    density (kg/m^3) and explicit mass (kg) must be finite and >= 0."""
    from genesis_core.rotations import quat_to_mat

    from .checks import MAX_COEF, MIN_MASS, check_geom, number

    parts = []
    for g in geoms:
        what = check_geom(g, where)
        density, explicit_mass = density_of(g)
        for name, x in (("density", density), ("mass", explicit_mass)):
            if x is not None and not 0 <= number(x, what, name) <= MAX_COEF:
                raise ModelError(f"{what}: {name} = {x} is not accepted: expected a number >= 0 and <= {MAX_COEF:g}")
        try:
            vol, centre, unit_i = geom_volume_inertia(g)
        except ModelError as exc:  # (a mesh's hull)
            raise type(exc)(f"{what}: {exc}") from None
        if explicit_mass is not None:
            if vol <= 0:
                continue
            density = explicit_mass / vol
        m = density * vol
        if m <= 0:
            continue
        if m < MIN_MASS:
            source = "" if explicit_mass is not None else f" at density {density:g}"
            raise ModelError(f"{what}: its mass ({m:g} kg{source}) is not accepted: expected 0 or a mass of at least "
                             f"{MIN_MASS:g} kg")
        r = quat_to_mat(g.quat)
        parts.append((m, np.asarray(g.pos, dtype=np.float64) + r @ centre, r @ (unit_i * density) @ r.T))
    mass = sum(p[0] for p in parts)
    if mass <= 0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    com = sum(p[0] * p[1] for p in parts) / mass
    inertia = np.zeros((3, 3))
    for m, c, i in parts:
        d = c - com
        inertia += i + m * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
    return mass, com, inertia


def geoms_source(geoms):
    """How a message names the geoms a body's mass and inertia were computed from (inertia_from_geoms)."""
    names = [repr(g.name) + (f" (mesh {g.asset!r})" if g.asset else "") for g in geoms if g.name][:5]
    more = f" and {len(geoms) - len(names)} more" if len(geoms) > len(names) and names else ""
    return "the size and density of its geoms" + (f" {', '.join(names)}{more}" if names else "")


def merge_fixed_links(robot: RobotDesc, links_to_keep=()) -> RobotDesc:
    """Genesis World's `merge_fixed_links` of URDF morphs: every body attached to its parent by no joint (a URDF
    fixed joint), except the root and those named in links_to_keep, becomes part of its parent: its mass, centre
    of mass and inertia combine with the parent's (the parallel-axis theorem), its geoms move into the parent's
    frame, and its children hang from the parent at the composed pose. The dynamics are the same; there are fewer
    links. robot.merged maps each merged body's name to the body that holds it now."""
    from genesis_core.rotations import quat_mul, quat_to_mat, rotate

    keep = set(links_to_keep)
    out, where = [], {}  # where[i]: (index in out of the body that holds body i, its pose there: pos, quat)
    merged = {}
    for i, b in enumerate(robot.bodies):
        if b.parent >= 0 and not b.joints and b.name not in keep:
            host, hp, hq = where[b.parent]
            p, q = hp + rotate(hq, b.pos), quat_mul(hq, b.quat)
            where[i] = (host, p, q)
            h = out[host]
            R = quat_to_mat(q)
            mass = h.mass + b.mass
            c_b = p + R @ b.com
            com = (h.mass * h.com + b.mass * c_b) / mass if mass > 0 else h.com

            def shifted(m, d):
                return m * (float(d @ d) * np.eye(3) - np.outer(d, d))

            h.inertia = (h.inertia + shifted(h.mass, h.com - com) + R @ b.inertia @ R.T
                         + shifted(b.mass, c_b - com))
            h.mass, h.com = mass, com
            h.mass_from = "; ".join(x for x in (h.mass_from, b.mass_from and f"{b.name!r}'s {b.mass_from}") if x)
            for g in b.geoms:
                g.pos, g.quat = p + rotate(q, g.pos), quat_mul(q, g.quat)
                h.geoms.append(g)
            for g in b.visuals:
                if not any(g is c for c in h.geoms):  # (a visual that is also a geom has moved above)
                    g.pos, g.quat = p + rotate(q, g.pos), quat_mul(q, g.quat)
                h.visuals.append(g)
            merged[b.name] = h.name
        else:
            if b.parent >= 0:
                host, hp, hq = where[b.parent]
                b.pos, b.quat, b.parent = hp + rotate(hq, b.pos), quat_mul(hq, b.quat), host
            where[i] = (len(out), np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
            out.append(b)
    robot.bodies = out
    robot.merged.update(merged)
    return robot
