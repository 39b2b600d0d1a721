"""What the renderer draws: each solver's `RenderView`, per environment, in world coordinates.

A solver is drawn through one of three ways, the first it offers:

1. `solver.render_view(f) -> RenderView`: the solver says exactly what it looks like (a third-party solver
   implements this and is drawn without the renderer knowing it).
2. `solver.collider_view(f)` (`genesis_core.coupler.ColliderView`): its collision geoms become primitives
   (sphere, capsule, box, cylinder, ellipsoid, plane, and each convex piece of a mesh as its half-spaces).
3. Particles: a solver built on the core's particle kit (`genesis_core.particles.ParticleSolver`) is drawn from
   its `pos` / `active` state at the current frame with radius particle_size / 2; any other solver with
   `particle_view(f)` (`ParticleView`) from that view.

The renderer imports no solver plugin; it reads only these interfaces and the entities' public attributes.
"""

from __future__ import annotations

import attrs
import numpy as np
import torch

from ..coupler import GEOM_BOX, GEOM_CAPSULE, GEOM_CYLINDER, GEOM_ELLIPSOID, GEOM_MESH, GEOM_PLANE, GEOM_SPHERE
from ..errors import OptionError, SceneError
from ..morphs import Plane
from . import kernels as K

# ColliderView geom codes -> the kernel's primitive kinds
PRIM_OF_GEOM = {GEOM_PLANE: K.PRIM_PLANE, GEOM_SPHERE: K.PRIM_SPHERE, GEOM_CAPSULE: K.PRIM_CAPSULE,
                GEOM_BOX: K.PRIM_BOX, GEOM_CYLINDER: K.PRIM_CYLINDER, GEOM_MESH: K.PRIM_CONVEX,
                GEOM_ELLIPSOID: K.PRIM_ELLIPSOID}

# the colour of an entity whose surface names none: entity id modulo this palette (linear RGB in [0, 1])
PALETTE = np.array([
    [0.80, 0.35, 0.30], [0.30, 0.55, 0.80], [0.40, 0.72, 0.40], [0.85, 0.70, 0.30], [0.60, 0.45, 0.75],
    [0.35, 0.75, 0.75], [0.85, 0.50, 0.65], [0.60, 0.60, 0.60],
], dtype=np.float32)
# a particle view's radius of 0 (points, as the FEM and SPH coupling views give): drawn with this radius, m
DEFAULT_PARTICLE_RADIUS = 0.01


@attrs.define
class RenderView:
    """The geometry one solver shows, at one frame. B = max(n_envs, 1); G primitives; P hull planes; N particles.

    Primitives: geom_type int32 [G] (a GEOM_* code of genesis_core.coupler), geom_size [G, 3] (m, as in
    ColliderView), geom_pos [B, G, 3] (world), geom_quat [B, G, 4] (w, x, y, z; world), geom_entity int32 [G]
    (the index in scene.entities; -1: not an entity's), geom_color [G, 3] (RGB in [0, 1]; None: the entity's
    colour), geom_hull int32 [G, 2] and hull_planes [P, 4] (a mesh geom's convex piece, as in ColliderView).
    Particles: particle_pos [B, N, 3] (world), particle_radius [N] (m; <= 0: not drawn), particle_active
    [B, N] (0: not drawn; None: all drawn), particle_entity int32 [N], particle_color [N, 3] (None: the entity's).
    Triangle meshes (M meshes, V vertices, F faces): mesh_verts [V, 3] (each mesh in its own frame, a fixed shape:
    a rigid visual mesh) or [B, V, 3] (world, per environment: a deforming surface, as FEM's boundary or a cloth),
    mesh_faces int32 [F, 3] (indices into the V vertices), mesh_range int32 [M, 2] (each mesh's faces are
    mesh_faces[first:first + count]), mesh_pos [B, M, 3] and mesh_quat [B, M, 4] (each mesh frame's world pose, w
    first; None: the identity; only with [V, 3] vertices), mesh_entity int32 [M], mesh_color [M, 3] (None: the
    entities' colours). Triangles are two-sided; a mesh with a non-finite vertex or pose in an environment is not
    drawn there. Any part may be absent (None).
    Segmentation (VisOptions.segmentation_level, Genesis World's keys): geom_link / mesh_link int32 [G] / [M] (the
    solver's link index of each primitive or mesh; -1: none) and geom_id / mesh_id int32 [G] / [M] (its geom index,
    unique within the solver; -1: none). Without them a primitive is segmented as its entity at every level.
    """

    geom_type: torch.Tensor | None = None
    geom_size: torch.Tensor | None = None
    geom_pos: torch.Tensor | None = None
    geom_quat: torch.Tensor | None = None
    geom_entity: torch.Tensor | None = None
    geom_color: torch.Tensor | None = None
    geom_hull: torch.Tensor | None = None
    hull_planes: torch.Tensor | None = None
    particle_pos: torch.Tensor | None = None
    particle_radius: torch.Tensor | None = None
    particle_active: torch.Tensor | None = None
    particle_entity: torch.Tensor | None = None
    particle_color: torch.Tensor | None = None
    mesh_verts: torch.Tensor | None = None
    mesh_faces: torch.Tensor | None = None
    mesh_range: torch.Tensor | None = None
    mesh_pos: torch.Tensor | None = None
    mesh_quat: torch.Tensor | None = None
    mesh_entity: torch.Tensor | None = None
    mesh_color: torch.Tensor | None = None
    geom_link: torch.Tensor | None = None
    geom_id: torch.Tensor | None = None
    mesh_link: torch.Tensor | None = None
    mesh_id: torch.Tensor | None = None


