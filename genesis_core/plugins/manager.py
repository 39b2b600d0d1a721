"""Discovery of plugins through the entry-point group ``genesis_core.plugins``, and the registry they fill.

The environment variable ``GENESIS_CORE_PLUGINS`` controls autoload: unset or ``all`` loads every installed
plugin; ``none`` (or ``0``) loads none (plugins can then be registered by hand with `register_plugin`); a
comma-separated list of entry-point or distribution names loads only those.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import warnings
from dataclasses import dataclass, field

import pluggy

from ..bases import Material, Options
from ..errors import GenesisError, PluginNotInstalledError
from . import hookspecs

ENTRY_POINT_GROUP = "genesis_core.plugins"
AUTOLOAD_ENV = "GENESIS_CORE_PLUGINS"

# The first-party plugins: which distribution provides a name, so that asking for a missing one says what to
# install. The core imports none of them.
FIRST_PARTY = {
    "genesis-rigid": ("rigid", "RigidSolver", "RigidOptions", "Rigid"),
    "genesis-mpm": ("mpm", "MPMSolver", "MPMOptions", "MPM"),
    "genesis-sph": ("sph", "SPHSolver", "SPHOptions", "SPH"),
    "genesis-pbd": ("pbd", "PBDSolver", "PBDOptions", "PBD"),
    "genesis-fem": ("fem", "FEMSolver", "FEMOptions", "FEM"),
}
SOLVER_MEMBERS = (
    "short_name", "options_class", "material_class", "state_fields", "supports_grad", "add_entity", "build",
    "process_input", "substep_pre_coupling", "substep_post_coupling", "get_state", "check_state", "set_state",
    "signature",
)
_PROVIDER = {name: dist for dist, names in FIRST_PARTY.items() for name in names}


def missing_plugin_error(what: str, name: str) -> PluginNotInstalledError:
    dist = _PROVIDER.get(name)
    if dist is None:
        return PluginNotInstalledError(
            f"{what} {name!r} is not provided by any loaded plugin; `genesis-core plugins` lists what is installed."
        )
    folder = dist.split("-", 1)[1]
    try:
        installed = md.version(dist)
    except md.PackageNotFoundError:
        installed = None
    if installed is None:
        return PluginNotInstalledError(
            f"{what} {name!r} is provided by the plugin distribution {dist!r}, which is not installed: "
            f"pip install {dist}  (from a clone: pip install -e plugins/{folder})."
        )
    if not any(info.distribution == dist for info in _infos.values()):
        return PluginNotInstalledError(
            f"{what} {name!r} is provided by the plugin distribution {dist!r} ({installed}), which is installed but "
            f"not loaded: ${AUTOLOAD_ENV}={os.environ.get(AUTOLOAD_ENV)!r} leaves it out."
        )
    return PluginNotInstalledError(
        f"{what} {name!r}: the installed {dist} {installed} does not provide it; upgrade {dist}."
    )


@dataclass
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    module: str


@dataclass
class Registry:
    """What the loaded plugins contributed."""

    plugins: list = field(default_factory=list)
    solvers: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    materials: dict = field(default_factory=dict)
    couplings: list = field(default_factory=list)
    test_scenes: dict = field(default_factory=dict)
    assets: dict = field(default_factory=dict)
    demo_parts: dict = field(default_factory=dict)
    origin: dict = field(default_factory=dict)

    def asset_path(self, ref: str) -> str:
        """`"@rigid/cartpole.xml"` -> the file in the folder plugin `rigid` registered; other strings unchanged."""
        if not ref.startswith("@"):
            return ref
        name, _, rest = ref[1:].partition("/")
        if name not in self.assets:
            raise missing_plugin_error("asset folder", name)
        return os.path.join(self.assets[name], rest)

    def lookup(self, kind: str, name: str):
        """What `gs.options.<name>` (kind "options") or `gs.materials.<name>` (kind "materials") resolves to."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return getattr(self, kind)[name]
        except KeyError:
            raise missing_plugin_error(f"gs.{kind}", name) from None

    def solver_for_short_name(self, short):
        for cls in self.solvers.values():
            if cls.short_name == short:
                return cls
        return None



def plugin_namespace(kind: str, module_globals: dict):
    """`__getattr__` and `__dir__` for a module whose missing names are looked up in the registry."""

    def __getattr__(name):
        if name.startswith("_"):  # import machinery probes (__path__, __spec__, ...) must not load plugins
            raise AttributeError(name)
        return registry().lookup(kind, name)

    def __dir__():
        return sorted(set(module_globals) | set(getattr(registry(), kind)))

    return __getattr__, __dir__


