"""Kernel launches with their arrays bound once.

A Taichi kernel call spends most of its time in Python on small batches: each call converts every argument
again (about 3 us per Taichi ndarray, 8-10 us per torch tensor on the 2-core CPU), so a 50-argument kernel costs
~250 us before it runs, whatever its work. A solver's kernels take the same arrays at every substep, and only a
few scalars (the frame indices) change. `Launcher` converts each kernel's arguments once (pointers, shapes), and
each call sets the scalars in a launch context (on the CPU one filled context, reused; see below), looks the
compiled kernel up as Taichi's own path does, and launches.

    launch = Launcher()
    launch(kernels.substep, f, fn, state.pos, state.vel, ...)   # same signature as kernels.substep(...)

or with the arrays taken by parameter name (`Launcher.bind`), once per set of arrays:

    substep = launch.bind(kernels.substep, {"pos": state.pos, "vel": state.vel, ...})
    substep(f=f, fn=fn)                                          # the scalars by name

Each call checks that the array arguments are the objects the launch was prepared with (an identity test) and
prepares it again when they are not, so passing other arrays is always correct. The first call of a kernel goes
through Taichi's own path (compilation, argument checks); anything the fast path does not handle (templates,
structs, tensors on a device the kernel's arch cannot address) keeps using it. GENESIS_CORE_BOUND_LAUNCH=0 turns
it off (see ENABLED): every call then goes through Taichi's path.

On the CPU a launch context is filled once and reused: filling one costs ~1 us per array (Taichi 1.7.4's
`set_arg_*` write hashed maps), which made a 50-array kernel's launch ~60 us of bookkeeping. Reuse is sound there
because every array is handed as a host pointer (`set_arg_external_array_with_shape`; a Taichi ndarray's pointer
comes from `Program.get_ndarray_data_ptr_as_int`): the CPU launcher rewrites such pointers from the context at
every launch and changes nothing else in it, whereas a context holding Taichi device allocations is rewritten by
its first launch (their handles replaced by raw pointers) and cannot be launched twice. Only the scalar arguments
are set again. Elsewhere (CUDA, whose launcher stages host arrays per launch) each launch fills a fresh context.
"""

from __future__ import annotations

import contextlib
import operator
import os

import torch
from taichi.lang import impl

# On unless GENESIS_CORE_BOUND_LAUNCH=0 (every call then goes through Taichi's path).
ENABLED = os.environ.get("GENESIS_CORE_BOUND_LAUNCH", "1") != "0"


class _Prepared:
    __slots__ = ("primal", "compiled", "t_kernel", "arrays", "_take", "_objects", "_grads", "requires_grad",
                 "external", "ndarrays", "scalars", "ctx")

    def __init__(self, primal, t_kernel, arrays, requires_grad, external, ndarrays, scalars, reuse):
        # Nothing here may hold the Taichi program: a prepared launch that outlives `ti.reset()` (a scene not yet
        # collected) would keep the old program alive, and its destruction at a later garbage collection tears
        # down what the current program runs on. `compiled` is the kernel's table of compiled kernels, which
        # Taichi replaces when it resets: a launch prepared under another program is prepared again.
        self.primal, self.compiled, self.t_kernel = primal, primal.compiled_kernels, t_kernel
        self.arrays = arrays  # (position, object, is a gradient): identity-checked, and kept alive
        plain = [(i, v) for i, v, is_grad in arrays if not is_grad]
        # the arrays' positions and objects, for one identity test of all of them (itemgetter of one position
        # returns the item itself, hence the pair of a position with itself)
        self._take = operator.itemgetter(*[i for i, _ in plain] * (2 if len(plain) == 1 else 1)) if plain else None
        self._objects = tuple(v for _, v in plain) * (2 if len(plain) == 1 else 1)
        self._grads = tuple((i, v) for i, v, is_grad in arrays if is_grad)
        # (position, flag) of the torch tensors: requires_grad selects the compiled kernel and whether .grad is passed
        self.requires_grad = requires_grad
        # (index, pointer, bytes, shape, gradient pointer) of torch tensors, and of Taichi ndarrays on the CPU
        self.external = external
        self.ndarrays = ndarrays  # (index, the device array) of Taichi ndarrays elsewhere
        self.scalars = scalars  # (position, name of the context's setter, converter)
        # the context every launch reuses (CPU, every array a host pointer), with its arrays set; or None
        self.ctx = self._filled() if reuse else None

    def matches(self, args):
        """Whether args are the arrays this launch was prepared with (and its kernel was not reset since)."""
        if self.primal.compiled_kernels is not self.compiled:
            return False
        if self._take is not None and not all(map(operator.is_, self._take(args), self._objects)):
            return False
        for i, v in self._grads:
            if args[i].grad is not v:
                return False
        for i, flag in self.requires_grad:
            if args[i].requires_grad is not flag:
                return False
        return True

    def _filled(self):
        """A launch context with the arrays set (the scalars are set per launch)."""
        ctx = self.t_kernel.make_launch_context()
        for index, ptr, nbytes, shape, grad_ptr in self.external:
            ctx.set_arg_external_array_with_shape(index, ptr, nbytes, shape, grad_ptr)
        for index, arr in self.ndarrays:
            ctx.set_arg_ndarray(index, arr)
        return ctx

    def launch(self, args):
        # the reused context (CPU), or a fresh one filled from the converted values (Taichi's launch rewrites the
        # device allocations a context holds)
        ctx = self.ctx if self.ctx is not None else self._filled()
        for i, setter, conv in self.scalars:
            getattr(ctx, setter)((i,), conv(args[i]))
        # the compiled kernel is looked up at every launch, as Taichi's own path does (~1.5 us): a reference kept
        # across launches is not something Taichi promises to keep valid
        prog = impl.get_runtime().prog
        prog.launch_kernel(prog.compile_kernel(prog.config(), prog.get_device_caps(), self.t_kernel), ctx)


