"""Genesis World's `genesis.utils.misc` helpers that scripts import."""

from __future__ import annotations

import numpy as np
import torch


def tensor_to_array(x, dtype=None) -> np.ndarray:
    """A torch tensor (any device, detached) or array-like as a NumPy array (of `dtype` when given)."""
    if torch.is_tensor(x):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


__all__ = ["tensor_to_array"]
