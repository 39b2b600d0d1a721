"""Morphs: plain, validated descriptions of an entity's shape and initial pose. A morph holds no physics; the
material passed beside it to `scene.add_entity` picks the solver that simulates it.

Conventions: metres, Z up; `quat` is (w, x, y, z); `euler` (degrees, extrinsic x-y-z) may be given instead of
`quat`. Primitives are free bodies unless `fixed=True`.
"""

from __future__ import annotations

import importlib.util
import math
import os
import warnings
import weakref

import attrs

from . import validators as v
from .errors import OptionError


def euler_to_quat(euler_deg):
    """Extrinsic x-y-z Euler angles in degrees to a (w, x, y, z) quaternion."""
    rx, ry, rz = (math.radians(a) / 2 for a in euler_deg)
    cx, sx, cy, sy, cz, sz = math.cos(rx), math.sin(rx), math.cos(ry), math.sin(ry), math.cos(rz), math.sin(rz)
    return (
        cx * cy * cz + sx * sy * sz,
        sx * cy * cz - cx * sy * sz,
        cx * sy * cz + sx * cy * sz,
        cx * cy * sz - sx * sy * cz,
    )


@attrs.define(frozen=True, kw_only=True)
class Morph:
    """Base of every morph: an initial pose."""

    pos: tuple = attrs.field(default=(0.0, 0.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))
    quat: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(v.to_float_tuple))
    euler: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(v.to_float_tuple))
    visualization: bool = attrs.field(default=True, validator=v.is_bool)
    collision: bool = attrs.field(default=True, validator=v.is_bool)

    def __attrs_post_init__(self):
        if self.quat is not None and self.euler is not None:
            raise OptionError(f"{type(self).__name__}: give quat or euler, not both.")
        if self.euler is not None:
            v.vec(3)(self, attrs.fields(type(self)).euler, self.euler)
            object.__setattr__(self, "quat", euler_to_quat(self.euler))
        elif self.quat is None:
            object.__setattr__(self, "quat", (1.0, 0.0, 0.0, 0.0))
        v.vec(4)(self, attrs.fields(type(self)).quat, self.quat)
        norm = math.sqrt(sum(q * q for q in self.quat))
        if norm < 1e-9:
            raise OptionError(f"{type(self).__name__}.quat={self.quat!r} is not accepted: expected a non-zero quaternion.")
        object.__setattr__(self, "quat", tuple(q / norm for q in self.quat))

    def as_dict(self) -> dict:
        """Plain-data description, used to check that a checkpoint fits the scene."""
        d = attrs.asdict(self)
        d["type"] = type(self).__name__
        return {k: (list(x) if isinstance(x, tuple) else x) for k, x in d.items()}


def _linear_order(inst, attr, value):
    if value != 1 or isinstance(value, bool) or not isinstance(value, int):
        v._fail(inst, attr, value, "1 (genesis-core meshes linear 4-node tets only)")


def _maxvolume(inst, attr, value):
    if not v._is_real(value) or not (value == -1 or (value > 0 and math.isfinite(value))):
        v._fail(inst, attr, value, "-1 (the default resolution) or a finite volume > 0 (m^3)")


def _in_range(lo, hi):
    def check(inst, attr, value):
        if not v._is_real(value) or not lo <= value <= hi:
            v._fail(inst, attr, value, f"a number in [{lo}, {hi}]")

    return check


