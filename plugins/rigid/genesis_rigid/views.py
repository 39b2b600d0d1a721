"""What the rigid solver shows other parts of the engine: the collider view the couplings collide with
(genesis_core.coupler.ColliderView), the render view the cameras draw (genesis_core.render.RenderView), and the
links' motion (centres of mass and velocities)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import torch

import genesis_core as gs
from genesis_core.coupler import ColliderView
from genesis_core.launch import Launcher, torch_one_thread
from genesis_core.rotations import quat_to_mat
from genesis_core.utils.geom import quat_mul

from . import kernels_step
from .variants import FAR
from .layout import DF_N, DI_LINK, GF_SIZE, LI_DOF_END, LI_DOF_START, LI_PARENT
from .model import BOX, CAPSULE, CYLINDER, ELLIPSOID, HFIELD, MESH, SPHERE

# the outputs of kernels_step.collider_geometry, ColliderView's names
VIEW_OUTPUTS = ("geom_pos", "geom_quat", "body_com", "body_lin_vel", "body_ang_vel")
# the ColliderView geom code of each geom type (the cameras' primitives)
GEOM_OF_TYPE = {BOX: gs.coupler.GEOM_BOX, SPHERE: gs.coupler.GEOM_SPHERE, CAPSULE: gs.coupler.GEOM_CAPSULE,
                CYLINDER: gs.coupler.GEOM_CYLINDER, ELLIPSOID: gs.coupler.GEOM_ELLIPSOID}
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



def _inverse_inertia(inertia):
    """The inverse of a link's inertia for the effective mass a contact sees; a principal moment of zero (a link
    that cannot turn about that axis in the model, a point mass) gives zero there, not infinity."""
    w, v = np.linalg.eigh(np.asarray(inertia, dtype=np.float64).reshape(3, 3))
    inv = np.where(w > 1e-12 * max(float(w.max()), 1e-300), 1.0 / np.where(w > 0, w, 1.0), 0.0)
    return (v * inv) @ v.T


class Views:
    """RigidSolver's views (mixed into the solver)."""

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
            geom_f = self.compiled.arrays["geom_f"]
            body = [link if self.compiled.last_dof[link] >= 0 else -1 for link in self.compiled.geom_link]
            grad = self.sim_options.requires_grad

            def zeros(*shape):
                x = torch.zeros(shape, dtype=fl, device=dev)
                if grad:
                    x.requires_grad_(True)
                    x.grad = torch.zeros_like(x)
                return x

            # what a coupling needs for the effective mass at a contact, and the hulls of the mesh geoms
            links = self.compiled.links
            moving = [self.compiled.last_dof[l] >= 0 and links[l]["mass"] > 0 for l in range(len(links))]
            inv_mass = [1.0 / links[l]["mass"] if moving[l] else 0.0 for l in range(len(links))] or [0.0]
            inv_inertia = [_inverse_inertia(links[l]["inertia"]) if moving[l] else np.zeros((3, 3))
                           for l in range(len(links))] or [np.zeros((3, 3))]
            self._link_inv_inertia = torch.as_tensor(np.stack(inv_inertia), dtype=fl, device=dev)
            hull_rows, geom_hull = [], np.zeros((G, 2), dtype=np.int32)
            for g, gm in enumerate(self.compiled.geoms):
                hull = gm["desc"].hull() if gm["type"] == MESH else None
                if hull is not None:
                    geom_hull[g] = len(hull_rows), len(hull.face_normals)
                    hull_rows.extend([*n, d] for n, d in zip(hull.face_normals, hull.face_offsets))
                elif gm["type"] == HFIELD:  # its heights, one a row (genesis_core.coupler.ColliderView)
                    z = np.asarray(gm["desc"].heights, dtype=np.float64).ravel()
                    geom_hull[g] = len(hull_rows), len(z)
                    hull_rows.extend([h, 0.0, 0.0, 0.0] for h in z)
            self._view = ColliderView(
                body_inv_mass=torch.as_tensor(inv_mass, dtype=fl, device=dev),
                body_inv_inertia=torch.zeros((B, L, 3, 3), dtype=fl, device=dev),
                geom_hull=torch.as_tensor(geom_hull, device=dev),
                hull_planes=torch.as_tensor(np.asarray(hull_rows or [[0.0, 0.0, 1.0, 0.0]], dtype=np.float64),
                                            dtype=fl, device=dev).contiguous(),
                # (a kinematic entity's geoms and those of an entity with needs_coup=False: -1, no geometry,
                # couplings pass through them)
                geom_type=torch.as_tensor([-1 if gm.get("kinematic") or not gm.get("needs_coup", True) else t for gm, t in
                                           zip(self.compiled.geoms, self.compiled.geom_type)] or self.compiled.geom_type,
                                          dtype=torch.int32, device=dev),
                geom_size=torch.as_tensor(geom_f[:, GF_SIZE:GF_SIZE + 3], dtype=fl, device=dev).contiguous(),
                geom_friction=torch.as_tensor([gm["coup_friction"] for gm in self.compiled.geoms] or [0.0], dtype=fl,
                                              device=dev)[:G].contiguous(),
                geom_body=torch.as_tensor(body, dtype=torch.int32, device=dev),
                geom_pos=zeros(B, G, 3), geom_quat=zeros(B, G, 4), body_com=zeros(B, L, 3),
                body_lin_vel=zeros(B, L, 3), body_ang_vel=zeros(B, L, 3),
                body_impulse=zeros(B, L, 6) if grad and not self.n_links else st.at("links_ext_impulse", fn),
                body_quat=zeros(B, L, 4) if grad else None)
        v = self._view
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
        self._run(kernels_step.collider_geometry, {name: getattr(v, name) for name in VIEW_OUTPUTS}, fn=fn)
        if self._geom_active is not None:  # another variant's geoms: far from everything (genesis_rigid.variants)
            with torch.no_grad():
                v.geom_pos[torch.as_tensor(~self._geom_active, device=v.geom_pos.device)] = FAR
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
            pos[torch.as_tensor(np.stack([it[7] for it in items], 1), device=dev)] = FAR
            geom_pos = torch.cat([geom_pos, pos.to(geom_pos.dtype)], dim=1)
            geom_quat = torch.cat([geom_quat, quat.to(geom_quat.dtype)], dim=1)
        if rm.get("static") is None:
            # the fields that do not change, made once: the same tensors at every render, so that the renderer
            # sees they are unchanged without reading them (genesis_core.render.renderer.TraceScene)
            # (the model's types: a kinematic entity's geoms are drawn, though couplings see no geometry there)
            geom_type = torch.as_tensor(self.compiled.geom_type, dtype=v.geom_type.dtype, device=dev)[keep]
            geom_size, geom_hull = v.geom_size.detach()[keep], v.geom_hull[keep]
            colors, entity = list(rm["geom_colors"]), list(rm["geom_entity"])
            items = rm["prims"]
            if items:
                geom_type = torch.cat([geom_type, torch.as_tensor([it[3] for it in items], dtype=geom_type.dtype,
                                                                  device=dev)])
                geom_size = torch.cat([geom_size, torch.as_tensor(np.stack([it[4] for it in items]),
                                                                  dtype=geom_size.dtype, device=dev)])
                geom_hull = torch.cat([geom_hull, torch.zeros((len(items), 2), dtype=geom_hull.dtype, device=dev)])
                colors += [it[5] for it in items]
                entity += [it[6] for it in items]
            rm["static"] = dict(geom_type=geom_type, geom_size=geom_size, geom_hull=geom_hull,
                                geom_entity=torch.as_tensor(entity, dtype=torch.int32),
                                geom_color=torch.as_tensor(np.asarray(colors, dtype=np.float32).reshape(-1, 3)),
                                hull_planes=None if v.hull_planes is None else v.hull_planes.detach())
        view = RenderView(geom_pos=geom_pos, geom_quat=geom_quat, geom_link=rm["geom_link"], geom_id=rm["geom_id"],
                          **rm["static"])
        if rm["meshes"]:
            view.mesh_pos, view.mesh_quat = posed(rm["meshes"])
            view.mesh_pos[torch.as_tensor(np.stack([it[3] for it in rm["meshes"]], 1), device=dev)] = FAR
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

        def absent(e, g):  # [B] bool: the environments where g is another variant's (genesis_rigid.variants)
            which = getattr(e, "variant_of_env", None)
            return np.zeros(self.batch, dtype=bool) if which is None or g.variant < 0 else which != g.variant

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

            index = {id(gm["desc"]): g for g, gm in enumerate(self.compiled.geoms) if gm["entity"] == e.idx}
            use_visuals = (options.get("vis_mode", "visual") != "collision"
                           and any(body.visuals for body in e.robot.bodies))
            drawn, e_prims, e_meshes = [], [], []
            if use_visuals:
                try:
                    for bi, body in enumerate(e.robot.bodies):
                        for g in body.visuals:
                            if g.triangles is not None or (g.type == MESH and g.mesh_file is not None):
                                e_meshes.append(((e.link_start + bi, g.pos, g.quat, absent(e, g)),
                                                 g.triangles or _visual_mesh(g.mesh_file, g.mesh_scale), color_of(g)))
                            elif id(g) in index:  # a geom (an MJCF plane, ellipsoid, ...): its own arrays
                                drawn.append((index[id(g)], color_of(g)))
                            elif g.type in GEOM_OF_TYPE:
                                e_prims.append((e.link_start + bi, g.pos, g.quat, GEOM_OF_TYPE[g.type],
                                                np.asarray(g.size, dtype=np.float64), color_of(g), e.idx,
                                                absent(e, g)))
                except Exception as exc:  # an unreadable visual mesh: this entity is drawn by its collision geoms
                    warnings.warn(f"entity {e.idx} ({e.robot.name}): a visual mesh could not be read ({exc}); the "
                                  "cameras draw its collision geometry.", stacklevel=2)
                    use_visuals = False
            if not use_visuals:
                mine = sorted(index.values())
                colliding = [g for g in mine if self.compiled.geoms[g]["contype"] or self.compiled.geoms[g]["conaffinity"]]
                drawn = [(g, base) for g in (colliding or mine)]
                e_prims, e_meshes = [], []
                for g, _ in drawn:  # (a height field is drawn as its triangles)
                    gm = self.compiled.geoms[g]
                    if gm["desc"].triangles is not None:
                        e_meshes.append(((gm["link"], gm["pos"], gm["quat"], absent(e, gm["desc"])),
                                         gm["desc"].triangles, base))
                drawn = [(g, c) for g, c in drawn if self.compiled.geoms[g]["desc"].triangles is None]
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
        n_geoms = len(self.compiled.geoms)
        out["geom_link"] = torch.as_tensor([self.compiled.geoms[g]["link"] for g in geoms] + [it[0] for it in prims],
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

    def link_motion(self):
        """(centre of mass, its linear velocity, angular velocity), each [B, L, 3] world, of every link at the
        current frame (the collider view's kernel, into arrays of their own)."""
        self._sync_link_params()
        f, st = self.frame, self.state
        B, L, G, fl, dev = self.batch, max(self.n_links, 1), max(self.n_geoms, 1), self.float_dtype, self.device
        out = self.__dict__.get("_motion")
        if out is None:
            out = self._motion = tuple(torch.zeros(shape, dtype=fl, device=dev) for shape in
                                       ((B, G, 3), (B, G, 4), (B, L, 3), (B, L, 3), (B, L, 3)))
        if self.__dict__.get("_motion_launch") is None:  # (its own bound arguments: the outputs are not the view's)
            self._motion_launch = Launcher()
        with torch.no_grad():
            self._fk_key = None
            self._bind(kernels_step.collider_geometry, self._motion_launch, dict(zip(VIEW_OUTPUTS, out)))(
                fn=f, **{name: st.tensors[name].detach() for name in ("qpos", "dofs_vel", "links_pos", "links_quat")})
        n = self.n_links
        return out[2][:, :n].clone(), out[3][:, :n].clone(), out[4][:, :n].clone()

    def get_links_acc(self, links_idx=None, envs_idx=None):
        """Linear accelerations of the links' frame origins `([n_envs,] n, 3)`, world, m/s^2 (the solver's link
        indices, as Genesis World's solver): see `links_acceleration`."""
        return self._links_acc(links_idx, envs_idx)[0]

    def get_links_acc_ang(self, links_idx=None, envs_idx=None):
        """Angular accelerations of the links `([n_envs,] n, 3)`, world, rad/s^2: see `links_acceleration`."""
        return self._links_acc(links_idx, envs_idx)[1]

    def _links_acc(self, links_idx, envs_idx):
        self.scene._require_built("get_links_acc")
        envs = self.scene._sanitize_envs_idx(envs_idx)
        links, _ = self._solver_links(links_idx, None)
        lin, ang, _ = links_acceleration(self, envs)
        lin, ang = lin[:, links], ang[:, links]
        return (lin, ang) if self.scene.n_envs else (lin[0], ang[0])

    def links_inertial_motion(self, links_idx):
        """(angular velocity, linear acceleration of the frame origin, angular acceleration) of the solver's links
        `links_idx` (long tensor), each [B, n, 3] world, from one run of the kinematics kernel: what an IMU reads
        (see links_acceleration), for every environment."""
        lin, ang, omega = links_acceleration(self, None)
        return omega[:, links_idx], lin[:, links_idx], ang[:, links_idx]

    def probe_kinematics(self, qpos, envs, dofs_vel=None, joints=True) -> dict:
        """The solver's kinematics kernel (kernels_step.collider_geometry: forward kinematics and the dofs' motion
        axes, the code of a substep) on configurations that are not the state's, for inverse kinematics and the
        Jacobians: qpos [N, n_qs] (the solver's coordinates), envs [N] (long: the environment whose model
        parameters each row takes), dofs_vel [N, n_dofs] (None: at rest). Returns links_pos [N, L, 3], links_quat
        [N, L, 4], com [N, L, 3], cdof [N, D, 6] (each dof's motion axis about its link's origin: angular, then
        linear), cdof_dot [N, D, 6] (its time derivative at dofs_vel), cvel [N, L, 6] (each link's spatial velocity
        about its origin), ref [N, L, 3] (each link's origin, world: the reference point of these spatial
        vectors), janchor and jaxis [N, J, 3] (each joint's anchor and axis, world; not with joints=False), torch,
        the solver's float dtype. The state and the solver's scratch are not touched (the probe has arrays of its
        own, per N)."""
        self._sync_link_params()
        a = self._probe_arrays(qpos, envs, dofs_vel)
        self._fk_key = None
        self._bind(kernels_step.collider_geometry, self._probe_launch("kinematics"), a)(fn=0)

        def read(name):
            return torch.as_tensor(a[name].to_numpy(), dtype=self.float_dtype, device=self.device)

        ref = read("s_ref")
        out = dict(links_pos=a["links_pos"][0].clone(), links_quat=a["links_quat"][0].clone(),
                   com=a["body_com"].clone(), cdof=read("s_cdof"), cdof_dot=read("s_cdof_dot"), cvel=read("s_cvel"),
                   ref=ref)
        if joints:
            joint_link = torch.as_tensor([j["link"] for j in self.compiled.joints], dtype=torch.long,
                                         device=self.device)
            out["janchor"] = read("s_janchor")[:, :self.n_joints] + ref[:, joint_link]  # (kept link-relative)
            out["jaxis"] = read("s_jaxis")[:, :self.n_joints]
        return out

    def probe_mass_matrix(self, qpos, envs) -> torch.Tensor:
        """The joint-space mass matrix plus armature [N, D, D] (torch, the solver's float dtype) at qpos [N, n_qs],
        each row with the link and dof parameters of its environment envs [N], by a substep's own CRBA
        (kernels_step.mass_matrix). The state and the solver's scratch are not touched."""
        self._sync_link_params()
        self._sync_dof_params()
        a = self._probe_arrays(qpos, envs)
        N, D = qpos.shape[0], max(self.n_dofs, 1)
        if "s_mass" not in a:
            fl, dev, L = self.float_dtype, self.device, max(self.n_links, 1)

            def z(*shape, element=()):
                return self._taichi_array(shape, "f", element)

            zeros = torch.zeros((N, D), dtype=fl, device=dev)  # (no controls: at a step of 0 they add nothing)
            a.update(s_cacc=z(N, L, element=(6,)), s_cfrc=z(N, L, element=(6,)), s_crb_m=z(N, L),
                     s_crb_mc=z(N, L, element=(3,)), s_crb_io=z(N, L, element=(3, 3)), s_mass=z(N, D, D),
                     s_dof=z(N, D, self.scratch["s_dof"].shape[2]),
                     dof_f=torch.zeros((N, D, DF_N), dtype=fl, device=dev),
                     dofs_ctrl_mode=torch.zeros((N, D), dtype=torch.int32, device=dev), dofs_ctrl_force=zeros,
                     dofs_ctrl_pos=zeros, dofs_ctrl_vel=zeros, dofs_kp=zeros, dofs_kv=zeros)
        with torch.no_grad():
            a["dof_f"].copy_(self._model_rows("dof_f", self._dof_params_seen)[envs.to(self.device)])
        self._bind(kernels_step.mass_matrix, self._probe_launch("mass"), a)()
        mass = torch.as_tensor(a["s_mass"].to_numpy(), dtype=self.float_dtype, device=self.device)
        return mass[:, :self.n_dofs, :self.n_dofs]

    def _probe_launch(self, what):
        """The probes' own Launcher per kernel (their bound arguments are the probe arrays)."""
        launches = self.__dict__.setdefault("_probe_launches", {})
        if what not in launches:
            launches[what] = Launcher()
        return launches[what]

    def _probe_arrays(self, qpos, envs, dofs_vel=None) -> dict:
        """The probes' arrays for N = len(qpos) rows (made once per N), with qpos [N, n_qs], the velocities
        dofs_vel [N, n_dofs] (None: zero) and each row's link parameters (those of its environment envs [N]) copied
        in."""
        N, L, D = qpos.shape[0], max(self.n_links, 1), max(self.n_dofs, 1)
        probes = self.__dict__.setdefault("_probes", {})
        a = probes.get(N)
        if a is None:
            fl, dev, G, J = self.float_dtype, self.device, max(self.n_geoms, 1), max(self.n_joints, 1)

            def z(*shape, element=()):
                return self._taichi_array(shape, "f", element)

            a = probes[N] = dict(
                qpos=torch.zeros((1, N, max(self.n_qs, 1)), dtype=fl, device=dev),
                dofs_vel=torch.zeros((1, N, D), dtype=fl, device=dev),
                links_pos=torch.zeros((1, N, L, 3), dtype=fl, device=dev),
                links_quat=torch.zeros((1, N, L, 4), dtype=fl, device=dev),
                link_f=torch.zeros((N,) + tuple(self.model["link_f"].shape[1:]), dtype=fl, device=dev),
                s_R=z(N, L, element=(3, 3)), s_com=z(N, L, element=(3,)), s_janchor=z(N, J, element=(3,)),
                s_jaxis=z(N, J, element=(3,)), s_ref=z(N, L, element=(3,)), s_cdof=z(N, D, element=(6,)),
                s_cdof_dot=z(N, D, element=(6,)),
                s_cvel=z(N, L, element=(6,)), geom_pos=torch.zeros((N, G, 3), dtype=fl, device=dev),
                geom_quat=torch.zeros((N, G, 4), dtype=fl, device=dev),
                body_com=torch.zeros((N, L, 3), dtype=fl, device=dev),
                body_lin_vel=torch.zeros((N, L, 3), dtype=fl, device=dev),
                body_ang_vel=torch.zeros((N, L, 3), dtype=fl, device=dev))
        with torch.no_grad():
            a["qpos"][0, :, :self.n_qs].copy_(qpos)
            if dofs_vel is None:
                a["dofs_vel"].zero_()
            else:
                a["dofs_vel"][0, :, :self.n_dofs].copy_(dofs_vel)
            a["link_f"].copy_(self._model_rows("link_f", self._link_params_seen)[envs.to(self.device)])
        return a

    def _model_rows(self, name, key):
        """The model array `name` (link_f, dof_f: per environment, as the kernels read them) in torch, read from
        the device again only when `key` (its parameters' sync version) changed."""
        cached = self.__dict__.setdefault("_probe_model", {})
        if cached.get(name, (None,))[0] != key:
            cached[name] = (key, torch.as_tensor(self.model[name].to_numpy(), dtype=self.float_dtype,
                                                 device=self.device))
        return cached[name][1]


def _tree_tables(solver):
    """(chain [L, D]: 1 where dof d moves link l; root [L]: the base link of each link's tree; dof_link [D]: each
    dof's link), made once per compiled model."""
    cached = solver.__dict__.get("_acc_tables")
    if cached is None or cached[0] is not solver.compiled:
        link_i, dof_i = solver.compiled.arrays["link_i"], solver.compiled.arrays["dof_i"]
        L, D = solver.n_links, solver.n_dofs
        parent = [int(link_i[l, LI_PARENT]) for l in range(L)]
        root, chain = [], np.zeros((L, D))
        for l in range(L):  # parents come first
            root.append(l if parent[l] < 0 else root[parent[l]])
            if parent[l] >= 0:
                chain[l] = chain[parent[l]]
            chain[l, int(link_i[l, LI_DOF_START]):int(link_i[l, LI_DOF_END])] = 1.0
        cached = solver._acc_tables = (solver.compiled, torch.as_tensor(chain, dtype=solver.float_dtype,
                                                                          device=solver.device),
                                       torch.as_tensor(root, dtype=torch.long, device=solver.device),
                                       torch.as_tensor(dof_i[:D, DI_LINK].astype(np.int64), device=solver.device))
    return cached[1:]


def links_acceleration(solver, envs=None):
    """(linear, angular) accelerations of every link's frame origin [B, L, 3] each, world (m/s^2, rad/s^2), of the
    environments `envs` (None: all), as Genesis World's get_links_acc / get_links_acc_ang: the state's dof
    accelerations (those of the last substep, dofs_acc) at its configuration and velocities, gravity not included.

    A link's spatial acceleration is sum over the dofs d that move it of cdof_d qacc_d + cdof_dot_d qvel_d
    (Featherstone's a = S qdd + S' qd; MuJoCo's cacc without its gravity term), cdof and cdof_dot from the solver's
    kinematics kernel (RigidSolver.probe_kinematics). Each term is shifted from its dof's link origin to the base of
    the tree (a motion vector: v_B = v_A + w x (B - A)), summed, then shifted to the link's origin, so that only
    lengths within a tree enter. The classical linear acceleration of the origin adds w x v (its velocity). The
    third array returned is each link's angular velocity w [B, L, 3], world (rad/s)."""
    st, f = solver.state, solver.frame
    rows = torch.arange(solver.batch, device=solver.device) if envs is None else envs.to(solver.device)
    B, L = len(rows), solver.n_links
    fl = solver.float_dtype
    if not solver.n_dofs:
        zeros = torch.zeros((B, L, 3), dtype=fl, device=solver.device)
        return zeros, zeros.clone(), zeros.clone()
    with torch.no_grad():
        qpos = st.at("qpos", f).detach()[rows]
        vel = st.at("dofs_vel", f).detach()[rows]
        acc = st.at("dofs_acc", f).detach()[rows]
        k = solver.probe_kinematics(qpos, rows, dofs_vel=vel, joints=False)
        chain, root, dof_link = _tree_tables(solver)
        D = solver.n_dofs
        ref = k["ref"][:, :L]
        term = k["cdof"][:, :D] * acc[..., None] + k["cdof_dot"][:, :D] * vel[..., None]  # [B, D, 6]
        w = term[..., :3]
        v = term[..., 3:] + torch.cross(w, ref[:, root[dof_link]] - ref[:, dof_link], dim=-1)
        # summed per link over the dofs of its chain, about the base of its tree
        ang = torch.einsum("ld,bdk->blk", chain, w)
        lin = torch.einsum("ld,bdk->blk", chain, v) + torch.cross(ang, ref - ref[:, root], dim=-1)
        cvel = k["cvel"][:, :L]
        omega, v_origin = cvel[..., :3], cvel[..., 3:]
        return lin + torch.cross(omega, v_origin, dim=-1), ang, omega
