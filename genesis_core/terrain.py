"""Height fields for `gs.morphs.Terrain`: the subterrain generators, the grid of subterrains, the surface's
triangles and its height at a point. NumPy only; the solvers collide with the grid itself (the rigid
narrowphase, the particle kit's signed distance), not with a mesh made of it.

Conventions, as Genesis World's (and Isaac Gym's) terrains: a height field is an array H [nx, ny] of raw
heights in units of `vertical_scale`; vertex (i, j) lies at (i * horizontal_scale, j * horizontal_scale,
H[i, j] * vertical_scale) in the terrain's frame, whose origin is the grid's corner (0, 0) (the morph's `pos`).
Each cell is split into two triangles along its diagonal from (i, j) to (i + 1, j + 1): where fx >= fy (the
position inside the cell, in cells) the triangle (i, j), (i + 1, j), (i + 1, j + 1), else (i, j),
(i, j + 1), (i + 1, j + 1). Every consumer (collision, particles, the triangles drawn) uses this split.

The generators take and return raw heights, draw their random numbers from NumPy's global generator in the
order Genesis World's do (so that, with `randomize=False`, the seed-0 terrains are Genesis World's), and each
takes its parameters in metres as Genesis World names them.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

MAX_VERTICES = 2 ** 26  # the most vertices a height field may have (its heights live in one array per solver)
SUBTERRAIN_TYPES = ("flat_terrain", "fractal_terrain", "random_uniform_terrain", "sloped_terrain",
                    "pyramid_sloped_terrain", "discrete_obstacles_terrain", "wave_terrain", "stairs_terrain",
                    "pyramid_stairs_terrain", "stepping_stones_terrain")

# Genesis World's defaults (gs.morphs.Terrain.default_params)
DEFAULT_PARAMS = {
    "flat_terrain": {},
    "fractal_terrain": {"levels": 8, "scale": 5.0},
    "random_uniform_terrain": {"min_height": -0.1, "max_height": 0.1, "step": 0.1, "downsampled_scale": 0.5},
    "sloped_terrain": {"slope": -0.5},
    "pyramid_sloped_terrain": {"slope": -0.1},
    "discrete_obstacles_terrain": {"max_height": 0.05, "min_size": 1.0, "max_size": 5.0, "num_rects": 20},
    "wave_terrain": {"num_waves": 2.0, "amplitude": 0.1},
    "stairs_terrain": {"step_width": 0.75, "step_height": -0.1},
    "pyramid_stairs_terrain": {"step_width": 0.75, "step_height": -0.1},
    "stepping_stones_terrain": {"stone_size": 1.0, "stone_distance": 0.25, "max_height": 0.2, "platform_size": 0.0},
}
# the keyword arguments each generator takes beyond the defaults above (Genesis World's generators' own)
EXTRA_PARAMS = {"pyramid_sloped_terrain": {"platform_size": 1.0}, "discrete_obstacles_terrain": {"platform_size": 1.0},
                "pyramid_stairs_terrain": {"platform_size": 1.0}, "stepping_stones_terrain": {"depth": -10.0}}


# -- a not-a-knot cubic spline (random_uniform_terrain's upsampling) -------------------------------------------------

def cubic_spline(x, y, xv):
    """The C2 cubic spline through (x[k], y[k]) with not-a-knot ends, at xv; y may have columns ([n] or [n, m]).
    Two points give the line, three the parabola through them."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    y2 = y[:, None] if y.ndim == 1 else y
    n = len(x)
    h = np.diff(x)
    delta = np.diff(y2, axis=0) / h[:, None]
    if n == 2:
        s = np.repeat(delta, 2, axis=0)
    elif n == 3:  # the parabola: its slopes at the three knots
        c2 = (delta[1] - delta[0]) / (h[0] + h[1])
        s = np.stack([delta[0] - c2 * h[0], delta[0] + c2 * h[0], delta[1] + c2 * h[1]])
    else:  # the knot slopes s: the interior continuity rows and the not-a-knot ends
        A = np.zeros((n, n))
        rhs = np.zeros_like(y2)
        for i in range(1, n - 1):
            A[i, i - 1], A[i, i], A[i, i + 1] = h[i], 2 * (h[i - 1] + h[i]), h[i - 1]
            rhs[i] = 3 * (h[i] * delta[i - 1] + h[i - 1] * delta[i])
        A[0, 0], A[0, 1] = h[1], h[0] + h[1]
        rhs[0] = ((h[0] + 2 * (h[0] + h[1])) * h[1] * delta[0] + h[0] ** 2 * delta[1]) / (h[0] + h[1])
        A[-1, -2], A[-1, -1] = h[-1] + h[-2], h[-2]
        rhs[-1] = (h[-1] ** 2 * delta[-2] + (2 * (h[-2] + h[-1]) + h[-1]) * h[-2] * delta[-1]) / (h[-2] + h[-1])
        s = np.linalg.solve(A, rhs)
    xv = np.asarray(xv, dtype=np.float64)
    k = np.clip(np.searchsorted(x, xv, side="right") - 1, 0, n - 2)
    t = (xv - x[k]) / h[k]
    t = t[:, None]
    hk = h[k][:, None]
    out = ((2 * t ** 3 - 3 * t ** 2 + 1) * y2[k] + (t ** 3 - 2 * t ** 2 + t) * hk * s[k]
           + (-2 * t ** 3 + 3 * t ** 2) * y2[k + 1] + (t ** 3 - t ** 2) * hk * s[k + 1])
    return out[:, 0] if y.ndim == 1 else out


