"""Particle emitters (scene.add_emitter, Genesis World's): droplets placed on the solver's lattice and activated from
the emitter's next particle, their length from the speed, recycling, a droplet in free fall, the progress as state
(snapshots, envs_idx, checkpoints), and refusals."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs

G = 9.81
P = 0.04  # particle size


def sph_scene(n_envs=0, max_particles=400, gravity=(0.0, 0.0, -G)):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-3, substeps=2, gravity=gravity),
                     sph_options=gs.options.SPHOptions(particle_size=P, lower_bound=(-0.5, -0.5, 0.0),
                                                       upper_bound=(0.5, 0.5, 2.0)))
    em = scene.add_emitter(material=gs.materials.SPH.Liquid(), max_particles=max_particles)
    scene.build(n_envs=n_envs)
    return scene, em


def emit(em, **kw):
    args = dict(droplet_shape="circle", droplet_size=0.2, pos=(0.0, 0.0, 1.5), direction=(0.0, 0.0, -1.0),
                speed=4.0)
    args.update(kw)
    em.emit(**args)


def test_droplets_are_placed_from_the_next_particle_their_length_from_the_speed():
    scene, em = sph_scene()
    ent = em.entity
    assert ent.n_particles == 400 and int(ent.get_particles_active().sum()) == 0
    # speed * dt = 0.016 m < a particle (0.04): carried until it reaches one, every third step
    counts = []
    for _ in range(6):
        emit(em)
        counts.append(int(ent.get_particles_active().sum()))
        scene.step()
    assert counts == [0, 0, 21, 21, 21, 42]  # a 0.2 m disc of 0.04 m lattice points: 21, once 0.048 m is carried
    active = ent.get_particles_active().bool()
    assert active[:42].all() and not active[42:].any()  # from the first particle on
    # a droplet of a given length: sampled as a cylinder of that height, moving at the speed along the direction
    emit(em, droplet_length=0.12, direction=(1.0, 0.0, -1.0), speed=2.0)
    new = ent.get_particles_vel()[42:42 + 63]
    assert int(ent.get_particles_active().sum()) == 42 + 63
    assert torch.allclose(new, torch.tensor([2 / math.sqrt(2), 0.0, -2 / math.sqrt(2)], dtype=new.dtype).expand(63, 3))


def test_an_emitter_recycles_its_oldest_particles():
    scene, em = sph_scene(max_particles=50)
    nxt = scene.solvers[[s.name for s in scene.solvers].index("EmitterManager")].state.at("next", None)
    # 21 particles a droplet: 0..20, 21..41, then (42 + 21 > 50) from 0 again, as Genesis World recycles
    for want in (21, 0, 21):
        emit(em, droplet_length=0.04)
        assert int(nxt.reshape(-1)[0]) == want
    assert int(em.entity.get_particles_active().sum()) == 42
    with pytest.raises(gs.OptionError, match="max_particles"):
        emit(em, droplet_shape="square", droplet_size=0.4, droplet_length=0.2)


def test_a_droplet_falls_freely_its_centre_of_mass_at_g():
    """One droplet emitted downward at 1 m/s, far from everything: its centre of mass follows z0 - v0 t - g t^2 / 2
    (the fluid's internal forces cancel), to 1e-5 m."""
    scene, em = sph_scene()
    emit(em, droplet_shape="sphere", droplet_size=0.24, speed=1.0, droplet_length=0.04)
    ent = em.entity
    n = int(ent.get_particles_active().sum())
    z0 = float(ent.get_particles_pos()[:n, 2].mean())
    for _ in range(20):
        scene.step()
    t = 20 * 4e-3
    z = float(ent.get_particles_pos()[:n, 2].mean())
    # semi-implicit Euler over 40 substeps of h: z0 - v0 t - g h^2 N (N + 1) / 2
    h, N = 2e-3, 40
    assert abs(z - (z0 - 1.0 * t - G * h * h * N * (N + 1) / 2)) < 1e-5
    assert n == len(np.unique(ent.get_particles_pos()[:n].numpy().round(6), axis=0))


def test_emission_progress_is_state_for_snapshots_envs_idx_and_checkpoints(tmp_path):
    scene, em = sph_scene(n_envs=2)
    for _ in range(4):
        emit(em)
        scene.step()
    snap = scene.get_state()
    scene.save_checkpoint(str(tmp_path / "e.ckpt"))

    def run(s, e):
        for _ in range(5):
            emit(e)
            s.step()
        return e.entity.get_particles_pos().clone(), e.entity.get_particles_active().clone()

    want = run(scene, em)
    scene2, em2 = sph_scene(n_envs=2)
    scene2.load_checkpoint(str(tmp_path / "e.ckpt"))
    got = run(scene2, em2)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    # environment 1 back to the snapshot: it emits from where it was there, environment 0 goes on
    a0 = em.entity.get_particles_active()[0].clone()
    scene.reset(snap, envs_idx=[1])
    assert torch.equal(em.entity.get_particles_active()[0], a0)
    again = run(scene, em)
    assert torch.equal(again[0][1], want[0][1]) and torch.equal(again[1][1], want[1][1])
    assert int(again[1][0].sum()) > int(want[1][0].sum())
    # a state whose progress points outside the emitter is refused by name
    bad = scene.get_state()
    bad.solvers_state[[s.name for s in scene.solvers].index("EmitterManager")].fields["next"][:] = 400
    with pytest.raises(gs.GenesisError, match="next"):
        scene.reset(bad)


def test_an_mpm_emitter_fills_a_box_and_omni_emission_spreads_out():
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2),
                     mpm_options=gs.options.MPMOptions(lower_bound=(-0.5, -0.5, 0.0), upper_bound=(0.5, 0.5, 1.0),
                                                       grid_density=32))
    em = scene.add_emitter(material=gs.materials.MPM.Sand(), max_particles=3000)
    scene.build()
    em.emit_omni(source_radius=0.1, pos=(0.0, 0.0, 0.5), speed=1.0)
    ent = em.entity
    on = ent.get_particles_active().bool()
    p, v = ent.get_particles_pos()[on], ent.get_particles_vel()[on]
    r = (p - torch.tensor([0.0, 0.0, 0.5], dtype=p.dtype)).norm(dim=1)
    assert on.sum() > 50 and (r >= 0.04 - 1e-9).all() and (r <= 0.1 + 1e-9).all()
    assert torch.allclose(v.norm(dim=1), torch.ones_like(r)) and ((v * (p - p.new_tensor([0, 0, 0.5]))).sum(1) > 0).all()
    scene.step()
    assert torch.isfinite(ent.get_particles_pos()).all()


