"""Genesis World's hybrid bodies: `gs.materials.Hybrid`, a soft MPM skin around a rigid skeleton.

`scene.add_entity(gs.morphs.URDF(...) or MJCF(...), material=gs.materials.Hybrid(...))` adds two entities: the
skeleton, a rigid entity of the file simulated by the rigid solver (`part_rigid`), and the skin, an MPM entity
whose particles fill the shell of `thickness` around the skeleton's collision geoms (`part_soft`), each attached to
the link of the geom nearest to it (genesis_mpm.kernels_hybrid). Every substep the skin is pulled after its links
and the links take the reaction (Genesis World's HybridEntity.update_soft_part, kernels_hybrid.follow_links). The
object add_entity returns drives the two (`HybridEntity`: the rigid part's dofs under Genesis World's names).

The attachments are MPM state (`attach_link`, `attach_local`: declared, checked against the scene's links,
carried by snapshots, `reset(envs_idx=...)` and checkpoints); the coupling constants are the material's.
"""

from __future__ import annotations

import attrs
import numpy as np
import torch

from genesis_core import morphs
from genesis_core import validators as v
from genesis_core.errors import OptionError
from genesis_core.geoms import GeomKind
from genesis_core.materials import Material
from genesis_core.particles.sampling import MAX_LATTICE
from genesis_core.rotations import quat_mul, quat_to_mat, rotate

from .materials import Base

RIGID_SOLVER = "RigidSolver"
WRAPPED = (GeomKind.SPHERE, GeomKind.CAPSULE, GeomKind.BOX, GeomKind.CYLINDER, GeomKind.MESH, GeomKind.ELLIPSOID)


def _rigid_material(inst, attr, value):
    if not isinstance(value, Material) or value.solver != RIGID_SOLVER or not hasattr(value, "needs_coup"):
        raise OptionError(f"Hybrid.{attr.name}={value!r} is not accepted: expected a gs.materials.Rigid(...) "
                          "(the skeleton's material).")


def _soft_material(inst, attr, value):
    if not isinstance(value, Base):
        raise OptionError(f"Hybrid.{attr.name}={value!r} is not accepted: expected an MPM material "
                          "(gs.materials.MPM.Elastic, MPM.Muscle, ...): the skin is an MPM entity, as in Genesis "
                          "World.")


def _no_custom(inst, attr, value):
    if value is not None:
        raise OptionError(f"Hybrid.{attr.name}: custom instantiation is not supported here (Genesis World's "
                          "callbacks take its internal link and geom objects); leave it None: the skeleton is "
                          "the URDF/MJCF file and the skin the shell of `thickness` around its collision geoms.")


@attrs.define(frozen=True, kw_only=True)
class Hybrid(Material):
    """A soft skin driven by a rigid skeleton (Genesis World's material, its parameters and defaults).

    material_rigid: the skeleton's gs.materials.Rigid. material_soft: the skin's MPM material (for an MPM.Muscle,
    each link's skin is a muscle group, as Genesis World sets them). thickness (m, > 0, default 0.05): how far the
    skin reaches beyond the collision geoms. damping (>= 0, default 0): the pull on a skin particle is scaled by
    exp(-dt damping), dt the MPM solver's step. soft_dv_coef (>= 0, default 0.01): the share of the velocity
    difference to its target a particle takes each substep. use_default_coupling (default False): True leaves
    the skin free and lets the skeleton's geoms collide with it through the usual MPM-rigid coupling; False
    attaches the skin to its links and hides the skeleton's geoms from the particle solvers (Genesis World's
    `needs_coup`). func_instantiate_rigid_from_soft, func_instantiate_soft_from_rigid,
    func_instantiate_rigid_soft_association: Genesis World's callbacks; only None is accepted.
    """

    solver = "MPMSolver"

    material_rigid: Material = attrs.field(validator=_rigid_material)
    material_soft: Material = attrs.field(validator=_soft_material)
    use_default_coupling: bool = attrs.field(default=False, validator=v.is_bool)
    damping: float = attrs.field(default=0.0, validator=v.non_negative)
    thickness: float = attrs.field(default=0.05, validator=v.positive)
    soft_dv_coef: float = attrs.field(default=0.01, validator=v.non_negative)
    func_instantiate_rigid_from_soft: object = attrs.field(default=None, validator=_no_custom)
    func_instantiate_soft_from_rigid: object = attrs.field(default=None, validator=_no_custom)
    func_instantiate_rigid_soft_association: object = attrs.field(default=None, validator=_no_custom)

    def add_parts(self, scene, morph, name=None, surface=None, **kwargs) -> "HybridEntity":
        """Called by scene.add_entity: the skeleton, then the skin (genesis_core.scene.Scene._add_composite
        removes both again should this fail)."""
        if not isinstance(morph, (morphs.URDF, morphs.MJCF)):
            raise OptionError(f"add_entity(material=gs.materials.Hybrid(...)): morph must be a gs.morphs.URDF or "
                              f"gs.morphs.MJCF (the skeleton), got {type(morph).__name__}; Genesis World's "
                              "skeleton grown from a Mesh (its skeletonization) is not built here.")
        if scene.sim_options.requires_grad:
            raise OptionError("gs.materials.Hybrid is not differentiable: build the scene with "
                              "SimOptions(requires_grad=False) (the skin's pull on its links has no reverse).")
        by_name = {s.name: s for s in scene.solvers}
        if RIGID_SOLVER not in by_name:
            from genesis_core.plugins.manager import missing_plugin_error

            raise missing_plugin_error("gs.materials.Hybrid's skeleton needs solver", RIGID_SOLVER)
        mpm = by_name[self.solver]
        names = (None, None) if name is None else (f"{name}_rigid", f"{name}_soft")
        for n in names:
            if n is not None and n in scene.entity_names:
                raise OptionError(f"add_entity: a hybrid named {name!r} names its parts {names}; {n!r} is already "
                                  "taken.")
        rigid_material = attrs.evolve(self.material_rigid, needs_coup=self.use_default_coupling)
        part_rigid = scene.add_entity(morph, material=rigid_material, name=names[0])
        points, link_local, slots = skin_points(part_rigid, self.thickness, mpm.particle_size)
        soft_material = self.material_soft
        if hasattr(soft_material, "n_groups"):  # a muscle: one group per link with a skin, as Genesis World's
            soft_material = attrs.evolve(soft_material, n_groups=len(slots))
        mpm._pending_points = points
        try:
            part_soft = scene.add_entity(morph, material=soft_material, name=names[1],
                                         **({} if surface is None else {"surface": surface}))
        finally:
            mpm.__dict__.pop("_pending_points", None)
        if hasattr(soft_material, "n_groups"):
            part_soft._muscle_group = np.searchsorted(slots, link_local).astype(np.int64)
        mpm.add_skin(Skin(entity=part_soft, part_rigid=part_rigid, link_local=link_local, material=self))
        return HybridEntity(self, morph, part_rigid, part_soft, name)


