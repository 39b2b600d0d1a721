"""The FEM entity: Genesis World's FEMEntity API over the kit's particle entity (its vertices are the particles)."""

from __future__ import annotations

import numpy as np
import torch

from genesis_core.errors import OptionError
from genesis_core.particles.entity import ElasticParams, Muscles, ParticleEntity
from genesis_core.state import to_tensor

from . import kernels as K


class FEMEntityState:
    """What `FEMEntity.get_state()` returns: pos, vel `([n_envs,] n_vertices, 3)`, active `([n_envs,] n_vertices)`."""

    def __init__(self, pos, vel, active):
        self.pos, self.vel, self.active = pos, vel, active


class FEMEntity(Muscles, ElasticParams, ParticleEntity):
    """A tetrahedral soft body. Its vertices are rows `particle_start:particle_end` of the solver's pos, vel and
    active (the kit's particle API applies: `get_particles_pos`, `set_position`, ...), its elements rows
    `element_start:element_end` of the solver's element arrays. Local vertex indices are in [0, n_vertices)."""

    element_start = element_end = 0

    # -- sizes and mesh --------------------------------------------------------------------------------------------

    @property
    def n_vertices(self) -> int:
        return self.n_particles

    @property
    def n_elements(self) -> int:
        return self.element_end - self.element_start

    @property
    def n_surfaces(self) -> int:
        """The boundary triangles of the mesh."""
        return len(self._faces)

    @property
    def v_start(self) -> int:
        return self.particle_start

    @property
    def el_start(self) -> int:
        return self.element_start

    def get_el2v(self) -> torch.Tensor:
        """(n_elements, 4) int32: each element's local vertex indices, positively oriented at rest."""
        return torch.as_tensor(self._tets, dtype=torch.int32, device=self.solver.device).clone()

    @property
    def surface_triangles(self) -> np.ndarray:
        """(n_surfaces, 3): the boundary triangles (local vertex indices), oriented outward."""
        return self._faces.copy()

    @property
    def init_positions(self) -> torch.Tensor:
        """Genesis World's: the vertices' initial positions (n_vertices, 3), world, m, on gs.device (where the morph
        put them at add_entity: the state at build and after reset)."""
        import genesis_core as gs

        return torch.as_tensor(self._points, dtype=gs.tc_float, device=gs.device)

    def get_state(self) -> FEMEntityState:
        return FEMEntityState(self.get_particles_pos(), self.get_particles_vel(), self.get_particles_active())

    # -- muscles (genesis_core.particles.entity.Muscles: per element) ---------------------------------------------

    _muscle_unit_name = "elements"

    @property
    def _muscle_rows(self) -> slice:
        return slice(self.element_start, self.element_end)

    # -- external forces -------------------------------------------------------------------------------------------

    def set_vertex_forces(self, forces, verts_idx_local=None, envs_idx=None):
        """External forces (N, world frame) on vertices, held until changed: `([n_envs,] n, 3)` for the vertices
        `verts_idx_local` (None: all), or `(3,)` for each of them. Differentiable."""
        self._write("force", forces, envs_idx, verts_idx_local, "set_vertex_forces")

    # -- vertex constraints ----------------------------------------------------------------------------------------

    def set_vertex_constraints(self, verts_idx_local, target_poss=None, link=None, is_soft_constraint=False,
                               stiffness=0.0, envs_idx=None):
        """Hold vertices at targets: hard (the default: position set to the target, velocity zero, every substep)
        or soft (a spring of `stiffness` N/m toward the target with critical damping 2 sqrt(stiffness m)).
        target_poss: `([n_envs,] n, 3)`, or `(3,)`; None: where the vertices are now. link: a RigidLink (or the
        rigid solver's link index) the targets follow from then on, keeping where they are relative to it now
        (one-way: the link does not feel the vertices); None: fixed targets."""
        link_idx = None
        if link is not None:
            link_idx = getattr(link, "idx", link)
            if isinstance(link_idx, bool) or not isinstance(link_idx, (int, np.integer)):
                raise OptionError(f"set_vertex_constraints: link must be a RigidLink or a link index, got {link!r}.")
            link_idx = int(link_idx)
        if not isinstance(is_soft_constraint, (bool, np.bool_)):
            raise OptionError(f"set_vertex_constraints: is_soft_constraint must be a bool, got "
                              f"{is_soft_constraint!r}.")
        if not isinstance(stiffness, (int, float)) or isinstance(stiffness, bool) or not stiffness >= 0 \
                or not np.isfinite(stiffness):
            raise OptionError(f"set_vertex_constraints: stiffness must be a number >= 0, got {stiffness!r}.")
        if is_soft_constraint and stiffness <= 0:
            raise OptionError("set_vertex_constraints: a soft constraint needs stiffness > 0 (N/m).")
        rows = self._rows(verts_idx_local, "set_vertex_constraints")
        envs = self._envs_idx(envs_idx)
        st, fr = self.solver.state, self.solver.frame
        if target_poss is None:
            target_poss = st.get_rows("pos", fr, envs, (rows,)).detach()
        self.solver.check_inside(to_tensor(target_poss, self.solver.float_dtype, self.solver.device,
                                           "set_vertex_constraints"), "set_vertex_constraints: target_poss")
        st.set_rows("cons_target", fr, target_poss, envs, (rows,), what="set_vertex_constraints(target_poss=...)")
        st.set_rows("cons_k", fr, float(stiffness), envs, (rows,), what="set_vertex_constraints")
        local, link_value = torch.zeros(3, dtype=self.solver.float_dtype), -1
        if link_idx is not None:  # the targets in the link's centre-of-mass frame, now
            from genesis_core.utils.geom import inv_transform_by_quat

            com, quat = self.solver.link_pose(link_idx, "set_vertex_constraints(link=...)")
            if envs is not None:
                com, quat = com[envs], quat[envs]
            target = st.get_rows("cons_target", fr, envs, (rows,)).detach()
            if not self.scene.n_envs:
                target = target.unsqueeze(0)
            local = inv_transform_by_quat(target - com[:, None, :], quat[:, None, :])
            if not self.scene.n_envs:
                local = local[0]
            link_value = link_idx
        st.set_rows("cons_local", fr, local, envs, (rows,), what="set_vertex_constraints(link=...)")
        st.set_rows("cons_link", fr, link_value, envs, (rows,), what="set_vertex_constraints(link=...)")
        st.set_rows("cons", fr, K.SOFT if is_soft_constraint else K.HARD, envs, (rows,),
                    what="set_vertex_constraints")

    def update_constraint_targets(self, verts_idx_local, target_poss, envs_idx=None):
        """New targets `([n_envs,] n, 3)` for constrained vertices (the kind and stiffness stay; a vertex that
        followed a link keeps the new target instead)."""
        rows = self._rows(verts_idx_local, "update_constraint_targets")
        envs = self._envs_idx(envs_idx)
        st, fr = self.solver.state, self.solver.frame
        kinds = st.get_rows("cons", fr, envs, (rows,))
        if bool((kinds == K.FREE).any()):
            raise OptionError("update_constraint_targets: some of these vertices are not constrained; call "
                              "set_vertex_constraints first.")
        self.solver.check_inside(to_tensor(target_poss, self.solver.float_dtype, self.solver.device,
                                           "update_constraint_targets"), "update_constraint_targets: target_poss")
        st.set_rows("cons_target", fr, target_poss, envs, (rows,), what="update_constraint_targets")
        st.set_rows("cons_link", fr, -1, envs, (rows,), what="update_constraint_targets")

    def remove_vertex_constraints(self, verts_idx_local=None, envs_idx=None):
        """Free the vertices (None: all of the entity's) in the environments envs_idx (None: all)."""
        rows = self._rows(verts_idx_local, "remove_vertex_constraints")
        self.solver.state.set_rows("cons", self.solver.frame, K.FREE, self._envs_idx(envs_idx), (rows,),
                                   what="remove_vertex_constraints")
        self.solver.state.set_rows("cons_link", self.solver.frame, -1, self._envs_idx(envs_idx), (rows,),
                                   what="remove_vertex_constraints")
