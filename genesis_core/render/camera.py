"""`scene.add_camera(...)`: Genesis World's camera, drawn by the ray caster for every environment at once."""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from ..errors import OptionError, SceneError
from .view import PALETTE

F32 = torch.float32
# Genesis World's add_camera options that have no effect on this ray caster: accepted so that its scripts run
GENESIS_CAMERA_OPTIONS = frozenset({"model", "aperture", "focus_dist", "spp", "denoise", "near", "far", "env_idx",
                                    "debug"})


def _vec3(value, what, B):
    """value as a float64 [B, 3] tensor: one point for every environment, or one per environment."""
    try:
        x = torch.as_tensor(np.asarray(value.detach().cpu() if torch.is_tensor(value) else value, dtype=np.float64))
    except (TypeError, ValueError):
        raise OptionError(f"{what}={value!r} is not a 3-vector of numbers.") from None
    if x.shape == (3,):
        x = x.expand(B, 3)
    elif x.shape != (B, 3):
        raise OptionError(f"{what} has shape {tuple(x.shape)}: expected (3,) or (n_envs, 3) = ({B}, 3).")
    if not torch.isfinite(x).all():
        raise OptionError(f"{what}={value!r} is not finite.")
    return x.clone()


def _frame(pos, lookat, up, what):
    """The camera axes (right, up, back) [B, 3] each, from pos, lookat and the up hint; raises where the view
    direction is zero or parallel to `up`."""
    fwd = lookat - pos
    norm = fwd.norm(dim=-1)
    if (norm < 1e-9).any():
        raise OptionError(f"{what}: pos and lookat coincide ({pos[norm < 1e-9][0].tolist()}); the camera has no "
                          "view direction.")
    back = -fwd / norm[:, None]
    right = torch.linalg.cross(up, back)
    rn = right.norm(dim=-1)
    if (rn < 1e-9 * up.norm(dim=-1).clamp_min(1e-300)).any() or (up.norm(dim=-1) < 1e-12).any():
        raise OptionError(f"{what}: up={up[0].tolist()} is zero or parallel to the view direction; give another up.")
    right = right / rn[:, None]
    cam_up = torch.linalg.cross(back, right)
    return right, cam_up, back


