"""The fixed scene of reference_scene.py against the state recorded after 100 steps. On the machine that
recorded it the match is bitwise; elsewhere (another CPU's code generation) it must agree to rounding, as 100 steps
of plastic return mappings amplify it: on one 2-core machine of the same kind, unchanged code differed by 2e-14
(rigid velocities) to 4e-9 (MPM's deformation gradients), relative; a change of physics moves them far more."""

import numpy as np
import pytest

from reference_scene import DATA, build, state_after


# fields declared after the recording: the rigid solver's per-environment parameters and applied wrenches (their
# values at the recording were the model's, which the compared fields reflect), its limits' warm start (the scene
# has no limited joint: zero), its equality slots, the poses of the links welded to the world (the model's) and the
# kinematic entities' configuration (none here: a padding entry), the muscles' actuation and fibres and the hybrid
# skins' attachments (none here: -1 and zeros); any other new field fails
ADDED_SINCE = {"RigidSolver." + name for name in (
    "dofs_damping", "dofs_armature", "dofs_stiffness", "dofs_force_lo", "dofs_force_hi", "links_inertial_mass",
    "links_mass_shift", "links_com_shift", "geoms_friction_ratio", "links_applied_wrench", "links_step_wrench",
    "limit_impulse", "equality_impulse", "eq_type", "eq_obj", "eq_data", "eq_active", "fixed_base_pos",
    "fixed_base_quat", "kinematic_qpos")} | {"MPMSolver.actu", "MPMSolver.mdir", "MPMSolver.attach_link",
                                              "MPMSolver.attach_local"}


def test_the_reference_scene_is_what_it_was():
    ref = np.load(DATA)
    got = state_after(build())
    assert set(ref.files) <= set(got) and set(got) - set(ref.files) <= ADDED_SINCE, \
        f"fields new since the recording: {sorted(set(got) - set(ref.files))}; missing: {sorted(set(ref.files) - set(got))}"
    assert all(np.isfinite(x).all() for x in got.values())
    assert not got["RigidSolver.limit_impulse"].any()
    differing = {}
    for key in ref.files:
        a, b = got[key], ref[key]
        assert a.shape == b.shape, key
        if not np.array_equal(a, b):
            scale = max(float(np.abs(b).max()), 1.0)
            differing[key] = float(np.abs(a - b).max()) / scale
    assert all(err < 1e-7 for err in differing.values()), f"relative differences from the reference: {differing}"
    if differing:
        pytest.skip(f"matches the reference to rounding, not bitwise (another CPU?): {differing}")
