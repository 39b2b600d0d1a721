"""Genesis World's `genesis.vis` names that scripts import: `keybindings` (Key, KeyMod, KeyAction, Keybind), for the
viewer's `register_keybinds`."""

from . import keybindings

__all__ = ["keybindings"]
