"""Progress on long work: bars (tqdm) for rollouts, optimisation loops and benchmarks, and a status line while
kernels compile.

    from genesis_core.progress import progress

    for _ in progress(range(10_000), desc="rollout", unit="step"):
        scene.step()

Shown on standard error when it is a terminal and the engine logs at INFO or below (`gs.init(logging_level=...)`,
whose default is "info", as Genesis World's); quiet otherwise: under `logging_level="warning"`, in a pipe, a log
file, a test run. The environment variable GENESIS_CORE_PROGRESS=1 shows them wherever standard error goes, =0
never. A bar costs one tqdm update per item (about a microsecond; tqdm redraws at most 10 times a second).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading

logger = logging.getLogger("genesis_core")

# kernel compilation: the status line appears once a build or first step has taken this long (a warm offline
# cache loads the kernels sooner, and then nothing is shown)
COMPILE_DELAY_S = 1.0


def enabled() -> bool:
    """Whether progress is shown: GENESIS_CORE_PROGRESS=1 / 0 decides; else standard error is a terminal and the
    engine's logger is enabled for INFO."""
    forced = os.environ.get("GENESIS_CORE_PROGRESS", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    try:
        tty = sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        tty = False
    return tty and logger.isEnabledFor(logging.INFO)


class _Quiet:
    """What `progress` gives when progress is not shown: iterates as the iterable does; the bar's methods do
    nothing."""

    def __init__(self, iterable=None):
        self.iterable = iterable
        self.n = 0

    def __iter__(self):
        return iter(self.iterable if self.iterable is not None else ())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.n += n

    def set_postfix(self, *args, **kwargs):
        pass

    def set_postfix_str(self, *args, **kwargs):
        pass

    def set_description(self, *args, **kwargs):
        pass

    def refresh(self):
        pass

    def write(self, s, file=None, end="\n"):
        print(s, file=file, end=end)

    def close(self):
        pass


def progress(iterable=None, total=None, desc=None, unit="it", leave=True, **tqdm_kwargs):
    """A tqdm bar over `iterable` (or one advanced by `.update(n)` up to `total`) when progress is shown
    (`enabled()`), else an object that iterates the same and whose bar methods do nothing. Extra keywords go to
    tqdm."""
    if not enabled():
        return _Quiet(iterable)
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, file=sys.stderr, dynamic_ncols=True,
                **tqdm_kwargs)


@contextlib.contextmanager
def compiling(what: str = "kernels"):
    """While the body runs (a scene's build, its first step): after COMPILE_DELAY_S, a status line with the
    elapsed seconds, "compiling kernels (first run only: later runs load them from the offline cache)"; removed
    when the body ends. Nothing when progress is not shown or the body is quicker."""
    if not enabled():
        yield
        return
    from tqdm.auto import tqdm

    done = threading.Event()

    def show():
        if done.wait(COMPILE_DELAY_S):
            return
        bar = tqdm(total=None, desc=f"genesis-core: compiling {what} (first run only: later runs load them from "
                   "the offline cache)", bar_format="{desc} {elapsed}", file=sys.stderr, leave=False)
        try:
            while not done.wait(0.5):
                bar.refresh()
        finally:
            bar.close()

    thread = threading.Thread(target=show, name="genesis-core-compiling", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


__all__ = ["compiling", "enabled", "progress"]
