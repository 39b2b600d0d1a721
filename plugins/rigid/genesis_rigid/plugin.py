"""Hook implementations of the rigid solver plugin (see genesis_core.plugins.hookspecs)."""

import genesis_core as gs

from .material import Kinematic, Rigid
from .options import RigidOptions
from .solver import RigidSolver


@gs.hookimpl
def register_solvers(register):
    register(RigidSolver)


@gs.hookimpl
def register_options(register):
    register(RigidOptions)


@gs.hookimpl
def register_materials(register):
    register("Rigid", Rigid)
    register("Kinematic", Kinematic)


@gs.hookimpl
def register_assets(register):
    from . import assets

    register("rigid", assets.FOLDER)


@gs.hookimpl
def register_test_scenes(register):
    register("rigid", _test_scene)


def _test_scene(n_envs, requires_grad=False):
    """A cart-pole under per-environment force control, a box tumbling onto the plane, a sphere rolling, and a
    convex mesh falling onto the box (mesh-box, then mesh-plane contacts); the sphere is welded to the box at the
    third step in the first environment (a run-time equality in the state); a kinematic arm follows joint angles
    set per environment at each step, its base moved at the second (kinematic_qpos, fixed_base_pos / _quat). Without requires_grad the box carries
    sensors whose state takes part in the shared properties: a noisy IMU with a delay, jitter and a random walk
    (its noise generator's keys and counters, its history of ground truths, its drift), a clipped and quantised
    contact-force sensor, a contact flag on the sphere, a noisy temperature grid on the box (its cells, its
    sensing elements and every other link's lumped temperature: the pebble lands on it), and on the sphere a delayed
    height scan of rays and a noisy proximity probe tracking the box."""
    from . import assets

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=2, requires_grad=requires_grad),
                     rigid_options=gs.options.RigidOptions(iterations=20))
    scene.add_entity(gs.morphs.Plane())
    cartpole = scene.add_entity(gs.morphs.MJCF(file=assets.path("cartpole.xml"), pos=(0, 2, 0)))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.2, 0.3, 0.1), euler=(20, 30, 0)))
    sphere = scene.add_entity(gs.morphs.Sphere(pos=(1, 0, 0.1), radius=0.1))
    scene.add_entity(gs.morphs.Mesh(file=assets.path("pebble.obj"), pos=(0.05, 0.02, 0.55), euler=(10, 40, 0)))
    ghost = scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True, pos=(0, -1.5, 0)),
                             material=Kinematic())
    if not requires_grad:
        scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, pos_offset=(0.05, 0.0, 0.02), acc_noise=0.01,
                                        gyro_random_walk=0.001, acc_bias=0.02, delay=0.02, jitter=0.01,
                                        interpolate=True))
        scene.add_sensor(gs.sensors.ContactForce(entity_idx=box.idx, noise=0.1, max_force=20.0, resolution=0.01))
        scene.add_sensor(gs.sensors.Contact(entity_idx=sphere.idx))
        hot = gs.sensors.TemperatureProperties(base_temperature=80.0)
        scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=box.idx, grid_size=(2, 2, 1), noise=0.05,
                                                    properties_dict={-1: gs.sensors.TemperatureProperties(),
                                                                     box.base_link_idx: hot},
                                                    simulate_all_link_temperatures=True))
        scene.add_sensor(gs.sensors.Raycaster(entity_idx=sphere.idx, pattern=gs.sensors.GridPattern(
            resolution=0.1, size=(0.2, 0.1)), pos_offset=(0.0, 0.0, 0.3), max_range=2.0, delay=0.01))
        scene.add_sensor(gs.sensors.Proximity(entity_idx=sphere.idx, probe_local_pos=((0.0, 0.0, 0.1),),
                                              track_link_idx=(box.base_link_idx,), noise=0.01))
    scene.build(n_envs=n_envs)

    def drive(scene, i_step):
        import torch

        batch = max(n_envs, 1)
        force = torch.sin(torch.arange(batch, dtype=torch.float64) + 0.3 * i_step).reshape(batch, 1) * 5.0
        cartpole.control_dofs_force(force if n_envs else force[0], dofs_idx_local=[0])
        angles = torch.sin(torch.arange(batch, dtype=torch.float64)[:, None] + 0.2 * i_step + torch.arange(3.0))
        ghost.set_dofs_position(angles if n_envs else angles[0])
        if i_step == 1:
            ghost.set_pos([0.1, -1.5, 0.0])
        if i_step == 0:
            vel = torch.arange(batch, dtype=torch.float64).reshape(batch, 1) * torch.tensor([[0.5, 0, 0, 0, 1.0, 0]])
            box.set_dofs_velocity(vel if n_envs else vel[0])
        if i_step == 2:
            solver = scene.rigid_solver
            welded = solver.get_weld_constraints()["link_a"]
            if not bool((welded >= 0).any()):  # (a replay from a state that has it already)
                solver.add_weld_constraint(box.links[0].idx, sphere.links[0].idx, envs_idx=[0] if n_envs else None)

    return scene, drive


@gs.hookimpl
def register_demo_parts(register):
    register("rigid", _demo_part)


def _demo_part():
    """The rigid bodies of `genesis-core demo`: the ground plane (which the MPM part's block also lands on), a
    fixed arm, a free cart-pole and a tilted box dropped onto the plane."""
    from . import assets

    return {"entities": [
        (gs.morphs.Plane(), Rigid()),
        (gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True, pos=(0.0, -1.0, 0.0)), Rigid()),
        (gs.morphs.MJCF(file=assets.path("cartpole.xml"), pos=(0.0, 1.5, 0.0)), Rigid()),
        (gs.morphs.Box(pos=(1.0, -1.0, 0.6), size=(0.2, 0.2, 0.2), euler=(30.0, 20.0, 0.0)), Rigid(rho=500.0)),
    ]}
