"""The viewer: `gs.Scene(show_viewer=True)` serves the scene to a web browser (viser, a three.js viewer).

At `scene.build()` the viewer starts a web server on `ViewerOptions(host, port)` and prints its address once.
It draws what the cameras draw, from every solver's render view (`genesis_core.render.view`): each primitive
and convex piece as a triangle mesh instanced once per shown environment, particles as a point cloud, triangle
surfaces as meshes. After each `scene.step()` it sends the new poses and particle positions, at most
`ViewerOptions.refresh_rate` times a second; `realtime_factor` paces the steps against the wall clock.
Shown environments (`VisOptions.rendered_envs_idx`, all by default) are laid out by
`scene.build(env_spacing=..., n_envs_per_row=..., center_envs_at_origin=...)` as Genesis World lays them out.
"""

from __future__ import annotations

import contextlib
import io
import math
import threading
import time
import weakref

import numpy as np

from .._runtime import logger
from ..launch import torch_one_thread
from ..coupler import GEOM_BOX, GEOM_CAPSULE, GEOM_CYLINDER, GEOM_ELLIPSOID, GEOM_MESH, GEOM_PLANE, GEOM_SPHERE
from ..errors import OptionError, SceneError
from .view import RenderView, entity_color, solver_render_views

# the drawn extent of a plane (half side, m) and its grid's cell (m)
PLANE_HALF = 10.0
PLANE_CELL = 0.5
# three.js intensity per unit of Genesis World's light intensity (its default directional light, 5, gives 3) and
# per unit of its ambient light colour (its default, 0.1, gives 0.5)
DIRECTIONAL_SCALE = 0.6
AMBIENT_SCALE = 5.0


