"""The recorders that write files: NPZFile (every sample kept, written at stop), CSVFile (a row per sample) and
VideoFile (a frame per sample, streamed through the cameras' video writer, genesis_core.render.camera)."""

from __future__ import annotations

import csv
import os
import warnings

import numpy as np

from .._runtime import logger
from ..checkpoint import write_atomically
from ..errors import OptionError, RecordingError
from .base_recorder import Recorder, to_array, to_fields
from .options import CSVFile, NPZFile, VideoFile
from .recorder_manager import register_recording


class BaseFileWriter(Recorder):
    """A recorder that writes `options.filename` (`<stem>_<counter><ext>` with save_on_reset). Its folder is made
    at build."""

    def build(self):
        super().build()
        self.counter = 0
        os.makedirs(os.path.dirname(os.path.abspath(self._options.filename)), exist_ok=True)
        self._initialize_writer()

    def reset(self, envs_idx=None):
        """save_on_reset: a full reset (envs_idx None) writes the file and starts the next one; a reset of some
        environments (an episode's end in one of them) keeps writing the same file."""
        if self._options.save_on_reset and envs_idx is None:
            self.cleanup()
            self.counter += 1
            self._initialize_writer()

    def _get_filename(self) -> str:
        if self._options.save_on_reset:
            stem, ext = os.path.splitext(self._options.filename)
            return f"{stem}_{self.counter}{ext}"
        return self._options.filename

    def _initialize_writer(self):
        pass


@register_recording(NPZFile)
class NPZFileWriter(BaseFileWriter):
    """Keeps every sample in host memory and writes them at stop: "timestamp" [n] (s) and each field [n, ...]."""

    def _initialize_writer(self):
        self._times = []
        self._fields = None  # name -> list of arrays, one per sample

    @property
    def n_samples(self) -> int:
        return len(self._times)

    def process(self, data, cur_time):
        fields = to_fields(data, self._what())
        if "timestamp" in fields:
            raise RecordingError(f"{self._what()}: the data has a field named 'timestamp', the name of the file's "
                                 "array of sample times; rename that field.")
        if self._fields is None:
            self._fields = {k: [] for k in fields}
        elif fields.keys() != self._fields.keys():
            raise RecordingError(f"{self._what()}: the data's fields changed from {sorted(self._fields)} (the first "
                                 f"sample) to {sorted(fields)}; each sample must have the same fields.")
        for k, x in fields.items():
            self._fields[k].append(x)
        self._times.append(float(cur_time))

    def cleanup(self):
        filename = self._get_filename()
        if not self._times:
            logger.info("NPZFile: no sample was recorded; %s was not written.", filename)
            return
        arrays = {"timestamp": np.asarray(self._times, dtype=np.float64)}
        for k, items in self._fields.items():
            if len({(x.shape, x.dtype) for x in items}) == 1:
                arrays[k] = np.stack(items)
            else:
                warnings.warn(f"NPZFile: field {k!r} changed shape or dtype between samples; it is saved as an array "
                              f"of objects (read it with np.load({filename!r}, allow_pickle=True)).", stacklevel=2)
                arrays[k] = np.empty(len(items), dtype=object)
                for i, x in enumerate(items):
                    arrays[k][i] = x
        write_atomically(filename, lambda fh: np.savez_compressed(fh, **arrays), "wb", ".npz")
        logger.info("NPZFile: %d samples of %s written to %s.", len(self._times), sorted(arrays), filename)
        self._initialize_writer()


@register_recording(CSVFile)
class CSVFileWriter(BaseFileWriter):
    """A row per sample, written as it comes: the simulation time, then every value of the data, flattened."""

    def _initialize_writer(self):
        self._n_columns = None
        self._file = open(self._get_filename(), "w", encoding="utf-8", newline="")
        self._writer = csv.writer(self._file)

    def process(self, data, cur_time):
        fields = to_fields(data, self._what())
        row, names = [cur_time], []
        for name, x in fields.items():
            values = x.reshape(-1).tolist()
            row.extend(values)
            if x.ndim == 0:
                names.append(name)
            elif name == "data" and len(fields) == 1:  # Genesis World's names for data that is not a dict
                names.extend(f"data_{i + 1}" for i in range(len(values)))
            else:
                names.extend(f"{name}_{i}" for i in range(len(values)))
        if self._n_columns is None:
            header = ["timestamp"] + (list(self._options.header) if self._options.header is not None else names)
            if len(header) != len(row):
                raise RecordingError(f"{self._what()}: header={self._options.header!r} names {len(header) - 1} "
                                     f"columns, but the data has {len(row) - 1} values ({', '.join(names)}).")
            self._writer.writerow(header)
            self._n_columns = len(row)
        elif len(row) != self._n_columns:
            raise RecordingError(f"{self._what()}: the data has {len(row) - 1} values, the first sample had "
                                 f"{self._n_columns - 1}; each row must have as many.")
        self._writer.writerow(row)
        if self._options.save_every_write:
            self._file.flush()

    def cleanup(self):
        if self._file is None:
            return
        self._file.close()
        self._file = None
        filename = self._get_filename()
        if self._n_columns is None:
            os.remove(filename)  # no sample: no file, as Genesis World
            logger.info("CSVFile: no sample was recorded; %s was not written.", filename)
        else:
            logger.info("CSVFile: written to %s.", filename)


