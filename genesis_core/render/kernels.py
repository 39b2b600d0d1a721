"""The ray caster: one Taichi kernel for the cameras, one thread per (environment, pixel), and one for the ray-cast
sensors (`cast_rays`), one thread per (environment, ray), both through `_trace`.

Every argument is an ndarray of a fixed dtype and dimensionality, so each kernel compiles once per process
whatever the scene, the resolution or the batch. The callers (`genesis_core.render.renderer`, `genesis_core.sensors.raycaster`) validate every
shape and index before a launch: on the CPU nothing is bounds-checked, and an index out of an array crashes the
process.

Layouts (B environments, G primitives, P hull planes, N particles, H x W pixels):

- cam_f: f32 [B, 13]: position (3), right (3), up (3), back (3) (the camera's +x, +y, +z in world axes; it looks
  along -z), tan(fov_y / 2) (1).
- prim_i: i32 [G, 4]: kind (PRIM_*), segmentation index (>= 1), first hull plane, hull planes (a triangle mesh: its mesh index,
  0). prim_f: f32 [G, 4]: size (3, as `ColliderView.geom_size`), bounding radius (m; < 0: unbounded, a plane).
- prim_pose: f32 [B, G, 13]: world position (3), rotation matrix (9, row-major; local to world), drawn (1: 1.0;
  0.0 where the environment's pose is not finite).
- prim_color: f32 [G, 3], linear RGB in [0, 1]. hull_planes: f32 [P, 4] (outward normal, offset; local frame).
- part_f: f32 [B, N, 4]: world position (3), radius (1; <= 0: not drawn). part_i: i32 [N]: segmentation index (>= 1).
  part_color: f32 [N, 3].
- The particles' uniform grid, one per environment: grid_f f32 [B, 6]: origin (3, m), cell size (3, m, at
  least a particle's diameter); grid_i i32 [B, 4]: cells along x, y, z (0: no particle drawn), the index of
  the environment's first cell; cell_start i32 [cells + 1]: cell c holds cell_items[cell_start[c]:
  cell_start[c + 1]], the particles whose sphere overlaps it.
- The primitives' BVH: loose i32 [U]: the unbounded primitives (planes; a convex piece without a bound), tested
  one by one; node_box f32 [B, M, 6]: each node's box (min, max; world) per environment, node_i i32 [M, 2]: the
  primitive of a leaf (-1: an inner node) and the node to go to when the box is missed (the next node after its
  subtree; nodes are in depth-first order, so an inner node's first child is the next node).
- Triangle meshes (each drawn as a primitive of kind PRIM_MESH whose prim_i[g, 2] is its mesh index m; its frame is
  the primitive's pose): mesh_i i32 [meshes, 6]: first row of its nodes in bnode_i, nodes, first row of its node
  boxes in bnode_box, box rows per environment (0: one set for every environment), first row of its triangles in
  tri_v, triangle rows per environment (0: shared). bnode_i i32 [rows, 3]: per node (depth-first order) its first
  triangle (relative to the mesh's triangle rows), its triangles (0: an inner node, whose first child is the next
  node), the node to skip to when its box is missed (relative to the mesh's nodes). bnode_box f32 [rows, 6]: each
  node's box (min, max; mesh frame). tri_v f32 [rows, 10]: the three vertices (mesh frame) and the triangle's index
  in its mesh (a float, exact below 2^24), which breaks ties between equal distances, so that the result does not
  depend on the tree.
- light: f32 [5]: direction towards the light (3, unit), ambient term (1), shadows on (1: 1.0).
- out_rgb: u8 [B, H, W, 3]; out_depth: f32 [B, H, W]; out_seg: i32 [B, H, W] (0: nothing hit); out_normal: f32 [B, H, W, 3].
"""


import taichi as ti

# primitive kinds (the ColliderView geom codes are mapped to these by the renderer)
PRIM_PLANE, PRIM_SPHERE, PRIM_CAPSULE, PRIM_BOX, PRIM_CYLINDER, PRIM_CONVEX, PRIM_MESH, PRIM_ELLIPSOID = range(8)
INF = 1e30
# a shadow ray starts this far (m) along the normal off the surface it leaves, so that it does not hit it again
SHADOW_OFFSET = 1e-4
# a ray-triangle hit is kept within this much (barycentric) outside the triangle: no cracks along shared edges
TRI_EPS = 1e-6