_pm: pluggy.PluginManager | None = None
_registry: Registry | None = None
_infos: dict = {}


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _wanted():
    """The entry-point or distribution names $GENESIS_CORE_PLUGINS asks for; None means all."""
    value = os.environ.get(AUTOLOAD_ENV, "all").strip()
    if value.lower() in ("", "all", "1"):
        return None
    if value.lower() in ("none", "0"):
        return set()
    return {_norm(w) for w in value.split(",") if w.strip()}


def installed_entry_points() -> list:
    """Every entry point of the group on sys.path (the first of two same-named ones wins, as for imports)."""
    out, seen = [], set()
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in seen:
            seen.add(ep.name)
            out.append(ep)
    return out


def _load_entry_points(pm: pluggy.PluginManager):
    wanted = _wanted()
    eps = installed_entry_points()
    if wanted:
        known = {_norm(ep.name) for ep in eps} | {_norm(ep.dist.name) for ep in eps if ep.dist is not None}
        unknown = sorted(wanted - known)
        if unknown:
            warnings.warn(f"${AUTOLOAD_ENV} names {unknown}, which match no installed plugin "
                          f"(installed: {sorted(ep.name for ep in eps)}).", stacklevel=3)
    for ep in eps:
        dist = ep.dist.name if ep.dist is not None else None
        if wanted is not None and _norm(ep.name) not in wanted and (dist is None or _norm(dist) not in wanted):
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            raise GenesisError(
                f"plugin {ep.name!r} (distribution {dist!r}) failed to load from {ep.value!r}: {exc!r}. "
                f"Reinstall it, or leave it out with ${AUTOLOAD_ENV}."
            ) from exc
        pm.register(plugin, name=ep.name)
        version = ep.dist.version if ep.dist is not None else None
        _infos[ep.name] = PluginInfo(ep.name, dist, version, getattr(plugin, "__name__", repr(plugin)))


def plugin_manager() -> pluggy.PluginManager:
    """The process's plugin manager, created (and entry points loaded) on first use."""
    global _pm
    if _pm is None:
        pm = pluggy.PluginManager("genesis_core")
        pm.add_hookspecs(hookspecs)
        _load_entry_points(pm)
        pm.check_pending()  # a misspelled hook name fails here, not silently
        _pm = pm
    return _pm


def register_plugin(plugin, name: str | None = None):
    """Register a plugin object by hand (tests, notebooks); takes effect for scenes created afterwards."""
    global _registry
    pm = plugin_manager()
    name = pm.register(plugin, name=name)
    try:
        pm.check_pending()  # a misspelled hook name fails here, not silently
    except Exception:
        pm.unregister(name=name)
        raise
    _infos[name] = PluginInfo(name, None, None, getattr(plugin, "__name__", repr(plugin)))
    _registry = None
    return name


def unregister_plugin(name: str):
    global _registry
    plugin_manager().unregister(name=name)
    _infos.pop(name, None)
    _registry = None


def reload_plugins():
    """Forget every plugin and discover them again (after installing one, or changing $GENESIS_CORE_PLUGINS)."""
    global _pm, _registry
    _pm = None
    _registry = None
    _infos.clear()


RESERVED_FIELD_NAMES = {"solver", "scene", "fields", "clone", "serializable"}  # SolverState's own attributes


def _check_solver_class(cls, plugin: str, reg: Registry):
    missing = [m for m in SOLVER_MEMBERS if not hasattr(cls, m)] if isinstance(cls, type) else ["being a class"]
    if missing:
        raise GenesisError(f"plugin {plugin!r} registered solver {cls!r}, which lacks {', '.join(missing)}.")
    short = cls.short_name
    if not isinstance(short, str) or not short.isidentifier():
        raise GenesisError(f"plugin {plugin!r}: solver {cls.__name__} needs a short_name that is an identifier.")
    for other in reg.solvers.values():
        if other.short_name == short:
            raise GenesisError(f"plugin {plugin!r}: solver {cls.__name__} has short_name {short!r}, "
                               f"already taken by {other.__name__}.")
    names = [spec.name for spec in cls.state_fields]
    bad = [n for n in names if not n.isidentifier() or n.startswith("_") or n in RESERVED_FIELD_NAMES]
    if bad or len(set(names)) != len(names):
        raise GenesisError(f"plugin {plugin!r}: solver {cls.__name__} declares state fields {names}: names must be "
                           f"unique identifiers, not private, not one of {sorted(RESERVED_FIELD_NAMES)}.")


