"""The one kernel of the solver: a semi-implicit Euler substep of every node of every environment.

Each node gathers the forces of its (at most two) springs itself, so there are no atomics and a run is
bitwise repeatable. Stability of the explicit spring force needs dt < 2 / omega_max, omega_max ~ 2 sqrt(k/m).
"""

import taichi as ti


@ti.func
def _spring_force(x, v, xj, vj, k, c, rest):
    """Force on a node at x (velocity v) from a spring to xj (velocity vj): Hooke plus a dashpot along it."""
    d = xj - x
    length = d.norm()
    n = d / ti.max(length, 1e-12)
    return (k * (length - rest) + c * (vj - v).dot(n)) * n


@ti.kernel
def substep(f: ti.i32, f_next: ti.i32, dt: float, gravity: ti.types.ndarray(), pos: ti.types.ndarray(),
            vel: ti.types.ndarray(), anchor: ti.types.ndarray(), node_mass: ti.types.ndarray(),
            node_drag: ti.types.ndarray(), node_prev: ti.types.ndarray(), node_next: ti.types.ndarray(),
            node_anchor: ti.types.ndarray(), seg_k: ti.types.ndarray(), seg_c: ti.types.ndarray(),
            seg_rest: ti.types.ndarray()):
    """pos, vel: [frames, B, N, 3]; anchor: [B, A, 3]; node_*: [N]; seg_*[i]: the spring from node i to node_next[i]."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        x = ti.Vector([pos[f, b, i, 0], pos[f, b, i, 1], pos[f, b, i, 2]])
        v = ti.Vector([vel[f, b, i, 0], vel[f, b, i, 1], vel[f, b, i, 2]])
        a = node_anchor[i]
        x_new = x
        v_new = v * 0
        if a >= 0:
            x_new = ti.Vector([anchor[b, a, 0], anchor[b, a, 1], anchor[b, a, 2]])
        else:
            m = node_mass[i]
            force = m * ti.Vector([gravity[0], gravity[1], gravity[2]]) - node_drag[i] * m * v
            j = node_prev[i]
            if j >= 0:
                xj = ti.Vector([pos[f, b, j, 0], pos[f, b, j, 1], pos[f, b, j, 2]])
                vj = ti.Vector([vel[f, b, j, 0], vel[f, b, j, 1], vel[f, b, j, 2]])
                force += _spring_force(x, v, xj, vj, seg_k[j], seg_c[j], seg_rest[j])
            j = node_next[i]
            if j >= 0:
                xj = ti.Vector([pos[f, b, j, 0], pos[f, b, j, 1], pos[f, b, j, 2]])
                vj = ti.Vector([vel[f, b, j, 0], vel[f, b, j, 1], vel[f, b, j, 2]])
                force += _spring_force(x, v, xj, vj, seg_k[i], seg_c[i], seg_rest[i])
            v_new = v + dt * force / m
            x_new = x + dt * v_new
        for k in ti.static(range(3)):
            pos[f_next, b, i, k] = x_new[k]
            vel[f_next, b, i, k] = v_new[k]
