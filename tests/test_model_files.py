"""Model files are a way in like any other: a URDF, MJCF or mesh file the engine cannot simulate is refused at
add_entity with gs.ModelFileError naming the file, the element and the value, and nothing is added; what it
accepts steps without turning non-finite. The hostile files themselves (every numeric attribute of a URDF and an
MJCF model with NaN, inf, negative, zero, huge and tiny values; kinematic graphs that are not trees; chains and
nestings beyond the limits; degenerate and non-finite meshes in OBJ, STL and GLB) run in child processes
(tests/model_file_cases.py), so that a hang or a crash fails a test with the case named."""

import os
import signal
import warnings
import xml.etree.ElementTree as ET
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, strategies as st

import genesis_core as gs

from .model_file_cases import HOSTILE, MJCF, OBJ_TET, URDF, _finite, numeric_attributes
from .test_bad_input import run_cases


@pytest.mark.parametrize("category, precision", [("models_urdf", "64"), ("models_mjcf", "64"), ("models_graphs", "64"),
                                                 ("models_meshes", "64"), ("models_urdf", "32"), ("models_mjcf", "32")])
def test_hostile_model_files_are_refused_by_name_or_step_finite(category, precision):
    """In float32 too: the accepted models of a category, 3 m apart in one scene, reach more than 1 km from the
    origin (the rigid dynamics, about each link's origin, hold there; about the world origin they went NaN), and
    a joint-space inertia float32 cannot factorise (mass 5e4 m from a light base) is refused by name."""
    out = run_cases(category, precision=precision, script="model_file_cases.py")
    assert int(out.strip().splitlines()[-1].split()[1]) > 20


