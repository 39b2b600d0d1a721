"""Plugin discovery and the registry of what plugins contribute (solvers, options, materials, couplings)."""

from .hookspecs import hookimpl, hookspec
from .manager import (
    AUTOLOAD_ENV,
    FIRST_PARTY,
    PluginInfo,
    Registry,
    plugin_manager,
    register_plugin,
    registry,
    reload_plugins,
    unregister_plugin,
)

__all__ = [
    "AUTOLOAD_ENV", "FIRST_PARTY", "PluginInfo", "Registry", "hookimpl", "hookspec", "plugin_manager",
    "register_plugin", "registry", "reload_plugins", "unregister_plugin",
]
