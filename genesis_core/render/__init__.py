"""Rendering: cameras drawn by a ray caster in Taichi, batched over environments.

`scene.add_camera(...)` gives a `Camera`; what it draws comes from each solver's `RenderView`
(`genesis_core.render.view`), built from the interfaces every solver already exposes (`collider_view`,
the particle kit's state, `particle_view`) or given by the solver itself (`render_view`). docs/rendering.md
describes what is drawn and what is not yet.
"""

from .camera import Camera
from .view import RenderView

__all__ = ["Camera", "RenderView"]