@attrs.define
class Skin:
    """What the MPM solver keeps of a hybrid's skin: its entity, the skeleton (a rigid entity), each particle's
    link (index among the skeleton's links) and the material (coupling constants; `use_default_coupling` leaves
    the skin unattached)."""

    entity: object
    part_rigid: object
    link_local: np.ndarray
    material: Hybrid

    @property
    def follows(self) -> bool:
        return not self.material.use_default_coupling


def _rest_poses(part_rigid):
    """World pose (pos, quat) of each link of a rigid entity before build, from its links' initial poses in their
    parents' frames (a base link's in the world): the configuration its state starts in."""
    links = part_rigid.links
    start = links[0].idx if links else 0
    poses = []
    for link in links:
        pos, quat = np.asarray(link.pos, dtype=np.float64), np.asarray(link.quat, dtype=np.float64)
        parent = link.parent_idx - start
        if 0 <= parent < len(poses):
            ppos, pquat = poses[parent]
            pos, quat = ppos + rotate(pquat, pos), quat_mul(pquat, quat)
        poses.append((pos, quat))
    return poses


def _bound_radius(geom) -> float:
    size = np.asarray(geom.size, dtype=np.float64)
    kind = geom.type
    if kind == GeomKind.MESH:
        return float(np.linalg.norm(geom.init_verts, axis=1).max())
    if kind == GeomKind.BOX:
        return float(np.linalg.norm(size[:3]))
    if kind == GeomKind.CAPSULE:
        return float(size[0] + size[1])
    if kind == GeomKind.CYLINDER:
        return float(np.hypot(size[0], size[1]))
    return float(np.max(size))  # sphere, ellipsoid


