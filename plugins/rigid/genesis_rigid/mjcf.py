"""MJCF loader: body tree, default classes (with childclass), includes, joints (hinge/slide/ball/free, with
`ref` and `springref`), geoms (plane/sphere/capsule/cylinder/box/ellipsoid/mesh, fromto; mesh assets from OBJ/STL
files, with `scale`; `margin` and `gap`), inertials (diag/full) or inertia from geoms and density (meshes by their
convex hull), the compiler's `settotalmass`, `boundmass` and `boundinertia`, ranges, damping, armature, stiffness,
fixed tendons (stiffness, damping, springlength, range), motor/position/velocity/general actuators on joints and on
fixed tendons, equality constraints (connect, weld, joint, tendon; sites as their ends), contype/conaffinity, `group` (a geom of group 0, 1 or 2 is what its body looks like to the cameras, a mesh by the
file's triangles, with its `rgba` or its material's colour), and the `<option>` entries density, viscosity and wind (MuJoCo's inertia-box
fluid model). The step, gravity and solver come from the scene's options, not from `<option>`.

Follows MuJoCo's defaults: angles in degrees unless `<compiler angle="radian">`, `autolimits` on, geom density
1000, joint type hinge with axis (0, 0, 1), geom type sphere.

An ellipsoid is an analytic geom (genesis_core.geoms.ELLIPSOID, its semi-axes in `size`), as spheres and
capsules are: its mass and inertia are the ellipsoid's; it collides through its exact support function
(support(d) = R diag(r^2) d' / |diag(r) d'|, d' the direction in its frame): against a plane one contact at the
support point under it, against anything else through the convex narrowphase (GJK / EPA, and a box's or a mesh's
face clipped against that point); its bounding sphere and box, ray casts and particle distances are the
ellipsoid's own. A tendon actuator drives each joint of its tendon with the actuator's gains and force range, as
Genesis World does.
"""

from __future__ import annotations

import copy
import os
import xml.etree.ElementTree as ET

import numpy as np

from .checks import MAX_BODIES, MIN_SIZE, number, numbers
from .model import (BALL, BOX, CAPSULE, CYLINDER, ELLIPSOID, FREE, HFIELD, HINGE, MESH, PLANE, SLIDE, SPHERE,
                    ActuatorDesc,
                    BodyDesc, EqualityDesc, FluidDesc, GeomDesc, JointDesc, ModelError, RobotDesc, TendonDesc,
                    geoms_source, inertia_from_geoms)
from genesis_core.rotations import axis_angle, euler_to_quat, frame_from_z, mat_to_quat, quat_mul, quat_normalize

GEOM_TYPES = {"plane": PLANE, "sphere": SPHERE, "capsule": CAPSULE, "cylinder": CYLINDER, "box": BOX, "mesh": MESH,
              "ellipsoid": ELLIPSOID, "hfield": HFIELD}
JOINT_TYPES = {"free": FREE, "ball": BALL, "slide": SLIDE, "hinge": HINGE}
ACTUATOR_TAGS = ("motor", "position", "velocity", "general")
# a geom of these groups is what its body looks like (MuJoCo's viewer shows groups 0 to 2 by default; the
# panda's collision meshes are in group 3), drawn by the cameras whatever its contype and conaffinity
VISIBLE_GROUPS = (0, 1, 2)
MAX_INCLUDE_DEPTH = 32  # files including files
MAX_INCLUDES = 1_000  # <include> elements expanded in all (a file included twice at each level doubles per level)
MAX_DEFAULT_DEPTH = 64  # <default> classes nested in one another (each holds a copy of its parent's attributes)
MAX_DEFAULT_CLASSES = 10_000


class MJCFError(ModelError):
    pass




def _floats(s, n=None, what="", attr="value"):
    """The finite numbers of an attribute's text (n of them when given); `what` and `attr` name it in errors."""
    vals = numbers(str(s), what, attr)
    if n is not None and len(vals) != n:
        raise MJCFError(f"{what}: {attr}: expected {n} numbers, got {s!r}")
    return np.array(vals)


def _num(a, key, default, what):
    """The finite number of attribute `key` of the attribute dict `a` (`default` when absent)."""
    return number(a.get(key, default), what, key)


