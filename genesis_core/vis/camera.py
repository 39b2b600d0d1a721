"""Genesis World's `genesis.vis.camera` module, which scripts import the camera class from
(`from genesis.vis.camera import Camera`, for type hints): genesis-core's camera (genesis_core.render.camera)."""

from ..render.camera import Camera

__all__ = ["Camera"]