@ti.func
def _sphere(o, d, c, r):
    """Nearest t > 0 where o + t d (d unit) meets the sphere (c, r); INF if none."""
    oc = o - c
    b = oc.dot(d)
    q = oc.dot(oc) - r * r
    disc = b * b - q
    t = INF
    if disc >= 0.0:
        s = ti.sqrt(disc)
        t0 = -b - s
        t1 = -b + s
        if t0 > 0.0:
            t = t0
        elif t1 > 0.0:
            t = t1
    return t


@ti.func
def _cylinder_side(o, d, r, h):
    """Nearest t > 0 on the side of the cylinder x^2 + y^2 = r^2, |z| <= h (local frame), and the outward
    normal there (INF and an unused normal if none)."""
    a = d.x * d.x + d.y * d.y
    t = INF
    if a > 1e-12:
        b = o.x * d.x + o.y * d.y
        c = o.x * o.x + o.y * o.y - r * r
        disc = b * b - a * c
        if disc >= 0.0:
            s = ti.sqrt(disc)
            t0 = (-b - s) / a
            t1 = (-b + s) / a
            if t0 > 0.0 and ti.abs(o.z + t0 * d.z) <= h:
                t = t0
            elif t1 > 0.0 and ti.abs(o.z + t1 * d.z) <= h:
                t = t1
    n = ti.Vector([1.0, 0.0, 0.0])
    if t < INF:
        p = o + t * d
        n = ti.Vector([p.x, p.y, 0.0]).normalized()
    return t, n


@ti.func
def _axis_vector(axis, sign):
    """sign times the unit vector of axis 0, 1 or 2 (no dynamic indexing of a local vector)."""
    return ti.Vector([sign if axis == 0 else 0.0, sign if axis == 1 else 0.0, sign if axis == 2 else 0.0])


@ti.func
def _ray_box_span(o, d, lo, hi):
    """(t_in, t_out): the span of t >= 0 where the ray o + t d is inside the box [lo, hi]; t_in > t_out: missed
    (always, for an empty box: lo > hi on an axis, as a BVH node over primitives not drawn)."""
    t_in = 0.0
    t_out = INF
    if lo[0] > hi[0] or lo[1] > hi[1] or lo[2] > hi[2]:
        t_out = -1.0
    for k in ti.static(range(3)):
        if ti.abs(d[k]) < 1e-12:
            if o[k] < lo[k] or o[k] > hi[k]:
                t_out = -1.0
        else:
            ta = (lo[k] - o[k]) / d[k]
            tb = (hi[k] - o[k]) / d[k]
            t_in = ti.max(t_in, ti.min(ta, tb))
            t_out = ti.min(t_out, ti.max(ta, tb))
    return t_in, t_out


