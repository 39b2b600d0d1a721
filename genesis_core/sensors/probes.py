"""The probe sensors: points ("probes") fixed on a link that read the collision geometry around them.

- `Proximity`: each probe's distance to the nearest surface of the tracked links' geoms, clamped to max_range,
  and that surface point.
- `KinematicContactProbe`: how deep the geoms touching the link reach into each probe along its normal (the
  penetration h), and the spring-like force k h (-normal).
- `ElastomerDisplacement`: the marker displacement field of an elastomer skin (FOTS, as Genesis World writes it)
  from the same penetrations, plus the shear and twist of the touching body.

The geometry is the rigid solver's collider view (genesis_core.coupler.ColliderView: geom kinds, sizes, world
poses, body velocities), read at the current frame after each step. Every kind makes one launch per step of one
Taichi kernel, `probe_queries`, batched over environments and probes, which reuses the particle kit's signed
distances (genesis_core.particles.collider.distance_to). Per environment and probe it places the probe (its
sensor's link pose, gathered with the links' accessors, composed with the sensor's offsets), then:

- mode NEAREST (Proximity): over the probe's candidate geoms, the smallest |d| (d the signed distance), the
  nearest point x - d n (n the geom's outward normal at x), max_range and the probe itself where nothing is
  nearer.
- mode DEEPEST (the tactile probes): over the geoms in a contact of the last substep with the sensor's link (a
  per-environment gate from the rigid solver's `contacts()`, the batched data of `entity.get_contacts()`: no host
  read), the largest penetration along the probe's normal n_p: for a probe inside the geom (d < 0) the distance
  along -n_p to where the ray leaves the geom (exact for every kind: plane, sphere, capsule, cylinder, box,
  ellipsoid, convex hull); for a probe outside but within its radius (0 <= d <= r) the depth of the nearest
  surface point below the probe, (c - x) . (-n_p) = d (n . n_p), as Genesis World's sphere test; 0 when negative.
  Where the ray never leaves (a probe in a half-space looking into it) the nearest-point depth is used too.
  A second loop of the same kernel makes the elastomer's reading from these: the dilation summed over each
  sensor's probes (O(n_probes^2) per sensor and environment, without memory beyond the output), the shear and
  twist of the touching geom's body (the view's body velocities), in the sensor frame.

The rest (gathering the links' poses, the contact gate, the spring force, the channel layout) is batched torch.
Nothing is read on the host in a step. Every index the kernel forms (sensors, candidate geoms, gate rows, probe
groups) is built and checked in Python at build, body indices are clamped like the kit's, and the collider view's
shapes are checked (check_view) before the first launch with a view.
"""

import math
from typing import NamedTuple

import numpy as np
import taichi as ti
import torch

from ..coupler import Collider
from ..errors import GenesisError, OptionError
from ..geoms import BOX, CAPSULE, CYLINDER, ELLIPSOID, MESH, PLANE, SPHERE
from ..launch import Launcher, serial_below, torch_one_thread
from ..particles.collider import body_of, distance_to, mat_t_vec, mat_vec
from ..particles.coupling import ViewExtras, check_view
from ..particles.reduce import SERIAL_BELOW
from ..rotations import quat_to_mat, rpy_to_quat
from ..ti_math import quat_mul
from ..ti_math import quat_to_mat as ti_quat_to_mat
from .base import Sensor, gather_links, link_groups, register
from .probe_options import ElastomerDisplacement, KinematicContactProbe, Proximity, n_probes

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
nd = ti.types.ndarray

# probe_sensor (int32 [P]): each probe's sensor (its row of sensor_i, sensor_f, link_pos, link_quat).
# probe_f ([P, N_PF]): the probe's position and normal in its sensor frame, its radius (m)
PF_POS, PF_NORMAL, PF_RADIUS = 0, 3, 6
N_PF = 7
# sensor_i (int32 [S, N_SI]): the sensor's candidate geoms cand_geom[SI_CAND : SI_CAND + SI_NCAND], its row of the
# gate, its probes [SI_FIRST, SI_END), its link's index in the view's body arrays, 1 for an elastomer
SI_CAND, SI_NCAND, SI_GATE, SI_FIRST, SI_END, SI_LINK, SI_ELASTOMER = range(7)
N_SI = 7
# sensor_f ([S, N_SF]): pos_offset (m) and the euler_offset's quaternion (w, x, y, z); max_range (m); the elastomer's
# lambdas (1/m^2) and caps (m, m, rad) of dilation, shear and twist; its normal (sensor frame, unit or zero)
(SF_POS, SF_QUAT, SF_RANGE, SF_DILATE_COEF, SF_DILATE_MAX, SF_SHEAR_COEF, SF_SHEAR_MAX, SF_TWIST_COEF, SF_TWIST_MAX,
 SF_NORMAL) = (0, 3, 7, 8, 9, 10, 11, 12, 13, 14)
N_SF = 17
NEAREST, DEEPEST = 0, 1  # the kernel's modes
NO_EXIT = 1e30  # a ray that never leaves the geom
SERIAL = False  # True in the serial copy (genesis_core.launch.serial_below)


@ti.func
def row3(a: ti.template(), r, c):
    return ti.Vector([a[r, c], a[r, c + 1], a[r, c + 2]])


@ti.func
def row4(a: ti.template(), r, c):
    return ti.Vector([a[r, c], a[r, c + 1], a[r, c + 2], a[r, c + 3]])


# -- where a ray from inside a geom leaves it -----------------------------------------------------------------------


