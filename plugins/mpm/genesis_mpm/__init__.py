"""genesis-mpm: the MLS-MPM solver plugin of genesis-core (elastic, elasto-plastic, liquid, sand, snow)."""
