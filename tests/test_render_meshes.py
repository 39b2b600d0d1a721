"""Triangle meshes in the cameras' ray caster: rigid visual meshes, FEM boundaries and PBD cloths, checked against
analytic geometry computed here in float64 NumPy, against the same shape drawn as a primitive, and batched against
one-environment renders. Small images (at most 64 x 48) and no more than a few steps."""

import numpy as np
import pytest
import torch
import trimesh

import genesis_core as gs
from genesis_core.render import RenderView

from .test_render import entity_ids, pixel_rays  # (the look-at frame written independently of the engine's)

W, H = 64, 48
DEPTH_TOL = 1e-4  # m


def box_depth(pos, rays, fwd, lo, hi):
    """Analytic depth of an axis-aligned box [lo, hi] per pixel (inf: missed) and how far inside the entry face the
    ray enters it (m; small: it grazes an edge)."""
    o = np.asarray(pos, dtype=np.float64)
    with np.errstate(divide="ignore"):
        ta, tb = (np.asarray(lo) - o) / rays, (np.asarray(hi) - o) / rays
    t_in, t_out = np.minimum(ta, tb).max(-1), np.maximum(ta, tb).min(-1)
    hit = (t_in <= t_out) & (t_out > 0)
    p = o + t_in[..., None] * rays
    slack = np.minimum(p - np.asarray(lo), np.asarray(hi) - p)
    slack = np.sort(slack, axis=-1)[..., 1]  # the entry face's coordinate is ~0; the next nearest is the margin
    return np.where(hit, t_in * (rays @ fwd), np.inf), np.where(hit, slack, np.inf)


def test_a_box_given_as_a_mesh_has_the_analytic_depth_and_its_entity_id(tmp_path):
    """A Mesh morph (a box's 12 triangles in an OBJ file) is drawn from its triangles: depth per pixel as the box's
    analytic depth, its entity id in the segmentation, the face normals."""
    size, centre = np.array([0.4, 0.6, 0.8]), np.array([0.1, -0.05, 0.5])
    path = str(tmp_path / "box.obj")
    trimesh.creation.box(extents=size).export(path)
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0.0, 1.5, 0.3), radius=0.2, fixed=True))
    box = scene.add_entity(gs.morphs.Mesh(file=path, pos=tuple(centre), fixed=True))
    pose = dict(pos=(2.0, 1.4, 1.6), lookat=(0.0, 0.0, 0.5), up=(0, 0, 1), fov=40)
    cam = scene.add_camera(res=(W, H), **pose)
    scene.build()
    _, depth, seg, normal = cam.render(rgb=False, depth=True, segmentation=True, normal=True)
    seg = entity_ids(scene, seg)
    rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
    ref, slack = box_depth(pose["pos"], rays, fwd, centre - size / 2, centre + size / 2)
    clear = slack > 2e-3
    hit = np.isfinite(ref)
    s, d = seg.numpy(), depth.numpy().astype(np.float64)
    assert hit.sum() > 300
    assert (s[hit & clear] == box.idx).all()
    np.testing.assert_allclose(d[hit & clear], ref[hit & clear], atol=DEPTH_TOL, rtol=0)
    assert not (s[~hit] == box.idx).any() or (s[~hit] == box.idx).sum() <= 3
    # the normals are the box's face normals: each pixel's (n + 1) / 2 has one component off 0.5
    n = normal.numpy()[hit & clear] * 2 - 1
    assert np.allclose(np.sort(np.abs(n), axis=-1), [0, 0, 1], atol=1e-5)


