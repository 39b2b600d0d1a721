"""From a morph to a RobotDesc: primitives and meshes become one body (free unless fixed), robot files go through
the loaders."""

import dataclasses

import numpy as np

import genesis_core as gs

from .checks import check_conditioning
from .decompose import convex_parts
from .mjcf import load_mjcf
from .model import BOX, CAPSULE, CYLINDER, FREE, HFIELD, MESH, PLANE, SPHERE, BodyDesc, GeomDesc, JointDesc, ModelError
from .model import RobotDesc, inertia_from_geoms, merge_fixed_links
from genesis_core.rotations import frame_from_z
from .urdf import load_urdf

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def _primitive(morph, material):
    if isinstance(morph, gs.morphs.Plane):
        geom = GeomDesc("plane", PLANE, np.zeros(3), quat=frame_from_z(morph.normal))
        return RobotDesc("plane", [BodyDesc("plane", -1, np.zeros(3), IDENTITY, geoms=[geom])])
    if isinstance(morph, gs.morphs.Box):
        geom = GeomDesc("box", BOX, np.asarray(morph.size) / 2)
    elif isinstance(morph, gs.morphs.Sphere):
        geom = GeomDesc("sphere", SPHERE, np.array([morph.radius, 0.0, 0.0]))
    elif isinstance(morph, gs.morphs.Capsule):
        geom = GeomDesc("capsule", CAPSULE, np.array([morph.radius, morph.height / 2, 0.0]))
    else:
        geom = GeomDesc("cylinder", CYLINDER, np.array([morph.radius, morph.height / 2, 0.0]))
    geom.friction = 1.0
    body = BodyDesc(type(morph).__name__.lower(), -1, np.zeros(3), IDENTITY, geoms=[geom])
    body.mass, body.com, body.inertia = inertia_from_geoms([geom], lambda g: (material.rho, None), "the morph")
    if not morph.fixed:
        body.joints.append(JointDesc("root", FREE))
    return RobotDesc(type(morph).__name__.lower(), [body])


def _terrain(morph):
    """A Terrain morph: one static body with one height-field geom (metres), drawn as its triangles."""
    from genesis_core.terrain import triangles

    heights = np.asarray(morph.raw_heights(), dtype=np.float64) * morph.vertical_scale
    hs = morph.horizontal_scale
    surface = triangles(heights, hs)
    geom = GeomDesc("terrain", HFIELD, np.array([hs, hs, 0.0]), heights=heights, triangles=surface)
    geom.friction = 1.0
    visual = GeomDesc("terrain_visual", MESH, np.zeros(3), triangles=surface)
    geoms = [geom] if morph.collision else []
    return RobotDesc("terrain", [BodyDesc("terrain", -1, np.zeros(3), IDENTITY, geoms=geoms,
                                          visuals=[visual] if morph.visualization else [])])


def _mesh(morph, material):
    """A Mesh morph: one body whose collision shape is the convex hull of the file's vertices, or, for a closed
    mesh further than decompose_object_error_threshold from convex, its convex parts (genesis_rigid.decompose);
    mass and inertia from those shapes."""
    scale = np.full(3, morph.scale)
    threshold = morph.decompose_object_error_threshold if morph.convexify else 0.0
    parts = convex_parts(morph.file, scale, threshold, morph.coacd_options)
    if parts is None:
        geoms = [GeomDesc("mesh", MESH, np.zeros(3), mesh_file=morph.file, mesh_scale=scale)]
    else:
        geoms = [GeomDesc(f"mesh_part{i}", MESH, np.zeros(3), vertices=p) for i, p in enumerate(parts)]
    for g in geoms:
        g.hull()  # a bad part fails here, at add_entity
    # drawn as the file's triangles (its collision shape is their hull or convex parts)
    visual = GeomDesc("mesh_visual", MESH, np.zeros(3), mesh_file=morph.file, mesh_scale=scale)
    body = BodyDesc("mesh", -1, np.zeros(3), IDENTITY, geoms=geoms, visuals=[visual])
    body.mass, body.com, body.inertia = inertia_from_geoms(geoms, lambda g: (material.rho, None), "the mesh")
    if not morph.fixed:
        body.joints.append(JointDesc("root", FREE))
    return RobotDesc("mesh", [body])