@ti.func
def sphere_exit(q, u, r):
    """The largest t with |q + t u| = r (u a unit vector), -NO_EXIT when the line misses the sphere."""
    b = q.dot(u)
    disc = b * b - (q.norm_sqr() - r * r)
    t = -NO_EXIT
    if disc >= 0:
        t = -b + ti.sqrt(disc)
    return t


@ti.func
def cylinder_exit(p, u, r, h):
    """The upper end of the interval of t where p + t u is inside the cylinder of radius r and half-height h
    along Z (-NO_EXIT when the line misses it)."""
    lo, hi = -NO_EXIT, NO_EXIT
    a = u[0] * u[0] + u[1] * u[1]
    bq = p[0] * u[0] + p[1] * u[1]
    cq = p[0] * p[0] + p[1] * p[1] - r * r
    if a > 1e-24:
        disc = bq * bq - a * cq
        if disc >= 0:
            s = ti.sqrt(disc)
            lo, hi = (-bq - s) / a, (-bq + s) / a
        else:
            lo, hi = NO_EXIT, -NO_EXIT
    elif cq > 0:
        lo, hi = NO_EXIT, -NO_EXIT
    if ti.abs(u[2]) > 1e-12:
        s1, s2 = (-h - p[2]) / u[2], (h - p[2]) / u[2]
        lo, hi = ti.max(lo, ti.min(s1, s2)), ti.min(hi, ti.max(s1, s2))
    elif ti.abs(p[2]) > h:
        lo, hi = NO_EXIT, -NO_EXIT
    t = -NO_EXIT
    if lo <= hi:
        t = hi
    return t


@ti.func
def ray_exit(gtype, size, p, u, hull0, n_hull, hull_planes: ti.template()):
    """How far the ray p + t u (geom frame, u a unit vector, p inside the convex geom) runs before it leaves the
    geom: the upper end of the interval of t inside it (for a union of convex pieces, a capsule, the largest of
    the pieces' upper ends). NO_EXIT when it never leaves (a half-space), negative on a miss (p not inside)."""
    t = NO_EXIT
    if gtype == PLANE:
        if u[2] > 1e-12:
            t = -p[2] / u[2]
    elif gtype == SPHERE:
        t = sphere_exit(p, u, size[0])
    elif gtype == CAPSULE:
        axis = ti.Vector([0.0, 0.0, size[1]])
        t = ti.max(cylinder_exit(p, u, size[0], size[1]),
                   ti.max(sphere_exit(p - axis, u, size[0]), sphere_exit(p + axis, u, size[0])))
    elif gtype == CYLINDER:
        t = cylinder_exit(p, u, size[0], size[1])
    elif gtype == BOX:
        for i in ti.static(range(3)):
            if ti.abs(u[i]) > 1e-12:
                t = ti.min(t, (ti.select(u[i] > 0, size[i], -size[i]) - p[i]) / u[i])
    elif gtype == ELLIPSOID:
        q = p / size
        w = u / size
        a = w.norm_sqr()
        b = q.dot(w)
        disc = b * b - a * (q.norm_sqr() - 1.0)
        t = -NO_EXIT
        if disc >= 0:
            t = (-b + ti.sqrt(disc)) / a
    elif gtype == MESH:
        for k in range(hull0, hull0 + n_hull):
            a = hull_planes[k, 0] * u[0] + hull_planes[k, 1] * u[1] + hull_planes[k, 2] * u[2]
            if a > 1e-12:
                s = hull_planes[k, 0] * p[0] + hull_planes[k, 1] * p[1] + hull_planes[k, 2] * p[2]
                t = ti.min(t, (hull_planes[k, 3] - s) / a)
    return t


@ti.func
def penetration(g, b, x, n_probe, radius, d, n_geom, geom_type: ti.template(), geom_size: ti.template(),
                geom_hull: ti.template(), hull_planes: ti.template(), geom_pos: ti.template(),
                geom_quat: ti.template()):
    """How deep geom g reaches into the probe at x (normal n_probe, radius r) along -n_probe, given the probe's
    signed distance d and the geom's normal n_geom there (see the module doc); 0 when it does not."""
    h = 0.0
    if d <= radius:
        h = d * n_geom.dot(n_probe)  # the nearest surface point's depth below the probe
        if d < 0:
            n_rows = hull_planes.shape[0]
            hull0 = ti.min(ti.max(geom_hull[g, 0], 0), n_rows)
            n_hull = ti.min(ti.max(geom_hull[g, 1], 0), n_rows - hull0)
            rot = ti_quat_to_mat(geom_quat[b, g])
            t = ray_exit(geom_type[g], geom_size[g], mat_t_vec(rot, x - geom_pos[b, g]), mat_t_vec(rot, -n_probe),
                         hull0, n_hull, hull_planes)
            if 0 <= t < 0.5 * NO_EXIT:
                h = t
    return ti.max(h, 0.0)


@ti.func
def sensor_frame(b, s, link_pos: ti.template(), link_quat: ti.template(), sensor_f: ti.template()):
    """(origin, rotation) of sensor s in environment b, world: its link's pose composed with pos_offset and the
    euler_offset's rotation."""
    q = link_quat[b, s]
    origin = link_pos[b, s] + mat_vec(ti_quat_to_mat(q), row3(sensor_f, s, SF_POS))
    return origin, ti_quat_to_mat(quat_mul(q, row4(sensor_f, s, SF_QUAT)))