def test_a_flat_cloth_lies_at_its_height_and_shows_from_below(tmp_path):
    """A PBD cloth (two-sided triangles) lying flat at z = 0.4: the depth of every pixel inside its square is the
    plane's, seen from above and from below."""
    h, half, n = 0.4, 0.25, 6
    xs = np.linspace(-half, half, n)
    X, Y = np.meshgrid(xs, xs)
    faces = [(j * n + i, j * n + i + 1, (j + 1) * n + i) for j in range(n - 1) for i in range(n - 1)]
    faces += [(j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i) for j in range(n - 1) for i in range(n - 1)]
    path = str(tmp_path / "cloth.obj")
    trimesh.Trimesh(np.stack([X, Y, 0 * X], -1).reshape(-1, 3), faces, process=False).export(path)
    scene = gs.Scene(pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1)))
    cloth = scene.add_entity(gs.morphs.Mesh(file=path, pos=(0, 0, h)), material=gs.materials.PBD.Cloth())
    above = dict(pos=(0.6, 0.3, 1.2), lookat=(0.0, 0.0, h), up=(0, 0, 1), fov=50)
    below = dict(pos=(0.5, -0.2, 0.05), lookat=(0.0, 0.0, h), up=(0, 0, 1), fov=70)
    cams = [scene.add_camera(res=(W, H), **p) for p in (above, below)]
    scene.build()
    for cam, pose in zip(cams, (above, below)):
        _, depth, seg, _ = cam.render(rgb=False, depth=True, segmentation=True)
        seg = entity_ids(scene, seg)
        rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
        o = np.asarray(pose["pos"])
        t = (h - o[2]) / rays[..., 2]
        p = o + t[..., None] * rays
        inside = (t > 0) & (np.abs(p[..., :2]).max(-1) < half - 2e-3)
        outside = (t <= 0) | (np.abs(p[..., :2]).max(-1) > half + 2e-3)
        ref = t * (rays @ fwd)
        d, s = depth.numpy().astype(np.float64), seg.numpy()
        assert inside.sum() > 200 and outside.sum() > 100
        assert (s[inside] == cloth.idx).all() and (s[outside] == -1).all()
        np.testing.assert_allclose(d[inside], ref[inside], atol=DEPTH_TOL, rtol=0)


def _fem_or_rigid_box(fem: bool):
    scene = gs.Scene(fem_options=gs.options.FEMOptions(floor_height=-10.0))
    plane = scene.add_entity(gs.morphs.Plane())
    morph = gs.morphs.Box(pos=(0.0, 0.0, 0.3), size=(0.4, 0.3, 0.5), fixed=not fem,
                          **({"maxvolume": 0.1 ** 3 / 3} if fem else {}))
    kw = dict(material=gs.materials.FEM.Elastic()) if fem else {}
    box = scene.add_entity(morph, surface=gs.surfaces.Default(color=(0.2, 0.5, 0.9)), **kw)
    cam = scene.add_camera(res=(W, H), pos=(1.4, 0.9, 1.0), lookat=(0, 0, 0.3), up=(0, 0, 1), fov=40)
    scene.build()
    return cam, plane, box


def test_an_fem_cube_looks_like_the_same_rigid_box():
    """An FEM box (its tetrahedral mesh's boundary triangles, built and not stepped) and a rigid Box of the same
    size and colour give the same image but for a small share of pixels along the edges; same segmentation ids."""
    cam_fem, plane, box_fem = _fem_or_rigid_box(True)
    cam_rigid, _, box_rigid = _fem_or_rigid_box(False)
    assert box_fem.idx == box_rigid.idx
    a = list(cam_fem.render(depth=True, segmentation=True))
    b = list(cam_rigid.render(depth=True, segmentation=True))
    a[2], b[2] = entity_ids(cam_fem.scene, a[2]), entity_ids(cam_rigid.scene, b[2])
    rgb_off = (np.abs(a[0].numpy().astype(int) - b[0].numpy().astype(int)) > 16).any(-1)
    assert rgb_off.mean() < 0.02, rgb_off.mean()
    assert (a[2] != b[2]).float().mean() < 0.02
    assert (a[2] == box_fem.idx).sum() > 200 and (a[2] == plane.idx).sum() > 200
    both = torch.isfinite(a[1]) & torch.isfinite(b[1]) & (a[2] == b[2])
    assert (a[1][both] - b[1][both]).abs().max() < 1e-4