@attrs.define(frozen=True, kw_only=True, slots=False)
class TetOptions:
    """How a volumetric solver (FEM, PBD volumes) meshes the morph into tets: Genesis World's TetGen options,
    with its defaults, read by `genesis_core.meshing.tetrahedralize` (see docs/meshing.md).

    order: 1 only (linear tets). maxvolume (m^3): the resolution, TetGen's bound on a tet's volume, read so as to
    give about TetGen's vertex counts (docs/meshing.md: tets of maxvolume / 2 on average); -1: the default one.
    quality: optimise the tets' shape (file meshes). force_retet: mesh again instead of reading the cache.
    verbose: the mesher's log level (0: quiet). mindihedral (degrees), minratio (radius-edge) and nobisect are
    TetGen's quality switches, accepted for Genesis scripts and not read: the structured primitive meshes and
    fTetWild reach their own, documented, quality.
    """

    order: int = attrs.field(default=1, validator=_linear_order)
    mindihedral: float = attrs.field(default=10.0, validator=_in_range(0, 70))
    minratio: float = attrs.field(default=1.1, validator=_in_range(1, math.inf))
    nobisect: bool = attrs.field(default=True, validator=v.is_bool)
    quality: bool = attrs.field(default=True, validator=v.is_bool)
    maxvolume: float = attrs.field(default=-1.0, validator=_maxvolume)
    verbose: int = attrs.field(default=0, validator=v.int_at_least(0))
    force_retet: bool = attrs.field(default=False, validator=v.is_bool)


def _bitmask(inst, attr, value):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFFFFFF:
        v._fail(inst, attr, value, "an int bitmask in [0, 0xFFFFFFFF]")


@attrs.define(frozen=True, kw_only=True, slots=False)
class CollisionFilter:
    """MuJoCo's contact filter, as Genesis World's morphs carry it: two geoms can touch when the contype of one
    and the conaffinity of the other share a bit (rigid solver; robot files set theirs per geom)."""

    contype: int = attrs.field(default=0xFFFF, validator=_bitmask)
    conaffinity: int = attrs.field(default=0xFFFF, validator=_bitmask)


@attrs.define(frozen=True, kw_only=True)
class Primitive(Morph, TetOptions, CollisionFilter):
    """batch_fixed_verts and requires_jac_and_IK are accepted with no effect (see RigidMeshOptions)."""

    fixed: bool = attrs.field(default=False, validator=v.is_bool)
    batch_fixed_verts: bool = attrs.field(default=True, validator=v.is_bool)
    requires_jac_and_IK: bool = attrs.field(default=False, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True)
class Plane(Morph, CollisionFilter):
    """An infinite static plane through `pos` with outward `normal`. batch_fixed_verts and requires_jac_and_IK
    are accepted with no effect (see RigidMeshOptions)."""

    normal: tuple = attrs.field(default=(0.0, 0.0, 1.0), converter=v.to_float_tuple, validator=v.vec(3))
    batch_fixed_verts: bool = attrs.field(default=False, validator=v.is_bool)
    requires_jac_and_IK: bool = attrs.field(default=False, validator=v.is_bool)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        if sum(n * n for n in self.normal) < 1e-18:
            raise OptionError(f"Plane.normal={self.normal!r} is not accepted: expected a non-zero vector.")


@attrs.define(frozen=True, kw_only=True)
class Box(Primitive):
    """A box centred at `pos` with full edge lengths `size` (metres). As in Genesis World, it may be given by its
    corners instead: `lower` and `upper` (both, with upper > lower on every axis) set `pos` to their midpoint and
    `size` to their difference; they are not kept (the box is then described by `pos` and `size` alone)."""

    size: tuple = attrs.field(default=(1.0, 1.0, 1.0), converter=v.to_float_tuple, validator=v.vec(3, True))
    lower: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(v.to_float_tuple))
    upper: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(v.to_float_tuple))

    def __attrs_post_init__(self):
        if (self.lower is None) != (self.upper is None):
            raise OptionError("Box: give both lower and upper (the box's corners), or neither.")
        if self.lower is not None:
            fields = attrs.fields(type(self))
            v.vec(3)(self, fields.lower, self.lower)
            v.vec(3)(self, fields.upper, self.upper)
            if self.pos != (0.0, 0.0, 0.0) or self.size != (1.0, 1.0, 1.0):
                raise OptionError("Box: give the corners (lower, upper) or pos and size, not both.")
            if not all(u > lo for lo, u in zip(self.lower, self.upper)):
                raise OptionError(f"Box(lower={self.lower!r}, upper={self.upper!r}) is not accepted: upper must "
                                  f"exceed lower on every axis.")
            object.__setattr__(self, "pos", tuple((lo + u) / 2 for lo, u in zip(self.lower, self.upper)))
            object.__setattr__(self, "size", tuple(u - lo for lo, u in zip(self.lower, self.upper)))
            object.__setattr__(self, "lower", None)
            object.__setattr__(self, "upper", None)
        super().__attrs_post_init__()

    def as_dict(self) -> dict:
        d = super().as_dict()
        d.pop("lower", None)  # folded into pos and size at construction
        d.pop("upper", None)
        return d


