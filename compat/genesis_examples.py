"""Run Genesis World's own example scripts on genesis-core and check that their physics happened.

    python compat/genesis_examples.py --examples ../Genesis/examples [--only NAME] [--timeout S] [--json PATH]

For each target script (TARGETS below) the runner makes a temporary copy with only these changes:
`import genesis as gs` becomes `import genesis_core as gs` (and every other `genesis.` module import
`genesis_core.`), `show_viewer=True` becomes `show_viewer=False`. It runs the copy in a fresh Python process with
`PYTEST_VERSION` set (Genesis World's scripts shorten their loops when it is, as under its own tests) and no
command-line arguments (Genesis World's tests/test_examples.py passes none), under a timeout. Inside that process a
small harness records every `gs.Scene` the script creates, runs the script through `runpy`, then runs the script's
CHECK on the recorded scenes: a test, in figures, that the physics the script is about happened. One line per
script:

    PASS    the script ran and its check held
    FAIL    the script ran, its check did not hold (the figures say by how much)
    ERROR   the script raised (its exception's last line) or ran out of time
    SKIP    the script needs a feature genesis-core lacks (named): an attribute missing from the engine's API,
            NotImplementedError, or a Python package that is not installed; or the target is marked with what it
            needs that this machine or genesis-core lacks (`needs`: a GPU-only renderer, several GPUs, an
            interactive device, a coupler not built, a package not installed, a trained policy): such a script is
            not run (--try-needs runs it anyway, and its result is then the run's; it never passes without a check)

Every one of Genesis World's example scripts is a target: `python compat/genesis_examples.py --list` prints them
with what each needs.

Genesis World's assets (`<checkout>/genesis/assets`, beside `examples/`) are put on genesis-core's asset search
path (GENESIS_CORE_ASSETS) when present.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
EXAMPLES_ENV = "GENESIS_EXAMPLES_DIR"
DEFAULT_TIMEOUT = 600  # seconds per script, as Genesis World's own tests/test_examples.py
G = 9.81


# ---------------------------------------------------------------------------------------------------------------
# the targets


@dataclass
class Target:
    name: str  # path under examples/, without ".py"
    check: object  # check(rec) -> (ok: bool, figures: str)
    probe: object = None  # probe(rec, scene), called after every step of every recorded scene
    driver: object = None  # driver(ns, rec): run after the script's own code (scripts that only define things)
    extra_files: tuple = ()  # sibling files the script imports, copied (with the same rewriting) beside it
    keep_viewer: bool = False  # leave show_viewer=True (the browser viewer serves headless): scripts that need it
    what: str = ""  # what the check verifies, in words (docs/compatibility.md)
    subdir: str = ""  # run from this folder inside the temporary one (a script writing to ../../x stays inside it)
    needs: str = ""  # what the script needs that this machine or genesis-core lacks: reported as SKIP, not run


def np_(x):
    """A NumPy float64 array of a tensor / array / number."""
    if hasattr(x, "detach"):
        x = x.detach()
        if hasattr(x, "sceneless"):
            x = x.sceneless()
        x = x.cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def fmt(x, digits=3):
    return np.array2string(np.asarray(x, dtype=np.float64), precision=digits, suppress_small=True,
                           separator=",", max_line_width=200)


def particle_entities(scene):
    return [e for e in scene.entities if hasattr(e, "get_particles_pos")]


def morph_file(e):
    return os.path.basename(str(getattr(e.morph, "file", "") or ""))


def by_file(scene, name):
    return [e for e in scene.entities if morph_file(e) == name]


def by_morph(scene, kind, rigid=None):
    """The entities of morph type `kind`; rigid=True / False: only the rigid / only the particle ones."""
    out = [e for e in scene.entities if type(e.morph).__name__ == kind]
    if rigid is not None:
        out = [e for e in out if hasattr(e, "get_particles_pos") != rigid]
    return out


def only_scene(rec):
    if len(rec.scenes) != 1:
        raise CheckError(f"expected the script to create one scene, it created {len(rec.scenes)}")
    return rec.scenes[0]


class CheckError(Exception):
    """The recorded scenes are not what the check expects (reported as FAIL with the message)."""


def free_fall(rec, scene, entity, tol=0.15):
    """(ok, figures): the mean vertical velocity of a particle entity is -g t within `tol` (relative), t the time
    stepped, and its mean height dropped."""
    t = scene.t * scene.dt
    z0 = rec.initial[(id(scene), entity.idx)][..., 2].mean()
    pos = np_(entity.get_particles_pos())
    vel = np_(entity.get_particles_vel())
    vz, z = vel[..., 2].mean(), pos[..., 2].mean()
    g = abs(float(np.asarray(scene.sim_options.gravity)[2]))
    ok = bool(np.isfinite(pos).all() and abs(vz + g * t) <= tol * g * t and z < z0)
    return ok, f"mean vz {vz:.4f} m/s vs -g*t {-g * t:.4f}, mean z {z0:.4f} -> {z:.4f}"


def within_bounds(pos, lower, upper, margin=1e-6):
    pos = np_(pos).reshape(-1, 3)
    return bool(((pos >= np.asarray(lower) - margin) & (pos <= np.asarray(upper) + margin)).all())


# -- tutorials ------------------------------------------------------------------------------------------------

def check_hello_genesis(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    base = np_(franka.get_link("link0").get_pos())
    hand_z0 = rec.initial_links[(id(scene), franka.idx)][franka.get_link("hand").idx_local, 2]
    hand = np_(franka.get_link("hand").get_pos())
    low = np_(franka.get_links_pos())[..., 2].min()
    ok = scene.t == 1000 and np.allclose(base, 0, atol=1e-4) and hand[2] < hand_z0 - 0.05 and low > -0.02
    return ok, (f"{scene.t} steps; base {fmt(base)}; uncontrolled arm sagged: hand z {hand_z0:.3f} -> {hand[2]:.3f}; "
                f"lowest link origin z {low:.3f}")


def check_parallel_simulation(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    target = np.array([0, 0, 0, -1.0, 0, 1.0, 0, 0.02, 0.02])
    q = np_(franka.get_dofs_position())
    err = np.abs(q - target).max()
    spread = np.abs(q - q[0]).max()
    ok = q.shape == (20, 9) and err < 0.05 and spread < 1e-4
    return ok, f"20 envs reach the PD target: max |q - target| {err:.4f} rad, spread across envs {spread:.2e}"


def check_control_your_robot(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    q = np_(franka.get_dofs_position())
    f = np_(franka.get_dofs_control_force())
    limit = np.array([87, 87, 87, 87, 12, 12, 12, 100, 100])
    # after the hard resets (the last to all zeros) the PD controller drives joints 1 and 2 towards +1 rad
    ok = scene.t == 155 and q[0] > 0.01 and q[1] > 0.01 and bool((np.abs(f) <= limit + 1e-3).all())
    return ok, (f"{scene.t} steps; joints 1,2 moved from 0 towards 1 rad: {q[0]:.3f}, {q[1]:.3f}; control force "
                f"{fmt(f, 1)} within the force range")


def check_mpm(rec):
    scene = only_scene(rec)
    out, ok = [], True
    for e in particle_entities(scene):
        o, s = free_fall(rec, scene, e)
        ok &= o
        out.append(f"{type(e.material).__name__}: {s}")
    return ok and len(out) == 3, f"three MPM bodies fall freely ({scene.t} steps): " + "; ".join(out)


def check_sph_liquid(rec):
    scene = only_scene(rec)
    (liquid,) = particle_entities(scene)
    ok, s = free_fall(rec, scene, liquid)
    inside = within_bounds(liquid.get_particles_pos(), (-0.5, -0.5, 0.0), (0.5, 0.5, 1.0))
    return ok and inside, f"SPH block falls ({scene.t} steps): {s}; inside the domain: {inside}"


def check_pbd_cloth(rec):
    scene = only_scene(rec)
    cloth_1, cloth_2 = particle_entities(scene)
    figs, ok = [], True
    for name, cloth, corners in (("cloth_1", cloth_1, [(-1, -1, 1.0), (1, 1, 1.0), (-1, 1, 1.0), (1, -1, 1.0)]),
                                 ("cloth_2", cloth_2, [(-1, -1, 1.0)])):
        p0 = rec.initial[(id(scene), cloth.idx)]
        p = np_(cloth.get_particles_pos())
        fixed = [int(cloth.find_closest_particle(c)) for c in corners]
        moved_fixed = np.abs(p[fixed] - p0[fixed]).max()
        free = np.setdiff1d(np.arange(len(p)), fixed)
        drop = (p0[free, 2] - p[free, 2]).mean()
        t = scene.t * scene.dt
        ok &= moved_fixed < 1e-6 and 0.2 * 0.5 * G * t * t < drop < 2.0 * 0.5 * G * t * t
        figs.append(f"{name}: pinned corners moved {moved_fixed:.1e} m, free particles fell {drop * 1e3:.2f} mm "
                    f"(free fall {0.5 * G * t * t * 1e3:.2f} mm)")
    return ok, "; ".join(figs)


def probe_joint0(rec, scene):
    for e in scene.entities:
        if morph_file(e) == "panda.xml":
            rec.trace.append((scene.t, float(np_(e.get_dofs_position())[..., 0].reshape(-1)[0])))


def check_position_control_comparison(rec):
    scene = only_scene(rec)
    A, f, dt = 0.5, 1.0, scene.dt
    n = int(round(2.0 / dt))
    trace = dict(rec.trace)
    rms = []
    for t0 in (0, n):  # the two phases, each 2 s, each started from q = A
        errs = []
        for k in range(1, n):
            t = k * dt
            if t < 0.5:  # past the start-up transient
                continue
            errs.append(trace[t0 + k] - A * (1 + math.sin(2 * math.pi * f * t)))
        rms.append(float(np.sqrt(np.mean(np.square(errs)))))
    ok = scene.t == 2 * n and rms[1] < rms[0] and rms[1] < 0.05
    return ok, (f"{scene.t} steps; tracking RMS error over 0.5-2 s: control_dofs_position {rms[0]:.4f} rad, "
                f"control_dofs_position_velocity {rms[1]:.4f} rad")


def check_batched_IK(rec):
    only_scene(rec)
    ns = rec.ns
    robot, target = ns["robot"], np.asarray(ns["target_pos"])
    hand = np_(robot.get_link("hand").get_pos())
    quat = np_(robot.get_link("hand").get_quat())
    w, x, y, z = quat.T
    z_axis_z = 1 - 2 * (x * x + y * y)  # the z component of the hand's z axis
    err = np.linalg.norm(hand - target, axis=-1).max()
    ok = hand.shape == (16, 3) and err < 0.01 and z_axis_z.max() < -0.99
    return ok, (f"16 envs, hand vs IK target after the last step: max error {err * 1e3:.2f} mm; hand z axis points "
                f"down (z component <= {z_axis_z.max():.4f})")


def check_grasp_lift(rec, cube_entity, franka, min_z):
    cube_pos = np_(cube_entity.get_pos()).reshape(-1)
    hand = np_(franka.get_link("hand").get_pos()).reshape(-1)
    ok = cube_pos[2] > min_z and np.linalg.norm(cube_pos[:2] - hand[:2]) < 0.03
    off = np.linalg.norm(cube_pos[:2] - hand[:2])
    return ok, f"cube lifted to z {cube_pos[2]:.3f} m (> {min_z}), {off * 1e3:.1f} mm from the hand's axis"


def check_IK_motion_planning_grasp(rec):
    scene = only_scene(rec)
    (cube,) = by_morph(scene, "Box")
    (franka,) = by_file(scene, "panda.xml")
    return check_grasp_lift(rec, cube, franka, 0.03)


# -- rigid ------------------------------------------------------------------------------------------------------


def check_single_franka_envs(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    imgs = rec.extra.get("render")
    q = np_(franka.get_dofs_position())
    ok = scene.t == 100 and np.isfinite(q).all() and imgs is not None and imgs["rgb_std"] > 1.0
    return ok, f"{scene.t} steps; last render: {imgs}"


def check_franka_cube(rec):
    scene = only_scene(rec)
    (cube,) = by_morph(scene, "Box")
    (franka,) = by_file(scene, "panda.xml")
    ok, s = check_grasp_lift(rec, cube, franka, 0.15)
    return ok and scene.t == 401, f"{scene.t} steps; {s}"


def check_domain_randomization(rec):
    scene = only_scene(rec)
    (robot,) = by_file(scene, "go2.urdf")
    fr = np_(robot.get_friction_ratio())
    ms = np_(robot.get_links_mass_shift())
    cs = np_(robot.get_links_COM_shift())
    thigh = float(np_(robot.get_links_inertial_mass([robot.get_link("RR_thigh").idx_local])).max())
    base = np_(robot.get_pos())
    ok = (fr.shape[0] == 8 and ((fr >= 0.5) & (fr < 1.5)).all() and np.ptp(fr, axis=0).min() > 0
          and ((ms >= -0.5) & (ms < 0.5)).all() and np.ptp(ms, axis=0).min() > 0
          and (np.abs(cs) <= 0.05 + 1e-6).all() and np.ptp(cs, axis=0).min() > 0
          and abs(thigh - 1.0) < 1e-6 and np.isfinite(base).all() and (base[:, 2] > 0.3).all())
    return ok, (f"8 envs: friction ratios in [{fr.min():.3f}, {fr.max():.3f}], mass shifts in [{ms.min():.3f}, "
                f"{ms.max():.3f}] kg, COM shifts in [{cs.min():.3f}, {cs.max():.3f}] m, all different across envs; "
                f"RR_thigh inertial mass set to {thigh:.4f} kg; base z after the step {fmt(base[:, 2])}")


def probe_heterogeneous(rec, scene):
    if "aabb" in rec.extra:
        return
    obj = [e for e in scene.entities if getattr(e, "variants", None)]
    if obj:
        rec.extra["aabb"] = np_(obj[0].get_AABB())
        rec.extra["mass"] = np.asarray(obj[0].get_mass(), dtype=np.float64)


def check_heterogeneous_simulation(rec):
    scene = only_scene(rec)
    (obj,) = [e for e in scene.entities if getattr(e, "variants", None)]
    # the script's four variants: boxes of 4 and 2 cm, spheres of 1.5 and 2.5 cm radius, one per environment
    size = np.array([[0.04] * 3, [0.02] * 3, [0.03] * 3, [0.05] * 3])
    rho = obj.material.rho
    mass = np.array([rho * 0.04 ** 3, rho * 0.02 ** 3, rho * 4 / 3 * math.pi * 0.015 ** 3,
                     rho * 4 / 3 * math.pi * 0.025 ** 3])
    aabb = rec.extra.get("aabb")
    extent = aabb[:, 1] - aabb[:, 0] if aabb is not None else np.full((4, 3), np.nan)
    z = np_(obj.get_pos())[:, 2]
    ok = (scene.t == 401 and list(obj.variant_of_env) == [0, 1, 2, 3] and np.allclose(extent, size, atol=1e-6)
          and np.allclose(rec.extra.get("mass"), mass, rtol=1e-9) and np.isfinite(z).all() and (z > 0.005).all())
    return ok, (f"{scene.t} steps; variants per environment {[int(v) for v in obj.variant_of_env]}; first-step AABB extents "
                f"{fmt(extent.max(1))} m (expected {fmt(size.max(1))}); masses {fmt(rec.extra.get('mass'), 4)} kg "
                f"(expected {fmt(mass, 4)}); object heights at the end {fmt(z)} m")


def probe_merge(rec, scene):
    ents = {morph_file(e): e for e in scene.entities}
    arm, hand = ents.get("panda_nohand.urdf") or ents.get("panda_nohand.xml"), ents.get("hand.urdf") or \
        ents.get("hand.xml")
    if arm is None or hand is None:
        return
    gap = float(np.abs(np_(hand.base_link.get_pos()) - np_(arm.get_link("attachment").get_pos())).max())
    rec.extra["merge_gap"] = max(rec.extra.get("merge_gap", 0.0), gap)
    rec.extra.setdefault("flange", []).append(np_(arm.get_link("attachment").get_pos()))


def check_merge_entities(rec):
    scene = only_scene(rec)
    gap = rec.extra.get("merge_gap", float("nan"))
    path = np.array(rec.extra.get("flange", [np.zeros(3)]))
    moved = float(np.linalg.norm(path - path[0], axis=1).max())  # (the script ends where it started)
    ok = scene.t > 0 and gap < 1e-9 and moved > 0.05
    return ok, (f"{scene.t} steps; the hand's base stays on the arm's flange to {gap:.1e} m while the flange moves "
                f"up to {moved:.3f} m from its start")


def probe_franka_q(rec, scene):
    for e in scene.entities:
        if morph_file(e) == "panda.xml":
            rec.trace.append((scene.t, np_(e.get_dofs_position()), np_(e.get_dofs_velocity())))


PD_PHASES = (  # (last step of the phase, the target of joints 1-7), the PD part of control_franka / set_phys_attr
    (150 + 250, [1, 1, 0, 0, 0, 0, 0]),
    (150 + 500, [-1, 0.8, 1, -2, 1, 0.5, -0.5]),
    (150 + 750, [0, 0, 0, 0, 0, 0, 0]),
)


# the ranges of joints 1-7 in Genesis World's xml/franka_emika_panda/panda.xml (a target outside is held at the limit)
PANDA_RANGES = np.array([(-2.8973, 2.8973), (-1.7628, 1.7628), (-2.8973, 2.8973), (-3.0718, -0.0698),
                         (-2.8973, 2.8973), (-0.0175, 3.7525), (-2.8973, 2.8973)])


def _pd_phases(rec, env=None, tol=0.05):
    trace = {t: (q, v) for t, q, v in rec.trace}
    figs, ok = [], True
    for t_end, target in PD_PHASES:
        q = trace[t_end][0]
        q = q[env] if env is not None else q
        err = np.abs(q[:7] - np.clip(target, PANDA_RANGES[:, 0], PANDA_RANGES[:, 1]))
        ok &= err.max() < tol
        figs.append(f"max |q - target| at step {t_end}: {err.max():.4f} rad (joint {int(err.argmax()) + 1})")
    v = trace[150 + 1000][1]
    v = v[env] if env is not None else v
    ok &= abs(v[0] - 1.0) < 0.05
    figs.append(f"joint 1 under velocity control (1 rad/s) at step 1150: {v[0]:.3f} rad/s")
    return ok, "; ".join(figs)


def check_control_franka(rec):
    scene = only_scene(rec)
    ok, s = _pd_phases(rec)
    return ok and scene.t == 1400, f"{scene.t} steps; {s}"


def check_set_phys_attr(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    kp = np_(franka.get_dofs_kp())
    ok_kp = np.allclose(kp, [[4500, 4500, 3500, 3500, 2000, 2000, 2000, 100, 100],
                             [100, 100, 2000, 2000, 2000, 3500, 3500, 4500, 4500]])
    ok0, s0 = _pd_phases(rec, env=0)
    q_end = np_(franka.get_dofs_position())
    differ = np.abs(q_end[0] - q_end[1]).max()
    ok = ok_kp and ok0 and differ > 1e-3 and scene.t == 1400
    return ok, f"{scene.t} steps; per-env kp kept: {ok_kp}; env 0: {s0}; envs differ by {differ:.3f} rad at the end"


def probe_cube(rec, scene):
    for e in scene.entities:
        if type(e.morph).__name__ == "Box":
            rec.trace.append((scene.t, np_(e.get_pos()).reshape(-1), np_(e.get_ang()).reshape(-1)))


def check_apply_external_force_torque(rec):
    scene = only_scene(rec)
    (cube,) = by_morph(scene, "Box")
    mass = float(cube.get_mass())
    sag = mass * G / 100.0  # the force -100 (p - (0,0,1)) is a spring holding the cube against gravity
    p = np.array([x for _, x, _ in rec.trace])
    w = np.array([a for _, _, a in rec.trace])
    # undamped, the cube oscillates between z = 1 and z = 1 - 2 sag, about the equilibrium 1 - sag
    z_mid = 0.5 * (p[:, 2].max() + p[:, 2].min())
    amp = 0.5 * (p[:, 2].max() - p[:, 2].min())
    inertia = mass * 0.2 ** 2 / 6.0
    w_peak = 5.0 / inertia * 0.5  # the torque, 5 N m, flips every second: half a second of spin-up from rest
    wz = np.abs(w[:, 2]).max()
    ok = (np.abs(p[:, :2]).max() < 0.01 and abs(z_mid - (1 - sag)) < 0.1 * sag and abs(amp - sag) < 0.1 * sag
          and abs(wz - w_peak) < 0.1 * w_peak and np.abs(w[:, :2]).max() < 0.01 * wz and scene.t == 1000)
    return ok, (f"{scene.t} steps; the force holds the cube ({mass:.2f} kg) on a spring: z oscillates about "
                f"{z_mid:.4f} (equilibrium {1 - sag:.4f}) with amplitude {amp:.4f} (expected {sag:.4f}), max |x|,|y| "
                f"{np.abs(p[:, :2]).max():.1e}; the torque spins it about z: max |wz| {wz:.1f} rad/s (expected "
                f"{w_peak:.1f}), max |wx|,|wy| {np.abs(w[:, :2]).max():.1e}")


def probe_hands(rec, scene):
    rec.trace.append((scene.t, [float(np_(e.get_link("hand").get_pos()).reshape(-1)[2])
                                for e in scene.entities if morph_file(e) == "panda.xml"]))


def check_gravity_compensation(rec):
    scene = only_scene(rec)
    frankas = by_file(scene, "panda.xml")
    z0 = np.array([rec.initial_links[(id(scene), e.idx)][e.get_link("hand").idx_local, 2] for e in frankas])
    first = [None] * len(frankas)  # the first step at which each hand has dropped 0.2 m
    for t, z in rec.trace:
        for k, drop in enumerate(z0 - np.array(z)):
            if first[k] is None and drop > 0.2:
                first[k] = t
    end = z0 - np.array(rec.trace[-1][1])
    # the limp arms fall from rest under the net gravity g (1 - c): half the gravity takes sqrt(2) times as long
    ratio = first[1] / first[0] if first[0] and first[1] else float("nan")
    ok = (len(frankas) == 3 and abs(ratio - math.sqrt(2)) < 0.15 and first[2] is None and abs(end[2]) < 0.01
          and scene.t == 1000)
    return ok, (f"{scene.t} steps; the hand has dropped 0.2 m at step {first[0]} (compensation 0), {first[1]} (0.5; "
                f"ratio {ratio:.3f}, sqrt(2) expected), {first[2]} (1.0); drops at the end {fmt(end, 4)} m")


def check_nonconvex_mesh(rec):
    scene = only_scene(rec)
    (tank,) = by_file(scene, "tank.obj")
    (ball,) = by_morph(scene, "Sphere")
    aabb = np_(tank.get_AABB()).reshape(2, 3)
    pos = np_(ball.get_pos()).reshape(-1)
    speed = np.linalg.norm(np_(ball.get_vel()))
    inside = bool((pos[:2] > aabb[0, :2]).all() and (pos[:2] < aabb[1, :2]).all())
    ok = inside and aabb[0, 2] + 0.05 < pos[2] < 1.0 and speed < 0.05
    return ok, (f"{scene.t} steps; ball at rest ({speed:.4f} m/s) inside the tank at {fmt(pos)}; tank AABB "
                f"{fmt(aabb)}")


# -- collision --------------------------------------------------------------------------------------------------


def check_pyramid(rec):
    scene = only_scene(rec)
    boxes = by_morph(scene, "Box")
    moved, speed = 0.0, 0.0
    for b in boxes:
        p0 = np.asarray(b.morph.pos, dtype=np.float64)
        moved = max(moved, np.abs(np_(b.get_pos()).reshape(-1) - p0).max())
        speed = max(speed, np.linalg.norm(np_(b.get_vel())))
    ok = len(boxes) == 15 and moved < 0.01 and speed < 0.05 and scene.t == 150
    return ok, f"{scene.t} steps; 15 boxes stand: max displacement {moved * 1e3:.2f} mm, max speed {speed:.4f} m/s"


def check_tower(rec):
    scene = only_scene(rec)
    boxes = by_morph(scene, "Box")
    (cyl,) = by_morph(scene, "Cylinder")
    pos = np.array([np_(b.get_pos()).reshape(-1) for b in boxes])
    start = np.array([b.morph.pos for b in boxes])
    height = boxes[0].morph.size[2]
    slid = np.abs(pos[:, :2] - start[:, :2]).max()
    # the script stacks the layers 1 mm into each other; standing, each layer stays on the one below: the
    # centres of successive layers stay a box height apart (within 2 mm), neither sunk in nor thrown off
    layer_z = pos[:, 2].reshape(-1, 2).mean(axis=1)
    gaps = np.diff(layer_z)
    t = scene.t * scene.dt
    drop = cyl.morph.pos[2] - float(np_(cyl.get_pos()).reshape(-1)[2])
    ok = (len(boxes) == 100 and slid < 0.01 and np.abs(gaps - height).max() < 0.002
          and abs(drop - 0.5 * G * t * t) < 0.05 * 0.5 * G * t * t)
    return ok, (f"{scene.t} steps; the 100-box tower stands: max horizontal displacement {slid * 1e3:.2f} mm, layer "
                f"spacing {gaps.min():.4f}-{gaps.max():.4f} m (box height {height}); the cylinder falls {drop:.4f} m "
                f"(free fall {0.5 * G * t * t:.4f} m)")


def check_contype(rec):
    scene = only_scene(rec)
    red, green, blue = by_morph(scene, "Box")
    (dragon,) = by_file(scene, "dragon.obj")
    z = [float(np_(b.get_pos()).reshape(-1)[2]) for b in (red, green, blue)]
    dmin = float(np_(dragon.get_AABB()).reshape(2, 3)[0, 2])
    # red and green share no bit: green falls through red onto the floor; blue (both bits) rests on both
    ok = abs(z[0] - 0.05) < 0.01 and abs(z[1] - 0.05) < 0.01 and abs(z[2] - 0.15) < 0.015 and abs(dmin) < 0.02
    return ok, (f"{scene.t} steps; box heights red {z[0]:.3f}, green {z[1]:.3f} (through red, on the floor), blue "
                f"{z[2]:.3f} (on both); dragon's lowest point {dmin:.3f} m (floor only)")


# -- coupling ---------------------------------------------------------------------------------------------------


def _rigid_free_fall(scene, body):
    t = scene.t * scene.dt
    vz = float(np_(body.get_vel()).reshape(-1)[2])
    return abs(vz + G * t) < 0.1 * G * t, f"vz {vz:.4f} m/s vs -g*t {-G * t:.4f}"


def check_sph_rigid(rec):
    scene = only_scene(rec)
    (water,) = particle_entities(scene)
    (cube,) = by_morph(scene, "Box", rigid=True)
    ok_c, s_c = _rigid_free_fall(scene, cube)
    p = np_(water.get_particles_pos())
    z0 = rec.initial[(id(scene), water.idx)][:, 2].mean()
    inside = within_bounds(p, (0.0, -1.0, 0.0), (1.0, 1.0, 2.4))
    ok = ok_c and inside and abs(p[:, 2].mean() - z0) < 0.02
    return ok, (f"{scene.t} steps; cube falling towards the water: {s_c}; water in the tank: {inside}, mean z "
                f"{z0:.4f} -> {p[:, 2].mean():.4f}")


def check_sph_mpm(rec):
    scene = only_scene(rec)
    water = [e for e in particle_entities(scene) if "SPH" in type(e.solver).__name__]
    duck = [e for e in particle_entities(scene) if "MPM" in type(e.solver).__name__]
    ok_d, s_d = free_fall(rec, scene, duck[0])
    p = np_(water[0].get_particles_pos())
    z0 = rec.initial[(id(scene), water[0].idx)][:, 2].mean()
    inside = within_bounds(p, (-0.03, -0.03, -0.08), (1.03, 1.03, 1.0))
    ok = ok_d and inside and abs(p[:, 2].mean() - z0) < 0.02
    return ok, (f"{scene.t} steps; MPM duck falls: {s_d}; SPH water in the tank: {inside}, mean z {z0:.4f} -> "
                f"{p[:, 2].mean():.4f}")


def check_cloth_on_rigid(rec):
    scene = only_scene(rec)
    (cloth,) = particle_entities(scene)
    ok, s = free_fall(rec, scene, cloth, tol=0.2)
    p = np_(cloth.get_particles_pos())
    dmin = np.linalg.norm(p, axis=-1).min()  # the sphere: radius 0.2 at the origin
    return ok and dmin > 0.2 - 0.01, (f"{scene.t} steps; cloth falls onto the sphere: {s}; nearest to its centre "
                                      f"{dmin:.4f} m")


def check_grasp_soft_cube(rec):
    scene = only_scene(rec)
    (cube,) = particle_entities(scene)
    z0 = rec.initial[(id(scene), cube.idx)][:, 2].mean()
    z = np_(cube.get_particles_pos())[:, 2].mean()
    ok = z > z0 + 0.1 and scene.t == 500
    return ok, f"{scene.t} steps; soft cube lifted: mean z {z0:.4f} -> {z:.4f} m (the hand rose 0.15 m)"


def emitted(scene, speed):
    """(ok, figures) of the scene's emitters after its steps: each placed particles (active), all moving downward at
    least at the nozzle's `speed` and at most that plus g t (gravity since emission, t the time stepped; 2 % for
    the push of the stream's own pressure)."""
    t = scene.t * scene.dt
    ok, figs = bool(scene.emitters), []
    for em in scene.emitters:
        on = np_(em.entity.get_particles_active()).astype(bool).reshape(-1)
        v = np_(em.entity.get_particles_vel()).reshape(-1, 3)[on]
        sp = np.linalg.norm(v, axis=1)
        ok &= bool(on.sum() > 0 and np.isfinite(v).all() and (v[:, 2] < 0).all()
                   and sp.min() >= speed * 0.999 and sp.max() <= 1.02 * (speed + G * t))
        figs.append(f"{int(on.sum())} particles, speeds {sp.min():.3f}-{sp.max():.3f} m/s" if on.any() else
                    "no particle")
    return ok, (f"{scene.t} steps ({t:.3f} s); emitted: " + "; ".join(figs)
                + f" (nozzle speed {speed} m/s, {speed + G * t:.3f} after falling {t:.3f} s)")


