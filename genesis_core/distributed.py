"""Environments sharded over processes (and GPUs) with `torch.distributed`: `gs.distributed`.

Each process (rank) builds its shard of the environments, steps it, and takes part in gathers and checkpoints::

    import genesis_core as gs

    dist = gs.distributed
    ctx = dist.init(backend=gs.cpu, precision="64", seed=0)   # gs.init + the process group (torchrun's variables)
    shard = dist.shard(n_envs_total=64)                        # this rank's contiguous range of global envs
    scene = ...; scene.build(n_envs=shard.n_envs)
    set_initial_conditions(scene, shard.global_idx)            # seeded by the global env index
    for _ in range(n_steps):
        scene.step()
    obs = dist.gather(entity.get_pos(), dst=0)                 # [n_envs_total, 3] on rank 0, None elsewhere
    dist.save_checkpoint_shard(scene, "run.ckpt.d")            # <dir>/shard_<rank>_of_<world>.ckpt + manifest.json
    dist.load_checkpoint_shard(scene, "run.ckpt.d")            # same world size and layout: resumes bitwise

Without torchrun's variables (or with WORLD_SIZE=1) everything works in one process: world size 1, rank 0, no
process group needed. The process group uses gloo when the engine runs on the CPU and NCCL when it runs on CUDA;
on GPUs each process takes the GPU of its LOCAL_RANK (docs/distributed.md).

Sharding rule (`shard_range`): environments [0, n_envs_total) are cut into `world_size` contiguous ranges in rank
order, the first `n_envs_total % world_size` ranks taking one more; local environment i of a rank is global
environment `offset + i`.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from . import checkpoint as ckpt
from ._runtime import require_init, runtime
from .errors import CheckpointError, CheckpointMismatchError, GenesisError

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "genesis-core.checkpoint-shards"
MANIFEST_VERSION = 1
MAX_MANIFEST_BYTES = 16 * 2**20  # read_manifest's limit: a manifest takes about 150 bytes per shard
MAX_MANIFEST_INT = 2**62  # every integer of a manifest (sizes, ranges, the step index) stays below it
DEFAULT_TIMEOUT_S = 300.0


class DistributedError(GenesisError):
    """A sharding, process-group or shard-layout problem."""


# -- the process group --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """Where this process stands: rank, world_size, local_rank, the backend of the process group (None without one)
    and the torch device its tensors live on."""

    rank: int
    world_size: int
    local_rank: int
    backend: str | None
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise DistributedError(f"environment variable {name}={value!r} is not an integer (torchrun sets it).") from None


def env_layout() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's variables RANK, WORLD_SIZE, LOCAL_RANK ((0, 1, 0) when they
    are absent)."""
    rank, world, local = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1), _env_int("LOCAL_RANK", None)
    if world < 1 or not 0 <= rank < world:
        raise DistributedError(f"RANK={rank}, WORLD_SIZE={world}: the rank must be in [0, WORLD_SIZE).")
    return rank, world, rank if local is None else local


def _dist():
    import torch.distributed as tdist

    if not tdist.is_available():
        raise DistributedError("torch.distributed is not available in this torch build; install a torch with it.")
    return tdist


def is_initialized() -> bool:
    """Whether a torch.distributed process group is up."""
    import torch.distributed as tdist

    return tdist.is_available() and tdist.is_initialized()


def rank() -> int:
    """This process's rank: the process group's, else RANK (0 without torchrun)."""
    return _dist().get_rank() if is_initialized() else env_layout()[0]


def world_size() -> int:
    """The number of processes: the process group's, else WORLD_SIZE (1 without torchrun)."""
    return _dist().get_world_size() if is_initialized() else env_layout()[1]


def context() -> Context:
    """This process's Context (without a process group: world size 1 unless WORLD_SIZE says otherwise)."""
    r, w, local = env_layout()
    if is_initialized():
        tdist = _dist()
        r, w, backend = tdist.get_rank(), tdist.get_world_size(), str(tdist.get_backend())
    else:
        backend = None
    return Context(r, w, local, backend, runtime.device)


