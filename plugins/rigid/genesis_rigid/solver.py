"""RigidSolver: articulated rigid bodies in generalized coordinates, batched over environments."""

from __future__ import annotations

import time
import warnings

import numpy as np
import taichi as ti
import torch

import genesis_core as gs
from genesis_core.launch import Launcher, torch_one_thread
from genesis_core.rotations import quat_to_mat

from . import kernels_step
from .backward import Backward
from .compile import compile_model
from .drone import DroneEntity, drone_coefficients
from .entity import RigidEntity
from .equality import FIELDS as EQUALITY_FIELDS, Equalities
from .variants import Variants
from .kernels_collision import CF_DEPTH, CF_N, CF_NORMAL, CF_POS, CI_KEY, CI_LINK_A, CI_LINK_B, CI_META, CI_N, CM_SETTLED, GS_N, \
    CM_SWEEPS, HASH_FACTOR, KEY_SPAN
from .kernels_constraint import RF_N
from .kernels_convex import NAR_ROWS, NF_N, NI_N
from .launch_mode import LaunchMode
from .layout import DF_N, ED_RELQUAT, EQ_ROWS, PF_GRAVITY, GC_N, GD_N, GF_FRICTION, GT_N, LF_MASS, LF_N, LF_POS, \
    LF_QUAT, PI_GEOM_A, PI_GEOM_B, RI_N, SD_N
from .material import Kinematic, Rigid
from .model import BALL, FREE
from .options import RigidOptions
from .params import ParamSync, versions
from .robots import describe
from .views import Views

def _tangent_basis(n):
    """kernels_math.tangent_basis of torch unit normals [..., 3]: two unit tangents completing n to a right-handed
    frame."""
    nx, ny, nz = n.unbind(-1)
    zero = torch.zeros_like(nx)
    first = (torch.abs(nx) < 0.57).unsqueeze(-1)
    t1 = torch.where(first, torch.stack([zero, nz, -ny], -1), torch.stack([ny, -nx, zero], -1))
    t1 = t1 / t1.norm(dim=-1, keepdim=True)
    return t1, torch.cross(n, t1, dim=-1)


def _same_arrays(a, b) -> bool:
    """Whether two {name: array} dicts (or None) hold the same array objects under the same names."""
    if a is b:
        return True
    if a is None or b is None or a.keys() != b.keys():
        return False
    return all(x is b[name] for name, x in a.items())


