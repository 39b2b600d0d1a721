"""Equality constraints of the rigid solver: MJCF <equality> (connect, weld, joint, tendon) and the welds added
and removed while the scene runs (Genesis World's add_weld_constraint / delete_weld_constraint).

Each environment has `n_eqs` slots: the model's equalities first, in file order, then
RigidOptions.max_dynamic_constraints free slots for run-time welds. A slot is state (eq_type, eq_obj, eq_data,
eq_active: kernels' layout in layout.ED_*), so snapshots, resets with envs_idx and checkpoints carry the welds added
at run time, and the state's validation refuses a slot whose objects are not the model's. The constraint stage
(kernels_constraint.equality_rows) makes bilateral rows of the active slots, solved with the contacts and limits;
their impulses are the state's equality_impulse (the warm start of the next substep)."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs
from genesis_core.rotations import quat_mul, quat_to_mat

from .layout import (ED_ANCHOR1, ED_ANCHOR2, ED_N, ED_POLY, ED_REF, ED_RELQUAT, ED_TORQUESCALE, EQ_CONNECT, EQ_JOINT,
                     EQ_NONE, EQ_ROWS, EQ_TENDON, EQ_WELD)
from .params import first_entry

KINDS = {"connect": EQ_CONNECT, "weld": EQ_WELD, "joint": EQ_JOINT, "tendon": EQ_TENDON}
KIND_NAMES = {code: name for name, code in KINDS.items()}

FIELDS = (
    gs.FieldSpec("equality_impulse", ("n_eqs", EQ_ROWS), grad=True,
                 doc="warm start: the impulses of each equality slot's rows in the substep that led to this frame "
                     "(connect: 3 linear, N s; weld: those and 3 angular, N m s; joint, tendon: 1; 0 elsewhere)"),
    gs.FieldSpec("eq_type", ("n_eqs",), dtype="int", frames=False, codes=(EQ_NONE, EQ_CONNECT, EQ_WELD, EQ_JOINT,
                                                                          EQ_TENDON),
                 doc="each equality slot's kind: 0 free, 1 connect, 2 weld, 3 joint, 4 tendon"),
    gs.FieldSpec("eq_obj", ("n_eqs", 2), dtype="int", frames=False, bounds=(-1, None),
                 doc="each slot's two objects: links (connect, weld; -1 the world), dofs of hinge or slide joints "
                     "(joint) or fixed tendons (tendon); the second -1: none"),
    gs.FieldSpec("eq_data", ("n_eqs", ED_N), frames=False, quat="eq_quats",
                 doc="each slot's parameters (layout.ED_*): the point on each object (its link frame, m), the "
                     "rotation a weld holds (w, x, y, z), torquescale, polynomial a0..a4, reference positions"),
    gs.FieldSpec("eq_active", ("n_eqs",), dtype="int", frames=False, codes=(0, 1),
                 doc="1 where the slot's constraint acts (MuJoCo's eq_active)"),
)


def _conj(q):
    return np.asarray(q, dtype=np.float64) * np.array([1.0, -1.0, -1.0, -1.0])


class Equalities:
    """RigidSolver's equality constraints (mixed into the solver: it reads the solver's compiled model, state and
    options)."""

    @property
    def n_equalities(self) -> int:
        """The model's equality constraints (the files'); run-time welds use the slots after them."""
        return len(self.compiled.equalities) if getattr(self, "compiled", None) is not None else sum(
            len(e.robot.equalities) for e in self.entities)

    @property
    def n_eq_slots(self) -> int:
        """Slots per environment: the model's equalities and RigidOptions.max_dynamic_constraints (at least one, a
        padding slot, so the state's arrays are never empty)."""
        return max(1, len(self.compiled.equalities) + int(self.options.max_dynamic_constraints))

    def _init_equalities(self, f):
        """The slots at build: the model's equalities with what depends on the bodies' poses where the file places
        them computed from the links' poses at qpos0 (frame f, the solver's own kinematics), the others free."""
        st, E = self.state, self.n_eq_slots
        kind = np.zeros(E, dtype=np.int64)
        obj = np.full((E, 2), -1, dtype=np.int64)
        data = np.zeros((E, ED_N))
        data[:, ED_RELQUAT] = 1.0
        active = np.zeros(E, dtype=np.int64)
        pos = st.at("links_pos", f)[0].double().cpu().numpy()
        quat = st.at("links_quat", f)[0].double().cpu().numpy()

        def frame(link):
            if link < 0:
                return np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
            return pos[link], quat[link] / np.linalg.norm(quat[link])

        off = bool(self.options.disable_constraint)  # (no constraint row at all, as Genesis World's)
        for e, eq in enumerate(self.compiled.equalities):
            kind[e], obj[e], active[e] = KINDS[eq["kind"]], eq["obj"], int(eq["active"] and not off)
            data[e, ED_TORQUESCALE] = eq["torquescale"]
            data[e, ED_POLY:ED_POLY + 5] = eq["polycoef"]
            data[e, ED_REF:ED_REF + 2] = eq.get("ref", (0.0, 0.0))
            if eq["kind"] not in ("connect", "weld"):
                continue
            (x1, q1), (x2, q2) = frame(eq["obj"][0]), frame(eq["obj"][1])
            R1, R2 = quat_to_mat(q1), quat_to_mat(q2)
            if eq["kind"] == "connect":  # anchor on obj1; the same point of obj2 where the file places them
                data[e, ED_ANCHOR1:ED_ANCHOR1 + 3] = eq["anchor"]
                a2 = eq["anchor2"] if eq["anchor2"] is not None else R2.T @ (x1 + R1 @ eq["anchor"] - x2)
                data[e, ED_ANCHOR2:ED_ANCHOR2 + 3] = a2
            elif eq["kind"] == "weld":  # anchor on obj2; the same point of obj1 and the rotation there (or relpose)
                data[e, ED_ANCHOR2:ED_ANCHOR2 + 3] = eq["anchor"]
                if eq["relpose"] is not None:
                    data[e, ED_ANCHOR1:ED_ANCHOR1 + 3] = eq["relpose"][:3]
                    data[e, ED_RELQUAT:ED_RELQUAT + 4] = eq["relpose"][3:]
                else:
                    data[e, ED_ANCHOR1:ED_ANCHOR1 + 3] = R1.T @ (x2 + R2 @ eq["anchor"] - x1)
                    data[e, ED_RELQUAT:ED_RELQUAT + 4] = quat_mul(_conj(q1), q2)
        with torch.no_grad():
            for name, value in (("eq_type", kind), ("eq_obj", obj), ("eq_data", data), ("eq_active", active)):
                t = st.at(name, f)
                t[:] = torch.as_tensor(value, dtype=t.dtype, device=t.device)

    def _equality_rule(self, rows):
        """The rule across the slots' fields (StateStore.rules, on rows {name: [R, ...]}): each slot's objects are
        the model's for its kind (links for connect and weld, distinct, the second may be -1; dofs of hinge or
        slide joints for joint; tendons for tendon); a free slot's are -1. The first slot that breaks it, as
        (name, row, index, value, expected), or None."""
        kind, obj = rows.get("eq_type"), rows.get("eq_obj")
        if kind is None or obj is None or not kind.numel():
            return None
        kind, obj = kind.long(), obj.long()
        o1, o2 = obj[..., 0], obj[..., 1]
        L, D, T = self.n_links, self.n_dofs, len(self.compiled.tendons)
        hinge = torch.zeros(max(D, 1) + 1, dtype=torch.bool, device=obj.device)  # index D + 1 - 1 = -1: none
        hinge[:D] = torch.as_tensor([q >= 0 for q in self.compiled.dof_q], dtype=torch.bool, device=obj.device)
        link_eq = (kind == EQ_CONNECT) | (kind == EQ_WELD)
        ok = torch.where(kind == EQ_NONE, (o1 == -1) & (o2 == -1), torch.zeros_like(link_eq))
        ok |= link_eq & (o1 >= 0) & (o1 < L) & (o2 < L) & (o1 != o2)
        in_d = (o1 >= 0) & (o1 < D) & (o2 < D)
        ok |= (kind == EQ_JOINT) & in_d & hinge[o1.clamp(0, max(D, 1))] & ((o2 < 0) | hinge[o2.clamp(0, max(D, 1))])
        ok |= (kind == EQ_TENDON) & (o1 >= 0) & (o1 < T) & (o2 < T)
        if bool(ok.all()):
            return None
        bad = ~ok
        row, index, _ = first_entry(bad, kind)
        which = KIND_NAMES.get(int(kind[(row, *index)]), "free")
        expected = {"connect": f"two distinct links in [0, {L}) (the second may be -1, the world)",
                    "weld": f"two distinct links in [0, {L}) (the second may be -1, the world)",
                    "joint": "the dofs of hinge or slide joints (the second may be -1)",
                    "tendon": f"tendons in [0, {T}) (the second may be -1)",
                    "free": "-1, -1 in a free slot (eq_type 0)"}[which]
        return ("eq_obj", row, index + (0,), [int(v) for v in obj[(row, *index)]], f"for a {which} slot: {expected}")

    # -- run-time welds (Genesis World's RigidSolver API) --------------------------------------------------------

    def _weld_links(self, link1_idx, link2_idx, what):
        try:
            l1, l2 = int(link1_idx), int(link2_idx)
        except (TypeError, ValueError):
            raise gs.OptionError(f"{what}: link1_idx and link2_idx must be the solver's link indices (ints), got "
                                 f"{link1_idx!r} and {link2_idx!r}.") from None
        for name, value in (("link1_idx", l1), ("link2_idx", l2)):
            if not 0 <= value < self.n_links:
                raise gs.OptionError(f"{what}: {name}={value} is not a link of the solver: expected 0 <= index < "
                                     f"{self.n_links} (entity.get_link(name).idx).")
        if l1 == l2:
            raise gs.OptionError(f"{what}: link1_idx and link2_idx are both {l1}: a weld joins two links.")
        return l1, l2

    def _envs_rows(self, envs_idx, what):
        from genesis_core.state import to_index

        if envs_idx is not None and self.scene.n_envs == 0:
            raise gs.OptionError(f"{what}: envs_idx given for a scene built without environments (n_envs=0).")
        if envs_idx is None:
            return torch.arange(self.batch, device=self.device)
        return to_index(envs_idx, self.batch, "envs_idx").to(self.device)

    def _is_weld_of(self, l1, l2):
        """[B, E] bool: the slots that hold a weld between l1 and l2 (either order)."""
        st = self.state
        kind, obj = st.at("eq_type", 0), st.at("eq_obj", 0)
        return (kind == EQ_WELD) & (((obj[..., 0] == l1) & (obj[..., 1] == l2))
                                    | ((obj[..., 0] == l2) & (obj[..., 1] == l1)))

    def add_weld_constraint(self, link1_idx, link2_idx, envs_idx=None):
        """Weld link2 to link1 where they are now, in the environments envs_idx (None: all), as Genesis World's
        RigidSolver.add_weld_constraint: the two links keep their relative pose from the next step on (a grasped
        object moves with the gripper). The weld holds link1's origin: its point on link2 is where that origin is
        now, and the rotation between the frames is today's. It takes a free slot of each environment (raise
        RigidOptions(max_dynamic_constraints=...) for more); a pair already welded, or no free slot, raises before
        anything changes (Genesis World warns and skips it)."""
        what = "add_weld_constraint"
        if self.options.disable_constraint:
            raise gs.OptionError(f"{what}: the scene was built with RigidOptions(disable_constraint=True), which "
                                 "acts on no constraint; build it without that option to weld links.")
        l1, l2 = self._weld_links(link1_idx, link2_idx, what)
        rows = self._envs_rows(envs_idx, what)
        st, f = self.state, self.frame
        taken = self._is_weld_of(l1, l2)[rows].any(dim=1)
        if bool(taken.any()):
            env = int(rows[taken.nonzero()[0, 0]])
            raise gs.OptionError(f"{what}: links {l1} and {l2} are already welded in environment {env}; delete the "
                                 "weld first (delete_weld_constraint). Nothing was changed.")
        kind = st.at("eq_type", f)
        n_model = len(self.compiled.equalities)
        n_dynamic = int(self.options.max_dynamic_constraints)
        free = kind[rows, n_model:n_model + n_dynamic] == EQ_NONE
        if free.shape[1] == 0 or not bool(free.any(dim=1).all()):
            raise gs.OptionError(f"{what}: no free equality slot in some of the environments (each has "
                                 f"max_dynamic_constraints={n_dynamic} for run-time welds); raise "
                                 "gs.options.RigidOptions(max_dynamic_constraints=...) or delete a weld first. "
                                 "Nothing was changed.")
        slot = n_model + free.int().argmax(dim=1)
        pos, quat = st.at("links_pos", f).double(), st.at("links_quat", f).double()
        x1, x2 = pos[rows, l1], pos[rows, l2]
        q1, q2 = quat[rows, l1], quat[rows, l2]
        q1 = q1 / q1.norm(dim=-1, keepdim=True)
        q2 = q2 / q2.norm(dim=-1, keepdim=True)
        R2 = quat_to_mat(q2)
        data = torch.zeros((len(rows), ED_N), dtype=torch.float64, device=self.device)
        data[:, ED_ANCHOR2:ED_ANCHOR2 + 3] = (R2.transpose(-1, -2) @ (x1 - x2).unsqueeze(-1)).squeeze(-1)
        data[:, ED_RELQUAT:ED_RELQUAT + 4] = _quat_mul_t(q1 * q1.new_tensor([1.0, -1.0, -1.0, -1.0]), q2)
        data[:, ED_TORQUESCALE] = 1.0
        with torch.no_grad():
            st.at("eq_type", f)[rows, slot] = EQ_WELD
            st.at("eq_obj", f)[rows, slot] = torch.tensor([l1, l2], dtype=st.at("eq_obj", f).dtype,
                                                          device=self.device)
            st.at("eq_data", f)[rows, slot] = data.to(st.at("eq_data", f).dtype)
            st.at("eq_active", f)[rows, slot] = 1
            st.tensors["equality_impulse"].detach()[:, rows, slot] = 0.0  # (every frame)

    def delete_weld_constraint(self, link1_idx, link2_idx, envs_idx=None):
        """Remove the weld between the two links (either order) in the environments envs_idx (None: all), as
        Genesis World's: a run-time weld's slot becomes free; a file's weld is deactivated (eq_active 0). An
        environment without such a weld is left as it is."""
        what = "delete_weld_constraint"
        l1, l2 = self._weld_links(link1_idx, link2_idx, what)
        rows = self._envs_rows(envs_idx, what)
        st, f = self.state, self.frame
        hit = torch.zeros_like(self._is_weld_of(l1, l2))
        hit[rows] = self._is_weld_of(l1, l2)[rows]
        n_model = len(self.compiled.equalities)
        dynamic = hit.clone()
        dynamic[:, :n_model] = False
        with torch.no_grad():
            st.at("eq_active", f)[hit] = 0
            st.at("eq_type", f)[dynamic] = EQ_NONE
            st.at("eq_obj", f)[dynamic] = -1
            data = st.at("eq_data", f)
            data[dynamic] = 0.0
            data[..., ED_RELQUAT][dynamic] = 1.0
            st.tensors["equality_impulse"].detach()[:, hit] = 0.0  # (every frame)

    def get_equality_constraints(self, as_tensor: bool = True, to_torch: bool = True):
        """The active equality constraints, as Genesis World's: {"type", "obj_a", "obj_b", "force"}; with as_tensor
        each is `[n_envs or 1, n, ...]` padded with -1 (type, objects) and 0 (force), n the most any environment
        has; otherwise tuples per environment. type: gs.EQUALITY_TYPE codes (connect 0, weld 1, joint 2, tendon
        3, as Genesis World numbers them); force [.., 6]: the constraint force of the last substep (impulse / dt)
        on obj_a, linear (N) then angular (N m; a joint or tendon equality's in the first entry)."""
        st, f = self.state, self.frame
        kind, obj = st.at("eq_type", f), st.at("eq_obj", f)
        on = (kind != EQ_NONE) & (st.at("eq_active", f) != 0)
        force = st.at("equality_impulse", f) / self.sim_options.substep_dt
        genesis_code = torch.tensor([-1, 0, 1, 2, 3], dtype=torch.long, device=self.device)[kind.long()]
        per_env = [(genesis_code[b][on[b]], obj[b, :, 0][on[b]].long(), obj[b, :, 1][on[b]].long(), force[b][on[b]])
                   for b in range(self.batch)]
        if not as_tensor:
            out = tuple(zip(*per_env)) if per_env else ((), (), (), ())
            if not to_torch:
                out = tuple(tuple(x.cpu().numpy() for x in part) for part in out)
            return dict(zip(("type", "obj_a", "obj_b", "force"), out))
        n = max((len(p[0]) for p in per_env), default=0)
        B = self.batch
        t, a, b_ = (torch.full((B, n), -1, dtype=torch.long, device=self.device) for _ in range(3))
        fo = torch.zeros((B, n, EQ_ROWS), dtype=force.dtype, device=self.device)
        for i, (k, o1, o2, fr) in enumerate(per_env):
            t[i, :len(k)], a[i, :len(k)], b_[i, :len(k)], fo[i, :len(k)] = k, o1, o2, fr
        out = dict(type=t, obj_a=a, obj_b=b_, force=fo)
        return out if to_torch else {k: v.cpu().numpy() for k, v in out.items()}

    def get_weld_constraints(self, as_tensor: bool = True, to_torch: bool = True):
        """The active welds, as Genesis World's: {"link_a", "link_b", "force"} (get_equality_constraints' layout,
        welds only)."""
        eqs = self.get_equality_constraints(as_tensor=True, to_torch=True)
        weld = eqs["type"] == 1
        B = weld.shape[0]
        n = int(weld.sum(dim=1).max()) if B else 0
        out = dict(link_a=torch.full((B, n), -1, dtype=torch.long, device=self.device),
                   link_b=torch.full((B, n), -1, dtype=torch.long, device=self.device),
                   force=torch.zeros((B, n, EQ_ROWS), dtype=eqs["force"].dtype, device=self.device))
        for i in range(B):
            m = int(weld[i].sum())
            out["link_a"][i, :m] = eqs["obj_a"][i][weld[i]]
            out["link_b"][i, :m] = eqs["obj_b"][i][weld[i]]
            out["force"][i, :m] = eqs["force"][i][weld[i]]
        if not as_tensor:
            counts = weld.sum(dim=1).tolist()
            out = {k: tuple(v[i, :counts[i]] for i in range(B)) for k, v in out.items()}
            if not to_torch:
                out = {k: tuple(x.cpu().numpy() for x in v) for k, v in out.items()}
            return out
        return out if to_torch else {k: v.cpu().numpy() for k, v in out.items()}


def _quat_mul_t(a, b):
    """Quaternion products of torch tensors [..., 4] (w, x, y, z)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)
