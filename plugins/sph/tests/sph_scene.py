"""The SPH tests' scene builder."""

import genesis_core as gs


def make(entities, n_envs=0, dt=2e-3, substeps=4, gravity=(0, 0, -9.81), **sph):
    """A scene of SPH entities [(morph, material)] with SPHOptions(**sph) over the defaults below."""
    opts = dict(lower_bound=(0, 0, 0), upper_bound=(0.2, 0.2, 1.0), particle_size=0.02)
    opts.update(sph)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
                     sph_options=gs.options.SPHOptions(**opts))
    out = [scene.add_entity(m, material=mat) for m, mat in entities]
    scene.build(n_envs=n_envs)
    return scene, out
