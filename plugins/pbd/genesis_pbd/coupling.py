"""The PBD solver's couplings beyond the kit's: rigid bodies (the kit's contacts, plus the links particles are
attached to)."""

from genesis_core.particles.coupling import ParticleColliderCoupling


class RigidPBDCoupling(ParticleColliderCoupling):
    """The kit's particle contacts with the rigid solver's geoms; it also gives the PBD solver the rigid solver's
    collider view, through which attached particles follow their links and pull on them (`PBDSolver`'s
    `attach` stage, `PBDEntity.fix_particles_to_link`).

    In differentiable mode the particles do not collide with the rigid geoms (the contact set changes
    discontinuously; a warning says so); the attachments are differentiated, in both directions (the particles
    follow the link's pose, the link takes their pull), through the view's arrays."""

    def __init__(self, collider, particles, sim_options):
        self.requires_grad = bool(sim_options.requires_grad)
        if self.requires_grad:
            import warnings

            self.collider, self.particles = collider, particles
            warnings.warn(f"{particles.name}: in differentiable mode its particles do not collide with the geoms of "
                          f"{collider.name}; particles attached to its links (fix_particles_to_link) are "
                          "differentiated.", stacklevel=2)
        else:
            super().__init__(collider, particles, sim_options)
        particles.add_link_source(self)

    def couple(self, f: int):
        if not self.requires_grad:
            super().couple(f)

    def couple_grad(self, f: int):
        """The contacts are off in differentiable mode; the attachments' reverse is the PBD solver's."""
