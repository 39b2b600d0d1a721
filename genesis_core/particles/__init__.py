"""The particle-solver kit: what MPM, SPH, PBD, FEM and third-party particle solvers share (an entity with Genesis
World's particle API, a solver base with pos / vel / active and a domain, sampling inside morphs, a deterministic
neighbour search, coupling with colliders, fixed-order reductions)."""