@ti.func
def slip_and_turn(b, s, g, m_local, origin, rot, dt, sensor_f: ti.template(), sensor_i: ti.template(),
                  geom_pos: ti.template(), geom_body: ti.template(), body_com: ti.template(),
                  body_lin_vel: ti.template(), body_ang_vel: ti.template()):
    """The elastomer's shear and twist at the marker m_local (sensor frame) touched by geom g, in the sensor's xy
    plane: G the geom's centre projected on it; v_rel, w_rel the geom's body's velocity at G and angular velocity
    less the sensor link's (static bodies: zero);
        shear = min(|ds|, shear_max) ds / |ds| exp(-lambda_s |M - G|^2),  ds = (v_rel dt)_xy
        twist = ((R_n(theta) - 1) (M - G))_xy exp(-lambda_t |M - G|^2),  theta = clamp(w_rel . n dt, +-twist_max)
    """
    n_bodies = ti.min(body_com.shape[1], ti.min(body_lin_vel.shape[1], body_ang_vel.shape[1]))
    centre = geom_pos[b, g]
    zero = ti.Vector([0.0, 0.0, 0.0])
    v_other, w_other, v_self, w_self = zero, zero, zero, zero
    body = body_of(geom_body, g, n_bodies)
    if body >= 0:
        w_other = body_ang_vel[b, body]
        v_other = body_lin_vel[b, body] + w_other.cross(centre - body_com[b, body])
    link = sensor_i[s, SI_LINK]
    if 0 <= link < n_bodies:
        w_self = body_ang_vel[b, link]
        v_self = body_lin_vel[b, link] + w_self.cross(centre - body_com[b, link])
    rel_v = mat_t_vec(rot, v_other - v_self)
    rel_w = mat_t_vec(rot, w_other - w_self)
    g_local = mat_t_vec(rot, centre - origin)
    mg = m_local - ti.Vector([g_local[0], g_local[1], 0.0])
    mg2 = mg.norm_sqr()
    out = zero
    shear_max = sensor_f[s, SF_SHEAR_MAX]
    if shear_max > 0:
        ds = ti.Vector([rel_v[0], rel_v[1], 0.0]) * dt
        mag2 = ds.norm_sqr()
        if mag2 > 0:
            mag = ti.sqrt(mag2)
            out += ds * (ti.min(mag, shear_max) / mag * ti.exp(-sensor_f[s, SF_SHEAR_COEF] * mg2))
    twist_max = sensor_f[s, SF_TWIST_MAX]
    if twist_max > 0:
        n = row3(sensor_f, s, SF_NORMAL)
        theta = ti.min(ti.max(rel_w.dot(n) * dt, -twist_max), twist_max)
        turn = (ti.cos(theta) - 1.0) * (mg - mg.dot(n) * n) + ti.sin(theta) * n.cross(mg)
        out += ti.Vector([turn[0], turn[1], 0.0]) * ti.exp(-sensor_f[s, SF_TWIST_COEF] * mg2)
    return out