@ti.func
def _intersect_local(kind, size, o, d, hull_first, hull_n, hull_planes: ti.template()):
    """(t, local normal) of the nearest hit of the ray o + t d (local frame, d unit) on a primitive (not a triangle
    mesh: _trace walks those). Every primitive is exact (an ellipsoid too: its surface, not a tessellation)."""
    t = INF
    n = ti.Vector([0.0, 0.0, 1.0])
    if kind == PRIM_PLANE:
        if ti.abs(d.z) > 1e-12:
            tp = -o.z / d.z
            if tp > 0.0:
                t = tp
    elif kind == PRIM_SPHERE:
        t = _sphere(o, d, ti.Vector([0.0, 0.0, 0.0]), size[0])
        if t < INF:
            n = (o + t * d).normalized()
    elif kind == PRIM_BOX:
        # slabs: the ray is inside the box for t in [t_in, t_out]
        t_in = -INF
        t_out = INF
        axis_in = 0
        sign_in = 1.0
        miss = 0
        for k in ti.static(range(3)):
            if ti.abs(d[k]) < 1e-12:
                if ti.abs(o[k]) > size[k]:
                    miss = 1
            else:
                ta = (-size[k] - o[k]) / d[k]
                tb = (size[k] - o[k]) / d[k]
                # entering through the -size face when d > 0 (outward normal -1), the +size face when d < 0
                t_near = ti.min(ta, tb)
                if t_near > t_in:
                    t_in = t_near
                    axis_in = k
                    sign_in = -1.0 if d[k] > 0.0 else 1.0
                t_out = ti.min(t_out, ti.max(ta, tb))
        if miss == 0 and t_in <= t_out and t_out > 0.0:
            if t_in > 0.0:
                t = t_in
                n = _axis_vector(axis_in, sign_in)
            else:  # the ray starts inside: the exit face
                t = t_out
                p = o + t * d
                best = -1.0
                for k in ti.static(range(3)):
                    w = ti.abs(p[k]) / ti.max(size[k], 1e-12)
                    if w > best:
                        best = w
                        n = _axis_vector(k, 1.0 if p[k] > 0.0 else -1.0)
    elif kind == PRIM_CAPSULE:
        r = size[0]
        h = size[1]
        t, n = _cylinder_side(o, d, r, h)
        for k in ti.static(range(2)):
            c = ti.Vector([0.0, 0.0, h if k == 0 else -h])
            ts = _sphere(o, d, c, r)
            if ts < t:
                t = ts
                n = (o + ts * d - c).normalized()
    elif kind == PRIM_CYLINDER:
        r = size[0]
        h = size[1]
        t, n = _cylinder_side(o, d, r, h)
        if ti.abs(d.z) > 1e-12:
            for k in ti.static(range(2)):
                zc = h if k == 0 else -h
                tc = (zc - o.z) / d.z
                if tc > 0.0 and tc < t:
                    p = o + tc * d
                    if p.x * p.x + p.y * p.y <= r * r:
                        t = tc
                        n = ti.Vector([0.0, 0.0, 1.0 if k == 0 else -1.0])
    elif kind == PRIM_ELLIPSOID:
        # the unit sphere in the frame scaled by the semi-axes: |(o + t d) / r| = 1, a t^2 + 2 b t + c = 0, its
        # roots in the form that keeps their digits (q / a and c / q)
        r = ti.max(ti.Vector([size[0], size[1], size[2]]), 1e-12)
        os = o / r
        ds = d / r
        a = ds.dot(ds)
        b = os.dot(ds)
        c = os.dot(os) - 1.0
        disc = b * b - a * c
        if disc >= 0.0:
            q = -(b + (ti.sqrt(disc) if b >= 0.0 else -ti.sqrt(disc)))
            t0 = q / a
            t1 = t0
            if q != 0.0:
                t1 = c / q
            t_near = ti.min(t0, t1)
            t_far = ti.max(t0, t1)
            if t_near > 0.0:
                t = t_near
            elif t_far > 0.0:
                t = t_far
        if t < INF:
            n = ((o + t * d) / (r * r)).normalized()
    elif kind == PRIM_CONVEX:
        # clip the ray against every half-space n . p <= offset (Cyrus-Beck)
        t_in = -INF
        t_out = INF
        n_in = ti.Vector([0.0, 0.0, 1.0])
        n_out = ti.Vector([0.0, 0.0, 1.0])
        miss = 0
        for k in range(hull_n):
            row = hull_first + k
            pn = ti.Vector([hull_planes[row, 0], hull_planes[row, 1], hull_planes[row, 2]])
            off = hull_planes[row, 3]
            denom = pn.dot(d)
            dist = off - pn.dot(o)
            if ti.abs(denom) < 1e-12:
                if dist < 0.0:
                    miss = 1
            else:
                tk = dist / denom
                if denom < 0.0:
                    if tk > t_in:
                        t_in = tk
                        n_in = pn
                else:
                    if tk < t_out:
                        t_out = tk
                        n_out = pn
        if miss == 0 and hull_n > 0 and t_in <= t_out and t_out > 0.0:
            if t_in > 0.0:
                t = t_in
                n = n_in
            else:
                t = t_out
                n = n_out
    return t, n


@ti.func
def _prim_culled(b, g, o, d, best_t, prim_f: ti.template(), prim_pose: ti.template()):
    """1 where primitive g is not drawn in environment b, or the ray o + t d misses its bounding sphere or meets
    it beyond best_t; else 0."""
    c = ti.Vector([prim_pose[b, g, 0], prim_pose[b, g, 1], prim_pose[b, g, 2]])
    bound = prim_f[g, 3]
    culled = 0
    if prim_pose[b, g, 12] < 0.5:  # not drawn in this environment (a non-finite pose)
        culled = 1
    elif bound >= 0.0:
        oc = c - o
        along = oc.dot(d)
        perp2 = oc.dot(oc) - along * along
        if perp2 > bound * bound or along + bound < 0.0 or along - bound > best_t:
            culled = 1
    return culled


