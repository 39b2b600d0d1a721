"""Surfaces (`gs.surfaces.Default(color=..., vis_mode="collision")`, ...): how an entity looks.
Every surface keeps its arguments on the object (`surface.options`), so that a Genesis World script runs unchanged.
The cameras (`genesis_core.render`) read three of them:

- `color` (RGB or RGBA in [0, 1]): the entity's colour in rendered images (it replaces a model file's colours);
- `vis_mode` (rigid entities): "visual" (the default) draws the entity's visual geometry (URDF <visual> elements,
  an MJCF file's visible geoms, a Mesh morph's triangles), "collision" its collision geoms; any other value is
  drawn as "visual". FEM bodies and cloths are drawn as their surfaces, other particle entities as spheres,
  whatever the mode.

- `diffuse_texture`, else `emissive_texture` (`gs.textures.*`), where no `color` is given: its colour (a colour
  texture's; an image's mean colour, genesis_core.textures).

The others (roughness, normal maps, ...) have no effect yet (docs/rendering.md)."""


from .bases import Inert


class Surface(Inert):
    namespace = "gs.surfaces"


class Default(Surface):
    pass


class Plastic(Surface):
    pass


class Rough(Surface):
    pass


class Smooth(Surface):
    pass


class Reflective(Surface):
    pass


class Glass(Surface):
    pass


class Water(Surface):
    pass


class Metal(Surface):
    pass


class Emission(Surface):
    pass


__all__ = ["Default", "Emission", "Glass", "Metal", "Plastic", "Reflective", "Rough", "Smooth", "Surface", "Water"]