@ti.func
def closest_on_triangle(p, a, b, c):
    """The point of triangle (a, b, c) nearest p (Ericson, Real-Time Collision Detection, 5.1.5: the Voronoi
    regions of the vertices, then of the edges, then the face)."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = ab.dot(ap), ac.dot(ap)
    q = a
    done = d1 <= 0.0 and d2 <= 0.0
    bp = p - b
    d3, d4 = ab.dot(bp), ac.dot(bp)
    if not done and d3 >= 0.0 and d4 <= d3:
        q = b
        done = True
    vc = d1 * d4 - d3 * d2
    if not done and vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        q = a + (d1 / (d1 - d3)) * ab
        done = True
    cp = p - c
    d5, d6 = ab.dot(cp), ac.dot(cp)
    if not done and d6 >= 0.0 and d5 <= d6:
        q = c
        done = True
    vb = d5 * d2 - d1 * d6
    if not done and vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        q = a + (d2 / (d2 - d6)) * ac
        done = True
    va = d3 * d6 - d5 * d4
    if not done and va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        q = b + ((d4 - d3) / ((d4 - d3) + (d5 - d6))) * (c - b)
        done = True
    if not done:
        denom = 1.0 / (va + vb + vc)
        q = a + ab * (vb * denom) + ac * (vc * denom)
    return q


@ti.func
def mesh_outside(g, b, x, geom_tri: ti.template(), tri_v: ti.template(), geom_pos: ti.template(),
                 geom_quat: ti.template()):
    """(distance, nearest point, world) from x outside mesh geom g to its hull's triangles (exact: the hull planes'
    largest distance is only a lower bound near an edge or a vertex)."""
    c = geom_pos[b, g]
    R = ti_quat_to_mat(geom_quat[b, g])
    p = mat_t_vec(R, x - c)
    best2 = 1e30
    best_q = p
    n_rows = tri_v.shape[0]
    t0 = ti.min(ti.max(geom_tri[g, 0], 0), n_rows)
    t1 = ti.min(t0 + ti.max(geom_tri[g, 1], 0), n_rows)
    for k in range(t0, t1):
        q = closest_on_triangle(p, row3(tri_v, k, 0), row3(tri_v, k, 3), row3(tri_v, k, 6))
        d2 = (p - q).norm_sqr()
        if d2 < best2:
            best2 = d2
            best_q = q
    return ti.sqrt(best2), c + mat_vec(R, best_q)


@ti.kernel
def probe_queries(mode: ti.i32, dt: float, link_pos: nd(dtype=V3, ndim=2), link_quat: nd(dtype=V4, ndim=2),
                  probe_sensor: nd(ndim=1), probe_f: nd(ndim=2), sensor_i: nd(ndim=2), sensor_f: nd(ndim=2),
                  cand_geom: nd(ndim=1), gate: nd(ndim=3), geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1),
                  geom_hull: nd(ndim=2), hull_planes: nd(ndim=2), geom_tri: nd(ndim=2), tri_v: nd(ndim=2),
                  geom_pos: nd(dtype=V3, ndim=2),
                  geom_quat: nd(dtype=V4, ndim=2), geom_body: nd(ndim=1), body_com: nd(dtype=V3, ndim=2),
                  body_lin_vel: nd(dtype=V3, ndim=2), body_ang_vel: nd(dtype=V3, ndim=2),
                  probe_pos: nd(dtype=V3, ndim=2), out_value: nd(ndim=2), out_point: nd(dtype=V3, ndim=2),
                  out_geom: nd(ndim=2), out_disp: nd(dtype=V3, ndim=2)):
    """Per environment b and probe p: probe_pos[b, p] its world position x (link_pos, link_quat [B, S]: the
    sensors' links' poses); mode NEAREST: out_value the distance to the nearest candidate geom (at most max_range;
    outside a mesh geom, to its hull's triangles geom_tri / tri_v: rows (first, count) of [T, 9] geom-frame corners),
    out_point that surface point (the probe where none is nearer), out_geom the geom (-1); mode DEEPEST:
    out_value the largest penetration h of a candidate geom gated for the sensor's link, out_point the contact
    point x - h n_p, out_geom the geom (-1 where h = 0). Then, for the elastomers' probes, out_disp [B, P] the
    reading in the sensor frame: x, y the dilation sum_j min(h_max, h_j) (M - C_j) exp(-lambda |M - C_j|^2) over
    the sensor's probes (C_j their contact points) plus shear and twist (slip_and_turn) where h > 0; z min(h_max,
    h). dt: the step (s)."""
    n_probes = probe_pos.shape[1]
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    for t in range(probe_pos.shape[0] * n_probes):
        b, p = t // n_probes, t % n_probes
        s = probe_sensor[p]
        origin, rot = sensor_frame(b, s, link_pos, link_quat, sensor_f)
        x = origin + mat_vec(rot, row3(probe_f, p, PF_POS))
        n_probe = mat_vec(rot, row3(probe_f, p, PF_NORMAL))
        radius = probe_f[p, PF_RADIUS]
        best = 0.0
        if mode == NEAREST:
            best = sensor_f[s, SF_RANGE]
        point = x
        hit = -1
        row = sensor_i[s, SI_GATE]
        for k in range(sensor_i[s, SI_CAND], sensor_i[s, SI_CAND] + sensor_i[s, SI_NCAND]):
            g = cand_geom[k]
            if gate[b, row, g] != 0:
                d, n_geom = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos, geom_quat)
                if mode == NEAREST:
                    near = x - d * n_geom
                    if d > 0 and geom_type[g] == MESH and geom_tri[g, 1] > 0:
                        d, near = mesh_outside(g, b, x, geom_tri, tri_v, geom_pos, geom_quat)
                    if ti.abs(d) < best:
                        best = ti.abs(d)
                        point = near
                        hit = g
                else:
                    h = penetration(g, b, x, n_probe, radius, d, n_geom, geom_type, geom_size, geom_hull,
                                    hull_planes, geom_pos, geom_quat)
                    if h > best:
                        best = h
                        hit = g
        if mode != NEAREST:
            point = x - best * n_probe
        probe_pos[b, p] = x
        out_value[b, p] = best
        out_point[b, p] = point
        out_geom[b, p] = hit
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    for t in range(probe_pos.shape[0] * n_probes):
        b, p = t // n_probes, t % n_probes
        s = probe_sensor[p]
        disp = ti.Vector([0.0, 0.0, 0.0])
        if sensor_i[s, SI_ELASTOMER] != 0:
            origin, rot = sensor_frame(b, s, link_pos, link_quat, sensor_f)
            m = probe_pos[b, p]
            h_max = sensor_f[s, SF_DILATE_MAX]
            acc = ti.Vector([0.0, 0.0, 0.0])
            if h_max > 0:
                lam = sensor_f[s, SF_DILATE_COEF]
                for j in range(sensor_i[s, SI_FIRST], sensor_i[s, SI_END]):
                    hc = ti.min(h_max, out_value[b, j])
                    if hc > 0:
                        diff = m - out_point[b, j]
                        acc += diff * (hc * ti.exp(-lam * diff.norm_sqr()))
            disp = mat_t_vec(rot, acc)
            h = out_value[b, p]
            g = out_geom[b, p]
            if h > 0 and g >= 0:
                disp += slip_and_turn(b, s, g, row3(probe_f, p, PF_POS), origin, rot, dt, sensor_f, sensor_i,
                                      geom_pos, geom_body, body_com, body_lin_vel, body_ang_vel)
            disp[2] = ti.min(h_max, h)
        out_disp[b, p] = disp


# -- the probes of one kind's sensors -------------------------------------------------------------------------------


def _offset_quats(options_list):
    """The rotation of each sensor frame from its link frame (euler_offset, degrees), [S, 4] (w, x, y, z)."""
    return np.stack([rpy_to_quat(np.radians(o.euler_offset)) for o in options_list])


def _probe_normals(options) -> np.ndarray:
    """[N, 3] unit normals of a tactile sensor's probes (its options hold one or one per probe)."""
    normals = np.asarray(options.probe_local_normal, dtype=np.float64).reshape(-1, 3)
    return np.broadcast_to(normals, (n_probes(options), 3)).copy()


