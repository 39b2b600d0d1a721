"""Physics of the genesis_springs example solver (examples/custom_solver) against analytic results.

The solver integrates every node with semi-implicit (symplectic) Euler at the substep h = dt / substeps:
v' = v + h F(x, v) / m, then x' = x + h v'. Tolerances below follow from that scheme: its fixed points are exactly
the zeros of the force (static equilibria come out to round-off); under a constant force it follows a closed
form (the exact parabola plus an O(h) offset) to round-off; it is first order in h for trajectories and energy;
and for a linear oscillator its frequency error is only (omega h)^2 / 24 because the scheme is symplectic.
"""

import math

import pytest
import torch

import genesis_core as gs

G = 9.81


def _scene(dt, substeps, gravity=(0.0, 0.0, -G)):
    return gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity))


def _vertical_chain(scene, height=1.0, top_z=2.0, **material):
    """A chain laid straight down from (0, 0, top_z) over `height`."""
    return scene.add_entity(gs.morphs.Cylinder(pos=(0.0, 0.0, top_z - height / 2), height=height, radius=0.01),
                            material=gs.materials.SpringChain(**material))


def _zero_crossings(t, y):
    """Times where y changes sign, by linear interpolation between samples."""
    out = []
    for i in range(len(y) - 1):
        if y[i] == 0.0 or (y[i] < 0.0) != (y[i + 1] < 0.0):
            out.append(t[i] + (t[i + 1] - t[i]) * y[i] / (y[i] - y[i + 1]))
    return out


def _chain_energy(chain, mass, k, rest, g):
    """Kinetic + gravitational + spring energy of a chain (every node has mass `mass`; the anchored top node,
    pinned and at rest, contributes a constant that is dropped)."""
    x, v = chain.get_nodes_pos(), chain.get_nodes_vel()
    free = slice(1, None) if chain.material.anchored else slice(None)
    kinetic = 0.5 * mass * (v[free] ** 2).sum()
    gravity = -mass * (x[free] @ torch.as_tensor(g, dtype=x.dtype)).sum()
    stretch = (x[1:] - x[:-1]).norm(dim=-1) - rest
    return float(kinetic + gravity + 0.5 * k * (stretch ** 2).sum())


def _chain_power(chain, mass, k, rest, g):
    """sum_i v_i . F_i of the conservative forces (gravity + springs) on the free nodes: dE/dt of the exact flow."""
    x, v = chain.get_nodes_pos(), chain.get_nodes_vel()
    force = mass * torch.as_tensor(g, dtype=x.dtype).expand_as(x).clone()
    d = x[1:] - x[:-1]
    length = d.norm(dim=-1, keepdim=True)
    tension = k * (length - rest) * d / length
    force[:-1] += tension
    force[1:] -= tension
    if chain.material.anchored:
        force[0] = 0.0
    return float((v * force).sum())


