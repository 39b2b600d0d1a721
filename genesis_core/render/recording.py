"""Recording an example to a GIF (or MP4): the command-line options, a camera framing a box, and a frame every k
steps, shared by the scripts in examples/.

    parser = argparse.ArgumentParser()
    recording.add_arguments(parser)                  # --gif PATH, --gif-res WxH, --gif-every K, --gif-fps F,
                                                     # --gif-aa N
    args = parser.parse_args()
    main(..., gif=recording.from_args(args))         # a Gif, or None without --gif

    # in main(), after scene.build():
    rec = recording.start(scene, gif, box=((x0, y0, z0), (x1, y1, z1)), steps=n_steps)
    for _ in range(n_steps):
        scene.step()
        rec.step()
    rec.stop()                                       # writes the file; returns the paths written

Without a Gif (`gif=None`) `start` returns a recorder that does nothing, so a script runs as before.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass

import numpy as np

from ..errors import OptionError, SceneError

DEFAULT_RES = (320, 240)
DEFAULT_FRAMES = 60  # when --gif-every is not given: the initial state and at most this many more frames
DEFAULT_FPS = 20.0
DEFAULT_SUPERSAMPLE = 2
# the backdrop's colours (RGB 0-255): the sky at the horizon and overhead, the floor's two squares
HORIZON, SKY = np.array([236.0, 240.0, 246.0]), np.array([150.0, 180.0, 220.0])
FLOOR = (np.array([205.0, 205.0, 205.0]), np.array([170.0, 170.0, 175.0]))


@dataclass
class Gif:
    """What to record: the file (.gif or .mp4), the image size (width, height), a frame every `every` steps
    (None: at most DEFAULT_FRAMES over the run, after the first), the playback rate, and the antialiasing: each
    frame rendered at `supersample` times the width and height and averaged down."""

    path: str
    res: tuple = DEFAULT_RES
    every: int | None = None
    fps: float = DEFAULT_FPS
    supersample: int = DEFAULT_SUPERSAMPLE

    def __post_init__(self):
        if os.path.splitext(str(self.path))[1].lower() not in (".gif", ".mp4"):
            raise OptionError(f"recording: {self.path!r} must end in .gif or .mp4.")
        res = tuple(self.res)
        if len(res) != 2 or not all(isinstance(r, (int, np.integer)) and r > 0 for r in res):
            raise OptionError(f"recording: res={self.res!r} must be (width, height), two positive ints.")
        self.res = (int(res[0]), int(res[1]))
        if self.every is not None and (not isinstance(self.every, (int, np.integer)) or self.every < 1):
            raise OptionError(f"recording: every={self.every!r} must be a positive int (a frame every k steps).")
        if not isinstance(self.fps, (int, float)) or not 0 < self.fps <= 1000:
            raise OptionError(f"recording: fps={self.fps!r} must be a number in (0, 1000].")
        if not isinstance(self.supersample, (int, np.integer)) or not 1 <= self.supersample <= 8:
            raise OptionError(f"recording: supersample={self.supersample!r} must be an int in [1, 8].")


def _res(text):
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT (e.g. 320x240)") from None
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be positive")
    return w, h


def _positive_int(text):
    k = int(text)
    if k < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1")
    return k


def add_arguments(parser):
    """The recording options of an example's command line: --gif, --gif-res, --gif-every, --gif-fps."""
    g = parser.add_argument_group("recording")
    g.add_argument("--gif", metavar="PATH", default=None,
                   help="record the run through a camera to this .gif (or .mp4)")
    g.add_argument("--gif-res", metavar="WxH", type=_res, default=DEFAULT_RES,
                   help=f"the recording's size (default {DEFAULT_RES[0]}x{DEFAULT_RES[1]})")
    g.add_argument("--gif-every", metavar="K", type=_positive_int, default=None,
                   help=f"a frame every K steps (default: at most {DEFAULT_FRAMES} frames over the run)")
    g.add_argument("--gif-fps", metavar="F", type=float, default=DEFAULT_FPS,
                   help=f"playback frames per second (default {DEFAULT_FPS:g})")
    g.add_argument("--gif-aa", metavar="N", type=_positive_int, default=DEFAULT_SUPERSAMPLE,
                   help=f"antialiasing: render at N times the size and average (default {DEFAULT_SUPERSAMPLE})")
    return parser


def from_args(args):
    """The Gif that the options of add_arguments ask for, or None without --gif."""
    if args.gif is None:
        return None
    return Gif(args.gif, res=args.gif_res, every=args.gif_every, fps=args.gif_fps, supersample=args.gif_aa)


