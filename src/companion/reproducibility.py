"""One switch for determinism: seeds and thread counts for python, numpy and torch."""

from __future__ import annotations

import random

import numpy as np


def seed_everything(seed: int = 0, threads: int = 1) -> np.random.Generator:
    """Seed python, numpy and torch, fix torch's thread count, and return a numpy Generator.

    One thread by default: reductions then run in one fixed order, so float results do
    not depend on how many cores the reader's machine has.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must lie in [0, 2**32), got {seed}")
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    random.seed(int(seed))
    np.random.seed(int(seed))
    try:
        import torch
    except ImportError:  # the exact chapters do not need torch
        pass
    else:
        torch.manual_seed(int(seed))
        torch.set_num_threads(int(threads))
        torch.use_deterministic_algorithms(True, warn_only=True)
    return np.random.default_rng(int(seed))
