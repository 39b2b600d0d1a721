"""Genesis World spellings that its example scripts use: a box given by its corners, the rigid option that asks
for the box-box test this engine always runs, vis_mode in add_entity, gs.init's other keywords."""

import pytest

import genesis_core as gs


def test_box_from_corners_is_the_box_of_pos_and_size():
    box = gs.morphs.Box(lower=(0.2, 0.1, 0.1), upper=(0.4, 0.3, 0.5))
    assert box.pos == pytest.approx((0.3, 0.2, 0.3)) and box.size == pytest.approx((0.2, 0.2, 0.4))
    assert box.lower is None and box.upper is None  # folded into pos and size
    same = gs.morphs.Box(pos=box.pos, size=box.size)
    assert box.as_dict() == same.as_dict()  # the scene (and a checkpoint) sees the same box
    assert "lower" not in same.as_dict() and "upper" not in same.as_dict()
    fixed = gs.morphs.Box(lower=(-1, -1, 0), upper=(1, 1, 0.5), fixed=True, euler=(0, 0, 30))
    assert fixed.fixed and fixed.pos == pytest.approx((0, 0, 0.25)) and fixed.size == pytest.approx((2, 2, 0.5))


@pytest.mark.parametrize("kwargs, match", [
    (dict(lower=(0, 0, 0)), "both lower and upper"),
    (dict(upper=(1, 1, 1)), "both lower and upper"),
    (dict(lower=(0, 0, 0), upper=(1, 0, 1)), "upper must exceed lower"),
    (dict(lower=(0, 0, 0), upper=(1, 1, 1), size=(0.5, 0.5, 0.5)), "not both"),
    (dict(lower=(0, 0, 0), upper=(1, 1, 1), pos=(0, 0, 1)), "not both"),
    (dict(lower=(0, 0), upper=(1, 1, 1)), "lower"),
])
def test_box_corners_are_validated(kwargs, match):
    with pytest.raises(gs.OptionError, match=match):
        gs.morphs.Box(**kwargs)


def test_box_box_detection_true_is_what_the_rigid_solver_always_does():
    pytest.importorskip("genesis_rigid")
    assert gs.options.RigidOptions(box_box_detection=True, dt=0.01) == gs.options.RigidOptions(dt=0.01)
    # (False, Genesis World's default, asks for its general convex test: accepted with no effect, docstring)
    assert gs.options.RigidOptions(box_box_detection=False).as_dict() == gs.options.RigidOptions().as_dict()
    with pytest.raises(gs.OptionError, match="ls_iterations"):  # the other Genesis-only options still say so
        gs.options.RigidOptions(box_box_detection=True, ls_iterations=50)


def test_contacts_of_a_scene_without_envs():
    """get_contacts on a scene built without environments gives the valid contacts only, `(n_contacts, ...)`: a
    1 kg box resting on the plane is held by contacts whose forces on it sum to m g (the per-environment sweep
    counts come along unmasked)."""
    pytest.importorskip("genesis_rigid")
    import torch

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=2))
    plane = scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.049), size=(0.1, 0.1, 0.1)),
                           material=gs.materials.Rigid(rho=1000))
    scene.build()
    for _ in range(50):
        scene.step()
    c = box.get_contacts(with_entity=plane)
    assert "valid_mask" not in c and c["sweeps"].shape == (2,)
    n = c["position"].shape[0]
    assert n >= 3 and all(c[k].shape[0] == n for k in ("geom_a", "geom_b", "link_a", "link_b", "force_a", "force_b"))
    on_box = torch.where((c["link_b"] == box.base_link_idx)[:, None], c["force_b"], c["force_a"])
    assert float(on_box.sum(0)[2]) == pytest.approx(9.81, rel=1e-6)


def test_add_entity_takes_vis_mode_as_the_surface_s():
    """add_entity(vis_mode=...) sets the surface's vis_mode, as in Genesis World (keeping the surface's other
    arguments); an unknown mode is refused."""
    scene = gs.Scene()
    a = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)), vis_mode="collision")
    b = scene.add_entity(gs.morphs.Box(pos=(1, 0, 1), size=(0.1, 0.1, 0.1)),
                         surface=gs.surfaces.Default(color=(1.0, 0.0, 0.0)), vis_mode="collision")
    assert scene.entity_surface(a.idx).options == {"vis_mode": "collision"}
    assert scene.entity_surface(b.idx).options == {"color": (1.0, 0.0, 0.0), "vis_mode": "collision"}
    with pytest.raises(gs.OptionError, match="vis_mode"):
        scene.add_entity(gs.morphs.Box(pos=(2, 0, 1), size=(0.1, 0.1, 0.1)), vis_mode="wireframe")


def test_gs_init_takes_genesis_world_s_other_keywords_and_validates_them():
    """gs.init's eps, theme, logger_verbose_time, performance_mode and use_deterministic_algorithms are accepted
    (checked before the engine's state is looked at: a bad one is refused even when the engine is running)."""
    import inspect

    params = inspect.signature(gs.init).parameters
    for name in ("eps", "theme", "logger_verbose_time", "performance_mode", "use_deterministic_algorithms"):
        assert name in params
    for bad in (dict(performance_mode="yes"), dict(eps=0.0), dict(eps=True), dict(theme=3),
                dict(use_deterministic_algorithms=1)):
        with pytest.raises(gs.GenesisError, match=next(iter(bad))):
            gs.init(backend=gs.cpu, **bad)