# Genesis World's options for its default H.264 encoder, when none are given
LIBX264_OPTIONS = {"preset": "veryfast", "tune": "zerolatency"}
BITRATE_UNIT = 8 * 1024**2  # bits/s per unit of VideoFile.bitrate (Genesis World's scale)


def as_frame(data, what: str) -> np.ndarray:
    """A recorded image as an [H, W, 3] uint8 frame: integer [H, W] (grey), [H, W, 1] or [H, W, 3], each value
    clipped to [0, 255]."""
    img = to_array(data, what)
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    if not (img.ndim == 2 or (img.ndim == 3 and img.shape[-1] == 3)) or 0 in img.shape:
        batched = " (a batched scene's images have a leading n_envs dimension: record one environment's, img[0])" \
            if img.ndim == 4 else ""
        raise RecordingError(f"{what}: a frame must be an image [H, W] (grey) or [H, W, 3] (RGB), got shape "
                             f"{tuple(img.shape)}{batched}.")
    if not (np.issubdtype(img.dtype, np.integer) or img.dtype == np.bool_):
        raise RecordingError(f"{what}: a frame must hold integers 0-255 (uint8), got {img.dtype}; convert it, "
                             "e.g. (img * 255).clip(0, 255).to(torch.uint8) for values in [0, 1].")
    if img.dtype != np.uint8:
        img = np.clip(img, 0, 255).astype(np.uint8)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    return img


@register_recording(VideoFile)
class VideoFileWriter(BaseFileWriter):
    """A frame per sample, streamed to the video file (MP4 through ffmpeg, or GIF) as it comes."""

    def build(self):
        fps = self._options.fps
        self.fps = fps if fps is not None else max(1, round(1.0 / (self._steps_per_sample * self._manager._step_dt)))
        super().build()

    def _initialize_writer(self):
        self._writer = None
        self._shape = None

    @property
    def n_frames(self) -> int:
        return 0 if self._writer is None else self._writer.n_frames

    def _open(self):
        from ..render.camera import VideoWriter

        o = self._options
        path = self._get_filename()
        params = ["-metadata", f"title={o.name or os.path.splitext(os.path.basename(path))[0]}"]
        codec_options = o.codec_options or (LIBX264_OPTIONS if o.codec in ("", "libx264") else {})
        for key, value in codec_options.items():
            params += [f"-{key}", value]
        return VideoWriter(path, self.fps, codec=o.codec or None, bitrate=int(o.bitrate * BITRATE_UNIT),
                           output_params=params)

    def process(self, data, cur_time):
        frame = as_frame(data, self._what())
        if self._writer is None:
            self._writer = self._open()
            self._shape = frame.shape
        elif frame.shape != self._shape:
            raise RecordingError(f"{self._what()}: a frame of shape {frame.shape}, the first was {self._shape}; "
                                 "every frame of a video has one size.")
        self._writer.append(frame)

    def cleanup(self):
        filename = self._get_filename()
        if self._writer is None:
            logger.info("VideoFile: no frame was recorded; %s was not written.", filename)
            return
        n = self._writer.n_frames
        self._writer.close()
        self._writer = None
        logger.info("VideoFile: %d frames written to %s.", n, filename)

    @classmethod
    def check_available(cls, options):
        from importlib.util import find_spec

        mp4 = not options.filename.lower().endswith(".gif")
        missing = [p for p, need in (("imageio", True), ("imageio-ffmpeg", mp4))
                   if need and find_spec(p.replace("-", "_")) is None]
        if missing:
            raise OptionError(f"VideoFile({options.filename!r}) writes through {' and '.join(missing)}, not "
                              f"installed: pip install {' '.join(missing)} (dependencies of genesis-core).")


__all__ = ["BaseFileWriter", "CSVFileWriter", "NPZFileWriter", "VideoFileWriter", "as_frame"]
