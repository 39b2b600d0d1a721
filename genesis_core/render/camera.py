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
# (`transform` and `env_idx` are Genesis World's too, and are used: see Camera)
GENESIS_CAMERA_OPTIONS = frozenset({"model", "aperture", "focus_dist", "spp", "denoise", "near", "far", "debug"})


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


def _matrices(transform, what, B):
    """transform as a finite float64 [B, 4, 4] tensor (one for every environment, or one per environment)."""
    try:
        T = torch.as_tensor(np.asarray(transform.detach().cpu() if torch.is_tensor(transform) else transform,
                                       dtype=np.float64))
    except (TypeError, ValueError):
        raise OptionError(f"{what}: transform is not a 4x4 matrix of numbers.") from None
    if T.shape == (4, 4):
        T = T.expand(B, 4, 4)
    if T.shape != (B, 4, 4) or not torch.isfinite(T).all():
        raise OptionError(f"{what}: transform has shape {tuple(T.shape)} or non-finite entries: expected a finite "
                          f"(4, 4) or ({B}, 4, 4) matrix.")
    return T


def _T_to_pos_lookat_up(T):
    """A camera-to-world matrix (OpenGL axes: the camera looks along its -z, +y up) as pos, lookat, up."""
    return T[:, :3, 3], T[:, :3, 3] - T[:, :3, 2], T[:, :3, 1]


def _frame(pos, lookat, up, what):
    """The camera axes (right, up, back) [B, 3] each, from pos, lookat and the up hint; raises where the view
    direction or `up` is zero. Where `up` is parallel to the view direction (a camera looking straight down with
    up = +z: Genesis World then keeps the world's axes, right = +x, up = +y), the world's +y is the up hint
    instead, +x where that is parallel too."""
    fwd = lookat - pos
    norm = fwd.norm(dim=-1)
    if (norm < 1e-9).any():
        raise OptionError(f"{what}: pos and lookat coincide ({pos[norm < 1e-9][0].tolist()}); the camera has no "
                          "view direction.")
    if (up.norm(dim=-1) < 1e-12).any():
        raise OptionError(f"{what}: up={up[0].tolist()} is zero; give an up direction.")
    back = -fwd / norm[:, None]
    right = torch.linalg.cross(up, back)
    rn = right.norm(dim=-1)
    for hint in ((0.0, 1.0, 0.0), (1.0, 0.0, 0.0)):
        parallel = rn < 1e-9 * up.norm(dim=-1)
        if not parallel.any():
            break
        h = torch.tensor(hint, dtype=back.dtype, device=back.device).expand(back.shape)
        right = torch.where(parallel[:, None], torch.linalg.cross(h, back), right)
        rn = right.norm(dim=-1)
    right = right / rn[:, None]
    cam_up = torch.linalg.cross(back, right)
    return right, cam_up, back


def _check_recording_target(save_to_filename, fps, what):
    if fps is not None and (not isinstance(fps, (int, float)) or isinstance(fps, bool) or not 0 < fps <= 1000):
        raise OptionError(f"{what}: fps={fps!r} must be a number in (0, 1000].")
    if save_to_filename is not None and os.path.splitext(str(save_to_filename))[1].lower() not in (".mp4", ".gif"):
        raise OptionError(f"{what}: {save_to_filename!r} must end in .mp4 or .gif.")


