"""FEM bodies below the floor (Genesis World's FEM has no domain bounds and its floor only takes away the downward
velocity of what is at or below it) and the entity's mass per environment (float64, Box meshes of 2 x 2 x 2
cells)."""

import numpy as np
import pytest
import torch

import genesis_core as gs

G = 9.81


def scene_with_box(z, n_envs=0, use_implicit_solver=False, gravity=(0.0, 0.0, -G)):
    """A 5 cm soft box centred at height z, with the default FEM options (the floor: SimOptions' floor_height, 0)."""
    opts = dict(use_implicit_solver=True, n_newton_iterations=2, n_pcg_iterations=200, pcg_threshold=1e-10,
                damping_alpha=0.0, damping_beta=0.0) if use_implicit_solver else {}
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3, substeps=5, gravity=gravity),
                     fem_options=gs.options.FEMOptions(**opts))
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, z), size=(0.05, 0.05, 0.05), maxvolume=0.025 ** 3 / 3),
                           material=gs.materials.FEM.Elastic(E=1e5, nu=0.3, rho=1000.0))
    scene.build(n_envs=n_envs)
    return scene, box


@pytest.mark.parametrize("solver", ["explicit", "implicit"])
def test_a_body_below_the_floor_is_accepted_and_does_not_descend(solver):
    """The default domain takes a body half a metre below the floor at z = 0, as Genesis World does, whose floor
    takes away the downward velocity of what is at or below it. Under gravity the floor holds the body where it is
    (no vertex descends, none is lifted onto the floor: its heights stay exact, the rest moves by round-off). Thrown
    upwards at 0.5 m/s it rises freely, v^2 / 2g = 12.7 mm, and stays at the top, still below the floor, without
    deforming. The rise within 1 mm (the integrators' error over the 51 ms of the throw, in 1 ms substeps)."""
    scene, box = scene_with_box(-0.5, use_implicit_solver=(solver == "implicit"))
    X = box.get_particles_pos().clone()
    assert float(X[:, 2].max()) < -0.45
    for _ in range(10):
        scene.step()
    assert torch.equal(box.get_particles_pos()[:, 2], X[:, 2]), "the floor moved a body that lies below it"
    assert torch.allclose(box.get_particles_pos(), X, rtol=0, atol=1e-12)
    assert float(box.get_particles_vel()[:, 2].abs().max()) == 0.0
    box.set_velocity([0.0, 0.0, 0.5])
    top = []
    for _ in range(30):  # 0.15 s: past the top of the throw, 51 ms
        scene.step()
        top.append(float((box.get_particles_pos()[:, 2] - X[:, 2]).mean()))
    rise = top[-1]
    assert abs(rise - 0.5 ** 2 / (2 * G)) < 1e-3, f"it rose {rise:.4g} m"
    assert top[-1] == top[-10], "it came down below the floor"
    x = box.get_particles_pos()
    assert torch.allclose(x - x.mean(0), X - X.mean(0), atol=1e-9), "the body deformed"
    assert float(x[:, 2].max()) < 0.0


def test_the_domain_still_bounds_a_body_and_a_state():
    """The default domain is (-100, 100) m along every axis: a body or a state outside it is refused, naming the
    domain; a position below the floor inside it is taken (set_position)."""
    scene = gs.Scene(fem_options=gs.options.FEMOptions())
    with pytest.raises(gs.OptionError, match="domain"):
        scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, -200.0), size=(0.05, 0.05, 0.05)),
                         material=gs.materials.FEM.Elastic())
    scene, box = scene_with_box(0.5)
    box.set_position([0.0, 0.0, -1.0])
    assert float(box.get_pos()[2]) == pytest.approx(-1.0, abs=1e-12)
    with pytest.raises(gs.OptionError, match="domain"):
        box.set_position([0.0, 0.0, -150.0])


@pytest.mark.parametrize("n_envs", [0, 2])
def test_get_mass_is_per_environment(n_envs):
    """get_mass gives the entity's mass (rho times its volume) per environment, `([n_envs,])`, as Genesis World's
    particle entities do, and for the environments envs_idx."""
    scene, box = scene_with_box(0.5, n_envs=n_envs)
    mass = box.get_mass()
    assert torch.is_tensor(mass) and tuple(mass.shape) == ((n_envs,) if n_envs else ())
    np.testing.assert_allclose(mass.numpy(), 1000.0 * 0.05 ** 3, rtol=1e-12)
    if n_envs:
        assert tuple(box.get_mass(envs_idx=[1]).shape) == (1,)
