"""Contacts of a height field (gs.morphs.Terrain, an MJCF <hfield>) with the primitives and convex meshes of the
rigid solver, for one candidate pair of one environment.

The height field is geom a of its pairs (a static geom: its link is welded to the world). Its heights (metres) are
rows of hull_f, row-major over the grid (vertex (i, j) at row GI_VERT + i * ny + j, column 0), its cell sizes
(hx, hy) and row length ny in GF_SIZE, its grid's box in GF_HULL_BOX (genesis_core.terrain gives the triangles:
each cell split along its (i, j)-(i + 1, j + 1) diagonal). Only the cells under the other geom's bounding sphere
are visited.

Candidates, by the other geom's type:
- sphere, capsule: spheres (a sphere; the two ends and the middle of the segment, with its radius)
  against each triangle: every face contact (the sphere's centre above the triangle's interior: the triangle's
  normal) and the single closest edge or vertex contact if it is closer than every face contact (a ridge, a
  stair's edge). Edge contacts of coplanar neighbours, which would tilt the normal, are so left out.
- box, cylinder, convex mesh: each of its vertices below the surface (a cylinder's: four rim points per cap, the
  first the deepest toward the surface under its centre; the triangle under a point: depth along that triangle's
  normal), and each grid vertex inside it (depth to its nearest face among those facing down the height field's z
  axis, normal along that face: a stair's edge under a box's bottom).
- ellipsoid: its support point along the surface's inward normal under its centre.
A pair keeps at most N_SLOTS of its candidates: the deepest, and those farthest along +x, -x, +y and -y of the height
field's frame (a box resting on it keeps its support polygon); each is emitted once. A contact's feature, for its
warm start, is its slot.
"""

import taichi as ti

from .kernels_collision import GS_CENTRE, KEY_SPAN, emit, geom_pose
from .kernels_math import func, quat_to_mat, v3, v4
from .layout import (GF_BCENTRE, GF_FRICTION, GF_GAP, GF_HULL_BOX, GF_MARGIN, GF_QUAT, GF_SIZE, GI_FACE, GI_LINK,
                     GI_N_FACES, GI_N_VERTS, GI_TYPE, GI_VERT, PI_GEOM_A, PI_GEOM_B, PI_SLOT)
from .model import BOX, CAPSULE, CYLINDER, MESH, SPHERE

N_SLOTS = 5
# a candidate's record (a row of the slots' matrix): point (3), normal (3), depth, id (-1: empty)
R_POS, R_NORMAL, R_DEPTH, R_ID, R_N = 0, 3, 6, 7, 8


@ti.func
def height(hull_f: ti.template(), row0, ny, i, j):
    return hull_f[row0 + i * ny + j, 0]


@func
def cell_triangle(hull_f, row0, ny, hx, hy, i, j, upper):
    """The local vertices of a cell's triangle: (i, j), (i + 1, j), (i + 1, j + 1) (upper 0: fx >= fy), else
    (i, j), (i + 1, j + 1), (i, j + 1); counter-clockwise seen from above."""
    p0 = ti.Vector([i * hx, j * hy, height(hull_f, row0, ny, i, j)])
    p2 = ti.Vector([(i + 1) * hx, (j + 1) * hy, height(hull_f, row0, ny, i + 1, j + 1)])
    p1 = ti.Vector([(i + 1) * hx, j * hy, height(hull_f, row0, ny, i + 1, j)])
    if upper != 0:
        p1 = p2
        p2 = ti.Vector([i * hx, (j + 1) * hy, height(hull_f, row0, ny, i, j + 1)])
    return p0, p1, p2


@func
def surface_under(hull_f, row0, nx, ny, hx, hy, x, y):
    """(inside, height, unit normal) of the surface at local (x, y); inside 0 off the grid."""
    u = x / hx
    w = y / hy
    inside = 1 if (u >= 0 and w >= 0 and u <= nx - 1 and w <= ny - 1) else 0
    i = ti.min(ti.max(ti.cast(ti.floor(u), ti.i32), 0), nx - 2)
    j = ti.min(ti.max(ti.cast(ti.floor(w), ti.i32), 0), ny - 2)
    p0, p1, p2 = cell_triangle(hull_f, row0, ny, hx, hy, i, j, 0 if u - i >= w - j else 1)
    n = (p1 - p0).cross(p2 - p0)
    n = n / n.norm()
    return inside, p0[2] - (n[0] * (x - p0[0]) + n[1] * (y - p0[1])) / n[2], n