def test_single_spring_period_and_equilibrium():
    """A mass on an anchored spring (n_nodes=2) hanging under gravity.

    Physics: the free node has m = mass / 2; its static extension is m g / k and small vertical oscillations about
    that equilibrium have period 2 pi sqrt(m / k) (the motion is along the spring, so it is exactly linear).

    Tolerances. The equilibrium is a fixed point of the integrator (v' = v + h (m g - k e) / m is stationary at
    e = m g / k), so a node put there stays there to round-off (1e-12 m). The period of semi-implicit Euler on a
    linear oscillator is exact up to omega_d = (2 / h) asin(omega h / 2), a relative error (omega h)^2 / 24 = 4e-6
    here (omega h = 0.01); the zero crossings are interpolated linearly between samples of dt = 0.01 s, which
    is exact to O((omega dt)^3) ~ 1e-3 of a sample at a zero of a sinusoid. Both are far inside the 0.5% asked of
    the period; the half periods between successive crossings of z - z_eq must also agree (an equilibrium off by
    delta makes them alternate by ~ 4 delta / (A omega)) to 1e-3 of a period.
    """
    mass, k, height, top_z = 2.0, 100.0, 1.0, 2.0
    m = mass / 2
    omega = math.sqrt(k / m)
    period = 2 * math.pi / omega
    dt, substeps = 1e-2, 10
    h = dt / substeps
    z_eq = top_z - height - m * G / k

    # The analytic equilibrium is a fixed point.
    scene = _scene(dt, substeps)
    spring = _vertical_chain(scene, height=height, top_z=top_z, n_nodes=2, mass=mass, stiffness=k)
    scene.build()
    spring.set_nodes_pos(torch.tensor([[0.0, 0.0, top_z], [0.0, 0.0, z_eq]], dtype=torch.float64))
    for _ in range(20):
        scene.step()
    z = spring.get_nodes_pos()[1, 2].item()
    assert abs((top_z - height - z) - m * G / k) < 1e-12
    assert abs(spring.get_nodes_vel()[1, 2].item()) < 1e-10

    # Small oscillation about it.
    amplitude = 0.01
    scene = _scene(dt, substeps)
    spring = _vertical_chain(scene, height=height, top_z=top_z, n_nodes=2, mass=mass, stiffness=k)
    scene.build()
    spring.set_nodes_pos(torch.tensor([[0.0, 0.0, top_z], [0.0, 0.0, z_eq + amplitude]], dtype=torch.float64))
    n_steps = int(round(4.25 * period / dt))
    t, y = [0.0], [amplitude]
    for i in range(n_steps):
        scene.step()
        t.append((i + 1) * dt)
        y.append(spring.get_nodes_pos()[1, 2].item() - z_eq)
    xy = spring.get_nodes_pos()[1, :2]
    assert torch.all(xy == 0.0), "a vertical spring must stay vertical"

    crossings = _zero_crossings(t, y)
    assert len(crossings) >= 8
    halves = [b - a for a, b in zip(crossings, crossings[1:])]
    measured = 2 * (crossings[-1] - crossings[0]) / len(halves)
    assert abs(measured - period) / period < 5e-3
    discrete = 2 * math.pi / ((2 / h) * math.asin(omega * h / 2))
    assert abs(measured - discrete) / period < 1e-4
    assert max(halves) - min(halves) < 1e-3 * period
    # The oscillation stays centred on the analytic equilibrium: its extremes are +-amplitude.
    assert abs(max(y) + min(y)) < 1e-3 * amplitude + amplitude * (omega * dt) ** 2 / 8


def test_hanging_chain_static_equilibrium():
    """A damped anchored chain released from its rest length settles to the static equilibrium.

    Physics: with n nodes of mass m = mass / n, segment i (between nodes i and i + 1) carries the weight of the
    n - 1 - i nodes below it, so its extension is (n - 1 - i) m g / k, and every node hangs straight below the
    anchor.

    Tolerances. The equilibrium is an exact fixed point of the integrator, so the only error is what is left of
    the transient. Drag d = 16 / s is about critical for the slowest mode (7.8 rad/s; 2 omega = 15.6 / s), and
    with the segment dashpots that mode is slightly overdamped and decays as ~e^(-5.6 t), every faster one at
    least as fast; after 4 s the 0.2 m drop of the bottom node has settled to ~3e-11 m. The asserted 1e-9 m
    (1e-7 of the smallest extension) leaves a 30x margin on that and still catches any error of the physics,
    which would be of the order of the extensions (1e-2 m).
    """
    n, mass, k, height, top_z = 5, 1.0, 100.0, 1.0, 2.0
    m = mass / n
    dt, substeps = 2e-2, 10
    scene = _scene(dt, substeps)
    chain = _vertical_chain(scene, height=height, top_z=top_z, n_nodes=n, mass=mass, stiffness=k, damping=0.5,
                            drag=16.0)
    scene.build()
    assert dt / substeps < scene.spring_chain_solver.stable_dt()
    for _ in range(int(4.0 / dt)):
        scene.step()

    x = chain.get_nodes_pos()
    assert torch.all(x[:, :2].abs() < 1e-12), "the chain hangs straight below its anchor"
    assert x[0].tolist() == [0.0, 0.0, top_z]
    extension = (x[:-1, 2] - x[1:, 2]) - height / (n - 1)
    expected = torch.tensor([(n - 1 - i) * m * G / k for i in range(n - 1)], dtype=torch.float64)
    assert torch.allclose(extension, expected, rtol=0.0, atol=1e-9), (extension, expected)
    assert chain.get_nodes_vel().abs().max() < 1e-8


