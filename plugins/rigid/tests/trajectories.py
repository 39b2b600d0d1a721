"""The rigid solver's trajectories and gradients on a fixed set of scenes, recorded to compare bit for bit across a
change that must not alter the physics (a restructuring of the plugin, a new launch path).

    python plugins/rigid/tests/trajectories.py record BEFORE.npz
    python plugins/rigid/tests/trajectories.py compare BEFORE.npz     # records again and compares, bit for bit

Each scene runs in a child process of its own (its own Taichi runtime and precision). The scenes: the panda folding
onto a plane and the panda held at home (batched, per-environment inputs), Genesis World's falling pyramid of
boxes, MuJoCo's humanoid (a freejoint, ball-free hinges, contacts), and two differentiable runs (the gradient of a
loss on the link positions with respect to the initial velocity through contacts, and with respect to position
targets and gains through the PD law). Not a test: the bits of a trajectory may differ between machines."""

import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.path.join(HERE, "..", "..", "..", "..", "shared", "assets", "mjcf")
PANDA = os.path.join(ASSETS, "franka_emika_panda", "panda.xml")
PANDA_SCENE = os.path.join(ASSETS, "franka_emika_panda", "scene.xml")
HUMANOID = os.path.join(ASSETS, "humanoid.xml")
HOME = [0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04]
SCENES = ("panda_folding_32", "panda_folding_64", "panda_held_32", "pyramid_32", "humanoid_64", "grad_folding_64",
          "grad_held_32")


def _record_state(scene, out, k):
    st = scene.rigid_solver.state
    f = scene.rigid_solver.frame
    for name in ("qpos", "dofs_vel", "dofs_acc", "links_pos", "links_quat", "contact_impulse", "contact_key",
                 "limit_impulse"):
        out.setdefault(name, []).append(st.at(name, f).detach().cpu().numpy().copy())


def run(name):
    import torch

    import genesis_core as gs

    precision = name.rsplit("_", 1)[1]
    gs.init(backend=gs.cpu, precision=precision, logging_level="warning")
    out = {}
    grad = name.startswith("grad_")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=grad), show_viewer=False)
    if "folding" in name:
        scene.add_entity(gs.morphs.Plane())
        robot = scene.add_entity(gs.morphs.MJCF(file=PANDA))
        n_envs = 0 if grad else 3
        scene.build(n_envs=n_envs)
        v0 = torch.zeros((max(n_envs, 1), robot.n_dofs), dtype=gs.tc_float)
        v0[:, :7] = 0.5 + 0.1 * torch.arange(max(n_envs, 1), dtype=gs.tc_float)[:, None]
        if grad:
            v0 = v0[0].clone().requires_grad_(True)
        robot.set_dofs_velocity(v0)
        steps = 25 if grad else 80
    elif "held" in name:
        robot = scene.add_entity(gs.morphs.MJCF(file=PANDA_SCENE))
        n_envs = 0 if grad else 2
        scene.build(n_envs=n_envs)
        home = torch.tensor(HOME, dtype=gs.tc_float)
        robot.set_dofs_kp([100.0, 100.0], dofs_idx_local=[7, 8])
        if grad:
            target = (home + 0.1).requires_grad_(True)
            kp = torch.full((7,), 3000.0, dtype=gs.tc_float, requires_grad=True)
            robot.set_dofs_kp(kp, dofs_idx_local=list(range(7)))
            robot.control_dofs_position(target)
        else:
            robot.control_dofs_position(home.expand(2, 9) + 0.05 * torch.arange(2, dtype=gs.tc_float)[:, None])
        steps = 20 if grad else 60
    elif name.startswith("pyramid"):
        scene.add_entity(gs.morphs.Plane())
        size, spacing = 0.25, 1.1 * 0.25
        offset = np.array([-0.5, 1.0, 0.0]) + 0.5 * size
        for i in range(5):
            for j in range(5 - i):
                scene.add_entity(gs.morphs.Box(size=(size,) * 3, pos=offset + spacing * np.array([i + 0.5 * j, 0, j])))
        scene.build()
        steps = 120
    else:
        scene.add_entity(gs.morphs.Plane())
        scene.add_entity(gs.morphs.MJCF(file=HUMANOID))
        scene.build(n_envs=2)
        steps = 80
    for k in range(steps):
        scene.step()
        _record_state(scene, out, k)
    solver = scene.rigid_solver
    motion = solver.link_motion()
    for i, x in enumerate(motion):
        out[f"link_motion_{i}"] = x.cpu().numpy()
    contacts = solver.contacts()
    for key in ("position", "normal", "force_b", "valid", "link_a", "link_b"):
        out[f"contacts_{key}"] = contacts[key].cpu().numpy()
    if grad:
        links = robot.get_links_pos()
        loss = links.pow(2).sum() + robot.get_dofs_velocity().pow(2).sum()
        loss.backward()
        if "folding" in name:
            out["grad_v0"] = v0.grad.cpu().numpy()
        else:
            out["grad_target"] = target.grad.cpu().numpy()
            out["grad_kp"] = kp.grad.cpu().numpy()
        out["loss"] = loss.detach().cpu().numpy()
    return {k: np.stack(v) if isinstance(v, list) else v for k, v in out.items()}


def record(path):
    results = {}
    for name in SCENES:
        part = path + f".{name}.npz"
        subprocess.run([sys.executable, __file__, "child", name, part], check=True)
        with np.load(part) as z:
            for k in z.files:
                results[f"{name}/{k}"] = z[k]
        os.remove(part)
    np.savez(path, **results)
    return results


def compare(path):
    with np.load(path) as z:
        before = {k: z[k] for k in z.files}
    after = record(path + ".after.npz")
    bad = []
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k), after.get(k)
        if a is None or b is None or a.shape != b.shape or a.tobytes() != b.tobytes():
            diff = "" if a is None or b is None or a.shape != b.shape else \
                f" (max |diff| {np.nanmax(np.abs(a.astype(float) - b.astype(float))):.3g})"
            bad.append(k + diff)
    print(f"{len(before)} arrays compared: " + ("all bitwise equal" if not bad else f"{len(bad)} differ: " +
                                               ", ".join(bad[:20])))
    return not bad


if __name__ == "__main__":
    if sys.argv[1] == "child":
        np.savez(sys.argv[3], **run(sys.argv[2]))
    elif sys.argv[1] == "record":
        record(sys.argv[2])
    else:
        sys.exit(0 if compare(sys.argv[2]) else 1)
