"""The PBD solver's couplings beyond the kit's: rigid bodies (the kit's contacts, plus the links particles are
attached to)."""

from genesis_core.particles.coupling import ParticleColliderCoupling


class RigidPBDCoupling(ParticleColliderCoupling):
    """The kit's particle contacts with the rigid solver's geoms; it also gives the PBD solver the rigid solver's
    collider view, through which attached particles follow their links and pull on them (`PBDSolver`'s
    `attach` stage, `PBDEntity.fix_particles_to_link`)."""

    def __init__(self, collider, particles, sim_options):
        super().__init__(collider, particles, sim_options)
        particles.add_link_source(self)
