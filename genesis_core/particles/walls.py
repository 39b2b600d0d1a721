"""The domain's walls for particle solvers: after its step, a solver keeps every particle inside its bounds (its
`domain_bounds()`, which every way into state checks too, so that a state it produced can always be saved and
restored). `keep_inside` puts a particle that left the box back on the wall it crossed and removes its velocity
into that wall."""

import taichi as ti

V3 = ti.types.vector(3, float)
nd = ti.types.ndarray


@ti.kernel
def keep_inside(fn: ti.i32, lo: nd(ndim=1), hi: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                active: nd(ndim=2)):
    """pos, vel: [frames, B, N, 3] at frame fn; lo, hi: [3], metres. Non-finite positions go to the lower bound
    (the faults check reports the environment)."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            x, v = pos[fn, b, i], vel[fn, b, i]
            for d in ti.static(range(3)):
                if not x[d] >= lo[d]:  # below, or NaN
                    x[d] = lo[d]
                    v[d] = ti.max(v[d], 0.0)
                elif x[d] > hi[d]:
                    x[d] = hi[d]
                    v[d] = ti.min(v[d], 0.0)
            pos[fn, b, i] = x
            vel[fn, b, i] = v
