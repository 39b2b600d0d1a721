"""MJCF ellipsoids as analytic geoms (genesis_core.geoms.ELLIPSOID): rest heights on a plane against the analytic
height and against MuJoCo, the exact world AABB, ray casts on the exact surface, contacts with spheres, boxes,
capsules and ellipsoids through the convex narrowphase, the plane contact's frame against central differences, and
the particle kit's distance to an ellipsoid.

An ellipsoid of semi-axes r and world rotation R touches a plane of normal n at its support point
-R diag(r^2) R^T n / |diag(r) R^T n|, so its centre rests sqrt(n^T R diag(r^2) R^T n) above it. Before ellipsoids
were analytic, an ellipsoid was a 64-vertex polyhedron whose vertices and faces straddle the surface by about 3%
of the semi-axis: every height below then missed by 1e-3 m or more, where the tolerances are 1e-4 m and less.
"""

import numpy as np
import pytest
import taichi as ti
import torch

import genesis_core as gs
from genesis_core.geoms import ELLIPSOID
from genesis_core.particles.collider import signed_distance
from genesis_core.rotations import quat_to_mat
from genesis_core.ti_math import quat_to_mat as quat_to_mat_ti
from genesis_rigid.kernels_collision import CF_DEPTH, CF_POS, CI_KEY, CI_META
from genesis_rigid.kernels_math import V3
from genesis_rigid.layout import GC_N

from test_rigid_contact_frames import frames_reverse  # (kinematics, contact frames' reverse, its reverse)

nd = ti.types.ndarray

SEMI = np.array([0.1, 0.05, 0.03])
SLOP = 1e-6  # m: the contact slop the scenes below are held at (the default, 1e-4, is a resting penetration)
# (name, euler of the geom in degrees): bodies on a vertical slide joint hold their tilt; the last is free
PLANE_POSES = [("flat", "0 0 0"), ("on_x", "0 90 0"), ("on_y", "90 0 0"), ("tilted", "30 40 50"),
               ("tilted_2", "-20 65 10")]
PLANE_XML = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
{bodies}
  <body name="free" pos="{x_free} 0 0.15"><freejoint/><geom type="ellipsoid" size="{semi}" euler="0 0 37"/></body>