def skin_points(part_rigid, thickness: float, spacing: float):
    """The skin of a rigid entity (before build): the points of a lattice of `spacing` (world axes) outside every
    collision geom of its links and within `thickness` of the nearest (the particle kit's signed distances), each
    with the index of that geom's link among the entity's links (ties: the first geom). Returns (points (n, 3),
    link index per point (n,), the sorted links that have skin). Planes and height fields are not wrapped."""
    from . import kernels_hybrid

    poses = _rest_poses(part_rigid)
    rows, hull_rows = [], []
    for k, link in enumerate(part_rigid.links):
        lpos, lquat = poses[k]
        for g in link.geoms:
            if g.type not in WRAPPED:
                continue
            pos, quat = lpos + rotate(lquat, g.init_pos), quat_mul(lquat, g.init_quat)
            size = np.zeros(3)
            raw = np.asarray(g.size, dtype=np.float64).ravel()[:3]
            size[:len(raw)] = raw
            hull = (0, 0)
            if g.type == GeomKind.MESH:  # its hull's faces as planes (n, n . a) in the geom's frame
                tri = g.init_verts[g.init_faces]
                n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
                keep = np.linalg.norm(n, axis=1) > 1e-12
                n = n[keep] / np.linalg.norm(n[keep], axis=1, keepdims=True)
                hull = (len(hull_rows), len(n))
                hull_rows.extend(np.concatenate([n, np.einsum("ij,ij->i", n, tri[keep, 0])[:, None]], 1).tolist())
            rows.append((k, int(g.type), size, pos, quat, hull, _bound_radius(g)))
    if not rows:
        raise OptionError(f"gs.materials.Hybrid: {part_rigid.morph.file!r} has no collision geoms (spheres, capsules, "
                          "boxes, cylinders, ellipsoids, meshes) to grow a skin around.")
    centres = np.stack([r[3] for r in rows])
    reach = np.array([r[6] for r in rows])[:, None] + thickness
    lo, hi = (centres - reach).min(0), (centres + reach).max(0)
    counts = np.maximum(1, np.round((hi - lo) / spacing).astype(np.int64))
    if float(np.prod(counts.astype(np.float64))) > MAX_LATTICE:
        raise OptionError(f"gs.materials.Hybrid: the skin's box {hi - lo} m at particle_size {spacing:g} m would hold "
                          f"{np.prod(counts.astype(np.float64)):.3g} lattice points, more than {MAX_LATTICE:g}.")
    axes = [(lo[a] + hi[a]) / 2 + (np.arange(counts[a]) - (counts[a] - 1) / 2) * spacing for a in range(3)]
    lattice = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)

    import genesis_core as gs

    fl = torch.float64 if gs.np_float == np.float64 else torch.float32

    def t(x, dtype=fl):
        return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype)

    distance = torch.zeros(len(lattice), dtype=fl)
    nearest = torch.zeros(len(lattice), dtype=torch.int32)
    kernels_hybrid.nearest_geom(
        t(lattice), t([r[1] for r in rows], torch.int32), t(np.stack([r[2] for r in rows])),
        t([r[5] for r in rows], torch.int32), t(hull_rows or [[0.0, 0.0, 1.0, 0.0]]),
        t(centres[None]), t(np.stack([r[4] for r in rows])[None]), distance, nearest)
    d = distance.double().numpy()
    keep = (d > 0) & (d <= thickness)
    if not keep.any():
        raise OptionError(f"gs.materials.Hybrid: thickness={thickness:g} m holds no particle at particle_size "
                          f"{spacing:g} m; make the skin thicker or the MPM particles smaller.")
    link_of_geom = np.array([r[0] for r in rows])
    link_local = link_of_geom[nearest.numpy()[keep]]
    return lattice[keep], link_local, np.unique(link_local)


class HybridEntity:
    """What `scene.add_entity(..., material=gs.materials.Hybrid(...))` returns (Genesis World's HybridEntity): the
    skeleton `part_rigid` and the skin `part_soft` (each an entity of the scene), and the skeleton's dofs under
    Genesis World's names, passed to the rigid part."""

    def __init__(self, material, morph, part_rigid, part_soft, name=None):
        self.material, self.morph = material, morph
        self._part_rigid, self._part_soft = part_rigid, part_soft
        self.name = name if name is not None else f"hybrid_{part_rigid.name}"

    def __repr__(self):
        return f"<HybridEntity {self.name!r}: {self._part_rigid.name!r} + {self._part_soft.name!r}>"

    @property
    def part_rigid(self):
        """The skeleton: a rigid entity."""
        return self._part_rigid

    @property
    def part_soft(self):
        """The skin: an MPM entity."""
        return self._part_soft

    @property
    def solver_rigid(self):
        return self._part_rigid.solver

    @property
    def solver_soft(self):
        return self._part_soft.solver

    @property
    def scene(self):
        return self._part_rigid.scene

    @property
    def n_dofs(self) -> int:
        return self._part_rigid.n_dofs

    @property
    def fixed(self) -> bool:
        """Whether the skeleton's base is welded to the world (its morph's `fixed`)."""
        return bool(getattr(self.morph, "fixed", False))


def _to_skeleton(name):
    def method(self, *args, **kwargs):
        return getattr(self._part_rigid, name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The skeleton's `{name}` (part_rigid.{name}): same arguments, same result."
    return method


# Genesis World's HybridEntity passes these to its rigid part
SKELETON_METHODS = ("get_dofs_position", "get_dofs_velocity", "get_dofs_force", "get_dofs_control_force",
                    "set_dofs_velocity", "set_dofs_force", "control_dofs_position", "control_dofs_position_velocity",
                    "control_dofs_velocity", "control_dofs_force")
for _name in SKELETON_METHODS:
    setattr(HybridEntity, _name, _to_skeleton(_name))
del _name