def _probe_radii(options) -> np.ndarray:
    return np.broadcast_to(np.asarray(options.probe_radius, dtype=np.float64).reshape(-1), (n_probes(options),))


def collider_of(entity, name: str):
    """The solver of the sensor's entity, which must expose its geometry (`collider_view`, genesis_core.coupler)."""
    solver = entity.solver
    if not isinstance(solver, Collider):
        raise OptionError(f"add_sensor: {name} needs the geometry of {solver.name}, which exposes no collider_view(f)"
                          "; attach it to an entity of a solver that does (the rigid solver).")
    return solver


def _elastomer_row(options, normals) -> list:
    """sensor_f's elastomer columns (SF_DILATE_COEF ..): lambdas and caps, and the sensor's normal, the mean of its
    probes' normals made unit (zero, hence no twist, where they cancel)."""
    mean = normals.mean(axis=0)
    norm = np.linalg.norm(mean)
    normal = mean / norm if norm > 1e-9 else np.zeros(3)
    return [options.dilate_coefficient, options.dilate_max_delta, options.shear_coefficient,
            options.shear_max_delta, options.twist_coefficient, math.radians(options.twist_max_delta), *normal]


class ProbeSet:
    """The probes of all the sensors of one kind in a scene, packed for `probe_queries`, and the buffers of its
    launch (made at build; each step writes into them): probe_pos (world), value, point, geom, disp, each
    [B, n_probes(, 3)], in the order of the sensors and their probes.

    mode: NEAREST or DEEPEST; candidates: per sensor, the geoms (solver indices) its probes test, or None for all
    the solver's geoms behind the contact gate of the sensor's link (the tactile kinds)."""

    def __init__(self, manager, sensors, mode, candidates):
        name = type(sensors[0].options).__name__
        solvers = {id(s.entity.solver): s.entity.solver for s in sensors}
        if len(solvers) != 1:
            raise OptionError(f"scene.build: the {name} sensors are on entities of {len(solvers)} solvers; this "
                              "engine measures one kind's probes in one solver's geometry.")
        self.solver = next(iter(solvers.values()))
        self.manager, self.mode, self.name = manager, mode, name
        self.dt = float(manager.sim_options.dt)
        dev, fl = manager.device, manager.float_dtype
        B, G, S = manager.batch, int(self.solver.n_geoms), len(sensors)
        self.n_geoms = G
        self.groups, self.perm = link_groups(sensors, dev)
        counts = [s.n_probes for s in sensors]
        P = sum(counts)
        first = np.cumsum([0] + counts)

        # each sensor's candidate geoms and gate row: Proximity's tracked geoms behind an all-ones gate; the tactile
        # probes every geom (one list for all) behind the gate of their sensor's link, rebuilt each step from the
        # contacts
        gated = candidates[0] is None
        if gated:
            self.gate_links = sorted({s.link_idx_global for s in sensors})
            rows = [self.gate_links.index(s.link_idx_global) for s in sensors]
            flat, starts, sizes = list(range(G)), [0] * S, [G] * S
        else:
            self.gate_links = None
            rows = [0] * S
            flat = [g for c in candidates for g in c]
            starts, sizes = np.cumsum([0] + [len(c) for c in candidates])[:-1], [len(c) for c in candidates]
        n_rows = len(self.gate_links) if gated else 1
        sensor_i = np.zeros((S, N_SI), dtype=np.int32)
        sensor_f = np.zeros((S, N_SF), dtype=np.float64)
        for k, s in enumerate(sensors):
            o = s.options
            sensor_i[k, [SI_CAND, SI_NCAND, SI_GATE, SI_FIRST, SI_END]] = starts[k], sizes[k], rows[k], first[k], \
                first[k + 1]
            sensor_i[k, SI_LINK] = s.link_idx_global
            sensor_f[k, SF_POS:SF_POS + 3] = o.pos_offset
            sensor_f[k, SF_QUAT:SF_QUAT + 4] = _offset_quats([o])[0]
            sensor_f[k, SF_RANGE] = getattr(o, "max_range", 0.0)
            if isinstance(o, ElastomerDisplacement):
                sensor_i[k, SI_ELASTOMER] = 1
                sensor_f[k, SF_DILATE_COEF:] = _elastomer_row(o, s.probe_local_normal_np)
        # every index the kernel forms from these, inside its array (the CPU does not check)
        ends = sensor_i[:, SI_CAND].astype(np.int64) + sensor_i[:, SI_NCAND]
        if (any(not 0 <= g < G for g in flat) or (ends > len(flat)).any() or (sensor_i[:, SI_CAND] < 0).any()
                or not ((0 <= sensor_i[:, SI_GATE]) & (sensor_i[:, SI_GATE] < n_rows)).all()
                or not ((0 <= sensor_i[:, SI_FIRST]) & (sensor_i[:, SI_END] <= P)).all()):
            raise GenesisError(f"{name}: a sensor's geoms, gate row or probes fall outside the arrays of "
                               f"{self.solver.name} ({G} geoms, {n_rows} gate rows, {P} probes).")
        probe_f = np.zeros((P, N_PF), dtype=np.float64)
        probe_f[:, PF_POS:PF_POS + 3] = np.concatenate([s.probe_local_pos_np for s in sensors])
        probe_f[:, PF_NORMAL:PF_NORMAL + 3] = np.concatenate([s.probe_local_normal_np for s in sensors])
        probe_f[:, PF_RADIUS] = np.concatenate([s.probe_radius_np for s in sensors])

        def t(x, dtype=fl):
            return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype, device=dev)

        self.probe_sensor = t(np.repeat(np.arange(S), counts), torch.int32)
        self.probe_f, self.sensor_i, self.sensor_f = t(probe_f), t(sensor_i, torch.int32), t(sensor_f)
        self.local_pos = self.probe_f[:, PF_POS:PF_POS + 3]
        self.cand_geom = t(flat or [0], torch.int32)
        self.gate = torch.ones((B, n_rows, G + 1), dtype=torch.int32, device=dev)
        if gated:
            self.gate_link_t = torch.as_tensor(self.gate_links, dtype=torch.long, device=dev)
            self.gate_row_base = (torch.arange(n_rows, device=dev) * (G + 1))[None, :, None]
        self.link_pos = torch.zeros((B, S, 3), dtype=fl, device=dev)
        self.link_quat = torch.zeros((B, S, 4), dtype=fl, device=dev)
        self.probe_pos = torch.zeros((B, P, 3), dtype=fl, device=dev)
        self.value = torch.zeros((B, P), dtype=fl, device=dev)
        self.point = torch.zeros((B, P, 3), dtype=fl, device=dev)
        self.geom = torch.full((B, P), -1, dtype=torch.int32, device=dev)
        self.disp = torch.zeros((B, P, 3), dtype=fl, device=dev)
        # the launch's work in signed distances (a gated probe evaluates the few geoms in contact) and dilation
        # terms: below SERIAL_BELOW, the serial copy (no thread-pool wake-up)
        dilated = sum(c * c for c, s in zip(counts, sensors) if isinstance(s.options, ElastomerDisplacement))
        self.work = B * ((P if gated else sum(c * n for c, n in zip(counts, sizes))) + dilated)
        self.geom_tri, self.tri_v = self._mesh_triangles(manager, flat if mode == NEAREST and not gated else [], G,
                                                         fl, dev)
        self._launch = Launcher()
        self._extras = ViewExtras()
        self._checked_view = None

    def _mesh_triangles(self, manager, geoms, G, fl, dev):
        """(geom_tri [max(G, 1), 2], tri_v [max(T, 1), 9]): the hull triangles (geom frame) of the mesh geoms among
        `geoms`, from the solver's entities' geoms (`init_verts`, `init_faces`, Genesis World's names); a geom
        without them keeps (0, 0) rows and its hull planes' distance."""
        wanted = set(geoms)
        rows, tris, n = np.zeros((max(G, 1), 2), dtype=np.int32), [], 0
        for e in manager.scene.entities:
            if e.solver is not self.solver or not wanted:
                continue
            for geom in getattr(e, "geoms", ()):
                if geom.idx not in wanted or not 0 <= geom.idx < G or int(getattr(geom, "type", -1)) != MESH:
                    continue  # (the kernel reads triangles of mesh geoms only: a box's distance is exact)
                verts, faces = getattr(geom, "init_verts", None), getattr(geom, "init_faces", None)
                if verts is None or faces is None or len(faces) == 0:
                    continue
                faces = np.asarray(faces, dtype=np.int64)
                if faces.min() < 0 or faces.max() >= len(verts):
                    raise GenesisError(f"{self.name}: geom {geom.idx}'s hull faces index outside its vertices.")
                corners = np.asarray(verts, dtype=np.float64)[faces].reshape(-1, 9)
                rows[geom.idx] = n, len(corners)
                tris.append(corners)
                n += len(corners)
        tri_v = np.concatenate(tris) if tris else np.zeros((1, 9))
        return (torch.as_tensor(rows, device=dev), torch.as_tensor(np.ascontiguousarray(tri_v), dtype=fl, device=dev))

    def _update_gate(self):
        """gate[b, row, g] = 1 where geom g is in a valid contact of the last substep with the row's link (the
        solver's contacts, [B, C] with `valid`: no host read)."""
        self.gate.zero_()
        c = self.solver.contacts()
        G, rows = self.n_geoms, self.gate_row_base
        valid = c["valid"]
        flat = self.gate.view(self.gate.shape[0], -1)
        for mine, other in ((c["link_a"], c["geom_b"]), (c["link_b"], c["geom_a"])):
            hit = (mine[:, None, :] == self.gate_link_t[None, :, None]) & valid[:, None, :]  # [B, R, C]
            g = torch.where(hit, other[:, None, :].long().clamp(0, G - 1), G)  # G: a column never read
            flat.scatter_(1, (rows + g).reshape(g.shape[0], -1), 1)

    def query(self):
        """Run probe_queries at the current state: probe_pos, value, point, geom, disp are then this step's. (The
        caller runs it under torch_one_thread: these small torch ops wait for torch's thread pool on a busy CPU.)"""
        m = self.manager
        with torch.no_grad():
            self.link_pos.copy_(gather_links(m, self.groups, self.perm, lambda e, l: e.get_links_pos(l)))
            self.link_quat.copy_(gather_links(m, self.groups, self.perm, lambda e, l: e.get_links_quat(l)))
        solver = self.solver
        if self.n_geoms == 0:  # nothing to measure: the readings of empty space, the probes where they are
            return self._empty()
        view = solver.collider_view(solver.frames.prev(solver.frame))
        if self._checked_view is not view:
            check_view(view, m.batch, solver.name, f"the {self.name} sensors")
            if view.geom_type.shape[0] < self.n_geoms:
                raise GenesisError(f"{solver.name}.collider_view: {view.geom_type.shape[0]} geoms, fewer than its "
                                   f"{self.n_geoms}; the {self.name} sensors cannot measure them.")
            self._checked_view = view
        if self.gate_links is not None:
            with torch.no_grad():
                self._update_gate()
        _, _, geom_hull, hull_planes = self._extras(view, m.batch, m.float_dtype, m.device)
        self._launch(serial_below(probe_queries, self.work, SERIAL_BELOW), self.mode, self.dt, self.link_pos,
                     self.link_quat, self.probe_sensor, self.probe_f, self.sensor_i, self.sensor_f, self.cand_geom,
                     self.gate, view.geom_type, view.geom_size, geom_hull, hull_planes, self.geom_tri, self.tri_v,
                     view.geom_pos,
                     view.geom_quat, view.geom_body, view.body_com, view.body_lin_vel, view.body_ang_vel,
                     self.probe_pos, self.value, self.point, self.geom, self.disp)

    def _empty(self):
        """A solver without geoms: the probes read max_range (Proximity) or nothing, at their own positions."""
        rot_link = quat_to_mat(self.link_quat)
        sensor = self.probe_sensor.long()
        off_rot = quat_to_mat(self.sensor_f[:, SF_QUAT:SF_QUAT + 4])
        origin = self.link_pos + torch.einsum("bsij,sj->bsi", rot_link, self.sensor_f[:, SF_POS:SF_POS + 3])
        rot = (rot_link @ off_rot)[:, sensor]
        self.probe_pos.copy_(origin[:, sensor] + torch.einsum("bpij,pj->bpi", rot, self.local_pos))
        far = self.sensor_f[:, SF_RANGE] if self.mode == NEAREST else torch.zeros_like(self.sensor_f[:, SF_RANGE])
        self.value.copy_(far[sensor].expand_as(self.value))
        self.point.copy_(self.probe_pos)
        self.geom.fill_(-1)
        self.disp.zero_()


