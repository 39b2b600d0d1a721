"""Heterogeneous entities (Genesis World's `scene.add_entity(morph=[m0, m1, ...])`): one entity whose environments
each simulate one of several morphs, for domain randomization of shapes (a box in some environments, a sphere in
others; cups of several sizes).

Every variant is described as its own morph would be; they must share the kinematic structure (bodies, their
parents, their joints' kinds and names), so the entity has one set of links, joints and dofs. Each link carries
the geoms of every variant, each geom tagged with its variant (GeomDesc.variant). Environment b simulates variant
`variant_of_env[b]`, in balanced blocks as Genesis World assigns them (n_envs >= n_variants: contiguous blocks,
the first n_envs % n_variants one environment longer; fewer environments than variants: environment b takes
variant b). Per environment, the solver keeps:

- which geoms collide: another variant's geoms never enter the narrowphase (their friction in the kernels'
  geom_mu is -1, the kernels' mark of an absent geom), and couplings and cameras see them far away (FAR);
- each link's inertial parameters (mass, centre of mass, inertia) and a fixed base's pose: the variant's, in the
  per-environment link parameters the kernels read;
- the initial configuration: a free base starts at its variant's morph pose.

Equalities, tendons and actuators are the first variant's. Not available in differentiable mode.
"""

from __future__ import annotations

import numpy as np

import genesis_core as gs

from .layout import LF_COM, LF_INERTIA, LF_MASS, LF_POS, LF_QUAT
from .model import FREE

FAR = 1.0e6  # m: where couplings and cameras see another variant's geoms (no particle or camera reaches it)


def balanced_mapping(n_variants: int, batch: int) -> np.ndarray:
    """The variant of each of `batch` environments (Genesis World's assignment)."""
    if batch >= n_variants:
        base, extra = divmod(batch, n_variants)
        sizes = np.r_[np.full(extra, base + 1), np.full(n_variants - extra, base)]
        return np.repeat(np.arange(n_variants), sizes)
    return np.arange(batch)


def _structure(robot):
    return [(b.parent, [(j.type, j.name) for j in b.joints]) for b in robot.bodies]


def merge_variants(robots, morphs):
    """One robot description holding every variant's geoms and visuals (tagged with their variant), the first
    variant's bodies, joints, equalities, tendons and actuators; refuses variants whose structures differ."""
    first = robots[0]
    for v, (robot, morph) in enumerate(zip(robots, morphs)):
        if isinstance(morph, gs.morphs.Plane):
            raise gs.OptionError("add_entity(morph=[...]): a Plane cannot be a variant of a heterogeneous entity "
                                 "(a plane is the same in every environment: add it as an entity of its own).")
        if _structure(robot) != _structure(first):
            fixed = [not any(j.type == FREE for j in r.bodies[0].joints) for r in (first, robot)]
            why = ("one is fixed and the other free: give every variant the same fixed=" if fixed[0] != fixed[1]
                   else "the bodies, their parents or their joints (kind and name) differ")
            raise gs.OptionError(f"add_entity(morph=[...]): variant {v} ({type(morph).__name__}) does not have the "
                                 f"kinematic structure of variant 0 ({type(morphs[0]).__name__}): {why}. The "
                                 "variants of a heterogeneous entity share their links, joints and dofs.")
        for body in robot.bodies:
            if not body.visuals:  # (drawn as its geoms: make that explicit before the lists are merged)
                body.visuals = list(body.geoms)
            for g in body.geoms + body.visuals:
                g.variant = v
    merged = first
    for bi, body in enumerate(merged.bodies):
        body.geoms = [g for robot in robots for g in robot.bodies[bi].geoms]
        body.visuals = [g for robot in robots for g in robot.bodies[bi].visuals]
    return merged


class Variants:
    """RigidSolver's heterogeneous entities (mixed into the solver)."""

    _geom_active = None  # [B, G] bool once built with a heterogeneous entity: which geoms each environment has

    def add_heterogeneous_entity(self, idx, morphs, material):
        """Genesis World's add_entity(morph=[m0, m1, ...]) for the rigid solver (see the module's docstring)."""
        from .robots import describe

        from .material import Kinematic

        if isinstance(material, Kinematic):
            raise gs.OptionError("add_entity(morph=[...], material=gs.materials.Kinematic()): a kinematic entity "
                                 "has one morph; add one kinematic entity per shape.")
        if self.sim_options.requires_grad:
            raise gs.OptionError("add_entity(morph=[...]): heterogeneous entities are not available with "
                                 "SimOptions(requires_grad=True); build one scene per variant to differentiate "
                                 "through them.")
        if any(isinstance(m, gs.morphs.Drone) for m in morphs):
            raise gs.OptionError("add_entity(morph=[...]): a heterogeneous entity of Drone morphs is not available "
                                 "(a drone's propellers are those of one file); add one drone entity per model.")
        robots = [describe(m, material) for m in morphs]  # (each checked as its own entity would be)
        robot = merge_variants(robots, morphs)
        entity = super().add_entity(idx, morphs[0], material)
        entity.robot = robot
        entity.variants = tuple(morphs)
        entity.variant_robots = robots
        return entity

    def _variant_tables(self):
        """At build: each heterogeneous entity's variant per environment (entity.variant_of_env), and the
        per-environment tables the solver reads: _link_f_env [B, L, LF_N] (the model's link parameters with each
        environment's variant's inertia and fixed base pose), _geom_active [B, G] bool (None: every geom
        everywhere), _qpos0_env [B, Q]."""
        B, m = self.batch, self.compiled
        link_f = m.arrays["link_f"]
        self._link_f_env = np.array(np.broadcast_to(link_f, (B,) + link_f.shape))
        self._qpos0_env = np.array(np.broadcast_to(m.qpos0, (B, len(m.qpos0))))
        hetero = [e for e in self.entities if getattr(e, "variants", None)]
        self._geom_active = None
        if not hetero:
            return
        G = max(self.n_geoms, 1)
        active = np.ones((B, G), dtype=bool)
        tags = np.array([getattr(gm["desc"], "variant", -1) for gm in m.geoms] + [-1] * (G - len(m.geoms)))
        entity_of = np.array([gm["entity"] for gm in m.geoms] + [-1] * (G - len(m.geoms)))
        for e in hetero:
            which = balanced_mapping(len(e.variants), B)
            e.variant_of_env = which
            mine = entity_of == e.idx
            active[:, mine] = tags[None, mine] == which[:, None]
            for v, (robot, morph) in enumerate(zip(e.variant_robots, e.variants)):
                envs = which == v  # (each variant's rows once, then into its environments)
                if not envs.any():
                    continue
                for bi, body in enumerate(robot.bodies):
                    l = e.link_start + bi
                    row = link_f[l].copy()
                    row[LF_MASS] = body.mass
                    row[LF_COM:LF_COM + 3] = body.com
                    row[LF_INERTIA:LF_INERTIA + 9] = np.asarray(body.inertia).reshape(9)
                    if body.parent < 0 and not body.joints and getattr(e, "_attached", None) is None:
                        row[LF_POS:LF_POS + 3], row[LF_QUAT:LF_QUAT + 4] = e.place(body.pos, body.quat, morph)
                    self._link_f_env[envs, l] = row
                    free = [j for j in m.joints if j["link"] == l and j["type"] == FREE]
                    if free and body.parent < 0:  # (a free base starts at its variant's morph pose)
                        pos, quat = e.place(body.pos, body.quat, morph)
                        self._qpos0_env[envs, free[0]["q"]:free[0]["q"] + 7] = [*pos, *quat]
        self._geom_active = active

