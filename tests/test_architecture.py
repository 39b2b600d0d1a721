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
