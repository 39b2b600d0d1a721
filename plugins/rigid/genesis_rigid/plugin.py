"""Hook implementations of this plugin (see genesis_core.plugins.hookspecs).

The package is discovered through its entry point; it registers its solver, options and materials here as
they land. Until then it contributes nothing, and asking for its names says so.
"""
