"""Hook specifications of genesis-core: what a plugin may contribute.

A plugin is a module (or any object) with functions marked ``@gs.plugins.hookimpl`` and named like the specs
below, exposed through an entry point in the group ``genesis_core.plugins``::

    [project.entry-points."genesis_core.plugins"]
    springs = "genesis_springs.plugin"

Every hook receives a `register` callback and returns nothing. Hooks are called once, the first time the engine
needs the registry (the first `gs.Scene`, `gs.options.X` or `gs.materials.X` lookup), in pluggy's order (last
registered first); a name registered twice is an error that names both plugins. First-party plugins load
through exactly this path.
"""

import pluggy

hookspec = pluggy.HookspecMarker("genesis_core")
hookimpl = pluggy.HookimplMarker("genesis_core")


@hookspec
def register_solvers(register):
    """Contribute solver classes.

    register(solver_cls): `solver_cls` implements `gs.Solver` (usually by subclassing `gs.SolverBase`). It is
    named by its class name, which prefixes its checkpoint keys (``"RigidSolver.qpos"``); its `short_name` gives
    `scene.<short_name>_solver` and the `Scene(<short_name>_options=...)` keyword; entities whose material is an
    instance of its `material_class` are routed to it. Every scene instantiates every registered solver;
    those without entities stay inactive.
    """


@hookspec
def register_options(register):
    """Contribute options classes.

    register(options_cls): a subclass of `gs.options.Options`, exposed as ``gs.options.<options_cls.__name__>``.
    """


@hookspec
def register_materials(register):
    """Contribute materials.

    register(name, material): `material` (a `gs.materials.Material` subclass, or a namespace class holding
    several, like ``MPM`` with ``MPM.Elastic``) is exposed as ``gs.materials.<name>``. Checked at registration:
    `name` a public identifier, every class a `gs.materials.Material` subclass whose class attribute `solver`
    names its solver class; anything else is an error naming the plugin.
    """


@hookspec
def register_couplings(register):
    """Contribute couplings between two solvers.

    register(solver_a, solver_b, coupling_cls): solver class names, and a class implementing
    `gs.coupler.Coupling`. It runs in every substep, between the solvers' pre- and post-coupling parts, only
    when both solvers are installed and active in the scene. Couplings of one step run in registration order.
    solver_a may be `gs.coupler.ANY_COLLIDER`: one instance then runs for every active solver that exposes
    `collider_view(f)` (solver_b excepted), unless a coupling is registered for that pair by name (in either
    order), which takes its place.
    """


@hookspec
def register_test_scenes(register):
    """Contribute small scenes for the engine's shared property tests (round trips, determinism, envs_idx).

    register(name, factory): `factory(n_envs) -> (scene, drive)` adds entities to a fresh `gs.Scene`, builds it
    with `n_envs` and returns it with `drive(scene, i_step)`, a callable that applies the inputs of step i
    (controls, forces; it may do nothing) before `scene.step()`. Keep them small: they run many times.
    """


@hookspec
def register_assets(register):
    """Contribute folders of model files (robot descriptions, meshes) that examples refer to.

    register(name, folder): a file in it is referred to as ``"@<name>/<file>"`` and resolved with
    `genesis_core.plugins.registry().asset_path("@<name>/<file>")`.
    """


@hookspec
def register_demo_parts(register):
    """Contribute a part of the demo scene: what `genesis-core demo` (`genesis_core.demo.run`) builds, runs,
    checkpoints, restores into a freshly built scene and continues, checking that the continuation is bitwise
    the original one. The core names no entity of it; each plugin adds its own solver's.

    register(name, part): `part()` returns a dict with
      ``"entities"``: a list of ``(morph, material)`` pairs, added with `scene.add_entity(morph, material)` in
          order (a few entities: by default the demo steps 8 environments 300 times, 10 substeps each);
      ``"options"`` (optional): `gs.Scene` keywords and the options objects they take
          (``{"mpm_options": gs.options.MPMOptions(...)}``); two parts that give one keyword must agree.
    It is called every time the demo builds its scene (twice per run), after `gs.init`, so it returns new
    objects and may look up `gs.options` / `gs.materials` then. The parts are added in the order of their names;
    the simulation options (dt, substeps) and n_envs are the demo's. A part that raises
    `gs.PluginNotInstalledError` is left out, and the demo says so.
    """