</worldbody></mujoco>"""


def plane_xml():
    semi = " ".join(f"{s:g}" for s in SEMI)
    bodies = "\n".join(f'  <body name="{name}" pos="{k} 0 0.15"><joint type="slide" axis="0 0 1"/>'
                       f'<geom type="ellipsoid" size="{semi}" euler="{euler}"/></body>'
                       for k, (name, euler) in enumerate(PLANE_POSES))
    return PLANE_XML.format(bodies=bodies, semi=semi, x_free=len(PLANE_POSES))


def rest_height(quat, semi=SEMI, n=(0.0, 0.0, 1.0)):
    """The height above a plane of normal n of the centre of an ellipsoid (world rotation quat) touching it."""
    a = quat_to_mat(np.asarray(quat, dtype=np.float64)).T @ np.asarray(n, dtype=np.float64)
    return float(np.sqrt(np.sum((np.asarray(semi) * a) ** 2)))


def build(tmp_path, xml, name="model.xml", n_envs=0, **sim):
    path = tmp_path / name
    path.write_text(xml)
    scene = gs.Scene(sim_options=gs.options.SimOptions(**{"dt": 2e-3, **sim}),
                     rigid_options=gs.options.RigidOptions(contact_slop=SLOP))
    entity = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build(n_envs=n_envs)
    return scene, entity


def test_an_ellipsoid_rests_on_the_plane_at_its_analytic_height(tmp_path):
    """Ellipsoids of semi-axes (0.1, 0.05, 0.03) dropped on the plane: each axis vertical in turn, and two tilts
    held by a vertical slide joint, rest with their centre at sqrt(n^T R diag(r^2) R^T n) to 1e-5 m (measured
    1.0e-6 to 1.1e-6 below it: the contact slop, 1e-6 m, is the resting penetration); a free one lying flat rests
    at 0.03 m without turning. MuJoCo, loading the same file (its contacts stiffened to solref 0.004 at a 1 ms
    step, so that its own resting penetration is a few 1e-5 m), settles each body at the same height within 1e-4 m
    (measured 4.8e-6 to 1.6e-5) and the free one's orientation within 1e-6 (measured 0). The polyhedron rested
    4e-4 m high lying flat."""
    mujoco = pytest.importorskip("mujoco")
    xml = plane_xml()
    scene, e = build(tmp_path, xml)
    for _ in range(300):
        scene.step()
    names = [name for name, _ in PLANE_POSES] + ["free"]
    ours = {n: e.get_link(n).get_pos().numpy() for n in names}
    for name in names:
        expected = rest_height(e.get_link(name).geoms[0].get_quat().numpy())
        assert abs(ours[name][2] - expected) < 1e-5, (name, ours[name][2], expected)
    assert abs(ours["flat"][2] - SEMI[2]) < 1e-5 and abs(ours["on_x"][2] - SEMI[0]) < 1e-5
    assert abs(ours["on_y"][2] - SEMI[1]) < 1e-5
    free_quat = e.get_link("free").get_quat().numpy()
    assert np.abs(free_quat - [1.0, 0.0, 0.0, 0.0]).max() < 1e-6
    assert np.abs(e.get_dofs_velocity().numpy()).max() < 1e-3

    model = mujoco.MjModel.from_xml_string(xml)
    model.opt.timestep = 1e-3
    model.geom_solref[:] = (0.004, 1.0)
    data = mujoco.MjData(model)
    for _ in range(600):
        mujoco.mj_step(model, data)
    for name in names:
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        assert np.abs(data.xpos[body] - ours[name]).max() < 1e-4, (name, data.xpos[body], ours[name])
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "free")
    assert np.abs(data.xquat[body] - free_quat).max() < 1e-6


def test_an_ellipsoid_on_the_plane_keeps_its_margin(tmp_path):
    """An ellipsoid on the plane meets it as the primitives do (its support point), so its margin is modelled (a
    pair through the convex narrowphase refuses one): with margin 0.01 it rests 0.01 m higher than without, as in
    MuJoCo (within 1e-4 m)."""
    mujoco = pytest.importorskip("mujoco")
    semi = " ".join(f"{s:g}" for s in SEMI)
    xml = """<mujoco><worldbody><geom type="plane" size="5 5 0.1"/>
      <body name="e" pos="0 0 0.1"><joint type="slide" axis="0 0 1"/>
        <geom type="ellipsoid" size="{semi}" euler="30 40 50" margin="{m}"/></body></worldbody></mujoco>"""
    heights = []
    for m in (0.0, 0.01):
        text = xml.format(semi=semi, m=m)
        scene, e = build(tmp_path, text, name=f"margin{m}.xml")
        for _ in range(300):
            scene.step()
        model = mujoco.MjModel.from_xml_string(text)
        model.opt.timestep = 1e-3
        model.geom_solref[:] = (0.004, 1.0)
        data = mujoco.MjData(model)
        for _ in range(600):
            mujoco.mj_step(model, data)
        heights.append((float(e.get_link("e").get_pos()[2]), float(data.qpos[0]) + 0.1))
    (ours0, ref0), (ours1, ref1) = heights
    assert abs((ours1 - ours0) - 0.01) < 1e-5
    assert abs((ours1 - ours0) - (ref1 - ref0)) < 1e-4


def test_the_world_aabb_of_a_rotated_ellipsoid_is_exact(tmp_path):
    """get_AABB of an ellipsoid turned by (30, 40, 50) degrees on a body turned again, after a few steps of
    tumbling: along world axis i it reaches sqrt(sum_j (R_ij r_j)^2) from its centre, exactly (1e-9 m; the
    polyhedron's box was up to 2.6e-3 m off)."""
    xml = f"""<mujoco><worldbody><body name="b" pos="0.3 -0.2 0.5" euler="10 -20 15"><freejoint/>
      <geom type="ellipsoid" size="{' '.join(f'{s:g}' for s in SEMI)}" pos="0.02 0.01 -0.03" euler="30 40 50"/>
    </body></worldbody></mujoco>"""
    scene, e = build(tmp_path, xml, gravity=(0.0, 0.0, 0.0))
    e.set_dofs_velocity(torch.tensor([0.1, -0.2, 0.3, 1.0, -2.0, 0.5], dtype=torch.float64))
    for _ in range(3):  # (anywhere, not only where the file places it)
        scene.step()
    geom = e.get_link("b").geoms[0]
    centre = geom.get_pos().numpy()
    half = np.sqrt(((quat_to_mat(geom.get_quat().numpy()) * SEMI) ** 2).sum(axis=1))
    aabb = e.get_AABB().numpy()
    assert np.abs(aabb[0] - (centre - half)).max() < 1e-9
    assert np.abs(aabb[1] - (centre + half)).max() < 1e-9


def pixel_rays(pos, lookat, up, fov, w, h):
    """Unit ray directions [H, W, 3] through the pixel centres of a pinhole camera (row 0 at the top), and its
    forward axis."""
    pos, lookat, up = (np.asarray(x, dtype=np.float64) for x in (pos, lookat, up))
    fwd = (lookat - pos) / np.linalg.norm(lookat - pos)
    right = np.cross(fwd, up)
    right /= np.linalg.norm(right)
    cam_up = np.cross(right, fwd)
    tan_y = np.tan(np.radians(fov) / 2)
    x = (2 * (np.arange(w) + 0.5) / w - 1) * tan_y * w / h
    y = (1 - 2 * (np.arange(h) + 0.5) / h) * tan_y
    d = x[None, :, None] * right + y[:, None, None] * cam_up + fwd
    return d / np.linalg.norm(d, axis=-1, keepdims=True), fwd


def test_the_cameras_ray_cast_the_exact_ellipsoid(tmp_path):
    """A depth and normal image of a turned ellipsoid (64 x 48 pixels) against the rays' analytic intersections
    with it, in float64 NumPy: every pixel whose ray passes more than 1e-3 of the scaled radius from the silhouette
    is hit or missed as the ellipsoid is (the polyhedron's silhouette was not), hit pixels' depths agree to 5e-6 m
    at about 0.45 m (measured 3.6e-7: the caster works in float32) and their normals, the gradient of |x / r|^2,
    to 1e-4 (measured 1.3e-5)."""
    centre, euler = np.array([0.05, -0.02, 0.4]), "30 40 50"
    xml = f"""<mujoco><worldbody><body name="b" pos="{' '.join(map(str, centre))}">
      <geom type="ellipsoid" size="{' '.join(f'{s:g}' for s in SEMI)}" euler="{euler}"/>
    </body></worldbody></mujoco>"""
    path = tmp_path / "look.xml"
    path.write_text(xml)
    scene = gs.Scene(show_viewer=False)
    e = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    W, H, pose = 64, 48, dict(pos=(0.35, -0.3, 0.6), lookat=(0.05, -0.02, 0.4), up=(0.0, 0.0, 1.0), fov=30)
    cam = scene.add_camera(res=(W, H), **pose)
    scene.build()
    _, depth, _, normal = cam.render(rgb=False, depth=True, normal=True)
    depth, normal = depth.numpy().astype(np.float64), normal.numpy().astype(np.float64) * 2 - 1

    geom = e.get_link("b").geoms[0]
    R = quat_to_mat(geom.get_quat().numpy())
    d, fwd = pixel_rays(**pose, w=W, h=H)
    o = (np.asarray(pose["pos"]) - geom.get_pos().numpy()) @ R / SEMI  # the unit sphere's frame
    ds = d @ R / SEMI
    a, b, c = (ds * ds).sum(-1), (ds * o).sum(-1), o @ o - 1
    disc = b * b - a * c
    hit = disc > 0
    t = (-b - np.sqrt(np.maximum(disc, 0))) / a
    grazing = np.abs(disc) / a < 1e-3 * 2 * np.abs(b) / a  # within ~1e-3 of the scaled radius of the silhouette
    assert hit.sum() > 200 and (~hit).sum() > 200
    keep = ~grazing
    assert np.array_equal(np.isfinite(depth)[keep], hit[keep])
    both = hit & np.isfinite(depth) & keep
    expected = t * (d @ fwd)
    assert np.abs(depth[both] - expected[both]).max() < 5e-6
    x = (np.asarray(pose["pos"]) + t[..., None] * d - geom.get_pos().numpy()) @ R / SEMI ** 2
    n = x @ R.T
    n /= np.linalg.norm(n, axis=-1, keepdims=True)
    assert np.abs(normal[both] - n[both]).max() < 1e-4


PAIRS_XML = """<mujoco><worldbody>
  <geom name="pad" type="ellipsoid" size="0.3 0.3 0.1" pos="0 0 0"/>
  <geom name="pad2" type="ellipsoid" size="0.3 0.3 0.1" pos="1 0 0"/>
  <geom name="pad3" type="ellipsoid" size="0.3 0.3 0.1" pos="2 0 0"/>
  <geom name="pad4" type="ellipsoid" size="0.3 0.3 0.1" pos="3 0 0"/>
  <geom name="table" type="box" size="0.3 0.3 0.1" pos="4 0 0"/>
  <body name="sphere" pos="0 0 0.16"><freejoint/><geom type="sphere" size="0.05"/></body>
  <body name="box" pos="1 0 0.16"><freejoint/><geom type="box" size="0.05 0.04 0.05" euler="0 0 20"/></body>
  <body name="capsule" pos="2 0 0.16"><freejoint/><geom type="capsule" size="0.04 0.1" euler="0 90 0"/></body>
  <body name="ellipsoid" pos="3 0 0.16"><freejoint/><geom type="ellipsoid" size="0.15 0.15 0.05"/></body>
  <body name="on_table" pos="4 0 0.16"><freejoint/><geom type="ellipsoid" size="0.1 0.05 0.03" euler="0 0 25"/></body>
</worldbody></mujoco>"""


def test_spheres_boxes_capsules_and_ellipsoids_rest_on_ellipsoids(tmp_path):
    """On the tops of fixed ellipsoids (0.3, 0.3, 0.1): a sphere, a box, a lying capsule and a flat ellipsoid come
    to rest with their lowest point at the top, 0.1 m (their centres at 0.1 plus the radius, half-height or
    semi-axis, to 2e-5 m; measured 1e-6 below, the slop), still on top (1e-4 m; the sphere measured 2e-15), and an
    ellipsoid lies on a fixed box's top face at its semi-axis above it; the sphere, the capsule and the ellipsoid
    meet it through GJK, EPA and the Newton steps on the exact support functions, the box's and the table's faces
    are clipped against the ellipsoid's support point. The polyhedron held the sphere 6e-3 m low."""
    scene, e = build(tmp_path, PAIRS_XML)
    for _ in range(300):
        scene.step()
    expected = {"sphere": 0.15, "box": 0.15, "capsule": 0.14, "ellipsoid": 0.15, "on_table": 0.13}
    for k, (name, z) in enumerate(expected.items()):
        pos = e.get_link(name).get_pos().numpy()
        assert abs(pos[2] - z) < 2e-5, (name, pos[2], z)
        assert np.abs(pos[:2] - [k, 0.0]).max() < 1e-4, (name, pos)
    assert np.abs(e.get_dofs_velocity().numpy()).max() < 1e-2


def contact_gradient(scene, q0, w):
    """(contacts(q) -> (s_con_f's point, normal and depth [B, C, 7], counts, keys), the gradient of
    sum(w * (point, normal, depth)) with respect to qpos at q0 by the contact frames' reverse)."""
    s = scene.rigid_solver
    st, m, sc = s.state, s.model, s.scratch
    f = scene._frame
    B = q0.shape[0]

    def contacts(q):
        with torch.no_grad():
            st.qpos[f] = torch.as_tensor(q)
        s.kinematics(f)
        s._collide(f)
        n = sc["s_con_i"][:, CI_META, 0].numpy().copy()
        keys = [tuple(sc["s_con_i"][b, CI_KEY, :n[b]].tolist()) for b in range(B)]
        return sc["s_con_f"].numpy()[..., CF_POS:CF_POS + 7].copy(), n, keys

    arr = s._taichi_array
    L, J, Q = s.n_links, max(s.n_joints, 1), q0.shape[1]
    full = np.zeros((B, s.max_contacts, GC_N))
    full[..., :7] = w
    g = dict(g_con=arr((B, s.max_contacts, GC_N), values=full), g_qpos=arr((B, Q)), g_lpos=arr((B, L), element=(3,)),
             g_lquat=arr((B, L), element=(4,)), g_R=arr((B, L), element=(3, 3)), g_com=arr((B, L), element=(3,)),
             g_janchor=arr((B, J), element=(3,)), g_jaxis=arr((B, J), element=(3,)),
             g_link_f=arr((B, L, m["link_f"].shape[2])))
    contacts(q0)
    frames_reverse(f, st.qpos, st.links_pos, st.links_quat, m["link_f"], m["link_i"], m["joint_f"], m["joint_i"],
                   m["pair_i"], m["geom_i"], m["geom_f"], sc["s_R"], sc["s_com"], sc["s_janchor"], sc["s_jaxis"],
                   sc["s_ref"], sc["s_con_f"], sc["s_con_i"], g["g_con"], g["g_qpos"], g["g_lpos"], g["g_lquat"],
                   g["g_R"], g["g_com"], g["g_janchor"], g["g_jaxis"], g["g_link_f"])
    return contacts, g["g_qpos"].to_numpy()


def test_the_plane_contact_follows_the_support_point(tmp_path):
    """A free ellipsoid 1 mm into the plane, turned two ways (two environments): its one contact is at its exact
    support point under it (the point midway between it and the plane, the depth below the plane, to 1e-12), and
    the contact frame's reverse (the support point sliding over the surface as the ellipsoid turns,
    kernels_collision.POINT_SUPPORT) gives the gradient of random weights of the point, normal and depth with
    respect to qpos that central differences of the narrowphase give, to 1e-6 relative (measured 5.8e-10; held
    fixed in the ellipsoid, as a mesh's vertex is, it was 1.9e-1 off). The polyhedron touched by two vertices.

    Against anything but a plane an ellipsoid's contact frame is a mesh's (witness points and normal held in the
    links' frames: docs/rigid.md): a sphere 1 mm into the top of a fixed ellipsoid (0.3, 0.3, 0.1) gets the
    depth's derivative (-1 along the sphere's height, 0 across) but none of the normal's turning as the sphere
    moves across the top, 1 / (0.05 + 0.3^2 / 0.1) = 1.05 per metre in truth."""
    xml = f"""<mujoco><worldbody><geom type="plane" size="5 5 0.1"/>
      <body name="e" pos="0 0 0.2"><freejoint/><geom type="ellipsoid" size="{' '.join(f'{s:g}' for s in SEMI)}"
        pos="0.01 -0.02 0.005" euler="5 -10 15"/></body></worldbody></mujoco>"""
    scene, e = build(tmp_path, xml, n_envs=2, gravity=(0.0, 0.0, 0.0))
    from genesis_core.rotations import euler_to_quat, quat_mul, rotate

    geom = e.get_link("e").geoms[0]
    gpos, gquat = geom.init_pos, geom.init_quat
    q0 = np.zeros((2, 7))
    for b, (xy, euler) in enumerate([((0.1, 0.2), (30.0, 40.0, 50.0)), ((-0.2, 0.05), (-20.0, 65.0, 10.0))]):
        q = np.asarray(euler_to_quat(np.radians(euler)), dtype=np.float64)
        wq = quat_mul(q, gquat)
        centre_z = rest_height(wq) - 1e-3
        q0[b] = (*xy, centre_z - rotate(q, gpos)[2], *q)
    rng = np.random.default_rng(5)
    w = rng.normal(size=(2, scene.rigid_solver.max_contacts, 7))
    w[:, 1:] = 0.0
    contacts, grad = contact_gradient(scene, q0, w)
    con, n0, keys0 = contacts(q0)
    assert n0.tolist() == [1, 1]
    for b in range(2):
        R = quat_to_mat(quat_mul(q0[b, 3:], gquat))
        centre = q0[b, :3] + rotate(q0[b, 3:], gpos)
        a = R.T @ np.array([0.0, 0.0, -1.0])
        x = centre + R @ (SEMI ** 2 * a) / np.linalg.norm(SEMI * a)
        depth = -x[2]
        assert abs(con[b, 0, 6] - depth) < 1e-12 and abs(depth - 1e-3) < 1e-12
        assert np.abs(con[b, 0, :3] - (x + 0.5 * depth * np.array([0.0, 0.0, 1.0]))).max() < 1e-12
        assert np.abs(con[b, 0, 3:6] - [0.0, 0.0, 1.0]).max() < 1e-12

    def loss(q):
        con, _, keys = contacts(q)
        assert keys == keys0
        return float((con * w).sum())

    eps = 1e-7
    fd = np.zeros_like(q0)
    for b in range(2):
        for i in range(7):
            u = np.zeros_like(q0)
            u[b, i] = eps
            fd[b, i] = (loss(q0 + u) - loss(q0 - u)) / (2 * eps)
    error = np.linalg.norm(grad - fd) / np.linalg.norm(fd)
    assert error < 1e-6, f"relative error {error:.2e}\ngrad {grad}\nfd   {fd}"

    xml = """<mujoco><worldbody><geom type="ellipsoid" size="0.3 0.3 0.1"/>
      <body name="ball" pos="0 0 0.5"><freejoint/><geom type="sphere" size="0.05"/></body></worldbody></mujoco>"""
    scene, e = build(tmp_path, xml, name="ball.xml", n_envs=2, gravity=(0.0, 0.0, 0.0))
    q0 = np.tile([0.0, 0.0, 0.149, 1.0, 0.0, 0.0, 0.0], (2, 1))
    w = np.zeros((2, scene.rigid_solver.max_contacts, 7))
    w[:, 0, 6] = 1.0  # the depth
    w[1, 0, 6], w[1, 0, 3] = 0.0, 1.0  # the normal's x (normal from the sphere, geom a, into the ellipsoid)
    contacts, grad = contact_gradient(scene, q0, w)
    con, n0, _ = contacts(q0)
    assert n0.tolist() == [1, 1] and abs(con[0, 0, 6] - 1e-3) < 1e-6
    assert np.abs(grad[0, :3] - [0.0, 0.0, -1.0]).max() < 1e-6
    assert np.abs(grad[1, :3]).max() < 1e-12  # (1.05 along x in truth: not followed)


@ti.kernel
def kit_distances(size: nd(ndim=1), centre: nd(ndim=1), quat: nd(ndim=1), points: nd(dtype=V3, ndim=1),
                  d_out: nd(ndim=1), n_out: nd(dtype=V3, ndim=1)):
    for i in range(points.shape[0]):
        rot = quat_to_mat_ti(ti.Vector([quat[0], quat[1], quat[2], quat[3]]))
        d, n = signed_distance(ELLIPSOID, ti.Vector([size[0], size[1], size[2]]),
                               ti.Vector([centre[0], centre[1], centre[2]]), rot, 0, 0, d_out, points[i],
                               False)  # (no mesh: the hull planes are not read)
        d_out[i] = d
        n_out[i] = n


def test_particles_meet_the_ellipsoid_surface():
    """The particle kit's distance to an ellipsoid (what MPM, SPH, PBD and FEM collide with): zero on the surface
    with the surface's own outward normal there (1e-12), the sign of inside and outside everywhere, and the distance
    along the normal, delta, to first order (within 5 delta^2 / min(r) for |delta| up to a fifth of the smallest
    semi-axis). Before ellipsoids were analytic the collider view showed the polyhedron's faces."""
    rng = np.random.default_rng(2)
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    R, centre = quat_to_mat(q), np.array([0.2, -0.1, 0.3])
    u = rng.normal(size=(3000, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    surface = u * SEMI
    normal = surface / SEMI ** 2
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    delta = rng.uniform(-0.2, 0.2, size=(3000, 1)) * SEMI.min()
    delta[:1000] = 0.0
    local = surface + delta * normal
    inner = rng.uniform(-1, 1, size=(1000, 3)) * SEMI  # anywhere in the box: inside iff |p / r| < 1
    local = np.concatenate([local, inner])
    points = local @ R.T + centre

    def t(x):
        return torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float64)

    d_out, n_out = torch.zeros(len(points), dtype=torch.float64), torch.zeros((len(points), 3), dtype=torch.float64)
    kit_distances(t(SEMI), t(centre), t(q), t(points), d_out, n_out)
    d, n = d_out.numpy(), n_out.numpy()
    assert np.abs(d[:1000]).max() < 1e-12
    assert np.abs(n[:1000] - normal[:1000] @ R.T).max() < 1e-12
    near = slice(1000, 3000)
    assert np.all(np.abs(d[near] - delta[1000:, 0]) <= 5 * delta[1000:, 0] ** 2 / SEMI.min() + 1e-15)
    inside = np.linalg.norm(inner / SEMI, axis=1) < 1
    assert np.array_equal(d[3000:] < 0, inside)


def test_gradients_through_the_plane_contact(tmp_path):
    """Differentiable mode: a free ellipsoid on the plane, tilted, turning and sliding with friction from its
    initial velocity, its contact at each step 1e-9 m from the depth of its support point at the step's start
    pose; the gradient of its pose after 15 steps with respect to that velocity against central differences of the
    plain scene, to 1e-3 relative (measured 5e-10: the contact frame follows the support point,
    kernels_collision.POINT_SUPPORT; held fixed in the ellipsoid it was 3e-2 off)."""
    from genesis_core.testing import assert_close_rel, central_differences

    path = tmp_path / "roll.xml"
    path.write_text(f"""<mujoco><worldbody><geom type="plane" size="5 5 0.1"/>
      <body name="e" pos="0 0 0.0795" euler="0 20 10"><freejoint/>
        <geom type="ellipsoid" size="{' '.join(f'{s:g}' for s in SEMI)}" euler="0 90 0" friction="0.4"/></body>
    </worldbody></mujoco>""")
    weights = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], dtype=torch.float64)
    pair = []
    for requires_grad in (True, False):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3, requires_grad=requires_grad),
                         rigid_options=gs.options.RigidOptions(iterations=30))
        pair.append((scene, scene.add_entity(gs.morphs.MJCF(file=str(path)))))
        scene.build()
    in_contact = []

    def rollout(scene, body, v0):
        body.set_dofs_velocity(v0)
        for _ in range(15):
            geom = body.get_link("e").geoms[0]
            height = float(geom.get_pos()[2]) - rest_height(geom.get_quat().detach().numpy())
            scene.step()
            pool = scene.rigid_solver.scratch
            in_contact.append(int(pool["s_con_i"][0, CI_META, 0]) == 1)
            if in_contact[-1]:
                assert abs(float(pool["s_con_f"][0, 0, CF_DEPTH]) + height) < 1e-9
        return (torch.cat([body.get_pos(), body.get_quat()]) * weights).sum()

    (scene, body), (ref, ref_body) = pair
    v00 = torch.tensor([0.3, 0.1, -0.05, 0.5, -0.3, 1.0], dtype=torch.float64)
    v0 = v00.clone().requires_grad_(True)
    loss = rollout(scene, body, v0)
    loss.backward()
    assert sum(in_contact) >= 10, f"in contact in {sum(in_contact)} of 15 steps"

    def f(v):
        ref.reset()
        return float(rollout(ref, ref_body, v))

    assert abs(f(v00) - float(loss.detach())) < 1e-9
    assert_close_rel(v0.grad, central_differences(f, v00), tol=1e-3)
