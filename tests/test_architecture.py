"""The architecture, enforced: the core imports no plugin, and no plugin imports another plugin.

Every `import` / `from ... import` statement and every literal `importlib.import_module("...")` /
`__import__("...")` in the packages' source is checked."""

import ast
import os

import pytest

from .conftest import REPO

CORE = "genesis_core"


def packages():
    """(import name, source folder) of the core, each first-party plugin and the example third-party solver."""
    out = [(CORE, os.path.join(REPO, CORE))]
    for base in (os.path.join(REPO, "plugins"), os.path.join(REPO, "examples")):
        for root, dirs, _files in os.walk(base):
            for d in dirs:
                if d.startswith("genesis_") and os.path.isfile(os.path.join(root, d, "__init__.py")):
                    out.append((d, os.path.join(root, d)))
    return out


def imported_modules(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def violations(package, folder, all_packages):
    others = {name for name, _ in all_packages if name not in (package, CORE)}
    if package == CORE:
        others = {name for name, _ in all_packages if name != CORE} | {"genesis_rigid", "genesis_mpm", "genesis_sph",
                                                                      "genesis_pbd", "genesis_fem"}
    found = []
    for root, _dirs, files in os.walk(folder):
        for fn in files:
            if fn.endswith(".py"):
                path = os.path.join(root, fn)
                for line, module in imported_modules(path):
                    if module.split(".")[0] in others:
                        found.append(f"{os.path.relpath(path, REPO)}:{line} imports {module}")
    return found


def test_packages_are_found():
    names = [name for name, _ in packages()]
    assert {CORE, "genesis_rigid", "genesis_mpm", "genesis_springs"} <= set(names)


@pytest.mark.parametrize("package, folder", packages(), ids=[name for name, _ in packages()])
def test_imports_respect_the_architecture(package, folder):
    assert violations(package, folder, packages()) == []


def test_the_checker_catches_violations(tmp_path):
    pkg = tmp_path / "genesis_fake"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bad.py").write_text("import genesis_mpm.solver\nfrom genesis_rigid import x\n"
                                "import importlib\nimportlib.import_module('genesis_springs')\nimport genesis_core\n")
    found = violations("genesis_fake", str(pkg), packages() + [("genesis_fake", str(pkg))])
    assert [f.split(" imports ")[1] for f in found] == ["genesis_mpm.solver", "genesis_rigid", "genesis_springs"]
    core_bad = tmp_path / "core"
    core_bad.mkdir()
    (core_bad / "x.py").write_text("from genesis_sph import y\n")
    assert violations(CORE, str(core_bad), packages()) == [f"{os.path.relpath(str(core_bad / 'x.py'), REPO)}:1 imports genesis_sph"]


# -- the import graph inside genesis_core ------------------------------------------------------------------------
#
# Nodes are the modules of a package (``genesis_core.options``, ``genesis_core.plugins`` for its __init__.py).
# An edge A -> B means that importing A imports B: an import statement (or a literal importlib.import_module /
# __import__ call) in A that names B, or names a name of B (``from .plugins.manager import x`` -> the module
# genesis_core.plugins.manager; ``from . import checkpoint`` -> genesis_core.checkpoint), plus every package on
# B's path that does not also contain A (importing genesis_core.plugins.manager from genesis_core.options runs
# genesis_core/plugins/__init__.py first; a module inside a package already has that package initialised).
#
# Module-level imports (anywhere outside a function body: the top level, class bodies, top-level if/try) run
# when the module is imported: their graph must have no cycle, whatever the import order. Imports inside a
# function run when it is called, once every module is loaded, so they cannot fail the way a circular import
# does; they are counted separately, and one that closes a cycle with the module-level graph (the import
# circle kept alive by deferring one side) must be listed in DEFERRED_CYCLES with the reason it stays.

DEFERRED_CYCLES = {
    ("genesis_core.scene", "genesis_core"): "save_checkpoint records the engine version, genesis_core.__version__, "
                                            "defined by the package that exposes gs.Scene",
}