def _prepare(kernel, args):
    """What launching `kernel` with `args` needs, converted once, or None if the fast path cannot hold them."""
    from taichi.lang._ndarray import Ndarray
    from taichi.lang.kernel_impl import Kernel
    from taichi.lang.matrix import MatrixType
    from taichi.types import ndarray_type, primitive_types

    primal = kernel if isinstance(kernel, Kernel) else getattr(kernel, "_primal", None)  # kernel.grad is a Kernel
    if primal is None or len(args) != len(primal.arguments) or len(args) > 64:
        return None
    key = primal.ensure_compiled(*args)
    t_kernel = primal.compiled_kernels[key]
    prog = impl.get_runtime().prog
    arch = prog.config().arch.name
    cuda = arch == "cuda"
    # on the CPU every array is handed as a host pointer, so that one filled context serves every launch
    reuse = arch in ("x64", "arm64")
    arrays, requires_grad, external, ndarrays, scalars = [], [], [], [], []
    for i, (meta, v) in enumerate(zip(primal.arguments, args)):
        ann = meta.annotation
        if isinstance(ann, ndarray_type.NdarrayType):
            if isinstance(v, Ndarray):
                if v.grad is not None:
                    return None
                if reuse:
                    external.append(((i,), int(prog.get_ndarray_data_ptr_as_int(v.arr)),
                                     v.arr.nelement() * v.arr.element_size(), tuple(v.arr.shape), 0))
                else:
                    ndarrays.append(((i,), v.arr))
                arrays.append((i, v, False))
            elif isinstance(v, torch.Tensor):
                if not v.is_contiguous() or (v.device.type != "cpu" and not (cuda and v.device.type == "cuda")):
                    return None
                shape = tuple(v.shape)
                if ann.dtype is not None and id(ann.dtype) not in primitive_types.type_ids:
                    if isinstance(ann.dtype, MatrixType) and ann.dtype.ndim:
                        shape = shape[: -ann.dtype.ndim]
                grad = v.grad if v.requires_grad else None
                if grad is not None and not grad.is_contiguous():
                    return None
                external.append(((i,), int(v.data_ptr()), v.element_size() * v.nelement(), shape,
                                 0 if grad is None else int(grad.data_ptr())))
                arrays.append((i, v, False))
                requires_grad.append((i, v.requires_grad))
                if v.requires_grad:
                    arrays.append((i, grad, True))  # checked as args[i].grad (None included)
            else:
                return None
        elif id(ann) in primitive_types.integer_type_ids:
            scalars.append((i, "set_arg_int", int))
        elif id(ann) in primitive_types.real_type_ids:
            scalars.append((i, "set_arg_float", float))
        else:
            return None
    return _Prepared(primal, t_kernel, tuple(arrays), tuple(requires_grad), tuple(external), tuple(ndarrays),
                     tuple(scalars), reuse)


