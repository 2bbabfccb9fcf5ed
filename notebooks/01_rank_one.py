# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Rank one suffices at lengths 1 and 2
#
# (chapter in progress)

# %% tags=["remove-output"]
# Install the companion where it is missing (Colab, a bare kernel); a no-op locally and on
# Binder. Versions come from the lock file that CI uses (constraints.txt).
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("companion") is None:
    REPO = "https://github.com/three-tokens/companion"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet",
         "--constraint", f"{REPO}/raw/main/constraints.txt", f"companion @ git+{REPO}@main"],
        check=True,
    )

# %%
import numpy as np

from companion.reproducibility import seed_everything

seed_everything(0)
