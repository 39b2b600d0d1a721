"""Which of Genesis World's public names genesis-core lacks, by module and class: the generated section of
docs/compatibility.md.

    .venv/bin/python compat/public_names.py --write     # refresh compat/genesis_public_names.json and the doc
    .venv/bin/python compat/public_names.py --check     # exit 1 if the doc's section (or the JSON) is out of date
    .venv/bin/python compat/public_names.py --extract   # refresh only the JSON (needs Genesis World's source)
    .venv/bin/python compat/public_names.py             # print the section

Genesis World's names are read from its source with `ast`, never by importing it (it is not installed beside
genesis-core, and importing it would need its GPU stack). The source is a bare git mirror (read with `git show`)
or a checkout folder: --genesis PATH, else $GENESIS_SOURCE, else DEFAULT_SOURCE. The names found are kept in
compat/genesis_public_names.json, which stands in for the source where there is none (CI): the doc then stays
checkable against genesis-core's API everywhere.

What is read, per group (MODULE_GROUPS, CLASS_GROUPS, FIELD_GROUPS below):
- a module (`gs`, `gs.morphs`, ...): its `__all__` where it has one, else what it binds at module level: classes,
  functions, assignments, the names of `global` statements in its functions (`gs.tc_float`, set by `gs.init`),
  relative imports (star imports expanded), the submodules genesis/__init__.py's imports bind (`gs.options`,
  `gs.utils`), and two patterns of names made at run time (an enum's members put in `globals()`, torch functions
  wrapped with `setattr`). Absolute imports (numpy, torch, `import genesis as gs`) are not the module's own names
  and are left out;
- a class (`RigidEntity`, ...): its public methods, properties and class attributes, those of its Genesis World
  base classes, and the attributes its `__init__` sets on `self`;
- the fields of a module's option classes (`RigidOptions.dt`, `Box.size`, `Elastic.E`): annotated class
  attributes (pydantic fields), with those of the base classes; `Field(exclude=True)` ones (set by the class
  itself) and ClassVars left out.
Public means not starting with `_`. A construct the reader does not follow (a file that does not parse, a star
import of a module it cannot find, `__all__` that is not a literal, names put in `globals()` otherwise) is skipped
and counted; the counts are printed and kept in the JSON.

How genesis-core is asked: a module's name is looked up with getattr (an AttributeError other than the plain
"has no attribute" one, such as `gs.tc_float`'s before `gs.init`, means the name exists but is set up later; a
PluginNotInstalledError means it does not). A class's member counts when the class has it (properties included),
when it is an attrs field, or when the class's methods set it on `self`; the scene also serves
`scene.<solver>_solver` for each loaded solver plugin, and sets attributes on each entity it adds (`entity.name`).
An option class's field counts when the class's constructor takes it. Fields are counted only for the classes
genesis-core has (a class it lacks is listed once, in its module's group).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from collections import Counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SOURCE = "/work/.mirror/Genesis-Embodied-AI+Genesis/repo"
SOURCE_ENV = "GENESIS_SOURCE"
JSON_PATH = os.path.join(REPO, "compat", "genesis_public_names.json")
DOC_PATH = os.path.join(REPO, "docs", "compatibility.md")
BEGIN = "<!-- generated: public_names.py begin -->"
END = "<!-- generated: public_names.py end -->"
WRITE_COMMAND = ".venv/bin/python compat/public_names.py --write"
WIDTH = 120

# The groups, in the order the doc lists them. A module group's label is its path under `gs` in both engines.
MODULE_GROUPS = (
    "gs", "gs.constants", "gs.options", "gs.morphs", "gs.materials", "gs.materials.MPM", "gs.materials.PBD",
    "gs.materials.FEM", "gs.materials.SPH", "gs.materials.SF", "gs.surfaces", "gs.textures", "gs.renderers",
    "gs.sensors", "gs.recorders", "gs.utils.geom", "gs.tools",
)
# (label, Genesis World's classes as "module:Class" (several: the union of their names), genesis-core's class:
# "gs.<path>", "module:Class", "solver:<short name>" or "entity:<short name>" (that solver's entity class))
_ENT = "genesis.engine.entities."
CLASS_GROUPS = (
    ("Scene", ("genesis.engine.scene:Scene",), "gs.Scene"),
    ("Simulator (scene.sim)", ("genesis.engine.simulator:Simulator",), "gs.Scene"),
    ("RigidEntity", (_ENT + "rigid_entity.rigid_entity:RigidEntity",), "entity:rigid"),
    ("RigidLink", (_ENT + "rigid_entity.rigid_link:RigidLink",), "genesis_rigid.entity:RigidLink"),
    ("RigidJoint", (_ENT + "rigid_entity.rigid_joint:RigidJoint",), "genesis_rigid.entity:RigidJoint"),
    ("RigidGeom", (_ENT + "rigid_entity.rigid_geom:RigidGeom",), "genesis_rigid.entity:RigidGeom"),
    ("RigidSolver", ("genesis.engine.solvers.rigid.rigid_solver:RigidSolver",), "solver:rigid"),
    ("MPMEntity", (_ENT + "mpm_entity:MPMEntity",), "entity:mpm"),
    ("SPHEntity", (_ENT + "sph_entity:SPHEntity",), "entity:sph"),
    ("PBDEntity (PBD2DEntity, PBD3DEntity, PBDParticleEntity, PBDFreeParticleEntity)",
     tuple(_ENT + "pbd_entity:" + c for c in ("PBD2DEntity", "PBD3DEntity", "PBDParticleEntity",
                                                "PBDFreeParticleEntity")), "entity:pbd"),
    ("FEMEntity", (_ENT + "fem_entity:FEMEntity",), "entity:fem"),
)
# The module groups whose classes' fields are compared (label "<module> fields", names "Class.field").
FIELD_GROUPS = (
    "gs.options", "gs.morphs", "gs.materials", "gs.materials.MPM", "gs.materials.PBD", "gs.materials.FEM",
    "gs.materials.SPH", "gs.materials.SF", "gs.sensors", "gs.recorders",
)


# ----------------------------------------------------------------------------------------------------------------
# Genesis World's source


class GenesisSource:
    """Genesis World's Python files under `genesis/`: from a bare git mirror (`git show REV:path`), a checkout
    folder, or a dict of path -> text (for tests)."""

    def __init__(self, files: dict | None = None, reader=None, commit: str | None = None, paths=()):
        self._files = files  # path -> text, or None when read through `reader`
        self._reader = reader
        self.paths = set(files) if files is not None else set(paths)
        self.commit = commit

    @classmethod
    def open(cls, location: str, rev: str = "HEAD") -> "GenesisSource":
        """The source at `location` (a bare mirror or a checkout); raises FileNotFoundError if it holds none."""
        if os.path.isdir(os.path.join(location, "genesis")):
            paths = set()
            for root, _dirs, names in os.walk(os.path.join(location, "genesis")):
                paths.update(os.path.relpath(os.path.join(root, n), location).replace(os.sep, "/")
                             for n in names if n.endswith(".py"))
            commit = _git(location, "rev-parse", rev, git_dir=False)

            def read(path):
                with open(os.path.join(location, path), encoding="utf-8") as f:
                    return f.read()

            return cls(reader=read, commit=commit.strip() if commit else None, paths=paths)
        listing = _git(location, "ls-tree", "-r", "--name-only", rev, "--", "genesis") if os.path.isdir(
            location) else None
        if not listing:
            raise FileNotFoundError(f"no Genesis World source at {location!r} (a bare git mirror or a checkout)")
        commit = _git(location, "rev-parse", rev)

        def read(path):
            text = _git(location, "show", f"{rev}:{path}")
            if text is None:
                raise OSError(f"git show {rev}:{path} failed")
            return text

        return cls(reader=read, commit=commit.strip() if commit else None,
                   paths=[p for p in listing.splitlines() if p.endswith(".py")])

    def read(self, path: str) -> str:
        return self._files[path] if self._files is not None else self._reader(path)


def _git(location, *args, git_dir=True):
    cmd = ["git", f"--git-dir={location}", *args] if git_dir else ["git", "-C", location, *args]
    try:
        r = subprocess.run(cmd, capture_output=True, encoding="utf-8", errors="replace", timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def source_location(arg: str | None = None) -> str:
    return arg or os.environ.get(SOURCE_ENV) or DEFAULT_SOURCE


# ----------------------------------------------------------------------------------------------------------------
# Reading modules with ast


class Module:
    """One parsed module: its dotted name, whether it is a package, and its module-level bindings
    (name -> binding tuple, see Reader)."""

    def __init__(self, name: str, is_package: bool, tree: ast.Module):
        self.name, self.is_package, self.tree = name, is_package, tree
        self.bindings: dict = {}
        self.all: list | None = None  # __all__, when it is a literal
        self.ready = False


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, (ast.Name, ast.Attribute)) and ast.unparse(test).endswith("TYPE_CHECKING")


def _literal_strings(node):
    """The strings of a literal list/tuple (or a sum of them), else None."""
    if isinstance(node, (ast.List, ast.Tuple)):
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            return [e.value for e in node.elts]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_strings(node.left), _literal_strings(node.right)
        return None if left is None or right is None else left + right
    return None


class Reader:
    """Reads Genesis World's modules and classes statically. Bindings are tuples:
    ("def", module, node) a class or function defined here; ("value",) an assignment or a `global` name;
    ("ref", module_name, attr_or_None, relative) an import; ("external",) an import from outside `genesis`."""

    def __init__(self, source: GenesisSource):
        self.source = source
        self.modules: dict = {}
        self.skipped: Counter = Counter()

    # -- modules --------------------------------------------------------------------------------------------------

    def module(self, name: str) -> Module | None:
        if name in self.modules:
            return self.modules[name]
        self.modules[name] = None  # guards against import cycles while this one is read
        base = name.replace(".", "/")
        for path, is_package in ((base + ".py", False), (base + "/__init__.py", True)):
            if path not in self.source.paths:
                continue
            try:
                tree = ast.parse(self.source.read(path), filename=path)
            except (SyntaxError, ValueError, OSError, UnicodeDecodeError):
                self.skipped["file that cannot be read or parsed"] += 1
                return None
            mod = Module(name, is_package, tree)
            self.modules[name] = mod
            self._read_bindings(mod)
            return mod
        return None

    def _absolute(self, mod: Module, level: int, target: str | None) -> str:
        parts = mod.name.split(".")
        if not mod.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([target] if target else []))

    def _read_bindings(self, mod: Module):
        self._statements(mod, mod.tree.body)
        # names assigned through `global` in the module's functions exist once those functions ran (gs.init)
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Global):
                        for n in sub.names:
                            mod.bindings.setdefault(n, ("value",))
        mod.ready = True

    def _statements(self, mod: Module, body: list):
        for node in body:
            try:
                self._statement(mod, node)
            except Exception:  # an odd construct (or one nested past the recursion limit): skip it, counted
                self.skipped["module-level statement not followed"] += 1

    def _statement(self, mod: Module, node: ast.stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            mod.bindings[node.name] = ("def", mod, node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        if n.id == "__all__":
                            self._read_all(mod, node)
                        else:
                            mod.bindings[n.id] = ("value",)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    mod.bindings[alias.asname] = self._import_ref(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    mod.bindings[top] = self._import_ref(top)
        elif isinstance(node, ast.ImportFrom):
            self._import_from(mod, node)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                self._statements(mod, node.body)
            self._statements(mod, node.orelse)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self._statements(mod, node.body)
            for h in node.handlers:
                self._statements(mod, h.body)
            self._statements(mod, node.orelse)
            self._statements(mod, node.finalbody)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            self._statements(mod, node.body)
        elif isinstance(node, (ast.For, ast.While)):
            self._loop(mod, node)

    @staticmethod
    def _import_ref(name: str) -> tuple:
        if name == "genesis" or name.startswith("genesis."):
            return ("ref", name, None, False)
        return ("external",)

    def _import_from(self, mod: Module, node: ast.ImportFrom):
        if node.level:
            target = self._absolute(mod, node.level, node.module)
            relative = True
        else:
            target = node.module or ""
            relative = False
            if not (target == "genesis" or target.startswith("genesis.")):
                for alias in node.names:
                    if alias.name != "*":
                        mod.bindings[alias.asname or alias.name] = ("external",)
                return
        # genesis/__init__.py's relative imports bind the submodules they go through (gs.constants, gs.utils)
        if relative and node.level == 1 and mod.name == "genesis" and node.module:
            first = node.module.split(".")[0]
            if not first.startswith("_"):
                mod.bindings.setdefault(first, ("ref", f"{mod.name}.{first}", None, True))
        for alias in node.names:
            if alias.name == "*":
                self._star(mod, target, relative)
            else:
                mod.bindings[alias.asname or alias.name] = ("ref", target, alias.name, relative)

    def _star(self, mod: Module, target: str, relative: bool):
        other = self.module(target)
        if other is None or not other.ready:
            self.skipped["star import of a module not found"] += 1
            return
        for name in self.public_names(other):
            mod.bindings[name] = ("ref", target, name, relative)

    def _read_all(self, mod: Module, node):
        names = _literal_strings(node.value) if node.value is not None else None
        if names is None:
            self.skipped["__all__ that is not a literal"] += 1
            return
        if isinstance(node, ast.AugAssign) and mod.all is not None:
            mod.all = mod.all + names
        else:
            mod.all = names

    def _loop(self, mod: Module, node):
        """Names made at run time by a module-level loop: an enum's members put in globals() (gs.cpu, gs.gpu),
        functions set on the module with setattr (gs.zeros, wrapping torch.zeros). Other loops that make names
        are skipped, counted."""
        makes_names = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "setattr")
            for n in ast.walk(node))
        if not makes_names:
            return
        if isinstance(node, ast.For):
            names = self._enum_members_loop(mod, node)
            if names is None:
                names = self._setattr_loop(mod, node)
            if names is not None:
                for n in names:
                    mod.bindings[n] = ("value",)
                return
        self.skipped["names made at run time, not followed"] += 1

    def _enum_members_loop(self, mod: Module, node: ast.For):
        # for name, member in X.__members__.items(): globals()[name] = member
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items"
                and isinstance(it.func.value, ast.Attribute) and it.func.value.attr == "__members__"):
            return None
        writes_globals = any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
                             and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                             and n.value.func.id == "globals" for n in ast.walk(node))
        if not writes_globals:
            return None
        found = self.resolve_expr(mod, it.func.value.value)
        if not found or found[0] != "def" or not isinstance(found[2], ast.ClassDef):
            return None
        return [t.id for s in found[2].body if isinstance(s, ast.Assign) for t in s.targets
                if isinstance(t, ast.Name) and not t.id.startswith("_")]

    def _setattr_loop(self, mod: Module, node: ast.For):
        # for op in (torch.zeros, ...): setattr(sys.modules[__name__], op.__name__, wrap(op))
        if not isinstance(node.target, ast.Name):
            return None
        var = node.target.id
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == "setattr" and len(n.args) >= 2]
        if not calls or not all(isinstance(c.args[1], ast.Attribute) and c.args[1].attr == "__name__"
                                and isinstance(c.args[1].value, ast.Name) and c.args[1].value.id == var
                                for c in calls):
            return None
        seq = node.iter
        if isinstance(seq, ast.Name):
            seq = next((s.value for s in mod.tree.body if isinstance(s, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == node.iter.id for t in s.targets)), None)
        if not isinstance(seq, (ast.Tuple, ast.List)):
            return None
        names = []
        for e in seq.elts:
            if isinstance(e, ast.Attribute):
                names.append(e.attr)
            elif isinstance(e, ast.Name):
                names.append(e.id)
            else:
                return None
        return names

    # -- names ----------------------------------------------------------------------------------------------------

    def public_names(self, mod: Module) -> list:
        """The module's public names: its __all__ when it has one, else its own public bindings (no absolute
        imports)."""
        if mod.all is not None:
            return [n for n in mod.all if not n.startswith("_")]
        out = []
        for name, b in mod.bindings.items():
            if name.startswith("_") or b[0] == "external" or (b[0] == "ref" and not b[3]):
                continue
            out.append(name)
        return out

    def resolve(self, modname: str, name: str, depth: int = 0):
        """What `modname.name` is: ("def", module, node), ("module", dotted), ("value",), ("external",) or None."""
        if depth > 50:
            return None
        mod = self.module(modname)
        if mod is None:
            return None
        b = mod.bindings.get(name)
        if b is None:
            sub = f"{modname}.{name}"
            return ("module", sub) if self.module(sub) is not None else None
        if b[0] in ("def", "value", "external"):
            return b
        _, target, attr, _rel = b
        if attr is None:
            return ("module", target) if self.module(target) is not None else None
        found = self.resolve(target, attr, depth + 1) if self.module(target) is not None else None
        if found is None and self.module(f"{target}.{attr}") is not None:
            return ("module", f"{target}.{attr}")
        return found

    def resolve_expr(self, mod: Module, expr: ast.expr, depth: int = 0):
        if isinstance(expr, ast.Name):
            return self.resolve(mod.name, expr.id, depth)
        if isinstance(expr, ast.Attribute):
            owner = self.resolve_expr(mod, expr.value, depth + 1)
            if owner and owner[0] == "module":
                return self.resolve(owner[1], expr.attr, depth + 1)
            return None
        if isinstance(expr, ast.Subscript):  # Generic-style bases: Mixin["Sensor"]
            return self.resolve_expr(mod, expr.value, depth + 1)
        return None

    def resolve_path(self, path: str):
        """A `gs.a.b` path -> ("module", dotted) / ("def", ...) / None."""
        parts = path.split(".")
        found = ("module", "genesis")
        for part in parts[1:]:
            if found is None or found[0] != "module":
                return None
            found = self.resolve(found[1], part)
        return found

    # -- classes --------------------------------------------------------------------------------------------------

    @staticmethod
    def _class_level_names(cls: ast.ClassDef) -> list:
        names = []
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif isinstance(node, ast.Assign):
                names += [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.append(node.target.id)
        return names

    def mro(self, mod: Module, cls: ast.ClassDef, seen=None) -> list:
        """The class and its Genesis World base classes, depth first: [(module, ClassDef)]."""
        seen = set() if seen is None else seen
        key = (mod.name, cls.name, cls.lineno)
        if key in seen:
            return []
        seen.add(key)
        out = [(mod, cls)]
        for base in cls.bases:
            try:
                found = self.resolve_expr(mod, base)
            except RecursionError:
                found = None
            if found and found[0] == "def" and isinstance(found[2], ast.ClassDef):
                out += self.mro(found[1], found[2], seen)
            elif found is None and not (isinstance(base, ast.Name) and base.id == "object"):
                if self._looks_internal(mod, base):
                    self.skipped["base class not found"] += 1
        return out

    def _looks_internal(self, mod: Module, base: ast.expr) -> bool:
        root = base
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if not isinstance(root, ast.Name):
            return False
        b = mod.bindings.get(root.id)
        return b is None or b[0] != "external"

    def members(self, mod: Module, cls: ast.ClassDef) -> list:
        """Public methods, properties and class attributes of the class and its Genesis World bases, and the public
        attributes its __init__ methods set on self."""
        names = []
        for m, c in self.mro(mod, cls):
            names += self._class_level_names(c)
            for node in c.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__init__":
                    names += _self_attributes(node)
        return _unique(n for n in names if not n.startswith("_"))

    def fields(self, mod: Module, cls: ast.ClassDef) -> list:
        """The annotated class attributes (pydantic fields) of the class and its bases, ClassVars left out."""
        names = []
        for m, c in self.mro(mod, cls):
            for node in c.body:
                if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                        and "ClassVar" not in ast.unparse(node.annotation) and not _excluded_field(node.value)):
                    names.append(node.target.id)
        return _unique(n for n in names if not n.startswith("_"))


def _excluded_field(value) -> bool:
    """`x: T = Field(..., exclude=True)`: an attribute the class sets itself (a material's dispatch functions),
    not an option a user gives."""
    return (isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "Field"
            and any(k.arg == "exclude" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in value.keywords))


def _self_attributes(func) -> list:
    out = []
    for n in ast.walk(func):
        if (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
                and n.value.id == "self"):
            out.append(n.attr)
    return out


def _unique(names) -> list:
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def _guarded(reader: Reader, read, arg) -> list:
    try:
        return sorted(set(read(reader, arg)))
    except Exception:  # an odd construct that got past the per-statement guards: the group is left empty, counted
        reader.skipped["group not read"] += 1
        return []


def _module_names(reader: Reader, label: str) -> list:
    found = reader.resolve_path(label)
    if not found or found[0] != "module":
        reader.skipped["group whose module was not found"] += 1
        return []
    return reader.public_names(reader.module(found[1]))


def _class_names(reader: Reader, classes) -> list:
    names = []
    for spec in classes:
        modname, _, clsname = spec.partition(":")
        found = reader.resolve(modname, clsname)
        if not found or found[0] != "def" or not isinstance(found[2], ast.ClassDef):
            reader.skipped["group whose class was not found"] += 1
            continue
        names += reader.members(found[1], found[2])
    return names


def _field_names(reader: Reader, label: str) -> list:
    found = reader.resolve_path(label)
    names = []
    if found and found[0] == "module":
        for cname in reader.public_names(reader.module(found[1])):
            c = reader.resolve(found[1], cname)
            if c and c[0] == "def" and isinstance(c[2], ast.ClassDef):
                names += [f"{cname}.{f}" for f in reader.fields(c[1], c[2])]
    return names


def extract(source: GenesisSource) -> dict:
    """Genesis World's public names per group, JSON-ready: {"genesis_commit", "skipped", "groups": {label: names}}."""
    reader = Reader(source)
    groups = {}
    for label in MODULE_GROUPS:
        groups[label] = _guarded(reader, _module_names, label)
    for label, classes, _engine in CLASS_GROUPS:
        groups[label] = _guarded(reader, _class_names, classes)
    for label in FIELD_GROUPS:
        groups[f"{label} fields"] = _guarded(reader, _field_names, label)
    return {"genesis_commit": source.commit, "skipped": dict(sorted(reader.skipped.items())), "groups": groups}


# ----------------------------------------------------------------------------------------------------------------
# genesis-core's side


def _engine_object(target: str):
    """genesis-core's object for a group: "gs.<path>", "module:Class", "solver:<short>", "entity:<short>";
    None where it has none."""
    import genesis_core as gs

    try:
        if target.startswith(("solver:", "entity:")):
            from genesis_core.plugins.manager import registry

            solver = registry().solver_for_short_name(target.split(":", 1)[1])
            if solver is None:
                return None
            return solver if target.startswith("solver:") else getattr(solver, "entity_class", None)
        if ":" in target:
            modname, _, qual = target.partition(":")
            obj = importlib.import_module(modname)
            for part in qual.split("."):
                obj = getattr(obj, part)
            return obj
        obj = gs
        for part in target.split(".")[1:]:
            obj = getattr(obj, part)
        return obj
    except (AttributeError, ImportError):
        return None


def _module_has(obj, name: str) -> bool:
    from genesis_core.errors import PluginNotInstalledError

    try:
        getattr(obj, name)
        return True
    except PluginNotInstalledError:
        return False
    except AttributeError as e:  # a name that exists but is set up later (gs.tc_float before gs.init) says so
        return "has no attribute" not in str(e)


_self_attr_cache: dict = {}


def _instance_attributes(cls) -> set:
    """The attributes the methods of the class and its bases set on self (read from their source)."""
    if cls in _self_attr_cache:
        return _self_attr_cache[cls]
    names = set()
    for klass in inspect.getmro(cls):
        if klass is object or klass.__module__ == "builtins":
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        names.update(_self_attributes(tree))
    _self_attr_cache[cls] = names
    return names


def _class_has(cls, name: str, extra=frozenset()) -> bool:
    if name in extra:
        return True
    try:
        getattr(cls, name)
        return True
    except AttributeError:
        pass
    except Exception:  # a class-level descriptor that raises: the name is there
        return True
    if _attrs_names(cls) & {name}:
        return True
    return isinstance(cls, type) and name in _instance_attributes(cls)


def _attrs_names(cls) -> set:
    try:
        import attrs

        if isinstance(cls, type) and attrs.has(cls):
            return {a.name for a in attrs.fields(cls)} | {getattr(a, "alias", a.name) for a in attrs.fields(cls)}
    except Exception:
        pass
    return set()


def _accepts(cls, field: str) -> bool:
    """Whether genesis-core's class takes `field` in its constructor."""
    names = _attrs_names(cls)
    try:
        params = inspect.signature(cls).parameters.values()
        names |= {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    except (TypeError, ValueError):
        pass
    return field in names


def _scene_solver_names() -> frozenset:
    """`scene.<short>_solver`: the scene serves one per loaded solver plugin."""
    from genesis_core.plugins.manager import registry

    return frozenset(f"{s.short_name}_solver" for s in registry().solvers.values())


def _scene_entity_attributes() -> frozenset:
    """The attributes the scene sets on each entity it adds (`entity.name = ...` in Scene's source)."""
    import genesis_core as gs

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(gs.Scene)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    return frozenset(n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                     and isinstance(n.value, ast.Name) and n.value.id == "entity")


def _extra_names(target: str, cls) -> frozenset:
    """Names genesis-core serves that its class does not show: `scene.<solver>_solver`, and the attributes the
    scene sets on entities."""
    import genesis_core as gs

    if target == "gs.Scene":
        return _scene_solver_names()
    if isinstance(cls, type) and issubclass(cls, gs.Entity):
        return _scene_entity_attributes()
    return frozenset()


def compare(data: dict) -> list:
    """[(label, lacking names, total, note)] for every group, genesis-core asked now."""
    groups = data["groups"]
    missing_labels = [g for g in _all_labels() if g not in groups]
    if missing_labels:
        raise SystemExit(f"{os.path.relpath(JSON_PATH, REPO)} has no names for {missing_labels}: run --extract "
                         "against Genesis World's source")
    out = []
    for label in MODULE_GROUPS:
        obj = _engine_object(label)
        names = groups[label]
        lacking = names if obj is None else [n for n in names if not _module_has(obj, n)]
        out.append((label, lacking, len(names), "" if obj is not None else "genesis-core has no such module"))
    for label, _classes, target in CLASS_GROUPS:
        cls = _engine_object(target)
        extra = _extra_names(target, cls)
        names = groups[label]
        lacking = names if cls is None else [n for n in names if not _class_has(cls, n, extra)]
        out.append((label, lacking, len(names), "" if cls is not None else "genesis-core has no such class"))
    for label in FIELD_GROUPS:
        ns = _engine_object(label)
        names, lacking = [], []
        for qual in groups[f"{label} fields"]:
            cname, _, field = qual.partition(".")
            cls = None
            if ns is not None and _module_has(ns, cname):
                try:
                    cls = getattr(ns, cname)
                except AttributeError:
                    cls = None
            if not isinstance(cls, type):
                continue  # a class genesis-core lacks is listed in its module's group, its fields are not counted
            names.append(qual)
            if not _accepts(cls, field):
                lacking.append(qual)
        out.append((f"{label} fields", lacking, len(names), ""))
    return out


def _all_labels() -> list:
    return list(MODULE_GROUPS) + [g[0] for g in CLASS_GROUPS] + [f"{g} fields" for g in FIELD_GROUPS]


# ----------------------------------------------------------------------------------------------------------------
# The doc


def _wrap_names(names: list) -> list:
    items = [f"`{n}`" for n in names]
    return textwrap.wrap(", ".join(items), width=WIDTH, break_long_words=False, break_on_hyphens=False)


def _label_md(label: str) -> str:
    return f"`{label}`" if " " not in label else f"`{label.split(' ', 1)[0]}` {label.split(' ', 1)[1]}"


def render(data: dict, results: list) -> str:
    """The doc's generated section, markers included."""
    commit = (data.get("genesis_commit") or "unknown")[:8]
    total_lacking = sum(len(r[1]) for r in results)
    total = sum(r[2] for r in results)
    lines = [
        BEGIN,
        "## Genesis World names genesis-core lacks",
        "",
        *textwrap.wrap(
            f"Generated from Genesis World's source (commit {commit}) and genesis-core's API by "
            f"`compat/public_names.py`; do not edit it by hand. After adding a name to the engine, regenerate it "
            f"with `{WRITE_COMMAND}` (it re-reads Genesis World's source where there is one, else its names kept in "
            "`compat/genesis_public_names.json`). `tests/test_compat_names.py` fails while this section is out "
            "of date.", width=WIDTH, break_long_words=False, break_on_hyphens=False),
        "",
        *textwrap.wrap(
            "A module's names are its `__all__`, else what it defines and imports from Genesis World itself "
            "(`gs` also holds `gs.utils.geom`'s functions, which Genesis World imports there with `*`, and the "
            "names `gs.init` sets). A class's names are its public methods, properties and attributes, with its "
            "base classes'; genesis-core's counterpart counts a name it has as a method, property, attribute or "
            "attrs field (`scene.sim` is the scene here, so `Simulator` is compared with `Scene`). A field is an "
            "option class's constructor keyword (`RigidOptions.dt`); fields are counted only for the classes "
            "genesis-core has, a class it lacks being listed in its module's group. A name that exists with "
            "another meaning counts as present: this list says what is absent, not what differs.",
            width=WIDTH, break_long_words=False, break_on_hyphens=False),
        "",
        "| group | lacking | of |",
        "|---|---|---|",
    ]
    for label, lacking, n, _note in results:
        if n:
            lines.append(f"| {_label_md(label)} | {len(lacking)} | {n} |")
    lines.append(f"| all | {total_lacking} | {total} |")
    skipped = data.get("skipped") or {}
    if skipped:
        lines += ["", *textwrap.wrap(
            "Source constructs not followed while reading Genesis World (their names are not above): "
            + "; ".join(f"{k}: {v}" for k, v in skipped.items()) + ".",
            width=WIDTH, break_long_words=False, break_on_hyphens=False)]
    for label, lacking, n, note in results:
        if not lacking:
            continue
        lines += ["", f"### {_label_md(label)}: {len(lacking)} of {n} lacking", ""]
        if note:
            lines += [f"{note}.", ""]
        lines += _wrap_names(lacking)
    lines.append(END)
    return "\n".join(lines) + "\n"


def _split_doc(text: str):
    """(before, section, after) of the doc; section None when it has no markers."""
    i = text.find(BEGIN)
    j = text.find(END)
    if i < 0 or j < 0 or j < i:
        return text, None, ""
    j += len(END)
    if text[j:j + 1] == "\n":
        j += 1
    return text[:i], text[i:j], text[j:]


def write_doc(section: str, path: str = DOC_PATH):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    before, old, after = _split_doc(text)
    if old is None:
        before = before.rstrip("\n") + "\n\n"
        after = ""
    with open(path, "w", encoding="utf-8") as f:
        f.write(before + section + after)


def doc_section(path: str = DOC_PATH):
    try:
        with open(path, encoding="utf-8") as f:
            return _split_doc(f.read())[1]
    except OSError:
        return None


# ----------------------------------------------------------------------------------------------------------------


def load_names(location: str | None, json_path: str = JSON_PATH, fresh: bool | None = None):
    """(names data, where from). From Genesis World's source when it is there (or fresh=True), else the JSON."""
    where = source_location(location)
    if fresh is not False:
        try:
            source = GenesisSource.open(where)
        except FileNotFoundError:
            if fresh:
                raise
        else:
            return extract(source), "source"
    if not os.path.isfile(json_path):
        raise FileNotFoundError(f"no Genesis World source at {where!r} and no {os.path.relpath(json_path, REPO)}")
    with open(json_path, encoding="utf-8") as f:
        return json.load(f), "json"


def _dump(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--genesis", help=f"Genesis World's source: a bare git mirror or a checkout (default: "
                                     f"${SOURCE_ENV}, else {DEFAULT_SOURCE})")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--extract", action="store_true", help="write the JSON of Genesis World's names only")
    mode.add_argument("--write", action="store_true", help="write the JSON (where the source is) and the doc")
    mode.add_argument("--check", action="store_true", help="exit 1 if the doc (or the JSON) is out of date")
    p.add_argument("--json", default=JSON_PATH, help=argparse.SUPPRESS)
    p.add_argument("--doc", default=DOC_PATH, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.extract:
        try:
            data, _ = load_names(args.genesis, args.json, fresh=True)
        except FileNotFoundError as e:
            p.error(str(e))
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(_dump(data))
        _report(data)
        return 0

    try:
        data, origin = load_names(args.genesis, args.json, fresh=True if args.genesis else None)
    except FileNotFoundError as e:
        p.error(str(e))
    problems = []
    if origin == "source":
        try:
            with open(args.json, encoding="utf-8") as f:
                kept = f.read()
        except OSError:
            kept = None
        if kept != _dump(data):
            if args.write:
                with open(args.json, "w", encoding="utf-8") as f:
                    f.write(_dump(data))
            else:
                problems.append(f"{os.path.relpath(args.json, REPO)} differs from Genesis World's source")
    section = render(data, compare(data))
    if args.write:
        write_doc(section, args.doc)
        _report(data)
        return 0
    if args.check:
        old = doc_section(args.doc)
        if old != section:
            problems.append(f"the generated section of {os.path.relpath(args.doc, REPO)} is out of date")
            diff = difflib.unified_diff((old or "").splitlines(), section.splitlines(), "doc", "now", lineterm="",
                                        n=0)
            print("\n".join(list(diff)[:60]))
        for msg in problems:
            print(f"{msg}: run `{WRITE_COMMAND}`")
        return 1 if problems else 0
    sys.stdout.write(section)
    return 0


def _report(data: dict):
    n = sum(len(v) for v in data["groups"].values())
    print(f"{n} Genesis World names in {len(data['groups'])} groups (commit {(data['genesis_commit'] or '?')[:8]})")
    for k, v in (data.get("skipped") or {}).items():
        print(f"skipped: {k}: {v}")


if __name__ == "__main__":
    sys.exit(main())
