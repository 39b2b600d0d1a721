"""URDF loader: links with inertials, joints revolute/continuous/prismatic/fixed/floating, limits, damping,
box/sphere/cylinder/capsule/mesh (with `scale`) collision geometry, and the same shapes in <visual> elements (with
their material's colour) as what the cameras draw. The root link gets a free joint unless the morph is fixed."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np

from .model import (BOX, CAPSULE, CYLINDER, FREE, HINGE, MESH, SLIDE, SPHERE, BodyDesc, GeomDesc, JointDesc, RobotDesc,
                    inertia_from_geoms)
from genesis_core.rotations import quat_mul, quat_to_mat, rotate, rpy_to_quat


class URDFError(ValueError):
    pass


def _vec(s, n, what):
    vals = [float(x) for x in (s or "").split()]
    if len(vals) != n:
        raise URDFError(f"{what}: expected {n} numbers, got {s!r}")
    return np.array(vals)


def _origin(elem, what):
    o = elem.find("origin") if elem is not None else None
    if o is None:
        return np.zeros(3), np.array([1.0, 0, 0, 0])
    return _vec(o.get("xyz", "0 0 0"), 3, what), rpy_to_quat(_vec(o.get("rpy", "0 0 0"), 3, what))


def _resolve(base, filename):
    name = filename.replace("package://", "")
    for cand in (os.path.join(base, name), os.path.join(base, "..", name)):
        if os.path.isfile(cand):
            return os.path.abspath(cand)
    return os.path.join(base, name)


def _shape(elem, name, base, what):
    """The GeomDesc of a <collision> or <visual> element (None without a shape this loader reads)."""
    gpos, gquat = _origin(elem, what)
    geo = elem.find("geometry")
    shape = geo[0] if geo is not None and len(geo) else None
    if shape is None:
        return None
    if shape.tag == "box":
        return GeomDesc(name, BOX, _vec(shape.get("size"), 3, name) / 2, gpos, gquat)
    if shape.tag == "sphere":
        return GeomDesc(name, SPHERE, np.array([float(shape.get("radius")), 0, 0]), gpos, gquat)
    if shape.tag in ("cylinder", "capsule"):
        size = np.array([float(shape.get("radius")), float(shape.get("length")) / 2, 0])
        return GeomDesc(name, CYLINDER if shape.tag == "cylinder" else CAPSULE, size, gpos, gquat)
    if shape.tag == "mesh":
        scale = _vec(shape.get("scale", "1 1 1"), 3, name)
        return GeomDesc(name, MESH, np.zeros(3), gpos, gquat, mesh_file=_resolve(base, shape.get("filename")),
                        mesh_scale=scale)
    return None


def _rgba(material, named):
    """The colour of a <material> element (its <color rgba>, or the robot's material of that name), or None."""
    if material is None:
        return None
    color = material.find("color")
    if color is not None and color.get("rgba"):
        vals = [float(x) for x in color.get("rgba").split()]
        if len(vals) in (3, 4) and np.all(np.isfinite(vals)):
            return np.clip(np.array(vals[:3]), 0.0, 1.0)
    return named.get(material.get("name"))


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
    links = {l.get("name"): l for l in root.findall("link")}
    joints = root.findall("joint")
    children = {}
    child_names = set()
    for j in joints:
        parent, child = j.find("parent").get("link"), j.find("child").get("link")
        if parent not in links or child not in links:
            raise URDFError(f"{path}: joint {j.get('name')!r} connects unknown links {parent!r} -> {child!r}")
        children.setdefault(parent, []).append(j)
        child_names.add(child)
    roots = [n for n in links if n not in child_names]
    if len(roots) != 1:
        raise URDFError(f"{path}: expected one root link, found {roots}")

    materials = {}  # the robot's named materials: colour
    for m in root.findall("material"):
        rgba = _rgba(m, {})
        if m.get("name") and rgba is not None:
            materials[m.get("name")] = rgba
    bodies = []

    def add(link_name, parent_index, joint_elem):
        link = links[link_name]
        what = f"link {link_name}"
        if joint_elem is None:
            pos, quat = np.zeros(3), np.array([1.0, 0, 0, 0])
            jdescs = [] if fixed else [JointDesc(f"{link_name}_free", FREE)]
        else:
            jname = joint_elem.get("name")
            pos, quat = _origin(joint_elem, f"joint {jname}")
            jtype = joint_elem.get("type")
            axis = _vec(joint_elem.find("axis").get("xyz"), 3, jname) if joint_elem.find("axis") is not None \
                else np.array([1.0, 0, 0])
            if np.linalg.norm(axis) < 1e-12:
                if jtype not in ("fixed", "floating"):
                    raise URDFError(f"joint {jname!r}: zero axis")
                axis = np.array([1.0, 0, 0])
            axis = axis / np.linalg.norm(axis)
            limit = joint_elem.find("limit")
            dyn = joint_elem.find("dynamics")
            damping = float(dyn.get("damping", 0.0)) if dyn is not None else 0.0
            rng = None
            if jtype in ("revolute", "prismatic") and limit is not None and "lower" in limit.attrib:
                rng = (float(limit.get("lower")), float(limit.get("upper")))
            if jtype in ("revolute", "continuous"):
                jdescs = [JointDesc(jname, HINGE, np.zeros(3), axis, rng, damping)]
            elif jtype == "prismatic":
                jdescs = [JointDesc(jname, SLIDE, np.zeros(3), axis, rng, damping)]
            elif jtype == "fixed":
                jdescs = []
            elif jtype == "floating":
                jdescs = [JointDesc(jname, FREE)]
            else:
                raise URDFError(f"joint {jname!r}: unsupported type {jtype!r}")
        body = BodyDesc(link_name, parent_index, pos, quat, joints=jdescs)
        inertial = link.find("inertial")
        if inertial is not None:
            ipos, iquat = _origin(inertial, what)
            body.mass = float(inertial.find("mass").get("value"))
            ie = inertial.find("inertia")
            g = {k: float(ie.get(k, 0.0)) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
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
            body.mass, body.com, body.inertia = inertia_from_geoms(body.geoms, lambda g: (density, None))
        index = len(bodies)
        bodies.append(body)
        for j in children.get(link_name, []):
            add(j.find("child").get("link"), index, j)

    add(roots[0], -1, None)
    robot = RobotDesc(root.get("name", os.path.basename(path)), bodies)
    robot.validate()
    return robot


__all__ = ["load_urdf", "URDFError", "quat_mul", "rotate"]
