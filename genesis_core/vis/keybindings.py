"""Keybindings (Genesis World's `genesis.vis.keybindings`): the key codes (pyglet's, as Genesis World uses them),
modifiers and actions, and `Keybind`, which `scene.viewer.register_keybinds(...)` takes.

The viewer here runs in a web browser; it shows each registered keybind as a button in its panel, labelled with
its name and key. A click runs the callback once (for a HOLD keybind: once per click). Keyboard capture in the
page is not wired."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable


class _Labeled(IntEnum):
    def __str__(self) -> str:
        return self.name.lower()


# pyglet's key codes (pyglet/window/key.py): the control and motion keys, then Latin-1
_SPECIAL = dict(
    BACKSPACE=0xff08, TAB=0xff09, LINEFEED=0xff0a, CLEAR=0xff0b, RETURN=0xff0d, ENTER=0xff0d, PAUSE=0xff13,
    SCROLLLOCK=0xff14, SYSREQ=0xff15, ESCAPE=0xff1b, HOME=0xff50, LEFT=0xff51, UP=0xff52, RIGHT=0xff53, DOWN=0xff54,
    PAGEUP=0xff55, PAGEDOWN=0xff56, END=0xff57, BEGIN=0xff58, DELETE=0xffff, SELECT=0xff60, PRINT=0xff61,
    EXECUTE=0xff62, INSERT=0xff63, UNDO=0xff65, REDO=0xff66, MENU=0xff67, FIND=0xff68, CANCEL=0xff69, HELP=0xff6a,
    BREAK=0xff6b, NUMLOCK=0xff7f, LSHIFT=0xffe1, RSHIFT=0xffe2, LCTRL=0xffe3, RCTRL=0xffe4, CAPSLOCK=0xffe5,
    LALT=0xffe9, RALT=0xffea, SPACE=0x20, EXCLAMATION=0x21, DOUBLEQUOTE=0x22, HASH=0x23, DOLLAR=0x24, PERCENT=0x25,
    AMPERSAND=0x26, APOSTROPHE=0x27, PARENLEFT=0x28, PARENRIGHT=0x29, ASTERISK=0x2a, PLUS=0x2b, COMMA=0x2c,
    MINUS=0x2d, PERIOD=0x2e, SLASH=0x2f, COLON=0x3a, SEMICOLON=0x3b, LESS=0x3c, EQUAL=0x3d, GREATER=0x3e,
    QUESTION=0x3f, AT=0x40, BRACKETLEFT=0x5b, BACKSLASH=0x5c, BRACKETRIGHT=0x5d, ASCIICIRCUM=0x5e, UNDERSCORE=0x5f,
    GRAVE=0x60, QUOTELEFT=0x60, BRACELEFT=0x7b, BAR=0x7c, BRACERIGHT=0x7d, ASCIITILDE=0x7e,
)
_SPECIAL.update({f"F{k}": 0xffbe + k - 1 for k in range(1, 21)})
_SPECIAL.update({f"_{d}": 0x30 + d for d in range(10)})
_SPECIAL.update({f"NUM_{d}": 0xffb0 + d for d in range(10)})
_SPECIAL.update({c.upper(): ord(c) for c in string.ascii_lowercase})

Key = _Labeled("Key", _SPECIAL)
Key.__doc__ = "Keyboard key codes (pyglet's): Key.UP, Key.J, Key._1, Key.F1, Key.BACKSLASH, ..."


class KeyMod(_Labeled):
    SHIFT = 1 << 0
    CTRL = 1 << 1
    ALT = 1 << 2
    CAPSLOCK = 1 << 3
    NUMLOCK = 1 << 4
    WINDOWS = 1 << 5
    COMMAND = 1 << 6
    OPTION = 1 << 7
    SCROLLLOCK = 1 << 8
    FUNCTION = 1 << 9


class KeyAction(_Labeled):
    """PRESS: once when the key goes down; HOLD: repeatedly while it is down; RELEASE: once when it goes up."""

    PRESS = 0
    HOLD = 1
    RELEASE = 2


class MouseButton(_Labeled):
    LEFT = 1 << 0
    MIDDLE = 1 << 1
    RIGHT = 1 << 2


def get_key_hash(key_code: int, modifiers: int | None, action: KeyAction) -> int:
    """A hash of a key combination (Genesis World's helper)."""
    return hash((key_code, modifiers, action))


@dataclass
class Keybind:
    """A named key binding: `callback(*args, **kwargs)` runs on `key_action` of `key` (with `key_mods` held; None:
    whatever the modifiers)."""

    name: str
    key: Any = None
    key_action: KeyAction = KeyAction.PRESS
    key_mods: tuple | None = None
    callback: Callable[..., None] | None = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        from ..errors import OptionError

        if not isinstance(self.name, str) or not self.name:
            raise OptionError(f"Keybind(name={self.name!r}): a non-empty string is needed.")
        if self.callback is not None and not callable(self.callback):
            raise OptionError(f"Keybind {self.name!r}: callback={self.callback!r} is not callable.")
        if not isinstance(self.key_action, KeyAction):
            raise OptionError(f"Keybind {self.name!r}: key_action={self.key_action!r} is not a KeyAction.")
        self.args = tuple(self.args)

    def run(self):
        if self.callback is not None:
            self.callback(*self.args, **self.kwargs)


__all__ = ["Key", "KeyAction", "KeyMod", "Keybind", "MouseButton", "get_key_hash"]