def check_sand_wheel(rec):
    return emitted(only_scene(rec), 8.0)


def check_water_wheel(rec):
    return emitted(only_scene(rec), 5.0)


def check_flush_cubes(rec):
    scene = only_scene(rec)
    ok, figs = emitted(scene, 1.5)
    solids = [e for e in particle_entities(scene) if type(e.morph).__name__ != "Nowhere"]
    for e in solids:
        ok_e, s = free_fall(rec, scene, e)
        ok &= ok_e
        figs += f"; {type(e.morph).__name__} falls: {s}"
    return ok and len(solids) == 3, figs


# -- terrain ----------------------------------------------------------------------------------------------------


def terrain_surface(scene):
    """(heights in metres [nx, ny], horizontal scale, the grid's corner) of the scene's one Terrain."""
    (terrain,) = by_morph(scene, "Terrain")
    m = terrain.morph
    return np.asarray(terrain.geoms[0].metadata["height_field"]) * m.vertical_scale, m.horizontal_scale, \
        np.asarray(m.pos)


def check_terrain_height_field(rec):
    scene = only_scene(rec)
    H, hs, _ = terrain_surface(scene)
    raw = np.round(H / 0.005)
    inner = raw[5:35, 5:35]
    border = raw.copy()
    border[5:35, 5:35] = 0
    ok = (H.shape == (40, 40) and not border.any() and set(np.unique(inner)) <= {190.0, 200.0, 210.0}
          and scene.t == 1000)
    return ok, (f"{scene.t} steps; height field {H.shape}, {hs} m cells: border 0, a 30 x 30 plateau at "
                f"{sorted(set(np.unique(inner).tolist()))} x 5 mm, as the script made it")


def check_terrain_subterrain(rec):
    """Every ball (one per environment, 10 x 10 starting places) comes down on the terrain; those still over it
    after the run (balls on the slopes and bumps roll, some off the terrain's edge, which has no ground beyond) lie
    on its surface (centre a radius from it, 5 mm); those on the flat subterrain rest there at their radius."""
    from genesis_core.terrain import height_at

    scene = only_scene(rec)
    H, hs, corner = terrain_surface(scene)
    (ball,) = by_morph(scene, "Sphere")
    p, v = np_(ball.get_pos()), np_(ball.get_vel())
    extent = (np.asarray(H.shape) - 1) * hs
    over = np.all((p[:, :2] - corner[:2] >= 0) & (p[:, :2] - corner[:2] <= extent), axis=1) & (p[:, 2] > -1.0)
    gaps = []
    for q in p[over]:
        x, y = np.meshgrid(np.arange(q[0] - 0.3, q[0] + 0.3, 0.005), np.arange(q[1] - 0.3, q[1] + 0.3, 0.005))
        z = height_at(H, hs, x - corner[0], y - corner[1]) + corner[2]
        gaps.append(float(np.nanmin(np.sqrt((x - q[0]) ** 2 + (y - q[1]) ** 2 + (z - q[2]) ** 2))) - 0.1)
    gaps = np.array(gaps)
    flat = over & (p[:, 0] < 5.8) & (p[:, 1] < 5.8)
    ok = (len(p) == 100 and over.sum() >= 50 and np.abs(gaps).max() < 5e-3 and flat.sum() >= 20
          and np.abs(p[flat, 2] - 0.1).max() < 1e-3 and np.abs(v[flat]).max() < 1e-3)
    return ok, (f"{scene.t} steps of {len(p)} environments: {int(over.sum())} balls still over the terrain, each "
                f"its radius from the surface (max |gap| {np.abs(gaps).max():.1e} m), {100 - int(over.sum())} rolled "
                f"off its edge; the {int(flat.sum())} on the flat subterrain rest at z {p[flat, 2].min():.4f}-"
                f"{p[flat, 2].max():.4f} (0.1), speed < {np.abs(v[flat]).max():.1e}")