class Launcher:
    """Launches kernels with their argument conversion done once per set of arrays (see the module doc).

    A kernel whose arrays keep changing (a caller passing new views at every call) would pay for preparing a
    launch each time on top of Taichi's path: after MAX_REBINDS new sets of arrays it stays on Taichi's path. The
    last KEPT sets prepared stay ready beside the current one, so a caller alternating between a few sets (the
    rigid substep's external impulses: the state's, or a copy with applied wrenches added, step by step) reuses
    them instead of preparing again and, after MAX_REBINDS switches, falling back to Taichi's path for good."""

    MAX_REBINDS = 8
    KEPT = 3

    def __init__(self):
        self._prepared = {}  # kernel -> its current prepared launch, or False (Taichi's path)
        self._kept = {}  # kernel -> the launches prepared before it, most recent first (at most KEPT)
        self._rebinds = {}

    def __call__(self, kernel, *args):
        if not ENABLED:
            return kernel(*args)
        p = self._prepared.get(kernel)
        if p is False:
            return kernel(*args)
        if p is not None and not p.matches(args):
            kept = self._kept.setdefault(kernel, [])
            found = next((q for q in kept if q.matches(args)), None)
            if found is not None:  # a set of arrays prepared before: swap it in, nothing to prepare
                kept.remove(found)
                kept.insert(0, p)
                self._prepared[kernel] = p = found
            else:
                kept.insert(0, p)
                del kept[self.KEPT:]
                p = None
        if p is None:
            kernel(*args)  # Taichi's own path: compiles on first use and checks every argument
            rebinds = self._rebinds[kernel] = self._rebinds.get(kernel, -1) + 1
            self._prepared[kernel] = rebinds < self.MAX_REBINDS and _prepare(kernel, args) or False
            return None
        p.launch(args)
        return None

    def bind(self, kernel, arrays) -> Bound:
        """`kernel` with each of its array parameters taken from `arrays` (a mapping: parameter name -> torch
        tensor or Taichi ndarray) by its name; the returned `Bound` is called with the other parameters by name:

            substep = launch.bind(kernels.substep, arrays)   # once per set of arrays
            substep(f=f, fn=fn)                              # each substep

        A parameter with no array of its name, or one of another number of dimensions, is a `ValueError`
        naming it (`binding_problems`). Bind again when an array is replaced (the launch itself rebinds its
        converted arguments to new objects, as a positional launch does)."""
        problems = binding_problems(kernel, arrays)
        if problems:
            raise ValueError("; ".join(problems))
        params = kernel_parameters(kernel)
        args = [arrays[name] if _is_array(ann) else None for name, ann in params]
        positions = {name: i for i, (name, _) in enumerate(params)}
        required = frozenset(name for name, ann in params if not _is_array(ann))
        return Bound(self, kernel, args, positions, required)

    def clear(self):
        self._prepared.clear()
        self._kept.clear()
        self._rebinds.clear()


def kernel_parameters(kernel) -> tuple:
    """(name, annotation) of each parameter of a Taichi kernel (or of its serial copy), in order."""
    primal = getattr(kernel, "_primal", kernel)
    return tuple((meta.name, meta.annotation) for meta in primal.arguments)


def _is_array(annotation) -> bool:
    from taichi.types import ndarray_type

    return isinstance(annotation, ndarray_type.NdarrayType)


def binding_problems(kernel, arrays) -> list:
    """What binding `kernel` by name to `arrays` (a mapping: name -> torch tensor or Taichi ndarray) would get
    wrong, as sentences: an array parameter with no array of its name, or one whose array has another number of
    dimensions than the parameter's `ndim` (a vector or matrix element's own dimensions not counted). Empty when
    the binding is sound; a solver's test calls it on every kernel it binds."""
    from taichi.lang.matrix import MatrixType

    name_of = getattr(getattr(kernel, "_primal", kernel), "func", kernel).__name__
    out = []
    for name, ann in kernel_parameters(kernel):
        if not _is_array(ann):
            continue
        if arrays.get(name) is None:
            out.append(f"{name_of}: no array named {name!r}")
            continue
        a = arrays[name]
        if isinstance(a, torch.Tensor):
            ndim = a.dim() - (ann.dtype.ndim if isinstance(ann.dtype, MatrixType) and ann.dtype.ndim else 0)
        else:
            ndim = len(a.shape)
        if ann.ndim is not None and ndim != ann.ndim:
            out.append(f"{name_of}: {name!r} has {ndim} dimensions, the parameter {ann.ndim}")
    return out


