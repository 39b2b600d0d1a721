"""`gs.recorders`: Genesis World's recorders. `scene.start_recording(data_func, options)` (or
`sensor.start_recording(options)`, which records `sensor.read()`) samples `data_func()` as the scene steps and
hands each sample to the recorder that `options` stands for:

    NPZFile(filename=...)      every sample kept, written to a .npz at scene.stop_recording()
    CSVFile(filename=...)      a row per sample
    VideoFile(filename=...)    a frame per sample, to .mp4 or .gif
    MPLLinePlot, MPLImagePlot, MPLVectorFieldPlot   live matplotlib plots (headless: drawn off-screen)
    PyQtLinePlot               a live pyqtgraph plot (needs pyqtgraph and a Qt binding)

Recorders are I/O, not simulation state: they are in no `scene.get_state()`, reset or checkpoint
(docs/recorders.md).
"""

from ..bases import Options
from . import base_recorder, file_writers, plotters
from .base_recorder import Recorder
from .options import (
    IS_PYAV_AVAILABLE,
    BaseFileWriterOptions,
    BasePlotterOptions,
    CSVFile,
    LinePlotterMixinOptions,
    MPLImagePlot,
    MPLLinePlot,
    MPLVectorFieldPlot,
    NPZFile,
    PyQtLinePlot,
    RecorderOptions,
    VideoFile,
)
from .recorder_manager import RecorderManager, register_recording

__all__ = [
    "IS_PYAV_AVAILABLE", "BaseFileWriterOptions", "BasePlotterOptions", "CSVFile", "LinePlotterMixinOptions",
    "MPLImagePlot", "MPLLinePlot", "MPLVectorFieldPlot", "NPZFile", "Options", "PyQtLinePlot", "Recorder",
    "RecorderManager", "RecorderOptions", "VideoFile", "base_recorder", "file_writers", "plotters",
    "register_recording",
]