def select_local_device(local_rank: int | None = None) -> int | None:
    """Before the engine or torch start CUDA: let this process see only the GPU of its local rank (an entry of
    CUDA_VISIBLE_DEVICES when that is set), so that Taichi and torch both run on it as device 0. Returns the GPU
    chosen, or None when no CUDA GPU is present (nothing is changed)."""
    if local_rank is None:
        local_rank = env_layout()[2]
    if not torch.cuda.is_available():
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = [d for d in visible.split(",") if d.strip()] if visible else [str(i) for i in range(torch.cuda.device_count())]
    if torch.cuda.is_initialized() or runtime.initialized:
        if len(devices) > 1:
            raise DistributedError("select_local_device must run before gs.init and before torch uses CUDA: CUDA "
                                   "is already started in this process, on every visible GPU. Call "
                                   "gs.distributed.init(backend=gs.gpu, ...) instead of gs.init.")
        return 0
    if not 0 <= local_rank < len(devices):
        raise DistributedError(f"LOCAL_RANK={local_rank}, but this machine shows {len(devices)} GPU(s): start at "
                               f"most one process per GPU (torchrun --nproc_per_node={len(devices)}).")
    os.environ["CUDA_VISIBLE_DEVICES"] = devices[local_rank].strip()
    os.environ["TI_VISIBLE_DEVICE"] = "0"
    return local_rank