class RigidSolver(LaunchMode, ParamSync, Backward, Views, Equalities, Variants, gs.SolverBase):
    """Articulated bodies from primitives, URDF and MJCF; contacts and joint limits by projected Gauss-Seidel."""

    short_name = "rigid"
    order = 10
    options_class = RigidOptions
    material_class = Rigid
    entity_class = RigidEntity
    supports_grad = True
    # every this many collision passes (and at the first), the contacts found are counted against max_contacts
    CONTACT_CHECK_EVERY = 32
    _n_collides = 0
    _contacts_warned = False
    state_fields = (
        gs.FieldSpec("qpos", ("n_qs",), grad=True, quat="qpos_quats", sentinel=True,
                     doc="generalized positions (free: xyz + wxyz quat; ball: wxyz), m / rad"),
        gs.FieldSpec("dofs_vel", ("n_dofs",), grad=True, sentinel=True,
                     doc="generalized velocities (free: world linear, body angular)"),
        gs.FieldSpec("dofs_acc", ("n_dofs",), grad=True, doc="generalized accelerations of the last substep"),
        gs.FieldSpec("links_pos", ("n_links", 3), grad=True, doc="link frame origins, world, m"),
        gs.FieldSpec("links_quat", ("n_links", 4), grad=True, quat=True, doc="link orientations, world, (w, x, y, z)"),
        gs.FieldSpec("contact_impulse", ("n_contacts", 3), grad=True,
                     doc="warm start: the impulses (normal, 2 tangents) of the contacts of the substep that led to "
                         "this frame, per entry of the contact pool, N s"),
        gs.FieldSpec("contact_key", ("n_contacts",), dtype="int", bounds=(-1, None),
                     doc="the key of each contact_impulse entry, (candidate pair) * 4096 + feature; -1: none"),
        gs.FieldSpec("limit_impulse", ("n_limits",), grad=True,
                     doc="warm start: the impulse of each joint or tendon limit's row in the substep that led to this "
                         "frame (the limited dofs in order, then the limited tendons; 0 where the limit was not "
                         "engaged; one unused entry when the model has no limits), N s or N m s"),
        gs.FieldSpec("links_ext_impulse", ("n_links", 6), grad=True,
                     doc="impulses couplings handed to the links, applied by the substep that starts at this frame: "
                         "linear (N s), angular about the link's centre of mass (N m s), world axes"),
        gs.FieldSpec("dofs_ctrl_mode", ("n_dofs",), dtype="int", frames=False, codes=(0, 1, 2),
                     doc="0 force, 1 position, 2 velocity"),
        gs.FieldSpec("dofs_ctrl_force", ("n_dofs",), frames=False, grad=True, doc="force/torque command, N or N m"),
        gs.FieldSpec("dofs_ctrl_pos", ("n_dofs",), frames=False, grad=True, doc="position target"),
        gs.FieldSpec("dofs_ctrl_vel", ("n_dofs",), frames=False, grad=True, doc="velocity target"),
        gs.FieldSpec("dofs_kp", ("n_dofs",), frames=False, grad=True, bounds=(0, None), doc="position gain"),
        gs.FieldSpec("dofs_kv", ("n_dofs",), frames=False, grad=True, bounds=(0, None), doc="velocity gain"),
        # the dofs' parameters, per environment (set_dofs_damping, ...; a checkpoint carries them)
        gs.FieldSpec("dofs_damping", ("n_dofs",), frames=False, grad=True, bounds=(0, None),
                     doc="joint damping, N m s/rad or N s/m"),
        gs.FieldSpec("dofs_armature", ("n_dofs",), frames=False, grad=True, bounds=(0, None),
                     doc="armature (reflected rotor inertia) added to the mass matrix, kg m^2 or kg"),
        gs.FieldSpec("dofs_stiffness", ("n_dofs",), frames=False, grad=True, bounds=(0, None),
                     doc="joint spring stiffness toward the spring reference (hinge and slide dofs), N m/rad or N/m"),
        gs.FieldSpec("dofs_force_lo", ("n_dofs",), frames=False,
                     doc="lower end of the control force range (commands and PD laws are clamped to it), N or N m"),
        gs.FieldSpec("dofs_force_hi", ("n_dofs",), frames=False,
                     doc="upper end of the control force range, N or N m"),
        gs.FieldSpec("links_applied_wrench", ("n_links", 6), frames=False,
                     doc="external forces applied to the links for the next step (apply_links_external_force / "
                         "_torque): force (N) and torque about the link's centre of mass (N m), world axes"),
        # the links' inertial parameters and the geoms' friction, per environment (domain randomization)
        gs.FieldSpec("links_inertial_mass", ("n_links",), frames=False, grad=True, bounds=(0, None),
                     doc="each link's mass before its shift, kg (set_links_inertial_mass, link.set_mass)"),
        gs.FieldSpec("links_mass_shift", ("n_links",), frames=False, grad=True,
                     doc="mass added to each link, kg (set_mass_shift; the dynamics keep at least MIN_MASS_FRACTION of "
                         "links_inertial_mass); the rotational inertia scales with the mass"),
        gs.FieldSpec("links_com_shift", ("n_links", 3), frames=False,
                     doc="offset of each link's centre of mass, link frame, m (set_COM_shift)"),
        gs.FieldSpec("geoms_friction_ratio", ("n_geoms",), frames=False, grad=True, bounds=(0, None),
                     doc="factor on each geom's friction coefficient (set_friction_ratio)"),
        gs.FieldSpec("links_step_wrench", ("n_links", 6), frames=False,
                     doc="the applied wrenches of the step under way (or the last one), as links_applied_wrench; "
                         "each of its substeps applies wrench * dt"),
        # the poses of the links fixed to the world, per environment (set_pos / set_quat of a fixed-base entity)
        gs.FieldSpec("fixed_base_pos", ("n_fixed_bases", 3), frames=False,
                     doc="the world position of each link welded to the world (a base without joints), m"),
        gs.FieldSpec("fixed_base_quat", ("n_fixed_bases", 4), frames=False, quat=True,
                     doc="the world orientation of each link welded to the world, (w, x, y, z)"),
        gs.FieldSpec("kinematic_qpos", ("n_kinematic_qs",), frames=False, quat="kinematic_quats",
                     doc="the configuration of the kinematic entities (gs.materials.Kinematic), their joints' "
                         "coordinates laid out as a rigid entity's qpos, in order (one padding entry when there is "
                         "none); their links' poses follow it in fixed_base_pos / _quat"),
    ) + EQUALITY_FIELDS  # (genesis_rigid.equality)
    _view = None  # the ColliderView, made at the first collider_view call
    _diff_tape = None  # differentiable mode: the frame whose substep the backward re-ran, awaiting its reverse
    _view_tape = None  # differentiable mode: the frame whose collider view the backward re-made, awaiting its reverse

    def add_entity(self, idx, morph, material):
        """A RigidEntity, a DroneEntity for a gs.morphs.Drone (as Genesis World's solver picks its entity class by
        morph) or a KinematicEntity for gs.materials.Kinematic, with the morph's description parsed now: a bad file
        fails here, before the entity is added."""
        if isinstance(material, Kinematic):
            from .kinematic import KinematicEntity

            # parsed as a rigid body of the default material (its masses are not used)
            robot = describe(morph, Rigid())
            entity = KinematicEntity(self.scene, self, idx, morph, material)
            self.entities.append(entity)
            entity.robot = robot
            return entity
        coefficients = drone_coefficients(morph) if isinstance(morph, gs.morphs.Drone) else None
        robot = describe(morph, material)
        if coefficients is None:
            entity = super().add_entity(idx, morph, material)
        else:
            entity = DroneEntity(self.scene, self, idx, morph, material)
            entity._init_drone(*coefficients)
            self.entities.append(entity)
        entity.robot = robot
        return entity

    # -- model ------------------------------------------------------------------------------------------------------

    def build_model(self):
        """Compile the entities' descriptions (genesis_rigid.compile) and copy the arrays to the device."""
        m = self.compiled = compile_model(self.entities, self.options, self.sim_options,
                                          self.float_dtype == torch.float64, self.name)
        for e, (l0, l1, d0, d1, q0, q1, j0, j1) in zip(self.entities, m.entity_ranges):
            e._setup(l0, l1, d0, d1, q0, q1, m.link_names[l0:l1], m.joints[j0:j1], j0)
        self.n_links, self.n_joints, self.n_dofs, self.n_qs, self.n_geoms = (m.n_links, m.n_joints, m.n_dofs, m.n_qs,
                                                                             m.n_geoms)
        self.n_pairs, self.n_slots, self.n_mesh_pairs, self.n_gjk_pairs = (m.n_pairs, m.n_slots, m.n_mesh_pairs,
                                                                           m.n_gjk_pairs)
        self.n_limited, self.max_contacts, self.collision = m.n_limited, m.max_contacts, m.collision
        self.n_hfield_pairs = m.n_hfield_pairs
        # the kernels' model arrays, on the device (the per-environment parameter columns: _allocate_scratch)
        self.model = {name: self._taichi_array(a.shape, "i" if a.dtype.kind == "i" else "f", values=a)
                      for name, a in m.arrays.items()}
        self.dof_q = torch.tensor(m.dof_q, dtype=torch.long, device=self.device)

    def state_dims(self):
        quats = [j["q"] + (3 if j["type"] == FREE else 0) for j in self.compiled.joints if j["type"] in (FREE, BALL)]
        return {"n_qs": self.n_qs, "n_dofs": self.n_dofs, "n_links": self.n_links, "n_geoms": self.n_geoms,
                "n_contacts": self.max_contacts, "n_limits": max(self.n_limited, 1),
                "qpos_quats": quats, "n_eqs": self.n_eq_slots, "eq_quats": [ED_RELQUAT],
                "n_fixed_bases": len(self.fixed_bases), "n_kinematic_qs": max(1, len(self._kinematic0[0])),
                "kinematic_quats": self._kinematic0[1]}

    @property
    def _kinematic0(self):
        """(initial configuration, quaternion offsets) of the kinematic entities (genesis_rigid.kinematic)."""
        from .kinematic import kinematic_qpos0

        return kinematic_qpos0(self.entities)

    @property
    def fixed_bases(self) -> list:
        """The links welded to the world, in solver order: every root link without joints (a fixed-base entity's
        base, and any other jointless root of its file); their poses are the state's fixed_base_pos / _quat."""
        return [l for l, k in enumerate(self.compiled.links) if k["parent"] < 0 and k["joints"][0] == k["joints"][1]]

    def init_state(self, f):
        st = self.state
        st.rules = self._state_rules  # reset(state) and checkpoints meet the rules across entries and fields
        self._variant_tables()  # (per environment: a heterogeneous entity's variant, genesis_rigid.variants)
        st.at("qpos", f)[:] = torch.as_tensor(self._qpos0_env, dtype=self.float_dtype)
        st.at("dofs_kp", f)[:] = torch.as_tensor(self.compiled.kp0, dtype=self.float_dtype)
        st.at("dofs_kv", f)[:] = torch.as_tensor(self.compiled.kv0, dtype=self.float_dtype)
        st.at("contact_key", f)[:] = -1
        dof_f = self.compiled.arrays["dof_f"]
        for name, col in self.DOF_PARAMS:
            st.at(name, f)[:] = torch.as_tensor(dof_f[:self.n_dofs, col], dtype=self.float_dtype)
        st.at("links_inertial_mass", f)[:] = torch.as_tensor(self._link_f_env[:, :self.n_links, LF_MASS],
                                                             dtype=self.float_dtype)
        st.at("geoms_friction_ratio", f)[:] = 1.0
        fixed = self.fixed_bases
        st.at("fixed_base_pos", f)[:] = torch.as_tensor(self._link_f_env[:, fixed, LF_POS:LF_POS + 3],
                                                        dtype=self.float_dtype)
        st.at("fixed_base_quat", f)[:] = torch.as_tensor(self._link_f_env[:, fixed, LF_QUAT:LF_QUAT + 4],
                                                         dtype=self.float_dtype)
        kin0 = self._kinematic0[0]
        if len(kin0):
            st.at("kinematic_qpos", f)[:] = torch.as_tensor(kin0, dtype=self.float_dtype)
        self._allocate_scratch()
        self._choose_launch_mode()
        self.kinematics(f)
        self._init_equalities(f)

    def _taichi_array(self, shape, kind="f", element=(), values=None):
        """Zeros (or `values`) as a Taichi ndarray of `element`-shaped vectors or matrices (() scalars): through
        Taichi's own launch path (GENESIS_CORE_BOUND_LAUNCH=0) a Taichi-ndarray argument costs a third of a torch
        tensor's (genesis_core.launch), and the substep takes dozens. An empty array (Taichi has none) is a torch
        tensor: kernels take either."""
        dtype = ti.i32 if kind == "i" else (ti.f64 if self.float_dtype == torch.float64 else ti.f32)
        if 0 in shape:
            return torch.zeros(tuple(shape) + tuple(element), dtype=torch.int32 if kind == "i" else self.float_dtype,
                               device=self.device)
        if len(element) == 1:
            a = ti.Vector.ndarray(element[0], dtype, shape=tuple(shape))
        elif len(element) == 2:
            a = ti.Matrix.ndarray(element[0], element[1], dtype, shape=tuple(shape))
        else:
            a = ti.ndarray(dtype, shape=tuple(shape))
        if values is None:
            a.fill(0)
        else:
            a.from_numpy(np.ascontiguousarray(values, dtype=np.int32 if kind == "i" else
                                              (np.float64 if dtype == ti.f64 else np.float32)))
        return gs.runtime.track_taichi_array(a)

    def _allocate_scratch(self):
        B, L, J, D = self.batch, max(self.n_links, 1), max(self.n_joints, 1), max(self.n_dofs, 1)
        self._fk_key, self._fk_tensors = None, (self.state.qpos, self.state.links_pos, self.state.links_quat)
        C = self.max_contacts
        R = 3 * C + self.n_limited + EQ_ROWS * self.n_eq_slots

        def z(*shape, element=(), kind="f"):
            return self._taichi_array(shape, kind, element)

        v3, v6, m3 = (3,), (6,), (3, 3)
        # the broadphase's sweep order and axis, kept from substep to substep
        order = np.tile(self.compiled.sap_geoms, (B, 1))
        sap, sap_axis = self._taichi_array(order.shape, "i", values=order), z(B, kind="i")
        # finish_contacts' table, empty (-1) between its calls
        n_hash = 1 << (HASH_FACTOR * C - 1).bit_length()
        table = self._taichi_array((B, n_hash), "i", values=np.full((B, n_hash), -1))
        self.scratch = dict(
            s_qs=z(1, B, max(self.n_qs, 1)), s_vs=z(1, B, D), s_lpos=z(1, B, L, element=v3),
            s_lquat=z(1, B, L, element=(4,)), s_R=z(B, L, element=m3), s_com=z(B, L, element=v3),
            s_janchor=z(B, J, element=v3), s_jaxis=z(B, J, element=v3), s_ref=z(B, L, element=v3),
            s_cdof=z(B, D, element=v6), s_cdof_dot=z(B, D, element=v6), s_cvel=z(B, L, element=v6),
            s_cacc=z(B, L, element=v6), s_cfrc=z(B, L, element=v6), s_crb_m=z(B, L), s_crb_mc=z(B, L, element=v3), s_crb_io=z(B, L, element=m3),
            s_mass=z(B, D, D), s_dof=z(B, D, SD_N), s_J=z(B, R, self.compiled.row_width),
            s_W=z(B, R, self.compiled.row_width),
            s_row_f=z(B, R, RF_N),
            s_row_i=z(B, R, RI_N, kind="i"),
            # differentiable mode: the impulses after each sweep of the two passes, for the constraint stage's
            # reverse (kernels_constraint); a placeholder otherwise
            s_hist=z(1, 1, 1),
            s_geom_f=z(B, max(self.n_geoms, 1), GS_N, element=v3),
            s_near_i=z(B, self.n_mesh_pairs + 1, kind="i"), s_nar_f=z(B, NAR_ROWS, NF_N),
            s_nar_i=z(B, NAR_ROWS, NI_N, kind="i"), s_sep=z(B, max(self.n_gjk_pairs, 1), 3),
            s_sap=sap, s_sap_axis=sap_axis, s_hash=table,
            # the contact pool (kernels_collision), read from Python (the contacts of the last substep): torch
            s_con_f=torch.zeros((B, C, CF_N), dtype=self.float_dtype, device=self.device),
            s_con_i=torch.zeros((B, CI_N, max(C, CM_SETTLED + 1)), dtype=torch.int32, device=self.device))
        # the dofs' parameters per environment, as the kernels read them: the model's, with the columns of the
        # state's dofs_* parameters (_sync_dof_params)
        base = self.compiled.arrays["dof_f"][:self.n_dofs]
        self.model["dof_f"] = self._taichi_array((B, self.n_dofs, DF_N), "f",
                                                 values=np.broadcast_to(base, (B,) + base.shape))
        self._dof_params_seen = self._dof_params_values = None
        # the links' inertial columns and the geoms' friction per environment (_sync_link_params)
        self.model["link_f"] = self._taichi_array(self._link_f_env.shape, "f", values=self._link_f_env)
        self.model["geom_mu"] = self._taichi_array((B, self.compiled.arrays["geom_f"].shape[0]), "f",
                                                   values=self._geom_mu(np.ones(1)))
        self._link_params_seen = self._link_params_values = None
        self._bindings, self._step_cache = {}, None
        self.adjoint = self._allocate_adjoints() if self.sim_options.requires_grad else None

    def _allocate_adjoints(self):
        """Differentiable mode: the reverse kernels' per-substep arrays (kernels_step.substep_reverse_*): the
        adjoints g_* of what a substep computes, and the impulses after each sweep of the constraint passes."""
        B, L, J, D = self.batch, max(self.n_links, 1), max(self.n_joints, 1), max(self.n_dofs, 1)
        C, Q = self.max_contacts, max(self.n_qs, 1)
        R = 3 * C + self.n_limited + EQ_ROWS * self.n_eq_slots

        def z(*shape, element=()):
            return self._taichi_array(shape, "f", element)

        def t(*shape):  # read from Python afterwards (_parameter_gradients): torch
            return torch.zeros(shape, dtype=self.float_dtype, device=self.device)

        v3, v6, m3 = (3,), (6,), (3, 3)
        return dict(
            s_hist=z(B, 2 * (self.options.iterations + 1), R), g_q1=z(B, Q), g_q2=z(B, Q), g_v=z(B, D),
            g_vu=z(B, D), g_lpos=z(B, L, element=v3), g_lquat=z(B, L, element=(4,)), g_R=z(B, L, element=m3),
            g_com=z(B, L, element=v3), g_janchor=z(B, J, element=v3), g_jaxis=z(B, J, element=v3),
            g_cdof=z(B, D, element=v6), g_cdof_dot=z(B, D, element=v6), g_cvel=z(B, L, element=v6),
            g_mass=z(B, D, D), g_dof=z(B, D, GD_N), g_con=t(B, C, GC_N), g_imp_in=z(B, C, 3), g_imp_out=z(B, C, 3),
            g_link_f=t(B, L, LF_N), g_dof_f=t(B, D, DF_N), g_ctrl=t(B, D, GT_N), g_cacc=z(B, L, element=v6),
            g_cfrc=z(B, L, element=v6), g_crb_m=z(B, L), g_crb_mc=z(B, L, element=v3), g_crb_io=z(B, L, element=m3),
            g_row=z(B, R, RF_N), g_J=z(B, R, self.compiled.row_width), g_W=z(B, R, self.compiled.row_width), g_vs=z(B, D, 4))

    def memory_per_env(self) -> dict:
        """Bytes per environment of each state field (all its frames) and scratch array: what a batch costs."""
        out = {}
        for name, t in self.state.tensors.items():
            out[name] = t.numel() * t.element_size() // self.batch
        for name, a in self.scratch.items():
            if isinstance(a, torch.Tensor):
                n, size = a.numel(), a.element_size()
            else:
                n = int(np.prod(a.shape)) * int(np.prod(a.element_shape or (1,)))
                size = 8 if a.dtype == ti.f64 else 4
            out[name] = n * size // self.batch
        return out

    # -- stepping ---------------------------------------------------------------------------------------------------

    def _kernel(self, kernel):
        """The kernel's copy this solver runs (launch_mode): the parallel one, or its serial copy."""
        return kernels_step.SERIAL_OF[kernel] if self._serial else kernel

    @property
    def _step_launch(self):
        if "_launcher" not in self.__dict__:
            self._launcher = Launcher()
        return self._launcher

    def kernel_arrays(self) -> dict:
        """Every array the kernels take, by their parameter names: the state's fields (all frames), the model's
        arrays and the scratch. The kernels are bound to them by name (`genesis_core.launch.Launcher.bind`): a new
        state field is its declaration and the kernel parameter of its name. (The differentiable mode's adjoints
        and the state's gradients, `G_<field>`, join them in backward.py.)"""
        return {**self.state.tensors, **self.model, **self.scratch}

    _bindings = None  # {(kernel copy, launcher): (the arrays in place of the solver's, or None; its Bound)}

    def _bind(self, kernel, launcher=None, arrays=None):
        """The launch mode's copy of `kernel` bound by name to kernel_arrays(), with `arrays` (a dict) in place of
        those of their names; bound again only when one of those arrays is another object (a caller in a hot path
        passes the same dict, which skips the comparison; the state's tensors are never replaced, the model's and
        the scratch arrays only by _allocate_scratch, which drops the bindings)."""
        k = self._kernel(kernel)
        launcher = launcher or self._step_launch
        cached = self._bindings.get((k, id(launcher)))
        if cached is None or not _same_arrays(cached[0], arrays):
            cached = self._bindings[(k, id(launcher))] = (
                arrays, launcher.bind(k, {**self.kernel_arrays(), **arrays} if arrays else self.kernel_arrays()))
        return cached[1]

    _step_cache = None  # (launch mode, collide, collide_meshes or None, substep, collide_terrain or None): a plain
    # substep's launches

    def _step_kernels(self):
        """A plain substep's launches for the current launch mode, (serial, collide(f, fn, fresh, finish),
        collide_meshes(f, fn) or None, substep(f, fn, fresh, links_ext_impulse), collide_terrain(f, fn, finish) or
        None): bound by name once, called with
        their leading parameters positionally (Bound.leading: without the keyword handling of a call by name, which
        showed in a one-environment substep; benchmarks/README.md, "rigid_step.py")."""
        cached = self._step_cache
        if cached is None or cached[0] != self._serial:
            meshes = self._bind(kernels_step.collide_meshes).leading("f", "fn") if self.n_mesh_pairs else None
            terrain = (self._bind(kernels_step.collide_terrain).leading("f", "fn", "finish") if self.n_hfield_pairs
                       else None)
            cached = self._step_cache = (
                self._serial, self._bind(kernels_step.collide).leading("f", "fn", "fresh", "finish"), meshes,
                self._bind(kernels_step.substep).leading("f", "fn", "fresh", "links_ext_impulse"), terrain)
        return cached

    def _run(self, kernel, arrays=None, **values):
        """Launch `kernel` (bound by name; `arrays`, a dict kept by the caller, in place of the solver's; `values`
        its scalars and any array given at this launch only) outside a plain substep: such a kernel may write the
        scratch the last substep's final kinematics left, so the next substep computes them again
        (_fresh_kinematics)."""
        self._fk_key = None
        self._bind(kernel, arrays=arrays)(**values)

    _fk_key = None  # _kinematics_key of the frame whose kinematics the scratch holds, if a plain substep left them

    def _kinematics_key(self, f):
        """What the kinematics of frame f in the scratch (s_R, s_com, s_janchor, s_jaxis; the substep's final
        forward_kinematics writes them) depend on: the frame, the state tensors it reads and writes (a reset, a
        setter or a checkpoint writes them in place, which moves their version counters; the kernels' writes do
        not) and the links' parameters (_sync_link_params)."""
        q, pos, quat = self._fk_tensors  # (the state's tensors are never replaced; a new scratch drops the key)
        return f, q._version, pos._version, quat._version, self._link_params_seen

    def _fresh_kinematics(self, f) -> int:
        """1 if the scratch holds the kinematics of frame f as a plain substep ending there left them, with nothing
        written since: the substep and `collide` then take them instead of computing them again (the same code on
        the same bits gives the same values, so a trajectory does not depend on it); else 0."""
        return int(self._fk_key is not None and self._fk_key == self._kinematics_key(f))

    def kinematics(self, f, envs_idx=None):
        """The link poses of frame f from its qpos; envs_idx (a long tensor): only those environments' poses change,
        the others are put back as they were."""
        self._sync_link_params()
        st = self.state
        keep = None
        if envs_idx is not None and self.batch > 1:
            keep = st.at("links_pos", f).clone(), st.at("links_quat", f).clone()
        self._run(kernels_step.kinematics, f=f)
        if keep is not None:
            others = torch.ones(self.batch, dtype=torch.bool, device=keep[0].device)
            others[envs_idx.to(keep[0].device)] = False
            st.at("links_pos", f)[others] = keep[0][others]
            st.at("links_quat", f)[others] = keep[1][others]

    def _collide(self, f, fresh=0):
        """Contacts at the link poses of frame f into s_con_f / s_con_i: primitive pairs, then height-field pairs,
        then mesh pairs. fresh: the scratch holds frame f's rotations (_fresh_kinematics)."""
        fn, meshes = self.frames.next(f), self.n_mesh_pairs > 0
        # (of the kinematics' scratch, these write only frame f's rotations, the values the kinematics give them:
        # they keep _fresh_kinematics' key)
        _, collide, collide_meshes, _, terrain = self._step_kernels()
        collide(f, fn, fresh, int(not meshes and terrain is None))
        if terrain is not None:
            terrain(f, fn, int(not meshes))
        if meshes:
            collide_meshes(f, fn)
        self._n_collides += 1
        if not self._contacts_warned and self._n_collides % self.CONTACT_CHECK_EVERY == 1:
            self._check_contact_capacity()

    def _check_contact_capacity(self):
        """Warn once when an environment has more contacts than the pool holds: the deepest are kept, the others
        dropped (bodies may sink through each other)."""
        found = int(self.scratch["s_con_i"][:, CI_META, 1].max())
        if found > self.max_contacts:
            self._contacts_warned = True
            warnings.warn(f"RigidSolver: {found} contacts in one environment, more than max_contacts="
                          f"{self.max_contacts}; the deepest {self.max_contacts} are kept and bodies may sink "
                          f"through each other. Raise the limit: gs.Scene(rigid_options=gs.options.RigidOptions("
                          f"max_contacts={2 * found})).", stacklevel=2)

    _input_epoch = 0

    @property
    def input_epoch(self) -> int:
        """A count that moves on at every step's process_input and at every state restore (reset, set_state,
        load_checkpoint): what an entity sets "once per step" (a drone's propellers) is keyed by it."""
        return self._input_epoch

    def set_state(self, f, state, envs_idx=None):
        super().set_state(f, state, envs_idx)
        self._input_epoch += 1

    def state_restored(self):
        """After load_checkpoint wrote the state (genesis_core.scene)."""
        self._input_epoch += 1

    _applied_zeroed = None  # (id, version) of links_applied_wrench right after process_input zeroed it
    _step_zero = None  # (id, version) of links_step_wrench when it was last seen to be zero
    _wrench_any = (None, False)  # ((id, version) of links_step_wrench, whether it holds a non-zero wrench)

    def process_input(self):
        """The wrenches applied since the last step act during this one, as in Genesis World: they move from
        links_applied_wrench to links_step_wrench (each substep applies wrench * dt), replacing the last step's.
        Nothing to do (no tensor touched) while nothing is applied and nothing was. (torch on one thread here and
        where the substeps read the wrenches, launch.torch_one_thread: beside Taichi's thread pool, torch's own
        made these three ops on 4096 environments' wrenches take 6-12 ms each on 2 cores, against 0.03.)"""
        self._input_epoch += 1
        st = self.state
        applied, step = st.tensors["links_applied_wrench"], st.tensors["links_step_wrench"]
        if versions([applied]) == self._applied_zeroed and versions([step]) == self._step_zero:
            return
        with torch.no_grad(), torch_one_thread():
            step.copy_(applied)
            applied.zero_()
        self._applied_zeroed = versions([applied])
        with torch_one_thread():
            self._step_zero = None if bool(step.any()) else versions([step])

    def _step_wrench(self):
        """links_step_wrench * dt ([B, L, 6]), or None when no wrench acts in this step."""
        step = self.state.tensors["links_step_wrench"]
        key = versions([step])
        if self._wrench_any[0] != key:
            self._wrench_any = (key, bool(step.any()))
        return step.detach() * self.sim_options.substep_dt if self._wrench_any[1] else None

    def _ext_impulse(self, f):
        """The links' external impulses the substep at frame f applies: the couplings' (the state's frame f), plus
        the applied wrenches of the step (in a copy, so the state's frame keeps what the couplings handed; the state's
        frame f + 1, which the couplings fill next, is cleared here as the kernel clears the tensor it is handed)."""
        st = self.state
        wrench = self._step_wrench()
        if wrench is None:
            return st.links_ext_impulse
        if self.__dict__.get("_ext_copy") is None:
            self._ext_copy = torch.zeros_like(st.links_ext_impulse.detach())
        with torch.no_grad():
            torch.add(st.at("links_ext_impulse", f).detach(), wrench, out=self._ext_copy[f])
            # the kernel clears the copy's frame f + 1; the couplings of this substep fill the state's
            st.at("links_ext_impulse", self.frames.next(f)).zero_()
        return self._ext_copy

    def substep_pre_coupling(self, f):
        self._sync_link_params()
        self._sync_dof_params()
        if self._recording():
            self._rerun_substep(f)
            return
        if self._static_world(f):
            self._fk_key = None
            return
        trial = self._trial
        start = time.perf_counter() if trial is not None else 0.0
        fresh, fn = self._fresh_kinematics(f), self.frames.next(f)
        if self.collision:
            self._collide(f, fresh)
            self._log_contacts()
        with torch_one_thread():
            ext_impulse = self._ext_impulse(f)
        self._step_kernels()[3](f, fn, fresh, ext_impulse)
        self._fk_key = self._kinematics_key(fn)
        if trial is not None:
            self._time_trial(time.perf_counter() - start)

    _view_key = None  # the static world's key when the collider view's geometry was computed
    _static = (None, 0)  # (the static world's key at the last full substep, how many such substeps in a row)

    def _static_key(self):
        """What a substep reads of a world without dofs: every state tensor's version (the model's arrays change
        only through the parameter setters, which write state first), except the couplings' impulse accumulator,
        which moves no fixed body."""
        return tuple((id(t), t._version) for name, t in self.state.tensors.items() if name != "links_ext_impulse")

    def _static_world(self, f) -> bool:
        """A world with no dofs and no collisions writes the same frame at every substep (the fixed links' poses,
        no contacts) while nothing it reads changes: once each frame of the ring holds that frame, a substep only
        clears frame fn's impulse accumulator, as the kernel would. Returns whether the substep is done."""
        if self.n_dofs or self.collision:
            return False
        key = self._static_key()
        same = key == self._static[0]
        if same and self._static[1] >= self.frames.n_frames:
            with torch.no_grad():
                self.state.at("links_ext_impulse", self.frames.next(f)).zero_()
            return True
        self._static = (key, self._static[1] + 1 if same else 1)
        return False

    def _entry_geoms(self, con_i, C):
        """The two geoms of each of the first C pool entries, [B, C] each, from their keys (pair * KEY_SPAN +
        feature; an unused entry's key reads as pair 0)."""
        if self.__dict__.get("_pair_i_t") is None:
            self._pair_i_t = torch.as_tensor(self.compiled.arrays["pair_i"], dtype=torch.long, device=self.device)
        pair_i = self._pair_i_t
        pair = (con_i[:, CI_KEY, :C].long().clamp(min=0) // KEY_SPAN).clamp(max=pair_i.shape[0] - 1)
        return pair_i[pair, PI_GEOM_A], pair_i[pair, PI_GEOM_B]

    # -- external forces (Genesis World's solver-level API: links_idx are the solver's link indices) --------------

    def apply_links_external_force(self, force, links_idx=None, envs_idx=None, ref="link_origin", local=False):
        """Apply `force` (N, `([n_envs,] n_links, 3)`, or one 3-vector for all) to the links `links_idx` (None:
        all) during the next step: at each link frame's origin (ref="link_origin", Genesis World's default) or
        at its centre of mass (ref="link_com"); world axes, or the link's own (local=True). Forces applied before
        one step add up; the step applies them at every substep and then they are gone."""
        self._apply_wrench(force, links_idx, envs_idx, ref, local, torque=False)

    def apply_links_external_torque(self, torque, links_idx=None, envs_idx=None, ref="link_origin", local=False):
        """Apply `torque` (N m) to the links during the next step, as apply_links_external_force (a torque acts
        the same about any point: ref is accepted for Genesis World's scripts)."""
        self._apply_wrench(torque, links_idx, envs_idx, ref, local, torque=True)

    def set_gravity(self, gravity):
        """The gravity (m/s^2, world; 3 numbers, checked by scene.set_gravity) the substeps apply from the next one
        on: scene.set_gravity after build."""
        params = self.model["params_f"]
        values = params.to_numpy()
        values[PF_GRAVITY:PF_GRAVITY + 3] = gravity
        params.from_numpy(values)
        self.compiled.gravity = tuple(float(x) for x in gravity)
        self._static = (None, 0)  # (a world without dofs keeps no gravity, but start its count again)

    @property
    def gravity(self) -> tuple:
        """The gravity (m/s^2, world) the rigid bodies fall with: RigidOptions.gravity, else SimOptions', until
        scene.set_gravity."""
        return self.compiled.gravity

    @property
    def links_info(self):
        """Genesis World's links_info names, read-only (genesis_rigid.info): inertial_mass, inertial_pos,
        inertial_i."""
        from .info import links_info

        return links_info(self)

    @property
    def dofs_info(self):
        """Genesis World's dofs_info names, read-only (genesis_rigid.info): damping, armature, stiffness, kp, kv,
        force_range, limit."""
        from .info import dofs_info

        return dofs_info(self)

    def get_qpos(self, qs_idx=None, envs_idx=None):
        """Genesis World's: the generalized positions `([n_envs,] n)` of the solver's qs `qs_idx` (every entity's
        qpos in solver order, an entity's from its `q_start`)."""
        from genesis_core.state import to_index

        qs = torch.arange(self.n_qs) if qs_idx is None else to_index(qs_idx, self.n_qs, "qs_idx")
        envs = None if envs_idx is None else to_index(envs_idx, self.batch, "envs_idx").to(self.device)
        return self.state.get_rows("qpos", self.frame, envs, (qs.to(self.device),))

    def set_qpos(self, qpos, qs_idx=None, envs_idx=None):
        """Genesis World's: set the generalized positions of the solver's qs `qs_idx` (get_qpos's layout), the
        velocities kept, through each entity's set_qpos (its quaternions checked and normalised; the link poses
        brought up to date)."""
        from genesis_core.state import to_index

        qs = (torch.arange(self.n_qs) if qs_idx is None else to_index(qs_idx, self.n_qs, "qs_idx")).tolist()
        qpos = torch.as_tensor(qpos, dtype=self.float_dtype, device=self.device)
        if qpos.shape[-1] != len(qs):
            raise gs.InvalidStateError(f"RigidSolver.set_qpos: {qpos.shape[-1]} values for {len(qs)} qs")
        for e in self.entities:
            cols = [i for i, q in enumerate(qs) if e.q_start <= q < e.q_start + e.n_qs]
            if cols and not getattr(e, "kinematic", False):
                e.set_qpos(qpos[..., cols], [qs[i] - e.q_start for i in cols], envs_idx, zero_velocity=False)

    @property
    def qpos(self):
        """Genesis World's field of generalized positions, [n_qs, n_envs] (one column without environments), as
        scripts read and write it: `.to_numpy()` and `.from_numpy(array)` (set_qpos), `.shape`."""
        return _QposField(self)

    def get_error_envs_mask(self):
        """Genesis World's: a bool tensor [n_envs], True for the environments the last step left non-finite
        (scene.invalid_envs)."""
        mask = torch.zeros(max(self.scene.n_envs, 1), dtype=torch.bool, device=self.device)
        mask[self.scene.invalid_envs.to(self.device)] = True
        return mask

    def _solver_links(self, links_idx, envs_idx):
        from genesis_core.state import to_index

        links = torch.arange(self.n_links) if links_idx is None else to_index(links_idx, self.n_links, "links_idx")
        envs = None if envs_idx is None else to_index(envs_idx, self.batch, "envs_idx").to(self.device)
        return links.to(self.device), envs

    def get_links_pos(self, links_idx=None, envs_idx=None):
        """Link frame origins `([n_envs,] n, 3)`, world (the solver's link indices, as Genesis World's solver)."""
        links, envs = self._solver_links(links_idx, envs_idx)
        return self.state.get_rows("links_pos", self.frame, envs, (links,))

    def get_links_quat(self, links_idx=None, envs_idx=None):
        links, envs = self._solver_links(links_idx, envs_idx)
        return self.state.get_rows("links_quat", self.frame, envs, (links,))

    def _apply_wrench(self, value, links_idx, envs_idx, ref, local, torque):
        from genesis_core.state import to_index, to_tensor

        what = "apply_links_external_" + ("torque" if torque else "force")
        if ref not in ("link_origin", "link_com"):
            raise gs.OptionError(f"{what}: ref={ref!r} is not accepted: expected 'link_origin' or 'link_com'.")
        links = (torch.arange(self.n_links) if links_idx is None else to_index(links_idx, self.n_links, "links_idx"))
        links = links.to(self.device)
        st, f = self.state, self.frame
        envs = None if envs_idx is None else to_index(envs_idx, self.batch, "envs_idx").to(self.device)
        rows = torch.arange(self.batch, device=self.device) if envs is None else envs
        n_rows = len(rows)
        x = to_tensor(value, self.float_dtype, self.device, what)
        try:
            x = torch.broadcast_to(x, (n_rows, len(links), 3))
        except RuntimeError:
            raise gs.OptionError(f"{what}: expected ([n_envs,] n_links, 3) values for {len(links)} links and "
                                 f"{n_rows} environments, got shape {tuple(x.shape)}.") from None
        if not bool(torch.isfinite(x).all()):
            raise gs.OptionError(f"{what}: the values must be finite.")
        quat = st.at("links_quat", f).detach()[rows][:, links]
        if local:
            x = (quat_to_mat(quat) @ x.unsqueeze(-1)).squeeze(-1)
        wrench = torch.zeros((n_rows, len(links), 6), dtype=self.float_dtype, device=self.device)
        if torque:
            wrench[..., 3:] = x
        else:
            wrench[..., :3] = x
            if ref == "link_origin":
                com = self.link_motion()[0][rows][:, links]
                arm = st.at("links_pos", f).detach()[rows][:, links] - com
                wrench[..., 3:] = torch.cross(arm, x, dim=-1)
        applied = st.tensors["links_applied_wrench"]
        with torch.no_grad():
            applied[rows[:, None], links[None, :]] += wrench

    # -- contacts ----------------------------------------------------------------------------------------------------

    def contacts(self) -> dict:
        """The contacts of the last substep, per environment, as [B, C] arrays (C = the pool's size; `valid` marks
        the entries in use): geom_a, geom_b, link_a, link_b (the solver's indices), position [B, C, 3] (world),
        normal [B, C, 3] (from a to b), penetration [B, C] (m: the depth, the overlap plus the pair's margin; 0 in
        unused entries), force_a, force_b [B, C, 3] (N: the constraint impulses of that substep,
        normal and friction, over its dt; b takes +, a the opposite). Also sweeps [B, 2]: the Gauss-Seidel sweeps
        of that substep's constraint solve, velocity pass and position pass (at most RigidOptions.iterations; 0
        where it had no rows or nothing to correct)."""
        s, st = self.scratch, self.state
        con_f, con_i = s["s_con_f"], s["s_con_i"]
        C = con_f.shape[1]
        n = con_i[:, CI_META, 0].long()
        valid = torch.arange(C, device=self.device)[None, :] < n[:, None]
        geom_a, geom_b = self._entry_geoms(con_i, C)
        normal = con_f[:, :, CF_NORMAL:CF_NORMAL + 3]
        t1, t2 = _tangent_basis(normal)  # kernels_math.tangent_basis's (nan for unused entries: masked below)
        lam = st.at("contact_impulse", self.frame).detach()[:, :C]
        force = (lam[..., :1] * normal + lam[..., 1:2] * t1 + lam[..., 2:3] * t2) / self.sim_options.substep_dt
        zero = torch.zeros_like(force)
        force = torch.where(valid[..., None], force, zero)
        return dict(geom_a=geom_a, geom_b=geom_b,
                    link_a=con_i[:, CI_LINK_A, :C].long(), link_b=con_i[:, CI_LINK_B, :C].long(),
                    position=con_f[:, :, CF_POS:CF_POS + 3].clone(), normal=normal.clone(),
                    penetration=torch.where(valid, con_f[:, :, CF_DEPTH], torch.zeros_like(con_f[:, :, CF_DEPTH])),
                    force_a=-force,
                    force_b=force, valid=valid, sweeps=con_i[:, CI_META, CM_SWEEPS:CM_SWEEPS + 2].long())


class _QposField:
    """RigidSolver.qpos: Genesis World's [n_qs, n_envs] field of generalized positions, over get_qpos / set_qpos."""

    def __init__(self, solver):
        self._solver = solver

    @property
    def shape(self):
        return (self._solver.n_qs, max(self._solver.batch, 1))

    def to_numpy(self):
        q = self._solver.get_qpos().detach().cpu().numpy()
        return (q.reshape(-1, self._solver.n_qs)).T.copy()

    def to_torch(self, device=None):
        q = self._solver.get_qpos().detach().reshape(-1, self._solver.n_qs).T.contiguous()
        return q if device is None else q.to(device)

    def from_numpy(self, array):
        a = np.asarray(array, dtype=np.float64)
        if a.shape != self.shape:
            raise gs.InvalidStateError(f"RigidSolver.qpos.from_numpy: shape {a.shape}, expected {self.shape}")
        self._solver.set_qpos(a.T if self._solver.scene.n_envs else a[:, 0])
