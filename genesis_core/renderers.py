"""Genesis World's renderer choices (`gs.Scene(renderer=gs.renderers.Rasterizer())`, `RayTracer`, `BatchRenderer`):
accepted so that a Genesis World script runs unchanged, their arguments kept on the object (`renderer.options`).
genesis-core's cameras ray-cast whichever is named (docs/rendering.md)."""

from .bases import Inert


class Renderer(Inert):
    namespace = "gs.renderers"


class Rasterizer(Renderer):
    pass


class RayTracer(Renderer):
    pass


class BatchRenderer(Renderer):
    pass


__all__ = ["BatchRenderer", "RayTracer", "Rasterizer", "Renderer"]
