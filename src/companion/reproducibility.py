"""One switch for determinism: seeds and thread counts for python, numpy and torch.

Serves every chapter (its second code cell).
"""

from __future__ import annotations

import os
import random

import numpy as np

from .checks import check_int

#: Most torch threads accepted: the machine's cores or 64, whichever is more (every thread
#: reserves a stack; torch aborts the process on absurd counts such as 10**6).
MAX_THREADS = max(64, os.cpu_count() or 1)


def seed_everything(seed: int = 0, threads: int = 1) -> np.random.Generator:
    """Seed python, numpy and torch, fix torch's thread count, and return a numpy Generator.

    One thread by default: reductions then run in one fixed order, so float results do
    not depend on how many cores the reader's machine has. Limit: threads <= max(64, cores)
    (:data:`MAX_THREADS`).
    """
    seed = check_int(seed, "seed", 0, 2**32 - 1)
    threads = check_int(threads, "threads", 1, MAX_THREADS)
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
