"""Plugin discovery and the hooks: entry points, the autoload variable, hand registration, the coupler,
duplicate and misspelled registrations, and a third-party package installed with pip and found by gs.Scene."""

import os
import shutil
import subprocess
import sys
import textwrap

import pluggy
import pytest

import genesis_core as gs
from genesis_core import plugins

from . import toy_plugin
from .conftest import REPO, python_env


@pytest.fixture
def toy():
    name = plugins.register_plugin(toy_plugin, name="toy")
    toy_plugin.CALLS.clear()
    yield toy_plugin
    plugins.unregister_plugin(name)


def cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "genesis_core.cli", *args], capture_output=True, text=True,
                          env=python_env(**env))


def test_entry_points_are_found_and_listed():
    reg = plugins.registry()
    names = {p.name: p for p in reg.plugins}
    assert {"rigid", "mpm", "springs"} <= set(names)
    assert names["springs"].distribution == "genesis-springs" and names["springs"].version == "0.1.0"
    assert reg.solvers["SpringChainSolver"].__module__ == "genesis_springs.solver"
    out = cli("plugins").stdout
    assert "genesis-springs" in out and "solver SpringChainSolver" in out and "genesis-rigid" in out


def test_autoload_can_be_turned_off_or_restricted():
    off = cli("plugins", GENESIS_CORE_PLUGINS="none").stdout
    assert "no plugins loaded" in off and "springs     genesis-springs     0.1.0     installed, not loaded" in off
    only = cli("plugins", GENESIS_CORE_PLUGINS="genesis_springs").stdout  # a distribution name, any spelling
    assert "solver SpringChainSolver" in only and "rigid       genesis-rigid       0.1.0     installed, not" in only
    typo = cli("plugins", GENESIS_CORE_PLUGINS="sprngs")
    assert "match no installed plugin" in typo.stderr and "'springs'" in typo.stderr
    script = "import genesis_core as gs\ntry:\n    gs.materials.SpringChain\nexcept gs.PluginNotInstalledError as e:\n    print(e)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=python_env(GENESIS_CORE_PLUGINS="none")).stdout
    assert "not provided by any loaded plugin" in out


def test_coupler_runs_between_pre_and_post_coupling_only_when_both_solvers_are_active(toy):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, substeps=2))
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.3), radius=0.05), material=gs.materials.ToyBall())
    scene.add_entity(gs.morphs.Plane(pos=(0, 0, 0.1)), material=gs.materials.ToyFloor())
    scene.build(n_envs=2)
    assert [type(c).__name__ for c in scene.coupler.couplings] == ["BallFloorCoupling"]
    assert [s.name for s in scene.solvers[:2]] == ["ToyBallSolver", "ToyFloorSolver"]  # by `order`
    scene.step()
    one_substep = [("pre", "ToyBallSolver"), ("pre", "ToyFloorSolver"), ("couple", "ToyBallSolver+ToyFloorSolver"),
                   ("post", "ToyBallSolver"), ("post", "ToyFloorSolver")]
    assert toy.CALLS == one_substep * 2
    lowest = 1.0
    for _ in range(100):
        scene.step()
        lowest = min(lowest, float(scene.toy_ball_solver.state.pos[scene._frame][..., 2].min()))
    assert lowest >= 0.1, "the ball went through the floor"
    assert float(scene.toy_floor_solver.state.impulse[..., 2].min()) > 0, "no impulse was handed back"
    assert ball in scene.entities

    alone = gs.Scene()
    alone.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.3)), material=gs.materials.ToyBall())
    alone.build()
    assert alone.coupler.couplings == [] and alone.toy_floor_solver.is_active is False
    floor_index = alone.solvers.index(alone.toy_floor_solver)
    assert alone.get_state().solvers_state[floor_index] is None  # aligned with scene.solvers, None when inactive


