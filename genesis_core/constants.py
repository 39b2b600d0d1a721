"""Genesis World's option constants, for scripts that name them (`gs.constraint_solver.Newton`,
`gs.integrator.implicitfast`, `gs.constants.backend.cpu`). Each is a string the engine's options read: the rigid
solver maps the integrators onto its own ("euler": semi-implicit Euler with implicit damping, springs and PD
gains, as MuJoCo's implicitfast; "rk4") and solves its constraints by projected Gauss-Seidel, its velocity pass
accelerated by conjugate gradients where CG is named."""

from ._runtime import cpu, gpu


class constraint_solver:  # noqa: N801 (Genesis World's name)
    CG = "CG"
    Newton = "Newton"


class integrator:  # noqa: N801
    Euler = "euler"
    implicitfast = "implicitfast"
    approximate_implicitfast = "approximate_implicitfast"
    RK4 = "rk4"


class backend:  # noqa: N801
    """Genesis World's `gs.constants.backend`, for `gs.init(backend=...)`: `cpu` is `gs.cpu`; `gpu` is `gs.gpu`
    (Taichi picks CUDA, Vulkan or Metal, whichever it finds; the CPU with one warning when none is present).
    Genesis World's `cuda`, `amdgpu` and `metal`, which name one GPU API, are `gs.gpu` here: the API is Taichi's
    choice, and the physics is the same on each."""

    cpu = cpu
    gpu = gpu
    cuda = gpu
    amdgpu = gpu
    metal = gpu
