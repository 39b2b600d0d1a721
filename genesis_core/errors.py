"""Exceptions of the engine. Each message says what was wrong and what to do."""


class GenesisError(Exception):
    """Base class of every error the engine raises on purpose."""


# Genesis World's name of its base exception: every error class here derives from it, so that
# `except gs.GenesisException` catches whatever the engine raises on purpose.
GenesisException = GenesisError


class OptionError(GenesisError, ValueError):
    """An option, morph or material was given a value outside its accepted range."""


class MeshNotWatertight(OptionError):
    """A Mesh morph's file is to be meshed into tets but its surface encloses no volume (a sheet, no faces), or
    the mesher's tets do not bound a closed surface (the message names the file). A surface with holes is meshed,
    with a warning."""


class ModelFileError(OptionError):
    """A robot, scene or mesh file (URDF, MJCF, OBJ, STL, ...) holds something the engine cannot simulate: a value
    that is not a finite number or is outside its range, a kinematic graph that is not a tree, more elements than
    the documented limits, a mesh with no volume. The message names the file, the element and the value; nothing
    was added to the scene (docs/bad-input.md, "Model files")."""


class PluginNotInstalledError(GenesisError, AttributeError):
    """A solver-specific name was used whose plugin distribution is not installed (an AttributeError, so that
    `hasattr(gs.materials, "MPM")` answers False)."""


class InvalidStateError(OptionError):
    """A value written into a solver's state (a setter, `reset(state=...)`, a checkpoint) is outside what its
    field declares valid (`FieldSpec`: finite, bounds, codes, unit quaternions, the solver's domain). The message
    names the key, the environment, the index and the bound; nothing was written."""


class SceneError(GenesisError, RuntimeError):
    """A scene method was called at the wrong point of the scene's life (before/after build, ...)."""


class RecordingError(GenesisError, ValueError):
    """A recorder (`scene.start_recording(data_func, gs.recorders.*)`) was handed data it cannot record: a
    `data_func` that returned another structure, shape or type than the recorder takes, or than it returned
    before. The message names the recorder, what it got and what it takes."""


class InvalidEnvError(GenesisError, FloatingPointError):
    """With `SimOptions(on_invalid_env="raise")`: a step left some environments' state non-finite. `envs`
    lists them (their state is kept as it is, for inspection)."""

    def __init__(self, message, envs=()):
        super().__init__(message)
        self.envs = list(envs)


class CheckpointError(GenesisError):
    """A checkpoint file could not be read, or does not fit the scene it is loaded into."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file references a type the format never uses: it was refused and nothing ran."""


class DamagedCheckpointError(CheckpointError):
    """A checkpoint file's contents do not match the checksum it carries: it was changed after it was written."""


class InvalidCheckpointStateError(CheckpointError, InvalidStateError):
    """A checkpoint holds a value outside what its field declares valid (see InvalidStateError)."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint was written by a scene built differently from the one it is loaded into."""