def init_process_group(backend: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Context:
    """Start the torch.distributed process group from torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT), after gs.init. backend: "gloo" or "nccl"; by default NCCL when the engine runs on CUDA, gloo
    otherwise. With world size 1 and no MASTER_ADDR no group is started (everything then runs locally). Does
    nothing when a group is already up. Returns the Context."""
    require_init("gs.distributed.init_process_group")
    import datetime

    tdist = _dist()
    if is_initialized():
        return context()
    r, w, _ = env_layout()
    if w == 1 and not os.environ.get("MASTER_ADDR"):
        return context()
    if backend is None:
        backend = "nccl" if runtime.device.type == "cuda" else "gloo"
    if backend not in ("gloo", "nccl"):
        raise DistributedError(f"backend={backend!r}: choose 'gloo' (CPU) or 'nccl' (CUDA).")
    if backend == "gloo" and not tdist.is_gloo_available():
        raise DistributedError("this torch build has no gloo backend; install a torch with gloo (the default builds).")
    if backend == "nccl" and (runtime.device.type != "cuda" or not tdist.is_nccl_available()):
        raise DistributedError("backend='nccl' needs the engine on CUDA (gs.init(backend=gs.gpu) on a CUDA machine) "
                               "and a torch built with NCCL; use 'gloo' on the CPU.")
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if not os.environ.get(name):
            raise DistributedError(f"WORLD_SIZE={w} but {name} is not set: start the processes with torchrun (or "
                                   f"set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).")
    kwargs = dict(backend=backend, rank=r, world_size=w, timeout=datetime.timedelta(seconds=timeout_s))
    if backend == "nccl":
        kwargs["device_id"] = torch.device("cuda", torch.cuda.current_device())
    tdist.init_process_group(**kwargs)
    return context()


def init(backend=None, timeout_s: float = DEFAULT_TIMEOUT_S, **init_kwargs) -> Context:
    """gs.init for one process of a sharded run, then the process group: on gs.gpu this process first takes the
    GPU of its LOCAL_RANK (select_local_device). Keywords go to gs.init (precision, seed, ...)."""
    from ._runtime import cpu, gpu, init as gs_init

    backend = cpu if backend is None else backend
    if backend == gpu:
        select_local_device()
    gs_init(backend=backend, **init_kwargs)
    return init_process_group(timeout_s=timeout_s)


def destroy_process_group():
    """Tear the process group down (if one is up)."""
    if is_initialized():
        _dist().destroy_process_group()


def barrier():
    if is_initialized():
        _dist().barrier()


# -- shards ---------------------------------------------------------------------------------------------------------


def _check_int(name, value, low):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise DistributedError(f"{name}={value!r} must be an int >= {low}.")
    return int(value)


def shard_range(n_envs_total: int, rank: int, world_size: int) -> tuple[int, int]:
    """[start, stop) of the global environments of `rank`: contiguous ranges in rank order whose sizes differ by
    at most one (the first n_envs_total % world_size ranks take one more). Every rank needs an environment: a
    world size larger than n_envs_total is refused."""
    n = _check_int("n_envs_total", n_envs_total, 1)
    w = _check_int("world_size", world_size, 1)
    r = _check_int("rank", rank, 0)
    if r >= w:
        raise DistributedError(f"rank={r} is not in [0, world_size={w}).")
    if w > n:
        raise DistributedError(f"{w} processes cannot share {n} environment(s): every process needs at least one. "
                               f"Use at most {n} processes, or more environments.")
    base, extra = divmod(n, w)
    start = r * base + min(r, extra)
    return start, start + base + (1 if r < extra else 0)


def shard_ranges(n_envs_total: int, world_size: int) -> list[tuple[int, int]]:
    """Every rank's shard_range, in rank order."""
    return [shard_range(n_envs_total, r, world_size) for r in range(_check_int("world_size", world_size, 1))]


@dataclass(frozen=True)
class Shard:
    """This rank's environments: global [start, stop) of n_envs_total; local environment i is global start + i."""

    rank: int
    world_size: int
    start: int
    stop: int
    n_envs_total: int

    @property
    def n_envs(self) -> int:
        """The local batch: build the shard's scene with scene.build(n_envs=shard.n_envs)."""
        return self.stop - self.start

    @property
    def offset(self) -> int:
        return self.start

    @property
    def global_idx(self) -> torch.Tensor:
        """The global index of every local environment, a long tensor on gs.device."""
        return torch.arange(self.start, self.stop, dtype=torch.long, device=runtime.device)

    def to_global(self, local_idx):
        """Global environment indices of local ones (an int, or anything torch.as_tensor takes)."""
        return _shift(local_idx, self.start, self.n_envs, "local")

    def to_local(self, global_idx):
        """Local indices of global environments of this shard; an index outside it raises."""
        return _shift(global_idx, -self.start, self.n_envs, "global", self.start)

    def owns(self, global_idx: int) -> bool:
        return self.start <= int(global_idx) < self.stop


def _shift(idx, delta, n, kind, low=0):
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
        if not low <= idx < low + n:
            raise DistributedError(f"{kind} environment index {int(idx)} is not in [{low}, {low + n}).")
        return int(idx) + delta
    t = torch.as_tensor(idx)
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise DistributedError(f"{kind} environment indices must be integers, got {t.dtype}.")
    t = t.to(torch.long)
    if t.numel() and (int(t.min()) < low or int(t.max()) >= low + n):
        raise DistributedError(f"{kind} environment indices must be in [{low}, {low + n}); got "
                               f"{t.min().item()}..{t.max().item()}.")
    return t + delta


def shard(n_envs_total: int, rank: int | None = None, world_size: int | None = None) -> Shard:
    """This process's Shard of n_envs_total environments (rank and world size: the process group's by default)."""
    r = globals()["rank"]() if rank is None else rank
    w = globals()["world_size"]() if world_size is None else world_size
    start, stop = shard_range(n_envs_total, r, w)
    if stop - start == 1 and n_envs_total > 1:
        warnings.warn(f"rank {r} holds one environment of {n_envs_total}: a batch of one runs serial kernel "
                      "copies (the rigid solver's give its batched kernels' bits; the particle solvers' may differ "
                      "in the last bits, fast math); give every rank at least two environments for results bitwise "
                      "equal to the unsharded run (docs/distributed.md).", stacklevel=2)
    return Shard(int(r), int(w), start, stop, int(n_envs_total))


def env_generator(global_idx: int, seed: int = 0, device=None) -> torch.Generator:
    """A torch generator seeded from (seed, global environment index): randomisation drawn from it is the same
    whichever process, shard or batch size holds the environment."""
    g = torch.Generator(device=device or "cpu")
    g.manual_seed((int(seed) * 1_000_003 + int(global_idx)) % (2**63 - 1))
    return g


# -- gathers --------------------------------------------------------------------------------------------------------


def _comm_device():
    return torch.device("cuda", torch.cuda.current_device()) if str(_dist().get_backend()) == "nccl" else torch.device("cpu")


def _all_sizes(n_local: int) -> list[int]:
    tdist = _dist()
    dev = _comm_device()
    mine = torch.tensor([n_local], dtype=torch.long, device=dev)
    sizes = [torch.zeros(1, dtype=torch.long, device=dev) for _ in range(tdist.get_world_size())]
    tdist.all_gather(sizes, mine)
    return [int(s.item()) for s in sizes]


def local_sizes(n_local: int) -> list[int]:
    """Every rank's local environment count, in rank order (a collective: every rank calls it)."""
    n_local = _check_int("n_local", n_local, 0)
    return _all_sizes(n_local) if is_initialized() else [n_local]


def gather(tensor: torch.Tensor, dst: int | None = None) -> torch.Tensor | None:
    """Concatenate every rank's `[n_local, ...]` tensor along the first dimension in rank order, i.e. in global
    environment order (shards may differ in size; the trailing shape and dtype must agree). dst=None: every rank
    gets the result; dst=r: rank r gets it, the others None. A collective: every rank calls it. The result is on
    the input's device."""
    if not isinstance(tensor, torch.Tensor):
        raise DistributedError(f"gather takes a torch tensor shaped [n_local, ...], got {type(tensor).__name__}.")
    if tensor.dim() == 0:
        raise DistributedError("gather takes a tensor shaped [n_local, ...] (environments first), got a scalar.")
    out_device = tensor.device
    plain = tensor.detach()
    if type(plain) is not torch.Tensor:
        plain = plain.as_subclass(torch.Tensor)
    if not is_initialized():
        if dst not in (None, 0):
            raise DistributedError(f"gather(dst={dst}): without a process group the only rank is 0.")
        return plain.clone()
    tdist = _dist()
    w, me = tdist.get_world_size(), tdist.get_rank()
    if dst is not None and not (isinstance(dst, int) and 0 <= dst < w):
        raise DistributedError(f"gather(dst={dst!r}): dst must be None or a rank in [0, {w}).")
    dev = _comm_device()
    # the trailing shape and dtype must match everywhere: compare a small description first
    desc = (tuple(plain.shape[1:]), str(plain.dtype))
    descs = [None] * w
    tdist.all_gather_object(descs, desc)
    if any(d != desc for d in descs):
        raise DistributedError(f"gather: the ranks hold tensors of different trailing shapes or dtypes: {descs} "
                               "(each rank passes [n_local, ...] of the same [...] and dtype).")
    sizes = _all_sizes(plain.shape[0])
    as_bool = plain.dtype == torch.bool
    x = (plain.to(torch.uint8) if as_bool else plain).to(dev).contiguous()
    n_max = max(sizes)
    if x.shape[0] < n_max:  # pad to a common size (collectives need equal shapes), trimmed below
        x = torch.cat([x, x.new_zeros((n_max - x.shape[0],) + tuple(x.shape[1:]))])
    if dst is None:
        parts = [torch.empty_like(x) for _ in range(w)]
        tdist.all_gather(parts, x)
    else:
        parts = [torch.empty_like(x) for _ in range(w)] if me == dst else None
        tdist.gather(x, parts, dst=dst)
        if me != dst:
            return None
    out = torch.cat([p[:n] for p, n in zip(parts, sizes)])
    if as_bool:
        out = out.to(torch.bool)
    return out.to(out_device)


def gather_state(scene, dst: int | None = None) -> dict | None:
    """Every checkpointed field of the scene gathered over the ranks, by key ("RigidSolver.qpos"), each
    [n_envs_total, ...] in global environment order (dst as in `gather`). Needs a scene built with n_envs >= 1."""
    if scene.n_envs < 1:
        raise DistributedError("gather_state needs a scene built with n_envs >= 1 (a batch dimension to shard).")
    fields = scene.get_state().fields_by_key()
    out = {}
    for key in sorted(fields):
        g = gather(fields[key], dst=dst)
        if g is not None:
            out[key] = g
    return out or None


# -- checkpoint shards ----------------------------------------------------------------------------------------------


def shard_file(rank: int, world_size: int) -> str:
    return f"shard_{int(rank)}_of_{int(world_size)}.ckpt"


def _layout(scene) -> tuple[int, int, list[tuple[int, int]]]:
    """(rank, world size, every rank's [start, stop)) of a built scene's shard; the ranges follow the rank order of
    the local batch sizes."""
    if not scene.is_built:
        raise DistributedError("checkpoint shards need a built scene: call scene.build(n_envs=shard.n_envs) first.")
    if scene.n_envs < 1:
        raise DistributedError("checkpoint shards need a scene built with n_envs >= 1 (a batch dimension to shard).")
    sizes = local_sizes(scene.n_envs)
    starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return rank(), world_size(), [(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def _write_json(path, data):
    ckpt.write_atomically(path, lambda fh: json.dump(data, fh, indent=1, sort_keys=True), "w", ".json")


def _all_ok(error: str | None) -> list[str | None]:
    """Every rank's error (None: fine), so that all ranks fail together."""
    if not is_initialized():
        return [error]
    out = [None] * world_size()
    _dist().all_gather_object(out, error)
    return out


def _raise_if_any(errors, me, exc_type, what):
    if any(errors):
        mine = errors[me] if me < len(errors) else None
        if mine:
            raise exc_type(mine)
        first = next(i for i, e in enumerate(errors) if e)
        raise exc_type(f"{what}: rank {first} failed ({errors[first]}); every rank stopped with it.")


def save_checkpoint_shard(scene, directory) -> str:
    """Write this rank's shard of the scene to `<directory>/shard_<rank>_of_<world>.ckpt` (an ordinary checkpoint
    of the local batch, written atomically) and, on rank 0 once every shard is written, `<directory>/manifest.json`:
    the world size, every rank's global [start, stop), n_envs_total, the step index and each shard's checksum. A
    collective: every rank calls it. Returns this rank's shard path."""
    r, w, ranges = _layout(scene)
    directory = os.fspath(directory)
    path = os.path.join(directory, shard_file(r, w))
    error = None
    try:
        if r == 0:
            os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        error = f"cannot create the checkpoint folder {directory!r}: {exc.strerror or exc}"
    _raise_if_any(_all_ok(error), r, CheckpointError, "save_checkpoint_shard")
    try:
        scene.save_checkpoint(path)
        digest = ckpt.read(path)["checksum"]["digest"]
        error = None
    except Exception as exc:
        digest, error = None, f"{type(exc).__name__}: {exc}"
    _raise_if_any(_all_ok(error), r, CheckpointError, "save_checkpoint_shard")
    digests = [None] * w
    if is_initialized():
        _dist().all_gather_object(digests, digest)
    else:
        digests = [digest]
    if r == 0:
        manifest = {
            "format": MANIFEST_FORMAT,
            "format_version": MANIFEST_VERSION,
            "world_size": w,
            "n_envs_total": ranges[-1][1],
            "step_index": int(scene.t),
            "shards": [{"rank": i, "file": shard_file(i, w), "start": a, "stop": b, "checksum": digests[i]}
                       for i, (a, b) in enumerate(ranges)],
        }
        try:
            _write_json(os.path.join(directory, MANIFEST), manifest)
            error = None
        except Exception as exc:
            error = f"cannot write the manifest in {directory!r}: {exc}"
    _raise_if_any(_all_ok(error if r == 0 else None), r, CheckpointError, "save_checkpoint_shard")
    return path


def _json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text, brackets inside strings not counted, found without
    parsing it (so without recursion): escaped backslashes, then escaped quotes are dropped, each quote left opens
    or closes a string, and the brackets outside strings are summed up to the first one that closes more than was
    opened (where a parser stops)."""
    code = np.frombuffer(raw.replace(b"\\\\", b"").replace(b'\\"', b""), dtype=np.uint8)
    step = ((code == ord("[")) | (code == ord("{"))).astype(np.int8) - ((code == ord("]")) | (code == ord("}")))
    step[np.logical_xor.accumulate(code == ord('"'))] = 0
    depth = np.cumsum(step, dtype=np.int32)
    below = np.flatnonzero(depth < 0)
    return int(depth[:below[0] if below.size else None].max(initial=0))


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:45] + "... (" + str(len(text)) + " characters)"


def _manifest_int(path, key, value, low=0) -> int:
    """`value` of manifest entry `key`, an int (not a bool) in [low, MAX_MANIFEST_INT), or a CheckpointError."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < MAX_MANIFEST_INT:
        raise CheckpointError(f"{path!r} is malformed: {key} = {_short(value)} is not an integer in [{low}, 2**62).")
    return value


def read_manifest(directory) -> dict:
    """The manifest of a folder of checkpoint shards, checked for its format. A file over MAX_MANIFEST_BYTES, not
    UTF-8 or nested deeper than the checkpoint's plain-data limit (checkpoint.MAX_DEPTH, checked before parsing),
    an integer entry that is not an int in [0, 2**62) (world_size: in [1, 2**62) and the number of shards listed),
    or any other malformed content is refused with a CheckpointError naming what is wrong."""
    path = os.path.join(os.fspath(directory), MANIFEST)
    try:
        raw = ckpt.read_at_most(path, MAX_MANIFEST_BYTES, " for a shard manifest", "nothing was parsed")
    except FileNotFoundError:
        raise CheckpointError(f"{os.fspath(directory)!r} holds no {MANIFEST}: not a folder of checkpoint shards "
                              "written by gs.distributed.save_checkpoint_shard (or a save did not finish).") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path!r} is not a readable shard manifest ({exc}).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path!r} is not a readable shard manifest (not UTF-8 text: {exc}).") from None
    depth = _json_depth(raw)
    if depth > ckpt.MAX_DEPTH:
        raise CheckpointError(f"{path!r} is not a shard manifest: its JSON is nested {depth} levels deep, more than "
                              f"the limit of {ckpt.MAX_DEPTH}; nothing was parsed.")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # (the depth check above keeps the parser far from the limit)
        raise CheckpointError(f"{path!r} is not a readable shard manifest ({str(exc)[:200]}).") from None
    problem = ckpt._plain_problem(data)
    if problem:
        raise CheckpointError(f"{path!r} is not a shard manifest: it {problem}.")
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise CheckpointError(f"{path!r} is not a genesis-core shard manifest.")
    version = data.get("format_version")
    if isinstance(version, bool) or version != MANIFEST_VERSION:
        raise CheckpointError(f"{path!r} has manifest version {_short(version)}; this engine reads "
                              f"{MANIFEST_VERSION}.")
    w = _manifest_int(path, "world_size", data.get("world_size"), low=1)
    n_total = _manifest_int(path, "n_envs_total", data.get("n_envs_total"))
    _manifest_int(path, "step_index", data.get("step_index"))
    shards = data.get("shards")
    if not isinstance(shards, list) or len(shards) != w:
        listed = f"lists {len(shards)} shards" if isinstance(shards, list) else f"has shards = {_short(shards)}"
        raise CheckpointError(f"{path!r} is malformed: it {listed} and world_size is {w}; it must list one shard "
                              "per rank.")
    stop = 0
    for i, s in enumerate(shards):
        if not isinstance(s, dict):
            raise CheckpointError(f"{path!r} is malformed: shards[{i}] = {_short(s)} is not an object.")
        if _manifest_int(path, f"shards[{i}].rank", s.get("rank")) != i:
            raise CheckpointError(f"{path!r} is malformed: shards[{i}].rank = {s['rank']}; the shards are listed in "
                                  "rank order.")
        if s.get("file") != shard_file(i, w):
            raise CheckpointError(f"{path!r} is malformed: shards[{i}].file = {_short(s.get('file'))}, expected "
                                  f"{shard_file(i, w)!r}.")
        if not isinstance(s.get("checksum"), str):
            raise CheckpointError(f"{path!r} is malformed: shards[{i}].checksum = {_short(s.get('checksum'))} is not "
                                  "a string.")
        start = _manifest_int(path, f"shards[{i}].start", s.get("start"))
        end = _manifest_int(path, f"shards[{i}].stop", s.get("stop"))
        if start != stop or end <= start:
            raise CheckpointError(f"{path!r} is malformed: shards[{i}] holds [{start}, {end}); the ranges must be "
                                  f"contiguous and non-empty (this one starting at {stop}).")
        stop = end
    if stop != n_total:
        raise CheckpointError(f"{path!r} is malformed: the shards cover [0, {stop}) and n_envs_total is {n_total}.")
    return data


def check_layout(manifest: dict, rank: int, world_size: int, ranges: list[tuple[int, int]]) -> str | None:
    """Why a run of `world_size` processes whose shards cover `ranges` cannot resume the shards of `manifest`, or
    None when it can."""
    saved_w = manifest["world_size"]
    if saved_w != world_size:
        return (f"the checkpoint shards were written by {saved_w} process(es) and this run has {world_size}: resume "
                f"with the same world size (torchrun --nproc_per_node={saved_w}), or load each shard into a scene of "
                f"its own with scene.load_checkpoint")
    saved = [(s["start"], s["stop"]) for s in manifest["shards"]]
    if manifest["n_envs_total"] != ranges[-1][1]:
        return (f"the checkpoint shards hold {manifest['n_envs_total']} environments and this run has "
                f"{ranges[-1][1]}: build the same n_envs_total")
    if [tuple(x) for x in ranges] != saved:
        first = next(i for i, (a, b) in enumerate(zip(saved, ranges)) if tuple(a) != tuple(b))
        return (f"the shard layout differs: rank {first} held global environments {list(saved[first])} when saved "
                f"and holds {list(ranges[first])} now (build each rank's scene with gs.distributed.shard(...).n_envs)")
    return None


def load_checkpoint_shard(scene, directory, max_bytes: int | None = None):
    """Resume this rank's shard from a folder written by save_checkpoint_shard: the world size, n_envs_total and
    every rank's range must be those saved, and each shard file must be the one the manifest names (its checksum);
    otherwise every rank raises with the reason and no scene is changed. A collective: every rank calls it."""
    r, w, ranges = _layout(scene)
    directory = os.fspath(directory)
    error = None
    path = os.path.join(directory, shard_file(r, w))
    try:
        manifest = read_manifest(directory)
        problem = check_layout(manifest, r, w, ranges)
        if problem:
            raise CheckpointMismatchError(f"{directory!r} does not fit this run: {problem}. Nothing was changed.")
        payload = ckpt.read(path)
        entry = manifest["shards"][r]
        if payload["checksum"]["digest"] != entry["checksum"] or payload["step_index"] != manifest["step_index"]:
            raise CheckpointMismatchError(
                f"{path!r} is not the shard the manifest names (another save, or one that did not finish, replaced "
                f"it: its checksum or step index {payload['step_index']} differs from the manifest's, step "
                f"{manifest['step_index']}). Nothing was changed.")
        layout = {k: v for s in scene.active_solvers for k, v in s.state.checkpoint_layout().items()}
        ckpt.check_fits(payload, scene.signature(), layout, path)
    except (CheckpointError, OSError) as exc:
        error = exc
    errors = _all_ok(None if error is None else str(error))
    if error is not None:
        raise error
    _raise_if_any(errors, r, CheckpointMismatchError, f"load_checkpoint_shard({directory!r})")
    try:
        scene.load_checkpoint(path, max_bytes=max_bytes)
        error = None
    except CheckpointError as exc:
        error = exc
    errors = _all_ok(None if error is None else str(error))
    if error is not None:
        raise error
    _raise_if_any(errors, r, CheckpointError, f"load_checkpoint_shard({directory!r})")


__all__ = [
    "Context", "DistributedError", "Shard", "barrier", "check_layout", "context", "destroy_process_group",
    "env_generator", "env_layout", "gather", "gather_state", "init", "init_process_group", "is_initialized",
    "load_checkpoint_shard", "local_sizes", "rank", "read_manifest", "save_checkpoint_shard", "select_local_device",
    "shard", "shard_file", "shard_range", "shard_ranges", "world_size",
]