class Camera:
    """A pinhole camera (Genesis World's `scene.add_camera`). res: (width, height) pixels; fov: the vertical
    field of view, degrees in (0, 180); pos, lookat, up: world, m (or transform: a 4x4 camera-to-world matrix,
    OpenGL axes, instead). `render()` gives images of every environment at once as torch tensors
    `([n_envs,] H, W, C)` on gs.device; with env_idx (an int, on a batched scene) the camera shows that one
    environment and its images have no batch dimension, as in Genesis World."""

    def __init__(self, scene, idx, res=(320, 320), pos=(0.5, 2.5, 3.5), lookat=(0.5, 0.5, 0.5), up=(0.0, 0.0, 1.0),
                 fov=30, GUI=False, transform=None, env_idx=None, **ignored):
        unknown = sorted(set(ignored) - GENESIS_CAMERA_OPTIONS)
        if unknown:
            raise OptionError(f"add_camera got unexpected keywords {unknown}; accepted: res, pos, lookat, up, fov, "
                              f"GUI, transform, env_idx, and Genesis World's {sorted(GENESIS_CAMERA_OPTIONS)} "
                              "(without effect here).")
        if not isinstance(GUI, bool):
            raise OptionError(f"add_camera: GUI={GUI!r} must be a bool.")
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
        if env_idx is not None and (not isinstance(env_idx, (int, np.integer)) or isinstance(env_idx, bool)
                                    or env_idx < 0):
            raise OptionError(f"add_camera: env_idx={env_idx!r} must be None or the index of an environment (an int "
                              ">= 0).")
        self.scene, self.idx = scene, idx
        self._env_idx = None if env_idx is None else int(env_idx)
        if transform is not None:
            pos, lookat, up = (x[0] for x in _T_to_pos_lookat_up(_matrices(transform, "add_camera", 1)))
        self._res = (int(res[0]), int(res[1]))
        self._fov = float(fov)
        self._options = ignored  # Genesis World's other camera options (spp, near, far, ...): accepted
        self._pose = tuple(_vec3(x, f"add_camera: {n}", 1)[0] for x, n in ((pos, "pos"), (lookat, "lookat"),
                                                                             (up, "up")))
        _frame(*(x[None] for x in self._pose), "add_camera")
        self._batched_pose = None  # [B, 3] x 3 once set per environment
        self._follow = None
        self._attach = None  # (link, offset [4, 4] float64)
        self._gui = GUI  # each render's RGB image shown in the viewer's panel (show_viewer=True)
        self._recording = False
        self._record_to = (None, None)  # (save_to_filename, fps) given to start_recording
        self._frames = []
        self._steps_per_frame = 1
        self._next_frame_t = 0  # the scene step (scene.t) of the next recorded frame
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
        return self._gui

    @property
    def env_idx(self):
        return self._env_idx

    @property
    def transform(self):
        """The camera-to-world matrix ([n_envs,] 4, 4), OpenGL axes (the camera looks along its -z)."""
        pos, lookat, up = self._poses()
        right, cam_up, back = _frame(pos, lookat, up, "transform")
        T = torch.zeros((pos.shape[0], 4, 4), dtype=torch.float64)
        T[:, :3, 0], T[:, :3, 1], T[:, :3, 2], T[:, :3, 3], T[:, 3, 3] = right, cam_up, back, pos, 1.0
        return self._out(T)

    def _check_env_idx(self):
        if self._env_idx is not None and self.scene.is_built and self._env_idx >= max(self.scene.n_envs, 1):
            raise OptionError(f"camera {self.idx}: env_idx={self._env_idx} is not an environment of this scene "
                              f"(n_envs={self.scene.n_envs}).")

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
        if not (self.scene.is_built and self.scene.n_envs):
            return x[0]
        return x[self._env_idx] if self._env_idx is not None else x

    # -- pose ------------------------------------------------------------------------------------------------------

    def set_pose(self, transform=None, pos=None, lookat=None, up=None, envs_idx=None):
        """Move the camera: pos, lookat, up (m, world), each (3,) for every environment (or for every one of
        envs_idx) or (len(envs_idx) or n_envs, 3) one per environment; the ones not given keep their values.
        transform: a 4x4 camera-to-world matrix (OpenGL axes: the camera looks along its -z), or one per
        environment, instead of pos/lookat/up. envs_idx: the environments to move (a batched scene only)."""
        B = self._B()
        cur = self._poses()
        if transform is None and pos is None and lookat is None and up is None:
            return
        batched = self.scene.is_built and bool(self.scene.n_envs)
        if envs_idx is not None:
            if not batched:
                raise OptionError("set_pose: envs_idx needs a scene built with n_envs >= 1.")
            if self._env_idx is not None:
                raise OptionError(f"set_pose: this camera shows environment {self._env_idx} only (env_idx); "
                                  "envs_idx cannot be given.")
            idx = self.scene._sanitize_envs_idx(envs_idx).cpu().long().reshape(-1)
        elif self._env_idx is not None and batched:
            self._check_env_idx()
            idx = torch.tensor([self._env_idx])
        else:
            idx = torch.arange(B)
        n = len(idx)
        if transform is not None:
            if pos is not None or lookat is not None or up is not None:
                raise OptionError("set_pose: give transform or pos/lookat/up, not both.")
            pos, lookat, up = _T_to_pos_lookat_up(_matrices(transform, "set_pose", n))
        new = [c.clone() for c in cur]
        for k, (value, name) in enumerate(((pos, "pos"), (lookat, "lookat"), (up, "up"))):
            if value is not None:
                new[k][idx] = _vec3(value, f"set_pose: {name}", n)
        _frame(*new, "set_pose")
        self._batched_pose = tuple(new)
        if B == 1 and not batched:
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
        if self._attach is not None:
            raise OptionError("follow_entity: the camera is attached to a link; detach() it first.")
        self._follow = (entity, tuple(fixed_axis), smoothing, bool(fix_orientation), None)
        if self.scene.is_built:  # the offset is the one at this call (as Genesis World); else at the first render
            self._follow = self._follow[:4] + (self._follow_offset(entity),)

    def unfollow_entity(self):
        self._follow = None

    def _follow_offset(self, entity):
        offset = self._poses()[0] - self._entity_pos(entity)
        if (offset.norm(dim=-1) < 1e-9).any():
            raise OptionError("follow_entity: the camera sits at the entity's base position; move it first.")
        return offset

    def attach(self, rigid_link, offset_T):
        """Mount the camera on a link: at each render its camera-to-world matrix is the link's pose times
        offset_T (4x4, the camera's pose in the link's frame, OpenGL axes), as Genesis World's attach."""
        if self._follow is not None:
            raise OptionError("attach: the camera follows an entity; unfollow_entity() first.")
        if not (hasattr(rigid_link, "get_pos") and hasattr(rigid_link, "get_quat")):
            raise OptionError(f"attach: {rigid_link!r} is not a link (it has no get_pos / get_quat).")
        self._attach = (rigid_link, _matrices(offset_T, "attach: offset_T", 1)[0])

    def detach(self):
        """Stop moving with the link; the camera keeps its current pose."""
        self._attach = None

    def move_to_attach(self):
        """Put the camera where its link and offset say (done by every render of an attached camera)."""
        from ..rotations import quat_to_mat

        if self._attach is None:
            raise SceneError("move_to_attach: the camera is not attached to a link (cam.attach(link, offset_T)).")
        link, offset = self._attach
        B = self._B()
        pos = self._entity_pos(link)
        q = link.get_quat()
        q = (q.detach().cpu() if torch.is_tensor(q) else torch.as_tensor(q)).to(torch.float64).reshape(-1, 4)
        T = torch.zeros((B, 4, 4), dtype=torch.float64)
        T[:, :3, :3] = quat_to_mat(torch.nn.functional.normalize(q, dim=-1)).reshape(-1, 3, 3).expand(B, 3, 3)
        T[:, :3, 3], T[:, 3, 3] = pos, 1.0
        T = T @ offset
        if not torch.isfinite(T).all():
            raise SceneError("move_to_attach: the link's pose is not finite.")
        self._set_all(*_T_to_pos_lookat_up(T), "move_to_attach")

    def _entity_pos(self, entity):
        p = entity.get_pos()
        p = p.detach().cpu().to(torch.float64) if torch.is_tensor(p) else torch.as_tensor(p, dtype=torch.float64)
        return p.reshape(-1, 3).expand(self._B(), 3)

    def _update_following(self):
        entity, fixed, smoothing, fix_orientation, offset = self._follow
        pos, lookat, up = self._poses()
        target = self._entity_pos(entity)
        if offset is None:  # followed before build: the offset is taken at the first render
            offset = self._follow_offset(entity)
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
        self._set_all(new_pos, new_look, up, "follow_entity")

    def _set_all(self, pos, lookat, up, what):
        """Every environment's pose at once ([B, 3] float64 each), checked."""
        _frame(pos, lookat, up, what)
        self._batched_pose = (pos.clone(), lookat.clone(), up.clone())
        if not (self.scene.is_built and self.scene.n_envs):
            self._pose = tuple(x[0].clone() for x in self._batched_pose)

    # -- rendering -------------------------------------------------------------------------------------------------

    def _cam_f(self, device):
        pos, lookat, up = self._poses()
        right, cam_up, back = _frame(pos, lookat, up, "render")
        tan = torch.full((pos.shape[0], 1), math.tan(math.radians(self._fov) / 2.0), dtype=torch.float64)
        return torch.cat([pos, right, cam_up, back, tan], dim=1).to(device=device, dtype=F32).contiguous()

    def render(self, rgb=True, depth=False, segmentation=False, colorize_seg=False, normal=False, **ignored):
        """Render every environment: (rgb, depth, segmentation, normal), None for those not asked.

        rgb: uint8 ([n_envs,] H, W, 3). depth: float32 ([n_envs,] H, W), m along the camera's view axis (the
        distance to the image plane; inf where no geometry is hit). segmentation: int32 ([n_envs,] H, W), Genesis
        World's segmentation index of what each pixel sees: 0 the background, and `scene.segmentation_idx_dict`
        maps each index to its key at `VisOptions.segmentation_level` ("link", the default: (entity, link) for a
        rigid link, the entity index for particles; "entity"; "geom": (entity, link, geom)); with colorize_seg,
        uint8 ([n_envs,] H, W, 3) colours of those indices instead (black background). normal: float32 ([n_envs,] H, W, 3), the world normal n facing the camera as
        (n + 1) / 2 (0 on the background)."""
        from .renderer import Renderer
        from .._runtime import runtime

        unknown = sorted(set(ignored) - {"antialiasing", "force_render"})
        if unknown:
            raise OptionError(f"cam.render got unexpected keywords {unknown}.")

        scene = self.scene
        scene._require_built("cam.render()")
        self._check_env_idx()
        if self._attach is not None:
            self.move_to_attach()
        if self._follow is not None:
            self._update_following()
        if self._renderer is None:
            self._renderer = Renderer(scene)
        need_rgb = bool(rgb) or self._gui
        one = self._env_idx if self._env_idx is not None and scene.n_envs else None  # drawn alone
        img, dep, seg, nrm = self._renderer.render(self._cam_f(runtime.device), self._res, shadows=need_rgb, env=one)
        if self._gui and getattr(scene, "viewer", None) is not None:
            scene.viewer.show_image(self, img[0])
        if colorize_seg:
            pal = torch.as_tensor((PALETTE * 255).round().astype(np.uint8), device=seg.device)
            colored = pal[(seg.long() - 1).clamp_min(0) % len(PALETTE)]
            seg = torch.where((seg > 0)[..., None], colored, torch.zeros_like(colored))
        out = [img if rgb else None, dep if depth else None, seg if segmentation else None, nrm if normal else None]
        if not scene.n_envs:
            out = [None if x is None else x[0] for x in out]
        elif one is not None:
            out = [None if x is None else x[0] for x in out]
        return tuple(out)

    # -- recording -------------------------------------------------------------------------------------------------

    def start_recording(self, save_to_filename=None, fps=None):
        """Record as the scene steps, as Genesis World 1.4.5 does: from now on every `scene.step()` that is due
        renders the camera and keeps its RGB image, one frame every round(realtime_factor / (fps dt)) steps (at
        least 1; realtime_factor from ViewerOptions, 1 when None; fps default 60), so that a second of video is a
        second of simulated time paced as the viewer paces it. `cam.render()` adds no frame. save_to_filename and
        fps may be given here (Genesis World 1.4.5's form) or to stop_recording (its earlier form, where fps only
        sets the video's rate); called again after pause_recording, it resumes the same recording."""
        self.scene._require_built("cam.start_recording()")
        if save_to_filename is not None or fps is not None:
            _check_recording_target(save_to_filename, fps, "start_recording")
            self._record_to = (save_to_filename, fps)
        if not self._recording:
            rf = self.scene.viewer_options.realtime_factor or 1.0
            self._steps_per_frame = max(1, round(rf / ((self._record_to[1] or 60) * self.scene.dt)))
            self._next_frame_t = self.scene.t + self._steps_per_frame
        self._recording = True

    def _record_step(self):
        """After a scene step: a frame if one is due (scene.step calls it on recording cameras)."""
        t, spf = self.scene.t, self._steps_per_frame
        if t + spf < self._next_frame_t:  # the scene was reset to an earlier step: count from there
            self._next_frame_t = t + spf
        if t < self._next_frame_t:
            return
        self._next_frame_t = t + spf
        img = self.render(rgb=True)[0]
        self._frames.append(img.cpu().numpy().copy())

    def pause_recording(self):
        if not self._recording:
            raise SceneError("pause_recording: recording was not started (cam.start_recording()).")
        self._recording = False

    def stop_recording(self, save_to_filename=None, fps=None):
        """Write the recorded frames with imageio: MP4 (ffmpeg from imageio-ffmpeg) or GIF, by the file's
        extension; save_to_filename and fps default to those given to start_recording, else
        `camera_<idx>.mp4` and the rate the frames were taken at (realtime_factor / (steps per frame x dt)).
        On a batched scene each environment goes to its own file, `<name>_<env><ext>` (as Genesis World does).
        Returns the paths written."""
        if not self._recording and not self._frames:
            raise SceneError("stop_recording: recording was not started (cam.start_recording()).")
        _check_recording_target(save_to_filename, fps, "stop_recording")
        if save_to_filename is None:
            save_to_filename = self._record_to[0] or f"camera_{self.idx}.mp4"
        if fps is None:
            rf = self.scene.viewer_options.realtime_factor or 1.0
            fps = rf / (self._steps_per_frame * self.scene.dt)
        name, ext = os.path.splitext(str(save_to_filename))
        if not self._frames:
            raise SceneError("stop_recording: no frame was recorded since start_recording() (frames are taken as "
                             "the scene steps).")
        frames = np.stack(self._frames)  # [T, B, H, W, 3]
        if frames.ndim == 4:  # a camera bound to one environment (env_idx), or a scene without environments
            frames = frames[:, None]
        batched = bool(self.scene.n_envs) and self._env_idx is None
        paths = []
        for b in range(frames.shape[1]):
            path = f"{name}_{b}{ext}" if batched else str(save_to_filename)
            write_video(path, frames[:, b], fps)
            paths.append(path)
        self._frames = []
        self._recording = False
        self._record_to = (None, None)
        return paths


