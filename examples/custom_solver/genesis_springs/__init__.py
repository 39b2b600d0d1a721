"""genesis-springs: damped mass-spring chains, an example of a third-party genesis-core solver."""

from .entity import SpringChainEntity
from .materials import SpringChain
from .solver import SpringChainSolver

__all__ = ["SpringChain", "SpringChainEntity", "SpringChainSolver"]
