"""Debug drawing (Genesis World's `scene.draw_debug_*`): markers that are not part of the simulation. Each call
checks its arguments and returns a `DebugObject`; with a viewer open (show_viewer=True) the marker is drawn in the
browser (spheres, boxes, points, lines, arrows and frames as viser primitives, in world coordinates), and
`scene.clear_debug_object(obj)` / `clear_debug_objects()` remove it. Headless, the markers are kept in
`scene.debug_objects` and drawn nowhere (the cameras' images do not show them, as in Genesis World's sensors)."""

from __future__ import annotations

import itertools

import attrs
import numpy as np
import torch

from ..errors import OptionError

_ids = itertools.count()


@attrs.define(eq=False)
class DebugObject:
    """A debug marker: its kind ("sphere", "spheres", "box", "points", "line", "arrow", "frame", "frames", "mesh")
    and its checked parameters (NumPy arrays, world frame)."""

    kind: str
    params: dict
    name: str = attrs.field(factory=lambda: f"/debug/{next(_ids)}")
    handles: list = attrs.field(factory=list)  # the viewer's scene nodes


def _array(x, what, shape_tail, n_dims=None):
    """x as a finite float64 array whose trailing shape is shape_tail (leading dims: any, or n_dims total)."""
    if torch.is_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise OptionError(f"{what}={x!r} is not an array of numbers.") from None
    tail = tuple(shape_tail)
    if a.shape[a.ndim - len(tail):] != tail or (n_dims is not None and a.ndim != n_dims) or not np.isfinite(a).all():
        raise OptionError(f"{what}: shape {a.shape} or non-finite entries; expected finite numbers of shape "
                          f"(..., {', '.join(map(str, tail))}).")
    return a


def _positive(x, what):
    if not isinstance(x, (int, float, np.integer, np.floating)) or isinstance(x, bool) or not 0 < float(x) < np.inf:
        raise OptionError(f"{what}={x!r} must be a positive number.")
    return float(x)


def _color(c, what="color"):
    a = _array(c, what, (), None).reshape(-1)
    if a.size not in (3, 4) or not ((a >= 0) & (a <= 1)).all():
        raise OptionError(f"{what}={c!r} must be 3 or 4 numbers (RGB[A]) in [0, 1].")
    return np.concatenate([a, [1.0]]) if a.size == 3 else a


def make(kind, **params) -> DebugObject:
    """Check the parameters of a debug marker of `kind` (Genesis World's names and defaults)."""
    p = {}
    if kind in ("sphere", "spheres"):
        p["pos"] = _array(params["pos"], "pos", (3,)).reshape(-1, 3)
        p["radius"] = _positive(params["radius"], "radius")
        p["color"] = _color(params["color"])
    elif kind == "points":
        p["pos"] = _array(params["pos"], "poss", (3,)).reshape(-1, 3)
        colors = _array(params["color"], "colors", ()).reshape(-1)
        p["color"] = _color(colors) if colors.size in (3, 4) else _array(params["color"], "colors", (4,))
    elif kind == "box":
        p["bounds"] = _array(params["bounds"], "bounds", (2, 3), 2)
        if (p["bounds"][1] < p["bounds"][0]).any():
            raise OptionError(f"bounds={params['bounds']!r}: the upper corner lies below the lower one.")
        p["color"] = _color(params["color"])
        p["wireframe"] = bool(params.get("wireframe", True))
    elif kind in ("line", "arrow"):
        p["start"] = _array(params["start"], "start" if kind == "line" else "pos", (3,), 1)
        p["end"] = (_array(params["end"], "end", (3,), 1) if kind == "line"
                    else p["start"] + _array(params["vec"], "vec", (3,), 1))
        p["radius"] = _positive(params["radius"], "radius")
        p["color"] = _color(params["color"])
    elif kind in ("frame", "frames"):
        p["T"] = _array(params["T"], "T", (4, 4)).reshape(-1, 4, 4)
        p["axis_length"] = _positive(params["axis_length"], "axis_length")
        p["axis_radius"] = _positive(params["axis_radius"], "axis_radius")
        p["origin_size"] = _positive(params["origin_size"], "origin_size")
    elif kind == "mesh":
        p["mesh"] = params["mesh"]
        p["T"] = None if params.get("T") is None else _array(params["T"], "T", (4, 4), 2)
        p["pos"] = _array(params.get("pos", np.zeros(3)), "pos", (3,), 1)
    else:  # (internal)
        raise ValueError(kind)
    return DebugObject(kind, p)


def _rgb255(c):
    return tuple(int(round(255 * float(x))) for x in c[:3])


def _wxyz(R):
    from ..rotations import mat_to_quat

    return np.asarray(mat_to_quat(torch.as_tensor(R, dtype=torch.float64)), dtype=np.float64).reshape(4)


