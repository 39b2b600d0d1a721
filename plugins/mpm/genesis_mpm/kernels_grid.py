"""Grid update: sum the partition copies (in a fixed order), momentum to velocity, gravity, and the domain walls.
The grid reaches `BOUND` cells beyond each of the domain's bounds; the nodes of those cells are the walls (the
floor at SimOptions.floor_height counts as the lower z wall when it lies above the domain's bottom) and get the
wall condition (with Coulomb friction on slip and separate walls), so each wall's plane is the bound itself;
the partition copies are cleared for the next substep.

Only the nodes that can hold anything are visited: each environment's span is the box the scatter touched (from
p2g) joined with the box the previous update left mass in, and outside it the copies, grid_v and grid_m are zero,
as the update of the whole grid would leave them (bitwise the same result; a cube of 27k particles on the 70^3
grid touches about 2% of its nodes). Whatever runs between the update and grid-to-particle (the couplings) may
change grid_v where grid_m > 0 only.

A sticky wall also holds the nodes on its plane, `BOUND` cells in from its outer edge. With quadratic B-splines,
zero velocity on the nodes up to index k makes the interpolated velocity vanish below k - 1/2 cells; material
resting on a wall sits from about BOUND - 1/2 cells up, so holding only the nodes inside the wall (k = BOUND - 1)
would put the no-slip surface one cell below it, and the contact layer would slide and spread over the wall as
freely as its own shear over that cell allows (a granular pile then spreads as on a lubricated floor). With the
node on the plane held as well (k = BOUND), the velocity vanishes at the underside of the resting material."""

import taichi as ti

from genesis_core.launch import serial_variant

from .layout import PF_DT, PF_FLOOR, PF_FRICTION, PF_GRAVITY

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
nd = ti.types.ndarray

BOUND = 3
STICKY, SLIP, SEPARATE = 0, 1, 2
# True in the serial copy of grid_update (genesis_core.launch.serial_variant)
SERIAL = False


@ti.func
def wall_velocity(v, d: ti.template(), boundary, lower_wall, upper_wall, friction):
    """The wall condition along axis d for a node in a wall (or, sticky, on its plane): sticky walls stop it; slip
    walls, and separate walls the node moves into, take the normal velocity and up to `friction` times it
    tangentially (Coulomb). v is passed by value (differentiable: no square root of zero)."""
    vd = v[d]
    out = v
    if boundary == STICKY:
        out = ti.Vector([0.0, 0.0, 0.0])
    elif boundary == SLIP or (lower_wall and vd < 0) or (upper_wall and vd > 0):
        out = v - vd * ti.Vector([1.0 if d == 0 else 0.0, 1.0 if d == 1 else 0.0, 1.0 if d == 2 else 0.0])
        t2 = out.norm_sqr()
        if friction > 0 and t2 > 0:
            t = ti.sqrt(t2)
            out *= ti.max(t - friction * ti.abs(vd), 0.0) / t
    return out


@ti.func
def wall_condition(v, node, d: ti.template(), size, floor_cells, boundary, friction):
    """v at grid node `node` after the walls normal to axis d (the floor, floor_cells above the domain's bottom,
    is the lower z wall)."""
    lower = BOUND + (floor_cells if d == 2 else 0)
    lower_wall = node[d] < lower
    upper_wall = node[d] >= size[d] - BOUND
    held = node[d] <= lower or node[d] >= size[d] - BOUND - 1  # a sticky wall holds its plane's nodes too
    out = v
    if (boundary == STICKY and held) or (boundary != STICKY and (lower_wall or upper_wall)):
        out = wall_velocity(v, d, boundary, lower_wall, upper_wall, friction)
    return out


@ti.kernel
def grid_update(params_f: nd(ndim=1), boundary: ti.i32, touched: nd(dtype=ti.i32, ndim=3),
                region: nd(dtype=ti.i32, ndim=3), grid_mv: nd(dtype=V4, ndim=5), grid_v: nd(dtype=V3, ndim=4),
                grid_m: nd(ndim=4)):
    """Sums the copies into grid_v and grid_m, and clears them, over each environment's span: the box of nodes the
    scatter touched (touched [K, B, 6]: each copy's lowest node and one past its highest, per axis, from p2g)
    joined with the box the last update left mass in (region[0] [B, 6], kept here; region[1] receives the span)."""
    dt = params_f[PF_DT]
    gravity = ti.Vector([params_f[PF_GRAVITY], params_f[PF_GRAVITY + 1], params_f[PF_GRAVITY + 2]])
    friction = params_f[PF_FRICTION]
    floor_cells = ti.cast(params_f[PF_FLOOR], ti.i32)  # the floor (SimOptions.floor_height) above the domain's bottom
    n_part = grid_mv.shape[0]
    size = ti.Vector([grid_v.shape[1], grid_v.shape[2], grid_v.shape[3]])
    ti.loop_config(serialize=True)  # a few numbers per environment
    for b in range(grid_v.shape[0]):
        for d in ti.static(range(3)):
            lo = grid_v.shape[1 + d]
            end = 0
            for k in range(touched.shape[0]):
                lo = ti.min(lo, touched[k, b, d])
                end = ti.max(end, touched[k, b, 3 + d])
            region[1, b, d] = ti.min(lo, region[0, b, d])
            region[1, b, 3 + d] = ti.max(end, region[0, b, 3 + d])
            region[0, b, d] = lo
            region[0, b, 3 + d] = end
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    for b, i, j in ti.ndrange(grid_v.shape[0], grid_v.shape[1], grid_v.shape[2]):
        inside = region[1, b, 0] <= i and i < region[1, b, 3] and region[1, b, 1] <= j and j < region[1, b, 4]
        if inside:
            for l in range(region[1, b, 2], region[1, b, 5]):
                acc = ti.Vector([0.0, 0.0, 0.0, 0.0])
                for k in range(n_part):
                    acc += grid_mv[k, b, i, j, l]
                    grid_mv[k, b, i, j, l] = ti.Vector([0.0, 0.0, 0.0, 0.0])
                v = ti.Vector([0.0, 0.0, 0.0])
                if acc[3] > 0:
                    v = ti.Vector([acc[0], acc[1], acc[2]]) / acc[3] + dt * gravity
                    node = ti.Vector([i, j, l])
                    for d in ti.static(range(3)):
                        v = wall_condition(v, node, d, size, floor_cells, boundary, friction)
                grid_v[b, i, j, l] = v
                grid_m[b, i, j, l] = acc[3]


# the same kernel on the calling thread, for a batch of one environment (no thread-pool dispatch)
grid_update_serial = serial_variant(grid_update)
