"""RigidEntity.attach: an entity's base hung rigidly on another entity's link before the build (Genesis World's
arm + hand + tool). The reference is the same robot written as one URDF (the hand on the arm's flange by a fixed
joint): the attached pair must move exactly as it does."""

import math
import os
import re

import numpy as np
import pytest
import torch

import genesis_core as gs

HAND_YAW = -45.0  # degrees: the hand's turn on the flange (panda.urdf's panda_hand_joint)
ARM_TARGET = [-1.0, 0.8, 1.0, -2.0, 1.0, 0.5, -0.5]


def one_file(folder, out):
    """panda_nohand.urdf and hand.urdf as one URDF: the hand's links and joints after the arm's, its base on the
    arm's `attachment` link by a fixed joint turned by HAND_YAW."""
    arm = open(os.path.join(folder, "panda_nohand.urdf")).read()
    hand = open(os.path.join(folder, "hand.urdf")).read()
    body = re.search(r"<robot[^>]*>(.*)</robot>", hand, re.S).group(1)
    joint = (f'<joint name="hand_mount" type="fixed"><parent link="attachment"/><child link="hand"/>'
             f'<origin rpy="0 0 {math.radians(HAND_YAW)!r}" xyz="0 0 0"/></joint>')
    text = arm.replace("</robot>", body + joint + "</robot>")
    text = text.replace('filename="package://meshes/', f'filename="{folder}/meshes/')
    with open(out, "w") as fh:
        fh.write(text)
    return str(out)


@pytest.fixture
def panda_folder(shared_assets):
    return os.path.join(shared_assets, "urdf", "panda_bullet")


def attached_scene(folder):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    scene.add_entity(gs.morphs.Plane())
    arm = scene.add_entity(gs.morphs.URDF(file=os.path.join(folder, "panda_nohand.urdf"), fixed=True,
                                          merge_fixed_links=False))
    hand = scene.add_entity(gs.morphs.URDF(file=os.path.join(folder, "hand.urdf"), euler=(0, 0, HAND_YAW),
                                           merge_fixed_links=False))
    tool = scene.add_entity(gs.morphs.Sphere(radius=0.005))
    box = scene.add_entity(gs.morphs.Box(size=(0.02, 0.02, 0.02), pos=(0.3, 0.0, 0.01)))
    return scene, arm, hand, tool, box


def run(scene, arm, hand, steps=30):
    arm.set_dofs_kp([2000.0] * 7, dofs_idx_local=list(range(7)))
    arm.set_dofs_kv([200.0] * 7, dofs_idx_local=list(range(7)))
    arm.control_dofs_position(torch.tensor(ARM_TARGET, dtype=torch.float64), dofs_idx_local=list(range(7)))
    hand.control_dofs_position(torch.tensor([0.04, 0.04], dtype=torch.float64))
    for _ in range(steps):
        scene.step()