@attrs.define(frozen=True, kw_only=True)
class Sphere(Primitive):
    radius: float = attrs.field(default=0.5, validator=v.positive)


@attrs.define(frozen=True, kw_only=True)
class Cylinder(Primitive):
    """A cylinder along its local Z axis, centred at `pos`."""

    radius: float = attrs.field(default=0.5, validator=v.positive)
    height: float = attrs.field(default=1.0, validator=v.positive)


@attrs.define(frozen=True, kw_only=True)
class Capsule(Primitive):
    """A capsule along its local Z axis: a cylinder of `height` capped by two hemispheres of `radius`."""

    radius: float = attrs.field(default=0.25, validator=v.positive)
    height: float = attrs.field(default=1.0, validator=v.positive)


ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets")
ASSETS_ENV = "GENESIS_CORE_ASSETS"


def _genesis_world_assets():
    """The `assets` folder of an installed Genesis World (the `genesis` package), found without importing it, or
    None."""
    try:
        spec = importlib.util.find_spec("genesis")
    except (ImportError, ValueError):  # a broken install, or a `genesis` module without a spec
        return None
    if spec is None or not spec.origin or os.path.basename(spec.origin) != "__init__.py":
        return None  # not installed, or a stray module or namespace folder of that name
    return os.path.join(os.path.dirname(spec.origin), "assets")


def asset_dirs() -> list:
    """The folders a relative morph file is looked up in after the working directory, in order: each folder of
    $GENESIS_CORE_ASSETS (separated by os.pathsep), the files genesis-core ships under Genesis World's names
    (`genesis_core/assets`, e.g. "meshes/cloth.obj"), then the `assets` folder of an installed Genesis World
    (so that "xml/franka_emika_panda/panda.xml" or "urdf/go2/urdf/go2.urdf" resolve as in its scripts)."""
    dirs = [d for d in os.environ.get(ASSETS_ENV, "").split(os.pathsep) if d]
    dirs.append(ASSETS)
    genesis_assets = _genesis_world_assets()
    if genesis_assets is not None:
        dirs.append(genesis_assets)
    return dirs


def find_file(file) -> tuple:
    """(the path of `file`, or None where it is found nowhere; the places looked, in order). An absolute path is
    looked for as it is; a relative one from the working directory, then in each of `asset_dirs()`. Found from the
    working directory, the path is returned as given."""
    file = os.fspath(file)
    if not file:
        return None, []
    if os.path.isabs(file):
        return (file if os.path.isfile(file) else None), [file]
    looked = [os.path.abspath(file)]
    if os.path.isfile(file):
        return file, looked
    for folder in asset_dirs():
        candidate = os.path.join(folder, file)
        looked.append(candidate)
        if os.path.isfile(candidate):
            return candidate, looked
    return None, looked


def _fspath(value):
    """The file's path, looked up with `find_file`; left as given where it is found nowhere (the validator then
    says where it looked)."""
    if isinstance(value, (str, os.PathLike)):
        found, _ = find_file(value)
        return found if found is not None else os.fspath(value)
    return value


def _existing_file(inst, attr, value):
    where = f"{type(inst).__name__}.{attr.name}={value!r}"
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise OptionError(f"{where} is not accepted: expected the path of an existing file (a non-empty str).")
    found, looked = find_file(value)
    if found is None:
        places = "".join(f"\n  {p}" for p in looked)
        raise OptionError(f"{where} is not accepted: no such file. Looked in, in order:{places}\nGive an existing "
                          f"path, or put the file under a folder of ${ASSETS_ENV} (folders separated by "
                          f"{os.pathsep!r}).")


