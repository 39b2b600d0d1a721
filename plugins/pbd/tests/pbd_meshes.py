"""OBJ files for the PBD tests: ropes, flat and folded cloths."""

import numpy as np


def write_obj(path, verts, faces=(), lines=()):
    with open(path, "w") as fh:
        for v in verts:
            fh.write("v {:.12g} {:.12g} {:.12g}\n".format(*v))
        for f in faces:
            fh.write("f {} {} {}\n".format(*(int(i) + 1 for i in f)))
        for a, b in lines:
            fh.write(f"l {int(a) + 1} {int(b) + 1}\n")
    return str(path)


def rope(path, n, length):
    """n particles hanging down from the origin, n - 1 equal segments."""
    z = -np.linspace(0.0, length, n)
    verts = np.stack([0 * z, 0 * z, z], 1)
    return write_obj(path, verts, lines=[(i, i + 1) for i in range(n - 1)])


def grid_faces(nu, nv):
    faces = []
    for j in range(nv - 1):
        for i in range(nu - 1):
            a = j * nu + i
            faces += [(a, a + 1, a + nu), (a + 1, a + nu + 1, a + nu)]
    return faces


def sheet(path, points):
    """A cloth over a grid of points (nv, nu, 3)."""
    nv, nu = points.shape[:2]
    return write_obj(path, points.reshape(-1, 3), faces=grid_faces(nu, nv))


def flat(path, n, size):
    xs = np.linspace(-size / 2, size / 2, n)
    X, Y = np.meshgrid(xs, xs)
    return sheet(path, np.stack([X, Y, 0 * X], -1))


def folded(path, n, size, angle_deg):
    """A square cloth folded along x = 0: the half x > 0 rises at angle_deg from the plane."""
    xs = np.linspace(-size / 2, size / 2, n)
    X, Y = np.meshgrid(xs, xs)
    a = np.radians(angle_deg)
    Z = np.where(X > 0, X * np.sin(a), 0.0)
    X = np.where(X > 0, X * np.cos(a), X)
    return sheet(path, np.stack([X, Y, Z], -1))


def hairpin(path, n_along, n_across, spacing, gap):
    """A strip folded back over itself: a bottom layer along +x at z = 0, a vertical part of height `gap`, and a
    top layer back along -x at z = gap. Returns (path, the layer of every vertex: 0 bottom, 1 fold, 2 top)."""
    length = (n_along - 1) * spacing
    n_up = max(int(round(gap / spacing)), 1)
    s_pts, layer = [], []
    for i in range(n_along):
        s_pts.append((i * spacing, 0.0)); layer.append(0)
    for k in range(1, n_up):
        s_pts.append((length, k * gap / n_up)); layer.append(1)
    for i in range(n_along):
        s_pts.append((length - i * spacing, gap)); layer.append(2)
    ys = np.arange(n_across) * spacing
    pts = np.array([[[x, y, z] for (x, z) in s_pts] for y in ys])
    return sheet(path, pts), np.tile(np.array(layer), n_across)