@func
def closest_on_triangle(p, a, b, c):
    """(closest point of triangle abc to p, 1 if it is inside the triangle's interior region, else 0) (Ericson,
    Real-Time Collision Detection, 5.1.5)."""
    ab = b - a
    ac = c - a
    ap = p - a
    d1 = ab.dot(ap)
    d2 = ac.dot(ap)
    q = a
    face = 0
    if not (d1 <= 0 and d2 <= 0):
        bp = p - b
        d3 = ab.dot(bp)
        d4 = ac.dot(bp)
        if d3 >= 0 and d4 <= d3:
            q = b
        else:
            cp = p - c
            d5 = ab.dot(cp)
            d6 = ac.dot(cp)
            vc = d1 * d4 - d3 * d2
            vb = d5 * d2 - d1 * d6
            va = d3 * d6 - d5 * d4
            if d6 >= 0 and d5 <= d6:
                q = c
            elif vc <= 0 and d1 >= 0 and d3 <= 0:
                q = a + ab * (d1 / (d1 - d3))
            elif vb <= 0 and d2 >= 0 and d6 <= 0:
                q = a + ac * (d2 / (d2 - d6))
            elif va <= 0 and (d4 - d3) >= 0 and (d5 - d6) >= 0:
                q = b + (c - b) * ((d4 - d3) / ((d4 - d3) + (d5 - d6)))
            else:
                denom = 1.0 / (va + vb + vc)
                q = a + ab * (vb * denom) + ac * (vc * denom)
                face = 1
    return q, face


@func
def offer(S, sc, pos, normal, depth, cid, t1, t2):
    """Candidate (world point, normal, depth, id) into the slots S (rows: the deepest, then the farthest along t1,
    -t1, t2, -t2; sc their scores); a tie keeps the deeper."""
    s1 = pos.dot(t1)
    s2 = pos.dot(t2)
    for k in ti.static(range(N_SLOTS)):
        score = depth
        if ti.static(k == 1):
            score = s1
        elif ti.static(k == 2):
            score = -s1
        elif ti.static(k == 3):
            score = s2
        elif ti.static(k == 4):
            score = -s2
        take = S[k, R_ID] < 0 or score > sc[k] + 1e-9 or (score > sc[k] - 1e-9 and depth > S[k, R_DEPTH])
        if take:
            sc[k] = score
            for c in ti.static(range(3)):
                S[k, R_POS + c] = pos[c]
                S[k, R_NORMAL + c] = normal[c]
            S[k, R_DEPTH] = depth
            S[k, R_ID] = cid
    return S, sc


