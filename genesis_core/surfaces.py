"""Surfaces (`gs.surfaces.Default(color=..., vis_mode="particle")`, ...): how Genesis World renders an entity.
genesis-core renders nothing; a surface is accepted so that a Genesis script runs unchanged, its arguments are
kept on the object (`surface.options`) and nothing reads them."""


class Surface:
    def __init__(self, **options):
        self.options = dict(options)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"gs.surfaces.{type(self).__name__}({args})"


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
