"""Scene lifecycle, options and morph validation, reset semantics, and errors raised before any state changes."""

import pickle

import pytest
import torch

import genesis_core as gs

from .test_checkpoint import chain_scene, snapshot


def springs(state, scene):
    """The spring-chain solver's entry of a SimState (entries are aligned with scene.solvers)."""
    return state.solvers_state[scene.solvers.index(scene.spring_chain_solver)]


def test_lifecycle_errors():
    scene = gs.Scene()
    chain = scene.add_entity(gs.morphs.Cylinder(height=0.5, radius=0.01), material=gs.materials.SpringChain())
    for call in (scene.step, scene.get_state, scene.reset):
        with pytest.raises(gs.SceneError, match="before scene.build"):
            call()
    scene.build()
    with pytest.raises(gs.SceneError, match="add_entity after scene.build"):
        scene.add_entity(gs.morphs.Cylinder(height=0.5, radius=0.01), material=gs.materials.SpringChain())
    with pytest.raises(gs.SceneError, match="already called"):
        scene.build()
    with pytest.raises(gs.SceneError, match="built without environments"):
        scene.reset(envs_idx=[0])
    with pytest.raises(gs.SceneError, match="built without environments"):
        chain.set_nodes_vel(torch.zeros(8, 3), envs_idx=[0])


@pytest.mark.parametrize("n_envs", [-1, 1.5, True, "4"])
def test_bad_n_envs(n_envs):
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Cylinder(height=0.5, radius=0.01), material=gs.materials.SpringChain())
    with pytest.raises(gs.OptionError, match="n_envs"):
        scene.build(n_envs=n_envs)
    assert not scene.is_built


@pytest.mark.parametrize("envs_idx, match", [([3], r"\[0, 3\)"), ([-1], r"\[0, 3\)"), ([0.5], "integer indices"),
                                              ([[0, 1]], "1-D sequence"), ([True, False], "boolean mask")])
def test_bad_envs_idx_raises_before_anything_changes(envs_idx, match):
    scene, _ = chain_scene(n_envs=3)
    snap = scene.get_state()
    scene.step()
    before = snapshot(scene)
    with pytest.raises(gs.OptionError, match=match):
        scene.reset(state=snap, envs_idx=envs_idx)
    for k, x in snapshot(scene).items():
        assert torch.equal(x, before[k])
    assert scene.t == 1


def test_structure_properties():
    scene, chain = chain_scene(n_envs=2)
    assert scene.spring_chain_solver in scene.solvers
    assert scene.active_solvers == [scene.spring_chain_solver]
    assert scene.entities == [chain] and chain.solver is scene.spring_chain_solver
    assert scene.t == 0
    scene.step()
    scene.step()
    assert scene.t == 2
    state = scene.get_state()
    assert len(state.solvers_state) == len(scene.solvers)
    sub = state.solvers_state[scene.solvers.index(scene.spring_chain_solver)]
    assert sub.pos.shape == (2, 4, 3) and sub.vel.shape == (2, 4, 3)


def test_missing_plugin_names_the_distribution(monkeypatch):
    """Every first-party plugin is installed here: leave PBD out of the autoload, as a machine without it would."""
    from genesis_core.plugins.manager import AUTOLOAD_ENV, reload_plugins

    monkeypatch.setenv(AUTOLOAD_ENV, "rigid,mpm,sph,fem,springs")
    reload_plugins()
    try:
        _missing_plugin_checks()
    finally:
        monkeypatch.delenv(AUTOLOAD_ENV)
        reload_plugins()


def _missing_plugin_checks():
    scene = gs.Scene()
    with pytest.raises(gs.PluginNotInstalledError, match="genesis-pbd"):
        scene.pbd_solver
    with pytest.raises(gs.PluginNotInstalledError, match="genesis-pbd"):
        gs.materials.PBD
    with pytest.raises(gs.PluginNotInstalledError, match="genesis-pbd"):
        gs.options.PBDOptions
    with pytest.raises(gs.PluginNotInstalledError, match="genesis-pbd"):
        gs.Scene(pbd_options=object())
    with pytest.raises(gs.OptionError, match="unexpected keyword 'fluid'"):
        gs.Scene(fluid=1)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(dt=0), "SimOptions.dt"),
        (dict(dt=-0.01), "SimOptions.dt"),
        (dict(dt=float("nan")), "SimOptions.dt"),
        (dict(substeps=0), "SimOptions.substeps"),
        (dict(substeps=2.0), "SimOptions.substeps"),
        (dict(substeps=4, substeps_local=6), "SimOptions.substeps_local"),
        (dict(gravity=(0, -9.81)), "SimOptions.gravity"),
        (dict(requires_grad="yes"), "SimOptions.requires_grad"),
        (dict(floor_height=float("inf")), "SimOptions.floor_height"),
    ],
)
def test_bad_sim_options_name_the_field(kwargs, field):
    with pytest.raises(gs.OptionError, match=field):
        gs.options.SimOptions(**kwargs)


