"""Fixed-order reductions: sums whose result does not depend on how threads are scheduled, so that runs are
bitwise repeatable on the CPU and no environment's numbers depend on another's.

The pattern (MPM's particle-to-grid scatter, the collider couplings' impulses): split each environment's items
into `K` contiguous parts (`part_range`), let one thread accumulate each part, in index order, into a private
copy of the target (plain read-modify-writes, no atomics), then sum the copies in index order (`sum_parts`).
`n_parts` picks K from the batch alone, so the same scene sums in the same order on every machine.
"""

import taichi as ti
import torch

# Taichi 1.7.4's CPU code gives each thread at least 512 consecutive iterations of a kernel's outermost loop (its
# make_cpu_multithreaded_range_for pass), so a loop over a handful of (environment, part) tasks would run them all
# on one thread: a kernel whose outer loop runs over such tasks gives each TASK_STRIDE iterations, of which the
# first does the work, and the tasks spread evenly over the threads.
TASK_STRIDE = 512

# the kit's light per-particle kernels (walls, particle contacts) run their serial copies below this many
# particle-environments: measured crossover on the 2-core CPU (7,393 particles through the walls: 87 us serial,
# 229 us parallel; equal near 60,000)
SERIAL_BELOW = 50_000

# two CPU threads stay busy with up to this many parts per environment in a batch of one
MAX_PARTS = 8
THREADS = 2


def n_parts(batch: int, n_items: int, threads: int = THREADS, max_parts: int = MAX_PARTS) -> int:
    """Private copies per environment: enough to keep `threads` busy in a batch of `batch` environments (one when
    the batch alone does), never more than the items nor `max_parts`. A function of the sizes only."""
    return max(1, min(max_parts, threads // max(batch, 1), n_items))


@ti.func
def part_range(k, n, parts):
    """[start, end) of part k when n items are split into `parts` contiguous parts (sizes differ by at most one)."""
    return k * n // parts, (k + 1) * n // parts


def sum_parts(parts: torch.Tensor, out: torch.Tensor, add: bool = False) -> torch.Tensor:
    """out = parts[0] + parts[1] + ... (or out += each, with add=True), in index order: bitwise repeatable."""
    with torch.no_grad():
        if not add:
            out.copy_(parts[0])
        for k in range(0 if add else 1, parts.shape[0]):
            out += parts[k]
    return out
