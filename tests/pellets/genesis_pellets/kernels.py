"""The pellets' free motion: symplectic Euler under gravity, frame f to frame fn."""

import taichi as ti

V3 = ti.types.vector(3, float)
nd = ti.types.ndarray


@ti.kernel
def advance(f: ti.i32, fn: ti.i32, h: float, gx: float, gy: float, gz: float, pos: nd(dtype=V3, ndim=3),
            vel: nd(dtype=V3, ndim=3), active: nd(ndim=2)):
    """v(fn) = v(f) + h g, x(fn) = x(f) + h v(fn) for the active pellets; the frozen ones keep their state.
    pos, vel: [frames, B, N, 3]; active: [B, N]."""
    g = ti.Vector([gx, gy, gz])
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        x, v = pos[f, b, i], vel[f, b, i]
        if active[b, i] != 0:
            v = v + h * g
            x = x + h * v
        pos[fn, b, i] = x
        vel[fn, b, i] = v
