"""Surfaces (`gs.surfaces.Default(color=..., vis_mode="particle")`, ...): how an entity looks.
Every surface keeps its arguments on the object (`surface.options`), so that a Genesis World script runs unchanged.
The cameras (`genesis_core.render`) read one of them: `color` (RGB or RGBA in [0, 1]), the entity's colour in
rendered images; the others (vis_mode, roughness, textures, ...) have no effect yet (docs/rendering.md)."""


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
