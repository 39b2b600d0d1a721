"""genesis-rigid: the rigid-body solver plugin of genesis-core (articulated bodies, URDF/MJCF, contacts)."""
