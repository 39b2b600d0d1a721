"""docs/compatibility.md's list of the Genesis World names genesis-core lacks stays true: compat/public_names.py
--check, run here, fails when the engine gained (or lost) a name and the list was not regenerated
(`.venv/bin/python compat/public_names.py --write`).

Genesis World's names come from its source where there is one ($GENESIS_SOURCE, or the default mirror path), else
from compat/genesis_public_names.json, kept beside the script for the machines without it (CI).
"""

import importlib.util
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    spec = importlib.util.spec_from_file_location("compat_public_names",
                                                  os.path.join(REPO, "compat", "public_names.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


names = _load()


def _have_names():
    try:
        names.GenesisSource.open(names.source_location())
        return True
    except FileNotFoundError:
        return os.path.isfile(names.JSON_PATH)


@pytest.mark.skipif(not _have_names(), reason=(
    f"no Genesis World source (${names.SOURCE_ENV}, or {names.DEFAULT_SOURCE}) and no "
    "compat/genesis_public_names.json: nothing to compare genesis-core's API with"))
def test_generated_section_is_current(capsys):
    rc = names.main(["--check"])
    out = capsys.readouterr().out
    assert rc == 0, f"docs/compatibility.md's generated list is out of date:\n{out}"


def test_json_has_every_group():
    """The kept names cover every group the script compares, so that --check works without the source."""
    if not os.path.isfile(names.JSON_PATH):
        pytest.skip("no compat/genesis_public_names.json")
    data, origin = names.load_names(None, fresh=False)
    assert origin == "json"
    assert set(data["groups"]) == set(names._all_labels())
    assert "Scene" in data["groups"]["gs"] and "RigidOptions" in data["groups"]["gs.options"]
    assert "RigidOptions.dt" in data["groups"]["gs.options fields"]


def test_odd_source_is_skipped_and_counted():
    """Constructs the reader does not follow are skipped and counted; the patterns it knows give their names."""
    files = {
        "genesis/__init__.py": "\n".join([
            "import numpy as np",
            "from typing import TYPE_CHECKING",
            "from .a import *",
            "from .missing import *",
            "from . import broken",
            "from .constants import backend as _backend",
            "if TYPE_CHECKING:",
            "    from .a import Hidden",
            "def init():",
            "    global tc_float",
            "    tc_float = 1",
            "for name, member in _backend.__members__.items():",
            "    globals()[name] = member",
            "import sys, torch",
            "_ops = (torch.zeros, torch.ones)",
            "for _op in _ops:",
            "    setattr(sys.modules[__name__], _op.__name__, _op)",
            "for k in compute():",
            "    globals()[k] = 1",
            "class Scene(Base[int], object):",
            "    dt: float = 0.1",
            "    def step(self): ...",
            "    def _private(self): ...",
        ]),
        "genesis/a.py": "__all__ = ['X', 'Y']\nX = Y = Z = 1\n",
        "genesis/constants.py": "import enum\nclass backend(enum.IntEnum):\n    cpu = 0\n    gpu = 1\n",
        "genesis/broken.py": "def (:\n",
    }
    reader = names.Reader(names.GenesisSource(files=files, commit="0" * 40))
    top = set(reader.public_names(reader.module("genesis")))
    assert {"X", "Y", "cpu", "gpu", "zeros", "ones", "tc_float", "init", "Scene", "constants"} <= top
    assert not top & {"Z", "Hidden", "np", "torch", "sys", "TYPE_CHECKING"}
    found = reader.resolve("genesis", "Scene")
    assert reader.members(found[1], found[2]) == ["dt", "step"]
    assert reader.module("genesis.broken") is None
    assert reader.skipped["file that cannot be read or parsed"] == 1
    assert reader.skipped["star import of a module not found"] == 1
    assert reader.skipped["names made at run time, not followed"] == 1
    assert reader.skipped["base class not found"] == 1  # Base: not defined anywhere

    data = names.extract(names.GenesisSource(files=files, commit="0" * 40))  # the real groups: mostly absent here
    assert data["groups"]["gs"] and data["skipped"]["group whose module was not found"] > 0