@contextmanager
def deadline(seconds, what):
    def fail(signum, frame):
        raise TimeoutError(f"{what} ran more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as fh:
        fh.write(text)
    return path


def test_a_refused_file_adds_nothing_and_names_what_it_refused(tmp_path):
    _write(tmp_path, "tet.obj", OBJ_TET)
    scene = gs.Scene()
    bad = _write(tmp_path, "bad.urdf", URDF.replace('<box size="0.1 0.1 0.1"/></geometry></collision>',
                                                    '<box size="nan 0.1 0.1"/></geometry></collision>'))
    with pytest.raises(gs.ModelFileError,
                       match=r"bad\.urdf.*link 'base'.*size='nan 0\.1 0\.1': 'nan' is not accepted: expected a finite"):
        scene.add_entity(gs.morphs.URDF(file=bad))
    neg = _write(tmp_path, "neg.xml", MJCF.replace('mass="2"', 'mass="-2"'))
    with pytest.raises(gs.ModelFileError, match=r"neg\.xml.*body 'torso'.*mass = -2\.0 is not accepted"):
        scene.add_entity(gs.morphs.MJCF(file=neg))
    assert isinstance(gs.ModelFileError("x"), gs.OptionError)
    assert not scene.entities and not scene.rigid_solver.entities
    robot = scene.add_entity(gs.morphs.URDF(file=_write(tmp_path, "good.urdf", URDF)))
    scene.build()
    assert robot.idx == 0 and len(scene.rigid_solver.entities) == 1
    scene.step()


def test_inertias_no_rigid_body_has_are_refused_as_mujoco_refuses_them(tmp_path):
    """Principal moments must be >= 0 and satisfy A + B >= C (MuJoCo's compiler checks both): a negative inertia
    made NaN at the first step; (1, 1, 3) is no body's. (1, 1, 2), a flat plate's, is accepted."""
    _write(tmp_path, "tet.obj", OBJ_TET)
    for inertia, match in (('ixx="-0.01"', "positive semi-definite"),
                           ('ixx="0.01" iyy="0.01" izz="0.03"', r"A \+ B >= C")):
        path = _write(tmp_path, "i.urdf", URDF.replace('ixx="0.01" iyy="0.012" izz="0.014"', inertia)
                      .replace('ixx="-0.01" iyy="0.012" izz="0.014"', inertia))
        with pytest.raises(gs.ModelFileError, match=f"link 'base': inertia = .*{match}"):
            gs.Scene().add_entity(gs.morphs.URDF(file=path))
    plate = _write(tmp_path, "p.urdf", URDF.replace('ixx="0.01" iyy="0.012" izz="0.014" ixy="0.001"',
                                                    'ixx="0.01" iyy="0.01" izz="0.02" ixy="0"'))
    gs.Scene().add_entity(gs.morphs.URDF(file=plate))
    # a link fixed to its parent acts only within their composite (MuJoCo fuses it first; Genesis World's anymal_c
    # has such a camera link): it loads with a warning naming it; the same inertia on a jointed link is refused
    pair = ('<robot name="pair"><link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" '
            'izz="0.01"/></inertial></link><link name="camera"><inertial><mass value="0.1"/><inertia ixx="0.001" '
            'iyy="0.001" izz="0.003"/></inertial></link><joint name="mount" type="{}"><parent link="base"/>'
            '<child link="camera"/><axis xyz="0 0 1"/></joint></robot>')
    with pytest.warns(UserWarning, match=r"link 'camera' \(fixed to its parent\) has an inertia no rigid body has"):
        gs.Scene().add_entity(gs.morphs.URDF(file=_write(tmp_path, "fixed.urdf", pair.format("fixed"))))
    with pytest.raises(gs.ModelFileError, match=r"link 'camera'.*inertia .*A \+ B >= C"):
        gs.Scene().add_entity(gs.morphs.URDF(file=_write(tmp_path, "hinged.urdf", pair.format("continuous"))))


def test_questionable_values_load_with_a_warning_naming_them(tmp_path):
    """A jointed link with no mass anywhere under it does not respond to forces (Genesis World loads it, MuJoCo
    refuses it): it loads with a warning that names it. A massless link fixed to a moving one (a frame, such as
    the panda's hand TCP) is common and loads silently."""
    _write(tmp_path, "tet.obj", OBJ_TET)
    text = URDF.replace('<mass value="0.5"/><inertia ixx="0.002" iyy="0.002" izz="0.001"/>',
                        '<mass value="0"/><inertia ixx="0" iyy="0" izz="0"/>')
    text = text.replace('<collision><origin xyz="0 0 0.05"/><geometry><capsule radius="0.02" length="0.1"/>'
                        '</geometry></collision>', "")
    text = text.replace('<collision><origin xyz="0 0 0.1"/><geometry><mesh filename="tet.obj" scale="0.05 0.05 0.05"/>'
                        '</geometry></collision>', "")
    with pytest.warns(UserWarning, match="link 'arm' has joints but neither it nor the bodies it carries have mass"):
        gs.Scene().add_entity(gs.morphs.URDF(file=_write(tmp_path, "massless.urdf", text)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gs.Scene().add_entity(gs.morphs.URDF(file=_write(tmp_path, "good.urdf", URDF)))


def test_sizes_beyond_the_limits_are_refused_with_the_bound(tmp_path):
    """Lengths within 1e5 m, and a body that can move within 1e9 kg: a 1e30 m box made NaN at the first step. A
    fixed body's mass never enters the dynamics: a fixed 10 km slab (2e10 kg) loads."""
    with pytest.raises(gs.ModelFileError, match=r"geom 'box'.*half-extents.*5e\+29.*at most 100000"):
        gs.Scene().add_entity(gs.morphs.Box(size=(1e30, 1.0, 1.0)))
    _write(tmp_path, "tet.obj", OBJ_TET)
    with pytest.raises(gs.ModelFileError, match=r"mass = 1e\+30 is not accepted: expected at most 1e\+09 kg"):
        gs.Scene().add_entity(gs.morphs.URDF(file=_write(tmp_path, "m.urdf", URDF.replace(
            '<mass value="1"/>', '<mass value="1e30"/>'))))
    with pytest.raises(gs.ModelFileError, match=r"at most 1e\+09 kg for a body that can move"):
        gs.Scene().add_entity(gs.morphs.Box(size=(10000.0, 1000.0, 1.0)))  # 2e9 kg at Rigid()'s rho, 200 kg/m^3
    gs.Scene().add_entity(gs.morphs.Box(size=(10000.0, 10000.0, 1.0), fixed=True))


def test_a_mass_computed_from_geoms_names_the_geoms(tmp_path):
    """A body whose loader computed its mass from its geoms (MJCF without <inertial>, a URDF link without one) and
    whose mass is refused names those geoms: the number the user wrote is a geom's size, not a mass."""
    mjcf = ("<mujoco><worldbody><body name='leg'><joint type='hinge'/><geom name='shin' type='capsule' "
            "size='5e4 0.05'/><geom name='foot' type='sphere' size='0.1'/></body></worldbody></mujoco>")
    with pytest.raises(gs.ModelFileError, match=r"body 'leg' \(mass and inertia from the size and density of its "
                                                r"geoms 'shin', 'foot'\): mass = .* at most 1e\+09 kg"):
        gs.Scene().add_entity(gs.morphs.MJCF(file=_write(tmp_path, "leg.xml", mjcf)))
    # an explicit <inertial> is the body's own number: no geoms named
    with pytest.raises(gs.ModelFileError, match=r"body 'leg': mass = 10000000000.0 is not accepted"):
        gs.Scene().add_entity(gs.morphs.MJCF(file=_write(tmp_path, "leg2.xml", mjcf.replace(
            "<joint type='hinge'/>", "<joint type='hinge'/><inertial pos='0 0 0' mass='1e10' diaginertia='1 1 1'/>"))))


# -- one number of a shipped model changed -------------------------------------------------------------------------

SHIPPED = [("urdf/panda_bullet/panda.urdf", "URDF"), ("mjcf/franka_emika_panda/panda.xml", "MJCF"),
           ("mjcf/ant.xml", "MJCF"), ("mjcf/humanoid.xml", "MJCF")]
OURS = ["arm.urdf", "cartpole.xml", "double_pendulum.xml", "pendulum.xml", "quadruped.xml"]


@pytest.fixture(scope="module")
def shipped_models(tmp_path_factory, request):
    """[(path, kind)] of the models that ship with the tests (the rigid plugin's own, ../shared/assets' where
    present), each in a folder of its own whose entries link to the original's, so that a changed copy written
    there finds its meshes."""
    from genesis_core.testing import shared_assets_path
    from genesis_rigid import assets

    out = [(assets.path(name), "URDF" if name.endswith(".urdf") else "MJCF") for name in OURS]
    shared = shared_assets_path(str(request.config.rootpath))
    if os.path.isdir(shared):
        out += [(os.path.join(shared, rel), kind) for rel, kind in SHIPPED]
    models = []
    for i, (path, kind) in enumerate(out):
        folder = tmp_path_factory.mktemp(f"model{i}")
        source = os.path.dirname(path)
        for entry in os.listdir(source):
            os.symlink(os.path.join(source, entry), os.path.join(folder, entry))
        models.append((str(folder), os.path.basename(path), kind))
    return models


@given(data=st.data())
def test_one_changed_number_of_a_shipped_model_is_refused_by_name_or_steps_finite(shipped_models, data):
    """Any number of any shipped model's file set to a hostile value (or to an ordinary one) is refused with a
    ModelFileError naming the file and the element (and a value that is not a finite number), or loads, builds and
    steps finite."""
    folder, name, kind = data.draw(st.sampled_from(shipped_models), label="model")
    with open(os.path.join(folder, name)) as fh:
        root = ET.fromstring(fh.read())
    attributes = numeric_attributes(root)
    elem, attr, owner = attributes[data.draw(st.integers(0, len(attributes) - 1), label="attribute")]
    value = data.draw(st.sampled_from(HOSTILE + ["-0.5", "2", "1e5", "1e-12"]), label="value")
    parts = elem.get(attr).split()
    parts[data.draw(st.integers(0, len(parts) - 1), label="component")] = value
    elem.set(attr, " ".join(parts))
    path = os.path.join(folder, f"changed_{name}")
    ET.ElementTree(root).write(path)
    scene = gs.Scene()
    with deadline(120, f"{name} <{elem.tag} {attr}={elem.get(attr)!r}>"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            robot = scene.add_entity(getattr(gs.morphs, kind)(file=path))
        except gs.ModelFileError as exc:
            msg = str(exc)
            assert f"changed_{name}" in msg and (owner is None or owner in msg), msg
            if value and not _finite(value):
                assert repr(value) in msg or repr(elem.get(attr)) in msg, msg
            return
        try:
            scene.build()
        except gs.GenesisError as exc:  # (a pair of geoms the narrowphase cannot collide, say)
            assert "RigidSolver" in str(exc)
            return
        scene.step()
    q = robot.get_qpos().detach().cpu().numpy()
    assert np.isfinite(q).all(), f"{name} <{elem.tag} {attr}={elem.get(attr)!r}>: accepted, then {q}"