# -- the sensors ----------------------------------------------------------------------------------------------------


def _noisy_model(sensor, n_read: int) -> dict:
    """The measurement model of a probe sensor: its noisy options on the first n_read channels (one number or one
    per such channel), nothing on the others (Proximity's nearest points)."""
    o = sensor.options
    model = {}
    for key in ("resolution", "bias", "noise", "random_walk"):
        values = np.zeros(sensor.n_channels)
        values[:n_read] = _per_read_channel(o, key, n_read)
        model[key] = values
    model["jitter"] = o.jitter
    return model


def _per_read_channel(options, key, n):
    value = getattr(options, key)
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size == 1:
        return np.full(n, float(arr[0]))
    if arr.size != n:
        raise OptionError(f"add_sensor: {type(options).__name__}.{key}={value!r} has {arr.size} values; give one "
                          f"number or {n} (one per channel of the reading).")
    return arr


class ProbeSensor(Sensor):
    """What the probe sensors share: their probes in the sensor frame (`probe_local_pos`, `probe_local_normal`,
    torch [n_probes, 3]) and `n_probes`."""

    uses_contacts = True  # the tactile kinds read the solver's contacts (`solver.contacts()`)

    def __init__(self, manager, idx, options, entity):
        self.probe_local_pos_np = np.asarray(options.probe_local_pos, dtype=np.float64).reshape(-1, 3)
        self.n_probes = len(self.probe_local_pos_np)
        self.probe_local_normal_np = (_probe_normals(options) if hasattr(options, "probe_local_normal")
                                      else np.tile([0.0, 0.0, 1.0], (self.n_probes, 1)))
        self.probe_radius_np = _probe_radii(options) if hasattr(options, "probe_radius") else np.zeros(self.n_probes)
        super().__init__(manager, idx, options, entity)
        self.link_idx_global = entity.link_start + self.link_idx_local

    @classmethod
    def n_read_channels(cls, options) -> int:
        return cls.channel_count(options)

    @classmethod
    def check(cls, manager, options, entity):
        solver = collider_of(entity, type(options).__name__)
        if cls.uses_contacts and not callable(getattr(solver, "contacts", None)):
            raise OptionError(f"add_sensor: {type(options).__name__} reads the contacts of {solver.name}, which has "
                              "no contacts() ([B, C] arrays: link_a, link_b, geom_a, geom_b, valid).")
        n = cls.n_read_channels(options)
        for key in ("resolution", "bias", "noise", "random_walk"):
            _per_read_channel(options, key, n)

    def channel_model(self) -> dict:
        return _noisy_model(self, self.n_read_channels(self.options))

    @property
    def probe_local_pos(self) -> torch.Tensor:
        return torch.as_tensor(self.probe_local_pos_np, dtype=self._manager.float_dtype, device=self._manager.device)

    @property
    def probe_local_normal(self) -> torch.Tensor:
        return torch.as_tensor(self.probe_local_normal_np, dtype=self._manager.float_dtype,
                               device=self._manager.device)


