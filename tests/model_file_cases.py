"""Hostile model files (URDF, MJCF, meshes), run in a child process by tests/test_model_files.py so that a hang or
a crash fails a test with the case named:

    python tests/model_file_cases.py CATEGORY

Each case prints its name before it runs and must end within CASE_SECONDS; the process prints "done N" at the end.
A case passes if the engine refuses the file with gs.ModelFileError whose message names the file, the element and
(for a value that is not a finite number) the value, or accepts it: every accepted model of a category is then
built into one scene, each entity 3 m from the next, and stepped; its state must stay finite.
"""

import os
import signal
import sys
import xml.etree.ElementTree as ET

import attrs
import numpy as np

import genesis_core as gs

CASES = 0
CASE_SECONDS = 60
HOSTILE = ["nan", "inf", "-inf", "-1", "0", "1e30", "-1e30", "1e-30", "5e4", "abc", ""]


def case(name):
    global CASES
    CASES += 1
    print(f"case {name}", flush=True)


def _timeout(signum, frame):
    raise TimeoutError(f"the case ran more than {CASE_SECONDS} s")


def load(name, morph, names=(), value=None, accepted=None, text=None, refuse=False):
    """add_entity(morph) in a fresh scene: refused with a ModelFileError naming the file, every string of `names`
    and (where it is not a finite number) `value` or the attribute's `text` that holds it; or, unless `refuse`,
    accepted, and then `morph` joins `accepted`."""
    case(name)
    signal.alarm(CASE_SECONDS)
    try:
        gs.Scene(show_viewer=False).add_entity(morph)
        assert not refuse, f"{name}: accepted, but it must be refused"
    except gs.ModelFileError as exc:
        msg = str(exc)
        assert os.path.basename(morph.file) in msg, f"{name}: the file is not named: {msg}"
        for n in names:
            assert n in msg, f"{name}: {n!r} is not named: {msg}"
        if value and not _finite(value):  # (a number removed, value "", may leave valid syntax: a shorter list)
            assert repr(value) in msg or repr(text) in msg, f"{name}: the value {value!r} is not named: {msg}"
        return False
    finally:
        signal.alarm(0)
    if accepted is not None:
        accepted.append((name, morph))
    return True


def _finite(text):
    try:
        return np.isfinite(float(text))
    except ValueError:
        return False


