"""Public attrs validators (for plugins too) with messages that name the class, the field, the value and the accepted range."""

from __future__ import annotations

import math
from numbers import Integral, Real

from .errors import OptionError


def _fail(inst, attr, value, expect):
    raise OptionError(f"{type(inst).__name__}.{attr.name}={value!r} is not accepted: expected {expect}.")


def positive(inst, attr, value):
    if not _is_real(value) or not value > 0 or not math.isfinite(value):
        _fail(inst, attr, value, "a finite number > 0")


def non_negative(inst, attr, value):
    if not _is_real(value) or not value >= 0 or not math.isfinite(value):
        _fail(inst, attr, value, "a finite number >= 0")


def finite(inst, attr, value):
    if not _is_real(value) or not math.isfinite(value):
        _fail(inst, attr, value, "a finite number")


def unit_interval(inst, attr, value):
    if not _is_real(value) or not 0 <= value <= 1:
        _fail(inst, attr, value, "a number in [0, 1]")


def int_at_least(lo):
    def check(inst, attr, value):
        if not isinstance(value, Integral) or isinstance(value, bool) or value < lo:
            _fail(inst, attr, value, f"an int >= {lo}")

    return check


def is_bool(inst, attr, value):
    if not isinstance(value, bool):
        _fail(inst, attr, value, "True or False")


def one_of(*choices):
    def check(inst, attr, value):
        if value not in choices:
            _fail(inst, attr, value, "one of " + ", ".join(map(repr, choices)))

    return check


def vec(n, positive_entries=False):
    """A sequence of n finite numbers (all > 0 if positive_entries); converted to a tuple of floats."""

    def check(inst, attr, value):
        expect = f"a sequence of {n} finite numbers" + (" > 0" if positive_entries else "")
        try:
            items = tuple(value)
        except TypeError:
            _fail(inst, attr, value, expect)
        if len(items) != n or not all(_is_real(v) and math.isfinite(v) for v in items):
            _fail(inst, attr, value, expect)
        if positive_entries and not all(v > 0 for v in items):
            _fail(inst, attr, value, expect)

    return check


def to_float_tuple(value):
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return value


def _is_real(value):
    return isinstance(value, Real) and not isinstance(value, bool)
