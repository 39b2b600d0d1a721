"""Counter-based random numbers for the sensors' noise, batched over environments with torch integer ops.

Environment b's draws at its step counter n are a pure function of (its key, n, the channel): a 32-bit integer
hash (Wellons' "lowbias32" mixer) of the three, turned into standard normals by the Box-Muller transform. The
per-environment state is therefore two integers, the key and the counter, declared as sensor state: restoring
them replays the same noise, and no environment's draws depend on another's or on how many environments there
are. Integers are held in int64 with 32-bit masks; every product stays below 2^49 (no overflow).
"""

from __future__ import annotations

import math

import torch

M32 = 0xFFFFFFFF
COUNTER_MAX = 2**31 - 1  # the counter wraps to 0 after it (int32 storage)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for x in [0, 2^32), c < 2^32, without leaving int64's range."""
    return (((((x >> 16) * c) & M32) << 16) + (x & 0xFFFF) * c) & M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """Wellons' lowbias32 integer hash of x (int64 in [0, 2^32))."""
    x = x & M32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def to_int32(x: torch.Tensor) -> torch.Tensor:
    """A value in [0, 2^32) as the int32 with the same bits."""
    x = x & M32
    return torch.where(x >= 2**31, x - 2**32, x).to(torch.int32)


def env_keys(seed: int, n: int, device) -> torch.Tensor:
    """The int32 keys of environments 0..n-1 for a seed (any int >= 0)."""
    env = torch.arange(n, dtype=torch.int64, device=device)
    s = mix32(torch.tensor([seed & M32], dtype=torch.int64, device=device) ^ mix32(
        torch.tensor([(seed >> 32) & M32], dtype=torch.int64, device=device) + 0x9E3779B9))
    return to_int32(mix32(s ^ mix32(env * 2 + 1)))


def uniforms(key: torch.Tensor, counter: torch.Tensor, n: int, first_stream: int = 0) -> torch.Tensor:
    """[B, n] float64 draws, uniform in (0, 1), of streams first_stream.. of the environments whose keys and
    counters are `key`, `counter` ([B] int32). Distinct streams of one (key, counter) are independent draws."""
    k = key.to(torch.int64) & M32
    c = counter.to(torch.int64) & M32
    stream = torch.arange(first_stream, first_stream + n, dtype=torch.int64, device=key.device)
    h = mix32(k[:, None] ^ mix32(c[:, None] + mix32(stream[None, :] + 0x632BE5AB)))
    return (h.to(torch.float64) + 0.5) * (1.0 / 2**32)


def normals(key: torch.Tensor, counter: torch.Tensor, n: int, dtype, first_stream: int = 0) -> torch.Tensor:
    """[B, n] standard normal draws (streams first_stream .. first_stream + 2 n) of the environments whose keys and
    counters are `key`, `counter` ([B] int32)."""
    u = uniforms(key, counter, 2 * n, first_stream)
    u1, u2 = u[:, 0::2], u[:, 1::2]
    return (torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)).to(dtype)