def write_video(path, frames, fps: float):
    """Write frames [T, H, W, 3] (uint8) with imageio, by the file's extension (see VideoWriter)."""
    writer = VideoWriter(path, fps)
    try:
        for frame in np.asarray(frames):
            writer.append(frame)
    finally:
        writer.close()


class VideoWriter:
    """A video file written a frame at a time with imageio, by the file's extension: a GIF (looping; Pillow keeps
    its frames until close) or an MP4 streamed to ffmpeg (from imageio-ffmpeg; H.264 in yuv420p, which players
    read, needs even sides: an odd one gets its last row or column repeated). codec (an ffmpeg encoder name, default
    libx264), bitrate (bits/s) and output_params (more ffmpeg output arguments) apply to MP4 only. Frames are
    [H, W, 3] uint8."""

    def __init__(self, path, fps: float, codec: str | None = None, bitrate: int | None = None,
                 output_params=None):
        import imageio.v2 as imageio

        self.path = str(path)
        # the file's folder is made as Genesis World's video writer makes it (fly_route.py writes ../../videos/)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self.n_frames = 0
        self._gif = self.path.lower().endswith(".gif")
        if self._gif:
            self._writer = imageio.get_writer(self.path, duration=1000.0 / fps, loop=0)
        else:
            extra = {k: x for k, x in (("codec", codec), ("bitrate", bitrate)) if x}
            if output_params:
                extra["output_params"] = list(output_params)
            self._writer = imageio.get_writer(self.path, fps=fps, macro_block_size=1, **extra)

    def append(self, frame):
        frame = np.asarray(frame)
        if not self._gif:
            H, W = frame.shape[:2]
            frame = np.pad(frame, ((0, H % 2), (0, W % 2), (0, 0)), mode="edge")
        self._writer.append_data(frame)
        self.n_frames += 1

    def close(self):
        self._writer.close()


__all__ = ["Camera", "VideoWriter", "write_video"]