@func
def hfield_candidates(ga, gb, o, Rh, cb, rot_b, cbound, rbound, reach, shift, geom_f, geom_i, hull_f):
    """The slots (S [N_SLOTS, R_N], rows with id -1 empty) of height field ga (origin o, rotation Rh) against geom
    gb (centre cb, rotation rot_b, bounding sphere cbound / rbound); depths include the pair's shift (margin),
    candidates closer than reach (margin + gap) are kept."""
    S = ti.Matrix.zero(float, N_SLOTS, R_N)
    for k in ti.static(range(N_SLOTS)):
        S[k, R_ID] = -1.0
    sc = ti.Vector.zero(float, N_SLOTS)
    row0 = geom_i[ga, GI_VERT]
    nx = geom_i[ga, GI_N_VERTS]
    ny = geom_i[ga, GI_N_FACES]
    hx = geom_f[ga, GF_SIZE]
    hy = geom_f[ga, GF_SIZE + 1]
    t1 = ti.Vector([Rh[0, 0], Rh[1, 0], Rh[2, 0]])
    t2 = ti.Vector([Rh[0, 1], Rh[1, 1], Rh[2, 1]])
    up = ti.Vector([Rh[0, 2], Rh[1, 2], Rh[2, 2]])
    RhT = Rh.transpose()
    tb = geom_i[gb, GI_TYPE]
    sb = v3(geom_f, gb, GF_SIZE)
    zb = ti.Vector([rot_b[0, 2], rot_b[1, 2], rot_b[2, 2]])
    n_tri = 2 * (nx - 1) * (ny - 1)
    if tb == SPHERE or tb == CAPSULE:
        half = 0.0 if tb == SPHERE else sb[1]
        r = sb[0]
        for s in range(1 if tb == SPHERE else 3):
            c = cb + zb * (half * ti.select(s == 0, 0.0, ti.select(s == 1, -1.0, 1.0)))
            cl = RhT @ (c - o)
            i0 = ti.min(ti.max(ti.cast(ti.floor((cl[0] - r - reach) / hx), ti.i32), 0), nx - 2)
            i1 = ti.min(ti.max(ti.cast(ti.floor((cl[0] + r + reach) / hx), ti.i32), 0), nx - 2)
            j0 = ti.min(ti.max(ti.cast(ti.floor((cl[1] - r - reach) / hy), ti.i32), 0), ny - 2)
            j1 = ti.min(ti.max(ti.cast(ti.floor((cl[1] + r + reach) / hy), ti.i32), 0), ny - 2)
            best_face = 1e30
            best_edge = 1e30
            edge_q = ti.Vector([0.0, 0.0, 0.0])
            edge_id = 0
            for i in range(i0, i1 + 1):
                for j in range(j0, j1 + 1):
                    for upper in range(2):
                        p0, p1, p2 = cell_triangle(hull_f, row0, ny, hx, hy, i, j, upper)
                        q, face = closest_on_triangle(cl, p0, p1, p2)
                        n = (p1 - p0).cross(p2 - p0)
                        n = n / n.norm()
                        sd = n.dot(cl - p0)
                        tid = s * n_tri + 2 * (i * (ny - 1) + j) + upper
                        if face != 0:
                            pen = r - sd
                            if pen > -reach:
                                nw = Rh @ n
                                S, sc = offer(S, sc, c - nw * (r - 0.5 * pen), nw, pen + shift, tid, t1, t2)
                                best_face = ti.min(best_face, sd)
                        elif sd > 0:
                            dist = (cl - q).norm()
                            if dist < best_edge:
                                best_edge = dist
                                edge_q = q
                                edge_id = tid
            if best_edge < best_face and r - best_edge > -reach and best_edge > 1e-12:
                n = Rh @ ((cl - edge_q) / best_edge)
                pen = r - best_edge
                S, sc = offer(S, sc, c - n * (r - 0.5 * pen), n, pen + shift, edge_id, t1, t2)
    else:
        # the geom's points below the surface: a box's corners, a cylinder's rim points (4 per cap, the first the
        # deepest toward the surface under its centre), a mesh's hull vertices, an ellipsoid's support point
        n_pts = 1
        v0 = 0
        cl0 = RhT @ (cb - o)
        _in0, _h0, n0 = surface_under(hull_f, row0, nx, ny, hx, hy, cl0[0], cl0[1])
        down = -(Rh @ n0)
        u = down - zb * zb.dot(down)
        if u.norm() < 1e-9:
            u = ti.Vector([rot_b[0, 0], rot_b[1, 0], rot_b[2, 0]])
        u = u / u.norm()
        wv = zb.cross(u)
        if tb == BOX or tb == CYLINDER:
            n_pts = 8
        elif tb == MESH:
            v0 = geom_i[gb, GI_VERT]
            n_pts = geom_i[gb, GI_N_VERTS]
        for k in range(n_pts):
            x = cb
            if tb == BOX:
                x = cb + rot_b @ (ti.Vector([1.0 if k & 1 != 0 else -1.0, 1.0 if k & 2 != 0 else -1.0,
                                             1.0 if k & 4 != 0 else -1.0]) * sb)
            elif tb == CYLINDER:
                j = k % 4
                rim = ti.select(j == 0, u, ti.select(j == 1, wv, ti.select(j == 2, -u, -wv)))
                x = cb + zb * (sb[1] if k < 4 else -sb[1]) + sb[0] * rim
            elif tb == MESH:
                x = cb + rot_b @ v3(hull_f, v0 + k, 0)
            else:  # an ellipsoid: its deepest point along the surface's normal under its centre
                w = sb * (rot_b.transpose() @ down)
                x = cb + rot_b @ (sb * w) / ti.max(w.norm(), 1e-30)
            xl = RhT @ (x - o)
            inside, h, n = surface_under(hull_f, row0, nx, ny, hx, hy, xl[0], xl[1])
            if inside != 0:
                dist = (xl[2] - h) * n[2]
                if dist < reach:
                    nw = Rh @ n
                    S, sc = offer(S, sc, x - nw * (0.5 * dist), nw, shift - dist, k, t1, t2)
        if tb == BOX or tb == MESH or tb == CYLINDER:  # the grid's vertices inside it
            cl = RhT @ (cbound - o)
            i0 = ti.min(ti.max(ti.cast(ti.ceil((cl[0] - rbound) / hx), ti.i32), 0), nx - 1)
            i1 = ti.min(ti.max(ti.cast(ti.floor((cl[0] + rbound) / hx), ti.i32), 0), nx - 1)
            j0 = ti.min(ti.max(ti.cast(ti.ceil((cl[1] - rbound) / hy), ti.i32), 0), ny - 1)
            j1 = ti.min(ti.max(ti.cast(ti.floor((cl[1] + rbound) / hy), ti.i32), 0), ny - 1)
            f0 = geom_i[gb, GI_FACE]
            n_faces = geom_i[gb, GI_N_FACES]
            for i in range(i0, i1 + 1):
                for j in range(j0, j1 + 1):
                    vw = o + Rh @ ti.Vector([i * hx, j * hy, height(hull_f, row0, ny, i, j)])
                    p = rot_b.transpose() @ (vw - cb)
                    slack = 1e30
                    out = ti.Vector([0.0, 0.0, 0.0])
                    if tb == CYLINDER:  # its caps (along +-z) and its side (radially)
                        rho = ti.sqrt(p[0] * p[0] + p[1] * p[1])
                        if rho - sb[0] < reach and ti.abs(p[2]) - sb[1] < reach:
                            cap = zb * (1.0 if p[2] >= 0 else -1.0)
                            if cap.dot(up) < -0.3:
                                slack = sb[1] - ti.abs(p[2])
                                out = cap
                            if rho > 1e-12:
                                side = rot_b @ ti.Vector([p[0] / rho, p[1] / rho, 0.0])
                                if side.dot(up) < -0.3 and sb[0] - rho < slack:
                                    slack = sb[0] - rho
                                    out = side
                    elif tb == BOX:
                        q = ti.abs(p) - sb
                        if q.max() < reach:
                            for a in ti.static(range(3)):
                                axis = ti.Vector([rot_b[0, a], rot_b[1, a], rot_b[2, a]]) * (1.0 if p[a] >= 0 else
                                                                                            -1.0)
                                if axis.dot(up) < -0.3 and -q[a] < slack:
                                    slack = -q[a]
                                    out = axis
                    else:
                        worst = -1e30
                        for fr in range(f0, f0 + n_faces):
                            worst = ti.max(worst, v3(hull_f, fr, 0).dot(p) - hull_f[fr, 3])
                        if worst < reach:
                            for fr in range(f0, f0 + n_faces):
                                axis = rot_b @ v3(hull_f, fr, 0)
                                gap = hull_f[fr, 3] - v3(hull_f, fr, 0).dot(p)
                                if axis.dot(up) < -0.3 and gap < slack:
                                    slack = gap
                                    out = axis
                    if slack < 1e29 and slack > -reach:
                        S, sc = offer(S, sc, vw + out * (0.5 * slack), -out, slack + shift, n_pts + i * ny + j, t1,
                                      t2)
    return S


