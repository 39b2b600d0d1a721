"""Two tasks on the rigid solver's shipped models: the cart-pole swing-up and a quadruped standing."""

from __future__ import annotations

import math
import os

import torch

import genesis_core as gs
from genesis_core.utils.geom import inv_quat, transform_by_quat

from .task import Task


def _shipped_model(name: str) -> str:
    """The rigid plugin's model `name` (registered asset folder "@rigid")."""
    from genesis_core.plugins import registry

    return registry().asset_path(f"@rigid/{name}")


class CartPoleSwingUp(Task):
    """Swing the pole of the cart-pole (the rigid plugin's `cartpole.xml`: a 1 kg cart on a +-3 m rail, a 0.1 kg,
    1 m pole on a hinge, angle 0 upright) up from hanging down, and keep it up with the cart near the middle.

    Action `(1,)` in [-1, 1]: the force on the cart, times `max_force` newtons.
    Observation `(5,)`: cart position x (m), cos and sin of the pole angle, cart velocity (m/s), pole angular
    velocity (rad/s).
    Reward in [0, 1]: upright * centred * small_control, with upright = (1 + cos angle) / 2,
    centred = (1 + exp(-x^2)) / 2 and small_control = 1 - 0.2 a^2.
    Episodes start with the pole hanging down (angle pi +- 0.1 rad, x +- 0.1 m, velocities +- 0.05), never
    terminate, and are truncated after `horizon` steps of `dt` seconds (default 500 steps, 5 s).
    """

    def __init__(self, horizon: int = 500, dt: float = 0.01, substeps: int = 2, max_force: float = 10.0,
                 model_path: str | None = None):
        self.horizon = horizon
        self.dt, self.substeps, self.max_force = dt, substeps, float(max_force)
        self.model_path = model_path

    def build(self, n_envs):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=self.dt, substeps=self.substeps))
        path = self.model_path or _shipped_model("cartpole.xml")
        # the classic cart-pole: the file's joints as MuJoCo reads them, without Genesis World's default rotor
        # inertia (0.1 on the cart's slide and the pole's hinge would change the task's dynamics)
        self.cartpole = scene.add_entity(gs.morphs.MJCF(file=path, default_armature=None))
        scene.build(n_envs=n_envs)
        self.n_envs = n_envs
        self.cartpole.set_dofs_position(torch.full((n_envs, 1), math.pi, dtype=gs.tc_float, device=gs.device),
                                        dofs_idx_local=[1])
        self.cartpole.control_dofs_force(torch.zeros((n_envs, 1), dtype=gs.tc_float, device=gs.device),
                                         dofs_idx_local=[0])
        return scene

    def observation_space(self):
        inf = float("inf")
        return self.box([-inf, -1.0, -1.0, -inf, -inf], [inf, 1.0, 1.0, inf, inf])

    def action_space(self):
        return self.box(-1.0, 1.0, shape=(1,))

    def apply_actions(self, actions):
        self.cartpole.control_dofs_force(actions * self.max_force, dofs_idx_local=[0])

    def observe(self):
        q = self.cartpole.get_dofs_position()
        v = self.cartpole.get_dofs_velocity()
        return torch.stack([q[:, 0], torch.cos(q[:, 1]), torch.sin(q[:, 1]), v[:, 0], v[:, 1]], dim=-1)

    def reward(self, actions):
        q = self.cartpole.get_dofs_position()
        upright = 0.5 * (1.0 + torch.cos(q[:, 1]))
        centred = 0.5 * (1.0 + torch.exp(-q[:, 0] ** 2))
        small_control = 1.0 - 0.2 * actions[:, 0] ** 2
        return upright * centred * small_control

    def terminated(self):
        return torch.zeros(self.n_envs, dtype=torch.bool, device=gs.device)

    def reset_envs(self, envs_idx, rand):
        u = rand(4) - 0.5
        pos = torch.stack([0.2 * u[:, 0], math.pi + 0.2 * u[:, 1]], dim=-1)
        self.cartpole.set_dofs_position(pos, envs_idx=envs_idx)
        self.cartpole.set_dofs_velocity(0.1 * u[:, 2:], envs_idx=envs_idx)


