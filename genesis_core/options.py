"""Scene options. `SimOptions` belongs to the core; each plugin contributes its own options class
(`RigidOptions`, `MPMOptions`, ...) which appears here as `gs.options.<Name>` once the plugin is installed.

Every options class is a frozen attrs class: values are validated at construction and a bad value raises an
`OptionError` naming the class, the field, the value and the accepted range.
"""

from __future__ import annotations

import attrs

from . import validators as v
from .bases import Inert, Options
from .errors import OptionError
from .faults import POLICIES
from .plugins.manager import plugin_namespace


@attrs.define(frozen=True, kw_only=True)
class SimOptions(Options):
    """Options of the simulation loop shared by every solver.

    dt: seconds per `scene.step()`. substeps: substeps per step (each of dt/substeps seconds).
    substeps_local: in differentiable mode, how many substep frames are kept in device memory before older
    ones move to host memory; must be a multiple of `substeps` (default: `substeps`).
    requires_grad: record what backward needs. gravity: m/s^2, Z up. floor_height: metres; the MPM solver's
    floor where it lies above the bottom of its domain (rigid scenes add a gs.morphs.Plane instead).
    on_invalid_env: what `scene.step()` does when an environment's state goes non-finite (NaN or inf; the other
    environments are never affected): "warn" (default) names the environments in a warning and lists them in
    `scene.invalid_envs`; "reset" also resets them to the registered initial state (MuJoCo resets on a bad
    acceleration); "raise" raises `gs.InvalidEnvError` after the step; "ignore" skips the check.
    """

    dt: float = attrs.field(default=1e-2, validator=v.positive)
    substeps: int = attrs.field(default=1, validator=v.int_at_least(1))
    substeps_local: int | None = attrs.field(default=None)
    requires_grad: bool = attrs.field(default=False, validator=v.is_bool)
    gravity: tuple = attrs.field(default=(0.0, 0.0, -9.81), converter=v.to_float_tuple, validator=v.vec(3))
    floor_height: float = attrs.field(default=0.0, validator=v.finite)
    on_invalid_env: str = attrs.field(default="warn", validator=v.one_of(*POLICIES))

    @substeps_local.validator
    def _check_substeps_local(self, attr, value):
        if value is None:
            return
        v.int_at_least(1)(self, attr, value)
        if value % self.substeps != 0:
            raise OptionError(
                f"SimOptions.substeps_local={value} is not accepted: it must be a multiple of "
                f"substeps={self.substeps}."
            )

    @property
    def substep_dt(self) -> float:
        return self.dt / self.substeps

    @property
    def n_substeps_local(self) -> int:
        return self.substeps if self.substeps_local is None else self.substeps_local


__all__ = ["Options", "SimOptions"]
__getattr__, __dir__ = plugin_namespace("options", globals())


class RenderingOptions(Inert):
    """Options of Genesis World's viewer and renderer (`gs.options.VisOptions`, `gs.options.ViewerOptions`):
    accepted so that a Genesis script runs unchanged (gs.Scene(vis_options=..., viewer_options=...)); the arguments
    are kept (`options.options`). genesis-core has no viewer yet and its cameras (genesis_core.render) read none
    of these options."""

    namespace = "gs.options"


class VisOptions(RenderingOptions):
    pass


class ViewerOptions(RenderingOptions):
    pass


RENDERING_OPTIONS = {"vis_options": VisOptions, "viewer_options": ViewerOptions}
