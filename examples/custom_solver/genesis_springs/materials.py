"""SpringChain: the material that routes an entity to SpringChainSolver, with its validated parameters."""

import attrs

import genesis_core as gs
from genesis_core import validators as v


@attrs.define(frozen=True, kw_only=True)
class SpringChain(gs.materials.Material):
    """A chain of `n_nodes` point masses joined by damped springs, laid along the morph's local Z axis
    (a `gs.morphs.Cylinder` or `Capsule`: from its top end to its bottom end, over its `height`).

    mass: total mass, kg, spread evenly over the nodes. stiffness: N/m per segment. damping: N s/m per segment,
    along the segment (a dashpot beside each spring). drag: 1/s, linear drag on every node.
    anchored: the top node is pinned to an anchor point (movable per environment with `set_anchor`).
    """

    solver = "SpringChainSolver"

    n_nodes: int = attrs.field(default=8, validator=v.int_at_least(2))
    mass: float = attrs.field(default=1.0, validator=v.positive)
    stiffness: float = attrs.field(default=1000.0, validator=v.positive)
    damping: float = attrs.field(default=0.0, validator=v.non_negative)
    drag: float = attrs.field(default=0.0, validator=v.non_negative)
    anchored: bool = attrs.field(default=True, validator=v.is_bool)
