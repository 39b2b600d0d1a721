"""A tiny plugin registered by hand in the tests: balls that fall (pure torch, no kernels) and a static floor
they collide with through the core's collider interface. It proves the coupler and the hooks, nothing more."""

import attrs
import torch

import genesis_core as gs
from genesis_core.coupler import GEOM_PLANE, ColliderView

CALLS = []


@attrs.define(frozen=True, kw_only=True)
class ToyBall(gs.materials.Material):
    solver = "ToyBallSolver"


@attrs.define(frozen=True, kw_only=True)
class ToyFloor(gs.materials.Material):
    solver = "ToyFloorSolver"


class ToyBallSolver(gs.SolverBase):
    short_name = "toy_ball"
    material_class = ToyBall
    state_fields = (gs.FieldSpec("pos", ("n", 3)), gs.FieldSpec("vel", ("n", 3)))
    order = 1

    def state_dims(self):
        return {"n": len(self.entities)}

    def init_state(self, f):
        self.state.pos[f] = torch.tensor([e.morph.pos for e in self.entities], dtype=self.float_dtype)

    def substep_pre_coupling(self, f):
        CALLS.append(("pre", self.name))
        h, g = self.sim_options.substep_dt, torch.tensor(self.sim_options.gravity, dtype=self.float_dtype)
        nxt = self.frames.next(f)
        self.state.vel[nxt] = self.state.vel[f] + h * g
        self.state.pos[nxt] = self.state.pos[f] + h * self.state.vel[nxt]

    def substep_post_coupling(self, f):
        CALLS.append(("post", self.name))


class ToyFloorSolver(gs.SolverBase):
    """A static floor (one plane geom per entity at the entity's height)."""

    short_name = "toy_floor"
    material_class = ToyFloor
    state_fields = (gs.FieldSpec("impulse", ("n", 6), frames=False, doc="what couplings pushed into the floor"),)
    order = 2

    def state_dims(self):
        return {"n": len(self.entities)}

    def substep_pre_coupling(self, f):
        CALLS.append(("pre", self.name))

    def substep_post_coupling(self, f):
        CALLS.append(("post", self.name))

    def collider_view(self, f):
        n, b, fl = len(self.entities), self.batch, self.float_dtype
        pos = torch.tensor([e.morph.pos for e in self.entities], dtype=fl).expand(b, n, 3)
        zeros = torch.zeros(b, n, 3, dtype=fl)
        return ColliderView(
            geom_type=torch.full((n,), GEOM_PLANE, dtype=torch.int32), geom_size=torch.zeros(n, 3, dtype=fl),
            geom_friction=torch.zeros(n, dtype=fl), geom_body=torch.arange(n, dtype=torch.int32),
            geom_pos=pos, geom_quat=torch.tensor([1.0, 0, 0, 0], dtype=fl).expand(b, n, 4), body_com=pos,
            body_lin_vel=zeros, body_ang_vel=zeros, body_impulse=self.state.impulse,
        )


class BallFloorCoupling:
    """Balls below a plane are put back on it and their normal velocity reversed (elastic bounce)."""

    def __init__(self, balls, floor, sim_options):
        self.balls, self.floor = balls, floor

    def couple(self, f):
        CALLS.append(("couple", "ToyBallSolver+ToyFloorSolver"))
        view = self.floor.collider_view(f)
        nxt = self.balls.frames.next(f)
        pos, vel = self.balls.state.pos[nxt], self.balls.state.vel[nxt]
        height = view.geom_pos[:, :, 2].max(dim=1).values[:, None]
        below = pos[..., 2] < height
        pos[..., 2] = torch.where(below, height.expand_as(pos[..., 2]), pos[..., 2])
        view.body_impulse[:, 0, 2] += (2 * vel[..., 2].clamp(max=0).abs() * below).sum(dim=1)
        vel[..., 2] = torch.where(below, vel[..., 2].abs(), vel[..., 2])

    def couple_grad(self, f):
        raise NotImplementedError


@gs.hookimpl
def register_solvers(register):
    register(ToyBallSolver)
    register(ToyFloorSolver)


@gs.hookimpl
def register_materials(register):
    register("ToyBall", ToyBall)
    register("ToyFloor", ToyFloor)


@gs.hookimpl
def register_couplings(register):
    register("ToyBallSolver", "ToyFloorSolver", BallFloorCoupling)


def make_scene(n_envs):
    """Two balls above a floor, each environment's dropped from its own height: `(scene, drive)` as
    `register_test_scenes` factories return them (the plugin must be registered by hand first)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, substeps=2))
    scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.3), radius=0.05), material=ToyBall())
    scene.add_entity(gs.morphs.Sphere(pos=(0.5, 0, 0.2), radius=0.05), material=ToyBall())
    scene.add_entity(gs.morphs.Plane(pos=(0, 0, 0.1)), material=ToyFloor())
    scene.build(n_envs=n_envs)
    balls = scene.toy_ball_solver
    lift = torch.arange(balls.batch, dtype=balls.float_dtype)[:, None] * 0.05
    balls.state.at("pos", balls.frame)[..., 2] += lift

    def drive(scene, i_step):
        pass

    return scene, drive