@attrs.define(frozen=True, kw_only=True)
class FileMorph(Morph):
    """A morph read from a file. `file`: an absolute path, or a relative one looked up from the working directory,
    then in each of `asset_dirs()` (see `find_file`); the first match is kept."""

    file: str = attrs.field(converter=_fspath, validator=_existing_file)
    scale: float = attrs.field(default=1.0, validator=v.positive)


def _threshold(inst, attr, value):
    if not v._is_real(value) or not value >= 0:
        v._fail(inst, attr, value, "a number >= 0 (inf: never decompose)")


def _plain_options(inst, attr, value):
    if value is not None and not (isinstance(value, dict) and all(isinstance(k, str) for k in value) and all(
            isinstance(x, (int, float, bool, str)) for x in value.values())):
        v._fail(inst, attr, value, "None or a dict of str to numbers, bools or str")


def _armature(inst, attr, value):
    if value is not None and (not v._is_real(value) or not (0 <= value < math.inf)):
        v._fail(inst, attr, value, "None or a finite number >= 0 (kg m^2 for a hinge, kg for a slide)")


@attrs.define(frozen=True, kw_only=True, slots=False)
class RigidMeshOptions:
    """How the rigid solver turns a file's meshes into collision shapes (Genesis World's names and defaults).

    convexify: True: each mesh collides as its convex hull, or as convex parts (CoACD, Wei et al. 2022) where the
    hull misses its volume by more than the error threshold below. False: each mesh collides as its own,
    non-convex, shape, which the rigid solver represents by its convex decomposition whatever the threshold
    (Genesis World collides such meshes through a signed distance field instead; the shape is the same, to
    CoACD's `threshold` in coacd_options, 0.05 of the mesh's size by default).
    decompose_object_error_threshold: for a body without articulation (a Mesh, a one-body file), the largest
    (hull volume - mesh volume) / hull volume kept as the hull; 0: always decompose; inf: never.
    decompose_robot_error_threshold: the same for the meshes of an articulated robot (default inf: hulls).
    A mesh that is not closed (not watertight: overlapping parts, holes) has its volume measured on a voxel grid
    filled from its surface, so that it is decomposed, never silently taken as its hull.
    coacd_options: keyword arguments for coacd.run_coacd (threshold, max_convex_hull, resolution, seed, ...).
    batch_fixed_verts: accepted for Genesis World's scripts, with no effect: a fixed base's pose is state per
    environment here whatever it says (entity.set_pos / set_quat move it, kinematically, between steps).
    requires_jac_and_IK: accepted, with no effect: Jacobians and inverse kinematics are available for every
    rigid entity.
    """

    convexify: bool = attrs.field(default=True, validator=v.is_bool)
    decompose_object_error_threshold: float = attrs.field(default=0.15, validator=_threshold)
    decompose_robot_error_threshold: float = attrs.field(default=math.inf, validator=_threshold)
    coacd_options: dict | None = attrs.field(default=None, validator=_plain_options)
    batch_fixed_verts: bool = attrs.field(default=False, validator=v.is_bool)
    requires_jac_and_IK: bool = attrs.field(default=False, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True, slots=False)
class RobotFileOptions(RigidMeshOptions):
    """default_armature (Genesis World's, default 0.1): the rotor inertia (kg m^2 for a hinge, kg for a slide)
    given to every hinge, slide and ball joint's dofs whose file gives none (all of a URDF's, which has no such
    field; an MJCF joint without `armature` on it or in its default class). None: the file's values (0 where it
    gives none), as MuJoCo reads the file."""

    default_armature: float | None = attrs.field(default=0.1, validator=_armature)
    requires_jac_and_IK: bool = attrs.field(default=True, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True)