def _check_material(key, material, plugin: str):
    """A registered material: a `gs.materials.Material` subclass that names its solver, or a namespace class
    (``MPM``) whose public class attributes are all such subclasses, at least one."""
    if not (isinstance(key, str) and key.isidentifier() and not key.startswith("_")):
        raise GenesisError(f"plugin {plugin!r} registered a material under {key!r}: the name must be a public "
                           "identifier (it becomes gs.materials.<name>).")
    if not isinstance(material, type):
        raise GenesisError(f"plugin {plugin!r} registered material {key!r} as {material!r}: expected a "
                           "gs.materials.Material subclass, or a class holding several.")
    if issubclass(material, Material):
        members = {key: material}
    else:
        members = {f"{key}.{k}": x for k, x in vars(material).items() if not k.startswith("_") and isinstance(x, type)}
        if not members:
            raise GenesisError(f"plugin {plugin!r} registered material {key!r} ({material!r}), which is not a "
                               "gs.materials.Material subclass (nor a namespace class holding such subclasses).")
    for path, cls in members.items():
        if not issubclass(cls, Material):
            raise GenesisError(f"plugin {plugin!r} registered material {path} ({cls!r}), which is not a "
                               "gs.materials.Material subclass.")
        if not (isinstance(cls.solver, str) and cls.solver):
            raise GenesisError(f"plugin {plugin!r} registered material {path} ({cls.__qualname__}), which does not "
                               "name its solver: set the class attribute `solver` to the solver's class name "
                               "(for instance solver = \"RigidSolver\").")


def _registrar(reg: Registry, kind: str, store, plugin_name: str):
    def add(key, value):
        if (kind, key) in reg.origin:
            raise GenesisError(
                f"{kind} {key!r} is registered by both plugin {reg.origin[(kind, key)]!r} and plugin {plugin_name!r}; "
                f"uninstall one of them or restrict ${AUTOLOAD_ENV}."
            )
        reg.origin[(kind, key)] = plugin_name
        store[key] = value

    return add


def registry() -> Registry:
    """What the loaded plugins contributed (built on first use, rebuilt after register/unregister)."""
    global _registry
    if _registry is not None:
        return _registry
    pm = plugin_manager()
    reg = Registry()
    for name, plugin in pm.list_name_plugin():
        reg.plugins.append(_infos.get(name) or PluginInfo(name, None, None, getattr(plugin, "__name__", "")))
        hook = pm.subset_hook_caller  # call each plugin's hooks separately, to know who registered what
        others = [p for p in pm.get_plugins() if p is not plugin]

        def caller(hook_name):
            return hook(hook_name, remove_plugins=others)

        def add_solver(cls, _add=_registrar(reg, "solver", reg.solvers, name)):
            _check_solver_class(cls, name, reg)
            _add(cls.__name__, cls)

        def add_options(cls, _add=_registrar(reg, "options class", reg.options, name)):
            if not (isinstance(cls, type) and issubclass(cls, Options)):
                raise GenesisError(f"plugin {name!r} registered options {cls!r}, not a gs.options.Options subclass.")
            _add(cls.__name__, cls)

        def add_material(key, material, _add=_registrar(reg, "material", reg.materials, name)):
            _check_material(key, material, name)
            _add(key, material)

        add_scene = _registrar(reg, "test scene", reg.test_scenes, name)
        add_assets = _registrar(reg, "asset folder", reg.assets, name)

        def add_demo_part(part_name, part, _add=_registrar(reg, "demo part", reg.demo_parts, name)):
            if not (isinstance(part_name, str) and part_name) or not callable(part):
                raise GenesisError(f"plugin {name!r} registered demo part {part_name!r} as {part!r}: expected a "
                                   "name and a callable that returns the part (see hookspecs.register_demo_parts).")
            _add(part_name, part)

        pair_seen = _registrar(reg, "coupling", {}, name)

        def add_coupling(solver_a, solver_b, cls):
            pair_seen((solver_a, solver_b), cls)
            reg.couplings.append((solver_a, solver_b, cls))

        caller("register_solvers")(register=add_solver)
        caller("register_options")(register=add_options)
        caller("register_materials")(register=add_material)
        caller("register_couplings")(register=add_coupling)
        caller("register_test_scenes")(register=add_scene)
        caller("register_assets")(register=add_assets)
        caller("register_demo_parts")(register=add_demo_part)
    _registry = reg
    return reg
