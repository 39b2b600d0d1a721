"""The force fields' kernels: one acceleration function over every field of a scene, and the two ways it acts.

A scene's fields are rows of one table: `seeds` [K] (int32: each field's noise seed), `active` [B, K] (int32, 0
or 1) and `params` [B, K, N_PARAMS] (float, the columns below), `perm` [K, 3, 2 * WRAP] (int32:
the turbulence's Perlin permutations, one per axis). A field's acceleration at a point is a function of the
point's position x (m) and velocity v (m/s), the time t (s), the substep index and the point's index; the fields'
accelerations add up.

- `kick_particles`: the particles of a solver, after its substep: vel[fn] += dt * a(pos[f], vel[f]) where the
  solver's mask allows (active, free). The velocity of the substep's end takes the field evaluated at its start.
- `push_bodies`: the bodies of a collider (a rigid solver's links): the impulse m a(com, v) dt on each body's
  centre of mass, into the accumulator its next substep applies (`ColliderView.body_impulse`).

Both are Taichi kernels over ndarrays, made for a scene's sequence of field kinds (`kernels_for`: each field's
code unrolled, a Custom field's `@ti.func` inlined), and their reverse is Taichi's (`kernel.grad`): the
differentiable mode runs the same code both ways.
"""


import taichi as ti

V3 = ti.types.vector(3, float)
nd = ti.types.ndarray

# kind codes
CONSTANT, WIND, POINT, DRAG, NOISE, VORTEX, TURBULENCE, CUSTOM = range(8)

# the columns of a field's parameter row, each one meaning for every kind that uses it
P_DIR = 0  # 3 entries: unit direction (Constant, Wind: of the acceleration; Vortex: the axis)
P_CENTER = 3  # 3 entries: Wind's and Vortex's centre, Point's position, m
P_STRENGTH = 6  # m/s^2 (Vortex: strength_perpendicular, 1/s^2)
P_RADIUS = 7  # Wind's cylinder radius, m
P_FALLOFF_POW = 8  # Point, Vortex
P_FLOW = 9  # Point, Turbulence: the pull toward the field's velocity, 1/s
P_LINEAR = 10  # Drag: linear coefficient, 1/s
P_QUADRATIC = 11  # Drag: quadratic coefficient, 1/m
P_STRENGTH_RADIAL = 12  # Vortex, 1/s^2 (positive: inward)
P_FALLOFF_MIN = 13  # Vortex: full strength inside this distance from the axis, m
P_FALLOFF_MAX = 14  # Vortex: no force beyond this distance, m (negative: no limit)
P_DAMPING = 15  # Vortex: 1/s
P_FREQUENCY = 16  # Turbulence: the Perlin noise's spatial frequency, 1/m
N_PARAMS = 17

WRAP = 256  # the Perlin lattice's period (Genesis World's wrap_size)
TINY = 1e-30  # under a square root: finite derivatives at zero (a norm's gradient at the origin)


@ti.func
def _vec(params: ti.template(), b, k, c):
    return ti.Vector([params[b, k, c], params[b, k, c + 1], params[b, k, c + 2]])


@ti.func
def _mix(h):
    """Chris Wellons' lowbias32 integer hash (u32 -> u32)."""
    h ^= h >> ti.u32(16)
    h *= ti.u32(0x7FEB352D)
    h ^= h >> ti.u32(15)
    h *= ti.u32(0x846CA68B)
    h ^= h >> ti.u32(16)
    return h


@ti.func
def _uniform(seed, step, b, i, c):
    """A number in [-1, 1) that depends on (seed, substep, environment, point, axis) alone: the noise field, the
    same on every run and after every restore of the state."""
    h = _mix(ti.cast(seed, ti.u32) ^ _mix(ti.cast(step, ti.u32) ^ _mix(ti.cast(b, ti.u32) ^ _mix(
        ti.cast(i * 3 + c, ti.u32)))))
    return ti.cast(h >> ti.u32(8), float) * (2.0 / 16777216.0) - 1.0


@ti.func
def _fade(t):
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


@ti.func
def _lerp(t, a, b):
    return a + t * (b - a)


