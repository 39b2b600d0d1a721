"""Exceptions of the engine. Each message says what was wrong and what to do."""


class GenesisError(Exception):
    """Base class of every error the engine raises on purpose."""


class OptionError(GenesisError, ValueError):
    """An option, morph or material was given a value outside its accepted range."""


class PluginNotInstalledError(GenesisError, AttributeError):
    """A solver-specific name was used whose plugin distribution is not installed (an AttributeError, so that
    `hasattr(gs.materials, "MPM")` answers False)."""


class SceneError(GenesisError, RuntimeError):
    """A scene method was called at the wrong point of the scene's life (before/after build, ...)."""


class CheckpointError(GenesisError):
    """A checkpoint file could not be read, or does not fit the scene it is loaded into."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file references a type the format never uses: it was refused and nothing ran."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint was written by a scene built differently from the one it is loaded into."""