def step_accepted(accepted, what):
    """Build the accepted models in one scene (3 m apart) and step it twice: each entity's state must be finite. A
    build may still refuse a model with a gs error (a property of a pair of geoms, say): the group is then split in
    halves until each refusal is one model's."""
    case(f"{what}: build and step the {len(accepted)} accepted models")
    groups = [accepted] if accepted else []
    while groups:
        group = groups.pop()
        scene = gs.Scene(show_viewer=False)
        scene.add_entity(gs.morphs.Plane())
        ents = [(name, scene.add_entity(attrs.evolve(morph, pos=(3.0 * i, 0.0, 1.0))))
                for i, (name, morph) in enumerate(group)]
        signal.alarm(10 * CASE_SECONDS)
        try:
            scene.build()
        except gs.GenesisError as exc:
            if len(group) == 1:
                print(f"refused at build: {group[0][0]}: {exc}", flush=True)
            else:
                groups += [group[: len(group) // 2], group[len(group) // 2:]]
            continue
        finally:
            signal.alarm(0)
        signal.alarm(10 * CASE_SECONDS)
        for _ in range(2):
            scene.step()
        signal.alarm(0)
        for name, e in ents:
            q = e.get_qpos().detach().cpu().numpy()
            assert np.isfinite(q).all(), f"{name}: accepted, then non-finite after 2 steps: {q}"


# -- URDF ------------------------------------------------------------------------------------------------------------

OBJ_TET = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"

URDF = """<robot name="fuzz">
  <material name="grey"><color rgba="0.5 0.5 0.5 1"/></material>
  <link name="base">
    <inertial><origin xyz="0 0 0.01" rpy="0 0 0"/><mass value="1"/>
      <inertia ixx="0.01" iyy="0.012" izz="0.014" ixy="0.001" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 0" rpy="0 0 0"/><geometry><box size="0.1 0.1 0.1"/></geometry></collision>
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry><material name="grey"/></visual>
  </link>
  <link name="arm">
    <inertial><origin xyz="0 0 0.1"/><mass value="0.5"/><inertia ixx="0.002" iyy="0.002" izz="0.001"/></inertial>
    <collision><origin xyz="0 0 0.1"/><geometry><cylinder radius="0.02" length="0.2"/></geometry></collision>
    <collision><origin xyz="0 0 0.2"/><geometry><sphere radius="0.03"/></geometry></collision>
  </link>
  <link name="tip">
    <collision><origin xyz="0 0 0.05"/><geometry><capsule radius="0.02" length="0.1"/></geometry></collision>
    <collision><origin xyz="0 0 0.1"/><geometry><mesh filename="tet.obj" scale="0.05 0.05 0.05"/></geometry></collision>
  </link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.05" rpy="0 0 0"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="10" velocity="1"/>
    <dynamics damping="0.1" friction="0"/></joint>
  <joint name="slider" type="prismatic"><parent link="arm"/><child link="tip"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 0 1"/><limit lower="-0.05" upper="0.05" effort="10" velocity="1"/></joint>
</robot>
"""


def numeric_attributes(root, owners=("link", "joint", "body", "geom", "mesh", "tendon", "fixed", "position",
                                     "velocity", "motor", "general", "material")):
    """[(element, attribute, owner name)] of every attribute whose text is numbers, with the name of the nearest
    enclosing element that has one (what a refusal must name)."""
    parent = {c: p for p in root.iter() for c in p}
    out = []
    for elem in root.iter():
        for attr, text in elem.attrib.items():
            if attr in ("name", "class", "file", "filename") or not text.split():
                continue
            try:
                [float(x) for x in text.split()]
            except ValueError:
                continue
            owner, e = None, elem
            while e is not None and owner is None:
                owner = e.get("name") if e.tag in owners else None
                e = parent.get(e)
            out.append((elem, attr, owner))
    return out


def mutations(text, filename, tmp, kind, base_name):
    """Write, for every numeric attribute of the model `text` and every hostile value (in its first number), a
    copy of the file; yield (case name, path, owner, value)."""
    root = ET.fromstring(text)
    for k, (elem, attr, owner) in enumerate(numeric_attributes(root)):
        original = elem.get(attr)
        for v in HOSTILE:
            parts = original.split()
            parts[0] = v
            elem.set(attr, " ".join(parts))
            path = os.path.join(tmp, f"{base_name}_{k}_{HOSTILE.index(v)}{filename}")
            ET.ElementTree(root).write(path)
            yield f"{kind} <{elem.tag} {attr}={elem.get(attr)!r}> of {owner!r}", path, owner, v, elem.get(attr)
        elem.set(attr, original)


def mutated_models(tmp, kind, text, ext):
    """Every mutation of the model `text` (a `kind` file) loaded, then the accepted ones built and stepped."""
    with open(os.path.join(tmp, "tet.obj"), "w") as fh:
        fh.write(OBJ_TET)
    accepted = []
    for name, path, owner, v, attr_text in mutations(text, ext, tmp, kind, "fuzz"):
        load(name, getattr(gs.morphs, kind)(file=path), names=[owner] if owner else [], value=v, accepted=accepted,
             text=attr_text)
    step_accepted(accepted, kind)


def models_urdf(tmp):
    mutated_models(tmp, "URDF", URDF, ".urdf")


def models_graphs(tmp):
    """Kinematic graphs that are not trees, chains beyond the limits, missing ends, MJCF nesting and includes."""

    def write(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as fh:
            fh.write(text)
        return path

    link = '<link name="l{0}"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"/></inertial></link>'
    joint = ('<joint name="j{0}" type="revolute"><parent link="l{0}"/><child link="l{1}"/><origin xyz="0 0 0.1"/>'
             '<axis xyz="0 1 0"/></joint>')

    def chain(n, extra=""):
        return ("<robot name='c'>" + "".join(link.format(i) for i in range(n))
                + "".join(joint.format(i, i + 1) for i in range(n - 1)) + extra + "</robot>")

    write("tet.obj", OBJ_TET)
    accepted = []
    load("URDF chain of 100,000 links", gs.morphs.URDF(file=write("chain100k.urdf", chain(100_000))),
         names=["at most 10000"], refuse=True)
    load("URDF chain of 1,500 links (deeper than 1,000)", gs.morphs.URDF(file=write("chain1500.urdf", chain(1500))),
         names=["deep", "at most 1000"], refuse=True)
    load("URDF chain of 30 links", gs.morphs.URDF(file=write("chain30.urdf", chain(30))), accepted=accepted)
    cyc = chain(4, '<joint name="back" type="revolute"><parent link="l3"/><child link="l1"/></joint>')
    load("URDF cycle under the root", gs.morphs.URDF(file=write("cycle.urdf", cyc)), names=["l1", "two parents"],
         refuse=True)
    cyc = ("<robot name='c'>" + "".join(link.format(i) for i in range(3)) + joint.format(0, 1) + joint.format(1, 2)
           + joint.format(2, 0) + "</robot>")
    load("URDF cycle without a root", gs.morphs.URDF(file=write("ring.urdf", cyc)), names=["cycle"], refuse=True)
    cyc = ("<robot name='c'>" + "".join(link.format(i) for i in range(4)) + joint.format(0, 1) + joint.format(2, 3)
           + joint.format(3, 2).replace('name="j3"', 'name="j3b"') + "</robot>")
    load("URDF detached cycle", gs.morphs.URDF(file=write("detached.urdf", cyc)), names=["l2"], refuse=True)
    selfloop = chain(2, '<joint name="self" type="revolute"><parent link="l1"/><child link="l1"/></joint>')
    load("URDF self-loop", gs.morphs.URDF(file=write("self.urdf", selfloop)), names=["self", "itself"], refuse=True)
    two = ("<robot name='c'>" + "".join(link.format(i) for i in range(3)) + joint.format(0, 2)
           + joint.format(1, 2) + joint.format(0, 1).replace('name="j0"', 'name="j0b"') + "</robot>")
    load("URDF link with two parents", gs.morphs.URDF(file=write("two.urdf", two)), names=["l2", "two parents"],
         refuse=True)
    for tag in ("parent", "child"):
        bad = chain(2).replace(f'<{tag} link="l{0 if tag == "parent" else 1}"/>', "")
        load(f"URDF joint without <{tag}>", gs.morphs.URDF(file=write(f"no{tag}.urdf", bad)), names=["j0", tag])
    load("URDF joint to an unknown link", gs.morphs.URDF(file=write("unknown.urdf", chain(2).replace(
        '<child link="l1"/>', '<child link="nope"/>'))), names=["j0", "nope"], refuse=True)
    load("URDF two links of one name", gs.morphs.URDF(file=write("dup.urdf", chain(2).replace('name="l1"', 'name="l0"')
                                                                    .replace('link="l1"', 'link="l0"'))),
         names=["l0"], refuse=True)
    load("URDF inertial without mass", gs.morphs.URDF(file=write("nomass.urdf", chain(2).replace(
        '<mass value="1"/>', "", 1))), names=["l0", "value"], refuse=True)
    load("URDF box without size", gs.morphs.URDF(file=write("nosize.urdf", URDF.replace(
        '<box size="0.1 0.1 0.1"/></geometry></collision>', "<box/></geometry></collision>"))), names=["base", "size"],
        refuse=True)
    load("URDF box of size 0", gs.morphs.URDF(file=write("zero.urdf", URDF.replace(
        '<box size="0.1 0.1 0.1"/></geometry></collision>', '<box size="0 0.1 0.1"/></geometry></collision>'))),
        names=["base", "> 0"], refuse=True)

    body = '<body name="b{0}" pos="0 0 0.1"><joint type="hinge" axis="0 1 0"/><geom size="0.02"/>'
    deep = "<mujoco><worldbody>" + "".join(body.format(i) for i in range(100_000)) + "</body>" * 100_000
    load("MJCF 100,000 nested bodies", gs.morphs.MJCF(file=write("deep.xml", deep + "</worldbody></mujoco>")),
         names=["at most 10000"], refuse=True)
    deep = "<mujoco><worldbody>" + "".join(body.format(i) for i in range(1500)) + "</body>" * 1500
    load("MJCF 1,500 nested bodies (deeper than 1,000)",
         gs.morphs.MJCF(file=write("deep1500.xml", deep + "</worldbody></mujoco>")), names=["deep", "at most 1000"],
         refuse=True)
    flat = "<mujoco><worldbody>" + "".join(body.format(i) + "</body>" for i in range(20_000))
    load("MJCF 20,000 sibling bodies", gs.morphs.MJCF(file=write("wide.xml", flat + "</worldbody></mujoco>")),
         names=["at most 10000"], refuse=True)
    defaults = "<default class='d0'>" * 100_000 + "<geom size='0.05'/>" + "</default>" * 100_000
    load("MJCF 100,000 nested default classes", gs.morphs.MJCF(file=write("defaults.xml", (
        f"<mujoco><default>{defaults}</default><worldbody><body><freejoint/><geom class='d0'/></body>"
        "</worldbody></mujoco>"))), names=["at most 64 deep"], refuse=True)
    defaults = "".join(f"<default class='c{i}'><geom a{i}='{i}'/>" for i in range(64)) + "</default>" * 64
    load("MJCF 64 nested default classes", gs.morphs.MJCF(file=write("defaults64.xml", (
        f"<mujoco><default>{defaults}</default><worldbody><body><freejoint/><geom class='c63' size='0.05'/></body>"
        "</worldbody></mujoco>"))), accepted=accepted)
    for i in range(20):  # each file includes the next twice: 2**20 expansions
        write(f"bomb{i}.xml", f"<mujoco><include file='bomb{i + 1}.xml'/><include file='bomb{i + 1}.xml'/></mujoco>")
    write("bomb20.xml", "<mujoco/>")
    load("MJCF includes doubling over 20 levels", gs.morphs.MJCF(file=write("bomb.xml", (
        "<mujoco><include file='bomb0.xml'/><worldbody/></mujoco>"))), names=["at most 1000"], refuse=True)
    ball = ("<mujoco><worldbody><body name='b'><freejoint/><geom size='0.1'/><body name='c' pos='0 0 -0.3'>"
            "<joint name='j' type='ball'/><geom size='0.05'/></body></body></worldbody><tendon><fixed name='t'>"
            "<joint joint='{}'/></fixed></tendon></mujoco>")
    load("MJCF fixed tendon over a ball joint", gs.morphs.MJCF(file=write("ball.xml", ball.format("j"))),
         names=["'t'", "'j'", "hinge or a slide"], refuse=True)
    load("MJCF fixed tendon over a free joint", gs.morphs.MJCF(file=write("free.xml", ball.format("b_free"))),
         names=["'t'", "'b_free'"], refuse=True)
    sphere = "<mujoco>{}<worldbody><body name='b' {}><freejoint/><geom size='0.1' {}/></body></worldbody></mujoco>"
    for label, parts, names in (("compiler eulerseq 'abc'", ("<compiler eulerseq='abc'/>", "", ""), ["eulerseq"]),
                                ("compiler angle 'grad'", ("<compiler angle='grad'/>", "", ""), ["angle"]),
                                ("zero axisangle", ("", "axisangle='0 0 0 1'", ""), ["'b'", "axisangle"]),
                                ("zero zaxis", ("", "", "zaxis='0 0 0'"), ["'b'", "zaxis"]),
                                ("geom mass 1e-40", ("", "", "mass='1e-40'"), ["'b'", "1e-15"])):
        load(f"MJCF {label}", gs.morphs.MJCF(file=write(f"{label.split()[0]}_{len(label)}.xml",
                                                        sphere.format(*parts))), names=names, refuse=True)
    write("inc_a.xml", "<mujoco><include file='inc_b.xml'/></mujoco>")
    write("inc_b.xml", "<mujoco><include file='inc_a.xml'/></mujoco>")
    load("MJCF include cycle", gs.morphs.MJCF(file=write("inc.xml", (
        "<mujoco><include file='inc_a.xml'/><worldbody/></mujoco>"))), names=["recursive include"], refuse=True)
    for i in range(40):
        write(f"nest{i}.xml", f"<mujoco><include file='nest{i + 1}.xml'/></mujoco>")
    write("nest40.xml", "<mujoco/>")
    load("MJCF includes 40 files deep", gs.morphs.MJCF(file=write("nest.xml", (
        "<mujoco><include file='nest0.xml'/><worldbody/></mujoco>"))), names=["at most 32"], refuse=True)
    load("MJCF include of a missing file", gs.morphs.MJCF(file=write("missing.xml", (
        "<mujoco><include file='absent.xml'/><worldbody/></mujoco>"))), names=["absent.xml"], refuse=True)
    load("MJCF inertial without mass", gs.morphs.MJCF(file=write("nomass.xml", (
        "<mujoco><worldbody><body name='b'><freejoint/><inertial pos='0 0 0' diaginertia='1 1 1'/></body>"
        "</worldbody></mujoco>"))), names=["'b'", "mass"], refuse=True)
    step_accepted(accepted, "graphs")


# -- MJCF ------------------------------------------------------------------------------------------------------------

MJCF = """<mujoco model="fuzz">
  <compiler angle="radian" boundmass="0" boundinertia="0" settotalmass="-1"/>
  <option density="0" viscosity="0" wind="0 0 0"/>
  <default><geom friction="1 0.005 0.0001" density="1000"/><joint damping="0.01"/></default>
  <asset><mesh name="tet" file="tet.obj" scale="0.05 0.05 0.05"/>
    <hfield name="bumps" nrow="3" ncol="4" size="0.5 0.4 0.05 0.01" elevation="0 1 0 1 1 0 1 0 0 0.5 0.5 0"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <geom name="ground" type="hfield" hfield="bumps" pos="0 0 -0.05"/>
    <body name="torso" pos="0 0 0.5" quat="1 0 0 0">
      <freejoint name="root"/>
      <inertial pos="0 0 0" mass="2" diaginertia="0.02 0.025 0.03"/>
      <geom name="box" type="box" size="0.1 0.05 0.05" margin="0" gap="0"/>
      <body name="leg" pos="0.1 0 0" euler="0 0 0">
        <joint name="hip" type="hinge" axis="0 1 0" range="-1 1" armature="0.01" stiffness="0" springref="0" ref="0"/>
        <geom name="thigh" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.3"/>
        <body name="foot" pos="0 0 -0.2" axisangle="0 0 1 0">
          <joint name="knee" type="slide" axis="0 0 1" range="-0.05 0.05"/>
          <geom name="shin" type="cylinder" size="0.02 0.05" density="500"/>
          <geom name="ball" type="sphere" size="0.03" pos="0 0 -0.05"/>
          <geom name="egg" type="ellipsoid" size="0.02 0.03 0.04" pos="0 0 -0.1"/>
          <geom name="tetra" type="mesh" mesh="tet" pos="0 0 -0.15"/>
        </body>
      </body>
      <body name="arm" pos="-0.1 0 0" xyaxes="1 0 0 0 1 0">
        <joint name="elbow" type="hinge" axis="1 0 0"/>
        <inertial pos="0 0 -0.05" mass="0.2" fullinertia="0.001 0.001 0.0005 0 0 0"/>
        <geom name="rod" type="box" fromto="0 0 0 0 0 -0.1" size="0.01"/>
      </body>
    </body>
  </worldbody>
  <tendon><fixed name="tie" stiffness="1" damping="0.1" range="-1 1" springlength="0"><joint joint="hip" coef="1"/>
    <joint joint="elbow" coef="-0.5"/></fixed></tendon>
  <actuator>
    <position name="p_hip" joint="hip" kp="10" kv="1" forcerange="-5 5"/>
    <velocity name="v_knee" joint="knee" kv="2"/>
    <motor name="m_elbow" joint="elbow" forcerange="-1 1"/>
    <general name="g_tie" tendon="tie" biasprm="0 -1 -0.1"/>
  </actuator>
</mujoco>
"""


def models_mjcf(tmp):
    mutated_models(tmp, "MJCF", MJCF, ".xml")


# -- meshes ------------------------------------------------------------------------------------------------------------

def _stl(path, triangles):
    """A binary STL of `triangles` [T, 3, 3] (any floats, NaN included)."""
    tri = np.asarray(triangles, dtype=np.float32).reshape(-1, 3, 3)
    rec = np.zeros(len(tri), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    rec["v"] = tri
    with open(path, "wb") as fh:
        fh.write(b"\0" * 80 + np.uint32(len(tri)).tobytes() + rec.tobytes())


def models_meshes(tmp):
    """Degenerate and non-finite meshes in OBJ, STL and GLB, as a rigid Mesh morph, inside URDF and MJCF files,
    and as the particle solvers' meshes (sampled, tetrahedralized, a cloth) where their plugins are installed."""
    import trimesh

    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float64) * 0.1
    faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    files = {}

    def obj(name, vertices, faces_text=None):
        lines = [f"v {' '.join(str(x) for x in v)}" for v in vertices]
        lines += faces_text if faces_text is not None else [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
        files[name] = os.path.join(tmp, name)
        with open(files[name], "w") as fh:
            fh.write("\n".join(lines) + "\n")

    for label, value in (("nan", np.nan), ("inf", np.inf), ("1e30", 1e30)):
        bad = tet.copy()
        bad[1, 0] = value
        obj(f"vertex_{label}.obj", bad)
        _stl(os.path.join(tmp, f"vertex_{label}.stl"), bad[faces])
        files[f"vertex_{label}.stl"] = os.path.join(tmp, f"vertex_{label}.stl")
        glb = os.path.join(tmp, f"vertex_{label}.glb")
        trimesh.Trimesh(bad, faces, process=False).export(glb)
        files[f"vertex_{label}.glb"] = glb
    obj("coincident.obj", np.zeros((4, 3)))
    obj("collinear.obj", np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]], dtype=float))
    obj("coplanar.obj", np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=float))
    obj("three.obj", tet[:3], ["f 1 2 3"])
    obj("empty.obj", np.zeros((0, 3)), [])
    obj("face_past_end.obj", tet, ["f 1 2 9"])
    obj("text.obj", tet, ["v abc 0 0", "f 1 2 3"])
    obj("tiny.obj", tet * 1e-300)
    files["garbage.stl"] = os.path.join(tmp, "garbage.stl")
    with open(files["garbage.stl"], "wb") as fh:
        fh.write(np.random.default_rng(0).bytes(300))
    files["garbage.glb"] = os.path.join(tmp, "garbage.glb")
    with open(files["garbage.glb"], "wb") as fh:
        fh.write(b"glTF" + np.random.default_rng(1).bytes(300))

    accepted = []
    for name, path in sorted(files.items()):
        load(f"Mesh {name}", gs.morphs.Mesh(file=path), accepted=accepted)
        urdf = os.path.join(tmp, f"with_{name}.urdf")
        with open(urdf, "w") as fh:
            fh.write(URDF.replace("tet.obj", path))
        load(f"URDF with mesh {name}", gs.morphs.URDF(file=urdf), names=[name], accepted=accepted)
        mjcf = os.path.join(tmp, f"with_{name}.xml")
        with open(mjcf, "w") as fh:
            fh.write(MJCF.replace('file="tet.obj"', f'file="{path}"'))
        load(f"MJCF with mesh {name}", gs.morphs.MJCF(file=mjcf), names=[name], accepted=accepted)
    obj("big.obj", tet * 1000)  # a 100 m tet: a lattice of 1e13 points at 1 cm
    obj("only_v.obj", tet, [])
    obj("short_v.obj", tet, ["v 0 0", "f 1 2 3"])
    for label, kind in (("MPM", "MPM"), ("PBD", "PBD"), ("FEM", "FEM")):
        if not hasattr(gs.materials, kind):
            continue
        material = {"MPM": lambda: gs.materials.MPM.Elastic(), "PBD": lambda: gs.materials.PBD.Cloth(),
                    "FEM": lambda: gs.materials.FEM.Elastic()}[kind]()
        # (refused by the reader; the reader accepts the rest, degenerate or faceless, which the solver must refuse
        # with a gs error or take: fTetWild crashed the process on a surface with no volume)
        for name in ("vertex_nan.obj", "vertex_inf.stl", "face_past_end.obj", "garbage.glb", "text.obj",
                     "coincident.obj", "collinear.obj", "coplanar.obj", "three.obj", "empty.obj", "tiny.obj",
                     "big.obj", "only_v.obj", "short_v.obj"):
            case(f"{label} mesh {name}")
            signal.alarm(CASE_SECONDS)
            try:
                gs.Scene(show_viewer=False).add_entity(gs.morphs.Mesh(file=files[name], pos=(0.2, 0.2, 0.2),
                                                                      scale=0.1), material=material)
            except gs.GenesisError as exc:
                assert name in str(exc) or "particle_size" in str(exc), f"{label} {name}: the file is not named: {exc}"
            finally:
                signal.alarm(0)
    step_accepted(accepted, "meshes")


def main():
    signal.signal(signal.SIGALRM, _timeout)
    sys.setrecursionlimit(1000)  # a recursive walk anywhere fails here as it would with Python's default
    gs.init(backend=gs.cpu, precision=sys.argv[2] if len(sys.argv) > 2 else "64", seed=0, logging_level="warning")
    import tempfile
    import warnings

    warnings.simplefilter("ignore")  # (the questionable values that load with a warning)
    with tempfile.TemporaryDirectory() as tmp:
        globals()[sys.argv[1]](tmp)
    print(f"done {CASES}", flush=True)


if __name__ == "__main__":
    main()
