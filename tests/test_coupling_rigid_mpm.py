"""The rigid-MPM coupling, through the core's coupler and ColliderView (neither plugin imports the other)."""

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import check_momentum_exchange


def scene_with(gravity=(0, 0, -9.81), dt=2e-3, substeps=4, **mpm):
    opts = dict(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1), grid_density=32)
    opts.update(mpm)
    return gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
                    mpm_options=gs.options.MPMOptions(**opts))


def test_elastic_cube_comes_to_rest_on_a_rigid_box():
    """Dropped from 2.5 cm above a fixed rigid box: it never sinks more than two cells into the box, and settles
    on its top."""
    scene = scene_with()
    scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.25), size=(0.3, 0.3, 0.3), fixed=True))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.5), size=(0.15, 0.15, 0.15)),
                            material=gs.materials.MPM.Elastic(E=5e4))
    scene.build()
    assert [type(c).__name__ for c in scene.coupler.couplings] == ["ColliderMPMCoupling"]
    lowest = 1.0
    for _ in range(500):
        scene.step()
        lowest = min(lowest, float(cube.get_particles_pos()[:, 2].min()))
    top = 0.4
    assert lowest > top - 2 / 32, "particles sank into the box"
    bottom = float(cube.get_particles_pos()[:, 2].min())
    assert top - 1 / 32 < bottom < top + 2 / 32, f"not on the box top ({bottom:.3f})"
    speeds = []
    for _ in range(250):
        scene.step()
        speeds.append(float(cube.get_particles_vel()[:, 2].mean()))
    assert max(abs(v) for v in speeds[-50:]) < 0.1, "still bouncing"
    assert float(cube.get_particles_pos()[:, 2].min()) > top - 2 / 32


def test_momentum_goes_from_the_mpm_body_into_a_free_rigid_body():
    """No gravity: an elastic cube thrown at a free rigid box. The box starts moving along the throw, and the
    total momentum (particles + box) is conserved to a few percent (the coupling exchanges it through the grid)."""
    scene = scene_with(gravity=(0, 0, 0))
    box = scene.add_entity(gs.morphs.Box(pos=(0.65, 0.5, 0.5), size=(0.15, 0.3, 0.3)), material=gs.materials.Rigid(rho=400))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.35, 0.5, 0.5), size=(0.12, 0.12, 0.12)),
                            material=gs.materials.MPM.Elastic(E=1e5))
    scene.build()
    cube.set_velocity([1.0, 0.0, 0.0])
    m_particles = scene.mpm_solver.p_mass[:, None]
    check_momentum_exchange(scene, lambda: (cube.get_particles_vel() * m_particles).sum(0),
                            lambda: 400 * 0.15 * 0.3 * 0.3 * box.get_vel(), 100, rtol=0.05, every_step=False)
    assert float(box.get_vel()[0]) > 0.05, "the box was not pushed"


def test_a_rigid_box_pushed_through_sand_leaves_a_trench():
    """A box dragged at 2 m/s through a sand bed, its bottom 3 cm below the surface, leaves the sand along its path
    lower than beside it."""
    scene = scene_with(dt=2e-3, substeps=4, upper_bound=(1, 0.6, 0.4), grid_density=48)
    sand = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.3, 0.15), size=(0.8, 0.4, 0.08)), material=gs.materials.MPM.Sand())
    plough = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.3, 0.15), size=(0.06, 0.1, 0.12)))
    scene.build()
    for _ in range(100):  # the bed settles around the plough, held in place
        plough.set_pos([0.2, 0.3, 0.15])
        scene.step()
    for i in range(150):  # dragged along x
        plough.set_pos([min(0.2 + 2.0 * 0.002 * (i + 1), 0.75), 0.3, 0.15])
        plough.set_dofs_velocity([2.0, 0, 0, 0, 0, 0])
        scene.step()

    def surface(y0):
        pos = sand.get_particles_pos()
        sel = (pos[:, 0] > 0.35) & (pos[:, 0] < 0.55) & ((pos[:, 1] - y0).abs() < 0.03)
        return float(torch.quantile(pos[sel, 2], 0.9))

    assert surface(0.3) < surface(0.45) - 0.01, f"no trench: {surface(0.3):.3f} in the path, {surface(0.45):.3f} beside"


def test_an_mpm_body_and_a_light_free_box_exchange_momentum_without_making_energy():
    """No gravity: a 1.7 kg block thrown at 1 m/s at a free 0.2 kg box. Momentum is conserved, kinetic energy
    does not grow, and the box ends between the perfectly inelastic (0.89 m/s) and elastic (1.79 m/s) outcomes;
    a plastic block stays close to the inelastic one (the grid contact is inelastic)."""
    out = {}
    for name, material in (("elastic", gs.materials.MPM.Elastic(E=2e4, rho=200.0)),
                           ("plastic", gs.materials.MPM.ElastoPlastic(E=2e4, rho=200.0, yield_stress=50.0))):
        scene = scene_with(gravity=(0, 0, 0))
        box = scene.add_entity(gs.morphs.Box(pos=(0.6, 0.5, 0.5), size=(0.05, 0.2, 0.2)),
                               material=gs.materials.Rigid(rho=100.0))
        block = scene.add_entity(gs.morphs.Box(pos=(0.45, 0.5, 0.5), size=(0.2, 0.2, 0.2)), material=material)
        scene.build()
        block.set_velocity([1.0, 0.0, 0.0])
        m = scene.mpm_solver.p_mass[:, None]
        M = 100 * 0.05 * 0.2 * 0.2

        def energy():
            v = block.get_particles_vel()
            return float(0.5 * (m * v * v).sum() + 0.5 * M * (box.get_vel() ** 2).sum())

        k0 = energy()
        check_momentum_exchange(scene, lambda: (block.get_particles_vel() * m).sum(0), lambda: M * box.get_vel(), 100,
                                rtol=1e-4, every_step=False)
        k1 = energy()
        assert k1 <= k0, (name, k0, k1)
        mass = float(m.sum())
        inelastic, elastic = mass / (mass + M), 2 * mass / (mass + M)
        v_box = float(box.get_vel()[0])
        assert inelastic * 0.99 < v_box < elastic, (name, v_box, inelastic, elastic)
        out[name] = v_box / inelastic
    assert out["plastic"] < 1.05, out


