"""The MPM entity: the kit's particle API, and its material parameters (state, per environment)."""

import torch

import genesis_core as gs
from genesis_core.particles.entity import ParticleEntity
from genesis_core.state import to_tensor


class MPMEntity(ParticleEntity):
    """The particle API of genesis_core.particles.ParticleEntity, and the material parameters E and nu."""

    def get_material_params(self, envs_idx=None):
        """(E, nu): Young's modulus (Pa) and Poisson's ratio, each `([n_envs,])`."""
        envs = self._envs_idx(envs_idx)
        st, item = self.solver.state, (self._material_index,)
        return st.get_rows("E", self.solver.frame, envs, item), st.get_rows("nu", self.solver.frame, envs, item)

    def set_material_params(self, E=None, nu=None, envs_idx=None):
        """Young's modulus E (Pa, > 0) and Poisson's ratio nu (in [0, 0.5)): a number, or one per environment
        `([n_envs,])`. They hold from the next substep on; in differentiable mode a tensor that requires grad
        receives dL/dE, dL/dnu. The material's other parameters derived from them (the ElastoPlastic yield
        strain, the Liquid bulk modulus) follow."""
        envs = self._envs_idx(envs_idx)
        checks = (("E", E, lambda x: x > 0, "positive"), ("nu", nu, lambda x: (x >= 0) & (x < 0.5), "in [0, 0.5)"))
        values = {}
        for name, value, ok, what in checks:
            if value is None:
                continue
            if isinstance(value, bool) or not (torch.is_tensor(value) or isinstance(value, (int, float, list, tuple))):
                raise gs.OptionError(f"set_material_params: {name} must be a number or a tensor, got "
                                     f"{type(value).__name__}.")
            x = to_tensor(value, self.solver.float_dtype, gs.device, f"set_material_params({name}=...)")
            if x.dtype == torch.bool or x.is_complex():
                raise gs.OptionError(f"set_material_params: {name} must be real numbers.")
            x = x.to(self.solver.float_dtype)
            want = (self.scene.n_envs if envs is None else len(envs),) if self.scene.n_envs else ()
            try:
                fits = torch.broadcast_shapes(x.shape, want) == want
            except RuntimeError:
                fits = False
            if not fits:
                raise gs.OptionError(f"set_material_params: {name} must be a number or shaped {want}, got "
                                     f"{tuple(x.shape)}.")
            plain = x.detach()
            if not torch.isfinite(plain).all() or not bool(ok(plain).all()):
                raise gs.OptionError(f"set_material_params: {name}={plain.tolist()} is not accepted: expected "
                                     f"{what}.")
            values[name] = x
        for name, x in values.items():
            self.solver.state.set_rows(name, self.solver.frame, x, envs, (self._material_index,),
                                       what=f"set_material_params({name}=...)")
