"""Environments sharded over processes: each rank builds its shard of the batch (a box and a ball dropped on a
plane, each environment from its own random start drawn from its global index), steps it, gathers the
observations on rank 0, writes its checkpoint shard, and shows that resuming the shards continues the run bitwise.

    torchrun --nproc_per_node=2 examples/distributed_rollout.py     # two processes (gloo on the CPU)
    python examples/distributed_rollout.py                          # one process: the same numbers per environment

Options: --n-envs (total), --steps, --resume-steps, --checkpoint DIR, --backend cpu|gpu, --precision 32|64,
--resume (load the shards in DIR, run --resume-steps and report, instead of the whole run), --out FILE.npz (rank 0
writes the gathered observations and states there).
"""

import argparse
import os
import tempfile

import numpy as np
import torch

import genesis_core as gs


def build_scene(shard, seed=0):
    """The shard's scene, built with shard.n_envs environments, each set from its global index."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=2))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)))
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.9), radius=0.08))
    scene.build(n_envs=shard.n_envs)
    box_pos, box_quat, ball_pos = [], [], []
    for g in shard.global_idx.tolist():  # the start of each environment depends on its global index alone
        rng = gs.distributed.env_generator(g, seed)
        u = torch.rand(7, generator=rng, dtype=torch.float64)
        box_pos.append(torch.stack([0.1 * (u[0] - 0.5), 0.1 * (u[1] - 0.5), 0.3 + 0.5 * u[2]]))
        axis = torch.stack([u[3] - 0.5, u[4] - 0.5, torch.tensor(0.3, dtype=torch.float64)])
        angle = 1.2 * u[5]
        box_quat.append(torch.cat([torch.cos(angle / 2)[None], torch.sin(angle / 2) * axis / axis.norm()]))
        ball_pos.append(box_pos[-1] + torch.stack([0.05 * (u[6] - 0.5), torch.tensor(0.0, dtype=torch.float64),
                                                   torch.tensor(0.35, dtype=torch.float64)]))
    dtype, dev = gs.tc_float, gs.device
    box.set_pos(torch.stack(box_pos).to(dev, dtype))
    box.set_quat(torch.stack(box_quat).to(dev, dtype))
    ball.set_pos(torch.stack(ball_pos).to(dev, dtype))
    return scene, box, ball


def observe(box, ball):
    """[n_local, 13]: box position, orientation and linear velocity, ball position."""
    return torch.cat([box.get_pos(), box.get_quat(), box.get_vel(), ball.get_pos()], dim=1).as_subclass(torch.Tensor)


def main(n_envs=8, steps=40, resume_steps=20, checkpoint=None, backend="cpu", precision="64", resume=False,
         out=None, seed=0):
    dist = gs.distributed
    ctx = dist.init(backend=gs.gpu if backend == "gpu" else gs.cpu, precision=precision, seed=seed)
    shard = dist.shard(n_envs)
    scene, box, ball = build_scene(shard, seed)
    lines = []
    if resume:
        dist.load_checkpoint_shard(scene, checkpoint)
        lines.append(f"resumed the shards of {checkpoint} at step {scene.t}")
    else:
        for _ in range(steps):
            scene.step()
        obs = dist.gather(observe(box, ball), dst=0)
        if ctx.is_main:
            z = obs[:, 2]
            lines.append(f"{ctx.world_size} process(es), {n_envs} environments "
                         f"({', '.join(f'rank {r}: {a}..{b - 1}' for r, (a, b) in enumerate(dist.shard_ranges(n_envs, ctx.world_size)))})")
            lines.append(f"after {steps} steps: box heights {z.min().item():.4f} .. {z.max().item():.4f} m, "
                         f"observations {tuple(obs.shape)} gathered on rank 0")
        dist.save_checkpoint_shard(scene, checkpoint)
    for _ in range(resume_steps):
        scene.step()
    final = dist.gather_state(scene, dst=0)
    obs = dist.gather(observe(box, ball), dst=0)
    if not resume:  # the shards just written continue bitwise: load them and run the same steps again
        dist.load_checkpoint_shard(scene, checkpoint)
        for _ in range(resume_steps):
            scene.step()
        again = dist.gather_state(scene, dst=0)
        if ctx.is_main:
            same = all(torch.equal(final[k], again[k]) for k in final)
            lines.append(f"checkpoint shards in {checkpoint}; resumed and ran {resume_steps} steps again: "
                         f"{'bitwise equal' if same else 'DIFFERENT'}")
            if not same:
                raise SystemExit("the resumed run differs from the original")
    if ctx.is_main:
        if out:
            np.savez(out, obs=obs.cpu().numpy(), t=scene.t, world_size=ctx.world_size,
                     **{k: v.cpu().numpy() for k, v in final.items()})
        for line in lines:
            print(line, flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return final


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--resume-steps", type=int, default=20)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--precision", choices=("32", "64"), default="64")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    checkpoint = args.checkpoint or os.path.join(tempfile.gettempdir(), "distributed_rollout.ckpt.d")
    if args.resume and not args.checkpoint:
        parser.error("--resume needs --checkpoint DIR")
    main(args.n_envs, args.steps, args.resume_steps, checkpoint, args.backend, args.precision, args.resume,
         args.out)