class Bound:
    """A kernel with its array parameters taken by name (`Launcher.bind`); call it with the other parameters (the
    scalars: frame indices, flags) by name, and with any array to pass instead of the bound one."""

    __slots__ = ("launcher", "kernel", "args", "positions", "required")

    def __init__(self, launcher, kernel, args, positions, required):
        self.launcher, self.kernel, self.args = launcher, kernel, args
        self.positions, self.required = positions, required

    def __call__(self, **values):
        if not self.required <= values.keys():
            missing = ", ".join(sorted(self.required - values.keys()))
            raise TypeError(f"{self.kernel_name}: no value for {missing}")
        args = self.args.copy()
        positions = self.positions
        for name in values:
            args[positions[name]] = values[name]
        return self.launcher(self.kernel, *args)

    def leading(self, *names):
        """A plain function launching the kernel with `names`, its first parameters in signature order, given
        positionally at each call and the rest bound: for a launch in a hot loop (a kernel that takes its
        per-launch parameters first), without the keyword handling of a call by name."""
        params = list(self.positions)
        if list(names) != params[:len(names)] or not self.required <= set(names):
            raise TypeError(f"{self.kernel_name}: leading({', '.join(names)}) must name its first parameters, "
                            f"{', '.join(params[:len(names)])}, with every scalar among them")
        launcher, kernel, rest = self.launcher, self.kernel, tuple(self.args[len(names):])
        return lambda *values: launcher(kernel, *values, *rest)

    @property
    def kernel_name(self) -> str:
        return getattr(getattr(self.kernel, "_primal", self.kernel), "func", self.kernel).__name__


def serial_variant(kernel, flag: str = "SERIAL"):
    """The same Taichi kernel with its module's global `flag` read as True: a kernel whose body starts with
    ``if ti.static(SERIAL): ti.loop_config(serialize=True)`` then runs its outermost loop on the calling thread.
    For one environment that saves the thread pool's dispatch, 15-35 us a launch measured on the 2-core CPU
    (a kernel over one environment: 27-38 us parallel, 17 us serial). Call it after the module has defined
    everything the kernel uses (its globals are copied then)."""
    import types

    import taichi as ti

    fn = kernel._primal.func
    scope = dict(fn.__globals__)
    scope[flag] = True
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__annotations__ = dict(fn.__annotations__)
    copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    return ti.kernel(copy)


def exact_math(*kernels):
    """Compile these Taichi kernels without LLVM's fast-math flags, whatever the rest of the process uses (Taichi's
    default, fast math, stays on for every other kernel). Under fast math the compiler may contract and reassociate
    a kernel's arithmetic differently in two compilations of the same code, so a kernel and its serial copy
    (`serial_variant`) can give different bits: the rigid solver's did, within a few hundred steps of a pile of
    boxes. Without it they agree bitwise, and a solver may pick either copy by speed alone. Taichi reads the flag
    when a kernel compiles, at its first launch (the offline cache keeps the two compilations apart), so each
    call of these kernels' own path clears it for its duration; the Launcher's bound launches do not compile.
    Measured on the rigid benchmarks: no cost. Returns the kernels."""
    for kernel in kernels:
        for attr in ("_primal", "_adjoint"):
            primal = getattr(kernel, attr, None)
            if primal is not None and not isinstance(primal, _ExactKernel):
                primal.__class__ = _exact_class(type(primal))
    return kernels


_exact_classes = {}


class _ExactKernel:
    """Mixin of exact_math's kernels: Taichi's fast-math flag cleared while the kernel's own path runs."""

    def __call__(self, *args, **kwargs):
        cfg = impl.current_cfg()
        if not cfg.fast_math:
            return super().__call__(*args, **kwargs)
        cfg.fast_math = False
        try:
            return super().__call__(*args, **kwargs)
        finally:
            cfg.fast_math = True


def _exact_class(cls):
    if cls not in _exact_classes:
        _exact_classes[cls] = type(f"Exact{cls.__name__}", (_ExactKernel, cls), {})
    return _exact_classes[cls]


_serial_copies = {}


def serial_below(kernel, n: int, below: int):
    """`kernel` for a launch over n items, or its serial copy (`serial_variant`, made once) when n < below: for
    light loops the thread pool's wake-up (about 70 us a launch on a 2-core CPU) costs more than the work."""
    if n >= below:
        return kernel
    if kernel not in _serial_copies:
        _serial_copies[kernel] = serial_variant(kernel)
    return _serial_copies[kernel]


@contextlib.contextmanager
def torch_one_thread():
    """torch's small CPU ops on one thread while the body runs (the previous count restored after). Beside Taichi's
    thread pool, torch's own intra-op pool makes small ops wait on a busy machine: measured on 2 cores, the
    renderer's particle grid took 33 ms against 3 ms for 3375 particles, a 6 x 6 Cholesky solve of the rigid
    differentiable step 15 ms against 8 us, the viewer's read of the panda 30 ms against 2 ms at 64 environments, and the demo's step 0.31-1.76 s against 0.26-0.29 s (the rigid collider view's
    3 x 3 products). Setting the count costs well under a microsecond."""
    n = torch.get_num_threads()
    if n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)