class Mesh(FileMorph, TetOptions, CollisionFilter, RigidMeshOptions):
    """A triangle mesh from an OBJ/STL file. The collision options: see RigidMeshOptions. The tet options: see
    TetOptions."""

    fixed: bool = attrs.field(default=False, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True)
class URDF(FileMorph, RobotFileOptions):
    """A URDF robot; its base is floating unless `fixed=True`. merge_fixed_links (Genesis World's default, True):
    a link on a fixed joint becomes part of its parent (same dynamics, fewer links), except the names in
    links_to_keep."""

    fixed: bool = attrs.field(default=False, validator=v.is_bool)
    merge_fixed_links: bool = attrs.field(default=True, validator=v.is_bool)
    links_to_keep: tuple = attrs.field(default=(), converter=lambda x: (x,) if isinstance(x, str) else tuple(x))

    @links_to_keep.validator
    def _links_to_keep(self, attribute, value):
        if not all(isinstance(n, str) for n in value):
            raise ValueError(f"links_to_keep: expected link names (str), got {list(value)!r}.")


@attrs.define(frozen=True, kw_only=True)
class MJCF(FileMorph, RobotFileOptions):
    """An MJCF model; a body has a free base only where the file gives it a free joint."""


DRONE_MODELS = ("CF2X", "CF2P", "RACE")


def _names(value):
    return (value,) if isinstance(value, str) else tuple(value)


def _link_names(inst, attr, value):
    if not value or not all(isinstance(n, str) and n for n in value) or len(set(value)) != len(value):
        v._fail(inst, attr, value, "a non-empty sequence of distinct link names (str)")


def _spins(inst, attr, value):
    if not all(isinstance(s, int) and not isinstance(s, bool) and s in (-1, 1) for s in value):
        v._fail(inst, attr, value, "a sequence of 1 (counter-clockwise) or -1 (clockwise), one per propeller")


def _spin_tuple(value):
    try:
        return tuple(int(s) if isinstance(s, float) and s.is_integer() else s for s in value)
    except TypeError:
        return value


def _damping_scale(inst, attr, value):
    if value is not None and (not v._is_real(value) or not 0 <= value < math.inf):
        v._fail(inst, attr, value, "None or a finite number >= 0 (N m s/rad per kg)")