def _interleave(sensors, blocks):
    """The column order that turns kind-wide blocks (each [B, P * width], probe after probe) into each sensor's
    channels in turn (its part of every block, block after block)."""
    first = np.cumsum([0] + [s.n_probes for s in sensors])
    offsets = np.cumsum([0] + [first[-1] * w for w in blocks])
    cols = []
    for k in range(len(sensors)):
        for b, w in enumerate(blocks):
            cols.extend(range(offsets[b] + first[k] * w, offsets[b] + first[k + 1] * w))
    return None if cols == list(range(len(cols))) else cols


@register(Proximity)
class ProximitySensor(ProbeSensor):
    """Distances to the tracked links' surfaces: `read()` `([n_envs,] n_probes)`, `nearest_points`
    `([n_envs,] n_probes, 3)` (the ground truth of the current step). Channels: the n_probes distances, then the
    3 n_probes coordinates of the nearest points (state like any channel: in snapshots, resets and
    checkpoints)."""

    uses_contacts = False

    @classmethod
    def channel_count(cls, options) -> int:
        return 4 * n_probes(options)

    @classmethod
    def n_read_channels(cls, options) -> int:
        return n_probes(options)

    @classmethod
    def check(cls, manager, options, entity):
        super().check(manager, options, entity)
        if not options.track_link_idx:
            raise OptionError("add_sensor: Proximity(track_link_idx=()) tracks no link; give the global indices of "
                              "the links to measure (link.idx, entity.base_link_idx).")
        n_links = sum(e.n_links for e in entity.solver.entities)
        for i, link in enumerate(options.track_link_idx):
            if link >= n_links:
                raise OptionError(f"add_sensor: Proximity(track_link_idx[{i}]={link}) is out of range: "
                                  f"{entity.solver.name} has {n_links} links (add the tracked entities before the "
                                  "sensor).")

    def _format(self, x):
        return x[..., :self.n_probes]

    @property
    def nearest_points(self) -> torch.Tensor:
        """The nearest surface point of each probe at the current step, world, m, `([n_envs,] n_probes, 3)` (the
        probe's own position where no tracked surface is within max_range)."""
        x = self._manager.read_channels("ground_truth", self.channels)[..., self.n_probes:]
        return x.reshape(*x.shape[:-1], self.n_probes, 3)

    @classmethod
    def build_kind(cls, manager, sensors):
        solver = sensors[0].entity.solver
        candidates = []
        for s in sensors:
            geoms = []
            for link in s.options.track_link_idx:
                geoms += [g for g in _link_geoms(solver, link) if g not in geoms]
            candidates.append(geoms)
        probes = ProbeSet(manager, sensors, NEAREST, candidates)
        return dict(probes=probes, cols=_cols(_interleave(sensors, (1, 3)), manager.device))

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """[B, sum 4 n_probes]: per sensor its distances, then its nearest points."""
        p = ctx["probes"]
        with torch_one_thread():
            p.query()
            x = torch.cat([p.value, p.point.reshape(p.point.shape[0], -1)], dim=1)
            return x if ctx["cols"] is None else x[:, ctx["cols"]]