def probe_ball(rec, scene):
    for e in by_morph(scene, "Sphere"):
        rec.trace.append((scene.t, np_(e.get_pos()).reshape(-1), np_(e.get_vel()).reshape(-1)))


def check_terrain_from_mesh(rec):
    """The ball (radius 1) lands on the 45-degree ramp sampled from the mesh and rolls down it: while it touches
    the ramp (its centre 1 m from the plane z = x - 5), its acceleration along the fall line is 5/7 g sin 45
    (rolling without slipping), within 5 %."""
    scene = only_scene(rec)
    t = np.array([k for k, _, _ in rec.trace])
    p = np.array([x for _, x, _ in rec.trace])
    v = np.array([u for _, _, u in rec.trace])
    on = np.abs((p[:, 2] - p[:, 0] + 5.0) / math.sqrt(2) - 1.0) < 0.01
    down = np.array([-1.0, 0.0, -1.0]) / math.sqrt(2)
    idx = np.nonzero(on)[0]
    want = 5 / 7 * G * math.sin(math.pi / 4)
    if len(idx) < 20:
        return False, f"{scene.t} steps; the ball touched the ramp in {len(idx)} steps"
    a0, a1 = idx[len(idx) // 4], idx[3 * len(idx) // 4]  # (away from the landing)
    a = float((v[a1] - v[a0]) @ down) / ((t[a1] - t[a0]) * scene.dt)
    ok = abs(a - want) < 0.05 * want and np.abs(p[idx, 1] - 15.0).max() < 1e-3
    return ok, (f"{scene.t} steps; the ball rolled on the ramp for {len(idx)} steps at {a:.3f} m/s^2 along the "
                f"fall line (5/7 g sin 45 = {want:.3f}), y kept at 15 (max drift {np.abs(p[idx, 1] - 15).max():.1e})")


# -- top level --------------------------------------------------------------------------------------------------


def check_differentiable_push(rec):
    loss = rec.extra.get("loss")
    grads = rec.extra.get("grads")
    ok = loss is not None and math.isfinite(loss) and grads is not None and grads["finite"] and grads["nonzero"]
    return ok, f"loss {loss}; gradients of the stick's velocities: {grads}"


def check_elastic_dragon(rec):
    scene = only_scene(rec)
    (dragon,) = particle_entities(scene)
    ok, s = free_fall(rec, scene, dragon)
    return ok, f"{scene.t} steps; PBD elastic dragon falls: {s}"


def check_pbd_liquid(rec):
    scene = only_scene(rec)
    (liquid,) = particle_entities(scene)
    ok, s = free_fall(rec, scene, liquid, tol=0.2)
    inside = within_bounds(liquid.get_particles_pos(), (0, 0, 0), (1, 1, 1))
    return ok and inside, f"{scene.t} steps; PBD liquid column falls: {s}; inside the domain: {inside}"


def check_speed_benchmark_franka(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    target = np.array([0, 0, 0, -1.0, 0, 1.0, 0, 0.02, 0.02])
    q = np_(franka.get_dofs_position())
    err = np.abs(q - target).max()
    return q.shape[0] == 30000 and err < 0.05, f"{scene.t} steps of {q.shape[0]} envs; max |q - target| {err:.4f} rad"


def drive_go2_env(ns, rec):
    """go2_env.py only defines Go2Env: start the engine as go2_eval.py does (gs.init(backend=gs.cpu)), build the
    environment with go2_train.py's get_cfgs() and 4 envs, reset, and step it with zero actions (the default
    standing pose) for 100 steps, counting the environments it resets."""
    import torch

    ns["gs"].init(backend=ns["gs"].cpu)
    cfgs = rec.load_function("go2_train.py", "get_cfgs")()
    env = ns["Go2Env"](4, *cfgs)
    env.reset()
    actions = torch.zeros((4, env.num_actions), device=env.device)
    resets = 0
    for _ in range(100):
        _, _, reset_buf, _ = env.step(actions)
        resets += int(reset_buf.sum())
    rec.extra["go2_env"] = env
    rec.extra["go2_resets"] = resets


def check_go2_env(rec):
    env = rec.extra["go2_env"]
    scene = env.scene
    (robot,) = by_file(scene, "go2.urdf")
    base = np_(robot.get_pos())
    quat = np_(robot.get_quat())
    w, x, y, z = quat.T
    up = 1 - 2 * (x * x + y * y)  # z component of the base's z axis
    resets = rec.extra["go2_resets"]
    ok = (scene.t >= 100 and (base[:, 2] > 0.2).all() and (base[:, 2] < 0.45).all() and (up > 0.9).all()
          and resets == 0)
    return ok, (f"{scene.t} steps of 4 envs: base z {fmt(base[:, 2])}, base z-axis up component >= {up.min():.3f}, "
                f"{resets} terminations")



# -- sensors -------------------------------------------------------------------------------------------------

def _sensors_of(scene, kind):
    return [s for s in scene.sensors if type(s).__name__ == kind]


def check_camera_as_sensor(rec):
    """Every camera sensor's image is drawn (not blank); the attached ones ride with the falling sphere (1 m above
    its centre, and at its centre: the camera's pose is the link's times the offset); the script saved its 10
    renders of each camera."""
    import torch

    scene = only_scene(rec)
    cams = [s for s in scene.sensors if hasattr(s, "camera")]
    (sphere,) = by_morph(scene, "Sphere")
    stds = [float(c.read().rgb.float().std()) for c in cams]
    attached = [c for c in cams if c.entity is not None]
    p = np_(sphere.get_pos()).reshape(-1)
    R = np_(gs_rotations().quat_to_mat(torch.as_tensor(np_(sphere.get_quat()).reshape(-1)))).reshape(3, 3)
    # cam_attached: 1 m above the centre (pos (0, 0, 1) in the link frame); cam_offset_T: at the centre (identity)
    offs = [float(np.abs(np_(c.camera.pos).reshape(-1) - (p + R @ np.asarray(
        c.options.pos if c.options.offset_T is None else np.asarray(c.options.offset_T)[:3, 3]))).max())
        for c in attached]
    saved = sorted(os.listdir("camera_sensor_output")) if os.path.isdir("camera_sensor_output") else []
    fell = abs(p[2] - 0.5) < 0.01  # dropped from 2 m: resting on the plane, on its 0.5 m radius
    ok = (len(cams) == 4 and min(stds) > 3.0 and len(attached) == 2 and max(offs) < 1e-6
          and len(saved) == 10 * len(cams) and fell)
    return ok, (f"{scene.t} steps; {len(cams)} camera sensors, image std {min(stds):.1f}-{max(stds):.1f}; attached "
                f"cameras within {max(offs):.1e} m of their places on the sphere (z {p[2]:.3f}); {len(saved)} PNGs saved")


def gs_rotations():
    from genesis_core import rotations

    return rotations


def probe_imu(rec, scene):
    """After each step: the IMU's gyroscope ground truth and measurement, and the hand's angular velocity from its
    Jacobian and the joint velocities, J_ang(q) dq/dt, in the hand's frame."""
    import torch

    imus = _sensors_of(scene, "IMUSensor")
    if not imus:
        return
    imu = imus[0]
    e = imu.entity
    link = e.links[imu.link_idx_local]
    J = np_(e.get_jacobian(link))[3:]  # angular rows, world
    w_world = J @ np_(e.get_dofs_velocity()).reshape(-1)
    R = np_(gs_rotations().quat_to_mat(torch.as_tensor(np_(link.get_quat()).reshape(-1)))).reshape(3, 3)
    rec.trace.append((scene.t, R.T @ w_world, np_(imu.read_ground_truth().ang_vel).reshape(-1),
                      np_(imu.read().ang_vel).reshape(-1)))


def check_imu_franka(rec):
    """The gyroscope's ground truth on the moving hand is the hand's angular velocity J_ang(q) dq/dt in its frame
    (the Jacobian of genesis_rigid.ik, a computation of its own), to rounding; the measurement is the truth delayed
    a step with 0.01 rad/s noise, a random walk and cross-axis coupling; the NPZ recorder wrote one frame per
    step."""
    scene = only_scene(rec)
    errs = [float(np.abs(w_j - w_t).max()) for _, w_j, w_t, _ in rec.trace]
    scale = max(float(np.abs(w_t).max()) for _, _, w_t, _ in rec.trace)
    meas = max(float(np.abs(m - w).max()) for _, _, w, m in rec.trace)
    data = np.load("imu_data.npz") if os.path.exists("imu_data.npz") else {}
    frames = {k: np.asarray(data[k]).shape for k in getattr(data, "files", [])}
    ok = (len(errs) == scene.t and scale > 0.1 and max(errs) < 1e-5 * max(scale, 1.0)  # (float32)
          and frames.get("lin_acc", (0,))[0] == scene.t)
    return ok, (f"{scene.t} steps; |gyro truth - J_ang dq/dt| <= {max(errs):.1e} rad/s (rates up to {scale:.2f}); "
                f"measured - truth <= {meas:.3f} rad/s; imu_data.npz {frames}")


def check_contact_force_go2(rec):
    """Each foot sensor reads the net contact force on its foot in the foot's frame (the rigid solver's contact
    forces rotated). The script starts the go2 with its straight legs 0.25 m into the floor; the contacts push it
    out."""
    import torch

    scene = only_scene(rec)
    (go2,) = by_file(scene, "go2.urdf")
    rot = gs_rotations()
    sensors = _sensors_of(scene, "ContactForceSensor")
    net = np_(go2.get_links_net_contact_force())
    diffs, up = [], []
    for s in sensors:
        R = rot.quat_to_mat(torch.as_tensor(np_(go2.links[s.link_idx_local].get_quat()).reshape(-1))).numpy()
        want = R.T @ net[s.link_idx_local]
        got = np_(s.read()).reshape(-1)
        diffs.append(float(np.abs(got - want).max()))
        up.append(float(net[s.link_idx_local][2]))
    z = float(np_(go2.get_pos()).reshape(-1)[2])
    ok = len(sensors) == 4 and max(diffs) < 1e-6 * max(1.0, max(abs(u) for u in up)) and z > 0.2
    return ok, (f"{scene.t} steps; 4 foot sensors equal the feet's net contact force in their frames within "
                f"{max(diffs):.1e} N (vertical {fmt(up, 2)} N); the robot, started with its legs 0.25 m into the "
                f"floor, is pushed out: base z 0.200 -> {z:.3f} m")



def check_proximity_shadowhand(rec):
    """Each of the six proximity sensors (palm and fingertips, one probe at the link's origin) reads the distance
    to the nearer of the duck and the box, within max_range: never more than the exact point-to-box distance, never
    less than the distance to the duck's bounding box where the box is farther, exactly the box's where the box is
    nearer than the duck's bounding box can be (float32: 1e-5 m), and its nearest point lies at that distance."""
    import torch

    scene = only_scene(rec)
    rot = gs_rotations()
    sensors = _sensors_of(scene, "ProximitySensor")
    (box,) = by_morph(scene, "Box")
    (duck,) = by_morph(scene, "Mesh")
    half = np.asarray(box.morph.size, dtype=np.float64) / 2
    c, R = np_(box.get_pos()).reshape(-1), rot.quat_to_mat(torch.as_tensor(np_(box.get_quat()).reshape(-1))).numpy()
    lo, hi = (np_(x).reshape(-1) for x in duck.get_AABB())
    rows, bad = [], []
    for s in sensors:
        p = np_(s.entity.links[s.link_idx_local].get_pos()).reshape(-1)
        q = np.abs(R.T @ (p - c)) - half
        d_box = float(np.linalg.norm(np.maximum(q, 0.0)) + min(q.max(), 0.0))
        d_duck_min = float(np.linalg.norm(np.maximum(np.maximum(lo - p, p - hi), 0.0)))
        got = float(np_(s.read()).reshape(-1)[0])
        near = np_(s.nearest_points).reshape(-1)
        cap = s.options.max_range
        upper, lower = min(d_box, cap), min(d_duck_min, d_box, cap)
        on_surface = got >= cap - 1e-6 or abs(np.linalg.norm(near - p) - got) < 1e-5
        ok_one = lower - 1e-5 <= got <= upper + 1e-5 and on_surface
        if d_box < d_duck_min:
            ok_one = ok_one and abs(got - upper) < 1e-5
        rows.append(f"{got:.4f} in [{lower:.4f}, {upper:.4f}]")
        bad += [] if ok_one else [s.idx]
    ok = len(sensors) == 6 and not bad
    return ok, f"{scene.t} steps; 6 proximity sensors read (m): {'; '.join(rows)}"


def check_kinematic_contact_sandbox(rec):
    """The pusher cylinder starts 1 cm into the platform; the contact pushes it out within the step, onto the
    platform (1 mm): the probe under it reads the penetration its pose gives (platform top - pusher bottom,
    float32: 1e-5 m) and the spring force -stiffness h along the probe normal; the 24 probes it does not cover
    read 0."""
    scene = only_scene(rec)
    (probe,) = _sensors_of(scene, "KinematicContactProbeSensor")
    pusher = [e for e in by_morph(scene, "Cylinder") if abs(float(e.morph.radius) - 0.1) < 1e-9][0]
    (platform,) = [e for e in by_morph(scene, "Box") if e.idx == probe.options.entity_idx]
    top = float(np_(platform.get_pos()).reshape(-1)[2]) + float(platform.morph.size[2]) / 2
    bottom = float(np_(pusher.get_pos()).reshape(-1)[2]) - float(pusher.morph.height) / 2
    want = max(top - bottom, 0.0)
    data = probe.read()
    pen, force = np_(data.penetration).reshape(-1), np_(data.force).reshape(-1, 3)
    centre = len(pen) // 2
    others = np.delete(pen, centre)
    stiffness = float(probe.options.stiffness)
    resting = abs(top - bottom) < 1e-3  # started 1 cm in, pushed out by the contact within the step
    ok = (len(pen) == 25 and resting and abs(pen[centre] - want) < 1e-5 and (others == 0).all()
          and abs(force[centre, 2] + stiffness * pen[centre]) < 1e-3 * stiffness * max(want, 1e-4))
    return ok, (f"{scene.t} step; pusher bottom {1e3 * (bottom - top):+.3f} mm from the platform top (started -10); "
                f"centre probe {pen[centre] * 1e3:.4f} mm (pose gives {want * 1e3:.4f} mm), force z "
                f"{force[centre, 2]:.3f} N; {int((others != 0).sum())} of the 24 others non-zero")


def check_go2_kinematic(rec):
    """A simulated go2 and a kinematic twin (gs.materials.Kinematic) at one place: after the script's last step
    the twin holds the reference joint angles of that step (its thighs swung by 0.3 sin(4 pi t)) with its base
    where it was put, no velocity, and the simulated go2, which the twin never touches, has not been pushed aside
    (its base within 5 cm of where it started, horizontally)."""
    import math

    scene = only_scene(rec)
    robot, ghost = scene.entities[1], scene.entities[2]
    if not getattr(ghost, "kinematic", False):
        raise CheckError("the third entity is not kinematic")
    t = (scene.t - 1) * scene.dt
    offset = 0.3 * math.sin(2.0 * math.pi * 2.0 * t)
    ref = np.array([0.0, 0.8, -1.5, 0.0, 0.8, -1.5, 0.0, 1.0, -1.5, 0.0, 1.0, -1.5])
    ref[[1, 4]] += offset
    ref[[7, 10]] -= offset
    names = ["FR_hip_joint", "FR_thigh_joint", "FR_calf_joint", "FL_hip_joint", "FL_thigh_joint", "FL_calf_joint",
             "RR_hip_joint", "RR_thigh_joint", "RR_calf_joint", "RL_hip_joint", "RL_thigh_joint", "RL_calf_joint"]
    idx = [robot.get_joint(n).dofs_idx_local[0] for n in names]
    q = np_(ghost.get_dofs_position(idx)).reshape(-1)
    base = np_(ghost.get_pos()).reshape(-1)
    vel = np.abs(np_(ghost.get_links_vel())).max()
    drift = float(np.hypot(*np_(robot.get_pos()).reshape(-1)[:2]))
    err = float(np.abs(q - ref).max())
    ok = err < 1e-6 and np.allclose(base, [0.0, 0.0, 0.42], atol=1e-6) and vel == 0 and drift < 0.05
    return ok, (f"{scene.t} steps; twin joints - reference <= {err:.1e} rad, base {fmt(base)}, link speed {vel}; "
                f"simulated go2 moved {drift:.3f} m horizontally")


def check_tactile_elastomer_sandbox(rec):
    """The sphere pusher starts 1 cm above the floor, its 48 probes on its lower hemisphere, its translation dofs
    servoed to where it starts (kp = 1250 N/m, kv = 125 N s/m): every probe reads no displacement (nothing touches
    yet), and after one step from rest it sinks at the implicit servo's analytic speed, v_z = -g h m / (m + h kv +
    h^2 kp)."""
    scene = only_scene(rec)
    (tactile,) = _sensors_of(scene, "ElastomerDisplacementSensor")
    pusher = scene.entities[tactile.options.entity_idx]
    v = np_(pusher.get_vel()).reshape(-1)
    data = np_(tactile.read())
    m = float(np_(pusher.get_mass()))
    kp, kv = float(np_(pusher.get_dofs_kp())[2]), float(np_(pusher.get_dofs_kv())[2])
    h = scene.dt
    expected = -G * h * m / (m + h * kv + h * h * kp)
    ok = scene.t == 1 and data.shape == (48, 3) and not data.any() and abs(v[2] - expected) < 0.01 * abs(expected)
    return ok, (f"{scene.t} step; displacement field {data.shape}, all zero; pusher vz {v[2]:.5f} m/s (servoed, "
                f"analytic {expected:.5f})")


def check_tactile_elastomer_franka(rec):
    """The two finger pads (8 x 8 probes each, read as (64, 3) as in Genesis World) read no displacement while the
    open gripper touches nothing, and the IK target's debug frame was moved to the target pose."""
    scene = only_scene(rec)
    pads = _sensors_of(scene, "ElastomerDisplacementSensor")
    reads = [np_(p.read()) for p in pads]
    shapes = [r.shape for r in reads]
    frames = [o for o in getattr(scene, "debug_objects", []) if o.kind == "frame"]
    ok = len(pads) == 2 and all(sh == (64, 3) for sh in shapes) and not any(r.any() for r in reads) and frames
    return ok, f"{scene.t} step; pads read {shapes}, largest |displacement| {max(np.abs(r).max() for r in reads)}; " \
               f"{len(frames)} debug frame(s)"


def check_temperature_grid(rec):
    """The 22 C platform's grid (10 x 10 cells of 15 cm) after the step, with the hot pusher (200 C) on its centre
    and the cold objects (-40 C, the script's default properties) touching it: no cell leaves [-40, 200] C (heat
    flows from hot to cold: the maximum principle); the hottest cell is under the pusher and above 22 C, the coldest
    under a cold object and below 22 C; the sensing element's reading lags between 22 C and each cell's
    temperature."""
    scene = only_scene(rec)
    (sensor,) = _sensors_of(scene, "TemperatureGridSensor")
    truth, read = np_(sensor.read_ground_truth()), np_(sensor.read())
    platform = scene.entities[sensor.options.entity_idx]
    c0 = np_(platform.get_pos()).reshape(-1)[:2]
    half = np.asarray(platform.morph.size[:2], dtype=np.float64) / 2
    cell = 2 * half / 10
    centres = c0 - half + cell * (np.stack(np.meshgrid(np.arange(10), np.arange(10), indexing="ij"), -1) + 0.5)

    def cell_xy(idx):
        return centres[np.unravel_index(idx, (10, 10))]

    grid = truth.reshape(-1)
    hot, cold = int(grid.argmax()), int(grid.argmin())
    pusher = [e for e in by_morph(scene, "Cylinder") if abs(float(e.morph.radius) - 0.1) < 1e-9][0]
    reach = 0.1 + float(np.linalg.norm(cell)) / 2
    hot_under = np.linalg.norm(cell_xy(hot) - np_(pusher.get_pos()).reshape(-1)[:2]) < reach
    others = [e for e in scene.entities if e.idx not in (pusher.idx, platform.idx)
              and type(e.morph).__name__ != "Plane" and not getattr(e.morph, "fixed", False)]
    cold_d = min(float(np.linalg.norm(cell_xy(cold) - np_(e.get_pos()).reshape(-1)[:2])) for e in others)
    lag = bool(((read >= np.minimum(truth, 22.0) - 1e-4) & (read <= np.maximum(truth, 22.0) + 1e-4)).all())
    ok = (truth.shape == (10, 10, 1) and grid.min() >= -40.0 - 1e-4 and grid.max() <= 200.0 + 1e-4 and hot_under
          and grid[hot] > 22.0 and cold_d < 0.15 + float(np.linalg.norm(cell)) / 2 and grid[cold] < 22.0 and lag)
    return ok, (f"{scene.t} step; cells {grid.min():.2f} to {grid.max():.2f} C (bounds -40, 200); hottest under the "
                f"pusher: {bool(hot_under)}; coldest {cold_d:.3f} m from a cold object's centre; reading "
                f"{read.min():.2f} to {read.max():.2f} C, lagging: {lag}")



def check_lidar_teleop(rec):
    """The spherical lidar 10 cm above and 30 cm ahead of the fixed go2's base reads, along every ray that leaves
    forward (away from the robot) and meets the ground or one of the eight 0.3 m cylinders within 4.4 m (nearer than
    the ring of boxes), the analytic range: the ray's first crossing of z = 0 or of a cylinder's side below its
    1.5 m top (float32: 1e-4 m + 1e-5 relative); the points read are start + range * direction, world frame."""
    scene = only_scene(rec)
    (lidar,) = _sensors_of(scene, "RaycasterSensor")
    robot = scene.entities[lidar.options.entity_idx]
    start = np_(robot.get_pos()).reshape(-1) + np.asarray(lidar.options.pos_offset)  # the base is not rotated
    dirs = np_(lidar.options.pattern.ray_dirs).reshape(-1, 3)
    data = lidar.read()
    dist, pts = np_(data.distances).reshape(-1), np_(data.points).reshape(-1, 3)
    cyl = [e for e in by_morph(scene, "Cylinder")]
    t_ref = np.full(len(dirs), np.inf)
    down = dirs[:, 2] < -1e-9
    t_ref[down] = start[2] / -dirs[down, 2]
    for e in cyl:
        c = np_(e.get_pos()).reshape(-1)
        r, top = float(e.morph.radius), c[2] + float(e.morph.height) / 2
        o = start[:2] - c[:2]
        a = (dirs[:, :2] ** 2).sum(-1)
        b = 2 * (dirs[:, :2] @ o)
        disc = b * b - 4 * a * (o @ o - r * r)
        ok = (disc >= 0) & (a > 1e-12)
        t = np.where(ok, (-b - np.sqrt(np.where(ok, disc, 0.0))) / (2 * np.where(a > 1e-12, a, 1.0)), np.inf)
        z = start[2] + t * dirs[:, 2]
        t = np.where((t > 0) & (z >= 0) & (z <= top), t, np.inf)
        t_ref = np.minimum(t_ref, t)
    sel = (dirs[:, 0] > 0.1) & (t_ref < 4.4)
    err = np.abs(dist[sel] - t_ref[sel])
    pts_err = np.abs(pts[sel] - (start + dist[sel, None] * dirs[sel])).max() if sel.any() else np.inf
    ok = sel.sum() > 100 and (err <= 1e-4 + 1e-5 * t_ref[sel]).all() and pts_err < 1e-3
    return ok, (f"{scene.t} step; {int(sel.sum())} of {len(dirs)} rays checked (forward, ground or cylinder within "
                f"4.4 m): |range - analytic| <= {err.max():.1e} m; points within {pts_err:.1e} m")


# -- drones --------------------------------------------------------------------------------------------------------


def probe_drone(rec, scene):
    """After each step: the drone's pose and velocity, and whether any contact acted in the step."""
    drones = [e for e in scene.entities if type(e).__name__ == "DroneEntity"]
    if not drones:
        return
    d = drones[0]
    touching = bool(scene.rigid_solver.contacts()["valid"].any())
    rec.trace.append((scene.t, np_(d.get_pos()).reshape(-1), np_(d.get_quat()).reshape(-1),
                      np_(d.get_vel()).reshape(-1), touching))


def _record_rpm(rec):
    """Wrap DroneEntity.set_propellers_rpm to note, at each call, the step index, the speeds and the drone's
    orientation and velocity then (what the step's thrust is computed from)."""
    from genesis_rigid.drone import DroneEntity

    original = DroneEntity.set_propellers_rpm

    def set_propellers_rpm(self, propellers_rpm, envs_idx=None):
        rec.extra.setdefault("rpm", []).append((self.scene.t, np_(propellers_rpm).reshape(-1).copy(),
                                                np_(self.get_quat()).reshape(-1), np_(self.get_vel()).reshape(-1)))
        return original(self, propellers_rpm, envs_idx)

    DroneEntity.set_propellers_rpm = set_propellers_rpm


def _drone_newton(rec, scene, drone):
    """(largest |measured - expected| linear acceleration over the steps flown free, m/s^2; steps checked): each
    step's velocity change over dt against Newton's law for the speeds set before it, R(q) e_z KF sum(rpm^2) / m +
    gravity, R(q) the orientation the thrust was computed at (the semi-implicit step's velocity is exact for it)."""
    after = {t: (v, touching) for t, _, _, v, touching in rec.trace}
    mass, kf, dt = float(np_(drone.get_mass())), drone.KF, scene.dt
    gravity = np.asarray(scene.sim_options.gravity, dtype=np.float64)
    worst, n = 0.0, 0
    for t, rpm, q, v in rec.extra.get("rpm", []):
        if t + 1 not in after or after[t + 1][1]:
            continue
        w, x, y, z = q / np.linalg.norm(q)
        axis = np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])
        expected = axis * kf * float(np.sum(rpm * rpm)) / mass + gravity
        worst = max(worst, float(np.abs((after[t + 1][0] - v) / dt - expected).max()))
        n += 1
    return worst, n