def test_free_chain_free_fall_is_discrete_euler():
    """An unanchored chain at rest length, thrown sideways, falls freely without deforming.

    Physics: the springs are unstretched and all nodes get the same acceleration, so internal forces vanish and
    the centre of mass follows free fall. Semi-implicit Euler integrates a constant acceleration as
    v_n = v_0 - g h n, z_n = z_0 - g h^2 n (n + 1) / 2 (the continuous g t^2 / 2 plus an O(h) offset g h t / 2),
    and x_n = x_0 + v_x h n.

    Tolerances. The discrete formula is what the integrator computes, so only round-off separates them: ~1e-16
    relative per operation accumulating over 800 substeps, asserted at 1e-12 relative to the distance fallen.
    The spring lengths stay at rest length to the same round-off (1e-12 m); they would change at first order
    in h if the springs carried any force.
    """
    n, mass, k, height = 6, 1.2, 500.0, 0.5
    dt, substeps, n_steps = 1e-2, 8, 100
    h = dt / substeps
    vx = 0.7
    scene = _scene(dt, substeps)
    chain = scene.add_entity(gs.morphs.Capsule(pos=(0.0, 0.0, 3.0), height=height, radius=0.01, euler=(0, 90, 0)),
                             material=gs.materials.SpringChain(n_nodes=n, mass=mass, stiffness=k, anchored=False))
    scene.build()
    x0 = chain.get_nodes_pos()
    chain.set_nodes_vel(torch.tensor([vx, 0.0, 0.0], dtype=torch.float64))
    com0 = chain.get_pos()
    rest = height / (n - 1)
    assert torch.allclose((x0[1:] - x0[:-1]).norm(dim=-1), torch.full((n - 1,), rest, dtype=torch.float64),
                          rtol=0, atol=1e-14)

    for step in range(1, n_steps + 1):
        scene.step()
        if step % 25:
            continue
        ns = step * substeps
        fall = G * h * h * ns * (ns + 1) / 2
        com = chain.get_pos()
        assert abs(com[2].item() - (com0[2].item() - fall)) < 1e-12 * fall
        assert abs(com[0].item() - (com0[0].item() + vx * h * ns)) < 1e-12 * vx * h * ns
        assert abs(com[1].item()) < 1e-14
        vel = chain.get_nodes_vel()
        expected_v = torch.tensor([vx, 0.0, -G * h * ns], dtype=torch.float64).expand(n, 3)
        assert torch.allclose(vel, expected_v, rtol=1e-12, atol=1e-14)
        x = chain.get_nodes_pos()
        lengths = (x[1:] - x[:-1]).norm(dim=-1)
        assert (lengths - rest).abs().max() < 1e-12
        assert torch.allclose(x - com, x0 - com0, rtol=0, atol=1e-12), "the chain's shape is preserved"


def _energy_run(h, t_end, n=4, mass=0.8, k=200.0, height=0.6):
    """An undamped anchored chain released from rest, horizontal at its rest length (large nonlinear swings).
    Returns, per step and divided by the energy scale m g height, E - E_0 and the power P = sum v.F."""
    substeps = 10
    dt = h * substeps
    scene = _scene(dt, substeps)
    chain = scene.add_entity(gs.morphs.Cylinder(pos=(0.0, 0.0, 2.0), height=height, radius=0.01, euler=(0, 90, 0)),
                             material=gs.materials.SpringChain(n_nodes=n, mass=mass, stiffness=k))
    scene.build()
    m, rest, g = mass / n, height / (n - 1), (0.0, 0.0, -G)
    e0 = _chain_energy(chain, m, k, rest, g)
    energies, powers = [], []
    for _ in range(int(round(t_end / dt))):
        scene.step()
        energies.append(_chain_energy(chain, m, k, rest, g) - e0)
        powers.append(_chain_power(chain, m, k, rest, g))
    scale = m * G * height
    return torch.tensor(energies, dtype=torch.float64) / scale, torch.tensor(powers, dtype=torch.float64) / scale