def test_a_deforming_mesh_renders_batched_as_in_one_environment_scenes():
    """Two environments whose FEM boxes are deformed differently (particles moved): the batched render equals,
    bitwise, a one-environment scene given each environment's positions; the deformation shows."""
    def build(n_envs):
        scene = gs.Scene(fem_options=gs.options.FEMOptions(floor_height=-10.0))
        ent = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.3), size=(0.3, 0.3, 0.3), maxvolume=0.1 ** 3 / 3),
                               material=gs.materials.FEM.Elastic())
        cam = scene.add_camera(res=(W, H), pos=(1.0, 0.7, 0.8), lookat=(0, 0, 0.3), up=(0, 0, 1), fov=40)
        scene.build(n_envs=n_envs)
        return scene, ent, cam

    scene, ent, cam = build(2)
    rest = ent.get_particles_pos().detach().clone()  # [2, N, 3]
    rng = np.random.default_rng(3)
    moved = rest + torch.as_tensor(rng.normal(0.0, 0.01, rest.shape), dtype=rest.dtype)
    moved[1, :, 2] += 0.1 * (moved[1, :, 0] - moved[1, :, 0].min())  # a shear in the second environment
    ent.set_particles_pos(moved)
    batched = cam.render(depth=True, segmentation=True, normal=True)
    assert not torch.equal(batched[1][0], batched[1][1])
    for b in range(2):
        one_scene, one_ent, one_cam = build(0)
        one_ent.set_particles_pos(moved[b])
        single = one_cam.render(depth=True, segmentation=True, normal=True)
        for x, y in zip(batched, single):
            assert torch.equal(x[b], y)


def test_a_solver_view_mesh_with_a_bad_index_or_shape_is_refused():
    """A render view's triangle part is checked before the kernel: a face naming a vertex that does not exist, a
    range past the faces, a pose given with per-environment vertices."""
    scene = gs.Scene()
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.3, fixed=True))
    cam = scene.add_camera(res=(16, 12), pos=(3, 0, 0.5), lookat=(0, 0, 0.5), fov=30)
    scene.build()
    verts = torch.tensor([[0.0, -0.5, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 1.0]])
    good = dict(mesh_verts=verts, mesh_faces=torch.tensor([[0, 1, 2]], dtype=torch.int32),
                mesh_range=torch.tensor([[0, 1]], dtype=torch.int32),
                mesh_entity=torch.tensor([ball.idx], dtype=torch.int32))
    solver = scene.rigid_solver
    solver.render_view = lambda f: RenderView(**good)
    _, depth, seg, _ = cam.render(depth=True, segmentation=True)
    seg = entity_ids(scene, seg)
    assert seg[6, 8] == ball.idx and abs(float(depth[6, 8]) - 3.0) < DEPTH_TOL  # the triangle in x = 0
    for bad, match in ((dict(mesh_faces=torch.tensor([[0, 1, 3]], dtype=torch.int32)), "vertex indices"),
                       (dict(mesh_range=torch.tensor([[0, 2]], dtype=torch.int32)), "mesh_range"),
                       (dict(mesh_verts=verts[None], mesh_pos=torch.zeros(1, 1, 3)), "mesh_pos")):
        solver.render_view = lambda f, bad=bad: RenderView(**{**good, **bad})
        with pytest.raises(gs.errors.SceneError, match=match):
            cam.render()
    del solver.render_view


@pytest.fixture
def panda_xml(shared_assets):
    return f"{shared_assets}/mjcf/franka_emika_panda/panda.xml"


def test_the_panda_is_drawn_with_its_visual_meshes_unless_vis_mode_is_collision(panda_xml):
    """The panda MJCF's visual meshes (group 2, contype = conaffinity = 0, with their materials' colours) are what
    the camera draws by default; vis_mode="collision" draws the collision geoms instead (in the entity's colour).
    The segmentation names the robot in both."""
    images = {}
    for mode in ("visual", "collision"):
        scene = gs.Scene()
        panda = scene.add_entity(gs.morphs.MJCF(file=panda_xml), surface=gs.surfaces.Default(vis_mode=mode))
        cam = scene.add_camera(res=(W, H), pos=(1.4, 1.0, 0.9), lookat=(0.0, 0.0, 0.45), up=(0, 0, 1), fov=45)
        scene.build()
        images[mode] = list(cam.render(segmentation=True))
        seg = images[mode][2] = entity_ids(scene, images[mode][2])
        assert (seg == panda.idx).sum() > 100 and set(torch.unique(seg).tolist()) <= {-1, panda.idx}
    vis, col = images["visual"], images["collision"]
    assert (vis[2] != col[2]).sum() > 5  # other silhouettes
    robot = (vis[2] == panda.idx) & (col[2] == panda.idx)
    differs = (np.abs(vis[0].numpy().astype(int) - col[0].numpy().astype(int)) > 16).any(-1)
    assert differs[robot.numpy()].mean() > 0.5  # the materials' white and black, not the entity's palette colour
    # the visual meshes' colours: the links are mostly white (lit or in shade: equal channels)
    px = vis[0].numpy()[vis[2].numpy() == panda.idx].astype(int)
    assert (np.ptp(px, axis=-1) <= 2).mean() > 0.8