@ti.func
def _grad(h, x, y, z):
    """Ken Perlin's improved noise: the dot product of one of 12 gradient directions (the low 4 bits of h) with
    the offset (x, y, z)."""
    h = h & 15
    u = x
    if h >= 8:
        u = y
    v = y
    if h >= 4:
        v = z
        if h == 12 or h == 14:
            v = x
    if (h & 1) != 0:
        u = -u
    if (h & 2) != 0:
        v = -v
    return u + v


@ti.func
def _perlin(perm: ti.template(), k, a, x, y, z):
    """Perlin noise of axis a of field k at (x, y, z) (already scaled by the frequency): Genesis World's
    PerlinNoiseField._noise, in [-1, 1]."""
    fx, fy, fz = ti.floor(x), ti.floor(y), ti.floor(z)
    X = ti.cast(fx, ti.i32) & (WRAP - 1)
    Y = ti.cast(fy, ti.i32) & (WRAP - 1)
    Z = ti.cast(fz, ti.i32) & (WRAP - 1)
    x, y, z = x - fx, y - fy, z - fz
    u, v, w = _fade(x), _fade(y), _fade(z)
    A = perm[k, a, X] + Y
    AA = perm[k, a, A] + Z
    AB = perm[k, a, A + 1] + Z
    B = perm[k, a, X + 1] + Y
    BA = perm[k, a, B] + Z
    BB = perm[k, a, B + 1] + Z
    return _lerp(w,
                 _lerp(v, _lerp(u, _grad(perm[k, a, AA], x, y, z), _grad(perm[k, a, BA], x - 1, y, z)),
                       _lerp(u, _grad(perm[k, a, AB], x, y - 1, z), _grad(perm[k, a, BB], x - 1, y - 1, z))),
                 _lerp(v, _lerp(u, _grad(perm[k, a, AA + 1], x, y, z - 1), _grad(perm[k, a, BA + 1], x - 1, y, z - 1)),
                       _lerp(u, _grad(perm[k, a, AB + 1], x, y - 1, z - 1),
                             _grad(perm[k, a, BB + 1], x - 1, y - 1, z - 1))))


@ti.func
def one_field(kind: ti.template(), b, k, i, x, v, step, seeds: ti.template(), params: ti.template(),
              perm: ti.template()):
    """The acceleration (m/s^2) of field k, of kind `kind` (a compile-time constant), at position x, velocity v of
    point i of environment b (Genesis World's formulas; docs/force-fields.md)."""
    d = _vec(params, b, k, P_DIR)
    c = _vec(params, b, k, P_CENTER)
    s = params[b, k, P_STRENGTH]
    a = ti.Vector([0.0, 0.0, 0.0])
    if ti.static(kind == CONSTANT):
        a = s * d
    elif ti.static(kind == WIND):  # inside the cylinder of the given radius about the line through c along d
        r = (x - c).cross(d)
        if r.norm_sqr() <= params[b, k, P_RADIUS] ** 2:
            a = s * d
    elif ti.static(kind == POINT):  # along x - c, falling off as 1 / (r + 1)^pow, pulled toward it at rate `flow`
        rel = x - c
        r = ti.sqrt(rel.norm_sqr() + 1e-12)
        a = s * rel / r
        a += (a - v) * params[b, k, P_FLOW]
        a *= 1.0 / (r + 1.0) ** params[b, k, P_FALLOFF_POW]
    elif ti.static(kind == DRAG):
        a = -params[b, k, P_LINEAR] * v - params[b, k, P_QUADRATIC] * ti.sqrt(v.norm_sqr() + TINY) * v
    elif ti.static(kind == NOISE):
        a = s * ti.Vector([_uniform(seeds[k], step, b, i, 0), _uniform(seeds[k], step, b, i, 1),
                           _uniform(seeds[k], step, b, i, 2)])
    elif ti.static(kind == VORTEX):  # about the axis through c along d: tangential d x rel, radial -rel
        rel = x - c
        rel -= rel.dot(d) * d
        r = ti.sqrt(rel.norm_sqr() + TINY)
        lo, hi = params[b, k, P_FALLOFF_MIN], params[b, k, P_FALLOFF_MAX]
        falloff = 0.0
        if r < lo:
            falloff = 1.0
        elif hi < 0.0 or r < hi:
            falloff = 1.0 / (r - lo + 1.0) ** params[b, k, P_FALLOFF_POW]
        a = falloff * (s * d.cross(rel) - params[b, k, P_STRENGTH_RADIAL] * rel)
        a -= params[b, k, P_DAMPING] * v
    elif ti.static(kind == TURBULENCE):
        q = x * params[b, k, P_FREQUENCY]
        a = s * ti.Vector([_perlin(perm, k, 0, q[0], q[1], q[2]), _perlin(perm, k, 1, q[0], q[1], q[2]),
                           _perlin(perm, k, 2, q[0], q[1], q[2])])
        a += (a - v) * params[b, k, P_FLOW]
    return a