def test_undamped_energy_error_is_first_order_and_bounded():
    """Total energy (kinetic + gravitational + spring) of an undamped swinging chain.

    Physics: without damping or drag the exact flow conserves energy E. Semi-implicit Euler (v first, then x
    with the new v) is symplectic of order one: it exactly conserves a modified energy
    E_h = E + (h / 2) P + O(h^2), P = sum v.F the power of the conservative forces (for a linear oscillator
    E_h = E + (h / 2) P is conserved exactly). So E itself oscillates within (h / 2) max|P| of E_0 (P = 0 at
    release), with no secular drift.

    Tolerances. |E - E_0| is asserted below h max|P|, the leading-order bound with a factor 2 for the O(h^2)
    rest; halving h must roughly halve it (ratio in [1.6, 2.5] around the first-order 2). The absence of drift is
    checked on E_h: its deviation is second order, so it must be at least 5x smaller than that of E and shrink
    about 4x (asserted > 3x) when h halves; a secular drift of the scheme (error growing like h t) would show
    up there at first order and break both.
    """
    t_end = 1.6
    dev_e, dev_mod = {}, {}
    for h in (1e-3, 5e-4):
        de, power = _energy_run(h, t_end)
        pmax = power.abs().max().item()
        dev_e[h] = de.abs().max().item()
        dev_mod[h] = (de + 0.5 * h * power).abs().max().item()
        assert dev_e[h] < h * pmax, (h, dev_e[h], h * pmax)
        assert dev_mod[h] < 0.2 * dev_e[h], (h, dev_mod[h], dev_e[h])
    assert 1.6 < dev_e[1e-3] / dev_e[5e-4] < 2.5, dev_e
    assert dev_mod[1e-3] / dev_mod[5e-4] > 3.0, dev_mod


def test_batched_envs_equal_unbatched_runs():
    """Batching does not change the physics: every environment of an n_envs=4 scene, given its own initial
    velocities and anchor, evolves bitwise like the same scene built with n_envs=0.

    Tolerance: exact equality (torch.equal). Each (environment, node) pair runs the same floating-point
    operations in the same order whatever the batch size, and the kernel has no cross-environment reductions or
    atomics, so any difference at all would be a bug.
    """
    def build(n_envs):
        scene = _scene(1e-2, 4)
        hanging = _vertical_chain(scene, height=0.8, top_z=2.0, n_nodes=5, mass=0.5, stiffness=300.0, damping=0.2,
                                  drag=0.1)
        free = scene.add_entity(gs.morphs.Capsule(pos=(1.0, 0.0, 2.0), height=0.5, radius=0.01, euler=(0, 60, 0)),
                                material=gs.materials.SpringChain(n_nodes=3, mass=0.3, stiffness=200.0, anchored=False))
        scene.build(n_envs=n_envs)
        return scene, hanging, free

    gen = torch.Generator().manual_seed(3)
    n_envs = 4
    vel_h = torch.randn(n_envs, 5, 3, generator=gen, dtype=torch.float64)
    vel_f = torch.randn(n_envs, 3, 3, generator=gen, dtype=torch.float64)
    anchors = torch.tensor([[0.0, 0.0, 2.0]], dtype=torch.float64) + 0.1 * torch.randn(n_envs, 3, generator=gen,
                                                                                         dtype=torch.float64)
    n_steps = 60

    scene, hanging, free = build(n_envs)
    for b in range(n_envs):
        hanging.set_nodes_vel(vel_h[b:b + 1], envs_idx=[b])
        free.set_nodes_vel(vel_f[b:b + 1], envs_idx=[b])
        hanging.set_anchor(anchors[b:b + 1], envs_idx=[b])
    for _ in range(n_steps):
        scene.step()
    batched = [hanging.get_nodes_pos(), hanging.get_nodes_vel(), free.get_nodes_pos(), free.get_nodes_vel()]
    assert all(x.shape[0] == n_envs for x in batched)
    assert not torch.equal(batched[0][0], batched[0][1])

    for b in range(n_envs):
        scene, hanging, free = build(0)
        hanging.set_nodes_vel(vel_h[b])
        free.set_nodes_vel(vel_f[b])
        hanging.set_anchor(anchors[b])
        for _ in range(n_steps):
            scene.step()
        single = [hanging.get_nodes_pos(), hanging.get_nodes_vel(), free.get_nodes_pos(), free.get_nodes_vel()]
        for x_batched, x_single in zip(batched, single):
            assert torch.equal(x_batched[b], x_single), b


