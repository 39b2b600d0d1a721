"""The contact pool: warm starts matched by key, keys and impulses as declared state, memory sized by
max_contacts and not by the candidate pairs."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_rigid.kernels_collision import CI_ACTIVE, CI_KEY, CI_META, CI_PREV, KEY_SPAN


def rigid(state):
    """The rigid solver's part of a SimState."""
    return next(s for s in state.solvers_state if s is not None and hasattr(s, "contact_key"))


def pile(n_boxes, n_envs=2, **rigid):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3), rigid_options=gs.options.RigidOptions(**rigid))
    scene.add_entity(gs.morphs.Plane())
    rng = np.random.default_rng(n_boxes)
    for i in range(n_boxes):
        pos = (0.12 * (i % 3) + rng.uniform(-0.02, 0.02), 0.12 * ((i // 3) % 3), 0.05 + 0.11 * (i // 9))
        if i % 4 == 3:
            scene.add_entity(gs.morphs.Sphere(radius=0.05, pos=pos))
        else:
            scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1), pos=pos, euler=(0, 0, 20 * i)))
    scene.build(n_envs=n_envs)
    return scene


def test_warm_starts_are_matched_by_key():
    """Each step: the pool entry that names an entry of the last substep (CI_PREV) has that entry's key; an entry
    that names none has a key the last substep did not have; keys are unique per environment; the keys and the
    impulses of the new frame are the pool's, and idle entries are -1 and 0; the matching's table is left empty
    (it is cleared along the keys' probe runs, not row by row)."""
    scene = pile(10)
    solver = scene.rigid_solver
    matched = 0
    for step in range(40):
        before = rigid(scene.get_state()).contact_key.clone()
        scene.step()
        after = rigid(scene.get_state())
        con_i = solver.scratch["s_con_i"]
        for b in range(2):
            n = int(con_i[b, CI_META, 0])
            keys = con_i[b, CI_KEY, :n].long()
            assert bool((con_i[b, CI_ACTIVE, :n] == 1).all()) and len(set(keys.tolist())) == n
            old = before[b].long()
            for i in range(n):
                prev = int(con_i[b, CI_PREV, i])
                if prev >= 0:
                    assert int(old[prev]) == int(keys[i])
                    matched += 1
                else:
                    assert int(keys[i]) not in set(old.tolist())
            assert torch.equal(after.contact_key[b, :n].long(), keys)
            assert bool((after.contact_key[b, n:] == -1).all())
            assert bool((after.contact_impulse[b, n:] == 0).all())
            assert bool((keys // KEY_SPAN < solver.n_pairs).all())
        assert bool((solver.scratch["s_hash"].to_numpy() == -1).all())
    assert matched > 200  # resting contacts keep their warm start from step to step


def test_contact_memory_is_sized_by_max_contacts_not_by_pairs():
    """10 and 30 bodies on a plane (55 and 465 candidate pairs): with the same max_contacts, the contact state and the
    constraint stage's arrays per environment have the same size."""
    small, large = pile(10, max_contacts=96), pile(30, max_contacts=96)
    assert (small.rigid_solver.n_pairs, large.rigid_solver.n_pairs) == (55, 465)
    a, b = small.rigid_solver.memory_per_env(), large.rigid_solver.memory_per_env()
    for name in ("contact_impulse", "contact_key", "s_con_f", "s_con_i", "s_hash", "s_J", "s_W", "s_row_f",
                 "s_row_i"):
        assert a[name] == b[name], name
    assert rigid(small.get_state()).contact_impulse.shape == (2, 96, 3)


def test_a_restored_state_resumes_its_warm_starts_bitwise():
    """reset(state) restores the keys with the impulses: the run continues bitwise."""
    scene = pile(10)
    for _ in range(20):
        scene.step()
    state = scene.get_state()
    for _ in range(10):
        scene.step()
    ref = scene.get_state()
    scene.reset(state=state)
    for _ in range(10):
        scene.step()
    out = scene.get_state()
    for key in ("qpos", "contact_impulse", "contact_key"):
        assert torch.equal(getattr(rigid(out), key), getattr(rigid(ref), key)), key


def test_keys_from_a_state_are_validated():
    scene = pile(4, n_envs=1)
    state = scene.get_state()
    rigid(state).contact_key[0] = -7
    with pytest.raises(gs.InvalidStateError, match="contact_key"):
        scene.reset(state=state)


def test_keys_must_be_compact():
    """The pool's entries in use come first (the warm-start matching stops at the first -1): a state with a key
    after a -1 is refused, naming that entry as the fields' own rules name theirs, and nothing changes (a state
    passed to reset becomes the initial state, so it is checked whole, whatever envs_idx); compacted again, it is
    accepted."""
    scene = pile(6)
    for _ in range(10):
        scene.step()
    state = scene.get_state()
    keys = rigid(state).contact_key
    n = int((keys[1] >= 0).sum())
    assert n >= 2 and bool((keys[1, n:] == -1).all())
    keys[1, 0] = -1  # a hole before the other keys
    for _ in range(3):
        scene.step()
    before = scene.get_state()
    for envs_idx in (None, [0]):
        with pytest.raises(gs.InvalidStateError, match=rf"RigidSolver.contact_key\[env 1, index \[1\]\] = "
                                                       rf"{int(keys[1, 1])} is not accepted: expected -1 after a -1"):
            scene.reset(state=state, envs_idx=envs_idx)
    after = scene.get_state()
    for name in ("contact_key", "contact_impulse", "qpos"):
        assert torch.equal(getattr(rigid(after), name), getattr(rigid(before), name)), name
    keys[1, :n - 1] = keys[1, 1:n].clone()  # compact again: accepted
    keys[1, n - 1] = -1
    scene.reset(state=state)
    assert torch.equal(rigid(scene.get_state()).contact_key, keys)
    scene.step()


def test_one_environment_on_the_serial_kernels_steps_bitwise_as_each_of_a_batch():
    """n_envs=0 runs the kernels' serial copies, a batch here the parallel kernels: the same code, compiled twice
    (both without fast math: launch.exact_math). The environments of a batch end bitwise alike, and bitwise like the one
    environment alone, with the same contacts."""
    single, batch = pile(10, n_envs=0), pile(10, n_envs=2)
    batch.rigid_solver.launch_mode = "parallel"
    assert single.rigid_solver.batch == 1 and batch.rigid_solver.batch == 2
    assert single.rigid_solver.launch_mode == "serial"
    for _ in range(30):
        single.step()
        batch.step()
    one, two = rigid(single.get_state()), rigid(batch.get_state())
    for name in ("qpos", "dofs_vel", "contact_impulse", "contact_key"):
        assert torch.equal(getattr(two, name)[0], getattr(two, name)[1]), name
        assert torch.equal(getattr(two, name)[0], getattr(one, name).reshape(getattr(two, name)[0].shape)), name