class Camera:
    """A pinhole camera (Genesis World's `scene.add_camera`). res: (width, height) pixels; fov: the vertical
    field of view, degrees in (0, 180); pos, lookat, up: world, m. `render()` gives images of every environment
    at once as torch tensors `([n_envs,] H, W, C)` on gs.device."""

    def __init__(self, scene, idx, res=(320, 320), pos=(0.5, 2.5, 3.5), lookat=(0.5, 0.5, 0.5), up=(0.0, 0.0, 1.0),
                 fov=30, GUI=False, **ignored):
        unknown = sorted(set(ignored) - GENESIS_CAMERA_OPTIONS)
        if unknown:
            raise OptionError(f"add_camera got unexpected keywords {unknown}; accepted: res, pos, lookat, up, fov, GUI, "
                              f"and Genesis World's {sorted(GENESIS_CAMERA_OPTIONS)} (without effect here).")
        if GUI:
            raise OptionError("add_camera(GUI=True): genesis-core opens no window; use GUI=False and read the "
                              "images from cam.render(), or record them with cam.start_recording().")
        try:
            res = tuple(res)
        except TypeError:
            raise OptionError(f"add_camera: res={res!r} must be (width, height).") from None
        if (len(res) != 2 or not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) for r in res)
                or min(res) <= 0 or max(res) > 16384):
            raise OptionError(f"add_camera: res={res!r} must be (width, height), two ints in [1, 16384].")
        if not isinstance(fov, (int, float, np.integer, np.floating)) or isinstance(fov, bool) \
                or not 0.0 < float(fov) < 180.0:
            raise OptionError(f"add_camera: fov={fov!r} must be a number of degrees in (0, 180).")
        self.scene, self.idx = scene, idx
        self._res = (int(res[0]), int(res[1]))
        self._fov = float(fov)
        self._options = ignored  # Genesis World's other camera options (spp, near, far, ...): accepted
        self._pose = tuple(_vec3(x, f"add_camera: {n}", 1)[0] for x, n in ((pos, "pos"), (lookat, "lookat"),
                                                                             (up, "up")))
        _frame(*(x[None] for x in self._pose), "add_camera")
        self._batched_pose = None  # [B, 3] x 3 once set per environment
        self._follow = None
        self._recording = False
        self._frames = []
        self._renderer = None

    # -- properties (Genesis World's names) ------------------------------------------------------------------------

    @property
    def res(self):
        return self._res

    @property
    def fov(self):
        return self._fov

    @property
    def GUI(self):
        return False

    def _B(self):
        return max(self.scene.n_envs, 1) if self.scene.is_built else 1

    def _poses(self):
        """pos, lookat, up as [B, 3] float64 tensors."""
        B = self._B()
        if self._batched_pose is not None and self._batched_pose[0].shape[0] == B:
            return self._batched_pose
        return tuple(x.expand(B, 3).clone() for x in self._pose)

    @property
    def pos(self):
        return self._out(self._poses()[0])

    @property
    def lookat(self):
        return self._out(self._poses()[1])

    @property
    def up(self):
        return self._out(self._poses()[2])

    def _out(self, x):
        from .._runtime import runtime

        x = x.to(device=runtime.device, dtype=runtime.tc_float)
        return x if self.scene.is_built and self.scene.n_envs else x[0]

    # -- pose ------------------------------------------------------------------------------------------------------

    def set_pose(self, transform=None, pos=None, lookat=None, up=None, envs_idx=None):
        """Move the camera: pos, lookat, up (m, world), each (3,) for every environment or (n_envs, 3) on a batched
        scene; the ones not given keep their values. transform: a 4x4 camera-to-world matrix (OpenGL axes: the
        camera looks along its -z), instead of pos/lookat/up."""
        B = self._B()
        cur = self._poses()
        if transform is not None:
            if pos is not None or lookat is not None or up is not None:
                raise OptionError("set_pose: give transform or pos/lookat/up, not both.")
            T = torch.as_tensor(np.asarray(transform.cpu() if torch.is_tensor(transform) else transform,
                                           dtype=np.float64))
            if T.shape == (4, 4):
                T = T.expand(B, 4, 4)
            if T.shape != (B, 4, 4) or not torch.isfinite(T).all():
                raise OptionError(f"set_pose: transform must be a finite (4, 4) or ({B}, 4, 4) matrix.")
            pos, lookat, up = T[:, :3, 3], T[:, :3, 3] - T[:, :3, 2], T[:, :3, 1]
        new = [cur[0] if pos is None else _vec3(pos, "set_pose: pos", B),
               cur[1] if lookat is None else _vec3(lookat, "set_pose: lookat", B),
               cur[2] if up is None else _vec3(up, "set_pose: up", B)]
        if envs_idx is not None:
            idx = self.scene._sanitize_envs_idx(envs_idx).cpu()
            new = [torch.where(torch.isin(torch.arange(B), idx)[:, None], n, c) for n, c in zip(new, cur)]
        _frame(*new, "set_pose")
        self._batched_pose = tuple(new)
        if B == 1 and not (self.scene.is_built and self.scene.n_envs):
            self._pose = tuple(x[0] for x in new)

    def follow_entity(self, entity, fixed_axis=(None, None, None), smoothing=None, fix_orientation=False):
        """Follow an entity's base position (updated at each render): the camera keeps its offset to the entity
        and, unless fix_orientation, looks at it. fixed_axis: per axis a coordinate the camera keeps (None: free);
        smoothing: in [0, 1), the share of the previous position kept (exponential moving average)."""
        if not hasattr(entity, "get_pos"):
            raise OptionError(f"follow_entity: {entity!r} has no base position (get_pos).")
        if len(tuple(fixed_axis)) != 3:
            raise OptionError(f"follow_entity: fixed_axis={fixed_axis!r} must have 3 entries (a number or None).")
        if smoothing is not None and not (isinstance(smoothing, (int, float)) and 0.0 <= smoothing < 1.0):
            raise OptionError(f"follow_entity: smoothing={smoothing!r} must be None or in [0, 1).")
        self._follow = (entity, tuple(fixed_axis), smoothing, bool(fix_orientation), None)

    def unfollow_entity(self):
        self._follow = None

    def _entity_pos(self, entity):
        p = entity.get_pos()
        p = p.detach().cpu().to(torch.float64) if torch.is_tensor(p) else torch.as_tensor(p, dtype=torch.float64)
        return p.reshape(-1, 3).expand(self._B(), 3)

    def _update_following(self):
        entity, fixed, smoothing, fix_orientation, offset = self._follow
        pos, lookat, up = self._poses()
        target = self._entity_pos(entity)
        if offset is None:  # the offset is taken at the first render after follow_entity
            offset = pos - target
            if (offset.norm(dim=-1) < 1e-9).any():
                raise OptionError("follow_entity: the camera sits at the entity's base position; move it first.")
            self._follow = (entity, fixed, smoothing, fix_orientation, offset)
        new_pos = target + offset
        new_look = target if not fix_orientation else lookat + (new_pos - pos)
        if smoothing is not None:
            new_pos = smoothing * pos + (1.0 - smoothing) * new_pos
            if not fix_orientation:
                new_look = smoothing * lookat + (1.0 - smoothing) * new_look
        for a, value in enumerate(fixed):
            if value is not None:
                new_pos[:, a] = float(value)
        self.set_pose(pos=new_pos, lookat=new_look, up=up)

    # -- rendering -------------------------------------------------------------------------------------------------

    def _cam_f(self, device):
        pos, lookat, up = self._poses()
        right, cam_up, back = _frame(pos, lookat, up, "render")
        tan = torch.full((pos.shape[0], 1), math.tan(math.radians(self._fov) / 2.0), dtype=torch.float64)
        return torch.cat([pos, right, cam_up, back, tan], dim=1).to(device=device, dtype=F32).contiguous()

    def render(self, rgb=True, depth=False, segmentation=False, colorize_seg=False, normal=False, **ignored):
        """Render every environment: (rgb, depth, segmentation, normal), None for those not asked.

        rgb: uint8 ([n_envs,] H, W, 3). depth: float32 ([n_envs,] H, W), m along the camera's view axis (the
        distance to the image plane; inf where no geometry is hit). segmentation: int32 ([n_envs,] H, W), the index
        in scene.entities of what each pixel sees (-1: background); with colorize_seg, uint8 ([n_envs,] H, W, 3)
        colours of those ids instead. normal: float32 ([n_envs,] H, W, 3), the world normal n facing the camera as
        (n + 1) / 2 (0 on the background)."""
        from .renderer import Renderer
        from .._runtime import runtime

        unknown = sorted(set(ignored) - {"antialiasing", "force_render"})
        if unknown:
            raise OptionError(f"cam.render got unexpected keywords {unknown}.")

        scene = self.scene
        scene._require_built("cam.render()")
        if self._follow is not None:
            self._update_following()
        if self._renderer is None:
            self._renderer = Renderer(scene)
        need_rgb = bool(rgb) or self._recording
        img, dep, seg, nrm = self._renderer.render(self._cam_f(runtime.device), self._res, shadows=need_rgb)
        if self._recording:
            self._frames.append(img.cpu().numpy().copy())
        if colorize_seg:
            pal = torch.as_tensor((PALETTE * 255).round().astype(np.uint8), device=seg.device)
            colored = pal[seg.clamp_min(0).long() % len(PALETTE)]
            seg = torch.where((seg >= 0)[..., None], colored, torch.zeros_like(colored))
        out = [img if rgb else None, dep if depth else None, seg if segmentation else None, nrm if normal else None]
        if not scene.n_envs:
            out = [None if x is None else x[0] for x in out]
        return tuple(out)

    # -- recording -------------------------------------------------------------------------------------------------

    def start_recording(self):
        """Keep the RGB image of every later render until stop_recording."""
        self._recording = True

    def pause_recording(self):
        if not self._recording:
            raise SceneError("pause_recording: recording was not started (cam.start_recording()).")
        self._recording = False

    def stop_recording(self, save_to_filename=None, fps=60):
        """Write the recorded frames with imageio: MP4 (ffmpeg from imageio-ffmpeg) or GIF, by the file's
        extension. On a batched scene each environment goes to its own file, `<name>_<env><ext>` (as Genesis
        World does). Returns the paths written."""
        if not self._recording and not self._frames:
            raise SceneError("stop_recording: recording was not started (cam.start_recording()).")
        if not isinstance(fps, (int, float)) or isinstance(fps, bool) or not 0 < fps <= 1000:
            raise OptionError(f"stop_recording: fps={fps!r} must be a number in (0, 1000].")
        if save_to_filename is None:
            save_to_filename = f"camera_{self.idx}.mp4"
        name, ext = os.path.splitext(str(save_to_filename))
        if ext.lower() not in (".mp4", ".gif"):
            raise OptionError(f"stop_recording: {save_to_filename!r} must end in .mp4 or .gif.")
        if not self._frames:
            raise SceneError("stop_recording: no frame was rendered since start_recording().")
        import imageio.v2 as imageio

        frames = np.stack(self._frames)  # [T, B, H, W, 3]
        batched = bool(self.scene.n_envs)
        paths = []
        for b in range(frames.shape[1]):
            path = f"{name}_{b}{ext}" if batched else str(save_to_filename)
            if ext.lower() == ".gif":
                imageio.mimsave(path, list(frames[:, b]), duration=1000.0 / fps, loop=0)
            else:
                imageio.mimsave(path, list(frames[:, b]), fps=fps, macro_block_size=1)
            paths.append(path)
        self._frames = []
        self._recording = False
        return paths


__all__ = ["Camera"]