def frame_box(lo, hi, res=DEFAULT_RES, azimuth=-60.0, elevation=25.0, fov=40.0, margin=1.08):
    """A camera pose (pos, lookat, up, fov: add_camera's keywords) that shows the axis-aligned box lo..hi whole,
    looking at its centre from `azimuth` degrees about +z (0: from +x, 90: from +y) and `elevation` degrees above
    the horizontal, at the least distance where every corner lies inside the vertical field of view `fov` and the
    horizontal one of the image's aspect, times `margin`."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    centre = (lo + hi) / 2
    a, e = math.radians(azimuth), math.radians(elevation)
    back = np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])  # centre -> camera
    right = np.cross((0.0, 0.0, 1.0), back)
    right = right / np.linalg.norm(right) if np.linalg.norm(right) > 1e-9 else np.array([1.0, 0.0, 0.0])
    up = np.cross(back, right)
    tan_v = math.tan(math.radians(fov) / 2)
    tan_h = tan_v * res[0] / res[1]
    dist = 0.0
    for corner in np.array(np.meshgrid(*zip(lo, hi))).reshape(3, -1).T:
        r = corner - centre
        x, y, z = r @ right, r @ up, r @ back
        dist = max(dist, z + abs(x) / tan_h, z + abs(y) / tan_v)
    dist = max(dist * margin, 1e-3)
    return {"pos": tuple(centre + dist * back), "lookat": tuple(centre), "up": (0.0, 0.0, 1.0), "fov": fov}


class Recorder:
    """A camera that renders environment 0 (or the unbatched scene) at the start and after every `every`-th step
    (1 + n_steps // every frames) and writes the frames at stop(). A Plane entity is painted as a checkered floor
    (Genesis World's default look for a plane), keeping its light and shadows. Where the camera's ray hits nothing
    (depth inf), a backdrop is painted: a checkered floor at height `floor` (when given; it is not part of the
    scene and receives no shadow) and a sky gradient above it. One made by start(scene, None) does nothing."""

    def __init__(self, scene=None, gif=None, camera=None, every=1, floor=None, tile=None):
        self.scene, self.gif, self.every, self.n_steps = scene, gif, every, 0
        self.floor, self.tile = floor, tile
        self.images, self.cam, self._backdrop, self._planes = [], None, None, {}
        if gif is not None:
            if not scene.is_built:
                raise SceneError("recording.start: build the scene first (the first frame is its initial state).")
            k = gif.supersample
            self.cam = scene.add_camera(res=(gif.res[0] * k, gif.res[1] * k), GUI=False,
                                        env_idx=0 if scene.n_envs else None, **camera)
            self._frame()

    def __bool__(self):
        return self.cam is not None

    @property
    def frames(self):
        return len(self.images)

    def _setup(self):
        """The per-pixel ray directions (through the pixels' centres, as the render kernel casts them), the sky and
        the floor behind everything, and the Plane entities with their colours."""
        import torch

        from .camera import _frame

        W, H = self.cam.res
        pos, lookat, up = (x.detach().cpu().to(torch.float64).reshape(1, 3)
                           for x in (self.cam.pos, self.cam.lookat, self.cam.up))
        right, cam_up, back = (x[0].numpy() for x in _frame(pos, lookat, up, "recording"))
        pos = pos[0].numpy()
        tan_y = math.tan(math.radians(self.cam.fov) / 2)
        x = (2 * (np.arange(W) + 0.5) / W - 1) * tan_y * W / H
        y = (1 - 2 * (np.arange(H) + 0.5) / H) * tan_y
        d = -back + x[None, :, None] * right + y[:, None, None] * cam_up  # [H, W, 3], unit depth along the view
        self._pos, self._rays = pos, d  # a point at depth z lies at pos + z d
        u = d / np.linalg.norm(d, axis=-1, keepdims=True)
        elev = np.clip(u[..., 2], 0.0, 1.0)[..., None]
        img = (1 - elev) * HORIZON + elev * SKY
        if self.floor is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (self.floor - pos[2]) / d[..., 2]
            hit = (d[..., 2] < -1e-9) & (t > 0) & np.isfinite(t)
            t = np.where(hit, t, 0.0)
            img = np.where(hit[..., None], self._checker(pos + t[..., None] * d, np.ones(t.shape), t), img)
        self._backdrop = np.clip(img + 0.5, 0, 255).astype(np.uint8)
        from ..morphs import Plane
        from .view import entity_color

        # the segmentation indices of the Plane entities' pixels (every key of the entity: its link at "link")
        planes = {e.idx: np.asarray(entity_color(self.scene, e.idx), dtype=float) for e in self.scene.entities
                  if isinstance(getattr(e, "morph", None), Plane)}
        self._planes = {}
        if planes:
            for i, key in self.scene.segmentation_idx_dict.items():
                entity = key if isinstance(key, int) else key[0]
                if entity in planes:
                    self._planes[i] = planes[entity]

    def _checker(self, p, shade, depth):
        """Floor colours [..., 3] at world points p [..., 3] (squares of `tile` in x and y), times shade [...],
        fading into the horizon's colour with depth."""
        tile = self.tile or 0.1
        odd = ((np.floor(p[..., 0] / tile) + np.floor(p[..., 1] / tile)) % 2)[..., None] > 0
        colour = np.where(odd, FLOOR[0], FLOOR[1]) * shade[..., None]
        fade = np.clip(depth / (40 * tile), 0.0, 1.0)[..., None] ** 2
        return (1 - fade) * colour + fade * HORIZON

    def _frame(self):
        """Render one frame: the background (depth inf) replaced by the backdrop, a Plane entity's pixels by the
        floor's checkers under the same light (the shade read off the plane's colour, so its shadows stay)."""
        if self._backdrop is None:
            self._setup()
        rgb, depth, seg, _ = self.cam.render(rgb=True, depth=True, segmentation=bool(self._planes))
        rgb, depth = rgb.cpu().numpy(), depth.cpu().numpy()
        img = np.where(np.isinf(depth)[..., None], self._backdrop, rgb)
        if self._planes:
            seg = seg.cpu().numpy()
            for code, colour in self._planes.items():
                mask = (seg == code) & np.isfinite(depth)
                if not mask.any():
                    continue
                c = int(np.argmax(colour))
                shade = rgb[..., c][mask] / (255.0 * max(colour[c], 1e-3))
                z = depth[mask]
                p = self._pos + z[:, None] * self._rays[mask]
                img[mask] = np.clip(self._checker(p, shade, z) + 0.5, 0, 255).astype(np.uint8)
        k = self.gif.supersample
        if k > 1:
            (W, H), c = self.gif.res, img.shape[-1]
            img = (img.reshape(H, k, W, k, c).mean(axis=(1, 3)) + 0.5).astype(np.uint8)
        self.images.append(img)

    def step(self):
        """Call after each scene.step(): renders a frame every `every` steps."""
        if self.cam is None:
            return
        self.n_steps += 1
        if self.n_steps % self.every == 0:
            self._frame()

    def stop(self):
        """Write the recording (GIF, or MP4 through imageio-ffmpeg, by the file's extension); the paths written ([]
        for a recorder that does nothing)."""
        if self.cam is None:
            return []
        from .camera import write_video

        path = str(self.gif.path)
        write_video(path, np.stack(self.images), self.gif.fps)
        self.cam = None
        return [path]


def start(scene, gif, box=None, azimuth=-60.0, elevation=25.0, fov=40.0, steps=None, camera=None, floor=None,
          tile=None):
    """A Recorder of the built `scene` for `gif` (a Gif, a path, or None: a recorder that does nothing). The camera
    is frame_box(*box, ...) or the add_camera keywords `camera` (pos, lookat, up, fov); steps: how many steps the
    run will take, to space at most DEFAULT_FRAMES frames (after the first) over it when gif.every is None;
    floor: the height of a checkered floor painted where the rays hit nothing (tile: its squares' side, m; default
    a tenth of the box's largest side, or 0.1 m). On a batched scene environment 0 is recorded."""
    if gif is None:
        return Recorder()
    if not isinstance(gif, Gif):
        gif = Gif(str(gif))
    if camera is None:
        if box is None:
            raise OptionError("recording.start: give box=(lo, hi) to frame, or camera=dict(pos=, lookat=).")
        camera = frame_box(*box, res=gif.res, azimuth=azimuth, elevation=elevation, fov=fov)
    if tile is None and box is not None:
        tile = float(np.max(np.asarray(box[1], dtype=float) - np.asarray(box[0], dtype=float))) / 10
    every = gif.every or max(1, math.ceil((steps or DEFAULT_FRAMES) / DEFAULT_FRAMES))
    return Recorder(scene, gif, camera, every, floor=floor, tile=tile)


__all__ = ["Gif", "Recorder", "add_arguments", "frame_box", "from_args", "start"]