def _cols(cols, device):
    return None if cols is None else torch.as_tensor(cols, dtype=torch.long, device=device)


def _link_geoms(solver, link: int) -> list:
    """The solver indices of the collision geoms of the link of global index `link`."""
    for e in solver.entities:
        if e.link_start <= link < e.link_end:
            return [g.idx for g in e.links[link - e.link_start].geoms]
    raise OptionError(f"Proximity(track_link_idx=...): link {link} is not a link of {solver.name}'s entities.")


class KinematicContactProbeData(NamedTuple):
    """What a KinematicContactProbe reads: penetration `([n_envs,] n_probes)`, m (0 without contact); force
    `([n_envs,] n_probes, 3)`, N, stiffness * penetration * (-probe normal), in the sensor frame."""

    penetration: torch.Tensor
    force: torch.Tensor


@register(KinematicContactProbe)
class KinematicContactProbeSensor(ProbeSensor):
    """Penetration and spring force per probe (KinematicContactProbeData). Channels: the n_probes penetrations, then
    the 3 n_probes force components."""

    @classmethod
    def channel_count(cls, options) -> int:
        return 4 * n_probes(options)

    def _format(self, x):
        n = self.n_probes
        return KinematicContactProbeData(x[..., :n], x[..., n:].reshape(*x.shape[:-1], n, 3))

    @classmethod
    def build_kind(cls, manager, sensors):
        probes = ProbeSet(manager, sensors, DEEPEST, [None] * len(sensors))
        push = np.concatenate([-s.options.stiffness * s.probe_local_normal_np for s in sensors])  # [P, 3]
        return dict(probes=probes, push=torch.as_tensor(push, dtype=manager.float_dtype, device=manager.device),
                    cols=_cols(_interleave(sensors, (1, 3)), manager.device))

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """[B, sum 4 n_probes]: per sensor its penetrations, then its forces (sensor frame)."""
        p = ctx["probes"]
        with torch_one_thread():
            p.query()
            force = p.value[..., None] * ctx["push"]
            x = torch.cat([p.value, force.reshape(force.shape[0], -1)], dim=1)
            return x if ctx["cols"] is None else x[:, ctx["cols"]]


@register(ElastomerDisplacement)
class ElastomerDisplacementSensor(ProbeSensor):
    """Marker displacements `([n_envs,] n_probes, 3)`, sensor frame: x, y the in-plane displacement (dilation,
    shear, twist), z the marker's penetration (at most dilate_max_delta). Channels: 3 per probe."""

    @classmethod
    def channel_count(cls, options) -> int:
        return 3 * n_probes(options)

    def _format(self, x):
        return x.reshape(*x.shape[:-1], self.n_probes, 3)

    @classmethod
    def build_kind(cls, manager, sensors):
        return dict(probes=ProbeSet(manager, sensors, DEEPEST, [None] * len(sensors)))

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """[B, sum 3 n_probes]: each probe's (x, y, z) displacement in its sensor frame (probe_queries' out_disp)."""
        p = ctx["probes"]
        with torch_one_thread():
            p.query()
        return p.disp.reshape(p.disp.shape[0], -1)


__all__ = ["ElastomerDisplacementSensor", "KinematicContactProbeData", "KinematicContactProbeSensor",
           "ProximitySensor"]