def show(server, obj: DebugObject):
    """Draw `obj` in a viser server (the viewer's)."""
    sv, p, name = server.scene, obj.params, obj.name
    h = obj.handles
    if obj.kind in ("sphere", "spheres"):
        for k, pos in enumerate(p["pos"]):
            h.append(sv.add_icosphere(f"{name}/{k}", radius=p["radius"], color=_rgb255(p["color"]),
                                      opacity=float(p["color"][3]), position=tuple(pos)))
    elif obj.kind == "points":
        colors = np.broadcast_to(p["color"][..., :3], p["pos"].shape)
        h.append(sv.add_point_cloud(name, points=p["pos"].astype(np.float32),
                                    colors=(colors * 255).astype(np.uint8), point_size=0.01))
    elif obj.kind == "box":
        lo, hi = p["bounds"]
        h.append(sv.add_box(name, dimensions=tuple(hi - lo), color=_rgb255(p["color"]), wireframe=p["wireframe"],
                            opacity=float(p["color"][3]), position=tuple((lo + hi) / 2)))
    elif obj.kind in ("line", "arrow"):
        h.append(sv.add_spline_catmull_rom(name, positions=np.stack([p["start"], p["end"]]),
                                           color=_rgb255(p["color"]), line_width=max(1.0, 1000 * p["radius"])))
        if obj.kind == "arrow":
            h.append(sv.add_icosphere(f"{name}_tip", radius=2 * p["radius"], color=_rgb255(p["color"]),
                                      position=tuple(p["end"])))
    elif obj.kind in ("frame", "frames"):
        for k, T in enumerate(p["T"]):
            h.append(sv.add_frame(f"{name}/{k}", wxyz=tuple(_wxyz(T[:3, :3])), position=tuple(T[:3, 3]),
                                  axes_length=p["axis_length"], axes_radius=p["axis_radius"],
                                  origin_radius=p["origin_size"]))
    elif obj.kind == "mesh":
        m = p["mesh"]
        verts = np.asarray(getattr(m, "vertices"), dtype=np.float64)
        if p["T"] is not None:
            verts = verts @ p["T"][:3, :3].T + p["T"][:3, 3]
        verts = verts + p["pos"]
        h.append(sv.add_mesh_simple(name, vertices=verts.astype(np.float32),
                                    faces=np.asarray(m.faces, dtype=np.int32)))


def place(obj: DebugObject, T):
    """Genesis World's `update_debug_objects` for one marker: a frame is put at the pose T (4 x 4, world); any other
    marker (frames drawn together included) is moved rigidly by T from where it is (its points, centres, ends and
    frames transformed; an axis-aligned box keeps its axes and moves its centre). Checked (a finite 4 x 4 matrix whose
    upper 3 x 3 is a rotation) before anything changes."""
    T = _array(T, "update_debug_objects(poses)", (4, 4), n_dims=2)
    R = T[:3, :3]
    if not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) <= 0:
        raise OptionError("update_debug_objects(poses): each pose's upper 3 x 3 block must be a rotation.")
    p = obj.params
    if obj.kind == "frame":
        p["T"] = T.reshape(1, 4, 4).copy()
        return
    if obj.kind == "frames":
        p["T"] = T @ p["T"]
        return
    move = (lambda x: x @ R.T + T[:3, 3])  # noqa: E731
    for key in ("pos", "start", "end"):
        if key in p and p[key] is not None:
            p[key] = move(np.asarray(p[key], dtype=np.float64))
    if obj.kind == "box":
        lo, hi = p["bounds"]
        c, half = move((lo + hi) / 2), (hi - lo) / 2
        p["bounds"] = np.stack([c - half, c + half])
    if obj.kind == "mesh":  # (its pos was moved above: fold it into the transform)
        prev = p["T"].copy() if p["T"] is not None else np.eye(4)
        prev[:3, 3] += np.linalg.solve(R, p["pos"] - T[:3, 3])
        p["T"] = T @ prev
        p["pos"] = np.zeros(3)


class DebugContext:
    """`scene.visualizer.context` (Genesis World's rasterizer context), the part its scripts use on debug markers:
    `update_debug_objects(objs, poses)` moves each marker (`place`) and redraws it in the open viewer."""

    def __init__(self, scene):
        self._scene = scene

    def update_debug_objects(self, objs, poses):
        objs, poses = list(objs), list(poses)
        if len(objs) != len(poses):
            raise OptionError(f"update_debug_objects: {len(objs)} objects for {len(poses)} poses.")
        for obj in objs:
            if obj not in self._scene.debug_objects:
                raise OptionError(f"update_debug_objects: {obj!r} is not a debug object of this scene.")
        for obj, T in zip(objs, poses):
            place(obj, T)
            viewer = self._scene.viewer
            if obj.handles and viewer is not None and getattr(viewer, "server", None) is not None:
                hide(obj)
                show(viewer.server, obj)


class Visualizer:
    """`scene.visualizer`: its `context` (DebugContext) and `viewer` (the scene's viewer, or None)."""

    def __init__(self, scene):
        self.context = DebugContext(scene)
        self._scene = scene

    @property
    def viewer(self):
        return self._scene.viewer

    def update(self, force: bool = True, auto=None):
        """Genesis World's: send the scene's current state to the viewer, as a step does (scripts that set a pose
        without stepping, an IK demo's `set_qpos`, call it to show it). Without a viewer it does nothing; cameras
        render from the current state whenever asked. (`auto`, Genesis World's: accepted.)"""
        viewer = self.viewer
        if viewer is not None:
            viewer.update(force=bool(force))


def hide(obj: DebugObject):
    for handle in obj.handles:
        try:
            handle.remove()
        except Exception:  # noqa: BLE001 - a server already stopped
            pass
    obj.handles.clear()
