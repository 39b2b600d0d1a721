"""A particle solver package used by the tests (tests/test_particle_coupling.py), registered by hand there."""