def _int(a, key, default, what):
    """The integer of attribute `key` of the attribute dict `a` (`default` when absent), within 32 bits."""
    text = a.get(key, default)
    try:
        x = int(text)
    except (TypeError, ValueError):
        raise MJCFError(f"{what}: {key}={text!r} is not an integer") from None
    if not -2 ** 31 <= x < 2 ** 31:
        raise MJCFError(f"{what}: {key}={text!r} is not accepted: expected a 32-bit integer")
    return x


def _load_tree(path, chain=(), budget=None):
    """Parse a file and inline its <include file=...> elements (paths relative to the including file). The
    elements are walked without recursion; an included file is expanded before it is inlined, at most
    MAX_INCLUDE_DEPTH files deep and MAX_INCLUDES includes in all (`budget`: those left)."""
    budget = [MAX_INCLUDES] if budget is None else budget
    chain = chain + (path,)
    root = ET.parse(path).getroot()
    base = os.path.dirname(path)
    stack = [root]
    while stack:
        elem = stack.pop()
        i = 0
        while i < len(elem):
            child = elem[i]
            if child.tag != "include":
                stack.append(child)
                i += 1
                continue
            if not child.get("file"):
                raise MJCFError(f"{path}: an <include> has no file")
            inc_path = os.path.join(base, child.get("file"))
            if inc_path in chain:
                raise MJCFError(f"{inc_path}: recursive include")
            if len(chain) >= MAX_INCLUDE_DEPTH:
                raise MJCFError(f"{inc_path}: included {len(chain)} files deep: at most {MAX_INCLUDE_DEPTH} are "
                                "accepted")
            budget[0] -= 1
            if budget[0] < 0:
                raise MJCFError(f"{inc_path}: more than {MAX_INCLUDES} <include> elements expanded in all: at most "
                                f"{MAX_INCLUDES} are accepted")
            try:
                subs = list(_load_tree(inc_path, chain, budget))
            except OSError as exc:
                raise MJCFError(f"{path}: cannot read the included file {inc_path!r} ({exc})") from None
            # MuJoCo's rule: a relative file an included file names (a mesh, a texture) is relative to that file's
            # folder (then to the compiler's meshdir, if any); inlined here, it gets that folder as its prefix
            folder = os.path.dirname(child.get("file"))
            if folder:
                for sub in subs:
                    for el in sub.iter():
                        name = el.get("file")
                        if name and not os.path.isabs(name):
                            el.set("file", os.path.join(folder, name))
            elem.remove(child)
            for j, sub in enumerate(subs):
                elem.insert(i + j, sub)
            i += len(subs)  # (already expanded)
    return root


class _Defaults:
    """MJCF default classes: each class maps a tag to its attribute dict, inheriting from its parent class."""

    def __init__(self, root):
        self.classes = {"main": {}}
        # (element, class name, parent class name): a class is read before the classes nested in it, without
        # recursion however deep they nest
        stack = [(d, "main", None, 1) for d in reversed(root.findall("default"))]
        while stack:
            elem, name, parent, depth = stack.pop()
            if depth > MAX_DEFAULT_DEPTH or len(self.classes) > MAX_DEFAULT_CLASSES:
                raise MJCFError(f"<default class={name!r}>: default classes nested {depth} deep, or more than "
                                f"{MAX_DEFAULT_CLASSES} of them: at most {MAX_DEFAULT_DEPTH} deep and "
                                f"{MAX_DEFAULT_CLASSES} are accepted")
            attrs = copy.deepcopy(self.classes[parent]) if parent else {}
            for child in elem:
                if child.tag != "default":
                    attrs.setdefault(child.tag, {}).update(child.attrib)
            self.classes[name] = attrs
            stack.extend((child, child.get("class"), name, depth + 1) for child in reversed(elem.findall("default")))

    def get(self, elem, cls):
        cls = elem.get("class", cls)
        if cls not in self.classes:
            raise MJCFError(f"<{elem.tag}> refers to an unknown default class {cls!r}")
        merged = dict(self.classes[cls].get(elem.tag, {}))
        merged.update(elem.attrib)
        return merged