@attrs.define(frozen=True, kw_only=True)
class Drone(URDF):
    """A multirotor from a URDF file (Genesis World's `gs.morphs.Drone`, with its defaults); the rigid solver makes
    it a DroneEntity, whose `set_propellers_rpm` turns propeller speeds into thrust and drag torque (docs/rigid.md,
    "Drones"). The file's `<properties kf=... km=.../>` element gives the thrust coefficient KF (N/rpm^2) and the
    drag-torque coefficient KM (N m/rpm^2).

    model: "CF2X" (default), "CF2P" or "RACE" (RACE reverses the drag torque, as Genesis World does).
    propellers_link_name: the propeller links, in the order of the rpm given to set_propellers_rpm; they are kept
    as links (added to links_to_keep) when fixed links are merged. propellers_spin: each propeller's spin, 1
    counter-clockwise, -1 clockwise (its drag torque about the link's z axis is KM rpm^2 spin).
    default_base_ang_damping_scale: the floating base's angular damping per kg of the drone's mass (N m s/rad per
    kg; None: none), on the three rotation dofs of its free joint. prioritize_urdf_material: accepted for Genesis
    World's scripts (how its renderer picks a colour); the cameras here draw the file's colours.
    COM_link_name and propellers_link_names are Genesis World's deprecated spellings: the first is ignored (the true
    centre of mass is used), the second stands for propellers_link_name; each warns.
    """

    model: str = attrs.field(default="CF2X", validator=v.one_of(*DRONE_MODELS))
    propellers_link_name: tuple = attrs.field(default=("prop0_link", "prop1_link", "prop2_link", "prop3_link"),
                                              converter=_names, validator=_link_names)
    propellers_spin: tuple = attrs.field(default=(-1, 1, -1, 1), converter=_spin_tuple, validator=_spins)
    default_base_ang_damping_scale: float | None = attrs.field(default=1e-5, validator=_damping_scale)
    prioritize_urdf_material: bool = attrs.field(default=False, validator=v.is_bool)
    COM_link_name: str | None = attrs.field(default=None)
    propellers_link_names: tuple | None = attrs.field(default=None,
                                                      converter=attrs.converters.optional(_names))

    def __attrs_post_init__(self):
        if self.COM_link_name is not None:
            warnings.warn("Drone(COM_link_name=...) is deprecated and ignored: the drone's true centre of mass is "
                          "used.", stacklevel=3)
            object.__setattr__(self, "COM_link_name", None)
        if self.propellers_link_names is not None:
            if self.propellers_link_name != attrs.fields(Drone).propellers_link_name.default:
                raise OptionError("Drone: give propellers_link_name, or its deprecated spelling "
                                  "propellers_link_names, not both.")
            warnings.warn("Drone(propellers_link_names=...) is deprecated: use propellers_link_name.", stacklevel=3)
            names = self.propellers_link_names
            _link_names(self, attrs.fields(Drone).propellers_link_name, names)
            object.__setattr__(self, "propellers_link_name", names)
            object.__setattr__(self, "propellers_link_names", None)
        if len(self.propellers_spin) != len(self.propellers_link_name):
            raise OptionError(f"Drone: propellers_spin={self.propellers_spin!r} has {len(self.propellers_spin)} "
                              f"entries for {len(self.propellers_link_name)} propellers "
                              f"(propellers_link_name={self.propellers_link_name!r}): give one spin per propeller.")
        if not os.fspath(self.file).lower().endswith(".urdf"):
            raise OptionError(f"Drone(file={self.file!r}) is not accepted: a drone is read from a URDF file (.urdf).")
        keep = tuple(dict.fromkeys(self.links_to_keep + self.propellers_link_name))
        object.__setattr__(self, "links_to_keep", keep)
        super().__attrs_post_init__()

    def as_dict(self) -> dict:
        d = super().as_dict()
        d.pop("COM_link_name", None)  # deprecated spellings, folded in (or dropped) at construction
        d.pop("propellers_link_names", None)
        return d


def _pair(kind):
    def convert(value):
        try:
            items = tuple(value)
        except TypeError:
            return value
        if kind is int:
            return tuple(int(x) if isinstance(x, float) and x.is_integer() else x for x in items)
        return tuple(float(x) if v._is_real(x) else x for x in items)

    return convert


def _positive_ints(inst, attr, value):
    if not (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 4096 for n in value)):
        v._fail(inst, attr, value, "two ints in [1, 4096]")


def _height_field(value):
    if value is None:
        return None
    import numpy as np

    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        return value
    a.setflags(write=False)
    return a


def _subterrain_types(value):
    if isinstance(value, str):
        return value
    try:
        return tuple(tuple(row) if not isinstance(row, str) else (row,) for row in value)
    except TypeError:
        return value


