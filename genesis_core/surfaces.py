"""Surfaces (`gs.surfaces.Default(color=..., vis_mode="particle")`, ...): how Genesis World renders an entity.
genesis-core renders nothing; a surface is accepted so that a Genesis script runs unchanged, its arguments are
kept on the object (`surface.options`) and nothing reads them."""


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
