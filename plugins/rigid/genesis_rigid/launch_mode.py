"""The rigid solver's launch mode: which copy of its kernels it runs (the parallel one, or the serial copy), chosen
by timing both over a scene's first substeps. No result depends on the choice, only the time (the copies are
compiled without fast math and compute the same bits; tests/test_rigid_launch_mode.py)."""

from __future__ import annotations

import taichi as ti

import genesis_core as gs


class LaunchMode:
    """RigidSolver's part that picks the copy of the kernels (mixed into the solver: it reads batch,
    sim_options, and sets _serial, which the kernels' launches read through _kernel)."""

    # Every kernel has two copies: the parallel one, each environment's loop on Taichi's thread pool, and the serial
    # one (kernels_step.SERIAL_OF), the same code on the calling thread. One environment, or a pool of one thread,
    # runs the serial copies. A batch of up to TRIAL_MAX_BATCH environments on the CPU times its first substeps on
    # both copies and keeps the faster (TRIAL_PLAN); not in differentiable mode, whose reverse kernels would then
    # compile twice too, for a forward that is a fraction of the backward. A parallel launch waits until every
    # worker of the pool has woken, and a virtual machine's idle core takes long to wake, so the serial copies win
    # small batches on some machines; where the crossover lies depends on the machine (the measured figures are in
    # docs/rigid.md, "Launch mode"). The copies compute the same bits (compiled without fast math;
    # test_rigid_launch_mode), so the choice changes no result, only the time.
    TRIAL_MAX_BATCH = 256
    # the trial: TRIAL_LEAD untimed substeps on the parallel copies (a scene's first substeps are its slowest, on
    # either copy), then blocks
    # serial-parallel-parallel-serial (a drift of the work over the substeps, an arm falling, weighs the same on
    # both): each block runs one untimed substep (a switch of copy leaves the other copy's caches cold, the pool's
    # cores asleep; the first compiles), then TRIAL_BLOCK timed; the copy with the least time of a substep is kept
    # (the least: what it takes when nothing else on the machine gets in its way)
    TRIAL_LEAD = 10
    TRIAL_BLOCK = 4
    TRIAL_PLAN = (((False, False),) * TRIAL_LEAD + (((True, False),) + ((True, True),) * TRIAL_BLOCK)
                  + (((False, False),) + ((False, True),) * TRIAL_BLOCK) * 2
                  + (((True, False),) + ((True, True),) * TRIAL_BLOCK))  # ((serial copy, timed), ...)
    LAUNCH_MODES = ("auto", "parallel", "serial")

    _serial = True  # the kernels run as their serial copies (_kernel)
    _trial = None  # while the launch mode is being chosen: [substeps of TRIAL_PLAN done, serial times, parallel times]
    _trial_result = None  # its outcome, {"serial_s": least time of a substep, "parallel_s": ...}
    _launch_mode = "auto"

    @property
    def launch_mode(self) -> str:
        """"serial" or "parallel": the copy of the kernels this solver runs now (see TRIAL_PLAN above). Assign
        "serial", "parallel" or "auto" (the default: choose by timing both) to set it; no result depends on it."""
        return "serial" if self._serial else "parallel"

    @launch_mode.setter
    def launch_mode(self, mode):
        if mode not in self.LAUNCH_MODES:
            raise gs.OptionError(f"RigidSolver.launch_mode={mode!r} is not accepted; choose one of "
                                 f"{', '.join(map(repr, self.LAUNCH_MODES))}.")
        self._launch_mode = mode
        self._choose_launch_mode()

    def _choose_launch_mode(self):
        """The copy to run from the batch, the backend and launch_mode; starts the timing trial for "auto"."""
        cpu = gs.runtime.arch in (ti.x64, ti.arm64)
        mode = self._launch_mode
        if mode == "auto":
            if self.batch == 1 or (cpu and ti.lang.impl.current_cfg().cpu_max_num_threads <= 1):
                mode = "serial"
            elif not cpu or self.batch > self.TRIAL_MAX_BATCH or self.sim_options.requires_grad:
                mode = "parallel"
        self._trial = [0, [], []] if mode == "auto" else None
        self._set_serial(self.TRIAL_PLAN[0][0] if mode == "auto" else mode == "serial")

    def _set_serial(self, serial):
        self._serial = serial  # (each copy has bindings of its own: RigidSolver._bind)

    def _time_trial(self, seconds):
        """A substep of the trial took `seconds`: recorded if timed, then the plan's next copy; at its end, the
        faster copy."""
        trial = self._trial
        serial, timed = self.TRIAL_PLAN[trial[0]]
        if timed:
            trial[1 if serial else 2].append(seconds)
        trial[0] += 1
        if trial[0] < len(self.TRIAL_PLAN):
            self._set_serial(self.TRIAL_PLAN[trial[0]][0])
            return
        self._trial = None
        serial, parallel = min(trial[1]), min(trial[2])
        self._trial_result = {"serial_s": serial, "parallel_s": parallel}
        self._set_serial(serial <= parallel)