class _Loader:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.root = _load_tree(self.path)
        if self.root.tag != "mujoco":
            raise MJCFError(f"{path}: the root element is <{self.root.tag}>, not <mujoco>")
        comp = {}  # every <compiler> element's attributes, in file order (an included file may bring one)
        for c in self.root.findall("compiler"):
            comp.update(c.attrib)
        if comp.get("angle", "degree") not in ("degree", "radian"):
            raise MJCFError(f"<compiler angle={comp['angle']!r}> is not accepted: expected 'degree' or 'radian'")
        self.degrees = comp.get("angle", "degree") == "degree"
        self.eulerseq = comp.get("eulerseq", "xyz")
        if len(self.eulerseq) != 3 or any(c not in "xyzXYZ" for c in self.eulerseq):
            raise MJCFError(f"<compiler eulerseq={self.eulerseq!r}> is not accepted: expected three of x, y, z, X, "
                            "Y, Z")
        self.autolimits = comp.get("autolimits", "true") == "true"
        self.inertiafromgeom = comp.get("inertiafromgeom", "auto")
        self.settotalmass = _num(comp, "settotalmass", -1, "<compiler>")
        self.boundmass = _num(comp, "boundmass", 0, "<compiler>")
        self.boundinertia = _num(comp, "boundinertia", 0, "<compiler>")
        n_bodies = sum(1 for _ in self.root.iter("body"))
        if n_bodies > MAX_BODIES:
            raise MJCFError(f"{path}: {n_bodies} bodies: at most {MAX_BODIES} are accepted")
        base = os.path.dirname(self.path)
        self.meshdir = os.path.join(base, comp.get("meshdir", comp.get("assetdir", "")))
        self.defaults = _Defaults(self.root)
        self.meshes = {}
        for asset in self.root.findall("asset"):
            for m in asset.findall("mesh"):
                a = self.defaults.get(m, "main")
                f = a.get("file")
                if f is None:
                    raise MJCFError(f"<mesh name={m.get('name')!r}>: only meshes from a file are read")
                name = a.get("name") or os.path.splitext(os.path.basename(f))[0]
                scale = _floats(a.get("scale", "1 1 1"), 3, f"mesh {name!r}", "scale")
                self.meshes[name] = (os.path.join(self.meshdir, f), scale)
        self.hfields = {}  # hfield name -> (heights [ncol, nrow] (m, x then y), (hx, hy), (rx, ry))
        for asset in self.root.findall("asset"):
            for h in asset.findall("hfield"):
                self.hfields[h.get("name") or f"hfield{len(self.hfields)}"] = self.hfield(h, base)
        self.materials = {}  # material name -> RGB
        for asset in self.root.findall("asset"):
            for m in asset.findall("material"):
                a = self.defaults.get(m, "main")
                if m.get("name") and "rgba" in a:
                    rgba = _floats(a["rgba"], 4, f"material {m.get('name')!r}", "rgba")
                    self.materials[m.get("name")] = np.clip(rgba[:3], 0.0, 1.0)
        self.bodies = []
        self.joint_types = {}  # joint name -> type code
        self.sites = {}  # site name -> (body name, pos, quat in the body frame)

    def hfield(self, h, base):
        """An <hfield> asset as MuJoCo reads it: `size` (radius_x, radius_y, elevation_z, base_z), the elevation of
        nrow x ncol vertices from `elevation` (row-major, its first row at +y) or a PNG `file` (grey levels, its top
        row at +y), or zeros; normalised to [0, 1] (minus its minimum, over its range) and scaled by elevation_z.
        The base below the surface (base_z) is not modelled: the surface is the terrain, as a Terrain morph's."""
        what = f"<hfield name={h.get('name')!r}>"
        size = _floats(h.get("size", ""), 4, what, "size")
        if min(size[:3]) <= 0 or size[3] < 0:
            raise MJCFError(f"{what}: size = {h.get('size')!r} is not accepted: expected radius_x, radius_y, "
                            "elevation_z > 0 and base_z >= 0")
        if h.get("file") is not None:
            import imageio.v3 as iio

            path = os.path.join(base, h.get("file"))
            try:
                img = np.asarray(iio.imread(path), dtype=np.float64)
            except Exception as exc:  # (a missing or unreadable image)
                raise MJCFError(f"{what}: file {path!r} could not be read as an image ({exc})") from None
            data = img if img.ndim == 2 else img[..., :3].mean(axis=-1)
        else:
            nrow, ncol = _int(h, "nrow", 0, what), _int(h, "ncol", 0, what)
            if nrow < 2 or ncol < 2:
                raise MJCFError(f"{what}: nrow = {nrow}, ncol = {ncol}: expected a file, or nrow and ncol of at "
                                "least 2")
            data = np.zeros((nrow, ncol))
            if h.get("elevation") is not None:
                values = _floats(h.get("elevation"), what=what, attr="elevation")
                if len(values) != nrow * ncol:
                    raise MJCFError(f"{what}: elevation has {len(values)} numbers for nrow x ncol = {nrow * ncol}")
                data = np.asarray(values).reshape(nrow, ncol)
        if data.ndim != 2 or min(data.shape) < 2:
            raise MJCFError(f"{what}: its elevation is {data.shape}: expected at least 2 x 2 vertices")
        span = data.max() - data.min()
        data = (data - data.min()) / span if span > 0 else np.zeros_like(data)
        nrow, ncol = data.shape
        heights = np.flipud(data).T * size[2]  # [x (columns), y (rows from -y)]
        return heights, (2 * size[0] / (ncol - 1), 2 * size[1] / (nrow - 1)), (size[0], size[1])

    def angle(self, x):
        return np.deg2rad(x) if self.degrees else x

    def orientation(self, a, what):
        if "quat" in a:
            q = _floats(a["quat"], 4, what, "quat")
            if np.linalg.norm(q) < 1e-12:
                raise MJCFError(f"{what}: quat = {a['quat']!r} is not accepted: expected a non-zero quaternion")
            return quat_normalize(q)
        if "euler" in a:
            return euler_to_quat(self.angle(_floats(a["euler"], 3, what, "euler")), self.eulerseq)
        if "axisangle" in a:
            v = _floats(a["axisangle"], 4, what, "axisangle")
            if np.linalg.norm(v[:3]) < 1e-12:
                raise MJCFError(f"{what}: axisangle = {a['axisangle']!r} is not accepted: expected a non-zero axis")
            return axis_angle(v[:3], self.angle(v[3]))
        if "xyaxes" in a:
            v = _floats(a["xyaxes"], 6, what, "xyaxes")
            x = v[:3] / max(np.linalg.norm(v[:3]), 1e-300)
            y = v[3:] - x * np.dot(x, v[3:])
            if np.linalg.norm(v[:3]) < 1e-12 or np.linalg.norm(y) < 1e-12:
                raise MJCFError(f"{what}: xyaxes = {a['xyaxes']!r} is not accepted: expected two independent axes")
            y /= np.linalg.norm(y)
            return mat_to_quat(np.stack([x, y, np.cross(x, y)], axis=1))
        if "zaxis" in a:
            z = _floats(a["zaxis"], 3, what, "zaxis")
            if np.linalg.norm(z) < 1e-12:
                raise MJCFError(f"{what}: zaxis = {a['zaxis']!r} is not accepted: expected a non-zero axis")
            return frame_from_z(z)
        return np.array([1.0, 0, 0, 0])

    def load(self):
        worlds = self.root.findall("worldbody")  # an <include> can bring a second one
        if not worlds:
            raise MJCFError(f"{self.path}: no <worldbody>")
        for w in worlds:
            self.tree(w)
        static = [self.geom(g, "main", "<worldbody>") for w in worlds for g in w.findall("geom")]
        if static:  # last, so that the first body is the model's base
            self.bodies.append(BodyDesc("world", -1, np.zeros(3), np.array([1.0, 0, 0, 0]), geoms=static,
                                        visuals=[g for g in static if g._visible]))
        if self.settotalmass > 0:  # after the bounds, over every body but the world (MuJoCo's mj_setTotalmass)
            total = sum(b.mass for b in self.bodies)  # (the static geoms' world body has none)
            scale = max(1e-15, self.settotalmass / max(1e-15, total))
            for b in self.bodies:
                b.mass *= scale
                b.inertia = b.inertia * scale
        fixed = [t for ts in self.root.findall("tendon") for t in ts.findall("fixed")]
        tendons = [self.tendon(t, i) for i, t in enumerate(fixed)]
        for ts in self.root.findall("tendon"):
            for t in ts:
                if t.tag != "fixed":
                    raise MJCFError(f"<tendon><{t.tag} name={t.get('name')!r}>: only fixed tendons are modelled")
        by_name = {t.name: t for t in tendons}
        actuators = []
        for act in self.root.findall("actuator"):
            for a in act:
                if a.tag in ACTUATOR_TAGS:
                    actuators.extend(self.actuator(a, by_name))
        equalities = [self.equality(e, i, by_name) for i, e in enumerate(
            [e for eqs in self.root.findall("equality") for e in eqs])]
        return RobotDesc(self.root.get("model", os.path.basename(self.path)), self.bodies, actuators, tendons,
                         self.fluid(), equalities=equalities)

    def equality(self, elem, index, tendons):
        """An <equality> element's EqualityDesc (MuJoCo's meanings: model.EqualityDesc). solref and solimp are read
        and not used: the constraint stage holds an equality exactly (velocity rows, and the position pass for the
        drift), as it does joint limits."""
        a = self.defaults.get(elem, "main")
        name = a.get("name", f"equality{index}")
        what = f"<equality><{elem.tag} name={name!r}>" if "name" in a else f"<equality><{elem.tag}> #{index}"
        if elem.tag not in ("connect", "weld", "joint", "tendon"):
            raise MJCFError(f"{what}: <{elem.tag}> equalities are not modelled (connect, weld, joint and tendon are)")
        active = a.get("active", "true")
        if active not in ("true", "false"):
            raise MJCFError(f"{what}: active = {active!r} is not accepted: expected 'true' or 'false'")
        eq = EqualityDesc(elem.tag, name, "", active=active == "true")
        if elem.tag in ("joint", "tendon"):
            key, known = ("joint", self.joint_types) if elem.tag == "joint" else ("tendon", tendons)
            eq.obj1, eq.obj2 = a.get(key + "1"), a.get(key + "2")
            for obj in (eq.obj1, eq.obj2):
                if obj is not None and obj not in known:
                    raise MJCFError(f"{what}: unknown {key} {obj!r}")
                if elem.tag == "joint" and obj is not None and known[obj] not in (HINGE, SLIDE):
                    raise MJCFError(f"{what}: joint {obj!r} is not a hinge or a slide joint (a joint equality "
                                    "relates two joint positions)")
            if eq.obj1 is None:
                raise MJCFError(f"{what}: {key}1 is required")
            coef = _floats(a.get("polycoef", "0 1 0 0 0"), what=what, attr="polycoef")
            if not 1 <= len(coef) <= 5:
                raise MJCFError(f"{what}: polycoef = {a['polycoef']!r} is not accepted: expected up to 5 numbers")
            eq.polycoef = np.zeros(5)
            eq.polycoef[:len(coef)] = coef
            return eq
        bodies = {b.name for b in self.bodies}
        if "site1" in a or "site2" in a:
            sites = []
            for key in ("site1", "site2"):
                if a.get(key) not in self.sites:
                    raise MJCFError(f"{what}: {key} = {a.get(key)!r} names no site of the file (a site-based "
                                    "equality needs both sites)")
                sites.append(self.sites[a[key]])
            (eq.obj1, p1, q1), (eq.obj2, p2, q2) = sites
            if elem.tag == "connect":
                eq.anchor, eq.anchor2 = p1, p2
            else:
                eq.anchor, eq.relpose = p2, np.concatenate([p1, quat_mul(q1, q2 * np.array([1.0, -1.0, -1.0, -1.0]))])
                eq.torquescale = _num(a, "torquescale", 1.0, what)
            return eq
        eq.obj1, eq.obj2 = a.get("body1"), a.get("body2")
        if eq.obj1 is None:
            raise MJCFError(f"{what}: body1 (or site1 and site2) is required")
        if eq.obj1 == "world" or eq.obj1 not in bodies:
            raise MJCFError(f"{what}: body1 = {eq.obj1!r} names no body of the file (body2 may be the world)")
        if eq.obj2 is not None and eq.obj2 not in bodies and eq.obj2 != "world":
            raise MJCFError(f"{what}: unknown body {eq.obj2!r}")
        if eq.obj2 == "world":
            eq.obj2 = None
        eq.anchor = _floats(a.get("anchor", "0 0 0"), 3, what, "anchor")
        if elem.tag == "weld":
            eq.torquescale = _num(a, "torquescale", 1.0, what)
            if "relpose" in a:
                rel = _floats(a["relpose"], 7, what, "relpose")
                if np.linalg.norm(rel[3:]) > 0:  # (MuJoCo: a zero quaternion means "where the file places them")
                    eq.relpose = np.concatenate([rel[:3], quat_normalize(rel[3:])])
        return eq

    def fluid(self):
        """The <option> fluid (density, viscosity, wind), or None when it exerts no force."""
        opt = {}
        for o in self.root.findall("option"):
            opt.update(o.attrib)
        density, viscosity = _num(opt, "density", 0, "<option>"), _num(opt, "viscosity", 0, "<option>")
        if density == 0 and viscosity == 0:
            return None
        return FluidDesc(density, viscosity, _floats(opt.get("wind", "0 0 0"), 3, "<option>", "wind"))

    def tendon(self, elem, index):
        a = self.defaults.get(elem, "main")
        name = a.get("name", f"tendon{index}")
        joints = []
        for j in elem:
            if j.tag != "joint":
                continue
            if j.get("joint") not in self.joint_types:
                raise MJCFError(f"tendon {name!r}: unknown joint {j.get('joint')!r}")
            if self.joint_types[j.get("joint")] not in (HINGE, SLIDE):
                raise MJCFError(f"tendon {name!r}: joint {j.get('joint')!r} is not a hinge or a slide joint (a fixed "
                                "tendon's length is sum coef q)")
            joints.append((j.get("joint"), _num(j.attrib, "coef", 1.0, f"tendon {name!r}")))
        if not joints:
            raise MJCFError(f"tendon {name!r}: a fixed tendon needs at least one <joint>")
        limited = a.get("limited", "auto")
        rng = None
        if "range" in a and (limited == "true" or (limited == "auto" and self.autolimits)):
            rng = tuple(_floats(a["range"], 2, f"tendon {name!r}", "range"))
        spring = None
        if "springlength" in a:
            v = _floats(a["springlength"], what=f"tendon {name!r}", attr="springlength")
            if len(v) not in (1, 2):
                raise MJCFError(f"tendon {name!r}: springlength takes one or two numbers")
            if not (len(v) == 1 and v[0] == -1) and not (len(v) == 2 and v[0] == -1 and v[1] == -1):
                spring = (float(v[0]), float(v[-1]))
        stiffness, damping = _num(a, "stiffness", 0, f"tendon {name!r}"), _num(a, "damping", 0, f"tendon {name!r}")
        return TendonDesc(name, joints, stiffness, damping, spring, rng)

    def tree(self, world):
        """The bodies under <worldbody> in depth-first order (a body before its children, siblings in file order),
        walked without recursion however deep they nest."""
        stack = [(b, -1, "main") for b in reversed(world.findall("body"))]
        while stack:
            elem, parent, cls = stack.pop()
            cls = elem.get("childclass", cls)
            index = len(self.bodies)
            self.body(elem, parent, cls)
            stack.extend((child, index, cls) for child in reversed(elem.findall("body")))

    def body(self, elem, parent, cls):
        a = elem.attrib
        name = a.get("name", f"body{len(self.bodies)}")
        what = f"body {name!r}"
        pos = _floats(a.get("pos", "0 0 0"), 3, what, "pos")
        body = BodyDesc(name, parent, pos, self.orientation(a, what))
        self.bodies.append(body)
        for j in elem:
            if j.tag == "freejoint":
                body.joints.append(JointDesc(j.get("name", f"{body.name}_free"), FREE))
                self.joint_types[body.joints[-1].name] = FREE
            elif j.tag == "joint":
                body.joints.append(self.joint(j, cls, what))
        body.geoms = [self.geom(g, cls, what) for g in elem.findall("geom")]
        for site in elem.findall("site"):
            sa = self.defaults.get(site, cls)
            if "name" in sa:
                where = f"{what}, site {sa['name']!r}"
                self.sites[sa["name"]] = (name, _floats(sa.get("pos", "0 0 0"), 3, where, "pos"),
                                          self.orientation(sa, where))
        body.visuals = [g for g in body.geoms if g._visible]
        inertial = elem.find("inertial")
        if inertial is not None and self.inertiafromgeom != "true":
            ia = inertial.attrib
            what = f"{what}, <inertial>"
            if "mass" not in ia:
                raise MJCFError(f"{what} has no mass")
            body.mass = _num(ia, "mass", None, what)
            body.com = _floats(ia.get("pos", "0 0 0"), 3, what, "pos")
            if "fullinertia" in ia:
                xx, yy, zz, xy, xz, yz = _floats(ia["fullinertia"], 6, what, "fullinertia")
                body.inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
            else:
                from genesis_core.rotations import quat_to_mat

                r = quat_to_mat(self.orientation(ia, what))
                body.inertia = r @ np.diag(_floats(ia.get("diaginertia", "0 0 0"), 3, what, "diaginertia")) @ r.T
        elif self.inertiafromgeom != "false":
            body.mass, body.com, body.inertia = inertia_from_geoms(body.geoms, lambda g: g._density, what)
            body.mass_from = geoms_source(body.geoms)
        if self.boundmass > 0 or self.boundinertia > 0:  # the compiler's floors on mass and principal inertias
            body.mass = max(body.mass, self.boundmass)
            w, v = np.linalg.eigh((body.inertia + body.inertia.T) / 2)
            body.inertia = (v * np.maximum(w, self.boundinertia)) @ v.T

    def joint(self, elem, cls, where):
        a = self.defaults.get(elem, cls)
        name = a.get("name", f"joint{len(self.joint_types)}")
        what = f"{where}, joint {name!r}" if "name" in a else f"{where}, a joint"
        jtype = JOINT_TYPES.get(a.get("type", "hinge"))
        if jtype is None:
            raise MJCFError(f"{what}: unknown type {a.get('type')!r}")
        self.joint_types[name] = jtype
        axis = _floats(a.get("axis", "0 0 1"), 3, what, "axis")
        if np.linalg.norm(axis) < 1e-12:
            raise MJCFError(f"{what}: zero axis")
        limited = a.get("limited", "auto")
        rng = None
        if "range" in a and (limited == "true" or (limited == "auto" and self.autolimits)):
            lo, hi = _floats(a["range"], 2, what, "range")
            rng = (self.angle(lo), self.angle(hi)) if jtype == HINGE else (lo, hi)
        springref, ref = _num(a, "springref", 0.0, what), _num(a, "ref", 0.0, what)
        if jtype == HINGE:
            springref, ref = self.angle(springref), self.angle(ref)
        if jtype not in (HINGE, SLIDE):
            ref = springref = 0.0
        return JointDesc(name, jtype, _floats(a.get("pos", "0 0 0"), 3, what, "pos"), axis / np.linalg.norm(axis),
                         rng, _num(a, "damping", 0.0, what), _num(a, "armature", 0.0, what),
                         _num(a, "stiffness", 0.0, what), springref, ref, armature_given="armature" in a)

    def geom(self, elem, cls, where):
        a = self.defaults.get(elem, cls)
        name = a.get("name", "")
        what = f"{where}, geom {name!r}" if name else f"{where}, a {a.get('type', 'sphere')} geom"
        gtype = GEOM_TYPES.get(a.get("type", "sphere"))
        if gtype is None:
            raise MJCFError(f"{what}: unsupported type {a.get('type')!r}")
        size = np.zeros(3)
        given = _floats(a.get("size", "0"), what=what, attr="size")[:3]
        size[: len(given)] = given
        pos = _floats(a.get("pos", "0 0 0"), 3, what, "pos")
        quat = self.orientation(a, what)
        if "fromto" in a and a.get("type") in ("capsule", "cylinder", "box", "ellipsoid"):
            ft = _floats(a["fromto"], 6, what, "fromto")
            p0, p1 = ft[:3], ft[3:]
            if np.linalg.norm(p1 - p0) < 1e-12:
                raise MJCFError(f"{what}: fromto points too close")
            pos = (p0 + p1) / 2
            quat = frame_from_z(p1 - p0)
            if a.get("type") in ("box", "ellipsoid"):  # (MuJoCo: both half-sizes across the axis are size[0])
                size[1:] = size[0], np.linalg.norm(p1 - p0) / 2
            else:
                size[1] = np.linalg.norm(p1 - p0) / 2
        mesh, scale = None, np.ones(3)
        if gtype == ELLIPSOID:
            if np.any(size < MIN_SIZE):
                raise MJCFError(f"{what}: size = {a.get('size')!r} is not accepted: expected three semi-axes of at "
                                f"least {MIN_SIZE:g} m")
        elif gtype == MESH:
            if a.get("mesh") not in self.meshes:
                raise MJCFError(f"{what}: unknown mesh {a.get('mesh')!r}")
            mesh, scale = self.meshes[a.get("mesh")]
        elif gtype == HFIELD:  # the grid's corner (-radius_x, -radius_y) is its frame's origin here
            if a.get("hfield") not in self.hfields:
                raise MJCFError(f"{what}: unknown hfield {a.get('hfield')!r}")
            heights, (hx, hy), (rx, ry) = self.hfields[a.get("hfield")]
            from genesis_core.rotations import quat_to_mat
            from genesis_core.terrain import triangles

            size = np.array([hx, hy, 0.0])
            pos = pos + quat_to_mat(quat) @ np.array([-rx, -ry, 0.0])
        friction = _floats(a.get("friction", "1"), what=what, attr="friction")
        if not len(friction):
            raise MJCFError(f"{what}: friction = {a.get('friction')!r} is not accepted: expected 1 to 3 numbers")
        g = GeomDesc(name, gtype, size, pos, quat, float(friction[0]), _int(a, "contype", 1, what),
                     _int(a, "conaffinity", 1, what), mesh, scale)
        g.margin, g.gap = _num(a, "margin", 0.0, what), _num(a, "gap", 0.0, what)
        g.asset = a.get("mesh") if gtype == MESH else a.get("hfield") if gtype == HFIELD else None
        if gtype == HFIELD:
            g.heights, g.triangles = heights, triangles(heights, hx, hy)
        g._visible = _int(a, "group", 0, what) in VISIBLE_GROUPS
        if "rgba" in a:
            g.rgba = np.clip(_floats(a["rgba"], 4, what, "rgba")[:3], 0.0, 1.0)
        elif a.get("material") in self.materials:
            g.rgba = self.materials[a["material"]]
        g._density = (_num(a, "density", 1000.0, what), _num(a, "mass", None, what) if "mass" in a else None)
        return g

    def actuator(self, elem, tendons):
        """The actuator's ActuatorDescs: one for a joint, one per joint of a fixed tendon, none for the site and
        body transmissions (not modelled)."""
        a = self.defaults.get(elem, "main")
        if a.get("joint") is not None:
            return [self._actuator(elem, a, a["joint"])]
        if a.get("tendon") is not None:
            if a["tendon"] not in tendons:
                raise MJCFError(f"actuator {a.get('name')!r}: unknown tendon {a['tendon']!r}")
            return [self._actuator(elem, a, joint) for joint, _ in tendons[a["tendon"]].joints]
        return []

    def _actuator(self, elem, a, joint):
        desc = self._actuator_gains(elem, a, joint)
        desc.name = a.get("name", "")
        return desc

    def _actuator_gains(self, elem, a, joint):
        what = f"actuator {a.get('name', joint)!r}"
        fr = _floats(a["forcerange"], 2, what, "forcerange") if "forcerange" in a else None
        if elem.tag == "position":
            return ActuatorDesc(joint, kp=_num(a, "kp", 1.0, what), kv=_num(a, "kv", 0.0, what), forcerange=fr)
        if elem.tag == "velocity":
            return ActuatorDesc(joint, kv=_num(a, "kv", 1.0, what), forcerange=fr)
        if elem.tag == "general":
            bias = np.zeros(3)
            given = _floats(a.get("biasprm", "0 0 0"), what=what, attr="biasprm")
            bias[: min(3, len(given))] = given[:3]
            return ActuatorDesc(joint, kp=-bias[1], kv=-bias[2], forcerange=fr)
        return ActuatorDesc(joint, forcerange=fr)  # motor: force control


def load_mjcf(path) -> RobotDesc:
    try:
        return _Loader(path).load()
    except ET.ParseError as exc:
        raise MJCFError(f"{path}: not well-formed XML ({exc})") from None
    except (KeyError, ValueError) as exc:
        if isinstance(exc, ModelError):
            raise
        raise MJCFError(f"{path}: {exc}") from None