@ti.func
def _prim_frame(b, g, prim_pose: ti.template()):
    """(world position, rotation local -> world) of primitive g in environment b."""
    c = ti.Vector([prim_pose[b, g, 0], prim_pose[b, g, 1], prim_pose[b, g, 2]])
    R = ti.Matrix([[prim_pose[b, g, 3], prim_pose[b, g, 4], prim_pose[b, g, 5]],
                   [prim_pose[b, g, 6], prim_pose[b, g, 7], prim_pose[b, g, 8]],
                   [prim_pose[b, g, 9], prim_pose[b, g, 10], prim_pose[b, g, 11]]])
    return c, R


@ti.func
def _trace(b, o, d, prim_i: ti.template(), prim_f: ti.template(), prim_pose: ti.template(),
           hull_planes: ti.template(), mesh_i: ti.template(), bnode_i: ti.template(), bnode_box: ti.template(),
           tri_v: ti.template(), loose: ti.template(), n_loose, node_box: ti.template(), node_i: ti.template(),
           n_nodes, n_parts, part_f: ti.template(), grid_f: ti.template(), grid_i: ti.template(),
           cell_start: ti.template(), cell_items: ti.template()):
    """The nearest hit of the ray o + t d (world, d unit) in environment b: (t, world normal, hit kind, index);
    kind 0: nothing, 1: primitive, 2: particle. Equal distances go to the lower index, so that the result does
    not depend on the order the primitives are visited in."""
    best_t = INF
    best_n = ti.Vector([0.0, 0.0, 1.0])
    best_kind = 0
    best_idx = -1
    # one loop, one call site of _prim_hit and of the box test (each call site is inlined whole, and compile time
    # follows code size): steps k < n_loose test the unbounded primitives (planes) one by one; the others walk the
    # BVH without a stack (node k - n_loose; nodes in depth-first order, a missed node jumps to its skip). A
    # triangle mesh met there is walked by the same loop: its nodes' boxes and its triangles in its own frame
    # (mesh_g >= 0 while it is), then the walk above goes on.
    k = 0
    mesh_g = -1
    mesh_k = 0
    mesh_nodes = 0
    node0 = 0
    box0 = 0
    tri0 = 0
    ol = o
    dl = d
    R = ti.Matrix.identity(ti.f32, 3)
    mesh_t = INF
    mesh_n = ti.Vector([0.0, 0.0, 1.0])
    mesh_id = 1e30
    while k < n_loose + n_nodes or mesh_g >= 0:
        g = -1
        k_next = k + 1  # after a leaf or an inner node that is hit: the next node (an inner node's first child)
        ro = o
        rd = d
        lo = ti.Vector([0.0, 0.0, 0.0])
        hi = ti.Vector([0.0, 0.0, 0.0])
        if mesh_g >= 0:
            ro = ol
            rd = dl
            for c in ti.static(range(3)):
                lo[c] = bnode_box[box0 + mesh_k, c]
                hi[c] = bnode_box[box0 + mesh_k, 3 + c]
        elif k >= n_loose:
            for c in ti.static(range(3)):
                lo[c] = node_box[b, k - n_loose, c]
                hi[c] = node_box[b, k - n_loose, 3 + c]
        box_hit = 1
        if mesh_g >= 0 or k >= n_loose:
            t_in, t_out = _ray_box_span(ro, rd, lo, hi)
            if not (t_in <= t_out and t_in <= ti.min(best_t, mesh_t)):
                box_hit = 0
        if mesh_g >= 0:
            node = node0 + mesh_k
            mesh_k = bnode_i[node, 2] if box_hit == 0 else mesh_k + 1
            if box_hit == 1:
                # the leaf's triangles, two-sided (Moller-Trumbore, with a small tolerance on the barycentric
                # bounds so that no ray slips between two triangles that share an edge)
                for q in range(bnode_i[node, 0], bnode_i[node, 0] + bnode_i[node, 1]):
                    r = tri0 + q
                    v0 = ti.Vector([tri_v[r, 0], tri_v[r, 1], tri_v[r, 2]])
                    e1 = ti.Vector([tri_v[r, 3], tri_v[r, 4], tri_v[r, 5]]) - v0
                    e2 = ti.Vector([tri_v[r, 6], tri_v[r, 7], tri_v[r, 8]]) - v0
                    p = dl.cross(e2)
                    det = e1.dot(p)
                    if det != 0.0:
                        inv = 1.0 / det
                        sv = ol - v0
                        u = sv.dot(p) * inv
                        if u >= -TRI_EPS and u <= 1.0 + TRI_EPS:
                            qv = sv.cross(e1)
                            v = dl.dot(qv) * inv
                            if v >= -TRI_EPS and u + v <= 1.0 + TRI_EPS:
                                tt = e2.dot(qv) * inv
                                tid = tri_v[r, 9]
                                if tt > 0.0 and (tt < mesh_t or (tt == mesh_t and tid < mesh_id)):
                                    mesh_t = tt
                                    mesh_id = tid
                                    mesh_n = e1.cross(e2).normalized()
            if mesh_k >= mesh_nodes:  # the mesh is done: its nearest hit against the others
                g = mesh_g
                mesh_g = -1
            k_next = k  # the walk above resumes where it left
        elif k < n_loose:
            g = loose[k]
        elif box_hit == 1:
            g = node_i[k - n_loose, 0]
        else:
            k_next = node_i[k - n_loose, 1] + n_loose
        t = INF
        n = ti.Vector([0.0, 0.0, 1.0])
        if g >= 0 and mesh_g < 0 and k_next == k:  # a mesh just walked
            t = mesh_t
            n = R @ mesh_n
        elif g >= 0:
            if _prim_culled(b, g, o, d, best_t, prim_f, prim_pose) == 0:
                c, R = _prim_frame(b, g, prim_pose)
                ol = R.transpose() @ (o - c)
                dl = R.transpose() @ d
                if prim_i[g, 0] == PRIM_MESH:  # walk its BVH from the next step on
                    m = prim_i[g, 2]
                    mesh_g = g
                    mesh_k = 0
                    node0 = mesh_i[m, 0]
                    mesh_nodes = mesh_i[m, 1]
                    box0 = mesh_i[m, 2] + b * mesh_i[m, 3]
                    tri0 = mesh_i[m, 4] + b * mesh_i[m, 5]
                    mesh_t = INF
                    mesh_id = 1e30
                else:
                    size = ti.Vector([prim_f[g, 0], prim_f[g, 1], prim_f[g, 2]])
                    tl, nl = _intersect_local(prim_i[g, 0], size, ol, dl, prim_i[g, 2], prim_i[g, 3], hull_planes)
                    t = tl
                    n = R @ nl
        if t < best_t or (t == best_t and best_kind == 1 and g < best_idx):
            best_t = t
            best_n = n
            best_kind = 1
            best_idx = g
        k = k_next
    if n_parts > 0 and grid_i[b, 0] > 0:
        # the particles through their uniform grid (Amanatides & Woo's traversal): cells are visited in the
        # ray's order, and a hit no farther than the current cell's exit is the nearest
        origin = ti.Vector([grid_f[b, 0], grid_f[b, 1], grid_f[b, 2]])
        cell = ti.Vector([grid_f[b, 3], grid_f[b, 4], grid_f[b, 5]])
        dims = ti.Vector([grid_i[b, 0], grid_i[b, 1], grid_i[b, 2]])
        first_cell = grid_i[b, 3]
        t_in, t_out = _ray_box_span(o, d, origin, origin + cell * dims)
        if t_in <= t_out and t_in < best_t:
            p0 = o + t_in * d
            c = ti.Vector([0, 0, 0])
            step = ti.Vector([0, 0, 0])
            t_next = ti.Vector([INF, INF, INF])
            t_delta = ti.Vector([INF, INF, INF])
            for k in ti.static(range(3)):
                c[k] = ti.min(ti.max(ti.cast(ti.floor((p0[k] - origin[k]) / cell[k]), ti.i32), 0), dims[k] - 1)
                if d[k] > 1e-12:
                    step[k] = 1
                    t_next[k] = (origin[k] + (c[k] + 1) * cell[k] - o[k]) / d[k]
                    t_delta[k] = cell[k] / d[k]
                elif d[k] < -1e-12:
                    step[k] = -1
                    t_next[k] = (origin[k] + c[k] * cell[k] - o[k]) / d[k]
                    t_delta[k] = -cell[k] / d[k]
            visits = 0
            max_visits = dims[0] + dims[1] + dims[2] + 3
            while visits < max_visits:
                visits += 1
                key = first_cell + (c[0] * dims[1] + c[1]) * dims[2] + c[2]
                for e in range(cell_start[key], cell_start[key + 1]):
                    q = cell_items[e]
                    r = part_f[b, q, 3]
                    if r > 0.0:
                        centre = ti.Vector([part_f[b, q, 0], part_f[b, q, 1], part_f[b, q, 2]])
                        t = _sphere(o, d, centre, r)
                        if t < best_t or (t == best_t and best_kind == 2 and q < best_idx):
                            best_t = t
                            best_n = (o + t * d - centre).normalized()
                            best_kind = 2
                            best_idx = q
                t_exit = ti.min(t_next[0], ti.min(t_next[1], t_next[2]))
                if best_t <= t_exit or t_exit > t_out:
                    break
                # step into the neighbour across the nearest cell wall
                axis = 0
                if t_next[1] < t_next[axis]:
                    axis = 1
                if t_next[2] < t_next[axis]:
                    axis = 2
                moved = 0
                for k in ti.static(range(3)):
                    if axis == k:
                        c[k] += step[k]
                        t_next[k] += t_delta[k]
                        if c[k] < 0 or c[k] >= dims[k]:
                            moved = 1
                if moved == 1:
                    break
    return best_t, best_n, best_kind, best_idx