def env_offsets(n_envs: int, spacing=(0.0, 0.0), per_row=None, center=True) -> np.ndarray:
    """Each environment's place in the viewer ([B, 3], m): Genesis World's layout, rows of `per_row` (default
    ceil(sqrt(B))) environments, x = (i // per_row) * spacing[0], y = (i % per_row) * spacing[1], centred on the
    origin when `center`."""
    B = max(n_envs, 1)
    per_row = per_row or math.ceil(math.sqrt(B))
    i = np.arange(B)
    off = np.stack([(i // per_row) * spacing[0], (i % per_row) * spacing[1], np.zeros(B)], axis=-1)
    if center:
        off -= (off.max(0) + off.min(0)) / 2.0
    return off


def convex_mesh(planes: np.ndarray, tol: float = 1e-7):
    """The triangle mesh (vertices [V, 3], faces [F, 3], outward) of the bounded convex piece {p : n . p <= d}
    given by its planes [P, 4]. Vertices are the points where three or more planes meet inside every other
    half-space; each plane's vertices, in angular order about their centre, form a fan of triangles. Returns
    None for an empty or unbounded piece."""
    n = planes[:, :3].astype(np.float64)
    d = planes[:, 3].astype(np.float64)
    P = len(n)
    if P < 4:
        return None
    scale = max(1.0, float(np.abs(d).max()))
    i, j = np.triu_indices(P, 1)
    u = np.cross(n[i], n[j])  # direction of the line where planes i and j meet
    uu = (u * u).sum(-1)
    ok = uu > 1e-12
    i, j, u, uu = i[ok], j[ok], u[ok], uu[ok]
    # a point of that line, then the segment of it inside every half-space
    x0 = (d[i, None] * np.cross(n[j], u) + d[j, None] * np.cross(u, n[i])) / uu[:, None]
    rate = u @ n.T
    room = d[None, :] - x0 @ n.T
    own = np.zeros(rate.shape, dtype=bool)
    own[np.arange(len(i)), i] = own[np.arange(len(i)), j] = True
    flat = own | (np.abs(rate) < 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = room / rate
    hi = np.where(~flat & (rate > 0), s, np.inf).min(-1)
    lo = np.where(~flat & (rate < 0), s, -np.inf).max(-1)
    live = ~((flat & ~own & (room < -tol * scale)).any(-1)) & (hi >= lo - tol * scale / np.sqrt(uu))
    if not live.any() or not (np.isfinite(lo[live]).all() and np.isfinite(hi[live]).all()):
        return None
    pts = np.concatenate([x0[live] + lo[live, None] * u[live], x0[live] + hi[live, None] * u[live]])
    key = np.round(pts / (1e-6 * scale)).astype(np.int64)
    _, first = np.unique(key, axis=0, return_index=True)
    verts = pts[np.sort(first)]
    if len(verts) < 4:
        return None
    faces = []
    on = np.abs(verts @ n.T - d[None, :]) < 1e-5 * scale  # [V, P]
    for k in range(P):
        idx = np.nonzero(on[:, k])[0]
        if len(idx) < 3:
            continue
        c = verts[idx].mean(0)
        a = verts[idx[0]] - c
        a /= np.linalg.norm(a) + 1e-30
        b = np.cross(n[k], a)
        ang = np.arctan2((verts[idx] - c) @ b, (verts[idx] - c) @ a)
        ring = idx[np.argsort(ang)]  # counter-clockwise seen from outside (about the outward normal)
        faces += [(ring[0], ring[m], ring[m + 1]) for m in range(1, len(ring) - 1)]
    if not faces:
        return None
    return verts.astype(np.float32), np.asarray(faces, dtype=np.int32)


def primitive_mesh(kind: int, size, planes=None):
    """A primitive's triangle mesh in its own frame (vertices [V, 3], faces [F, 3]); None if it has none."""
    import trimesh

    r, h = float(size[0]), float(size[1])
    if kind == GEOM_SPHERE:
        m = trimesh.creation.icosphere(subdivisions=2, radius=r)
    elif kind == GEOM_ELLIPSOID:  # (for display: the unit icosphere scaled by the semi-axes)
        m = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
        return ((np.asarray(m.vertices, dtype=np.float64) * np.asarray(size[:3], dtype=np.float64)).astype(np.float32),
                np.asarray(m.faces, dtype=np.int32))
    elif kind == GEOM_CAPSULE:
        m = trimesh.creation.capsule(height=2.0 * h, radius=r, count=[16, 16])
    elif kind == GEOM_CYLINDER:
        m = trimesh.creation.cylinder(radius=r, height=2.0 * h, sections=24)
    elif kind == GEOM_BOX:
        m = trimesh.creation.box(extents=2.0 * np.asarray(size[:3], dtype=np.float64))
    elif kind == GEOM_PLANE:
        q = PLANE_HALF
        return (np.array([[-q, -q, 0], [q, -q, 0], [q, q, 0], [-q, q, 0]], dtype=np.float32),
                np.array([[0, 1, 2], [0, 2, 3]], dtype=np.int32))
    elif kind == GEOM_MESH and planes is not None:
        return convex_mesh(planes)
    else:
        return None
    return np.asarray(m.vertices, dtype=np.float32), np.asarray(m.faces, dtype=np.int32)


def _rgb255(c) -> tuple:
    return tuple(int(round(255 * float(x))) for x in np.clip(np.asarray(c, dtype=np.float64)[:3], 0, 1))


def _box_edges(lo, hi) -> np.ndarray:
    """The 12 edges of the box [lo, hi] as segments [12, 2, 3]."""
    c = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    pairs = [(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1]
    return np.stack([c[[a, b]] for a, b in pairs])


def _camera_wxyz(right, up, back) -> np.ndarray:
    """A camera frame (OpenGL axes as columns) as viser's frustum orientation (OpenCV axes: +z forward, +y down)."""
    R = np.stack([right, -up, -back], axis=-1)
    return _mat_to_wxyz(R)


def _mat_to_wxyz(R: np.ndarray) -> np.ndarray:
    import viser.transforms as vtf

    return np.asarray(vtf.SO3.from_matrix(R).wxyz, dtype=np.float64)


class Viewer:
    """The scene in a web browser. Made by `gs.Scene(show_viewer=True)`; `scene.viewer` after build.

    url: the address to open. update(): sends the scene as it is now (scene.step() calls it). stop(): closes
    the server (also when the scene is collected or the process ends)."""

    def __init__(self, scene, viewer_options, vis_options, show_FPS: bool = False):
        self.scene = weakref.proxy(scene)  # the scene owns its viewer; a collected scene closes it
        self._scene_ref = weakref.ref(scene)
        self.viewer_options = viewer_options
        self.vis_options = vis_options
        self.show_FPS = show_FPS
        self.server = None
        self._nodes = []  # (kind, handle, view index, item)
        self._last_push = -math.inf
        self._wall0 = self._t0 = None
        self._fps_text = None
        self._steps = []
        self._cond = threading.Condition()
        self._pending = None  # the newest state read and not yet sent
        self._images = {}  # camera index -> its image in the panel (GUI=True cameras)
        self._topology = {}  # view index -> its meshes' (used vertices, faces over them, colour), read at build
        self._flusher = None

    # -- life ------------------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.server is None:
            raise SceneError("the viewer starts at scene.build().")
        host = self.viewer_options.host
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.server.get_port()}/"

    def build(self):
        """Start the server (the scene is built) and send the whole scene."""
        try:
            import viser
        except ImportError as e:  # a dependency of genesis-core: only a broken install lacks it
            raise SceneError("show_viewer=True needs the viser package (pip install viser).") from e
        scene, vis = self.scene, self.vis_options
        B = max(scene.n_envs, 1)
        shown = tuple(range(B)) if vis.rendered_envs_idx is None else vis.rendered_envs_idx
        bad = [e for e in shown if e >= B]
        if bad:
            raise OptionError(f"VisOptions.rendered_envs_idx={vis.rendered_envs_idx}: {bad} are not environments "
                              f"of this scene (n_envs={scene.n_envs}).")
        self.shown = np.asarray(shown, dtype=np.int64)
        layout = scene._env_layout
        self.offsets = env_offsets(scene.n_envs, tuple(layout.get("env_spacing", (0.0, 0.0))),
                                   layout.get("n_envs_per_row"), layout.get("center_envs_at_origin", True))
        opts = self.viewer_options
        with contextlib.redirect_stdout(io.StringIO()):  # its banner: the address is printed once, below
            self.server = viser.ViserServer(host=opts.host, port=opts.port, verbose=False)
        sv = self.server
        weakref.finalize(self._scene_ref(), Viewer.stop, self)  # holds the viewer, not the scene
        sv.scene.set_up_direction("+z")
        sv.initial_camera.position = opts.camera_pos
        sv.initial_camera.look_at = opts.camera_lookat
        sv.initial_camera.up = opts.camera_up
        sv.initial_camera.fov = math.radians(opts.camera_fov)
        sv.scene.world_axes.visible = vis.show_world_frame
        if vis.show_world_frame:
            sv.scene.add_frame("/world_frame", axes_length=vis.world_frame_size,
                               axes_radius=0.02 * vis.world_frame_size)
        sv.scene.set_background_image(np.full((4, 4, 3), _rgb255(vis.background_color), dtype=np.uint8),
                                      format="png")
        sv.scene.configure_default_lights(enabled=False)
        amb = np.asarray(vis.ambient_light, dtype=np.float64)
        level = float(amb.max())
        sv.scene.add_light_ambient("/lights/ambient", color=_rgb255(amb / level if level > 0 else amb),
                                   intensity=AMBIENT_SCALE * level)
        self._add_lights()
        if self.show_FPS:
            self._fps_text = sv.gui.add_markdown("steps/s: -")
        with sv.atomic():
            self._add_scene()
        print(f"genesis-core viewer: {self.url}", flush=True)
        self._wall0, self._t0 = time.perf_counter(), scene.t

    def _add_lights(self):
        vis, sv = self.vis_options, self.server
        for k, light in enumerate(vis.lights):
            color = _rgb255(light["color"])
            intensity = float(light["intensity"]) * DIRECTIONAL_SCALE
            if light["type"] == "ambient":
                sv.scene.add_light_ambient(f"/lights/{k}", color=color, intensity=intensity)
            elif light["type"] == "point":
                sv.scene.add_light_point(f"/lights/{k}", color=color, intensity=intensity,
                                         position=tuple(float(x) for x in light["pos"]), cast_shadow=vis.shadow)
            else:  # a directional light shines from its position towards the origin
                d = np.asarray(light["dir"], dtype=np.float64)
                sv.scene.add_light_directional(f"/lights/{k}", color=color, intensity=intensity,
                                               position=tuple(-10.0 * d / np.linalg.norm(d)),
                                               cast_shadow=vis.shadow)

    def register_keybinds(self, *keybinds, overwrite: bool = False):
        """Genesis World's keybindings (genesis_core.vis.keybindings.Keybind): each one is a button in the
        viewer's panel, labelled with its name and key; a click runs its callback once. A name given again is
        refused unless overwrite=True (its button then runs the new callback)."""
        from ..vis.keybindings import Keybind

        binds = self.__dict__.setdefault("_keybinds", {})
        for kb in keybinds:
            if not isinstance(kb, Keybind):
                raise OptionError(f"register_keybinds: {kb!r} is not a gs.vis.keybindings.Keybind.")
            if kb.name in binds and not overwrite:
                raise OptionError(f"register_keybinds: a keybind named {kb.name!r} exists; pass overwrite=True.")
        for kb in keybinds:
            old = binds.get(kb.name)
            binds[kb.name] = [kb, old[1] if old else None]
            if old is None and self.server is not None:
                button = self.server.gui.add_button(f"{kb.name} [{kb.key}]")
                binds[kb.name][1] = button
                button.on_click(lambda _event, name=kb.name: binds[name][0].run())

    def follow_entity(self, entity, fixed_axis=(None, None, None), smoothing=None, fix_orientation=False):
        """Genesis World's: from the next step on, the camera follows `entity` (its base's position in the first
        environment shown, at that environment's place in the viewer). The camera goes to the entity's position
        plus ViewerOptions.camera_pos (an offset while following, as Genesis World reads it) and aims at the
        entity. fixed_axis: per axis, None (follow) or a number (the camera's coordinate held there). smoothing:
        None, or a number in (0, 1): a low-pass filter, each update keeping that fraction of the previous
        position and aim. fix_orientation: move the camera without turning it (no aim at the entity). It applies
        to every open page and to pages opened later; may be called before scene.build()."""
        axes = tuple(fixed_axis) if isinstance(fixed_axis, (list, tuple)) else None
        if axes is None or len(axes) != 3 or not all(
                a is None or (isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a))
                for a in axes):
            raise OptionError(f"follow_entity: fixed_axis={fixed_axis!r} must be 3 entries, each None (follow "
                              "that axis) or a finite number (the camera's coordinate held there).")
        if smoothing is not None and (isinstance(smoothing, bool) or not isinstance(smoothing, (int, float))
                                      or not 0 < smoothing < 1):
            raise OptionError(f"follow_entity: smoothing={smoothing!r} must be None or a number in (0, 1).")
        if not isinstance(fix_orientation, bool):
            raise OptionError(f"follow_entity: fix_orientation={fix_orientation!r} must be a bool.")
        if not callable(getattr(entity, "get_pos", None)):
            raise OptionError(f"follow_entity: {entity!r} has no position to follow (an entity with get_pos).")
        self._follow = (entity, axes, smoothing, fix_orientation)
        self._follow_pose = None  # (camera position, aim), once the first update placed them

    _follow = None
    _pending_camera = None

    def _follow_camera(self):
        """(camera position, aim or None) for the followed entity now (update's thread), or None."""
        entity, axes, smoothing, fix_orientation = self._follow
        pos = np.asarray(entity.get_pos().detach().cpu().numpy(), dtype=np.float64).reshape(-1, 3)
        env = int(self.shown[0]) if pos.shape[0] > 1 else 0
        target = pos[env] + self.offsets[env]
        cam = target + np.asarray(self.viewer_options.camera_pos, dtype=np.float64)
        if smoothing is not None and self._follow_pose is not None:
            cam = smoothing * self._follow_pose[0] + (1 - smoothing) * cam
            target = smoothing * self._follow_pose[1] + (1 - smoothing) * target
        for i, a in enumerate(axes):
            if a is not None:
                cam[i] = a
        self._follow_pose = (cam, target)
        return cam, (None if fix_orientation else target)

    def _place_camera(self, pose):
        """Move every page's camera (and the one later pages open with) to pose = (position, aim or None)."""
        cam, target = (tuple(float(x) for x in a) if a is not None else None for a in pose)
        sv = self.server
        sv.initial_camera.position = cam
        if target is not None:
            sv.initial_camera.look_at = target
        for client in sv.get_clients().values():
            client.camera.position = cam
            if target is not None:
                client.camera.look_at = target

    @property
    def keybinds(self) -> dict:
        """The registered keybinds by name."""
        return {name: kb for name, (kb, _) in self.__dict__.get("_keybinds", {}).items()}

    def stop(self):
        """Close the server; idempotent."""
        if self.server is not None:
            with self._cond:
                server, self.server = self.server, None
                self._cond.notify_all()
            _stop_server(server)

    def show_image(self, cam, image):
        """Show a GUI=True camera's RGB image (H, W, 3 uint8; a tensor or an array) in the panel, one per camera."""
        if self.server is None:
            return
        img = np.asarray(image.detach().cpu().numpy() if hasattr(image, "detach") else image, dtype=np.uint8)
        handle = self._images.get(cam.idx)
        if handle is None:
            self._images[cam.idx] = self.server.gui.add_image(img, label=f"camera {cam.idx}", format="png")
        else:
            handle.image = img

    def refresh(self):
        """Send the scene as it is now and restart the pacing clock (after a reset or a checkpoint load)."""
        if self.server is not None:
            self._wall0, self._t0 = time.perf_counter(), self.scene.t
            self.update(force=True)

    # -- content ---------------------------------------------------------------------------------------------------

    def _views(self) -> list[RenderView]:
        return solver_render_views(self.scene)

    def _add_scene(self):
        sv, vis, scene = self.server, self.vis_options, self.scene
        for vi, view in enumerate(self._views()):
            if view.geom_type is not None:
                kinds = view.geom_type.cpu().numpy()
                sizes = view.geom_size.cpu().numpy()
                hull = view.geom_hull.cpu().numpy() if view.geom_hull is not None else None
                planes = view.hull_planes.cpu().numpy() if view.hull_planes is not None else None
                ents = view.geom_entity.cpu().numpy()
                colors = view.geom_color.cpu().numpy() if view.geom_color is not None else None
                pos, wxyz = self._geom_poses(view)
                for g, kind in enumerate(kinds):
                    piece = None
                    if kind == GEOM_MESH and hull is not None and planes is not None and hull[g, 1] > 0:
                        piece = planes[hull[g, 0]:hull[g, 0] + hull[g, 1]]
                    mesh = primitive_mesh(int(kind), sizes[g], piece)
                    if mesh is None:
                        continue
                    color = colors[g] if colors is not None else entity_color(scene, int(ents[g]))
                    if kind == GEOM_PLANE:  # static and wider than the layout: drawn once, where the first env has it
                        sv.scene.add_mesh_simple(f"/solver{vi}/geom{g}", mesh[0], mesh[1], color=_rgb255(color),
                                                 wxyz=tuple(wxyz[0, g]), position=tuple(pos[0, g]), side="double",
                                                 flat_shading=True, receive_shadow=vis.shadow)
                        sv.scene.add_grid(f"/solver{vi}/grid{g}", width=2 * PLANE_HALF, height=2 * PLANE_HALF,
                                          cell_size=PLANE_CELL, plane="xy", wxyz=tuple(wxyz[0, g]),
                                          position=tuple(pos[0, g] + wxyz_to_normal(wxyz[0, g]) * 1e-3))
                        continue
                    h = sv.scene.add_batched_meshes_simple(
                        f"/solver{vi}/geom{g}", mesh[0], mesh[1], batched_wxyzs=wxyz[:, g],
                        batched_positions=pos[:, g], batched_colors=_rgb255(color), side="double",
                        flat_shading=kind in (GEOM_BOX, GEOM_MESH), cast_shadow=vis.shadow,
                        receive_shadow=vis.shadow)
                    self._nodes.append(("geom", h, vi, g))
            if view.particle_pos is not None:
                pts, cols, size = self._particles(view)
                h = sv.scene.add_point_cloud(f"/solver{vi}/particles", pts, cols, point_size=size,
                                             point_shape="circle", precision="float32")
                self._nodes.append(("particles", h, vi, None))
            if view.mesh_faces is not None:
                if view.mesh_verts.ndim == 2:
                    pos, wxyz = self._mesh_poses(view)
                for m, (verts, faces, color) in enumerate(self._meshes(vi, view)):
                    if verts.ndim == 2:  # a fixed shape, posed per environment: instanced
                        h = sv.scene.add_batched_meshes_simple(
                            f"/solver{vi}/mesh{m}", verts, faces, batched_wxyzs=wxyz[:, m],
                            batched_positions=pos[:, m], batched_colors=color, side="double",
                            cast_shadow=vis.shadow, receive_shadow=vis.shadow)
                        self._nodes.append(("mesh", h, vi, m))
                        continue
                    for k, e in enumerate(self.shown):  # a deforming surface: its vertices per environment
                        h = sv.scene.add_mesh_simple(f"/solver{vi}/surface{m}_{k}", verts[k], faces, color=color,
                                                     side="double", cast_shadow=vis.shadow,
                                                     receive_shadow=vis.shadow)
                        self._nodes.append(("surface", h, vi, (m, k)))
        for s in scene.active_solvers:
            if getattr(vis, f"visualize_{s.short_name}_boundary", False):
                lo, hi = s.options.lower_bound, s.options.upper_bound
                seg = np.concatenate([_box_edges(lo, hi) + self.offsets[e] for e in self.shown])
                sv.scene.add_line_segments(f"/boundary/{s.short_name}", seg.astype(np.float32),
                                           colors=(230, 230, 230), line_width=2.0)
        if vis.show_link_frame:
            pos, wxyz = self._link_poses()
            if len(pos):
                h = sv.scene.add_batched_axes("/link_frames", batched_wxyzs=wxyz, batched_positions=pos,
                                              axes_length=vis.link_frame_size,
                                              axes_radius=0.05 * vis.link_frame_size)
                self._nodes.append(("links", h, None, None))
        if vis.show_cameras:
            for cam in scene._cameras:
                for k, (p, q, fov, aspect) in enumerate(self._camera_poses(cam)):
                    h = sv.scene.add_camera_frustum(f"/cameras/{cam.idx}_{k}", fov=fov, aspect=aspect, scale=0.15,
                                                    wxyz=q, position=p, color=(240, 200, 60))
                    self._nodes.append(("camera", h, cam, k))

    def _geom_poses(self, view):
        pos = view.geom_pos.detach().cpu().numpy().astype(np.float64)[self.shown]
        pos = pos + self.offsets[self.shown][:, None, :]
        wxyz = view.geom_quat.detach().cpu().numpy().astype(np.float64)[self.shown]
        return pos, wxyz

    def _particles(self, view):
        pos = view.particle_pos.detach().cpu().numpy().astype(np.float64)
        n = pos.shape[-2]
        active = (np.ones((pos.shape[0], n), dtype=bool) if view.particle_active is None
                  else view.particle_active.detach().cpu().numpy().reshape(-1, n) != 0)
        radius = view.particle_radius.detach().cpu().numpy()
        drawn = radius > 0
        ents = view.particle_entity.detach().cpu().numpy()
        if not hasattr(self, "_particle_colors"):
            self._particle_colors = {}
        key = id(view.particle_entity), n
        palette = self._particle_colors.get(key)
        if palette is None:
            if view.particle_color is not None:
                palette = np.clip(view.particle_color.detach().cpu().numpy() * 255, 0, 255).astype(np.uint8)
            else:
                table = {e: _rgb255(entity_color(self.scene, int(e))) for e in np.unique(ents)}
                palette = np.asarray([table[e] for e in ents], dtype=np.uint8).reshape(n, 3)
            self._particle_colors[key] = palette
        pts, cols = [], []
        for k, e in enumerate(self.shown):
            keep = active[e] & drawn
            pts.append(pos[e][keep] + self.offsets[e])
            cols.append(palette[keep])
        pts = np.concatenate(pts).astype(np.float32) if pts else np.zeros((0, 3), np.float32)
        cols = np.concatenate(cols) if cols else np.zeros((0, 3), np.uint8)
        size = 2.0 * float(radius[drawn].mean()) * self.vis_options.particle_size_scale if drawn.any() else 0.01
        return pts, cols, size

    def _meshes(self, vi, view):
        """Each triangle mesh of view `vi` as (vertices, faces, colour): the vertices it uses, [V_m, 3] in its own
        frame for a fixed shape, [shown, V_m, 3] in the world (with the layout's offsets) for a deforming surface
        (a non-finite vertex, where the mesh is not drawn, at the origin); faces renumbered over them."""
        topology = self._topology.get(vi)
        if topology is None:  # a view's faces and colours do not change after build: read once
            faces_all = view.mesh_faces.detach().cpu().numpy().astype(np.int64)
            ents = view.mesh_entity.detach().cpu().numpy() if view.mesh_entity is not None else None
            colors = view.mesh_color.detach().cpu().numpy() if view.mesh_color is not None else None
            topology = []
            for m, (first, count) in enumerate(view.mesh_range.detach().cpu().numpy()):
                used, faces = np.unique(faces_all[first:first + count], return_inverse=True)
                color = colors[m] if colors is not None else entity_color(self.scene, -1 if ents is None
                                                                           else int(ents[m]))
                topology.append((used, faces.reshape(-1, 3).astype(np.int32), _rgb255(color)))
            self._topology[vi] = topology
        verts = view.mesh_verts.detach().cpu().numpy().astype(np.float64)
        if verts.ndim == 3:
            verts = verts[self.shown] + self.offsets[self.shown][:, None, :]
            verts = np.where(np.isfinite(verts), verts, 0.0)
        return [(verts[..., used, :].astype(np.float32), faces, color) for used, faces, color in topology]

    def _mesh_poses(self, view):
        """Fixed meshes' world poses for the shown environments, [shown, M, 3] and [shown, M, 4]."""
        if view.mesh_pos is None:  # the identity
            M = len(view.mesh_range)
            pos = np.zeros((len(self.shown), M, 3)) + self.offsets[self.shown][:, None, :]
            return pos, np.tile(np.array([1.0, 0.0, 0.0, 0.0]), (len(self.shown), M, 1))
        pos = view.mesh_pos.detach().cpu().numpy().astype(np.float64)[self.shown]
        pos = pos + self.offsets[self.shown][:, None, :]
        wxyz = view.mesh_quat.detach().cpu().numpy().astype(np.float64)[self.shown]
        bad = ~(np.isfinite(pos).all(-1) & np.isfinite(wxyz).all(-1))
        pos[bad], wxyz[bad] = 0.0, (1.0, 0.0, 0.0, 0.0)
        return pos, wxyz

    def _link_poses(self):
        pos, wxyz = [], []
        for ent in self.scene.entities:
            for link in getattr(ent, "links", []) or []:
                if not (hasattr(link, "get_pos") and hasattr(link, "get_quat")):
                    continue
                p = link.get_pos().detach().cpu().numpy().reshape(-1, 3).astype(np.float64)
                q = link.get_quat().detach().cpu().numpy().reshape(-1, 4).astype(np.float64)
                pos.append(p[self.shown] + self.offsets[self.shown])
                wxyz.append(q[self.shown])
        if not pos:
            return np.zeros((0, 3)), np.zeros((0, 4))
        return np.concatenate(pos), np.concatenate(wxyz)

    def _camera_poses(self, cam):
        from .camera import _frame

        pos, lookat, up = cam._poses()
        right, cam_up, back = (x.numpy() for x in _frame(pos, lookat, up, "viewer"))
        W, H = cam.res
        envs = [cam.env_idx] if cam.env_idx is not None else list(self.shown)
        out = []
        for e in envs:
            e = min(int(e), pos.shape[0] - 1)
            out.append((tuple(pos[e].numpy() + self.offsets[e]), tuple(_camera_wxyz(right[e], cam_up[e], back[e])),
                        math.radians(cam.fov), W / H))
        return out

    # -- updates ---------------------------------------------------------------------------------------------------

    def update(self, force: bool = False):
        """After a step: pace to realtime_factor, read the scene's poses and particles, and send them. Sends are
        at most refresh_rate a second: a state read sooner waits in `_pending` and the flusher thread sends it
        when its time comes (only the newest waits), so the browser always ends on the last step. Only this
        method, in the caller's thread, reads the scene; the flusher touches nothing but the viewer's nodes."""
        if self.server is None:
            return
        opts, scene = self.viewer_options, self.scene
        now = time.perf_counter()
        if opts.realtime_factor is not None and self._wall0 is not None:
            ahead = (scene.t - self._t0) * scene.dt / opts.realtime_factor - (now - self._wall0)
            if ahead > 0:
                time.sleep(min(ahead, 1.0))
                now = time.perf_counter()
        self._steps.append(now)
        if self._fps_text is not None and len(self._steps) > 1:
            self._steps = [t for t in self._steps if now - t <= 1.0] or [now]
            rate = (len(self._steps) - 1) / max(now - self._steps[0], 1e-9)
            self._fps_text.content = f"steps/s: {rate:.1f}"
        updates = self._read()
        camera = self._follow_camera() if self._follow is not None else None
        with self._cond:
            self._pending = updates
            if camera is not None:
                self._pending_camera = camera
            if force or now - self._last_push >= 1.0 / opts.refresh_rate:
                self._send_pending(now)
            elif self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, name="genesis-core-viewer", daemon=True)
                self._flusher.start()
            else:
                self._cond.notify()

    def _send_pending(self, now):
        """Apply the waiting updates to the viewer's nodes (the caller holds _cond)."""
        updates, self._pending = self._pending, None
        camera, self._pending_camera = self._pending_camera, None
        self._last_push = now
        if updates is None or self.server is None:
            return
        with self.server.atomic():
            for h, props in updates:
                for name, value in props.items():
                    setattr(h, name, value)
        if camera is not None:
            self._place_camera(camera)

    def _flush_loop(self):
        with self._cond:
            while self.server is not None:
                if self._pending is None:
                    self._cond.wait()
                    continue
                due = self._last_push + 1.0 / self.viewer_options.refresh_rate - time.perf_counter()
                if due > 0:
                    self._cond.wait(due)
                    continue
                self._send_pending(time.perf_counter())

    def _read(self) -> list:
        """What changed since build, as (node, {property: value}): poses, points, vertices. The views' small
        tensors are computed on one torch thread: beside Taichi's thread pool, torch's intra-op threads made a
        read of the panda at 64 environments 15 times slower (30 ms against 2 ms, measured on 2 cores)."""
        with torch_one_thread():
            return self._read_views()

    def _read_views(self) -> list:
        views = None
        out = []
        for kind, h, vi, item in self._nodes:
            if kind in ("geom", "particles", "surface", "mesh") and views is None:
                views, surfaces = self._views(), {}  # (per view: its surfaces' vertices, its meshes' poses)
            if kind == "geom":
                pos, wxyz = self._geom_poses(views[vi])
                out.append((h, {"batched_positions": pos[:, item], "batched_wxyzs": wxyz[:, item]}))
            elif kind == "particles":
                pts, cols, _ = self._particles(views[vi])
                out.append((h, {"points": pts, "colors": cols}))
            elif kind == "mesh":
                if ("mesh", vi) not in surfaces:
                    surfaces["mesh", vi] = self._mesh_poses(views[vi])
                pos, wxyz = surfaces["mesh", vi]
                out.append((h, {"batched_positions": pos[:, item], "batched_wxyzs": wxyz[:, item]}))
            elif kind == "surface":
                if vi not in surfaces:
                    surfaces[vi] = [v for v, _, _ in self._meshes(vi, views[vi])]
                m, k = item
                out.append((h, {"vertices": surfaces[vi][m][k]}))
            elif kind == "links":
                pos, wxyz = self._link_poses()
                out.append((h, {"batched_positions": pos, "batched_wxyzs": wxyz}))
            elif kind == "camera":
                p, q, _, _ = self._camera_poses(vi)[item]
                out.append((h, {"position": p, "wxyz": q}))
        return out


def _stop_server(server):
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            server.stop()
    except Exception as e:  # a server stopped already, or one that failed half-way: nothing more to close
        logger.debug("viewer: stopping the server: %s", e)


def wxyz_to_normal(q) -> np.ndarray:
    """The local +Z axis of the rotation q = (w, x, y, z), in world axes."""
    w, x, y, z = q
    return np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])


__all__ = ["Viewer", "convex_mesh", "env_offsets", "primitive_mesh"]