def test_a_name_registered_twice_names_both_plugins():
    class Dup:
        @gs.hookimpl
        def register_materials(self, register):
            register("SpringChain", toy_plugin.ToyBall)

    plugins.register_plugin(Dup(), name="dup")
    try:
        with pytest.raises(gs.GenesisError, match="material 'SpringChain' is registered by both plugin '.*' and plugin '.*'"):
            plugins.registry()
    finally:
        plugins.unregister_plugin("dup")
    assert "SpringChain" in plugins.registry().materials


class _NotAMaterial:
    solver = "ToyBallSolver"


class _NamesNoSolver(gs.materials.Material):
    pass


class _Namespace:
    Fine = toy_plugin.ToyBall
    Wrong = _NotAMaterial


@pytest.mark.parametrize("key, material, message", [
    ("Plain", _NotAMaterial, r"material 'Plain' .*_NotAMaterial'>\), which is not a gs.materials.Material subclass"),
    ("Instance", toy_plugin.ToyBall(), r"material 'Instance' as .*expected a gs.materials.Material subclass"),
    ("Silent", _NamesNoSolver, r"material Silent \(_NamesNoSolver\), which does not name its solver"),
    ("Toys", _Namespace, r"material Toys.Wrong .* not a gs.materials.Material subclass"),
    ("Empty", type("Empty", (), {}), r"material 'Empty' .* not a gs.materials.Material subclass \(nor a namespace"),
    ("not a name", toy_plugin.ToyBall, r"a material under 'not a name': the name must be a public identifier"),
])
def test_a_bad_material_is_refused_naming_the_plugin(key, material, message):
    """Materials are checked at registration as options classes are: the base class, the `solver` attribute."""

    class Bad:
        @gs.hookimpl
        def register_materials(self, register):
            register(key, material)

    plugins.register_plugin(Bad(), name="bad-materials")
    try:
        with pytest.raises(gs.GenesisError, match=r"plugin 'bad-materials' registered " + message):
            plugins.registry()
    finally:
        plugins.unregister_plugin("bad-materials")
    assert key not in plugins.registry().materials


def test_a_misspelled_hook_is_refused():
    class Typo:
        @gs.hookimpl
        def register_solver(self, register):  # the spec is register_solvers
            pass

    with pytest.raises(pluggy.PluginValidationError, match="register_solver"):
        plugins.register_plugin(Typo(), name="typo")
    assert "typo" not in [p.name for p in plugins.registry().plugins]


def test_third_party_package_installed_with_pip_is_found(tmp_path):
    """pip-install the example solver into a fresh folder and drive it from another process through gs.Scene,
    get_state/reset and checkpoints; the copy found must be the freshly installed one."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(REPO, "examples", "custom_solver"), src,
                    ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(src)], check=True, env=python_env())
    script = textwrap.dedent(f"""
        import sys, torch, genesis_core as gs, genesis_springs
        assert genesis_springs.__file__.startswith({str(site)!r}), genesis_springs.__file__
        gs.init(precision="64")
        def make():
            scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, substeps=4))
            chain = scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, 1), height=0.5, radius=0.01, euler=(0, 30, 0)),
                                     material=gs.materials.SpringChain(n_nodes=6))
            scene.build(n_envs=4)
            return scene, chain
        scene, chain = make()
        for _ in range(20):
            scene.step()
        snap = scene.get_state()
        scene.save_checkpoint({str(tmp_path / "c.ckpt")!r})
        for _ in range(20):
            scene.step()
        end = chain.get_nodes_pos()
        scene.reset(state=snap, envs_idx=[1, 3])
        scene.reset(state=snap)
        for _ in range(20):
            scene.step()
        assert torch.equal(chain.get_nodes_pos(), end)
        other, chain2 = make()
        other.load_checkpoint({str(tmp_path / "c.ckpt")!r})
        for _ in range(20):
            other.step()
        assert torch.equal(chain2.get_nodes_pos(), end) and other.t == 40
        print("third-party solver OK", scene.spring_chain_solver.name)
    """)
    env = python_env(GENESIS_CORE_PLUGINS="springs")
    env["PYTHONPATH"] = str(site) + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "third-party solver OK SpringChainSolver" in out.stdout
