"""URDF loader: links with inertials, joints revolute/continuous/prismatic/fixed/floating, limits, damping,
box/sphere/cylinder/capsule/mesh (with `scale`) collision geometry, and the same shapes in <visual> elements (with
their material's colour) as what the cameras draw. The root link gets a free joint unless the morph is fixed."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np

from .checks import MAX_BODIES, number, numbers
from .model import (BOX, CAPSULE, CYLINDER, FREE, HINGE, MESH, SLIDE, SPHERE, ActuatorDesc, BodyDesc, GeomDesc,
                    JointDesc, ModelError, RobotDesc, geoms_source, inertia_from_geoms)
from genesis_core.rotations import quat_mul, quat_to_mat, rotate, rpy_to_quat

URDF_KP, URDF_KV = 100.0, 10.0  # Genesis World's gains of every URDF hinge and slide (N m/rad, N m s/rad)


class URDFError(ModelError):
    pass


def _num(elem, attr, what, default=None, tag=None):
    """The number of attribute `attr` of `elem` (`default` when absent; absent without a default is an error, which
    names the element by `tag` where `elem` itself is absent)."""
    text = elem.get(attr) if elem is not None else None
    if text is None:
        if default is None:
            raise URDFError(f"{what}: <{elem.tag if elem is not None else tag}> has no {attr!r}"
                            + ("" if elem is not None else f" (there is no <{tag}>)"))
        return float(default)
    return number(text, what, attr)


def _vec(elem, attr, n, what, default=None):
    text = elem.get(attr, default) if elem is not None else default
    if text is None:
        raise URDFError(f"{what}: <{elem.tag if elem is not None else '?'}> has no {attr!r}")
    vals = numbers(text, what, attr)
    if len(vals) != n:
        raise URDFError(f"{what}: {attr}: expected {n} numbers, got {text!r}")
    return np.array(vals)


def _origin(elem, what):
    o = elem.find("origin") if elem is not None else None
    if o is None:
        return np.zeros(3), np.array([1.0, 0, 0, 0])
    return _vec(o, "xyz", 3, what, "0 0 0"), rpy_to_quat(_vec(o, "rpy", 3, what, "0 0 0"))


def _resolve(base, filename):
    name = filename.replace("package://", "")
    for cand in (os.path.join(base, name), os.path.join(base, "..", name)):
        if os.path.isfile(cand):
            return os.path.abspath(cand)
    return os.path.join(base, name)


def _shape(elem, name, base, what):
    """The GeomDesc of a <collision> or <visual> element (None without a shape this loader reads)."""
    what = f"{what}, <{elem.tag}> {name!r}"
    gpos, gquat = _origin(elem, what)
    geo = elem.find("geometry")
    shape = geo[0] if geo is not None and len(geo) else None
    if shape is None:
        return None
    if shape.tag == "box":
        return GeomDesc(name, BOX, _vec(shape, "size", 3, what) / 2, gpos, gquat)
    if shape.tag == "sphere":
        return GeomDesc(name, SPHERE, np.array([_num(shape, "radius", what), 0, 0]), gpos, gquat)
    if shape.tag in ("cylinder", "capsule"):
        size = np.array([_num(shape, "radius", what), _num(shape, "length", what) / 2, 0])
        return GeomDesc(name, CYLINDER if shape.tag == "cylinder" else CAPSULE, size, gpos, gquat)
    if shape.tag == "mesh":
        scale = _vec(shape, "scale", 3, what, "1 1 1")
        if not shape.get("filename"):
            raise URDFError(f"{what}: <mesh> has no filename")
        return GeomDesc(name, MESH, np.zeros(3), gpos, gquat, mesh_file=_resolve(base, shape.get("filename")),
                        mesh_scale=scale)
    return None


def _rgba(material, named):
    """The colour of a <material> element (its <color rgba>, or the robot's material of that name), or None."""
    if material is None:
        return None
    color = material.find("color")
    if color is not None and color.get("rgba"):
        try:
            vals = [float(x) for x in color.get("rgba").split()]
        except ValueError:
            vals = []
        if len(vals) in (3, 4) and np.all(np.isfinite(vals)):
            return np.clip(np.array(vals[:3]), 0.0, 1.0)
    return named.get(material.get("name"))


def _tree(path, root):
    """(links by name, the root link's name, each link's child joints in file order), the kinematic graph checked:
    every joint names a parent and a child link, each link has at most one parent and is reached from the one root
    (no cycle). Iterative: a chain of any length is walked without recursion."""
    links = {}
    for l in root.findall("link"):
        if l.get("name") is None:
            raise URDFError(f"{path}: a <link> has no name")
        if l.get("name") in links:
            raise URDFError(f"{path}: two links are named {l.get('name')!r}")
        links[l.get("name")] = l
        if len(links) > MAX_BODIES:
            raise URDFError(f"{path}: more than {MAX_BODIES} links: at most {MAX_BODIES} are accepted")
    children, parent_of = {}, {}
    for j in root.findall("joint"):
        jname = j.get("name")
        ends = []
        for tag in ("parent", "child"):
            e = j.find(tag)
            if e is None or e.get("link") is None:
                raise URDFError(f"{path}: joint {jname!r} has no <{tag} link=...>")
            ends.append(e.get("link"))
        parent, child = ends
        if parent not in links or child not in links:
            raise URDFError(f"{path}: joint {jname!r} connects unknown links {parent!r} -> {child!r}")
        if parent == child:
            raise URDFError(f"{path}: joint {jname!r} connects link {child!r} to itself")
        if child in parent_of:
            raise URDFError(f"{path}: link {child!r} has two parents: joint {parent_of[child].get('name')!r} and "
                            f"joint {jname!r} (a URDF robot is a tree)")
        parent_of[child] = j
        children.setdefault(parent, []).append(j)
    roots = [n for n in links if n not in parent_of]
    if not links:
        raise URDFError(f"{path}: the robot has no <link>")
    if len(roots) != 1:
        raise URDFError(f"{path}: expected one root link, found {roots}"
                        + (" (every link has a parent: the joints form a cycle)" if not roots else ""))
    reached, stack = {roots[0]}, [roots[0]]
    while stack:
        for j in children.get(stack.pop(), []):
            c = j.find("child").get("link")
            reached.add(c)
            stack.append(c)
    if len(reached) != len(links):
        cycle = [n for n in links if n not in reached]
        raise URDFError(f"{path}: links {cycle[:8]} are not reached from the root link {roots[0]!r}: their joints "
                        "form a cycle (a URDF robot is a tree)")
    return links, roots[0], children


def load_urdf(path, fixed=False, density=1000.0) -> RobotDesc:
    """The robot of a URDF file. A link without <inertial> takes its mass and inertia from its collision
    geometry at `density` (kg/m^3; meshes by their convex hull)."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise URDFError(f"{path}: not well-formed XML ({exc})") from None
    if root.tag != "robot":
        raise URDFError(f"{path}: the root element is <{root.tag}>, not <robot>")
    base = os.path.dirname(os.path.abspath(path))
    links, root_name, children = _tree(path, root)

    materials = {}  # the robot's named materials: colour
    for m in root.findall("material"):
        rgba = _rgba(m, {})
        if m.get("name") and rgba is not None:
            materials[m.get("name")] = rgba
    bodies = []
    stack = [(root_name, -1, None)]  # depth first, children in file order: parents before children
    while stack:
        link_name, parent_index, joint_elem = stack.pop()
        bodies.append(_body(links[link_name], parent_index, joint_elem, fixed, density, base, materials))
        index = len(bodies) - 1
        for j in reversed(children.get(link_name, [])):
            stack.append((j.find("child").get("link"), index, j))
    robot = RobotDesc(root.get("name", os.path.basename(path)), bodies, body_word="link")
    # Genesis World's PD gains of a URDF joint (its default_dofs_kp / kv): a file has no actuators to give them
    robot.actuators = [ActuatorDesc(j.name, kp=URDF_KP, kv=URDF_KV) for b in bodies for j in b.joints
                       if j.type in (HINGE, SLIDE)]
    return robot


def _joints(joint_elem, link_name, fixed):
    """The body frame (pos, quat in the parent's frame) and JointDescs of the link `joint_elem` attaches."""
    if joint_elem is None:
        return np.zeros(3), np.array([1.0, 0, 0, 0]), ([] if fixed else [JointDesc(f"{link_name}_free", FREE)])
    jname = joint_elem.get("name")
    what = f"joint {jname!r}"
    pos, quat = _origin(joint_elem, what)
    jtype = joint_elem.get("type")
    axis = _vec(joint_elem.find("axis"), "xyz", 3, what, "1 0 0")
    if np.linalg.norm(axis) < 1e-12:
        if jtype not in ("fixed", "floating"):
            raise URDFError(f"joint {jname!r}: zero axis")
        axis = np.array([1.0, 0, 0])
    axis = axis / np.linalg.norm(axis)
    limit = joint_elem.find("limit")
    dyn = joint_elem.find("dynamics")
    damping = _num(dyn, "damping", what, 0.0) if dyn is not None else 0.0
    rng = None
    if jtype in ("revolute", "prismatic") and limit is not None and "lower" in limit.attrib:
        rng = (_num(limit, "lower", what), _num(limit, "upper", what))
    if jtype in ("revolute", "continuous"):
        return pos, quat, [JointDesc(jname, HINGE, np.zeros(3), axis, rng, damping)]
    if jtype == "prismatic":
        return pos, quat, [JointDesc(jname, SLIDE, np.zeros(3), axis, rng, damping)]
    if jtype == "fixed":
        return pos, quat, []
    if jtype == "floating":
        return pos, quat, [JointDesc(jname, FREE)]
    raise URDFError(f"joint {jname!r}: unsupported type {jtype!r}")


def _body(link, parent_index, joint_elem, fixed, density, base, materials):
    link_name = link.get("name")
    what = f"link {link_name!r}"
    pos, quat, jdescs = _joints(joint_elem, link_name, fixed)
    body = BodyDesc(link_name, parent_index, pos, quat, joints=jdescs)
    body.attached_by = None if joint_elem is None else f"joint {joint_elem.get('name')!r}"
    inertial = link.find("inertial")
    if inertial is not None:
        ipos, iquat = _origin(inertial, what)
        body.mass = _num(inertial.find("mass"), "value", f"{what}, <inertial>", tag="mass")
        ie = inertial.find("inertia")
        g = {k: _num(ie, k, f"{what}, <inertia>", 0.0) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
        local = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                          [g["ixz"], g["iyz"], g["izz"]]])
        r = quat_to_mat(iquat)
        body.com, body.inertia = ipos, r @ local @ r.T
    for kind, into in (("collision", body.geoms), ("visual", body.visuals)):
        for i, col in enumerate(link.findall(kind)):
            g = _shape(col, f"{link_name}_{kind}{i}", base, what)
            if g is not None:
                if kind == "visual":
                    g.rgba = _rgba(col.find("material"), materials)
                into.append(g)
    if inertial is None and body.geoms:
        body.mass, body.com, body.inertia = inertia_from_geoms(body.geoms, lambda g: (density, None), what)
        body.mass_from = geoms_source(body.geoms)
    return body


__all__ = ["load_urdf", "URDFError", "quat_mul", "rotate"]