def test_linear_drag_terminal_velocity():
    """A free chain with linear drag d (force -d m v on each node) falling from rest reaches terminal velocity
    g / d.

    Physics: with unstretched springs every node obeys dv/dt = -g - d v, so v(t) = -(g / d)(1 - e^(-d t)).
    Semi-implicit Euler gives v_n = -(g / d)(1 - (1 - h d)^n), which has the same fixed point g / d.

    Tolerances. After d t = 6 the exact approach leaves e^-6 = 0.25% (and the discrete (1 - h d)^n is smaller
    still), inside the 1% asked; the discrete formula itself is matched to round-off (1e-12 relative), and
    the continuous one to first order in h: |v_n - v(t_n)| <= (g / d) (h d)(d t) e^(-d t) / 2 ~ 3e-5 g / d.
    """
    d, dt, substeps = 2.0, 1e-2, 5
    h = dt / substeps
    t_end = 3.0
    scene = _scene(dt, substeps)
    chain = scene.add_entity(gs.morphs.Capsule(pos=(0.0, 0.0, 50.0), height=0.4, radius=0.01, euler=(0, 90, 0)),
                             material=gs.materials.SpringChain(n_nodes=4, mass=1.0, stiffness=300.0, drag=d,
                                                               anchored=False))
    scene.build()
    n_steps = int(round(t_end / dt))
    for _ in range(n_steps):
        scene.step()
    v = chain.get_nodes_vel()
    terminal = G / d
    ns = n_steps * substeps
    discrete = -terminal * (1 - (1 - h * d) ** ns)
    continuous = -terminal * (1 - math.exp(-d * t_end))
    assert torch.allclose(v[:, 2], torch.full((4,), discrete, dtype=torch.float64), rtol=1e-12, atol=0)
    assert torch.all(v[:, :2].abs() < 1e-14)
    assert abs(v[:, 2].mean().item() + terminal) < 1e-2 * terminal
    assert abs(discrete - continuous) < 0.5 * h * d * d * t_end * math.exp(-d * t_end) * terminal + 1e-12


def test_error_cases():
    """Invalid set-ups fail early with an OptionError that says what was expected."""
    scene = _scene(1e-2, 1)
    with pytest.raises(gs.OptionError, match="Cylinder or Capsule"):
        scene.add_entity(gs.morphs.Box(pos=(0, 0, 1)), material=gs.materials.SpringChain())
    with pytest.raises(gs.OptionError, match="n_nodes"):
        gs.materials.SpringChain(n_nodes=1)

    scene = _scene(1e-2, 1)
    free = scene.add_entity(gs.morphs.Capsule(pos=(0, 0, 1), height=0.5, radius=0.01),
                            material=gs.materials.SpringChain(n_nodes=4, anchored=False))
    scene.build(n_envs=2)
    with pytest.raises(gs.OptionError, match="anchored=False"):
        free.set_anchor(torch.zeros(2, 3, dtype=torch.float64))
    before = free.get_nodes_pos()
    with pytest.raises(gs.OptionError, match=r"set_nodes_pos.*\(2, 4, 3\)"):
        free.set_nodes_pos(torch.zeros(2, 5, 3, dtype=torch.float64))
    with pytest.raises(gs.OptionError, match=r"set_nodes_pos.*\(1, 4, 3\)"):
        free.set_nodes_pos(torch.zeros(3, 3, dtype=torch.float64), envs_idx=[1])
    assert torch.equal(free.get_nodes_pos(), before), "a rejected value writes nothing"