def _module_names(package, folder):
    """{dotted module name: path} of every .py file under `folder`, the package `package`."""
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(root, d, "__init__.py")))
        rel = os.path.relpath(root, folder)
        parts = [package] + ([] if rel == "." else rel.split(os.sep))
        for fn in sorted(files):
            if fn.endswith(".py"):
                name = parts if fn == "__init__.py" else parts + [fn[:-3]]
                out[".".join(name)] = os.path.join(root, fn)
    return out


def _imports_by_level(tree):
    """(node, deferred) for every import in `tree`; deferred: inside a function body (or a lambda)."""
    stack = [(tree, False)]
    while stack:
        node, deferred = stack.pop()
        for child in ast.iter_child_nodes(node):
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, inner
            elif isinstance(child, ast.Call) and child.args and isinstance(child.args[0], ast.Constant):
                func = child.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in ("import_module", "__import__") and isinstance(child.args[0].value, str):
                    yield child, inner
            stack.append((child, inner))


def _targets(node, module, is_package, modules):
    """The modules of `modules` that the import `node` in `module` names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.Call):
        return [node.args[0].value]
    if node.level:
        base = module.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in modules else target)
    return out


def import_graph(package, folder):
    """(module_level, deferred): each {importer: {imported: line}} over the modules of the package."""
    modules = _module_names(package, folder)
    graphs = ({m: {} for m in modules}, {m: {} for m in modules})
    for module, path in modules.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
        is_package = path.endswith("__init__.py")
        for node, deferred in _imports_by_level(tree):
            for target in _targets(node, module, is_package, modules):
                if target not in modules:
                    continue  # another package (the architecture test above), or a name not a module
                parts = target.split(".")
                implied = [".".join(parts[:i]) for i in range(1, len(parts))]
                for t in [p for p in implied if p in modules and not module.startswith(p + ".")] + [target]:
                    if t != module:
                        graphs[deferred][module].setdefault(t, node.lineno)
    return graphs


def shortest_path(graph, src, dst):
    """The shortest path [src, ..., dst] along the graph's edges, of at least one edge, or None (breadth
    first, neighbours in sorted order, so the path is stable)."""
    previous = {}
    frontier = [src]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w not in previous:
                    previous[w] = v
                    if w == dst:
                        path = [dst]
                        while len(path) == 1 or path[-1] != src:
                            path.append(previous[path[-1]])
                        return path[::-1]
                    nxt.append(w)
        frontier = nxt
    return None


def find_cycles(graph):
    """One cycle [m, ..., m] per strongly connected component of more than one module (Tarjan's algorithm):
    the shortest one through the component's first module in sorted order. [] when the graph has none."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while v not in component:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    out = []
    for component in sorted(components, key=min):
        inside = {v: [w for w in graph[v] if w in component] for v in component}
        out.append(shortest_path(inside, min(component), min(component)))
    return out


def describe(cycle, graph):
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def deferred_cycles(module_level, deferred):
    """{(importer, imported): cycle} for each deferred import that closes a cycle with the module-level graph:
    the import, then the shortest module-level path back."""
    out = {}
    for a, targets in sorted(deferred.items()):
        for b in sorted(targets):
            back = [b] if b == a else shortest_path(module_level, b, a)
            if back is not None and b not in module_level.get(a, ()):
                out[(a, b)] = [a] + back
    return out


def test_module_level_imports_of_the_core_have_no_cycle():
    module_level, _ = import_graph(CORE, os.path.join(REPO, CORE))
    assert "genesis_core.plugins.manager" in module_level["genesis_core.options"]  # the graph is not empty
    found = [describe(c, module_level) for c in find_cycles(module_level)]
    assert found == [], "import cycles at module level:\n" + "\n".join(found)


def test_deferred_imports_close_no_cycle_but_the_listed_ones():
    module_level, deferred = import_graph(CORE, os.path.join(REPO, CORE))
    closing = deferred_cycles(module_level, deferred)
    unlisted = [f"{a} imports {b} inside a function (line {deferred[a][b]}), closing the cycle "
                f"{' -> '.join(c)}: import it at module level and break the cycle, or list it in DEFERRED_CYCLES"
                for (a, b), c in closing.items() if (a, b) not in DEFERRED_CYCLES]
    assert unlisted == []
    stale = [pair for pair in DEFERRED_CYCLES if pair not in closing]
    assert stale == [], f"DEFERRED_CYCLES lists {stale}, which no longer close a cycle: remove them"


def test_the_cycle_checker_catches_a_planted_cycle(tmp_path):
    pkg = tmp_path / "fakepkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("import os\nfrom .sub.c import thing\n")
    (pkg / "b.py").write_text("from . import a  # closes a -> sub -> b -> a\n")
    (pkg / "sub" / "__init__.py").write_text("from .. import b\n")
    (pkg / "sub" / "c.py").write_text("thing = 1\n\ndef later():\n    from .. import d\n")
    (pkg / "d.py").write_text("from .sub import c\n")
    (pkg / "e.py").write_text("import importlib\nimportlib.import_module('fakepkg.f')\n")
    (pkg / "f.py").write_text("from fakepkg import e\n")
    module_level, deferred = import_graph("fakepkg", str(pkg))
    # importing fakepkg.sub.c from fakepkg.a runs fakepkg/sub/__init__.py first
    assert set(module_level["fakepkg.a"]) == {"fakepkg.sub", "fakepkg.sub.c"}
    cycles = find_cycles(module_level)
    assert cycles == [["fakepkg.a", "fakepkg.sub", "fakepkg.b", "fakepkg.a"], ["fakepkg.e", "fakepkg.f", "fakepkg.e"]]
    assert describe(cycles[1], module_level) == "fakepkg.e (line 2) -> fakepkg.f (line 1) -> fakepkg.e"
    # a function-level import is no module-level edge, but the cycle it closes is found and named
    assert "fakepkg.d" not in module_level["fakepkg.sub.c"] and deferred["fakepkg.sub.c"] == {"fakepkg.d": 4}
    assert deferred_cycles(module_level, deferred) == {
        ("fakepkg.sub.c", "fakepkg.d"): ["fakepkg.sub.c", "fakepkg.d", "fakepkg.sub.c"]}


# -- the substep recipe, spelled out once ------------------------------------------------------------------------

RECIPE_METHODS = {"substep_pre_coupling", "substep_post_coupling", "substep_pre_coupling_grad",
                  "substep_post_coupling_grad", "couple", "couple_grad"}
# where the calls belong: the recipe itself, and the coupler, which runs each coupling's couple / couple_grad
RECIPE_HOMES = {"genesis_core/stepping.py": RECIPE_METHODS, "genesis_core/coupler.py": {"couple", "couple_grad"}}


def recipe_calls(path):
    """(line, method) of each call of a recipe method in the file, except a method delegating to the one it
    overrides (`super().substep_pre_coupling(f)` inside `substep_pre_coupling`)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    stack = [(tree, None)]
    while stack:
        node, function = stack.pop()
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in RECIPE_METHODS and child.func.attr != function):
                yield child.lineno, child.func.attr
            stack.append((child, inner))


def test_the_substep_recipe_is_spelled_out_once():
    """scene.step and the tape's backward both run genesis_core.stepping; no other core module calls the stages."""
    found = []
    for module, path in _module_names(CORE, os.path.join(REPO, CORE)).items():
        rel = os.path.relpath(path, REPO).replace(os.sep, "/")
        allowed = RECIPE_HOMES.get(rel, set())
        found += [f"{rel}:{line} calls {method}" for line, method in recipe_calls(path) if method not in allowed]
    assert found == [], "the substep stages are called outside genesis_core.stepping:\n" + "\n".join(found)


def test_the_recipe_checker_catches_a_second_copy(tmp_path):
    (tmp_path / "loop.py").write_text("def step(solvers, coupler, f):\n    for s in solvers:\n"
                                      "        s.substep_pre_coupling(f)\n    coupler.couple(f)\n\n"
                                      "class Sub:\n    def substep_post_coupling(self, f):\n"
                                      "        super().substep_post_coupling(f)\n")
    assert sorted(recipe_calls(str(tmp_path / "loop.py"))) == [(3, "substep_pre_coupling"), (4, "couple")]