@func
def detect_terrain_contacts(b, f, links_pos, s_R, geom_f, geom_mu, geom_i, geom_rbound, hull_f, pair_i,
                            hfield_pairs, s_con_f, s_con_i):
    """The contacts of environment b's height-field pairs into its pool (after the primitives'): each pair whose
    other geom's bounding sphere reaches the grid's box (in the height field's frame); its slots, each once."""
    for q in range(hfield_pairs.shape[0]):
        p = hfield_pairs[q]
        if p >= 0:  # (-1 pads)
            ga = pair_i[p, PI_GEOM_A]
            gb = pair_i[p, PI_GEOM_B]
            la = geom_i[ga, GI_LINK]
            lb = geom_i[gb, GI_LINK]
            o, rot_a = geom_pose(b, f, ga, la, links_pos, s_R, geom_f)
            cbound = links_pos[f, b, lb] + s_R[b, lb] @ v3(geom_f, gb, GF_BCENTRE)
            local = rot_a.transpose() @ (cbound - o) - v3(geom_f, ga, GF_HULL_BOX)
            if (ti.abs(local) <= v3(geom_f, ga, GF_HULL_BOX + 3) + geom_rbound[gb]).all() and geom_mu[b, gb] >= 0:
                cb, rot_b = geom_pose(b, f, gb, lb, links_pos, s_R, geom_f)
                shift = geom_f[ga, GF_MARGIN] + geom_f[gb, GF_MARGIN]
                reach = shift + geom_f[ga, GF_GAP] + geom_f[gb, GF_GAP]
                S = hfield_candidates(ga, gb, o, rot_a, cb, rot_b, cbound, geom_rbound[gb], reach, shift, geom_f,
                                      geom_i, hull_f)
                mu = ti.max(geom_f[ga, GF_FRICTION], geom_f[gb, GF_FRICTION])
                slot = pair_i[p, PI_SLOT]
                for k in ti.static(range(N_SLOTS)):
                    fresh = S[k, R_ID] >= 0
                    for m in ti.static(range(k)):
                        if S[m, R_ID] == S[k, R_ID]:
                            fresh = False
                    if fresh:
                        emit(b, slot + k, p * KEY_SPAN + k, ti.Vector([S[k, R_POS], S[k, R_POS + 1], S[k, R_POS + 2]]),
                             ti.Vector([S[k, R_NORMAL], S[k, R_NORMAL + 1], S[k, R_NORMAL + 2]]), S[k, R_DEPTH], mu,
                             la, lb, s_con_f, s_con_i)