_KERNELS = {}


def kernels_for(fields: tuple):
    """(kick_particles, push_bodies) for a scene's fields, `fields` = ((kind, @ti.func or None), ...) in order:
    each field's code is unrolled (its kind known when the kernel compiles), a Custom field's function inlined.
    Made once per distinct tuple; Taichi's offline cache keeps the compilations across processes. (A loop over
    the fields at run time, one kernel for every scene, gave zero gradients: Taichi 1.7's reverse of a dynamic
    inner loop that accumulates under branches.)"""
    key = tuple((kind, id(fn)) for kind, fn in fields)
    hit = _KERNELS.get(key)
    if hit is not None:
        return hit[1]

    @ti.func
    def field_acc(b, i, x, v, t, step, seeds: ti.template(), active: ti.template(), params: ti.template(),
                  perm: ti.template()):
        acc = ti.Vector([0.0, 0.0, 0.0])
        for k in ti.static(range(len(fields))):
            if active[b, k] != 0:
                if ti.static(fields[k][0] == CUSTOM):
                    acc += fields[k][1](x, v, t, i)
                else:
                    acc += one_field(fields[k][0], b, k, i, x, v, step, seeds, params, perm)
        return acc

    @ti.kernel
    def kick_particles(f: ti.i32, fn: ti.i32, dt: float, t: float, step: ti.i32, seeds: nd(ndim=1),
                       active: nd(ndim=2), params: nd(ndim=3), perm: nd(ndim=3), pos: nd(dtype=V3, ndim=3),
                       vel: nd(dtype=V3, ndim=3), mask: nd(ndim=2)):
        """vel[fn, b, i] += dt * a(pos[f, b, i], vel[f, b, i]) where mask[b, i] != 0; pos, vel: [frames, B, N, 3]."""
        for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
            if mask[b, i] != 0:
                vel[fn, b, i] += dt * field_acc(b, i, pos[f, b, i], vel[f, b, i], t, step, seeds, active, params,
                                                perm)

    @ti.kernel
    def push_bodies(dt: float, t: float, step: ti.i32, seeds: nd(ndim=1), active: nd(ndim=2), params: nd(ndim=3),
                    perm: nd(ndim=3), com: nd(dtype=V3, ndim=2), lin_vel: nd(dtype=V3, ndim=2),
                    inv_mass: nd(ndim=1), impulse: nd(ndim=3)):
        """impulse[b, l, :3] += dt * a(com[b, l], lin_vel[b, l]) / inv_mass[l] for every body that moves
        (inv_mass > 0); com, lin_vel: [B, L, 3] (L >= inv_mass' length), impulse: [B, L, 6]."""
        for b, l in ti.ndrange(com.shape[0], inv_mass.shape[0]):
            w = inv_mass[l]
            if w > 0.0:
                a = field_acc(b, l, com[b, l], lin_vel[b, l], t, step, seeds, active, params, perm)
                for c in ti.static(range(3)):
                    impulse[b, l, c] += dt * a[c] / w

    _KERNELS[key] = (fields, (kick_particles, push_bodies))  # (the functions kept: their ids stay theirs)
    return kick_particles, push_bodies
