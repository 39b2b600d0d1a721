"""genesis-sph: smoothed particle hydrodynamics liquids (WCSPH and DFSPH) for genesis-core."""
