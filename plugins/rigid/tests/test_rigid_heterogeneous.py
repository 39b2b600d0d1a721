"""Heterogeneous entities (Genesis World's add_entity(morph=[m0, m1, ...])): each environment simulates one of the
morphs. The reference is the same body simulated alone in a scene of its own: an environment of the batch must
move exactly as it does, whatever the other environments hold."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_rigid import assets
from genesis_rigid.variants import FAR, balanced_mapping

STEPS = 20
BOX = dict(size=(0.04, 0.04, 0.04), pos=(0.0, 0.0, 0.05))
SPHERE = dict(radius=0.02, pos=(0.1, 0.0, 0.08))


def alone(morph):
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane())
    body = scene.add_entity(morph)
    scene.build()
    for _ in range(STEPS):
        scene.step()
    return body.get_pos(), body.get_vel(), body.get_quat()


def test_balanced_assignment_of_variants_to_environments():
    assert balanced_mapping(4, 8).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert balanced_mapping(3, 8).tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert balanced_mapping(4, 2).tolist() == [0, 1]
    assert balanced_mapping(2, 1).tolist() == [0]


def test_each_environment_moves_as_its_variant_alone():
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane())
    body = scene.add_entity(morph=[gs.morphs.Box(**BOX), gs.morphs.Sphere(**SPHERE)])
    scene.build(n_envs=4)
    assert body.variant_of_env.tolist() == [0, 0, 1, 1]
    start = body.get_pos()
    assert torch.allclose(start[:2], torch.tensor(BOX["pos"], dtype=start.dtype).expand(2, 3))
    assert torch.allclose(start[2:], torch.tensor(SPHERE["pos"], dtype=start.dtype).expand(2, 3))
    mass = body.get_mass()
    assert isinstance(mass, np.ndarray) and mass.shape == (4,)
    rho = gs.materials.Rigid().rho  # (200 kg/m^3, Genesis World's default)
    assert mass[:2] == pytest.approx([rho * 0.04 ** 3] * 2, rel=1e-12)
    assert mass[2:] == pytest.approx([rho * 4 / 3 * np.pi * 0.02 ** 3] * 2, rel=1e-12)
    # another variant's geoms are far from the couplings' and cameras' view
    solver = scene.rigid_solver
    view = solver.collider_view(solver.frame)
    box_geom, sphere_geom = [g for g, gm in enumerate(solver.compiled.geoms) if gm["entity"] == body.idx]
    assert float(view.geom_pos[0, sphere_geom, 0]) == FAR and float(view.geom_pos[2, box_geom, 0]) == FAR
    assert float(view.geom_pos[0, box_geom].abs().max()) < 1.0
    for _ in range(STEPS):
        scene.step()
    for envs, morph in ((slice(0, 2), gs.morphs.Box(**BOX)), (slice(2, 4), gs.morphs.Sphere(**SPHERE))):
        pos, vel, quat = alone(morph)
        assert float((body.get_pos()[envs] - pos).abs().max()) < 1e-12
        assert float((body.get_vel()[envs] - vel).abs().max()) < 1e-12
        assert float((body.get_quat()[envs] - quat).abs().max()) < 1e-12
    # the bodies have landed on the plane: the box's centre at its half size, the sphere's at its radius
    assert float(body.get_pos()[0, 2]) == pytest.approx(0.02, abs=2e-3)
    assert float(body.get_pos()[2, 2]) == pytest.approx(0.02, abs=2e-3)


def test_snapshots_and_envs_idx_restore_the_variants_state():
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane())
    body = scene.add_entity(morph=[gs.morphs.Sphere(**SPHERE), gs.morphs.Mesh(file=assets.path("pebble.obj"),
                                                                             pos=(0.0, 0.1, 0.1))])
    scene.build(n_envs=3)
    assert body.variant_of_env.tolist() == [0, 0, 1]
    snapshot = scene.get_state()
    for _ in range(5):
        scene.step()
    after = body.get_pos().clone()
    other = after[1].clone()
    scene.reset(state=snapshot, envs_idx=[0, 2])
    assert torch.equal(body.get_pos()[1], other)  # untouched
    for _ in range(5):
        scene.step()
    assert torch.equal(body.get_pos()[[0, 2]], after[[0, 2]])  # replayed bit for bit


def test_what_cannot_be_a_heterogeneous_entity_is_refused():
    scene = gs.Scene()
    with pytest.raises(gs.OptionError, match="same fixed="):
        scene.add_entity(morph=[gs.morphs.Box(**BOX), gs.morphs.Sphere(fixed=True, **SPHERE)])
    with pytest.raises(gs.OptionError, match="Plane"):
        scene.add_entity(morph=[gs.morphs.Box(**BOX), gs.morphs.Plane()])
    with pytest.raises(gs.OptionError, match="non-empty list"):
        scene.add_entity(morph=[])
    with pytest.raises(gs.OptionError, match="kinematic structure"):
        scene.add_entity(morph=[gs.morphs.Box(**BOX), gs.morphs.MJCF(file=assets.path("pendulum.xml"))])
    with pytest.raises(gs.OptionError, match="rigid solver"):
        scene.add_entity(morph=[gs.morphs.Box(**BOX), gs.morphs.Sphere(**SPHERE)], material=gs.materials.MPM.Elastic())
    assert not scene.entities
    grad = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True))
    with pytest.raises(gs.OptionError, match="requires_grad"):
        grad.add_entity(morph=[gs.morphs.Box(**BOX), gs.morphs.Sphere(**SPHERE)])
