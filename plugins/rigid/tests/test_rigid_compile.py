"""The model compiler (genesis_rigid.compile) on its own: NumPy in, a RigidModel out, with no Taichi runtime."""

import subprocess
import sys

import pytest

from genesis_core.testing import python_env, shared_assets_path

CHILD = r"""
import sys
import numpy as np
import taichi.lang.impl as impl
import genesis_core as gs
from genesis_rigid.compile import RigidModel, compile_model
from genesis_rigid.layout import DI_PARENT, LF_MASS, LI_PARENT
from genesis_rigid.material import Rigid
from genesis_rigid.options import RigidOptions
from genesis_rigid.robots import describe


class Entity:  # what the compiler reads of an entity: its description, material, index and base placement
    def __init__(self, idx, morph):
        self.idx, self.morph, self.material = idx, morph, Rigid()
        self.robot = describe(morph, self.material)

    def place(self, pos, quat):
        from genesis_core.rotations import quat_mul, rotate
        return np.asarray(self.morph.pos) + rotate(self.morph.quat, pos), quat_mul(self.morph.quat, quat)


morphs = [gs.morphs.Plane(), gs.morphs.Box(pos=(0, 0, 0.5), size=(0.1, 0.2, 0.3))]
if len(sys.argv) > 1:
    morphs.append(gs.morphs.MJCF(default_armature=None, file=sys.argv[1]))
m = compile_model([Entity(i, x) for i, x in enumerate(morphs)], RigidOptions(), gs.options.SimOptions(),
                  float64=True)
assert impl.get_runtime().prog is None, "the compiler started a Taichi runtime"
assert isinstance(m, RigidModel)
assert all(isinstance(a, np.ndarray) for a in m.arrays.values())
# the box: one free joint (7 coordinates, 6 dofs) on one link of mass rho * volume
assert m.entity_ranges[1][:6] == (1, 2, 0, 6, 0, 7), m.entity_ranges
assert abs(m.arrays["link_f"][1, LF_MASS] - Rigid().rho * 0.1 * 0.2 * 0.3) < 1e-12
assert list(m.qpos0[:7]) == [0, 0, 0.5, 1, 0, 0, 0]
# parents come before children; a dof's parent dof is before it
assert all(m.arrays["link_i"][l, LI_PARENT] < l for l in range(m.n_links))
assert all(m.arrays["dof_i"][d, DI_PARENT] < d for d in range(m.n_dofs))
# the box and the plane collide: one candidate pair with its 8 contact slots
assert m.collision and m.n_pairs >= 1 and m.n_slots >= 8
if len(sys.argv) > 1:  # the panda: 11 links, 9 dofs after the box's 6, a fixed tendon
    assert m.n_dofs == 6 + 9 and m.n_links == 2 + 11 and len(m.tendons) == 1, (m.n_dofs, m.n_links)
print("ok", m.n_links, m.n_dofs, m.n_geoms, m.n_pairs)
"""


def test_models_compile_without_a_taichi_runtime(request):
    """compile_model packs a plane, a free box and (where ../shared/assets is) the panda without gs.init: the
    counts, the box's mass and initial pose, the tree order of links and dofs, and the collision pairs."""
    import os

    panda = os.path.join(shared_assets_path(str(request.config.rootpath)), "mjcf", "franka_emika_panda",
                         "panda.xml")
    extra = [panda] if os.path.exists(panda) else []
    out = subprocess.run([sys.executable, "-c", CHILD, *extra], capture_output=True, text=True, env=python_env(),
                         timeout=300)
    assert out.returncode == 0 and out.stdout.splitlines()[-1].startswith("ok "), out.stdout + out.stderr


def test_the_compiler_refuses_a_dt_that_differs_from_the_scene_and_takes_its_own_gravity():
    """The rigid options' own dt must be the scene's (a gs.OptionError naming it); their own gravity is the rigid
    bodies' (Genesis World's RigidOptions.gravity), None meaning the scene's."""
    import genesis_core as gs
    from genesis_rigid.compile import compile_model
    from genesis_rigid.options import RigidOptions

    with pytest.raises(gs.OptionError, match="dt"):
        compile_model([], RigidOptions(dt=0.5), gs.options.SimOptions(), float64=True)
    own = compile_model([], RigidOptions(gravity=(0, 0, 1)), gs.options.SimOptions(), float64=True)
    assert own.gravity == (0.0, 0.0, 1.0)
    assert compile_model([], RigidOptions(), gs.options.SimOptions(), float64=True).gravity == (0.0, 0.0, -9.81)
