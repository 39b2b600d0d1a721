"""genesis-fem: the FEM solver plugin of genesis-core (tetrahedral soft bodies)."""