def test_good_sim_options():
    opts = gs.options.SimOptions(dt=0.005, substeps=4, substeps_local=8, gravity=[0, 0, -1])
    assert opts.gravity == (0.0, 0.0, -1.0) and opts.substep_dt == 0.00125 and opts.n_substeps_local == 8
    assert gs.options.SimOptions().n_substeps_local == 1


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: gs.morphs.Box(size=(1, -1, 1)), "Box.size"),
        (lambda: gs.morphs.Sphere(radius=0), "Sphere.radius"),
        (lambda: gs.morphs.Box(pos=(0, 0)), "Box.pos"),
        (lambda: gs.morphs.Box(quat=(0, 0, 0, 0)), "Box.quat"),
        (lambda: gs.morphs.Box(quat=(1, 0, 0, 0), euler=(0, 0, 0)), "quat or euler"),
        (lambda: gs.morphs.URDF(file="no/such/robot.urdf"), "URDF.file"),
        (lambda: gs.morphs.MJCF(file=3), "MJCF.file"),
        (lambda: gs.morphs.Capsule(radius=0.1, height=-1), "Capsule.height"),
        (lambda: gs.materials.SpringChain(n_nodes=1), "SpringChain.n_nodes"),
        (lambda: gs.materials.SpringChain(stiffness=-5), "SpringChain.stiffness"),
    ],
)
def test_bad_morphs_and_materials_name_the_field(make, field):
    with pytest.raises(gs.OptionError, match=field):
        make()


def test_euler_and_quat_agree():
    q = gs.morphs.Box(euler=(0, 0, 90)).quat
    assert q == pytest.approx((2 ** -0.5, 0, 0, 2 ** -0.5))
    assert gs.morphs.Box(quat=(2, 0, 0, 0)).quat == (1.0, 0.0, 0.0, 0.0)


def test_init_errors():
    with pytest.raises(gs.GenesisError, match="already called"):
        gs.init()
    with pytest.raises(gs.GenesisError, match="backend='tpu'"):
        gs.init(backend="tpu")
    with pytest.raises(gs.GenesisError, match="precision='16'"):
        gs.init(precision="16")


def test_reset_state_registers_it_as_initial_state():
    scene, chain = chain_scene(n_envs=2)
    build_state = scene.get_state()
    for _ in range(3):
        scene.step()
    scene.reset()  # back to the build-time state
    assert scene.t == 0
    assert torch.equal(chain.get_nodes_pos(), springs(build_state, scene).pos)
    for _ in range(5):
        scene.step()
    s5 = scene.get_state()
    for _ in range(2):
        scene.step()
    scene.reset(state=s5)
    s5_pos = springs(s5, scene).pos.clone()
    springs(s5, scene).pos.add_(1.0)  # the registered copy does not alias the caller's tensors
    for _ in range(2):
        scene.step()
    scene.reset()  # now returns to s5, not to the build state
    assert scene.t == 5
    assert torch.equal(chain.get_nodes_pos(), s5_pos)


def test_state_from_another_scene_is_refused_and_nothing_changes():
    a, _ = chain_scene(n_envs=2, n_nodes=4)
    b, _ = chain_scene(n_envs=2, n_nodes=5)
    a.step()
    before = snapshot(a)
    with pytest.raises(gs.SceneError, match=r"SpringChainSolver.pos has shape \(2, 5, 3\)"):
        a.reset(state=b.get_state())
    with pytest.raises(gs.SceneError, match="SimState"):
        a.reset(state={"pos": 1})
    for k, x in snapshot(a).items():
        assert torch.equal(x, before[k])


def test_serializable_state_pickles_without_the_scene():
    scene, _ = chain_scene(n_envs=2)
    state = scene.get_state()
    assert state.scene is scene
    state.serializable()
    blob = pickle.dumps(state)
    assert b"Scene" not in blob
    again = pickle.loads(blob)
    assert torch.equal(springs(again, scene).vel, springs(state, scene).vel)


def test_entity_setters_validate_shape_and_respect_envs_idx():
    scene, chain = chain_scene(n_envs=3)
    before = chain.get_nodes_vel()
    with pytest.raises(gs.OptionError, match=r"set_nodes_vel: expected a value of shape \(2, 4, 3\)"):
        chain.set_nodes_vel(torch.ones(3, 4, 3), envs_idx=[0, 2])
    with pytest.raises(gs.InvalidStateError, match=r"SpringChainSolver.vel\[env 0, index \[0, 0\]\] = nan.*finite"):
        chain.set_nodes_vel(torch.full((3, 4, 3), float("nan")))
    assert torch.equal(chain.get_nodes_vel(), before)
    chain.set_nodes_vel(torch.ones(2, 4, 3), envs_idx=[0, 2])
    after = chain.get_nodes_vel()
    assert torch.equal(after[1], before[1]) and (after[[0, 2]] == 1).all()
    assert chain.get_nodes_vel(envs_idx=[2]).shape == (1, 4, 3)