def test_mpm_rests_on_a_rigid_mesh():
    """A fixed rigid mesh (a closed OBJ box, collided as its hull) holds an elastic cube up: the kit's mesh
    signed distance (meshes used to be skipped, and the cube fell through to the floor)."""
    import os
    import tempfile

    import trimesh

    path = os.path.join(tempfile.mkdtemp(), "slab.obj")
    trimesh.creation.box(extents=(0.4, 0.4, 0.2)).export(path)
    scene = scene_with()
    scene.add_entity(gs.morphs.Mesh(file=path, pos=(0.5, 0.5, 0.2), fixed=True))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.42), size=(0.12, 0.12, 0.12)),
                            material=gs.materials.MPM.Elastic(E=5e4))
    scene.build()
    for _ in range(300):
        scene.step()
    bottom = float(cube.get_particles_pos()[:, 2].min())
    assert 0.3 - 2 / 32 < bottom < 0.3 + 2 / 32, f"the cube is not on the mesh's top (its bottom at {bottom:.3f} m)"


def test_a_collider_view_with_indices_outside_its_arrays_cannot_crash_the_coupling():
    """A third party's view with a mesh hull row and a body index far outside its arrays: the kit clamps them
    (the hull to the planes it has, the body to static), and arrays too small for the geoms are refused."""
    from genesis_core.coupler import GEOM_MESH, ColliderView
    from genesis_mpm.coupling import ColliderMPMCoupling

    scene = scene_with()
    scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.3), size=(0.1, 0.1, 0.1)), material=gs.materials.MPM.Elastic())
    scene.build()
    scene.step()  # the grid holds mass
    fl = torch.float64

    class Hostile:
        name = "HostileCollider"

        def __init__(self, n_body_rows=1):
            self.n_body_rows = n_body_rows

        def collider_view(self, f):
            L = self.n_body_rows
            return ColliderView(
                geom_type=torch.tensor([GEOM_MESH], dtype=torch.int32), geom_size=torch.zeros(1, 3, dtype=fl),
                geom_friction=torch.zeros(1, dtype=fl), geom_body=torch.tensor([10 ** 6], dtype=torch.int32),
                geom_pos=torch.tensor([[[0.5, 0.5, 0.3]]], dtype=fl), geom_quat=torch.tensor([[[1.0, 0, 0, 0]]], dtype=fl),
                body_com=torch.zeros(1, L, 3, dtype=fl), body_lin_vel=torch.zeros(1, L, 3, dtype=fl),
                body_ang_vel=torch.zeros(1, L, 3, dtype=fl), body_impulse=torch.zeros(1, 1, 6, dtype=fl),
                geom_hull=torch.tensor([[2 ** 28, 2 ** 20]], dtype=torch.int32),
                hull_planes=torch.tensor([[0.0, 0.0, 1.0, 10.0]], dtype=fl))

    coupling = ColliderMPMCoupling(Hostile(), scene.mpm_solver, scene.sim_options)
    coupling.couple(scene.mpm_solver.frame)  # no crash: the hull rows are clamped, the body is static
    assert torch.isfinite(scene.mpm_solver.grid_v).all()
    with pytest.raises(gs.GenesisError, match="body_com has shape"):
        ColliderMPMCoupling(Hostile(n_body_rows=0), scene.mpm_solver, scene.sim_options).couple(0)


def test_a_link_without_rotational_inertia_couples(tmp_path):
    """A URDF cart with mass and a zero inertia tensor beside an MPM block: its inverse inertia is zero about
    every axis (no LinAlgError)."""
    urdf = tmp_path / "cart.urdf"
    urdf.write_text("""<robot name="cart"><link name="base"/>
<link name="cart"><inertial><mass value="1.0"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial>
<collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>
<joint name="slide" type="prismatic"><parent link="base"/><child link="cart"/><axis xyz="1 0 0"/>
<limit lower="-1" upper="1" effort="10" velocity="1"/></joint></robot>""")
    scene = scene_with(gravity=(0, 0, 0))
    scene.add_entity(gs.morphs.URDF(file=str(urdf), pos=(0.3, 0.5, 0.5), fixed=True))
    block = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.5), size=(0.1, 0.1, 0.1)),
                             material=gs.materials.MPM.Elastic())
    scene.build()
    block.set_velocity([-1.0, 0.0, 0.0])
    for _ in range(30):
        scene.step()
    assert torch.isfinite(block.get_particles_pos()).all()
