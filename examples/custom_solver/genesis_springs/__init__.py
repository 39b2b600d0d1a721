"""genesis-springs: damped mass-spring chains, an example of a third-party genesis-core solver."""

from .material import SpringChain
from .solver import SpringChainEntity, SpringChainSolver

__all__ = ["SpringChain", "SpringChainEntity", "SpringChainSolver"]