class QuadrupedStand(Task):
    """Stand a quadruped still on flat ground, by PD position servos on its twelve joints, as Genesis World's Go2
    environment drives its robot.

    The model is the rigid plugin's `quadruped.xml` (a Go2-sized robot of primitives, with the Go2's joint names),
    or `model_path`: a URDF or MJCF with the same twelve joint names (Genesis World's
    "urdf/go2/urdf/go2.urdf", with its assets installed), placed at `base_pos`.

    Action `(12,)` in [-1, 1]: joint position offsets, times `action_scale` radians, around the standing pose
    `DEFAULT_POSE` (thighs 0.8 rad front, 1.0 rear, calves -1.5), targets of PD servos with gains `kp`, `kv`.
    Observation `(46,)`: the trunk's linear velocity (body frame, times 2) and angular velocity (body frame, times
    0.25), gravity's direction in the body frame, the trunk's height above `target_height`, the joint positions
    less the standing pose, the joint velocities (times 0.05) and the last action.
    Reward: 0.5 exp(-((h - target_height) / 0.05)^2) + 0.5 (1 + cos tilt) / 2 - 0.001 |joint velocities|^2,
    where h is the trunk's height and tilt the angle between its z axis and the vertical.
    Termination: the trunk below `min_height` or tilted by more than `max_tilt` degrees. Truncation after
    `horizon` steps of `dt` seconds (default 500 steps, 10 s). Episodes start from the standing pose, the trunk
    released a few millimetres above the ground, each joint turning at up to +-`reset_noise` rad/s.
    """

    JOINTS = ("FR_hip_joint", "FR_thigh_joint", "FR_calf_joint", "FL_hip_joint", "FL_thigh_joint", "FL_calf_joint",
              "RR_hip_joint", "RR_thigh_joint", "RR_calf_joint", "RL_hip_joint", "RL_thigh_joint", "RL_calf_joint")
    DEFAULT_POSE = {"FL_hip_joint": 0.0, "FR_hip_joint": 0.0, "RL_hip_joint": 0.0, "RR_hip_joint": 0.0,
                    "FL_thigh_joint": 0.8, "FR_thigh_joint": 0.8, "RL_thigh_joint": 1.0, "RR_thigh_joint": 1.0,
                    "FL_calf_joint": -1.5, "FR_calf_joint": -1.5, "RL_calf_joint": -1.5, "RR_calf_joint": -1.5}

    def __init__(self, horizon: int = 500, dt: float = 0.02, substeps: int = 4, model_path: str | None = None,
                 base_pos=None, kp: float = 20.0, kv: float = 0.5, action_scale: float = 0.25,
                 target_height: float | None = None, min_height: float = 0.15, max_tilt: float = 60.0,
                 reset_noise: float = 0.5):
        self.horizon = horizon
        self.dt, self.substeps = dt, substeps
        self.model_path = model_path
        self.base_pos = tuple(base_pos) if base_pos is not None else ((0.0, 0.0, 0.0) if model_path is None
                                                                      else (0.0, 0.0, 0.42))
        self.kp, self.kv, self.action_scale = float(kp), float(kv), float(action_scale)
        # where the shipped model settles under its servos; Genesis World's Go2 task aims at 0.3 m
        self.target_height = float(target_height if target_height is not None else
                                   (0.28 if model_path is None else 0.3))
        self.min_height, self.max_tilt, self.reset_noise = float(min_height), float(max_tilt), float(reset_noise)

    def build(self, n_envs):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=self.dt, substeps=self.substeps))
        scene.add_entity(gs.morphs.Plane())
        path = self.model_path or _shipped_model("quadruped.xml")
        if os.path.splitext(str(path))[1].lower() == ".urdf":
            morph = gs.morphs.URDF(file=path, pos=self.base_pos)
        else:
            morph = gs.morphs.MJCF(file=path, pos=self.base_pos)
        self.robot = scene.add_entity(morph)
        scene.build(n_envs=n_envs)
        self.n_envs = n_envs
        self.dofs = [self.robot.get_joint(name).dof_idx_local for name in self.JOINTS]
        self.default = torch.tensor([self.DEFAULT_POSE[name] for name in self.JOINTS], dtype=gs.tc_float,
                                    device=gs.device)
        n = len(self.dofs)
        self.robot.set_dofs_kp(torch.full((n_envs, n), self.kp, dtype=gs.tc_float, device=gs.device), self.dofs)
        self.robot.set_dofs_kv(torch.full((n_envs, n), self.kv, dtype=gs.tc_float, device=gs.device), self.dofs)
        pose = self.default.expand(n_envs, n)
        self.robot.set_dofs_position(pose, self.dofs)
        self.robot.control_dofs_position(pose, self.dofs)
        self.last_actions = torch.zeros((n_envs, n), dtype=gs.tc_float, device=gs.device)
        return scene

    def observation_space(self):
        return self.box(-float("inf"), float("inf"), shape=(46,))

    def action_space(self):
        return self.box(-1.0, 1.0, shape=(len(self.JOINTS),))

    def apply_actions(self, actions):
        self.robot.control_dofs_position(self.default + self.action_scale * actions, self.dofs)
        self.last_actions = actions.clone()

    def _gravity(self, quat):
        down = torch.zeros_like(quat[:, 1:])
        down[:, 2] = -1.0
        return transform_by_quat(down, inv_quat(quat))

    def observe(self):
        quat = self.robot.get_quat()
        inv = inv_quat(quat)
        lin = transform_by_quat(self.robot.get_vel(), inv)
        ang = transform_by_quat(self.robot.get_ang(), inv)
        height = self.robot.get_pos()[:, 2:3] - self.target_height
        q = self.robot.get_dofs_position(self.dofs) - self.default
        v = self.robot.get_dofs_velocity(self.dofs)
        return torch.cat([2.0 * lin, 0.25 * ang, self._gravity(quat), height, q, 0.05 * v, self.last_actions], dim=-1)

    def reward(self, actions):
        h = self.robot.get_pos()[:, 2]
        upright = 0.5 * (1.0 - self._gravity(self.robot.get_quat())[:, 2])
        height = torch.exp(-(((h - self.target_height) / 0.05) ** 2))
        v = self.robot.get_dofs_velocity(self.dofs)
        return 0.5 * height + 0.5 * upright - 1e-3 * (v ** 2).sum(-1)

    def terminated(self):
        h = self.robot.get_pos()[:, 2]
        cos_tilt = -self._gravity(self.robot.get_quat())[:, 2]
        return (h < self.min_height) | (cos_tilt < math.cos(math.radians(self.max_tilt)))

    def reset_envs(self, envs_idx, rand):
        # the standing pose itself, set in motion by small joint velocities
        noise = self.reset_noise * (2.0 * rand(len(self.dofs)) - 1.0)
        self.robot.set_dofs_velocity(noise, self.dofs, envs_idx=envs_idx)
        self.last_actions[envs_idx] = 0.0