def test_attach_hangs_the_hand_on_the_flange_and_moves_as_one_file_does(panda_folder, tmp_path):
    scene, arm, hand, tool, box = attached_scene(panda_folder)
    with pytest.raises(gs.OptionError, match="must be added to the scene before"):
        arm.attach(hand, "right_finger")
    assert hand.n_dofs == 8  # its free base, then two fingers
    hand.attach(arm, "attachment")
    tool.attach(hand, "right_finger")
    with pytest.raises(gs.OptionError, match="already attached"):
        hand.attach(arm, "attachment")
    assert hand.n_dofs == 2 and tool.n_dofs == 0
    flange = arm.get_link("attachment")
    assert hand.base_link.parent_idx == flange.idx and hand.base_link.root_idx == arm.base_link.idx
    # (the flange moves with the arm's joints, so the hand's links do too)
    assert not hand.base_link.is_fixed and arm.base_link.is_fixed and not flange.is_fixed
    scene.build()
    with pytest.raises(gs.SceneError):
        box.attach(hand, "right_finger")
    # the base and the flange it hangs on never collide (parent and child)
    m = scene.rigid_solver.compiled
    pairs = {frozenset((m.geoms[a]["link"], m.geoms[b]["link"])) for a, b in m.arrays["pair_i"][:m.n_pairs, :2]}
    assert pairs  # (the hand's geoms collide with the box and the plane)
    assert frozenset((flange.idx, hand.base_link.idx)) not in pairs
    with pytest.raises(gs.OptionError):
        hand.set_pos(torch.zeros(3, dtype=torch.float64))
    run(scene, arm, hand)
    # the hand's base on the flange, turned by HAND_YAW about its axis; the tool in the finger
    assert torch.allclose(hand.base_link.get_pos(), flange.get_pos(), atol=1e-12)
    turn = gs.utils.geom.transform_quat_by_quat(hand.base_link.get_quat(), gs.utils.geom.inv_quat(flange.get_quat()))
    angle = math.degrees(2 * math.atan2(float(turn[3]), float(turn[0])))
    assert angle == pytest.approx(HAND_YAW, abs=1e-9) and abs(float(turn[1])) + abs(float(turn[2])) < 1e-12
    assert torch.allclose(tool.get_pos(), hand.get_link("right_finger").get_pos(), atol=1e-12)


def test_the_attached_pair_moves_exactly_as_the_same_robot_in_one_file(panda_folder, tmp_path):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    scene.add_entity(gs.morphs.Plane())
    arm = scene.add_entity(gs.morphs.URDF(file=os.path.join(panda_folder, "panda_nohand.urdf"), fixed=True,
                                          merge_fixed_links=False))
    hand = scene.add_entity(gs.morphs.URDF(file=os.path.join(panda_folder, "hand.urdf"), euler=(0, 0, HAND_YAW),
                                           merge_fixed_links=False))
    hand.attach(arm, "attachment")
    scene.build()
    run(scene, arm, hand)
    ref = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    ref.add_entity(gs.morphs.Plane())
    whole = ref.add_entity(gs.morphs.URDF(file=one_file(panda_folder, tmp_path / "panda_hand.urdf"), fixed=True,
                                          merge_fixed_links=False))
    ref.build()
    arm_dofs, finger_dofs = list(range(7)), [7, 8]
    whole.set_dofs_kp([2000.0] * 7, dofs_idx_local=arm_dofs)
    whole.set_dofs_kv([200.0] * 7, dofs_idx_local=arm_dofs)
    whole.control_dofs_position(torch.tensor(ARM_TARGET, dtype=torch.float64), dofs_idx_local=arm_dofs)
    whole.control_dofs_position(torch.tensor([0.04, 0.04], dtype=torch.float64), dofs_idx_local=finger_dofs)
    for _ in range(30):
        ref.step()
    q_attached = torch.cat([arm.get_dofs_position(), hand.get_dofs_position()])
    q_whole = whole.get_dofs_position()
    assert float((q_attached - q_whole).abs().max()) < 1e-9, (q_attached, q_whole)
    assert float((q_whole[:7] - torch.tensor(ARM_TARGET, dtype=torch.float64)).abs().max()) < 0.1  # (it moved)
    for name in ("hand", "left_finger", "right_finger"):
        assert torch.allclose(hand.get_link(name).get_pos(), whole.get_link(name).get_pos(), atol=1e-9)


def test_attach_refuses_what_cannot_be_attached(panda_folder):
    scene, arm, hand, tool, box = attached_scene(panda_folder)
    with pytest.raises(gs.OptionError, match="itself"):
        box.attach(box)
    with pytest.raises(gs.OptionError, match="not a rigid entity"):
        box.attach("arm")
    with pytest.raises(gs.OptionError, match="link"):
        box.attach(arm, "no_such_link")
    n_dofs = box.n_dofs
    assert n_dofs == 6  # (nothing changed by the refusals)
    box.attach(arm)  # None: the parent's last link
    assert box.base_link.parent_idx == arm.links[-1].idx