# fly.py's end pose in Genesis World 1.4.5 (the same script and inputs; its 152 open-loop steps, CPU, float32)
FLY_GENESIS_END = np.array([0.0025, 0.2603, 0.6846])


def check_drone_fly(rec):
    """Open-loop flight of fly.py's 152 recorded rpm commands: every step flown free accelerates the drone as
    Newton's law says for the thrust set (float32: 1e-3 m/s^2); the drone climbs from the floor and ends within
    3 cm of where Genesis World 1.4.5 ends the same script."""
    scene = only_scene(rec)
    (drone,) = [e for e in scene.entities if type(e).__name__ == "DroneEntity"]
    worst, n = _drone_newton(rec, scene, drone)
    end = np_(drone.get_pos()).reshape(-1)
    off = float(np.linalg.norm(end - FLY_GENESIS_END))
    ok = scene.t == 152 and n >= 140 and worst < 1e-3 and end[2] > 0.5 and off < 0.03
    return ok, (f"{scene.t} steps; {n} free-flight steps accelerate as Newton's law says for the thrust set, within "
                f"{worst:.1e} m/s^2; end {fmt(end, 4)} m, {off * 1e3:.1f} mm from Genesis World 1.4.5's "
                f"{fmt(FLY_GENESIS_END, 4)}")


FLY_ROUTE_POINTS = np.array([(1, 1, 2), (-1, 2, 1), (0, 0, 0.5)], dtype=np.float64)


def check_drone_fly_route(rec):
    """The PID controller flies the drone to each of the route's three points in turn (the script moves on to the
    next one within 0.1 m, or after 1000 steps); Newton's law holds at every step flown free (float32: 1e-3
    m/s^2); the script saved its video."""
    scene = only_scene(rec)
    (drone,) = [e for e in scene.entities if type(e).__name__ == "DroneEntity"]
    worst, n = _drone_newton(rec, scene, drone)
    reached, k = [], 0
    for t, p, _, _, _ in rec.trace:
        if k < len(FLY_ROUTE_POINTS) and np.linalg.norm(p - FLY_ROUTE_POINTS[k]) <= 0.1:
            reached.append(t)
            k += 1
    video = os.path.isfile(os.path.join("..", "..", "videos", "fly_route.mp4"))
    ok = len(reached) == 3 and n >= 0.9 * scene.t and worst < 1e-3 and video
    return ok, (f"{scene.t} steps; the route's points reached at steps {reached} (within 0.1 m, in order); {n} "
                f"free-flight steps accelerate as Newton's law says within {worst:.1e} m/s^2; video saved: {video}")


def check_interactive_drone(rec):
    """One step (the script stops after one under a test) at the keyboard controller's base speed, 14475.8 rpm on
    every propeller, about the hover speed: the drone's vertical velocity is (4 KF rpm^2 / m - g) dt (1e-5 m/s;
    without the thrust it would be -g dt); the viewer's camera follows the drone (follow_entity: the drone's
    position plus ViewerOptions.camera_pos)."""
    scene = only_scene(rec)
    (drone,) = [e for e in scene.entities if type(e).__name__ == "DroneEntity"]
    vz = float(np_(drone.get_vel()).reshape(-1)[2])
    want = (4 * drone.KF * 14475.8 ** 2 / float(np_(drone.get_mass())) - G) * scene.dt
    cam = np.asarray(scene.viewer.server.initial_camera.position, dtype=np.float64)
    cam_want = np_(drone.get_pos()).reshape(-1) + np.asarray(scene.viewer_options.camera_pos)
    ok = scene.t == 1 and abs(vz - want) < 1e-5 and np.abs(cam - cam_want).max() < 1e-4
    return ok, (f"{scene.t} step; vz {vz:.2e} m/s, (4 KF rpm^2 / m - g) dt = {want:.2e} m/s (-g dt without thrust: "
                f"{-G * scene.dt:.4f}); viewer camera at {fmt(cam)}, the drone's position + camera_pos "
                f"{fmt(cam_want)}")


def drive_hover_env(ns, rec):
    """hover_env.py only defines HoverEnv: start the engine as hover_eval.py does (gs.init()), build HoverEnv with
    4 environments and hover_train.py's get_cfgs() (that function only: the rest of hover_train.py needs rsl-rl),
    reset, and step it 100 times with zero actions (14468.43 rpm on every propeller), counting the resets."""
    import torch

    gs = ns["gs"]
    gs.init()
    cfgs = rec.load_function("hover_train.py", "get_cfgs")()
    env = ns["HoverEnv"](4, *cfgs)
    env.reset()
    actions = torch.zeros((4, env.num_actions), device=gs.device)
    resets, obs = 0, None
    for _ in range(100):
        obs, _, reset_buf, _ = env.step(actions)
        resets += int(reset_buf.sum())
    rec.extra.update(hover_env=env, hover_resets=resets, hover_obs=np_(obs["policy"]))


def check_hover_env(rec):
    """Zero actions run every propeller at 14468.43 rpm, the hover speed for g = 9.8: under g = 9.81 each drone
    sinks from (0, 0, 1) with the acceleration a = 4 KF rpm^2 / m - g (about -0.01 m/s^2): after N substeps of h
    (semi-implicit Euler, exact for a constant force) z = 1 + a h^2 N (N + 1) / 2 (float32: 2e-5 m), level and on
    its axis; no environment terminates; the observations are finite."""
    env = rec.extra["hover_env"]
    scene, drone = env.scene, env.drone
    pos, quat = np_(drone.get_pos()), np_(drone.get_quat())
    n, h = scene.t * scene.sim_options.substeps, scene.dt / scene.sim_options.substeps
    a = 4 * drone.KF * 14468.429183500699 ** 2 / float(np_(drone.get_mass())) - G
    want = 1.0 + a * h * h * n * (n + 1) / 2
    obs = rec.extra["hover_obs"]
    ok = (scene.t == 100 and np.abs(pos[:, 2] - want).max() < 2e-5 and np.abs(pos[:, :2]).max() < 1e-6
          and np.abs(quat - [1, 0, 0, 0]).max() < 1e-6 and rec.extra["hover_resets"] == 0
          and obs.shape == (4, 17) and np.isfinite(obs).all())
    return ok, (f"{scene.t} steps of 4 envs: drone z {fmt(pos[:, 2], 6)} (1 + a h^2 N (N + 1) / 2 = {want:.6f}, a "
                f"{a:.4f} m/s^2), max |x|, |y| {np.abs(pos[:, :2]).max():.1e}; {rec.extra['hover_resets']} "
                f"terminations; observations {obs.shape}, finite")



# -- muscles (kept together: added with the MPM muscles) ------------------------------------------------------


def fibre_convergence(e, axis):
    """mean(v_axis (x_axis - centre)) / mean((x_axis - centre)^2), 1/s: negative while the body shortens along axis."""
    p, v = np_(e.get_particles_pos()), np_(e.get_particles_vel())
    r = p[..., axis] - p[..., axis].mean(-1, keepdims=True)
    return float((v[..., axis] * r).mean() / (r * r).mean())


