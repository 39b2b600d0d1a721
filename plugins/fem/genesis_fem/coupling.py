"""The FEM solver's coupling with the rigid solver."""

from genesis_core.particles.coupling import ParticleColliderCoupling


class RigidFEMCoupling(ParticleColliderCoupling):
    """The kit's contacts of the FEM surface with the rigid solver's geoms; it also hands the FEM solver the rigid
    solver's collider view, whose link poses the vertices constrained to a link follow
    (`FEMEntity.set_vertex_constraints(link=...)`)."""

    def __init__(self, collider, particles, sim_options):
        super().__init__(collider, particles, sim_options)
        particles.add_link_source(self)
