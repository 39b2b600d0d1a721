"""Hook implementations of the PBD solver plugin (see genesis_core.plugins.hookspecs)."""

import os

import genesis_core as gs

from .materials import PBD
from .options import PBDOptions
from .solver import PBDSolver


@gs.hookimpl
def register_solvers(register):
    register(PBDSolver)


@gs.hookimpl
def register_options(register):
    register(PBDOptions)


@gs.hookimpl
def register_materials(register):
    register("PBD", PBD)


@gs.hookimpl
def register_couplings(register):
    from genesis_core.coupler import ANY_COLLIDER
    from genesis_core.particles.coupling import ParticleColliderCoupling
    from genesis_core.particles.grid_exchange import MPMGridCoupling
    from genesis_core.particles.pair_exchange import ParticlePairCoupling

    from .coupling import RigidPBDCoupling

    register(ANY_COLLIDER, "PBDSolver", ParticleColliderCoupling)
    register("RigidSolver", "PBDSolver", RigidPBDCoupling)  # contacts, and the links particles attach to
    register("MPMSolver", "PBDSolver", MPMGridCoupling)  # PBDSolver.exchange_with_mpm
    register("SPHSolver", "PBDSolver", ParticlePairCoupling)  # both solvers' exchange_view


def cloth_obj(n: int, size: float, path: str) -> str:
    """Writes an OBJ of a flat square cloth of n x n vertices and side `size` (m) in the z = 0 plane, centred at
    the origin, two triangles per cell; returns its path."""
    xs = [size * (i / (n - 1) - 0.5) for i in range(n)]
    with open(path, "w") as fh:
        for y in xs:
            for x in xs:
                fh.write(f"v {x:.9g} {y:.9g} 0\n")
        for j in range(n - 1):
            for i in range(n - 1):
                a = j * n + i + 1
                fh.write(f"f {a} {a + 1} {a + n}\nf {a + 1} {a + n + 1} {a + n}\n")
    return path


def _tmp_cloth(n, size):
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), "genesis_pbd")
    os.makedirs(folder, exist_ok=True)
    return cloth_obj(n, size, os.path.join(folder, f"cloth_{n}_{size:g}.obj"))


@gs.hookimpl
def register_test_scenes(register):
    register("pbd", _test_scene)


def _test_scene(n_envs, requires_grad=False):
    """A small cloth with one corner fixed, thrown differently in every environment, falling on an elastic cube,
    beside a few free particles and a block of liquid (not in differentiable mode, which refuses liquids)."""
    import torch
    import warnings

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2, requires_grad=requires_grad),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-0.3, -0.3, 0.0), upper_bound=(0.3, 0.3, 0.4),
                                                       particle_size=0.02, max_density_solver_iterations=2))
    cloth = scene.add_entity(gs.morphs.Mesh(file=_tmp_cloth(6, 0.2), pos=(0.0, 0.0, 0.2)),
                             material=gs.materials.PBD.Cloth())
    scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.05), size=(0.08, 0.08, 0.08), maxvolume=2e-4),
                     material=gs.materials.PBD.Elastic(stretch_compliance=1e-6, volume_compliance=1e-7))
    if not requires_grad:
        scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.1), size=(0.06, 0.06, 0.06)),
                         material=gs.materials.PBD.Liquid())
    scene.add_entity(gs.morphs.Box(pos=(-0.2, 0.2, 0.1), size=(0.04, 0.04, 0.04)),
                     material=gs.materials.PBD.Particle())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*do not collide")
        scene.build(n_envs=n_envs)
    batch = max(n_envs, 1)
    vel = torch.stack([torch.linspace(-0.5, 0.5, batch), torch.zeros(batch), torch.linspace(0.0, 0.5, batch)], 1)
    cloth.set_velocity(vel if n_envs else vel[0])
    cloth.fix_particles([0])

    def drive(scene, i_step):
        pass

    return scene, drive


@gs.hookimpl
def register_demo_parts(register):
    register("pbd", _demo_part)


def _demo_part():
    """The PBD part of `genesis-core demo`: a 0.5 m cloth of 16 x 16 vertices dropped from 0.6 m onto the ground."""
    from .materials import Cloth

    return {
        "options": {"pbd_options": PBDOptions(lower_bound=(-1.0, -1.0, 0.0), upper_bound=(1.0, 1.0, 1.5))},
        "entities": [(gs.morphs.Mesh(file=_tmp_cloth(16, 0.5), pos=(0.0, 0.4, 0.6)), Cloth())],
    }
