"""Drones: a rigid entity whose propeller links take thrust and drag torque from their speeds (Genesis World's
DroneEntity, made for `gs.morphs.Drone`).

Propeller i, turning at rpm_i (revolutions per minute) about the z axis of its link, pushes that link along the
axis with the thrust KF rpm_i^2 (N) and turns it about the axis with the torque KM rpm_i^2 spin_i (N m), both at
the link's centre of mass (its URDF inertial origin), as Genesis World's kernel_set_drone_rpm applies them
(`ref=link_COM, local=True`; a "RACE" drone's torque has the opposite sign). KF and KM are the attributes kf and km
of the file's `<properties>` element (gym-pybullet-drones' format). The speeds hold for one step: set_propellers_rpm
adds the wrenches to the state's links_applied_wrench, which the next step applies at each of its substeps and then
clears (as apply_links_external_force), so snapshots, reset(state) and checkpoints carry them, and a step without a
call has no thrust. Genesis World refuses a second call before the step; so does this entity, per environment.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import torch

import genesis_core as gs
from genesis_core.launch import torch_one_thread
from genesis_core.state import to_tensor

from .entity import RigidEntity
from .layout import DF_DAMPING
from .model import FREE


def drone_coefficients(morph) -> tuple:
    """(KF, KM) of a Drone morph's URDF: the kf and km attributes of its `<properties>` element, finite and >= 0;
    a gs.ModelFileError names the file and what is missing, and a propeller link the file lacks is an OptionError
    (both raised at add_entity, before anything is added)."""
    where = f"Drone(file={morph.file!r})"
    try:
        root = ET.parse(morph.file).getroot()
    except ET.ParseError as exc:
        raise gs.ModelFileError(f"{where}: not well-formed XML ({exc}). Nothing was added to the scene.") from None
    props = root.find("properties")
    if props is None:
        raise gs.ModelFileError(f"{where}: the file has no <properties kf=... km=.../> element (the propellers' "
                                "thrust and torque coefficients, as in Genesis World's urdf/drones/cf2x.urdf). "
                                "Nothing was added to the scene.")
    coefficients = []
    for name, unit in (("kf", "N/rpm^2"), ("km", "N m/rpm^2")):
        text = props.get(name)
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value >= 0):
            raise gs.ModelFileError(f"{where}: <properties {name}={text!r}> is not accepted: expected a finite number "
                                    f">= 0 ({unit}). Nothing was added to the scene.")
        coefficients.append(value)
    links = [l.get("name") for l in root.findall("link")]
    missing = [n for n in morph.propellers_link_name if n not in links]
    if missing:
        raise gs.OptionError(f"{where}: propellers_link_name names links the file lacks: {missing}; its links: "
                             f"{links}. Nothing was added to the scene.")
    return tuple(coefficients)


class DroneEntity(RigidEntity):
    """A multirotor (Genesis World's DroneEntity): a rigid entity with `set_propellers_rpm`. See the module's
    docstring for the physics and docs/rigid.md ("Drones") for the API."""

    _rpm_epoch = -1  # the solver's input epoch of the last set_propellers_rpm (see RigidSolver.input_epoch)

    def _init_drone(self, kf: float, km: float):
        """At add_entity: the file's coefficients (drone_coefficients)."""
        morph = self.morph
        self._kf, self._km = float(kf), float(km)
        self._spin = tuple(int(s) for s in morph.propellers_spin)
        self._propeller_names = tuple(morph.propellers_link_name)

    def _setup(self, link_start, link_end, dof_start, dof_end, q_start, q_end, link_names, joints=(), joint_start=0):
        """At build (genesis_rigid.compile), before the model goes to the device: the floating base's angular
        damping, Genesis World's default_base_ang_damping_scale times the drone's mass, on the rotation dofs of
        its free joint."""
        super()._setup(link_start, link_end, dof_start, dof_end, q_start, q_end, link_names, joints, joint_start)
        scale = self.morph.default_base_ang_damping_scale
        base = self.robot.bodies[0]
        if scale is not None and base.joints and base.joints[0].type == FREE:
            mass = sum(float(b.mass) for b in self.robot.bodies)
            dof_f = self.solver.compiled.arrays["dof_f"]
            dof_f[dof_start + 3:dof_start + 6, DF_DAMPING] = mass * scale
        self._prop_links = None

    # -- Genesis World's attributes ------------------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The drone's model: "CF2X", "CF2P" or "RACE" (gs.morphs.Drone.model)."""
        return self.morph.model

    @property
    def KF(self) -> float:
        """The thrust coefficient, N/rpm^2 (the URDF's <properties kf=...>): thrust = KF rpm^2."""
        return self._kf

    @property
    def KM(self) -> float:
        """The drag-torque coefficient, N m/rpm^2 (the URDF's <properties km=...>): torque = KM rpm^2 spin."""
        return self._km

    @property
    def n_propellers(self) -> int:
        return len(self._propeller_names)

    @property
    def propellers_link(self) -> list:
        """The propeller links (RigidLink), in the order of the rpm."""
        return [self.get_link(name) for name in self._propeller_names]

    @property
    def propellers_idx(self) -> torch.Tensor:
        """The propeller links' indices in the solver (Genesis World's), a long tensor on gs.device."""
        return torch.tensor([link.idx for link in self.propellers_link], dtype=torch.long, device=gs.device)

    @property
    def propellers_spin(self) -> torch.Tensor:
        """Each propeller's spin, 1 counter-clockwise, -1 clockwise (gs.morphs.Drone.propellers_spin)."""
        return torch.tensor(self._spin, dtype=gs.tc_float, device=gs.device)

    @property
    def COM_link_idx(self) -> int:
        """The solver index of the link that carries the drone's centre of mass (its base link, into which the
        file's fixed links other than the propellers are merged; Genesis World's deprecated COM_link_name)."""
        return self.base_link.idx

    # -- propellers ------------------------------------------------------------------------------------------------

    def _propeller_columns(self):
        """(solver link indices: a slice where they are consecutive, else a long tensor; the coefficients [n, 2]:
        per propeller KF and KM spin (the torque's sign reversed for "RACE")), computed once after build."""
        if self._prop_links is None:
            idx = [link.idx for link in self.propellers_link]
            if idx == list(range(idx[0], idx[0] + len(idx))):
                links = slice(idx[0], idx[0] + len(idx))
            else:
                links = torch.tensor(idx, dtype=torch.long, device=gs.device)
            sign = -1.0 if self.model == "RACE" else 1.0
            coefficients = [(self._kf, sign * self._km * s) for s in self._spin]
            self._prop_links = (links, torch.tensor(coefficients, dtype=self.solver.float_dtype, device=gs.device))
        return self._prop_links

    def set_propellers_rpm(self, propellers_rpm, envs_idx=None):
        """Set the propellers' speeds (revolutions per minute) for the next step: `([n_envs,] n_propellers)` (one
        row for all environments too; with envs_idx, a row per environment listed), finite and >= 0. Each
        propeller pushes its link along the link's z axis with KF rpm^2 (N) and turns it about that axis with KM
        rpm^2 spin (N m, the sign reversed for model "RACE"), at the link's centre of mass, during the next step
        only (see the module's docstring). A second call before the step for an environment already set raises
        (Genesis World's "once per step"); environments not in envs_idx are untouched. Bad input raises an
        OptionError before anything changes."""
        with torch_one_thread():  # (small ops beside Taichi's thread pool: see RigidSolver.process_input)
            self._set_rpm(propellers_rpm, envs_idx)

    def _set_rpm(self, propellers_rpm, envs_idx):
        solver, scene = self.solver, self.scene
        scene._require_built("set_propellers_rpm")
        what = "set_propellers_rpm"
        envs = scene._sanitize_envs_idx(envs_idx)
        n = self.n_propellers
        n_rows = solver.batch if envs is None else len(envs)
        x = to_tensor(propellers_rpm, solver.float_dtype, solver.device, f"{what}: propellers_rpm").detach()
        want = (n_rows, n) if scene.n_envs else (n,)
        if x.shape != want and not (scene.n_envs and x.shape == (n,)):
            extra = f" (or ({n},) for every environment)" if scene.n_envs else ""
            raise gs.OptionError(f"{what}: propellers_rpm must have shape {want}{extra}: one speed per propeller "
                                 f"({', '.join(self._propeller_names)}), got shape {tuple(x.shape)}.")
        rpm2 = x * x
        # NaN fails both tests; rpm^2 must stay finite in the precision (float32: rpm below 1.8e19)
        if not (float(x.min()) >= 0 and float(rpm2.max()) < math.inf):
            bad = (~((x >= 0) & (rpm2 < math.inf))).nonzero()[0].tolist()
            raise gs.OptionError(f"{what}: propellers_rpm must be finite and >= 0 (rev/min; its square finite in the "
                                 f"precision), got {float(x[tuple(bad)])} at index {tuple(bad)}; nothing was set.")
        self._check_once(envs, what)
        links, coefficients = self._propeller_columns()
        st, f = solver.state, solver.frame
        with torch.no_grad():
            quat = st.at("links_quat", f)[:, links]
            if envs is not None:
                quat = quat[envs]
            # the z axis of each propeller link, world (the third column of its rotation matrix), as q (x) q
            # times the constant [16, 3] map
            axis = (quat.unsqueeze(-1) * quat.unsqueeze(-2)).flatten(-2) @ self._z_axis_map(quat)
            # per propeller (thrust, drag torque) magnitudes [rows, n, 2], then along the axis: [rows, n, 6]
            magnitude = rpm2.expand(n_rows, n).unsqueeze(-1) * coefficients
            wrench = (magnitude.unsqueeze(-1) * axis.unsqueeze(-2)).flatten(-2)
            applied = st.tensors["links_applied_wrench"]
            if envs is None:
                applied[:, links] += wrench
            else:
                rows = applied[envs]
                rows[:, links] += wrench
                applied[envs] = rows
        self._mark_set(envs)

    _Z_MAP = {}

    @classmethod
    def _z_axis_map(cls, like):
        """M [16, 3] with z(q) = vec(q q^T) M for a unit quaternion q = (w, x, y, z): the rotation's third column
        (2 (xz + wy), 2 (yz - wx), w^2 - x^2 - y^2 + z^2)."""
        key = (like.dtype, like.device)
        if key not in cls._Z_MAP:
            m = torch.zeros(4, 4, 3, dtype=like.dtype, device=like.device)
            w, x, y, z = range(4)
            for a, b, c, value in ((x, z, 0, 1), (w, y, 0, 1), (y, z, 1, 1), (w, x, 1, -1)):
                m[a, b, c] = m[b, a, c] = value
            for a, value in ((w, 1), (x, -1), (y, -1), (z, 1)):
                m[a, a, 2] = value
            cls._Z_MAP[key] = m.reshape(16, 3)
        return cls._Z_MAP[key]

    # the environments set since the solver's input epoch moved on: None (none), or a bool [B] mask
    _set_mask = None

    def _check_once(self, envs, what):
        """Raise if set_propellers_rpm already set one of `envs` (None: all) in this step (Genesis World's
        rule)."""
        epoch = self.solver.input_epoch
        if self._rpm_epoch != epoch:
            self._rpm_epoch, self._set_mask = epoch, None
        mask = self._set_mask
        if mask is None:
            return
        taken = mask if envs is None else mask[envs]
        if bool(taken.any()):
            again = (taken.nonzero()[:, 0] if envs is None else envs[taken]).tolist()
            raise gs.SceneError(f"{what} can only be called once per step (Genesis World's rule): environments "
                                f"{again} already have their propellers' speeds for the next step; call scene.step() "
                                "first. Nothing was set.")

    def _mark_set(self, envs):
        B = self.solver.batch
        if envs is None:
            if self._all_set is None or self._all_set.shape[0] != B:
                self._all_set = torch.ones(B, dtype=torch.bool, device=self.solver.device)
            self._set_mask = self._all_set  # (never written: a partial call after it copies it)
        else:
            mask = (torch.zeros(B, dtype=torch.bool, device=self.solver.device) if self._set_mask is None
                    else self._set_mask.clone())
            mask[envs] = True
            self._set_mask = mask

    _all_set = None

    def set_propellels_rpm(self, propellers_rpm, envs_idx=None):
        """set_propellers_rpm under the spelling of Genesis World's earlier releases."""
        self.set_propellers_rpm(propellers_rpm, envs_idx)

    def update_propeller_vgeoms(self):
        """Genesis World turns the propellers' visual meshes by the revolutions set; accepted with no effect here
        (the cameras and the viewer draw each propeller fixed to its link)."""