def test_emitters_refuse_bad_input_with_nothing_changed():
    scene, em = sph_scene()
    before = em.entity.get_particles_active().clone()
    for kw, words in [(dict(droplet_shape="star"), "droplet_shape"), (dict(droplet_size=-0.1), "droplet_size"),
                      (dict(droplet_shape="rectangle", droplet_size=0.1), "droplet_size"),
                      (dict(direction=(0.0, 0.0, 0.0)), "direction"), (dict(pos=(0.0, float("nan"), 1.0)), "pos"),
                      (dict(speed=float("inf")), "speed"), (dict(pos=(0.0, 0.0, 5.0), droplet_length=0.1), "domain")]:
        with pytest.raises(gs.OptionError, match=words):
            emit(em, **kw)
        assert torch.equal(em.entity.get_particles_active(), before)
    with pytest.raises(gs.SceneError, match="after scene.build"):
        scene.add_emitter(material=gs.materials.SPH.Liquid())
    s2 = gs.Scene()
    with pytest.raises(gs.OptionError, match="not a particle material"):
        s2.add_emitter(material=gs.materials.Rigid())
    with pytest.raises(gs.OptionError, match="max_particles"):
        s2.add_emitter(material=gs.materials.SPH.Liquid(), max_particles=0)
    with pytest.raises(gs.OptionError, match="requires_grad"):
        gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True)).add_emitter(material=gs.materials.SPH.Liquid())