def _convexify(robot, morph):
    """A robot file's collision meshes as the morph's convexify options ask (genesis_core.morphs.RigidMeshOptions):
    each mesh geom whose concavity exceeds the threshold (the robot one for an articulated model, the object one
    otherwise; 0 with convexify=False) becomes its convex parts, at the mesh's pose, with its friction, filter and
    margins; the body is still drawn as the file's meshes."""
    articulated = any(j.type != FREE for body in robot.bodies for j in body.joints)
    if not morph.convexify:
        threshold = 0.0
    else:
        threshold = morph.decompose_robot_error_threshold if articulated else morph.decompose_object_error_threshold
    if not np.isfinite(threshold):
        return
    for body in robot.bodies:
        geoms = []
        for g in body.geoms:
            parts = None
            if g.type == MESH and g.mesh_file is not None and (g.contype or g.conaffinity):
                try:
                    parts = convex_parts(g.mesh_file, g.mesh_scale, threshold, morph.coacd_options)
                except ModelError as exc:
                    raise type(exc)(f"{robot.body_word} {body.name!r}, geom {g.name!r}: {exc}") from None
            if not parts:
                geoms.append(g)
                continue
            if not body.visuals:  # (drawn as the file's meshes, not as the parts)
                body.visuals = list(body.geoms)
            geoms += [dataclasses.replace(g, name=f"{g.name}_part{i}", mesh_file=None, mesh_scale=np.ones(3),
                                          vertices=p) for i, p in enumerate(parts)]
        body.geoms = geoms


def _default_armature(robot, morph):
    """Genesis World's default_armature: the rotor inertia of every hinge, slide and ball joint's dofs whose
    file gives none (genesis_core.morphs.RobotFileOptions)."""
    if morph.default_armature is None:
        return
    for body in robot.bodies:
        for j in body.joints:
            if j.type != FREE and not j.armature_given:
                j.armature = float(morph.default_armature)


def _filter(robot, morph):
    """The morph's contype/conaffinity on each of its geoms (primitives and meshes)."""
    for body in robot.bodies:
        for g in body.geoms:
            g.contype, g.conaffinity = morph.contype, morph.conaffinity
    return robot


def describe(morph, material) -> RobotDesc:
    """The robot description of a morph, checked by the validation pass (genesis_rigid.checks) before anything is
    built from it; what a file holds that the engine cannot simulate raises gs.ModelFileError naming the file, the
    element and the value."""
    try:
        if isinstance(morph, (gs.morphs.Plane, gs.morphs.Box, gs.morphs.Sphere, gs.morphs.Capsule,
                              gs.morphs.Cylinder)):
            return _filter(_primitive(morph, material), morph).validate()
        if isinstance(morph, gs.morphs.Terrain):
            return _filter(_terrain(morph), morph).validate()
        if isinstance(morph, gs.morphs.URDF):
            robot = load_urdf(morph.file, fixed=morph.fixed, density=material.rho).validate()
            names = {b.name for b in robot.bodies}
            unknown = [n for n in morph.links_to_keep if n not in names]
            if unknown:
                raise gs.OptionError(f"URDF(file={morph.file!r}): links_to_keep names no link of the file: {unknown}; "
                                     f"its links: {sorted(names)}.")
            if morph.merge_fixed_links:
                merge_fixed_links(robot, morph.links_to_keep)
        elif isinstance(morph, gs.morphs.MJCF):
            robot = load_mjcf(morph.file).validate()
        elif isinstance(morph, gs.morphs.Mesh):
            return _filter(_mesh(morph, material), morph).validate()
        else:
            raise gs.OptionError(f"the rigid solver does not simulate {type(morph).__name__} morphs.")
        if morph.scale != 1.0:
            _scale(robot, morph.scale)
            try:
                robot.validate()  # (the scaled lengths and masses against the limits)
            except ModelError as exc:
                raise ModelError(f"scaled by scale={morph.scale:g}: {exc}") from None
        _default_armature(robot, morph)
        _convexify(robot, morph)
        check_conditioning(robot, gs.precision == "64", robot.body_word)
        for body in robot.bodies:  # hulls now, so that a bad collision mesh fails at add_entity
            for g in body.geoms:
                if g.type == MESH and (g.contype or g.conaffinity):
                    try:
                        g.hull()
                    except ModelError as exc:
                        raise type(exc)(f"{robot.body_word} {body.name!r}, geom {g.name!r}: {exc}") from None
    except ModelError as exc:
        source = f"file={morph.file!r}" if getattr(morph, "file", None) else "..."
        raise gs.ModelFileError(f"{type(morph).__name__}({source}): {exc}. Nothing was added to the scene.") from None
    return robot


def _scale(robot, s):
    for eq in robot.equalities:  # (points in body frames; a joint equality's polynomial is left as the file has it)
        eq.anchor = eq.anchor * s
        if eq.anchor2 is not None:
            eq.anchor2 = eq.anchor2 * s
        if eq.relpose is not None:
            eq.relpose = np.concatenate([eq.relpose[:3] * s, eq.relpose[3:]])
    for body in robot.bodies:
        body.pos = body.pos * s
        body.com = body.com * s
        body.mass *= s ** 3
        body.inertia = body.inertia * s ** 5
        for j in body.joints:
            j.pos = j.pos * s
        for g in body.geoms + [v for v in body.visuals if not any(v is g for g in body.geoms)]:
            g.pos = g.pos * s
            g.size = g.size * s
            g.mesh_scale = g.mesh_scale * s
            if g.vertices is not None:  # (a convex part)
                g.vertices = g.vertices * s
                g._part_hull = None
