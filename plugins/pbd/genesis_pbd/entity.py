"""The PBD entity: the kit's particle API plus Genesis World's PBD extras (fixing and releasing particles, the
mesh and its edges)."""

from __future__ import annotations

import numpy as np
import torch

from genesis_core.errors import OptionError
from genesis_core.particles.entity import ParticleEntity
from genesis_core.state import to_index


class PBDEntity(ParticleEntity):
    """A cloth, rope, elastic body, liquid or set of free particles: rows `particle_start:particle_end` of the
    solver's pos, vel, active and free. Local particle indices are in [0, n_particles); a cloth's and an elastic
    body's particles are its mesh's vertices, in the mesh's order."""

    _faces = np.zeros((0, 3), dtype=np.int64)
    _edges = np.zeros((0, 2), dtype=np.int64)
    _tets = np.zeros((0, 4), dtype=np.int64)

    # -- topology --------------------------------------------------------------------------------------------------

    @property
    def edges(self) -> np.ndarray:
        """(n_edges, 2): the stretch constraints' particle pairs (local indices)."""
        return self._edges.copy()

    @property
    def n_edges(self) -> int:
        return len(self._edges)

    @property
    def faces(self) -> np.ndarray:
        """(n_faces, 3): a cloth's triangles (local indices; empty for other materials)."""
        return self._faces.copy()

    @property
    def elems(self) -> np.ndarray:
        """(n_elems, 4): an elastic body's tetrahedra (local indices; empty for other materials)."""
        return self._tets.copy()

    @property
    def n_elems(self) -> int:
        return len(self._tets)

    @property
    def mesh(self):
        """The rest shape as a `trimesh.Trimesh` (a cloth's triangles, or an elastic body's boundary), world
        coordinates at build; None for liquids, free particles and ropes."""
        import trimesh

        faces = self._faces
        if len(self._tets):
            from genesis_core.meshing import surface_faces

            faces = surface_faces(self._tets)
        if len(faces) == 0:
            return None
        return trimesh.Trimesh(self._points.copy(), faces.copy(), process=False)

    # -- fixing ----------------------------------------------------------------------------------------------------

    def fix_particles(self, particles_idx_local=None, envs_idx=None, zero_velocity=True):
        """Hold particles `particles_idx_local` (None: all of the entity's) in environments `envs_idx`: they take
        no part in the solve (infinite mass) and move with their own velocity, zeroed unless
        zero_velocity=False (a fixed particle with a velocity drives the cloth)."""
        if zero_velocity:
            self._write("vel", 0.0, envs_idx, particles_idx_local, "fix_particles")
        self._write("free", 0, envs_idx, particles_idx_local, "fix_particles")

    def fix_particle(self, particle_idx_local, envs_idx=None):
        """Genesis World's older name: fix one particle (zeroing its velocity); its scripts pass the environment
        0 of a scene built without environments, which means that scene's only one here."""
        if not self.scene.n_envs and isinstance(envs_idx, (int, np.integer)) and envs_idx == 0:
            envs_idx = None
        self.fix_particles(particle_idx_local, envs_idx)

    def release_particle(self, particles_idx_local=None, envs_idx=None):
        """Let fixed or attached particles move freely again."""
        self._write("free", 1, envs_idx, particles_idx_local, "release_particle")
        self._write("attach_link", -1, envs_idx, particles_idx_local, "release_particle")

    def get_particles_free(self, envs_idx=None, particles_idx_local=None):
        """1 where a particle is free, 0 where it is fixed (int32), `([n_envs,] n)`."""
        return self._read("free", envs_idx, particles_idx_local, "get_particles_free")

    def fix_particles_to_link(self, link_idx, particles_idx_local=None, envs_idx=None):
        """Attach particles `particles_idx_local` (None: all) in environments `envs_idx` to the rigid link
        `link_idx` (its index in the rigid solver, e.g. `entity.base_link_idx`) where they are now: from the next
        substep on they stay at that point of the link, and the link carries them (their weight and the pull of
        the constraints on them go to the link as impulses). `release_particle` detaches them."""
        import genesis_core.rotations as rot

        if isinstance(link_idx, bool) or not isinstance(link_idx, (int, np.integer)):
            raise OptionError(f"fix_particles_to_link: link_idx must be an int, got {link_idx!r}.")
        envs = self._envs_idx(envs_idx)
        com, quat = self.solver.link_pose(int(link_idx), "fix_particles_to_link")
        if envs is not None:
            com, quat = com[envs], quat[envs]
        x = self._read("pos", envs_idx, particles_idx_local, "fix_particles_to_link").detach()
        if not self.scene.n_envs:
            x = x.unsqueeze(0)
        R = torch.as_tensor(np.stack([rot.quat_to_mat(q) for q in quat.double().cpu().numpy()]), dtype=x.dtype)
        local = torch.einsum("bji,bnj->bni", R, x - com[:, None, :])  # R^T (x - com)
        if not self.scene.n_envs:
            local = local[0]
        self._write("attach_local", local, envs_idx, particles_idx_local, "fix_particles_to_link")
        self._write("attach_link", int(link_idx), envs_idx, particles_idx_local, "fix_particles_to_link")

    # -- per-entity material parameters ----------------------------------------------------------------------------

    def get_compliances(self, envs_idx=None):
        """(stretch, bending, volume) compliances of this entity, each `([n_envs,])`."""
        envs = self._envs_idx(envs_idx)
        st, item = self.solver.state, (self._material_index,)
        return tuple(st.get_rows(name, self.solver.frame, envs, item)
                     for name in ("stretch_compliance", "bending_compliance", "volume_compliance"))

    def set_compliances(self, stretch=None, bending=None, volume=None, envs_idx=None):
        """Set this entity's compliances (>= 0; a number or one per environment `([n_envs,])`); they hold from the
        next substep on."""
        envs = self._envs_idx(envs_idx)
        for name, value in (("stretch_compliance", stretch), ("bending_compliance", bending),
                            ("volume_compliance", volume)):
            if value is not None:
                self.solver.state.set_rows(name, self.solver.frame, value, envs, (self._material_index,),
                                           what=f"set_compliances({name.split('_')[0]}=...)")