def entity_color(scene, idx: int) -> np.ndarray:
    """The RGB colour (floats in [0, 1]) of entity `idx`: its `gs.surfaces.*(color=...)` if it gave one (RGB or
    RGBA, clipped to [0, 1]; anything else raises), else its diffuse or emissive texture's (Texture.mean_color),
    else the palette's colour for its index."""
    if idx < 0:
        return PALETTE[-1]
    surface = scene.entity_surface(idx) if hasattr(scene, "entity_surface") else None
    options = {} if surface is None else getattr(surface, "options", {})
    color = options.get("color")
    if color is None:  # a texture's colour (genesis_core.textures): the diffuse one, else the emissive one
        from ..textures import Texture

        for key in ("diffuse_texture", "emissive_texture"):
            texture = options.get(key)
            if isinstance(texture, Texture) and texture.mean_color() is not None:
                return np.asarray(texture.mean_color(), dtype=np.float32)
    if color is not None:
        try:
            c = np.asarray(color, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            c = np.empty(0)
        if c.size not in (3, 4) or not np.all(np.isfinite(c)):
            raise OptionError(f"entity {idx}: its surface's color={color!r} must be 3 or 4 finite numbers (RGB or "
                              "RGBA, in [0, 1]).")
        return np.clip(c[:3], 0.0, 1.0).astype(np.float32)
    return PALETTE[idx % len(PALETTE)]


def _geom_entities(solver, view) -> np.ndarray:
    """The scene entity of each collider geom. A geom on a moving body: the entity whose links
    (`link_start:link_end`, the rigid entity's public range) hold `geom_body`. A static geom (`geom_body` = -1: a
    plane, a fixed entity's geom) carries no link in ColliderView: it is given to the solver's entity whose base
    position (`get_pos()`) is nearest to the geom in environment 0, among the Plane entities for a plane geom and
    among the others for any other geom (among all where there is none of that kind): an approximation (two
    fixed entities based at one point are told apart
    by nothing) that a solver makes exact by implementing `render_view`."""
    body = view.geom_body.detach().cpu().numpy()
    entities = list(getattr(solver, "entities", []))
    out = np.full(body.shape[0], -1, dtype=np.int32)
    ranged = [(e.link_start, e.link_end, e.idx) for e in entities if hasattr(e, "link_start")]
    for g, link in enumerate(body):
        for lo, hi, idx in ranged:
            if lo <= link < hi:
                out[g] = idx
                break
    static = np.nonzero(body < 0)[0]
    if len(static) and entities:
        base = []
        for e in entities:
            try:
                p = e.get_pos()
                base.append(np.asarray(p.detach().cpu().reshape(-1, 3)[0], dtype=np.float64))
            except Exception:  # an entity without a base position is not a candidate
                base.append(np.full(3, np.inf))
        base = np.stack(base)
        is_plane = np.array([isinstance(getattr(e, "morph", None), Plane) for e in entities])
        kinds = view.geom_type.detach().cpu().numpy()
        pos = view.geom_pos.detach().cpu().numpy()[0].astype(np.float64)
        for g in static:
            # a plane geom belongs to a Plane entity, any other geom to another entity (a fixed robot's base
            # often sits at the origin, as the plane does)
            dist = np.linalg.norm(base - pos[g], axis=1)
            kind_of = is_plane == (kinds[g] == GEOM_PLANE)
            if kind_of.any():  # a plane inside a model file (an MJCF floor): no Plane entity, any entity
                dist[~kind_of] = np.inf
            if np.isfinite(dist).any():
                out[g] = entities[int(np.argmin(dist))].idx
    return out


def _from_collider(solver, f: int) -> RenderView:
    v = solver.collider_view(f)
    G = int(v.geom_type.shape[0])
    kinds = v.geom_type.detach().cpu().numpy()
    keep = np.nonzero(np.isin(kinds, list(PRIM_OF_GEOM)))[0]  # drops padding rows (-1) of a solver without geoms
    if len(keep) == 0:
        return RenderView()
    ent = _geom_entities(solver, v)
    dev = v.geom_pos.device
    keep_t = torch.as_tensor(keep, device=dev)
    hull = v.geom_hull if v.geom_hull is not None else torch.zeros((G, 2), dtype=torch.int32, device=dev)
    return RenderView(
        geom_type=v.geom_type[keep_t], geom_size=v.geom_size[keep_t].detach(),
        geom_pos=v.geom_pos[:, keep_t].detach(), geom_quat=v.geom_quat[:, keep_t].detach(),
        geom_entity=torch.as_tensor(ent[keep], dtype=torch.int32), geom_hull=hull[keep_t],
        hull_planes=None if v.hull_planes is None else v.hull_planes.detach(),
        geom_link=v.geom_body.detach().cpu().to(torch.int32)[torch.as_tensor(keep)],
        geom_id=torch.as_tensor(keep, dtype=torch.int32))


def segmentation_key(level: str, entity: int, link: int = -1, geom: int = -1):
    """Genesis World's segmentation key of a drawn element at `level`: the entity index ("entity"), (entity, link)
    ("link") or (entity, link, geom) ("geom"); an element without a link (or geom) falls back to the coarser key.
    -1 (no entity) is the background's."""
    if entity < 0:
        return -1
    if level == "entity" or link < 0:
        return entity
    if level == "link" or geom < 0:
        return (entity, link)
    return (entity, link, geom)


def _ints(x, n):
    return np.full(n, -1, dtype=np.int64) if x is None else x.detach().cpu().numpy().astype(np.int64).reshape(n)


def view_keys(v: RenderView, level: str) -> tuple[list, list, list]:
    """The segmentation keys of a render view's primitives and meshes at `level`, and its particles' entity ids
    (a particle is keyed by its entity at every level, as Genesis World keys particle entities)."""
    geoms = meshes = parts = []
    if v.geom_type is not None and v.geom_type.shape[0] > 0:
        G = int(v.geom_type.shape[0])
        ent, link, gid = _ints(v.geom_entity, G), _ints(v.geom_link, G), _ints(v.geom_id, G)
        geoms = [segmentation_key(level, int(e), int(lk), int(g)) for e, lk, g in zip(ent, link, gid)]
    if v.mesh_verts is not None and v.mesh_range is not None and v.mesh_range.shape[0] > 0:
        M = int(v.mesh_range.shape[0])
        ent, link, gid = _ints(v.mesh_entity, M), _ints(v.mesh_link, M), _ints(v.mesh_id, M)
        meshes = [segmentation_key(level, int(e), int(lk), int(g)) for e, lk, g in zip(ent, link, gid)]
    if v.particle_pos is not None and v.particle_pos.shape[-2] > 0:
        N = int(v.particle_pos.shape[-2])
        parts = _ints(v.particle_entity, N)  # entity ids: a particle's key is its entity's
    return geoms, meshes, parts


def particle_codes(smap: "SegmentationMap", entities: np.ndarray) -> np.ndarray:
    """The segmentation index of each particle (its entity's key) [N]."""
    uniq, inv = np.unique(entities, return_inverse=True)
    return smap.codes([segmentation_key("entity", int(e)) for e in uniq])[inv.reshape(-1)]


def segmentation_map(scene, views=None) -> "SegmentationMap":
    """The scene's SegmentationMap, every drawn element numbered (at the first render, from the views it draws, or
    when scene.segmentation_idx_dict is first read)."""
    smap = getattr(scene, "_segmentation_map", None)
    if smap is None:
        smap = scene._segmentation_map = SegmentationMap()
        level = scene.vis_options.segmentation_level
        keys = []
        for v in solver_render_views(scene) if views is None else views:
            geoms, meshes, parts = view_keys(v, level)
            keys += geoms + meshes + [segmentation_key(level, int(e)) for e in np.unique(parts)]
        smap.codes(keys)
    return smap


class SegmentationMap:
    """A scene's segmentation indices, as Genesis World numbers them: 0 is the background (key -1), 1, 2, ... the
    keys of its drawn elements (`segmentation_key`), in sorted order of (entity, link, geom) when first seen, so
    that a scene built the same way numbers them the same way. `idx_dict` is `scene.segmentation_idx_dict`."""

    def __init__(self):
        self.index = {-1: 0}

    def codes(self, keys) -> np.ndarray:
        """The index of each key, numbering the new ones after the known ones (sorted among themselves)."""
        def order(k):
            return (k, -1, -1) if isinstance(k, int) else tuple(k) + (-1,) * (3 - len(k))

        for k in sorted({k for k in keys if k not in self.index}, key=order):
            self.index[k] = len(self.index)
        return np.asarray([self.index[k] for k in keys], dtype=np.int32)

    @property
    def idx_dict(self) -> dict:
        return {i: k for k, i in self.index.items()}


def _kit_particles(solver, frame: int) -> RenderView:
    """A particle-kit solver at the scene's current frame: every active particle as a sphere of radius
    particle_size / 2, its entity from the entities' `particle_start:particle_end`."""
    st = solver.state
    pos = st.at("pos", frame).detach()
    n = pos.shape[-2]
    active = st.at("active", frame).detach() if "active" in st.specs else None
    ent = np.full(n, -1, dtype=np.int32)
    for e in solver.entities:
        ent[e.particle_start:e.particle_end] = e.idx
    radius = torch.full((n,), 0.5 * float(solver.particle_size), dtype=torch.float32)
    return RenderView(particle_pos=pos.reshape(-1, n, 3), particle_radius=radius,
                      particle_active=None if active is None else active.reshape(-1, n),
                      particle_entity=torch.as_tensor(ent))


def kit_surface_view(solver, frame: int, faces_of: dict) -> RenderView:
    """A particle-kit solver at `frame` with some entities drawn as triangle surfaces: faces_of maps an entity of
    `solver.entities` to its triangles (local particle indices, [F, 3]); their vertices are its particles at the
    frame, per environment (a particle that is not active is not finite here, so that its entity's surface is not
    drawn in that environment). Every other entity's particles are spheres, as without surfaces."""
    view = _kit_particles(solver, frame)
    pos, active = view.particle_pos, view.particle_active
    n = pos.shape[-2]
    faces, ranges, ents = [], [], []
    radius = view.particle_radius.clone()
    for e, f in faces_of.items():
        f = np.asarray(f, dtype=np.int64).reshape(-1, 3)
        if len(f) == 0:
            continue
        if f.min() < 0 or f.max() >= e.particle_end - e.particle_start:
            raise SceneError(f"entity {e.idx}: a surface triangle names a particle outside its "
                             f"{e.particle_end - e.particle_start}.")
        ranges.append((sum(len(x) for x in faces), len(f)))
        faces.append(f + e.particle_start)
        ents.append(e.idx)
        radius[e.particle_start:e.particle_end] = 0.0  # drawn as the surface, not as spheres
    if not faces:
        return view
    verts = pos if active is None else torch.where(active[..., None] > 0, pos, torch.full_like(pos, float("nan")))
    return attrs.evolve(view, particle_radius=radius, mesh_verts=verts.reshape(-1, n, 3),
                        mesh_faces=torch.as_tensor(np.concatenate(faces), dtype=torch.int32),
                        mesh_range=torch.as_tensor(ranges, dtype=torch.int32),
                        mesh_entity=torch.as_tensor(ents, dtype=torch.int32))


def _from_particle_view(solver, f: int) -> RenderView:
    v = solver.particle_view(f)
    n = v.pos.shape[-2]
    ent = np.full(n, -1, dtype=np.int32)
    for e in getattr(solver, "entities", []):
        if hasattr(e, "particle_start"):
            ent[e.particle_start:e.particle_end] = e.idx
    r = float(v.radius) if v.radius > 0 else DEFAULT_PARTICLE_RADIUS
    return RenderView(particle_pos=v.pos.detach(), particle_radius=torch.full((n,), r, dtype=torch.float32),
                      particle_active=v.active.detach(), particle_entity=torch.as_tensor(ent))


def solver_render_views(scene) -> list[RenderView]:
    """The render view of every active solver of a built scene, at its current frame."""
    from ..particles.solver import ParticleSolver

    frame = scene._frame
    views = []
    with torch.no_grad():
        for s in scene.active_solvers:
            prev = (frame - 1) % scene._n_frames  # the *_view(f) methods show frame f + 1
            if hasattr(s, "render_view"):
                v = s.render_view(prev)
                if not isinstance(v, RenderView):
                    raise SceneError(f"{s.name}.render_view returned a {type(v).__name__}, not a "
                                     "genesis_core.render.RenderView.")
                views.append(v)
                continue
            if hasattr(s, "collider_view"):
                views.append(_from_collider(s, prev))
            if isinstance(s, ParticleSolver):
                views.append(_kit_particles(s, frame))
            elif hasattr(s, "particle_view"):
                views.append(_from_particle_view(s, prev))
    return views