# -- the subterrain generators (raw heights [nx, ny], in units of the vertical scale) --------------------------------

def fractal_terrain(H, hs, vs, levels=8, scale=5.0):
    """Midpoint displacement: at each level a finer lattice of points, each the mean of its coarser neighbours plus
    2^-level * U(-1, 1) * scale metres."""
    nx, ny = H.shape
    z = np.zeros((nx, ny))
    for level in range(1, levels + 1):
        step = 2 ** (levels - level)
        for y in range(0, nx, step):
            y_skip = (1 + y // step) % 2
            for x in range(step * y_skip, ny, step * (1 + y_skip)):
                x_skip = (1 + x // step) % 2
                xref, yref = step * (1 - x_skip), step * (1 - y_skip)
                mean = z[max(y - yref, 0):y + yref + 1:2 * step, max(x - xref, 0):x + xref + 1:2 * step].mean()
                z[y, x] = mean + scale * 2.0 ** (-level) * np.random.uniform(-1, 1)
    return H + z / vs


def random_uniform_terrain(H, hs, vs, min_height=-0.1, max_height=0.1, step=0.1, downsampled_scale=None):
    """Heights drawn uniformly from min_height..max_height in steps of `step` on a coarse lattice of spacing
    downsampled_scale, then a cubic spline through them at every vertex, rounded to the vertical scale."""
    nx, ny = H.shape
    downsampled_scale = hs if downsampled_scale is None else downsampled_scale
    w, l = nx * hs, ny * hs
    lo, hi, st = int(min_height / vs), int(max_height / vs), int(step / vs)
    choices = np.arange(lo, hi + st, st) if st > 0 else np.array([lo])
    coarse = np.random.choice(choices, (int(w / downsampled_scale), int(l / downsampled_scale)))
    x = np.linspace(0, w, coarse.shape[0])
    y = np.linspace(0, l, coarse.shape[1])
    fine = cubic_spline(x, cubic_spline(y, coarse.T, np.linspace(0, l, ny)).T, np.linspace(0, w, nx))
    return H + np.rint(fine)


def sloped_terrain(H, hs, vs, slope=-0.5):
    """A plane rising `slope` metres per metre along x."""
    nx = H.shape[0]
    top = int(slope * (hs / vs) * nx)
    return H + top * np.arange(nx)[:, None] / nx


def pyramid_sloped_terrain(H, hs, vs, slope=-0.1, platform_size=1.0):
    """Four faces rising `slope` metres per metre toward the centre, cut flat at the central platform's height."""
    nx, ny = H.shape
    cx, cy = nx // 2, ny // 2
    xx = ((cx - np.abs(cx - np.arange(nx))) / cx)[:, None]
    yy = ((cy - np.abs(cy - np.arange(ny))) / cy)[None, :]
    top = int(slope * (hs / vs) * (nx / 2))
    H = H + top * xx * yy
    p = int(platform_size / hs / 2)
    edge = H[nx // 2 - p, ny // 2 - p]
    return np.clip(H, min(edge, 0), max(edge, 0))


def discrete_obstacles_terrain(H, hs, vs, max_height=0.05, min_size=1.0, max_size=5.0, num_rects=20,
                               platform_size=1.0):
    """num_rects rectangles of random size (min_size..max_size) at heights +-max_height, +-max_height / 2, on a
    4-cell lattice; the central platform flat at 0."""
    H = H.copy()
    top = int(max_height / vs)
    lo, hi, plat = int(min_size / hs), int(max_size / hs), int(platform_size / hs)
    nx, ny = H.shape
    widths = np.arange(min(lo, nx - 1), min(hi, nx - 1) + 1, 4)
    lengths = np.arange(min(lo, ny - 1), min(hi, ny - 1) + 1, 4)
    heights = [-top, -top // 2, top // 2, top]
    for _ in range(int(num_rects)):
        w = np.random.choice(widths)
        l = np.random.choice(lengths)
        z = np.random.choice(heights)
        x0 = np.random.choice(range(0, nx - w, 4))
        y0 = np.random.choice(range(0, ny - l, 4))
        H[x0:x0 + w, y0:y0 + l] = z
    H[(nx - plat) // 2:(nx + plat) // 2, (ny - plat) // 2:(ny + plat) // 2] = 0
    return H


def wave_terrain(H, hs, vs, num_waves=2.0, amplitude=0.1):
    """amplitude / 2 (cos along y + sin along x), num_waves periods across the subterrain's length."""
    nx, ny = H.shape
    a = 0.5 * amplitude / vs
    if num_waves <= 0:
        return H
    div = ny / (num_waves * np.pi * 2)
    return H + a * np.cos(np.arange(ny)[None, :] / div) + a * np.sin(np.arange(nx)[:, None] / div)


def stairs_terrain(H, hs, vs, step_width=0.75, step_height=-0.1):
    """Steps step_width wide along x, each step_height higher than the last (the first at step_height)."""
    H = H.copy()
    w, dz = int(step_width / hs), int(step_height / vs)
    for i in range(H.shape[0] // w):
        H[i * w:(i + 1) * w, :] += dz * (i + 1)
    return H


def pyramid_stairs_terrain(H, hs, vs, step_width=0.75, step_height=-0.1, platform_size=1.0):
    """Concentric square steps toward the centre, each step_height higher, until the platform is reached."""
    H = H.copy()
    w, dz, plat = int(step_width / hs), int(step_height / vs), int(platform_size / hs)
    x0, x1, y0, y1, z = 0, H.shape[0], 0, H.shape[1], 0
    while (x1 - x0) > plat and (y1 - y0) > plat:
        x0, x1, y0, y1, z = x0 + w, x1 - w, y0 + w, y1 - w, z + dz
        H[x0:x1, y0:y1] = z
    return H


def stepping_stones_terrain(H, hs, vs, stone_size=1.0, stone_distance=0.25, max_height=0.2, platform_size=0.0,
                            depth=-10.0):
    """Square stones of random height (+-max_height) separated by holes stone_distance wide and `depth` deep."""
    H = H.copy()
    size, gap = int(stone_size / hs), int(stone_distance / hs)
    top, plat = int(max_height / vs), int(platform_size / hs)
    heights = np.arange(-top - 1, top, step=1)
    nx, ny = H.shape
    H[:, :] = int(depth / vs)
    if ny >= nx:
        y0 = 0
        while y0 < ny:
            y1 = min(ny, y0 + size)
            x0 = np.random.randint(0, size)
            H[0:max(0, x0 - gap), y0:y1] = np.random.choice(heights)
            while x0 < nx:
                H[x0:min(nx, x0 + size), y0:y1] = np.random.choice(heights)
                x0 += size + gap
            y0 += size + gap
    else:
        x0 = 0
        while x0 < nx:
            x1 = min(nx, x0 + size)
            y0 = np.random.randint(0, size)
            H[x0:x1, 0:max(0, y0 - gap)] = np.random.choice(heights)
            while y0 < ny:
                H[x0:x1, y0:min(ny, y0 + size)] = np.random.choice(heights)
                y0 += size + gap
            x0 += size + gap
    H[(nx - plat) // 2:(nx + plat) // 2, (ny - plat) // 2:(ny + plat) // 2] = 0
    return H


GENERATORS = {"fractal_terrain": fractal_terrain, "random_uniform_terrain": random_uniform_terrain,
              "sloped_terrain": sloped_terrain, "pyramid_sloped_terrain": pyramid_sloped_terrain,
              "discrete_obstacles_terrain": discrete_obstacles_terrain, "wave_terrain": wave_terrain,
              "stairs_terrain": stairs_terrain, "pyramid_stairs_terrain": pyramid_stairs_terrain,
              "stepping_stones_terrain": stepping_stones_terrain}


def subterrain_grid(n_subterrains, subterrain_size, horizontal_scale, vertical_scale, subterrain_types, params,
                    randomize=False) -> np.ndarray:
    """The raw height field of a grid of subterrains: each (subterrain_size / horizontal_scale + 1) vertices a
    side, neighbours sharing their edge row (the higher of the two heights there), as Genesis World lays them.
    With randomize False each subterrain draws from seed 0 and NumPy's global generator is left as it was."""
    hs, vs = float(horizontal_scale), float(vertical_scale)
    rows = int(subterrain_size[0] / hs + 1e-7) + 1
    cols = int(subterrain_size[1] / hs + 1e-7) + 1
    H = np.full((n_subterrains[0] * (rows - 1) + 1, n_subterrains[1] * (cols - 1) + 1), -np.inf)
    for i in range(n_subterrains[0]):
        for j in range(n_subterrains[1]):
            kind = subterrain_types[i][j]
            saved = None
            if not randomize:
                saved = np.random.get_state()
                np.random.seed(0)
            try:
                sub = np.zeros((rows, cols))
                if kind != "flat_terrain":
                    sub = GENERATORS[kind](sub, hs, vs, **params.get(kind, {}))
            finally:
                if saved is not None:
                    np.random.set_state(saved)
            block = H[i * (rows - 1):(i + 1) * (rows - 1) + 1, j * (cols - 1):(j + 1) * (cols - 1) + 1]
            block[:] = np.maximum(block, sub)
    return H


# -- the surface ----------------------------------------------------------------------------------------------------

def triangles(heights, horizontal_scale, scale_y=None) -> tuple[np.ndarray, np.ndarray]:
    """(vertices [nx * ny, 3], faces [2 (nx - 1)(ny - 1), 3]) of the surface, heights in metres, counter-clockwise
    seen from above (the normals point up), split along each cell's (i, j)-(i + 1, j + 1) diagonal; cells
    horizontal_scale along x and scale_y (default: the same) along y."""
    z = np.asarray(heights, dtype=np.float64)
    nx, ny = z.shape
    ii, jj = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    hy = horizontal_scale if scale_y is None else scale_y
    verts = np.stack([ii * horizontal_scale, jj * hy, z], axis=-1).reshape(-1, 3)
    a = (ii[:-1, :-1] * ny + jj[:-1, :-1]).ravel()
    b, c, d = a + ny, a + 1, a + ny + 1  # (i + 1, j), (i, j + 1), (i + 1, j + 1)
    faces = np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)]).astype(np.int64)
    return verts, faces


def height_at(heights, horizontal_scale, x, y):
    """The surface's height (metres) at terrain-frame points (x, y) (arrays of one shape), on the triangles above;
    NaN off the grid."""
    z = np.asarray(heights, dtype=np.float64)
    nx, ny = z.shape
    u = np.asarray(x, dtype=np.float64) / horizontal_scale
    w = np.asarray(y, dtype=np.float64) / horizontal_scale
    i = np.clip(np.floor(u).astype(np.int64), 0, nx - 2)
    j = np.clip(np.floor(w).astype(np.int64), 0, ny - 2)
    fx, fy = u - i, w - j
    ha, hb, hc, hd = z[i, j], z[i + 1, j], z[i, j + 1], z[i + 1, j + 1]
    h = np.where(fx >= fy, ha + fx * (hb - ha) + fy * (hd - hb), ha + fy * (hc - ha) + fx * (hd - hc))
    off = (u < 0) | (w < 0) | (u > nx - 1) | (w > ny - 1)
    return np.where(off, np.nan, h)


def digest(array) -> str:
    """A short content hash of a height field (the scene signature names it so, not by its values)."""
    a = np.ascontiguousarray(np.asarray(array, dtype=np.float64))
    return f"{a.shape[0]}x{a.shape[1]}:" + hashlib.sha256(a.tobytes()).hexdigest()[:16]


def is_multiple(x, step) -> bool:
    """Whether x is a whole number of steps (to a relative 1e-6)."""
    n = x / step
    return abs(n - round(n)) <= 1e-6 * max(1.0, abs(n)) and round(n) >= 1 and math.isfinite(n)