URDF = """<robot name="marker">
  <material name="red"><color rgba="1 0 0 1"/></material>
  <link name="base">
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><geometry><sphere radius="0.2"/></geometry></collision>
    <visual><origin xyz="0 0 0.05"/><geometry><box size="0.3 0.3 0.3"/></geometry><material name="red"/></visual>
  </link>
</robot>
"""


@pytest.mark.parametrize("mode", ["visual", "collision"])
def test_a_urdf_visual_element_is_drawn_unless_vis_mode_is_collision(tmp_path, mode):
    """A URDF link whose <visual> (a red box, raised 5 cm) differs from its <collision> (a sphere): the camera
    draws the box in its material's colour by default, the sphere in the entity's colour with
    vis_mode="collision"; the physics is the same in both (the collision sphere)."""
    path = tmp_path / "marker.urdf"
    path.write_text(URDF)
    scene = gs.Scene()
    robot = scene.add_entity(gs.morphs.URDF(file=str(path), fixed=True, pos=(0.0, 0.0, 0.5)),
                             surface=gs.surfaces.Default(vis_mode=mode))
    cam = scene.add_camera(res=(W, H), pos=(3.0, 0.0, 0.55), lookat=(0.0, 0.0, 0.55), up=(0, 0, 1), fov=20)
    scene.build()
    rgb, depth, seg, _ = cam.render(depth=True, segmentation=True)
    seg = entity_ids(scene, seg)
    centre = (H // 2, W // 2)
    assert seg[centre] == robot.idx
    if mode == "visual":
        assert abs(float(depth[centre]) - 2.85) < DEPTH_TOL  # the box's face at x = 0.15
        assert rgb[centre][0] > 0 and rgb[centre][1] == 0 and rgb[centre][2] == 0
    else:
        # the sphere (radius 0.2 about (0, 0, 0.5)) along the centre pixel's ray
        rays, fwd = pixel_rays((3.0, 0.0, 0.55), (0.0, 0.0, 0.55), (0, 0, 1), 20)
        d = rays[centre]
        oc = np.array([3.0, 0.0, 0.05])
        b = d @ oc
        t = -b - np.sqrt(b * b - (oc @ oc - 0.2 ** 2))
        assert abs(float(depth[centre]) - t * (d @ fwd)) < DEPTH_TOL
        assert rgb[centre][1] > 0  # the palette's colour, not the material's red


def test_a_drone_with_several_visual_meshes_beside_a_plane_is_drawn():
    """The shipped cf2x (its body and four propellers drawn as five OBJ meshes, its collision a cylinder) above a
    plane: the model packs the meshes beside the plane's few hull rows (a mesh primitive's index is no hull row),
    and the drone, seen from above, covers the image's centre, nearer than the floor."""
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane())
    drone = scene.add_entity(gs.morphs.Drone(file="urdf/drones/cf2x.urdf", pos=(0.0, 0.0, 0.5)))
    cam = scene.add_camera(res=(W, H), pos=(0.0, 0.0, 1.0), lookat=(0.0, 0.0, 0.0), up=(0, 1, 0), fov=10)
    scene.build()
    rgb, depth, seg, _ = cam.render(depth=True, segmentation=True)
    seg = entity_ids(scene, seg)
    centre = (H // 2, W // 2)
    assert seg[centre] == drone.idx and 0.45 < float(depth[centre]) < 0.5
    assert float(depth[0, 0]) > 0.99  # the floor at the corner
