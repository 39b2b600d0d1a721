"""The substep recipe, written once: what `scene.step()` runs `substeps` times, and its reverse, which the
differentiable mode's backward (`genesis_core.grad.Tape`) runs for each recorded substep, newest first.

A substep at frame f reads frame f and writes the next frame of every active solver::

    for solver in solvers: solver.substep_pre_coupling(f)      # each solver on its own (forces, integration)
    coupler.couple(f)                                           # the pairwise interactions
    for solver in solvers: solver.substep_post_coupling(f)     # what each solver does with the coupled result

Its reverse calls the `*_grad` twins in the opposite order, as DiffTaichi replays a step's kernels. `solvers` is
the scene's active solvers in `scene.solvers` order; `coupler` a `genesis_core.coupler.Coupler`.
"""

from __future__ import annotations


def substep(solvers, coupler, f: int):
    """Run one substep at frame f: every solver's pre-coupling part, the coupler, every post-coupling part."""
    for s in solvers:
        s.substep_pre_coupling(f)
    coupler.couple(f)
    for s in solvers:
        s.substep_post_coupling(f)


def substep_grad(solvers, coupler, f: int):
    """Backpropagate through the substep at frame f, from the gradients on frame f's successor to frame f's.

    The frames the substep read must hold what they held in the forward (the tape restores them). The forward
    of the substep is run again first, so that every solver's scratch (grid, contacts, intermediate stages) is
    the one the forward computed, then the `*_grad` methods run in the reverse of `substep`'s order.
    """
    substep(solvers, coupler, f)
    for s in reversed(solvers):
        s.substep_post_coupling_grad(f)
    coupler.couple_grad(f)
    for s in reversed(solvers):
        s.substep_pre_coupling_grad(f)


__all__ = ["substep", "substep_grad"]