def test_several_scenes_in_one_process_do_not_collide():
    """Two scenes of different sizes stepped in alternation give what each gives alone."""
    a, _ = chain_scene(n_envs=2, n_nodes=4)
    b, _ = chain_scene(n_envs=5, n_nodes=7)
    for _ in range(6):
        a.step()
        b.step()
    a_alone, _ = chain_scene(n_envs=2, n_nodes=4)
    b_alone, _ = chain_scene(n_envs=5, n_nodes=7)
    for _ in range(6):
        a_alone.step()
    for _ in range(6):
        b_alone.step()
    for x, y in ((a, a_alone), (b, b_alone)):
        for k, v in snapshot(x).items():
            assert torch.equal(v, snapshot(y)[k])


def test_precision_32_and_destroy():
    """Re-initialising in float32 gives float32 state; a scene built before gs.destroy refuses to run."""
    old, _ = chain_scene()
    try:
        gs.destroy()
        gs.init(backend=gs.cpu, precision="32", seed=0)
        with pytest.raises(gs.SceneError, match="gs.destroy"):
            old.step()
        scene, chain = chain_scene(n_envs=2)
        scene.step()
        assert chain.get_nodes_pos().dtype == torch.float32
        assert springs(scene.get_state(), scene).vel.dtype == torch.float32
    finally:
        gs.destroy()
        gs.init(backend=gs.cpu, precision="64", seed=0)


def test_review_edge_cases():
    scene = gs.Scene()
    chain = scene.add_entity(gs.morphs.Cylinder(height=0.5, radius=0.01), material=gs.materials.SpringChain(),
                             surface=None)
    with pytest.raises(gs.SceneError, match="build the scene first"):
        chain.get_nodes_pos()
    with pytest.raises(gs.OptionError, match="unexpected keywords \\['n_env'\\]"):
        scene.build(n_env=4)
    scene.build(n_envs=3, env_spacing=(1.0, 1.0))
    assert scene.n_envs == 3
    with pytest.raises(gs.OptionError, match="appears twice"):
        scene.reset(envs_idx=[1, 1])
    with pytest.raises(gs.OptionError, match="got set"):
        scene.reset(envs_idx={1})
    assert not hasattr(gs.materials, "NoSuchMaterial") and not hasattr(scene, "no_such_solver")
    with pytest.raises(gs.OptionError, match="takes no options"):
        gs.Scene(spring_chain_options=object())


def test_setters_never_attach_solver_storage_to_autograd():
    scene, chain = chain_scene(n_envs=2)
    target = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    chain.set_anchor(target * 2)
    assert scene.spring_chain_solver.state.anchor.grad_fn is None
    state = scene.get_state()
    springs(state, scene).vel.requires_grad_(True)
    scene.reset(state=state)
    assert all(x.grad_fn is None and not x.requires_grad for x in scene.spring_chain_solver.state.tensors.values())


def test_gpu_backend_falls_back_to_the_cpu_with_one_warning():
    import subprocess
    import sys

    from .conftest import python_env

    code = ("import warnings, genesis_core as gs\nwith warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n    gs.init(backend=gs.gpu)\n"
            "ours = [str(x.message) for x in w if 'GPU' in str(x.message)]\nprint(gs.device, len(ours), ours)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=python_env())
    assert out.returncode == 0, out.stderr[-2000:]
    if "cuda" not in out.stdout:
        assert out.stdout.splitlines()[-1].startswith("cpu 1 ") and "running on the CPU" in out.stdout


def test_python_floats_reach_float64_state_exactly():
    scene, chain = chain_scene(n_envs=2)
    chain.set_anchor([[0.1, 0.2, 2.2], [0.3, 0.4, 0.7]])
    assert chain.solver.state.anchor[:, 0].tolist() == [[0.1, 0.2, 2.2], [0.3, 0.4, 0.7]]


def test_the_substep_recipe_and_its_reverse_run_the_stages_in_order():
    """genesis_core.stepping: forward pre-coupling (every solver), coupler, post-coupling; the reverse re-runs
    the forward, then the *_grad twins in the opposite order."""
    from genesis_core.stepping import substep, substep_grad

    calls = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def __getattr__(self, method):
            return lambda f: calls.append((self.name, method, f))

    solvers, coupler = [Recorder("A"), Recorder("B")], Recorder("coupler")
    substep(solvers, coupler, 3)
    forward = [("A", "substep_pre_coupling", 3), ("B", "substep_pre_coupling", 3), ("coupler", "couple", 3),
               ("A", "substep_post_coupling", 3), ("B", "substep_post_coupling", 3)]
    assert calls == forward
    calls.clear()
    substep_grad(solvers, coupler, 1)
    assert calls == [(n, m, 1) for n, m, _ in forward] + [
        ("B", "substep_post_coupling_grad", 1), ("A", "substep_post_coupling_grad", 1), ("coupler", "couple_grad", 1),
        ("B", "substep_pre_coupling_grad", 1), ("A", "substep_pre_coupling_grad", 1)]