def check_advanced_muscle(rec):
    scene = only_scene(rec)
    figs, ok = [], len(particle_entities(scene)) == 2
    for e in particle_entities(scene):  # fibres along +z (the default), no gravity
        cz, cx = fibre_convergence(e, 2), fibre_convergence(e, 0)
        ok &= cz < 0 < cx
        figs.append(f"{type(e.material).__module__.split('.')[0]} {type(e.material).__name__}: strain rate along the "
                    f"fibre {cz:.3f} 1/s, across {cx:.3f} 1/s")
    return ok, f"{scene.t} steps; " + "; ".join(figs)


def check_advanced_worm(rec):
    scene = only_scene(rec)
    (worm,) = particle_entities(scene)
    group = np_(worm.get_muscle_group())
    actu = np_(worm.get_actuation())  # (3 environments, n_particles)
    want = np.where(group == 3, actu[0][group == 3][0], 0.0)
    hind = np.nonzero(group == 3)[0]
    p, v = np_(worm.get_particles_pos())[:, hind], np_(worm.get_particles_vel())[:, hind]
    r = p[..., 1] - p[..., 1].mean(-1, keepdims=True)
    rate = (v[..., 1] * r).mean(-1) / (r * r).mean(-1)  # along the fibre (+y), per environment
    ok = (np.all(actu == want) and want.max() > 0 and len(hind) > 0 and bool(np.all(rate < 0))
          and np.array_equal(rate, np.full(3, rate[0])))
    return ok, (f"{scene.t} steps; {len(hind)} of {worm.n_particles} particles in the actuated group 3 (lower hind "
                f"body) at a = {want.max():.3f}, the others at 0; its strain rate along the fibre (y) "
                f"{fmt(rate)} 1/s in the 3 environments")
# -- the scripts added to cover every example: rigid, IK, rendering ----------------------------------------------


def check_entity_name(rec):
    scene = only_scene(rec)
    names = list(scene.entity_names)
    box, sphere, ground, robot = (by_morph(scene, k)[0] for k in ("Box", "Sphere", "Plane", "URDF"))
    uid = box.uid.short()
    ok = (box.name == f"box_{uid}" and sphere.name == f"sphere_{sphere.uid.short()}" and ground.name == "ground"
          and robot.name.startswith("go2") and scene.get_entity(name="ground") is ground
          and scene.get_entity(uid=uid) is box and names == [box.name, sphere.name, "ground", robot.name]
          and len(uid) == 7)
    return ok, f"names {names}; get_entity(name='ground') and get_entity(uid={uid!r}) find the ground and the box"


def _sag(rec, scene, franka):
    """(base displacement, hand z at build, hand z now, lowest link origin z) of a fixed Franka."""
    base = np_(franka.get_link("link0").get_pos()).reshape(-1, 3)
    hand_z0 = rec.initial_links[(id(scene), franka.idx)][..., franka.get_link("hand").idx_local, 2].reshape(-1)
    hand_z = np_(franka.get_link("hand").get_pos())[..., 2].reshape(-1)
    low = np_(franka.get_links_pos())[..., 2].min()
    return np.abs(base).max(), hand_z0, hand_z, low


