"""SpringChainEntity: one chain's per-entity API (node positions and velocities, its anchor)."""

import genesis_core as gs


class SpringChainEntity(gs.Entity):
    """One chain. Node arrays are shaped `([n_envs,] n_nodes, 3)`; `envs_idx` selects environments."""

    def _setup(self, node_start: int, anchor_slot: int):
        self.node_start = node_start
        self.anchor_slot = anchor_slot  # -1 if the chain is free

    @property
    def n_nodes(self) -> int:
        return self.material.n_nodes

    @property
    def _nodes(self):
        return slice(self.node_start, self.node_start + self.n_nodes)

    def get_nodes_pos(self, envs_idx=None):
        return self.solver.state.get_rows("pos", self.solver.frame, self._envs_idx(envs_idx), (self._nodes,))

    def get_nodes_vel(self, envs_idx=None):
        return self.solver.state.get_rows("vel", self.solver.frame, self._envs_idx(envs_idx), (self._nodes,))

    def get_pos(self, envs_idx=None):
        """Centre of mass, `([n_envs,] 3)` (the nodes have equal masses)."""
        return self.get_nodes_pos(envs_idx).mean(dim=-2)

    def set_nodes_pos(self, pos, envs_idx=None):
        self.solver.state.set_rows("pos", self.solver.frame, pos, self._envs_idx(envs_idx), (self._nodes,),
                                   what="set_nodes_pos")

    def set_nodes_vel(self, vel, envs_idx=None):
        self.solver.state.set_rows("vel", self.solver.frame, vel, self._envs_idx(envs_idx), (self._nodes,),
                                   what="set_nodes_vel")

    def set_anchor(self, pos, envs_idx=None):
        """Move the point the top node is pinned to, `([n_envs,] 3)` metres."""
        if self.anchor_slot < 0:
            raise gs.OptionError("set_anchor: this chain was built with anchored=False.")
        self.solver.state.set_rows("anchor", self.solver.frame, pos, self._envs_idx(envs_idx), (self.anchor_slot,),
                                   what="set_anchor")
