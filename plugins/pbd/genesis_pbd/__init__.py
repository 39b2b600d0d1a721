"""genesis-pbd: position-based dynamics (XPBD cloth, ropes and elastic bodies, position-based fluids, free
particles) for genesis-core."""