def check_single_franka(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    base, z0, z, low = _sag(rec, scene, franka)
    ok = scene.t == 1000 and base < 1e-4 and z[0] < z0[0] - 0.05 and low > -0.02
    return ok, (f"{scene.t} steps; base moved {base:.1e} m; the uncontrolled arm sagged: hand z {z0[0]:.3f} -> "
                f"{z[0]:.3f} m; lowest link origin z {low:.3f}")


def check_selecting_rendered_envs(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    base, z0, z, low = _sag(rec, scene, franka)
    q = np_(franka.get_dofs_position())
    spread = np.abs(q - q[0]).max()
    shown = list(scene.vis_options.rendered_envs_idx)
    ok = (q.shape == (20, 9) and spread < 1e-9 and base < 1e-4 and (z < z0 - 1e-4).all()
          and shown == list(range(10, 15)) and scene.t == 5)
    return ok, (f"{scene.t} steps of 20 envs (rendered: {shown}); the arms sag alike: hand z {z0[0]:.4f} -> "
                f"{z[0]:.4f} m, spread of q across envs {spread:.1e}")


def probe_weld(rec, scene):
    (robot,) = by_file(scene, "four_bar_linkage_weld.xml")
    rec.trace.append(_weld_error(robot))


def _quat_R(q):
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                     np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                     np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def _rel_pose(robot, a, b):
    pa, pb = (np_(robot.get_link(n).get_pos()).reshape(3) for n in (a, b))
    Ra, Rb = (_quat_R(np_(robot.get_link(n).get_quat()).reshape(4)) for n in (a, b))
    return Ra.T @ (pb - pa), Ra.T @ Rb


def _weld_error(robot):
    """(position error m, angle error rad) of link_4 in link_1's frame against the closed loop's (qpos 0)."""
    p, R = _rel_pose(robot, "link_1", "link_4")
    p0, R0 = np.array([0.5, 4.0, 4.0]), np.eye(3)
    angle = math.acos(max(-1.0, min(1.0, (np.trace(R0.T @ R) - 1) / 2)))
    return float(np.linalg.norm(p - p0)), angle


def check_closed_loop(rec):
    scene = only_scene(rec)
    (robot,) = by_file(scene, "four_bar_linkage_weld.xml")
    q = np_(robot.get_qpos())
    first, last = rec.trace[0], rec.trace[-1]
    # the script opens the loop (each hinge 0.2 rad: link_4 turned 0.6 rad); the weld pulls it shut again
    ok = scene.t == 20 and first[1] > 0.1 and last[0] < 0.01 and last[1] < 0.01 and np.isfinite(q).all()
    return ok, (f"{scene.t} steps; the weld's violation (link_4 in link_1's frame vs the closed loop): after the "
                f"first step {first[0]:.3f} m, {first[1]:.3f} rad; at the end {last[0]:.1e} m, {last[1]:.1e} rad; "
                f"hinges {fmt(q, 4)} rad")


IK_TARGETS = {"rigid/ik_franka", "rigid/ik_duck", "rigid/ik_franka_batched", "rigid/ik_custom_chain",
              "rigid/ik_shadow_hand", "tutorials/advanced_IK_multilink"}


def _install_ik_hook(rec):
    """Record each inverse-kinematics call's targets; at the next call (the script has set the solution on the
    robot in between) and at the check, measure how far the links are from them."""
    from genesis_rigid.entity import RigidEntity

    rec.extra["ik"] = []
    single, multi = RigidEntity.inverse_kinematics, RigidEntity.inverse_kinematics_multilink

    def _note(call):
        """Keep the call to measure: the first 10, then every 10th (reading the links costs time), and the last
        (measured at the check)."""
        n = rec.extra["ik_calls"] = rec.extra.get("ik_calls", 0) + 1
        rec.extra["ik_pending"] = call
        rec.extra["ik_measure_next"] = n <= 10 or n % 10 == 0

    def _ik(self, link, pos=None, quat=None, *args, **kwargs):
        if rec.extra.get("ik_measure_next"):
            ik_measure(rec)
        out = single(self, link, pos, quat, *args, **kwargs)
        _note(([link], [pos], [quat], kwargs.get("rot_mask")))
        return out

    def _ikm(self, links, poss=None, quats=None, *args, **kwargs):
        if rec.extra.get("ik_measure_next"):
            ik_measure(rec)
        out = multi(self, links, poss, quats, *args, **kwargs)
        _note((list(links), list(poss) if poss is not None else [None] * len(links),
               list(quats) if quats is not None else [None] * len(links), kwargs.get("rot_mask")))
        return out

    RigidEntity.inverse_kinematics, RigidEntity.inverse_kinematics_multilink = _ik, _ikm


def ik_measure(rec):
    """(max position error m, max axis angle error rad) of the last IK call's links, appended to rec.extra["ik"]."""
    call = rec.extra.pop("ik_pending", None)
    if call is None:
        return
    links, poss, quats, rot_mask = call
    mask = [True] * 3 if rot_mask is None else [bool(m) for m in rot_mask]
    perr, rerr = 0.0, 0.0
    for link, pos, quat in zip(links, poss, quats):
        if pos is not None:
            perr = max(perr, float(np.linalg.norm(np_(link.get_pos()) - np_(pos), axis=-1).max()))
        if quat is not None:
            R, Rt = _quat_R(np_(link.get_quat())), _quat_R(np_(quat))
            for k in range(3):
                if mask[k]:
                    c = np.clip(np.sum(R[..., :, k] * Rt[..., :, k], axis=-1), -1.0, 1.0)
                    rerr = max(rerr, float(np.arccos(c).max()))
    rec.extra["ik"].append((perr, rerr))


def _check_ik(rec, n_calls, pos_tol, rot_tol=None, mean_tol=None):
    ik_measure(rec)
    errs = np.array(rec.extra["ik"]).reshape(-1, 2)
    perr, rerr = errs[:, 0].max(), errs[:, 1].max()
    ok = (rec.extra.get("ik_calls") == n_calls and len(errs) >= min(n_calls, 10) and perr < pos_tol
          and (rot_tol is None or rerr < rot_tol)
          and (mean_tol is None or errs[:, 0].mean() < mean_tol))
    figures = (f"{rec.extra.get('ik_calls')} IK solutions set on the robot, {len(errs)} measured (the first 10, "
               f"every 10th, the last): every target link within {perr * 1e3:.2f} mm of its target (mean "
               f"{errs[:, 0].mean() * 1e3:.3f} mm)")
    if rot_tol is not None:
        figures += f", its constrained axes within {math.degrees(rerr):.3f} deg"
    return ok, figures


def check_ik_franka(rec):
    return _check_ik(rec, 2000, 0.005, math.radians(1.0))


def check_ik_duck(rec):
    return _check_ik(rec, 2000, 1e-4, math.radians(0.01))


def check_ik_franka_batched(rec):
    return _check_ik(rec, 720, 0.005, math.radians(1.0))


def check_ik_custom_chain(rec):
    # four joints (the wrist and the index finger) for a 3D target: where the circle leaves what they reach
    # exactly, the fingertip ends at the nearest point they give
    return _check_ik(rec, 200, 0.025, mean_tol=0.005)


def check_ik_shadow_hand(rec):
    return _check_ik(rec, 100, 0.01)


def check_advanced_IK_multilink(rec):
    return _check_ik(rec, 5, 0.005, math.radians(1.0))


def check_draw_debug(rec):
    scene = only_scene(rec)
    kinds = sorted(o.kind for o in scene.debug_objects)
    box = next(o for o in scene.debug_objects if o.kind == "box")
    spheres = next(o for o in scene.debug_objects if o.kind == "spheres")
    frame = next(o for o in scene.debug_objects if o.kind == "frame")
    # 5 steps under a test: none of the clears (steps 100-400) is reached, all six markers remain as drawn
    ok = (scene.t == 5 and kinds == ["arrow", "box", "frame", "line", "sphere", "spheres"]
          and np.allclose(np.asarray(box.params["bounds"]).reshape(2, 3), [[-0.25, -0.25, 0], [0.25, 0.25, 0.5]])
          and np.asarray(spheres.params["pos"]).shape == (3, 3)
          and np.allclose(np.asarray(frame.params["T"]).reshape(-1, 4, 4)[0, :3, 3], [2.5, 0, 0.5]))
    return ok, f"{scene.t} steps; debug markers kept: {kinds}; box bounds, sphere centres and frame origin as drawn"


def probe_boxes(rec, scene):
    boxes = by_morph(scene, "Box")
    rec.extra.setdefault("boxes", {})[id(scene)] = (scene.t, np_(np.stack([np_(b.get_pos()) for b in boxes])),
                                                   max(float(np.linalg.norm(np_(b.get_vel()))) for b in boxes),
                                                   scene.rigid_solver.options.use_hibernation)


def check_hibernation(rec):
    if len(rec.scenes) != 2:
        raise CheckError(f"expected two scenes (without and with hibernation), got {len(rec.scenes)}")
    (t0, p0, v0, h0), (t1, p1, v1, h1) = (rec.extra["boxes"][id(s)] for s in rec.scenes)  # (destroyed since)
    hib = [h0, h1]
    # every 0.1 m box has fallen and rests flat on the plane, its centre at 0.05 m; the two runs agree
    ok = (t0 == t1 == 700 and hib == [False, True] and len(p0) == 20 and np.abs(p0[:, 2] - 0.05).max() < 2e-3
          and max(v0, v1) < 1e-2 and np.abs(p0 - p1).max() < 1e-6)
    return ok, (f"{t0} steps each, hibernation {hib}: the 20 boxes rest on the plane, centres at z "
                f"{p0[:, 2].min():.4f}-{p0[:, 2].max():.4f} m (0.05 expected), max speed {max(v0, v1):.1e} m/s; the "
                f"two runs differ by {np.abs(p0 - p1).max():.1e} m")


def probe_duck_yaw(rec, scene):
    (duck,) = by_file(scene, "duck.obj")
    rec.trace.append((scene.t, np_(duck.get_dofs_position()).reshape(-1)))


def check_control_mesh(rec):
    scene = only_scene(rec)
    (duck,) = by_file(scene, "duck.obj")
    q = np.array([x for _, x in rec.trace])
    kp, kv, dt = 0.3, 1.0, scene.dt
    # the yaw dof under PD towards 1 rad with kp = 0.3, kv = 1 about a body whose inertia is tiny: it follows
    # kv q' = kp (1 - q), q = 1 - exp(-kp t / kv)
    t = np.arange(1, len(q) + 1) * dt
    want = 1 - np.exp(-kp * t / kv)
    err = np.abs(q[:, 5] - want).max()
    ok = scene.t == 1000 and err < 0.02 and np.abs(q[:, :5]).max() < 0.05
    return ok, (f"{scene.t} steps; yaw {q[99, 5]:.4f}, {q[499, 5]:.4f}, {q[-1, 5]:.4f} rad at 1, 5, 10 s vs "
                f"1 - exp(-kp t / kv): {want[99]:.4f}, {want[499]:.4f}, {want[-1]:.4f} (max difference {err:.4f}); "
                f"the other five dofs stay near 0 (within {np.abs(q[:, :5]).max():.1e})")


def probe_ee(rec, scene):
    robot = next(e for e in scene.entities if morph_file(e) == "ur5e.xml")
    rec.trace.append((scene.t, np_(robot.get_link("ee_virtual_link").get_pos()).reshape(3),
                      np_(robot.get_link("ee_virtual_link").get_quat()).reshape(4)))


def check_diffik_controller(rec):
    scene = only_scene(rec)
    center, r = np.array([0.5, 0.0, 0.5]), 0.1
    errs, angs = [], []
    for t, p, q in rec.trace:
        i = t - 1  # the target of the step that ended at t
        target = center + r * np.array([math.cos(i / 360 * math.pi), math.sin(i / 360 * math.pi), 0.0])
        errs.append(np.linalg.norm(p - target))
        angs.append(math.degrees(2 * math.acos(min(1.0, abs(float(np.dot(q, [0, 1, 0, 0])))))))
    late = slice(len(errs) // 2, None)  # past the approach from the robot's initial pose
    e, a = np.array(errs)[late], np.array(angs)[late]
    ok = scene.t == 2000 and e.max() < 0.01 and a.max() < 2.0
    return ok, (f"{scene.t} steps; the damped-least-squares controller tracks the circling target: over the last 1000 "
                f"steps the end effector is within {e.max() * 1e3:.2f} mm of it (mean {e.mean() * 1e3:.2f}) and "
                f"within {a.max():.3f} deg of its orientation; at the first step {errs[0] * 1e3:.0f} mm")


def probe_duck_acc(rec, scene):
    (duck,) = by_file(scene, "duck.obj")
    rec.trace.append((scene.t, np_(duck.get_links_acc()).reshape(3), np_(duck.get_pos()).reshape(3),
                      np_(duck.get_vel()).reshape(3)))


def check_accelerometer_duck(rec):
    scene = only_scene(rec)
    g = abs(float(np.asarray(scene.rigid_solver.gravity)[2]))
    acc = np.array([a for _, a, _, _ in rec.trace])
    z = np.array([p[2] for _, _, p, _ in rec.trace])
    vz = np.array([v[2] for _, _, _, v in rec.trace])
    # free fall until the first contact (each step's velocity change -g dt): the link acceleration is gravity's;
    # at the end it rests: none
    dv = np.diff(vz)
    n_free = int(np.argmax(np.abs(dv + g * scene.dt) > 1e-3 * g * scene.dt)) + 1
    free_err = np.abs(acc[1:n_free] - [0, 0, -g]).max() if n_free > 1 else np.inf
    rest = np.abs(acc[-100:]).max()
    ok = scene.t == 1000 and n_free > 20 and free_err < 1e-3 and rest < 0.05 and abs(vz[-1]) < 1e-3
    return ok, (f"{scene.t} steps; {n_free} steps of free fall: get_links_acc within {free_err:.1e} m/s^2 of "
                f"(0, 0, -{g:.2f}); at rest over the last 100 steps (z {z[-1]:.4f} m): |acc| <= {rest:.1e} m/s^2")


def probe_follow(rec, scene):
    (cube,) = by_morph(scene, "Box")
    rec.trace.append((scene.t, np_(cube.get_pos()).reshape(3)))


def check_follow_entity(rec):
    scene = only_scene(rec)
    (cube,) = by_morph(scene, "Box")
    (cam,) = scene._cameras
    dt, g = scene.dt, G
    p = np.array([x for _, x in rec.trace])
    n = np.arange(1, len(p) + 1)
    # thrown at 5 m/s along y from (0, -0.9, 1): until it lands, y = -0.9 + 5 t and z falls as the integrator says
    flight = slice(0, 30)
    y_err = np.abs(p[flight, 1] - (-0.9 + 5.0 * n[flight] * dt)).max()
    z_err = np.abs(p[flight, 2] - (1.0 - g * dt * dt * n[flight] * (n[flight] + 1) / 2)).max()
    offset = np_(cam.pos).reshape(3) - p[-1]
    offset0 = np.array([2.0, 0.0, 1.5]) - p[0]  # the offset at the first render, after the first step
    look = np.abs(np_(cam.lookat).reshape(3) - p[-1]).max()
    ok = scene.t == 100 and y_err < 1e-4 and z_err < 1e-4 and np.abs(offset - offset0).max() < 1e-5 and look < 1e-5
    return ok, (f"{scene.t} steps; the thrown cube flies as y = -0.9 + 5 t ({y_err:.1e} m) and falls as the integrator "
                f"says ({z_err:.1e} m) for 30 steps; the camera keeps its offset {fmt(offset0)} to it (to "
                f"{np.abs(offset - offset0).max():.1e} m) and looks at it ({look:.1e} m)")


RENDER_TARGETS = {"rigid/single_franka_envs", "rendering/moving_camera", "rendering/speed_test",
                  "tutorials/visualization"}


def check_moving_camera(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    (cam,) = scene._cameras
    base, z0, z, low = _sag(rec, scene, franka)
    img = rec.extra.get("render", {})
    pos, lookat = np_(cam.pos).reshape(3), np_(cam.lookat).reshape(3)
    ok = (scene.t == 1000 and img.get("n") == 1000 and img.get("rgb_std", 0) > 1.0 and base < 1e-4
          and z[0] < z0[0] - 0.05 and np.allclose(pos, [9.99, 0, 2.5]) and np.allclose(lookat, [0, 0, 0.5]))
    return ok, (f"{scene.t} steps, {img.get('n')} renders {img.get('rgb_shape')} (last RGB std "
                f"{img.get('rgb_std', 0):.1f}); "
                f"the camera ends at {fmt(pos)} looking at {fmt(lookat)}; the arm sagged: hand z {z0[0]:.3f} -> "
                f"{z[0]:.3f} m")


def check_speed_test(rec):
    only_scene(rec)
    img = rec.extra.get("render", {})
    # the centre ray from (3.5, 0, 2.5) towards (0, 0, 0.5) passes over the cube and meets the plane at 1.25 times
    # its length to the lookat point
    want = 1.25 * math.hypot(3.5, 2.0)
    d = img.get("depth_centre", float("nan"))
    ok = img.get("n") == 2000 and img.get("rgb_std", 0) > 1.0 and abs(d - want) < 0.01
    return ok, (f"{img.get('n')} renders {img.get('rgb_shape')}; centre depth {d:.4f} m (the plane, {want:.4f} m "
                f"analytic); RGB std {img.get('rgb_std', 0):.1f}")


def check_visualization(rec):
    scene = only_scene(rec)
    img = rec.extra.get("render", {})
    first = rec.extra.get("first_render", {})
    video = os.path.isfile("video.mp4") and os.path.getsize("video.mp4") > 0
    ok = (scene.t == 1 and first.get("shapes") == [[480, 640, 3], [480, 640], [480, 640], [480, 640, 3]]
          and first.get("n_segments", 0) >= 3 and img.get("rgb_std", 0) > 1.0 and video
          and abs(first.get("depth_centre", 0) - 0) > 0)
    return ok, (f"{scene.t} step; first render: {first}; last RGB std {img.get('rgb_std', 0):.1f}; video.mp4 saved: "
                f"{video}")


def probe_hand(rec, scene):
    (franka,) = by_file(scene, "panda.xml")
    rec.extra["thread"] = __import__("threading").current_thread().name


def check_render_async(rec):
    scene = only_scene(rec)
    (franka,) = by_file(scene, "panda.xml")
    base = np.abs(np_(franka.get_link("link0").get_pos())).max()
    v = np_(franka.get_dofs_velocity())
    m = np_(franka.get_links_inertial_mass()).reshape(-1)
    vz_com = float((m * np_(franka.get_links_vel(ref="link_com"))[..., 2].reshape(-1)).sum() / m.sum())
    gz = float(np.asarray(scene.rigid_solver.gravity)[2])
    # one step from rest: the limp arm's centre of mass starts down, slower than a free fall (the joints hold
    # part of the weight)
    ok = (scene.t == 1 and rec.extra.get("thread") not in (None, "MainThread") and gz == -10.0 and base < 1e-6
          and np.isfinite(v).all() and gz * scene.dt < vz_com < -1e-4)
    return ok, (f"{scene.t} step, run in thread {rec.extra.get('thread')!r}; gravity {gz} m/s^2; the limp arm starts "
                f"to fall: its centre of mass moves down at {vz_com:.4f} m/s (free fall {gz * scene.dt:.4f}), max "
                f"|dq| {np.abs(v).max():.3f} rad/s; base moved {base:.1e} m")


def check_keyboard_teleop(rec):
    scene = only_scene(rec)
    (cube,) = by_morph(scene, "Box")
    p = np_(cube.get_pos()).reshape(3)
    ok_ik, figures = _check_ik(rec, 2, 0.005, math.radians(1.0))
    ok = ok_ik and scene.t == 1 and 0.2 <= p[0] <= 0.4 and -0.2 <= p[1] <= 0.2 and 0.02 < p[2] <= 0.05
    return ok, f"{scene.t} step; {figures}; the cube placed at random at {fmt(p)} falls towards the floor"


def probe_cloth_box(rec, scene):
    (box,) = by_morph(scene, "Box")
    (cloth,) = particle_entities(scene)
    rec.trace.append((scene.t, np_(box.get_pos()).reshape(3), np_(box.get_quat()).reshape(4),
                      np_(cloth.get_particles_pos())[:8]))


def check_cloth_attached_to_rigid(rec):
    scene = only_scene(rec)
    (cloth,) = particle_entities(scene)
    b0 = np.array([0.25, 0.25, 0.25])
    off0 = rec.initial[(id(scene), cloth.idx)][:8] - b0  # the 8 fixed particles in the box's frame at the fixing
    err = []
    for t, b, q, p in rec.trace:
        err.append(np.abs((p - b) @ _quat_R(q) - off0).max())  # R^T (p - b), row-wise
    err = np.array(err)
    h = 25
    held = err[:3 * h].max()  # the first run and the two teleports before the release (j = 2)
    after = err[-h:].min()  # the last teleport, long after the release
    ok = scene.t == 6 * h and held < 0.01 and after > 0.02
    return ok, (f"{scene.t} steps; while fixed (through the box's motion and two teleports, {3 * h} steps) the 8 "
                f"particles keep their place on the box to {held:.1e} m; released, they do not follow it (off by "
                f">= {after:.3f} m after the last teleport)")


def check_fem_hard_and_soft_constraint(rec):
    scene = only_scene(rec)
    blob, cube = by_morph(scene, "Sphere")[0], by_morph(scene, "Box")[0]
    b0 = np_(blob.init_positions)
    b = np_(blob.get_state().pos).reshape(-1, 3)
    c = np_(cube.get_state().pos).reshape(-1, 3)
    t = scene.t * scene.dt
    # the cube's vertex 0 is held (hard) on a circle of 0.3 m radius about its start, a 2 pi / 10 s turn per
    # step: at the n-th step's target it is at centre + 0.3 (-cos, -sin) of the angle n * step
    step = 2 * math.pi * scene.dt / 10.0
    c0 = np_(cube.init_positions)[0]
    centre = c0 + np.array([0.3, 0.0, 0.0])
    ang = scene.t * step
    want = centre + 0.3 * np.array([-math.cos(ang), -math.sin(ang), 0.0])
    hard = np.abs(c[0] - want).max()
    drop = (b0[:, 2] - b[:, 2]).mean()
    pin = np.linalg.norm(b[0] - b0[0])
    ok = (scene.t == 10 and hard < 1e-6 and 0.5 * 0.5 * G * t * t < drop < 1.5 * 0.5 * G * t * t and pin < drop)
    return ok, (f"{scene.t} steps; the cube's vertex 0 on its circle target to {hard:.1e} m; the blob falls "
                f"{drop * 1e3:.3f} mm on average (free fall {0.5 * G * t * t * 1e3:.3f} mm), its softly pinned "
                f"vertex moves {pin * 1e3:.3f} mm")


# what the scripts marked `needs` need, where several share it
NEEDS_IPC = ("the IPC coupler (gs.options.IPCCouplerOptions: libuipc's incremental potential contact), not built "
             "here")
NEEDS_SAP = "the SAP coupler (gs.options.SAPCouplerOptions: Drake's semi-analytic primal contact), not built here"
NEEDS_RSL_RL = "rsl-rl (rsl_rl.runners.OnPolicyRunner), not installed here"
NEEDS_PLANNING = "motion planning: RigidEntity.plan_path, not implemented here"


def check_anymal_c(rec):
    scene = only_scene(rec)
    (robot,) = by_file(scene, "anymal_c.urdf")
    q = np_(robot.get_dofs_position())[:, 6:]
    quat = np_(robot.get_quat())
    w, x, y, z = quat.T
    up = 1 - 2 * (x * x + y * y)  # the z component of the base's z axis
    base_z = np_(robot.get_pos())[:, 2]
    ok = (scene.t == 1000 and q.shape == (30000, 12) and np.abs(q).max() < 0.1 and up.min() > 0.95
          and np.isfinite(base_z).all() and base_z.min() > 0.3)
    return ok, (f"{scene.t} steps of {q.shape[0]} envs; joints within {np.abs(q).max():.4f} rad of 0; base z "
                f"{base_z.min():.3f}-{base_z.max():.3f} m, upright (z axis up component >= {up.min():.4f})")


TARGETS = [
    Target("tutorials/hello_genesis", check_hello_genesis,
           what="the base of the fixed Franka stays put, its uncontrolled arm sags under gravity (the hand drops "
                "more than 5 cm) and no link goes through the floor"),
    Target("tutorials/parallel_simulation", check_parallel_simulation,
           what="all 20 environments reach the PD target within 0.05 rad, identically (spread < 1e-4)"),
    Target("tutorials/control_your_robot", check_control_your_robot,
           what="after the hard resets, PD control moves joints 1 and 2 towards their target; the reported control "
                "force lies within the force range set"),
    Target("tutorials/mpm", check_mpm,
           what="the three MPM bodies (elastic, liquid, elasto-plastic) fall freely: mean vertical velocity -g t "
                "within 15 %"),
    Target("tutorials/sph_liquid", check_sph_liquid,
           what="the SPH block falls freely (mean vertical velocity -g t within 15 %) and stays inside the domain"),
    Target("tutorials/pbd_cloth", check_pbd_cloth,
           what="the pinned corners stay exactly put, the rest of each cloth falls (0.2-2x the free-fall drop)"),
    Target("tutorials/position_control_comparison", check_position_control_comparison, probe=probe_joint0,
           what="joint 1 tracks the 1 Hz sinusoid; the RMS error (0.5-2 s) of control_dofs_position_velocity is "
                "below 0.05 rad and below that of control_dofs_position"),
    Target("tutorials/batched_IK", check_batched_IK,
           what="in all 16 environments the hand ends within 1 cm of its IK target with its z axis pointing down"),
    Target("tutorials/IK_motion_planning_grasp", check_IK_motion_planning_grasp,
           what="the cube is lifted off the floor, held under the hand"),
    Target("rigid/single_franka_envs", check_single_franka_envs,
           what="100 steps with a camera render (RGB, depth, segmentation, normals) each step; the image is not "
                "blank"),
    Target("rigid/franka_cube", check_franka_cube,
           what="after grasp and lift the cube is above 0.15 m, within 3 cm of the hand's axis"),
    Target("rigid/domain_randomization", check_domain_randomization,
           what="per-environment friction ratios, mass shifts and COM shifts are in the ranges drawn and differ "
                "across the 8 environments; link.set_mass took; the go2s step"),
    Target("rigid/set_phys_attr", check_set_phys_attr, probe=probe_franka_q,
           what="per-environment gains are kept; environment 0 reaches each PD target within 0.05 rad and turns "
                "joint 1 at 1 rad/s under velocity control; the two environments' motions differ"),
    Target("rigid/apply_external_force_torque", check_apply_external_force_torque, probe=probe_cube,
           what="the external force (a spring to (0, 0, 1)) makes the cube oscillate about its equilibrium height "
                "with the amplitude of an undamped spring (within 10 %) above the origin; the external torque spins "
                "it about z only, to the peak rate 5 N m / I x 0.5 s (within 10 %)"),
    Target("rigid/control_franka", check_control_franka, probe=probe_franka_q,
           what="each PD target (held at the joint's range where it lies outside) is reached within 0.05 rad; "
                "joint 1 turns at 1 rad/s under velocity control"),
    Target("rigid/gravity_compensation", check_gravity_compensation, probe=probe_hands,
           what="the limp arms fall under the net gravity: the half-compensated hand takes sqrt(2) times as long "
                "(+- 0.15) as the uncompensated one to drop 0.2 m; the fully compensated hand never does, and ends "
                "within 1 cm of its start"),
    Target("rigid/heterogeneous_simulation", check_heterogeneous_simulation, probe=probe_heterogeneous,
           what="one entity, four shapes: each environment holds its own variant (AABB extents and masses of the 4 "
                "and 2 cm boxes and the 1.5 and 2.5 cm spheres, exact); the Franka's grasp and lift run 401 steps"),
    Target("rigid/merge_entities", check_merge_entities, probe=probe_merge,
           what="the hand attached to the arm's flange (RigidEntity.attach) stays on it (1e-9 m) while the arm "
                "moves"),
    Target("rigid/nonconvex_mesh", check_nonconvex_mesh,
           what="the ball comes to rest inside the non-convex tank (on its floor, within its walls)"),
    Target("collision/pyramid", check_pyramid,
           what="the 15-box pyramid stands: every box within 1 cm of its start, all at rest"),
    Target("collision/tower", check_tower,
           what="the 100-box tower stands (no box slides 1 cm; successive layers stay a box height apart within "
                "2 mm) while the cylinder falls freely (within 5 %)"),
    Target("collision/contype", check_contype,
           what="contact filtering: green falls through red onto the floor, blue rests on both, the dragon on the "
                "floor"),
    Target("coupling/sph_rigid", check_sph_rigid,
           what="the cube falls freely towards the water (within 10 %); the water stays in its tank, settled"),
    Target("coupling/sph_mpm", check_sph_mpm,
           what="the MPM duck falls freely (within 15 %); the SPH water stays in its tank, settled"),
    Target("coupling/cloth_on_rigid", check_cloth_on_rigid,
           what="the cloth falls (within 20 % of free fall) and no particle enters the sphere"),
    Target("coupling/grasp_soft_cube", check_grasp_soft_cube,
           what="the Franka grasps the soft MPM cube and lifts it by more than 10 cm"),
    Target("coupling/sand_wheel", check_sand_wheel,
           what="the emitter places sand particles (scene.add_emitter), each below the nozzle, moving down at the "
                "nozzle's 8 m/s plus at most g t"),
    Target("coupling/water_wheel", check_water_wheel,
           what="the emitter places SPH water particles, each moving down at the nozzle's 5 m/s plus at most g t"),
    Target("coupling/flush_cubes", check_flush_cubes,
           what="both MPM liquid emitters place particles moving down at 1.5 m/s plus at most g t; the three elastic "
                "bodies fall freely (within 15 %)"),
    Target("rigid/terrain_height_field", check_terrain_height_field,
           what="the Terrain's height field (terrain.geoms[0].metadata) is the script's: a 30 x 30 plateau of "
                "190-210 x 5 mm in a 40 x 40 grid with a zero border; 1000 steps"),
    Target("rigid/terrain_subterrain", check_terrain_subterrain,
           what="100 balls (one per environment) land on the 2 x 2 subterrains and stay on the surface (centre a "
                "radius from it, 5 mm); those on the flat subterrain rest at z = 0.1 (1 mm)"),
    Target("rigid/terrain_from_mesh", check_terrain_from_mesh, probe=probe_ball,
           what="a height field sampled from the 45-degree ramp mesh (mesh_to_heightfield); the ball rolls down it "
                "at 5/7 g sin 45 (5 %) while touching it, without drifting sideways"),
    Target("differentiable_push", check_differentiable_push,
           what="the loss is finite and its gradients to the stick's velocities are finite and not all zero"),
    Target("elastic_dragon", check_elastic_dragon,
           what="the PBD elastic dragon falls freely (within 15 %)"),
    Target("pbd_liquid", check_pbd_liquid,
           what="the PBD liquid column falls (within 20 % of free fall) inside the domain"),
    Target("speed_benchmark/franka", check_speed_benchmark_franka,
           what="all 30000 environments reach the PD target within 0.05 rad"),
    Target("sensors/camera_as_sensor", check_camera_as_sensor,
           what="the four rasterizer camera sensors draw the scene (not blank); the sphere falls to rest on the "
                "plane (its centre at its radius, 1 cm); the two attached to it ride with it (1 m above its centre, "
                "and at it; 1e-6 m); the script saves its 40 renders"),
    Target("sensors/imu_franka", check_imu_franka, probe=probe_imu,
           what="the IMU's gyroscope ground truth on the moving hand equals the hand's angular velocity from its "
                "Jacobian and the joint velocities (to float32 rounding, 1e-5 relative); the NPZ recorder wrote one "
                "frame per step"),
    Target("sensors/contact_force_go2", check_contact_force_go2,
           what="each of the four foot sensors reads its foot's net contact force in the foot frame (1e-6); the "
                "go2, started with its legs in the floor, is pushed out by its contacts"),
    Target("sensors/lidar_teleop", check_lidar_teleop, keep_viewer=True,
           what="the spherical lidar on the go2 reads the analytic range of every forward ray to the ground or the "
                "nearest cylinder (1e-4 m); its points lie along the rays (the keyboard teleop script runs with the "
                "browser viewer, its keybinds as buttons)"),
    Target("sensors/proximity_shadowhand", check_proximity_shadowhand,
           what="the six proximity sensors on the hand read the distance to the nearer of the duck and the box: "
                "between the duck's bounding-box distance and the exact box distance, their nearest points at that "
                "distance (1e-5 m)"),
    Target("sensors/kinematic_contact_sandbox", check_kinematic_contact_sandbox,
           what="the pusher, started 1 cm into the platform, rests on it after the step (1 mm); the probe under "
                "it reads the penetration its pose gives (1e-5 m) and the spring force; the 24 others read 0"),
    Target("kinematic/go2_kinematic", check_go2_kinematic,
           what="the kinematic twin holds the last reference joint angles (1e-6 rad, float32) at its base, with no velocity; "
                "the simulated go2 it overlaps is not pushed aside (5 cm)"),
    Target("sensors/tactile_elastomer_sandbox", check_tactile_elastomer_sandbox,
           what="the servoed sphere's 48 probes read no displacement before it touches anything; it sinks at the "
                "implicit PD servo's analytic speed (1 %)"),
    Target("sensors/tactile_elastomer_franka", check_tactile_elastomer_franka, keep_viewer=True,
           what="the two finger pads (8 x 8 probes, read as (64, 3)) read no displacement before the gripper touches "
                "anything; the IK target's debug frame exists (a keyboard teleop script: it runs with the browser "
                "viewer, one step as under pytest)"),
    Target("sensors/temperature_grid", check_temperature_grid,
           what="no cell of the 22 C platform leaves [-40, 200] C (the bodies' temperatures); the hottest is under "
                "the 200 C pusher, the coldest under a -40 C object; the reading lags between 22 C and the cells"),
    Target("drone/fly", check_drone_fly, probe=probe_drone,
           what="open-loop flight of 152 recorded rpm commands: each step flown free accelerates the drone as "
                "Newton's law says for the thrust set (1e-3 m/s^2); it climbs from the floor and ends within 3 cm "
                "of Genesis World 1.4.5's end point for the same script"),
    Target("drone/fly_route", check_drone_fly_route, probe=probe_drone, extra_files=("quadcopter_controller.py",),
           subdir="run/here",
           what="the PID controller flies the drone to the route's three points in turn (0.1 m); each step flown "
                "free accelerates it as Newton's law says for the thrust set (1e-3 m/s^2); the video is saved"),
    Target("drone/interactive_drone", check_interactive_drone, keep_viewer=True,
           what="one step at the keyboard controller's base speed (about the hover speed) changes the drone's "
                "vertical velocity by (4 KF rpm^2 / m - g) dt (1e-5 m/s); the viewer's camera follows it (a keyboard "
                "teleop script: the browser viewer serves headless, its keybinds as buttons; it stops after one "
                "step under a test)"),
    Target("drone/hover_env", check_hover_env, driver=drive_hover_env, extra_files=("hover_train.py",),
           what="HoverEnv (4 environments, hover_train's configuration) resets and steps 100 times with zero actions "
                "(the hover speed for g = 9.8): each drone sinks as the integrator's 1 + a h^2 N (N + 1) / 2 under g = "
                "9.81 (2e-5 m), level; none terminated"),
    Target("locomotion/go2_env", check_go2_env, driver=drive_go2_env, extra_files=("go2_train.py",),
           what="Go2Env (4 environments, go2_train's configuration) resets and steps 100 times with zero actions; "
                "every go2 stands (base 0.2-0.45 m, upright), none terminated"),
    Target("tutorials/advanced_muscle", check_advanced_muscle,
           what="an MPM and an FEM muscle sphere (fibres +z, no gravity) under actuation shorten along the fibre and "
                "widen across it (their strain rates, from the particles' velocities)"),
    Target("tutorials/advanced_worm", check_advanced_worm,
           what="the worm's four muscle groups take the script's actuation (only group 3, the lower hind body); that "
                "group shortens along its fibre (y) in all 3 environments alike"),
    Target("IPC_Solver/ipc_momentum", None,
           needs=NEEDS_IPC),
    Target("IPC_Solver/ipc_objects_falling", None,
           needs=NEEDS_IPC + " (and assets downloaded from the Hugging Face hub)"),
    Target("IPC_Solver/ipc_robot_cloth_teleop", None,
           needs=NEEDS_IPC + " (and FEM cloth, gs.materials.FEM.Cloth; a keyboard teleop)"),
    Target("IPC_Solver/ipc_robot_grasp_cube", None,
           needs=NEEDS_IPC),
    Target("coupling/cloth_attached_to_rigid", check_cloth_attached_to_rigid, probe=probe_cloth_box,
           what="the 8 cloth particles fixed to the box keep their place on it (1 cm) while it slides and is "
                "teleported twice; released, they no longer follow it (2 cm after the last teleport)"),
    Target("coupling/cut_dragon", None,
           needs="MPMOptions(enable_CPIC=True): compatible particle-in-cell, which lets MPM be cut by a thin rigid "
                 "blade, not implemented here (also MPM's sampler= and gs.surfaces.Iron)"),
    Target("coupling/fem_cube_linked_with_arm", None,
           needs=NEEDS_PLANNING),
    Target("coupling/rigid_mpm_attachment", None,
           needs="MPM particles attached to a rigid link: MPMEntity.get_particles_in_bbox and "
                 "set_particle_constraints, not implemented here"),
    Target("ddp_multi_gpu", None,
           needs="several CUDA GPUs: torch.distributed (NCCL) data-parallel training, one process per GPU"),
    Target("drone/hover_eval", None,
           needs=NEEDS_RSL_RL + ": it evaluates a policy trained by hover_train (logs/ not in the checkout)"),
    Target("drone/hover_train", None,
           needs=NEEDS_RSL_RL + ": it trains the hover policy (drone/hover_env is checked on its own)"),
    Target("drone/quadcopter_controller", None,
           needs="nothing to run: a module (the PID controller) that drone/fly_route imports; fly_route's check "
                 "flies it"),
    Target("fem_hard_and_soft_constraint", check_fem_hard_and_soft_constraint,
           what="the cube's vertex held by a hard constraint is on its moving circle target (1e-6 m); the blob falls "
                "(0.5-1.5x free fall, 10 steps) while its softly pinned vertex moves less than its mean"),
    Target("hibernation", check_hibernation, probe=probe_boxes,
           what="in both runs (without and with use_hibernation, accepted without effect) the 20 boxes fall and rest "
                "on the plane, centres at 0.05 m (2 mm), still (0.01 m/s); the two runs agree (1e-6 m)"),
    Target("keyboard_teleop", check_keyboard_teleop, keep_viewer=True,
           what="the reset's IK puts the hand at (0.5, 0, 0.55) pointing down (5 mm, 1 deg), where the step's PD "
                "control holds it; the cube placed at random falls towards the floor (a keyboard teleop script: it "
                "runs with the browser viewer, one step as under pytest)"),
    Target("locomotion/go2_backflip", None,
           needs="a trained policy, ./backflip/single.pt, which is not in the examples checkout (it is downloaded "
                 "separately), and an endless loop: it runs the policy until interrupted"),
    Target("locomotion/go2_eval", None,
           needs=NEEDS_RSL_RL + ": it evaluates a policy trained by go2_train (logs/ not in the checkout)"),
    Target("locomotion/go2_train", None,
           needs=NEEDS_RSL_RL + ": it trains the walking policy (locomotion/go2_env is checked on its own)"),
    Target("manipulation/behavior_cloning", None,
           needs="tensorboard (torch.utils.tensorboard), not installed here: the script only defines the "
                 "behaviour-cloning policy grasp_train / grasp_eval use; it makes no scene"),
    Target("manipulation/grasp_env", None,
           needs="the tensordict package, not installed here: the script only defines GraspEnv (for grasp_train / "
                 "grasp_eval), which returns its observations as a TensorDict"),
    Target("manipulation/grasp_eval", None,
           needs=NEEDS_RSL_RL + " (and tensordict): it evaluates a policy trained by grasp_train"),
    Target("manipulation/grasp_train", None,
           needs=NEEDS_RSL_RL + " (and tensordict): it trains the grasp policy"),
    Target("render_async", check_render_async, probe=probe_hand,
           what="the step runs in the script's own thread, with the rigid solver's gravity -10 m/s^2: the fixed "
                "Franka's limp arm starts to fall (its centre of mass moves down, slower than g dt), its base stays "
                "put"),
    Target("rendering/demo", None,
           needs="a GPU-only renderer: gs.renderers.RayTracer (LuisaRender, CUDA), not available here"),
    Target("rendering/follow_entity", check_follow_entity, probe=probe_follow,
           what="the thrown cube flies as y = -0.9 + 5 t and falls as the integrator says (1e-4 m) until it lands; "
                "the following camera keeps its offset to it and looks at it (1e-5 m)"),
    Target("rendering/moving_camera", check_moving_camera,
           what="1000 renders from a camera moved along x (starting straight over its lookat point); it ends at "
                "(9.99, 0, 2.5) still looking at (0, 0, 0.5); the image is not blank; the uncontrolled arm sags"),
    Target("rendering/speed_test", check_speed_test,
           what="2000 RGB + depth renders; the centre pixel's depth is the analytic distance to the plane along the "
                "view axis (1 cm)"),
    Target("rigid/accelerometer_duck", check_accelerometer_duck, probe=probe_duck_acc,
           what="get_links_acc reads gravity's acceleration (1e-3 m/s^2) while the duck falls freely and 0 (0.05 "
                "m/s^2) once it rests on the plane"),
    Target("rigid/accelerometer_franka", None,
           needs="Genesis World's solver internals rigid_solver.links_state.cd_vel / cdd_vel (spatial velocities and "
                 "accelerations at each tree's centre of mass), which this solver does not keep (get_links_acc, "
                 "which the script also reads, is here: rigid/accelerometer_duck checks it)"),
    Target("rigid/closed_loop", check_closed_loop, probe=probe_weld,
           what="the weld closing the four-bar linkage, opened by the script's write of 0.2 rad into each hinge "
                "(rigid_solver.qpos), pulls it shut: link_4's pose in link_1's frame returns to the closed loop's "
                "within 1 cm and 0.01 rad"),
    Target("rigid/control_mesh", check_control_mesh, probe=probe_duck_yaw,
           what="without gravity, the duck's yaw dof under PD control (kp 0.3, kv 1) approaches 1 rad as the "
                "first-order law 1 - exp(-kp t / kv) says for a body of negligible inertia (0.02 rad); the other five "
                "dofs, held at 0 by the same weak PD, stay within 0.05"),
    Target("rigid/convex_decomposition", None,
           needs="assets downloaded from the Hugging Face hub at run time (huggingface_hub, not installed here; "
                 "no network)"),
    Target("rigid/diffik_controller", check_diffik_controller, probe=probe_ee,
           what="the damped-least-squares Jacobian controller makes the UR5e's end effector track the circling target "
                "(over the last 1000 steps: within 1 cm and 2 deg)"),
    Target("rigid/grasp_bottle", None,
           needs=NEEDS_PLANNING),
    Target("rigid/ik_custom_chain", check_ik_custom_chain,
           what="IK over the wrist and index finger's dofs only puts the index fingertip within 2.5 cm of each of "
                "its 200 targets, 5 mm on average (those four joints do not reach every point of the circle exactly)"),
    Target("rigid/ik_duck", check_ik_duck,
           what="IK of a free body (the duck) reaches each of its 2000 target poses exactly (0.1 mm, 0.01 deg)"),
    Target("rigid/ik_franka", check_ik_franka,
           what="each of the 2000 IK solutions, set on the arm, puts the hand within 5 mm of its circling target with "
                "its z axis within 1 deg of the target's (the only axis constrained)"),
    Target("rigid/ik_franka_batched", check_ik_franka_batched,
           what="in each of the 64 environments, each of the 720 IK solutions puts the hand within 5 mm of its "
                "target, its z axis within 1 deg"),
    Target("rigid/ik_shadow_hand", check_ik_shadow_hand,
           what="multi-link IK puts the index and middle fingertips and the wrist within 1 cm of their 100 targets"),
    Target("rigid/multi_gpu", None,
           needs="two CUDA GPUs: one process per GPU (torch.cuda.current_device())"),
    Target("rigid/single_franka", check_single_franka,
           what="the fixed Franka's base stays put and its uncontrolled arm sags under gravity (the hand drops more "
                "than 5 cm) without a link going through the floor"),
    Target("rigid/single_franka_batch_render", None,
           needs="a GPU-only renderer: gs.options.renderers.BatchRenderer (Madrona, CUDA), not "
                 "available here"),
    Target("rigid/suction_cup", None,
           needs=NEEDS_PLANNING),
    Target("sap_coupling/fem_fixed_constraint", None,
           needs=NEEDS_SAP),
    Target("sap_coupling/fem_sphere_and_cube", None,
           needs=NEEDS_SAP),
    Target("sap_coupling/franka_grasp_fem_sphere", None,
           needs=NEEDS_SAP),
    Target("sap_coupling/franka_grasp_rigid_cube", None,
           needs=NEEDS_SAP),
    Target("smoke", None,
           needs="the smoke solver (gs.options.SFOptions, stable fluids) and gs.materials.SF, not implemented "
                 "here; also OpenCV (cv2) and quadrants, not installed"),
    Target("speed_benchmark/anymal_c", check_anymal_c,
           what="after 1000 steps every one of the 30000 ANYmal C's stands on its PD-held legs: base upright, the "
                "12 joints within 0.1 rad of their 0 target"),
    Target("speed_benchmark/timers", None,
           needs="Genesis World's own constraint-solver kernel timers "
                 "(rigid_solver.constraint_solver.constraint_state.timers) and plotext, not installed here"),
    Target("tutorials/advanced_IK_multilink", check_advanced_IK_multilink,
           what="multi-link IK puts both fingers within 5 mm of their targets with their z axes within 1 deg"),
    Target("tutorials/draw_debug", check_draw_debug,
           what="the six debug markers are drawn as given (box bounds, the three sphere centres, the frame's origin) "
                "and kept over the 5 steps of a test run"),
    Target("tutorials/entity_name", check_entity_name,
           what="the entities' default names are their kind and short uid (box_..., sphere_..., the URDF robot's own "
                "name), a given name is kept, and get_entity finds each by name and by short uid"),
    Target("tutorials/interactive_debugging", None,
           needs="an interactive session: IPython.embed() (IPython not installed here)"),
    Target("tutorials/selecting_rendered_envs", check_selecting_rendered_envs,
           what="20 environments step alike (spread 1e-9) with environments 10-14 chosen for rendering; the "
                "uncontrolled arms sag"),
    Target("tutorials/visualization", check_visualization,
           what="the first render gives RGB, depth, segmentation (at least 3 segments) and normals at 640 x 480; the "
                "recorded video is saved"),
    Target("usd/import_stage", None,
           needs="USD: gs.morphs.USD and scene.add_stage (OpenUSD, pxr), not implemented here; also assets from the "
                 "Hugging Face hub"),
    Target("viewer_plugin/mesh_point_selector", None,
           needs="an interactive device, the mouse, through Genesis World's viewer plugins "
                 "(scene.viewer.add_plugin, gs.vis.viewer_plugins.MeshPointSelectorPlugin), which the browser "
                 "viewer has no counterpart for"),
    Target("viewer_plugin/mouse_interaction", None,
           needs="an interactive device, the mouse, through Genesis World's viewer plugins "
                 "(scene.viewer.add_plugin, gs.vis.viewer_plugins.MouseInteractionPlugin), which the browser viewer "
                 "has no counterpart for"),
]
TARGETS_BY_NAME = {t.name: t for t in TARGETS}


# ---------------------------------------------------------------------------------------------------------------
# rewriting a script

_REWRITES = [
    (re.compile(r"^(\s*)import genesis as gs\b", re.M), r"\1import genesis_core as gs"),
    (re.compile(r"^(\s*)import genesis\.", re.M), r"\1import genesis_core."),
    (re.compile(r"^(\s*)from genesis\.", re.M), r"\1from genesis_core."),
    (re.compile(r"^(\s*)from genesis import\b", re.M), r"\1from genesis_core import"),
    (re.compile(r"^(\s*)import genesis\s*$", re.M), r"\1import genesis_core as genesis"),
    (re.compile(r"show_viewer\s*=\s*True"), "show_viewer=False"),
]


def rewrite(source: str, keep_viewer: bool = False) -> str:
    for pattern, repl in _REWRITES[:-1] if keep_viewer else _REWRITES:
        source = pattern.sub(repl, source)
    return source


# ---------------------------------------------------------------------------------------------------------------
# the child process: run one script under the harness


class Recorder:
    def __init__(self, script_dir):
        self.scenes = []  # strong references: most scripts build their scene inside main(), which has returned
        self.initial = {}  # (id(scene), entity idx) -> particle positions at build
        self.initial_links = {}  # (id(scene), entity idx) -> link positions at build
        self.trace = []
        self.extra = {}
        self.ns = {}
        self.script_dir = script_dir

    def load_function(self, filename, name):
        """A top-level function of a sibling file, without running the rest of that file (its imports may need
        packages the function does not)."""
        import ast

        path = os.path.join(self.script_dir, filename)
        tree = ast.parse(open(path).read())
        node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        ns = {}
        exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), ns)
        return ns[name]


def _snapshot(rec, scene):
    for e in scene.entities:
        try:
            if hasattr(e, "get_particles_pos"):
                rec.initial[(id(scene), e.idx)] = np_(e.get_particles_pos())
            elif hasattr(e, "get_links_pos"):
                rec.initial_links[(id(scene), e.idx)] = np_(e.get_links_pos())
        except Exception:  # noqa: BLE001 - a snapshot is best effort; the check says what it lacks
            pass


def _install_harness(rec, target):
    import genesis_core as gs

    Scene = gs.Scene
    init, build, step = Scene.__init__, Scene.build, Scene.step

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        rec.scenes.append(self)

    def _build(self, *args, **kwargs):
        out = build(self, *args, **kwargs)
        _snapshot(rec, self)
        return out

    def _step(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        if target.probe is not None:
            target.probe(rec, self)
        return out

    Scene.__init__, Scene.build, Scene.step = __init__, _build, _step

    if target.name.startswith("drone/"):
        _record_rpm(rec)

    if target.name in IK_TARGETS or target.name == "keyboard_teleop":
        _install_ik_hook(rec)

    if target.name in RENDER_TARGETS:  # keep figures of the first and the last render for the check
        from genesis_core.render import camera as camera_mod

        cam_cls = next(v for k, v in vars(camera_mod).items() if k == "Camera")
        render = cam_cls.render

        def _render(self, *args, **kwargs):
            out = render(self, *args, **kwargs)
            images = out if isinstance(out, tuple) else (out,)
            n = rec.extra.get("render", {}).get("n", 0) + 1
            if images[0] is not None:
                a = np_(images[0])
                rec.extra["render"] = {"rgb_shape": list(a.shape), "rgb_std": float(a.std()), "n": n}
                if len(images) > 1 and images[1] is not None:
                    d = np_(images[1])
                    h, w = d.shape[-2:]
                    rec.extra["render"]["depth_centre"] = float(d[..., h // 2 - 1:h // 2 + 1, w // 2 - 1:w // 2 + 1]
                                                                .mean())
                if "first_render" not in rec.extra:
                    first = {"shapes": [list(np_(x).shape) for x in images if x is not None]}
                    if len(images) > 2 and images[2] is not None:
                        first["n_segments"] = int(len(np.unique(np_(images[2]))))
                    if "depth_centre" in rec.extra["render"]:
                        first["depth_centre"] = round(rec.extra["render"]["depth_centre"], 4)
                    rec.extra["first_render"] = first
            return out

        cam_cls.render = _render

    if target.name == "differentiable_push":  # the loss and the gradients live in main(): read them from there
        import torch

        backward = torch.Tensor.backward

        def _backward(self, *args, **kwargs):
            rec.extra["loss"] = float(self.detach().cpu().reshape(-1)[0])
            out = backward(self, *args, **kwargs)
            frame = sys._getframe(1)
            v_list = frame.f_locals.get("v_list")
            if v_list:
                g = [v.grad for v in v_list]
                rec.extra["grads"] = {
                    "finite": all(x is not None and bool(torch.isfinite(x).all()) for x in g),
                    "nonzero": any(x is not None and bool((x != 0).any()) for x in g),
                    "norm": float(sum(float(x.norm()) for x in g if x is not None)),
                }
            return out

        torch.Tensor.backward = _backward


def _engine_call_line(exc, script):
    """The line of `script` that made the call that raised `exc`, where that line calls the engine (`gs.`), else
    None."""
    import linecache

    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == script:
            line = linecache.getline(script, tb.tb_lineno).strip()
        tb = tb.tb_next
    return line if line and re.search(r"\bgs\.|\.add_entity\(|\.add_camera\(|\.build\(", line) else None


def _missing_feature(exc, script=None):
    """The name of the missing feature when `exc` says the engine (or an optional package) lacks one, else None."""
    if isinstance(exc, TypeError) and script is not None:
        m = re.search(r"([\w.]+)\(\) got an unexpected keyword argument '(\w+)'", str(exc))
        if m and _engine_call_line(exc, script):
            return f"keyword {m.group(2)}= of {m.group(1).replace('.__init__', '')}"
    if isinstance(exc, ModuleNotFoundError):
        return f"Python package {exc.name!r} not installed"
    if isinstance(exc, NotImplementedError):
        return f"not implemented: {exc}"
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        is_module = isinstance(obj, type(sys))
        mod = getattr(obj, "__name__", "") if is_module else type(obj).__module__
        if obj is not None and str(mod).split(".")[0] in {"genesis_core", "genesis_rigid", "genesis_mpm",
                                                          "genesis_sph", "genesis_pbd", "genesis_fem"}:
            owner = obj.__name__ if isinstance(obj, type(sys)) else type(obj).__name__
            return f"{owner}.{exc.name}"
    return None


def _join_script_threads(script, timeout=DEFAULT_TIMEOUT):
    """Wait for the threads the script started itself (render_async steps its scene in one), as the interpreter
    would before exiting: the check reads the scene after them."""
    import threading

    for th in threading.enumerate():
        code = getattr(getattr(th, "_target", None), "__code__", None)
        if th is not threading.current_thread() and not th.daemon and code is not None \
                and code.co_filename == script:
            th.join(timeout)


def child(script, target_name, out_path):
    target = TARGETS_BY_NAME[target_name]
    script_dir = os.path.dirname(script)
    rec = Recorder(script_dir)
    result = {"name": target_name}
    t0 = time.perf_counter()
    try:
        sys.path.insert(0, script_dir)
        sys.argv = [script]
        import runpy

        _install_harness(rec, target)
        rec.ns = runpy.run_path(script, run_name="__main__")
        _join_script_threads(script)
        if target.driver is not None:
            target.driver(rec.ns, rec)
    except SystemExit as e:
        if e.code not in (None, 0):
            result.update(status="ERROR", detail=f"SystemExit({e.code})")
    except BaseException as e:  # noqa: BLE001 - every failure of the script is reported
        traceback.print_exc()
        missing = _missing_feature(e, script)
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        if missing:
            result.update(status="SKIP", detail=f"missing: {missing} ({last})")
        else:
            result.update(status="ERROR", detail=last)
    result["run_s"] = round(time.perf_counter() - t0, 1)
    if "status" not in result and target.check is None:
        result.update(status="SKIP", detail=f"ran, but has no check: it needs {target.needs}")
    if "status" not in result:
        try:
            ok, figures = target.check(rec)
            result.update(status="PASS" if ok else "FAIL", detail=str(figures))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            result.update(status="FAIL", detail="check could not read the scene: "
                                                + traceback.format_exception_only(type(e), e)[-1].strip())
    with open(out_path, "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (Taichi's can be slow or noisy); the result is written


# ---------------------------------------------------------------------------------------------------------------
# the parent: one fresh process per script


def find_examples(arg=None):
    """The examples folder: the argument, $GENESIS_EXAMPLES_DIR, or ../Genesis/examples beside the repository."""
    for cand in (arg, os.environ.get(EXAMPLES_ENV), os.path.join(os.path.dirname(REPO), "Genesis", "examples")):
        if cand and os.path.isfile(os.path.join(cand, "tutorials", "hello_genesis.py")):
            return os.path.abspath(cand)
    return None


def _env(examples):
    env = dict(os.environ)
    try:
        import pytest

        env.setdefault("PYTEST_VERSION", pytest.__version__)
    except ImportError:
        env.setdefault("PYTEST_VERSION", "8.0.0")
    env["PYNPUT_BACKEND"] = "dummy"
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("GENESIS_CORE_PROGRESS", "0")
    assets = os.path.join(os.path.dirname(examples), "genesis", "assets")
    if os.path.isdir(assets):
        env["GENESIS_CORE_ASSETS"] = os.pathsep.join(p for p in (env.get("GENESIS_CORE_ASSETS"), assets) if p)
    # the script runs from a temporary folder: relative entries (plugins/rigid) are made absolute here, or the
    # child would import whatever installed copy of those packages it finds instead
    paths = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([REPO] + paths)
    return env


def run_one(examples, name, timeout=DEFAULT_TIMEOUT, log_dir=None, try_needs=False):
    """Run one target script; returns {"name", "status", "detail", "wall_s"}. A target marked `needs` is not run
    (SKIP with what it needs) unless try_needs."""
    target = TARGETS_BY_NAME[name]
    if target.needs and not try_needs:
        return {"name": name, "status": "SKIP", "detail": f"needs {target.needs}", "wall_s": 0.0}
    src = os.path.join(examples, name + ".py")
    if not os.path.isfile(src):
        return {"name": name, "status": "ERROR", "detail": f"no such script: {src}", "wall_s": 0.0}
    work = tempfile.mkdtemp(prefix="gs_example_")
    try:
        script = os.path.join(work, os.path.basename(src))
        for fname in (os.path.basename(src),) + tuple(target.extra_files):
            with open(os.path.join(os.path.dirname(src), fname)) as f:
                text = rewrite(f.read(), target.keep_viewer)
            with open(os.path.join(work, fname), "w") as f:
                f.write(text)
        out_path = os.path.join(work, "result.json")
        cwd = os.path.join(work, target.subdir)
        os.makedirs(cwd, exist_ok=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--_child", script, name, out_path]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=_env(examples), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
            timed_out = True
        wall = round(time.perf_counter() - t0, 1)
        log = log.decode(errors="replace")
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)
            with open(os.path.join(log_dir, name.replace("/", "__") + ".log"), "w") as f:
                f.write(log)
        if timed_out:
            return {"name": name, "status": "ERROR", "detail": f"timed out after {timeout} s", "wall_s": wall}
        if not os.path.isfile(out_path):
            tail = [ln for ln in log.strip().splitlines() if ln.strip()][-1:] or [f"exit code {proc.returncode}"]
            return {"name": name, "status": "ERROR", "detail": f"crashed: {tail[0]}", "wall_s": wall}
        with open(out_path) as f:
            result = json.load(f)
        result["wall_s"] = wall
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_child"]:
        return child(*argv[1:4])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", help=f"Genesis World's examples folder (default: ${EXAMPLES_ENV}, or "
                                      "../Genesis/examples beside this repository)")
    p.add_argument("--only", action="append", help="run only this script (e.g. rigid/franka_cube); repeatable")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per script (default 600)")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--logs", help="write each script's output to this folder")
    p.add_argument("--try-needs", action="store_true",
                   help="run the scripts marked with what they need too (by default they are reported as SKIP)")
    p.add_argument("--list", action="store_true", help="list the targets, and what those that are not run need")
    args = p.parse_args(argv)
    if args.list:
        for t in TARGETS:
            print(t.name + (f"  [needs {t.needs}]" if t.needs else ""))
        return 0
    examples = find_examples(args.examples)
    if examples is None:
        p.error(f"no Genesis World examples folder found: pass --examples DIR or set ${EXAMPLES_ENV}")
    names = [t.name for t in TARGETS]
    if args.only:
        unknown = [n for n in args.only if n not in TARGETS_BY_NAME]
        if unknown:
            p.error(f"unknown script(s) {unknown}; known: {names}")
        names = [n for n in names if n in args.only]
    results = []
    for name in names:
        r = run_one(examples, name, timeout=args.timeout, log_dir=args.logs, try_needs=args.try_needs)
        results.append(r)
        print(f"{r['status']:5s} {name} ({r['wall_s']} s): {r.get('detail', '')}", flush=True)
    n_pass = sum(r["status"] == "PASS" for r in results)
    n_needs = sum(r["status"] == "SKIP" and str(r.get("detail", "")).startswith("needs ") for r in results)
    print(f"{n_pass}/{len(results)} passed ("
          + ", ".join(f"{sum(r['status'] == s for r in results)} {s}" for s in ("FAIL", "ERROR", "SKIP"))
          + f"; {n_needs} of the SKIPs not run: marked with what they need)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"examples": examples, "results": results, "passed": n_pass, "total": len(results)}, f,
                      indent=1)
    return 0


def check_advanced_hybrid_robot(rec):
    """The hybrid arm's hinges turn with the script's velocity commands, and every skin particle keeps to its
    shell: outside its link's box by at most a particle spacing, within the hybrid's thickness plus 3 mm of it."""
    scene = only_scene(rec)
    robot = rec.ns["robot"]
    v, cmd = np_(robot.get_dofs_velocity()), np.sin(2 * np.pi * (scene.t - 1) * 0.001)
    x, group = np_(robot.part_soft.get_particles_pos()), np_(robot.part_soft.get_muscle_group())
    links = [link for link in robot.part_rigid.links if link.geoms]
    spacing, thickness, lo, hi = scene.mpm_solver.particle_size, robot.material.thickness, np.inf, -np.inf
    for k, link in enumerate(links):
        geom = link.geoms[0]
        R = np_(gs_utils_quat_to_R(rec, geom.get_quat()))
        q = np.abs((x[group == k] - np_(geom.get_pos())) @ R) - np_(geom.size)
        d = np.linalg.norm(np.maximum(q, 0), axis=-1) + np.minimum(q.max(-1), 0)
        lo, hi = min(lo, d.min()), max(hi, d.max())
    ok = bool(np.all(v > 0) and np.all(v <= cmd + 1e-9) and lo > -spacing and hi < thickness + 3e-3)
    return ok, (f"{scene.t} steps; hinge velocities {fmt(v, 4)} rad/s for a command of {cmd:.4f}; {len(x)} skin "
                f"particles on {len(links)} links, {lo * 1e3:.1f} to {hi * 1e3:.1f} mm from their link's box "
                f"(thickness {thickness * 1e3:.0f} mm)")


def gs_utils_quat_to_R(rec, quat):
    return rec.ns["gs"].utils.geom.quat_to_R(quat.double())


TARGETS.append(Target("tutorials/advanced_hybrid_robot", check_advanced_hybrid_robot,
                      what="a two-link arm with an MPM skin (gs.materials.Hybrid): its hinges turn with the velocity "
                           "commands, every skin particle stays in the shell of `thickness` around its link's box"))
TARGETS_BY_NAME[TARGETS[-1].name] = TARGETS[-1]


if __name__ == "__main__":
    sys.exit(main())
