"""The domain's walls for particle solvers: after its step, a solver keeps every particle inside its bounds (its
`domain_bounds()`, which every way into state checks too, so that a state it produced can always be saved and
restored). `keep_inside` puts a particle that left the box back on the wall it crossed and removes its velocity
into that wall. A particle faster than `vmax` (a speed no physics reaches: the solver passes a thousand domain
extents per substep) or with a non-finite velocity has blown up: its position and velocity become NaN, so that the faults check reports its
environment (`scene.invalid_envs`) instead of the walls clamping it back to a finite, wrong state."""

import taichi as ti

# True in the serial copy (genesis_core.launch.serial_below: below reduce.SERIAL_BELOW particle-environments)
SERIAL = False
V3 = ti.types.vector(3, float)
nd = ti.types.ndarray


@ti.kernel
def keep_inside(fn: ti.i32, lo: nd(ndim=1), hi: nd(ndim=1), vmax: float, pos: nd(dtype=V3, ndim=3),
                vel: nd(dtype=V3, ndim=3), active: nd(ndim=2)):
    """pos, vel: [frames, B, N, 3] at frame fn; lo, hi: [3], metres; vmax: m/s. A non-finite position with a
    finite velocity goes to the lower bound."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            x, v = pos[fn, b, i], vel[fn, b, i]
            blown = 0
            for d in ti.static(range(3)):
                if not ti.abs(v[d]) <= vmax:  # NaN too
                    blown = 1
            for d in ti.static(range(3)):
                if not x[d] >= lo[d]:  # below, or NaN
                    x[d] = lo[d]
                    v[d] = ti.max(v[d], 0.0)
                elif x[d] > hi[d]:
                    x[d] = hi[d]
                    v[d] = ti.min(v[d], 0.0)
            if blown != 0:
                nan = ti.cast(ti.math.nan, float)
                x = ti.Vector([nan, nan, nan])
                v = ti.Vector([nan, nan, nan])
            pos[fn, b, i] = x
            vel[fn, b, i] = v