@ti.kernel
def render(cam_f: ti.types.ndarray(dtype=ti.f32, ndim=2), prim_i: ti.types.ndarray(dtype=ti.i32, ndim=2),
           prim_f: ti.types.ndarray(dtype=ti.f32, ndim=2), prim_pose: ti.types.ndarray(dtype=ti.f32, ndim=3),
           prim_color: ti.types.ndarray(dtype=ti.f32, ndim=2), hull_planes: ti.types.ndarray(dtype=ti.f32, ndim=2),
           part_f: ti.types.ndarray(dtype=ti.f32, ndim=3), part_i: ti.types.ndarray(dtype=ti.i32, ndim=1),
           part_color: ti.types.ndarray(dtype=ti.f32, ndim=2), grid_f: ti.types.ndarray(dtype=ti.f32, ndim=2),
           grid_i: ti.types.ndarray(dtype=ti.i32, ndim=2), cell_start: ti.types.ndarray(dtype=ti.i32, ndim=1),
           cell_items: ti.types.ndarray(dtype=ti.i32, ndim=1),
           loose: ti.types.ndarray(dtype=ti.i32, ndim=1), node_box: ti.types.ndarray(dtype=ti.f32, ndim=3),
           node_i: ti.types.ndarray(dtype=ti.i32, ndim=2), mesh_i: ti.types.ndarray(dtype=ti.i32, ndim=2),
           bnode_i: ti.types.ndarray(dtype=ti.i32, ndim=2), bnode_box: ti.types.ndarray(dtype=ti.f32, ndim=2),
           tri_v: ti.types.ndarray(dtype=ti.f32, ndim=2), light: ti.types.ndarray(dtype=ti.f32, ndim=1),
           n_loose: ti.i32, n_nodes: ti.i32, n_parts: ti.i32,
           out_rgb: ti.types.ndarray(dtype=ti.u8, ndim=4), out_depth: ti.types.ndarray(dtype=ti.f32, ndim=3),
           out_seg: ti.types.ndarray(dtype=ti.i32, ndim=3), out_normal: ti.types.ndarray(dtype=ti.f32, ndim=4)):
    B = out_depth.shape[0]
    H = out_depth.shape[1]
    W = out_depth.shape[2]
    for b, i, j in ti.ndrange(B, H, W):
        o = ti.Vector([cam_f[b, 0], cam_f[b, 1], cam_f[b, 2]])
        right = ti.Vector([cam_f[b, 3], cam_f[b, 4], cam_f[b, 5]])
        up = ti.Vector([cam_f[b, 6], cam_f[b, 7], cam_f[b, 8]])
        back = ti.Vector([cam_f[b, 9], cam_f[b, 10], cam_f[b, 11]])
        tan_y = cam_f[b, 12]
        # pinhole through the pixel's centre; row 0 is the top of the image
        x = (2.0 * (j + 0.5) / W - 1.0) * tan_y * W / H
        y = (1.0 - 2.0 * (i + 0.5) / H) * tan_y
        d = (x * right + y * up - back).normalized()
        # two rays through one _trace call site (see _trace): the camera's, then the shadow ray if the point is lit
        ray_o = o
        ray_d = d
        t = INF
        n = ti.Vector([0.0, 0.0, 1.0])
        kind = 0
        idx = -1
        lit = 0.0
        to_light = ti.Vector([light[0], light[1], light[2]])
        for ray in range(2):
            if ray == 0 or (kind != 0 and lit > 0.0 and light[4] > 0.5):
                rt, rn, rkind, ridx = _trace(b, ray_o, ray_d, prim_i, prim_f, prim_pose, hull_planes, mesh_i, bnode_i,
                                             bnode_box, tri_v, loose, n_loose, node_box, node_i, n_nodes, n_parts,
                                             part_f, grid_f, grid_i, cell_start, cell_items)
                if ray == 0:
                    t = rt
                    n = rn
                    kind = rkind
                    idx = ridx
                    if kind != 0:
                        if n.dot(d) > 0.0:  # seen from behind (a plane from below, a ray inside a solid)
                            n = -n
                        lit = ti.max(n.dot(to_light), 0.0)
                        # a hard shadow: anything between the point and the light
                        ray_o = o + t * d + SHADOW_OFFSET * n
                        ray_d = to_light
                elif rkind != 0:
                    lit = 0.0
        if kind == 0:
            out_depth[b, i, j] = ti.math.inf
            out_seg[b, i, j] = 0
            for k in ti.static(range(3)):
                out_rgb[b, i, j, k] = ti.cast(0, ti.u8)
                out_normal[b, i, j, k] = 0.0
        else:
            # depth along the camera's -z axis (the distance to the image plane, OpenGL's linear depth)
            out_depth[b, i, j] = t * (-d.dot(back))
            albedo = ti.Vector([0.0, 0.0, 0.0])
            if kind == 1:
                out_seg[b, i, j] = prim_i[idx, 1]
                albedo = ti.Vector([prim_color[idx, 0], prim_color[idx, 1], prim_color[idx, 2]])
            else:
                out_seg[b, i, j] = part_i[idx]
                albedo = ti.Vector([part_color[idx, 0], part_color[idx, 1], part_color[idx, 2]])
            ambient = light[3]
            shade = ambient + (1.0 - ambient) * lit
            for k in ti.static(range(3)):
                out_rgb[b, i, j, k] = ti.cast(ti.min(ti.max(albedo[k] * shade * 255.0 + 0.5, 0.0), 255.0), ti.u8)
                out_normal[b, i, j, k] = n[k] * 0.5 + 0.5


