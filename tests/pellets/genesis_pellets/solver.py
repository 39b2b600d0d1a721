"""Pellets: point particles of the particle kit under gravity, colliding with every collider through
`genesis_core.particles.coupling.ParticleColliderCoupling`."""

from genesis_core.launch import Launcher
from genesis_core.particles.coupling import ParticleView
from genesis_core.particles.entity import ParticleEntity
from genesis_core.particles.solver import ParticleSolver

from . import kernels
from .materials import Pellet
from .options import PelletOptions


class PelletEntity(ParticleEntity):
    """A group of pellets: the kit's particle API (get_particles_pos, set_velocity, ...)."""


class PelletSolver(ParticleSolver):
    """State: the kit's pos, vel ([frames, B, N, 3]) and active ([B, N]). A substep moves the active pellets
    (symplectic Euler, before the coupling); the coupling then resolves their contacts in frame f + 1."""

    short_name = "pellet"
    options_class = PelletOptions
    material_class = Pellet
    entity_class = PelletEntity
    state_fields = ParticleSolver.particle_fields
    order = 60

    def build_particles(self):
        self.radius = self.options.radius if self.options.radius is not None else 0.5 * self.particle_size
        self._launch = Launcher()
        self._views = {}

    def substep_pre_coupling(self, f):
        st, g = self.state, self.sim_options.gravity
        self._launch(kernels.advance, f, self.frames.next(f), self.sim_options.substep_dt, float(g[0]), float(g[1]),
                     float(g[2]), st.pos, st.vel, st.active)

    def substep_post_coupling(self, f):
        self.keep_inside(self.frames.next(f))

    def particle_view(self, f) -> ParticleView:
        """Frame f + 1 after the free motion of substep f: what the coupling collides and corrects in place."""
        fn = self.frames.next(f)
        if fn not in self._views:
            st = self.state
            self._views[fn] = ParticleView(pos=st.at("pos", fn), vel=st.at("vel", fn), mass=self.p_mass,
                                           active=st.at("active", fn), radius=self.radius,
                                           restitution=self.options.restitution)
        return self._views[fn]
