"""Grid to particle: gather velocity and the APIC affine matrix C = 4 / dx^2 sum w v (x_i - x_p)^T, advect.
A particle is clamped inside the grid (it never addresses a node outside it), whatever its velocity."""

import taichi as ti

from .kernels_p2g import bspline_weights, grid_base
from .layout import PF_DT, PF_DX, PF_INV_DX, PF_ORIGIN

V3 = ti.types.vector(3, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray


@ti.kernel
def g2p(f: ti.i32, fn: ti.i32, params_f: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
        C: nd(dtype=M3, ndim=3), active: nd(ndim=2), grid_v: nd(dtype=V3, ndim=4)):
    for b, p in ti.ndrange(pos.shape[1], pos.shape[2]):
        # everything inside the loop: the kernel is also run in reverse (Taichi's autodiff)
        dt = params_f[PF_DT]
        dx = params_f[PF_DX]
        inv_dx = params_f[PF_INV_DX]
        lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
        hi = ti.Vector([grid_v.shape[1], grid_v.shape[2], grid_v.shape[3]]) - 2.0 - 1e-4
        if active[b, p] == 0:
            pos[fn, b, p] = pos[f, b, p]
            vel[fn, b, p] = vel[f, b, p]
            C[fn, b, p] = C[f, b, p]
        else:
            xl = (pos[f, b, p] - lower) * inv_dx
            base = grid_base(xl, ti.Vector([grid_v.shape[1], grid_v.shape[2], grid_v.shape[3]]))
            fx = xl - base
            w = bspline_weights(fx)
            new_v = ti.Vector([0.0, 0.0, 0.0])
            new_C = ti.Matrix.zero(float, 3, 3)
            for i, j, l in ti.static(ti.ndrange(3, 3, 3)):
                offset = ti.Vector([i, j, l])
                dpos = offset - fx
                weight = w[i][0] * w[j][1] * w[l][2]
                g = grid_v[b, base[0] + i, base[1] + j, base[2] + l]
                new_v += weight * g
                new_C += 4.0 * inv_dx * weight * g.outer_product(dpos)
            x = xl + dt * new_v * inv_dx
            x = ti.min(ti.max(x, 1.0), hi)
            pos[fn, b, p] = lower + x * dx
            vel[fn, b, p] = new_v
            C[fn, b, p] = new_C