@ti.kernel
def cast_rays(sensor_pose: ti.types.ndarray(dtype=ti.f32, ndim=3), ray_local: ti.types.ndarray(dtype=ti.f32, ndim=2),
              ray_sensor: ti.types.ndarray(dtype=ti.i32, ndim=1), prim_i: ti.types.ndarray(dtype=ti.i32, ndim=2),
              prim_f: ti.types.ndarray(dtype=ti.f32, ndim=2), prim_pose: ti.types.ndarray(dtype=ti.f32, ndim=3),
              hull_planes: ti.types.ndarray(dtype=ti.f32, ndim=2), part_f: ti.types.ndarray(dtype=ti.f32, ndim=3),
              grid_f: ti.types.ndarray(dtype=ti.f32, ndim=2), grid_i: ti.types.ndarray(dtype=ti.i32, ndim=2),
              cell_start: ti.types.ndarray(dtype=ti.i32, ndim=1), cell_items: ti.types.ndarray(dtype=ti.i32, ndim=1),
              loose: ti.types.ndarray(dtype=ti.i32, ndim=1), node_box: ti.types.ndarray(dtype=ti.f32, ndim=3),
              node_i: ti.types.ndarray(dtype=ti.i32, ndim=2), mesh_i: ti.types.ndarray(dtype=ti.i32, ndim=2),
              bnode_i: ti.types.ndarray(dtype=ti.i32, ndim=2), bnode_box: ti.types.ndarray(dtype=ti.f32, ndim=2),
              tri_v: ti.types.ndarray(dtype=ti.f32, ndim=2), n_loose: ti.i32, n_nodes: ti.i32, n_parts: ti.i32,
              out_t: ti.types.ndarray(dtype=ti.f32, ndim=2)):
    """The ray-cast sensors' rays (genesis_core.sensors.raycaster), one thread per (environment, ray): ray r starts
    at p + R s and runs along R d / |R d|, where (p, R) is the pose of its sensor's link in the environment
    (sensor_pose f32 [B, S, 12]: position (3), rotation matrix (9, row-major; link to world)) and (s, d) its start
    and direction in the link frame (ray_local f32 [R, 6]); ray_sensor i32 [R]: the sensor (its pose's row) of each
    ray. out_t f32 [B, R]: the distance along the ray to the nearest hit of _trace (everything a camera draws), inf
    where nothing is hit or the ray is not finite.

    node_box is written here, not read from the caller: first, one thread per environment refits the primitives'
    BVH bottom-up (nodes in reverse depth-first order, so children before parents; an inner node k's children are
    k + 1 and the node its first child skips to) from the bounding spheres of the primitives at their poses (an
    empty box for one not drawn), in float32 as the renderer's torch refit (renderer.BVHRefit) gives them."""
    B = out_t.shape[0]
    R = out_t.shape[1]
    for b in range(B):
        for q in range(n_nodes):
            k = n_nodes - 1 - q
            g = node_i[k, 0]
            lo = ti.Vector([1e30, 1e30, 1e30], dt=ti.f32)
            hi = ti.Vector([-1e30, -1e30, -1e30], dt=ti.f32)
            if g >= 0:
                if prim_pose[b, g, 12] > 0.5:
                    radius = prim_f[g, 3]
                    for c in ti.static(range(3)):
                        lo[c] = prim_pose[b, g, c] - radius
                        hi[c] = prim_pose[b, g, c] + radius
            else:
                left = k + 1
                right = node_i[left, 1]
                for c in ti.static(range(3)):
                    lo[c] = ti.min(node_box[b, left, c], node_box[b, right, c])
                    hi[c] = ti.max(node_box[b, left, 3 + c], node_box[b, right, 3 + c])
            for c in ti.static(range(3)):
                node_box[b, k, c] = lo[c]
                node_box[b, k, 3 + c] = hi[c]
    for b, r in ti.ndrange(B, R):
        s = ray_sensor[r]
        p = ti.Vector([sensor_pose[b, s, 0], sensor_pose[b, s, 1], sensor_pose[b, s, 2]])
        rot = ti.Matrix([[sensor_pose[b, s, 3], sensor_pose[b, s, 4], sensor_pose[b, s, 5]],
                         [sensor_pose[b, s, 6], sensor_pose[b, s, 7], sensor_pose[b, s, 8]],
                         [sensor_pose[b, s, 9], sensor_pose[b, s, 10], sensor_pose[b, s, 11]]])
        o = p + rot @ ti.Vector([ray_local[r, 0], ray_local[r, 1], ray_local[r, 2]])
        d = rot @ ti.Vector([ray_local[r, 3], ray_local[r, 4], ray_local[r, 5]])
        length = d.norm()
        t_hit = ti.math.inf
        # a ray that is not finite (a link pose gone non-finite) is not traced: NaN and inf fail every bound
        finite = 1
        for k in ti.static(range(3)):
            if not (ti.abs(o[k]) < INF and ti.abs(d[k]) < INF):
                finite = 0
        if finite == 1 and length > 1e-12:
            t, n, kind, idx = _trace(b, o, d / length, prim_i, prim_f, prim_pose, hull_planes, mesh_i, bnode_i,
                                     bnode_box, tri_v, loose, n_loose, node_box, node_i, n_nodes, n_parts, part_f,
                                     grid_f, grid_i, cell_start, cell_items)
            if kind != 0:
                t_hit = t
        out_t[b, r] = ti.cast(t_hit, ti.f32)
