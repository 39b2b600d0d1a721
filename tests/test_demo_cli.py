"""The README's main job (`genesis-core demo`) and the CLI entry points. The demo scene is made of the parts the
plugins contribute (hook register_demo_parts); the core names none of their entities."""

import ast
import subprocess
import sys

import pytest

import genesis_core as gs
from genesis_core import demo, plugins

from .conftest import python_env


def _springs_part():
    chains = gs.materials.SpringChain
    return {"entities": [
        (gs.morphs.Cylinder(pos=(0.0, 0.0, 1.5), height=1.0, radius=0.01, euler=(0.0, 60.0, 0.0)),
         chains(n_nodes=12, stiffness=2000.0, damping=0.2)),
        (gs.morphs.Capsule(pos=(1.0, 0.0, 2.0), height=0.5, radius=0.01, euler=(30.0, 45.0, 0.0)),
         chains(n_nodes=6, anchored=False, stiffness=800.0)),
    ]}


class SpringsDemoPart:
    """Two spring chains as a part of the demo, contributed through the hook as a third-party plugin would (the
    example spring-chain package registers no demo part of its own)."""

    @gs.hookimpl
    def register_demo_parts(self, register):
        register("springs", _springs_part)


@pytest.fixture
def with_springs():
    if "springs" in plugins.registry().demo_parts:
        yield
        return
    plugins.register_plugin(SpringsDemoPart(), name="springs-demo")
    yield
    plugins.unregister_plugin("springs-demo")


def test_demo_continuation_matches_bitwise(tmp_path, with_springs):
    lines = []
    config = dict(demo.DEFAULTS, n_envs=3, steps_before_checkpoint=15, steps_after_checkpoint=15)
    assert demo.run(config, checkpoint_path=str(tmp_path / "demo.ckpt"), log=lines.append)
    text = "\n".join(lines)
    assert ("demo parts: fem (1 entity, plugin fem), mpm (1 entity, plugin mpm), pbd (1 entity, plugin pbd), "
            "rigid (4 entities, plugin rigid), sph (1 entity, plugin sph), springs (2 entities") in text
    assert "matches the original run: yes (bitwise)" in text
    for key in ("SpringChainSolver.pos", "MPMSolver.F", "RigidSolver.qpos", "SPHSolver.kappa", "FEMSolver.pos",
                "PBDSolver.free"):
        assert key in text
    assert (tmp_path / "demo.ckpt").exists()


def test_demo_command_runs_in_a_fresh_process(tmp_path):
    out = subprocess.run([sys.executable, "-m", "genesis_core.cli", "demo", "--n-envs", "2", "--steps", "10",
                          "--checkpoint", str(tmp_path / "d.ckpt"), "--video", str(tmp_path / "demo.gif")],
                         capture_output=True, text=True, env=python_env())
    assert out.returncode == 0, out.stderr[-2000:]
    assert "yes (bitwise)" in out.stdout and "RigidSolver.qpos" in out.stdout and "MPMSolver.pos" in out.stdout
    assert "SPHSolver.pos" in out.stdout
    assert f"recorded 5 frames of environment 0: {tmp_path / 'demo.gif'}" in out.stdout  # one every second step


def test_demo_records_environment_0_and_still_matches_bitwise(tmp_path, monkeypatch):
    """--video: a frame every second step of environment 0 before the checkpoint, with the scene drawn in it (the floor and
    the bodies: many colours), and the continuation still bitwise; a file that is neither .mp4 nor .gif is
    refused before anything is built."""
    import imageio.v2 as imageio
    import numpy as np

    monkeypatch.setitem(demo.VIDEO, "res", (64, 48))
    lines = []
    config = dict(demo.DEFAULTS, n_envs=2, steps_before_checkpoint=6, steps_after_checkpoint=3)
    assert demo.run(config, log=lines.append, video=str(tmp_path / "demo.gif"))
    assert "matches the original run: yes (bitwise)" in "\n".join(lines)
    frames = imageio.mimread(str(tmp_path / "demo.gif"))
    assert len(frames) == 3 and frames[0].shape[:2] == (48, 64)  # after steps 2, 4 and 6
    assert len(np.unique(frames[-1][..., :3].reshape(-1, 3), axis=0)) > 20
    with pytest.raises(gs.OptionError, match=".mp4 or .gif"):
        demo.run(config, log=lines.append, video=str(tmp_path / "demo.avi"))


def test_demo_without_any_solver_plugin_says_so():
    out = subprocess.run([sys.executable, "-m", "genesis_core.cli", "demo", "--steps", "1"], capture_output=True,
                         text=True, env=python_env(GENESIS_CORE_PLUGINS="none"))
    assert out.returncode == 2 and "the demo scene is empty" in out.stderr
    assert "register_demo_parts" in out.stderr


def test_the_core_names_no_part_of_the_demo_scene():
    """Every entity, material and solver option of the demo comes from a plugin's register_demo_parts."""
    reg = plugins.registry()
    assert reg.origin[("demo part", "rigid")] == "rigid" and reg.origin[("demo part", "mpm")] == "mpm"
    tree = ast.parse(open(demo.__file__, encoding="utf-8").read())
    words = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    words |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    words |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    named = {w for w in words for plugin_word in ("Rigid", "MPM", "Spring", "URDF", "MJCF", "Box", "Plane", "@")
             if plugin_word in w}
    assert named == set()


class _Parts:
    def __init__(self, **parts):
        self.parts = parts

    @gs.hookimpl
    def register_demo_parts(self, register):
        for name, part in self.parts.items():
            register(name, part)


@pytest.fixture
def demo_parts():
    names = []

    def register(**parts):
        names.append(plugins.register_plugin(_Parts(**parts), name=f"demo-parts-{len(names)}"))

    yield register
    for name in names:
        plugins.unregister_plugin(name)


def _missing():
    return gs.materials.NoSuchMaterial()


def test_bad_demo_parts_are_refused_naming_the_plugin(demo_parts):
    demo_parts(malformed=lambda: [("not", "a dict")],
               left_out=lambda: {"entities": [(gs.morphs.Box(), _missing())]},
               wide=lambda: {"options": {"mpm_options": gs.options.MPMOptions(grid_density=8)}, "entities": []},
               narrow=lambda: {"options": {"mpm_options": gs.options.MPMOptions(grid_density=16)}, "entities": []})
    with pytest.raises(gs.GenesisError, match=r"demo part 'malformed' of plugin 'demo-parts-0' returned .*expected a "
                                              r"dict with 'entities'"):
        demo.build_scene(dict(demo.DEFAULTS, parts=["malformed"]), log=lambda *_: None)
    with pytest.raises(gs.GenesisError, match=r"demo parts 'narrow' and 'wide' give different mpm_options"):
        demo.build_scene(dict(demo.DEFAULTS, parts=["wide", "narrow"]), log=lambda *_: None)
    lines = []
    with pytest.raises(gs.GenesisError, match="the demo scene is empty"):
        demo.build_scene(dict(demo.DEFAULTS, parts=["left_out"]), log=lines.append)
    assert "left out the demo part 'left_out' of plugin 'demo-parts-0'" in lines[0] and "NoSuchMaterial" in lines[0]
    with pytest.raises(gs.GenesisError, match=r"demo parts \['nowhere'\] are not registered"):
        demo.build_scene(dict(demo.DEFAULTS, parts=["nowhere"]), log=lambda *_: None)
    with pytest.raises(gs.GenesisError, match="registered demo part 'x' as 3: expected a name and a callable"):
        demo_parts(x=3)
        plugins.registry()