@attrs.define(frozen=True, kw_only=True, eq=False)
class Terrain(Morph, CollisionFilter):
    """A static height-field terrain (Genesis World's `gs.morphs.Terrain`, with its parameters and defaults): a grid
    of `n_subterrains` subterrains, each `subterrain_size` metres, of the kinds `subterrain_types` (a name for all,
    or a 2-D list of names of shape n_subterrains; genesis_core.terrain.SUBTERRAIN_TYPES) with
    `subterrain_parameters` overriding each kind's defaults; or the raw heights `height_field` [nx, ny] (then the
    subterrain options are ignored). Vertex (i, j) lies at (i, j) * horizontal_scale from `pos` (the grid's corner),
    height * vertical_scale above it. With randomize False the random kinds draw from seed 0, as in Genesis World.

    The rigid solver collides with the grid itself (docs/rigid.md, "Terrain"), particle solvers through the
    collider. uv_scale and batch_fixed_verts are accepted with no effect (the cameras draw the terrain's
    triangles in the entity's colour); `name` caches a generated height field in this process under that name and
    these options (Genesis World caches it on disk). A random terrain is drawn once per morph; the scene's
    checkpoint signature names the heights by a hash."""

    randomize: bool = attrs.field(default=False, validator=v.is_bool)
    n_subterrains: tuple = attrs.field(default=(3, 3), converter=_pair(int), validator=_positive_ints)
    subterrain_size: tuple = attrs.field(default=(12.0, 12.0), converter=_pair(float), validator=v.vec(2, True))
    horizontal_scale: float = attrs.field(default=0.25, validator=v.positive)
    vertical_scale: float = attrs.field(default=0.005, validator=v.positive)
    uv_scale: float = attrs.field(default=1.0, validator=v.positive)
    subterrain_types: object = attrs.field(default=(
        ("flat_terrain", "random_uniform_terrain", "stepping_stones_terrain"),
        ("pyramid_sloped_terrain", "discrete_obstacles_terrain", "wave_terrain"),
        ("random_uniform_terrain", "pyramid_stairs_terrain", "sloped_terrain")), converter=_subterrain_types)
    height_field: object = attrs.field(default=None, converter=_height_field)
    name: str | None = attrs.field(default=None)
    subterrain_parameters: dict | None = attrs.field(default=None)
    batch_fixed_verts: bool = attrs.field(default=False, validator=v.is_bool)
    from_stored: object = attrs.field(default=None)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        from . import terrain as T

        cls = type(self).__name__
        if self.from_stored is not None:
            warnings.warn("Terrain(from_stored=...) is deprecated: use name.", stacklevel=3)
            if self.name is None and isinstance(self.from_stored, str):
                object.__setattr__(self, "name", self.from_stored)
            object.__setattr__(self, "from_stored", None)
        if self.name is not None and not isinstance(self.name, str):
            raise OptionError(f"{cls}.name={self.name!r} is not accepted: expected None or a str.")
        if self.height_field is not None:
            import numpy as np

            hf = self.height_field
            if not isinstance(hf, np.ndarray) or hf.ndim != 2 or min(hf.shape) < 2:
                raise OptionError(f"{cls}.height_field is not accepted: expected a 2-D array of at least 2 x 2 "
                                  f"heights, got {getattr(hf, 'shape', type(hf).__name__)}.")
            if not np.isfinite(hf).all():
                bad = tuple(int(i) for i in np.argwhere(~np.isfinite(hf))[0])
                raise OptionError(f"{cls}.height_field is not accepted: heights must be finite; entry {bad} is "
                                  f"{hf[bad]}.")
            if hf.size > T.MAX_VERTICES:
                raise OptionError(f"{cls}.height_field has {hf.size} vertices, more than {T.MAX_VERTICES}.")
            return
        types = self.subterrain_types
        n = self.n_subterrains
        if isinstance(types, str):
            types = tuple((types,) * n[1] for _ in range(n[0]))
            object.__setattr__(self, "subterrain_types", types)
        if not (isinstance(types, tuple) and len(types) == n[0] and all(len(r) == n[1] for r in types)):
            raise OptionError(f"{cls}.subterrain_types={types!r} is not accepted: expected a name or a 2-D list of "
                              f"names of shape n_subterrains={n}.")
        for row in types:
            for kind in row:
                if kind not in T.SUBTERRAIN_TYPES:
                    raise OptionError(f"{cls}.subterrain_types: {kind!r} is not a subterrain type; expected one of "
                                      f"{list(T.SUBTERRAIN_TYPES)}.")
        for k, size in enumerate(self.subterrain_size):
            if not T.is_multiple(size, self.horizontal_scale):
                raise OptionError(f"{cls}.subterrain_size={self.subterrain_size} is not accepted: each size must be "
                                  f"a whole number of horizontal_scale={self.horizontal_scale} cells.")
        custom = self.subterrain_parameters or {}
        if not isinstance(custom, dict) or not all(isinstance(p, dict) for p in custom.values()):
            raise OptionError(f"{cls}.subterrain_parameters={custom!r} is not accepted: expected a dict of "
                              "subterrain type -> dict of parameters.")
        merged = {}
        for kind in T.SUBTERRAIN_TYPES:
            params = dict(T.DEFAULT_PARAMS[kind]) | dict(custom.get(kind, {}))
            allowed = set(T.DEFAULT_PARAMS[kind]) | set(T.EXTRA_PARAMS.get(kind, {}))
            unknown = sorted(set(params) - allowed)
            bad = [k for k, x in params.items() if not v._is_real(x) or not math.isfinite(x)]
            if unknown or bad:
                raise OptionError(f"{cls}.subterrain_parameters[{kind!r}]: " + (
                    f"unknown parameters {unknown}; expected some of {sorted(allowed)}" if unknown else
                    f"{bad} must be finite numbers") + ".")
            merged[kind] = params
        for kind in set(custom) - set(T.SUBTERRAIN_TYPES):
            raise OptionError(f"{cls}.subterrain_parameters: {kind!r} is not a subterrain type; expected some of "
                              f"{list(T.SUBTERRAIN_TYPES)}.")
        object.__setattr__(self, "subterrain_parameters", merged)
        cells = 1
        for k in range(2):
            cells *= n[k] * round(self.subterrain_size[k] / self.horizontal_scale) + 1
        if cells > T.MAX_VERTICES:
            raise OptionError(f"{cls}: {cells} height-field vertices, more than {T.MAX_VERTICES}; use fewer or smaller "
                              "subterrains or a larger horizontal_scale.")

    @property
    def default_params(self) -> dict:
        from .terrain import DEFAULT_PARAMS

        return {k: dict(p) for k, p in DEFAULT_PARAMS.items()}

    @property
    def subterrain_params(self) -> dict:
        return self.subterrain_parameters

    def raw_heights(self):
        """The raw height field [nx, ny] (units of vertical_scale): `height_field`, or the subterrains generated
        (once per process for a named terrain and these options)."""
        from . import terrain as T

        if self.height_field is not None:
            return self.height_field
        if self in _GENERATED:
            return _GENERATED[self]
        key = (self.name, self.n_subterrains, self.subterrain_size, self.horizontal_scale, self.vertical_scale,
               self.subterrain_types, repr(sorted(self.subterrain_parameters.items())), self.randomize)
        H = _NAMED_TERRAINS.get(key) if self.name is not None else None
        if H is None:
            H = T.subterrain_grid(self.n_subterrains, self.subterrain_size, self.horizontal_scale,
                                  self.vertical_scale, self.subterrain_types, self.subterrain_parameters,
                                  self.randomize)
            H.setflags(write=False)
            if self.name is not None:
                _NAMED_TERRAINS[key] = H
        _GENERATED[self] = H  # (a random terrain is drawn once per morph)
        return H

    def as_dict(self) -> dict:
        from .terrain import digest

        d = super().as_dict()
        # the heights, generated or given, by a hash (a checkpoint fits a scene with the same terrain)
        d["height_field"] = digest(self.raw_heights())
        d["subterrain_types"] = [list(r) for r in self.subterrain_types] if not isinstance(
            self.subterrain_types, str) else self.subterrain_types
        d.pop("from_stored", None)
        return d


# (a Terrain is one terrain: equal options drawn twice with randomize=True are two)
Terrain.__eq__, Terrain.__hash__ = object.__eq__, object.__hash__
_NAMED_TERRAINS: dict = {}
_GENERATED = weakref.WeakKeyDictionary()


@attrs.define(frozen=True, kw_only=True)
class Nowhere(Morph):
    """`n_particles` particles placed nowhere yet: a particle entity whose particles start inactive, for an emitter
    to place and activate (Genesis World's morph, which `scene.add_emitter` makes)."""

    n_particles: int = attrs.field(validator=v.int_at_least(1))
