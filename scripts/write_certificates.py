"""Write the lower-bound certificates of the three sandwich families beside their heads:
results/heads/<family>_lower_bound.json (any real features: the ladders, the shift c, the
value and rank of the sharper trace lemma) and, where Lemma N proves more,
results/heads/<family>_nonnegative_lower_bound.json (nonnegative features: beta^2 and
min(|S|, floor(1/beta^2) + 1)), each re-checked before it is kept. From the repository root:

    python scripts/write_certificates.py
    python -m companion verify-head results/heads/*lower_bound.json
"""

from __future__ import annotations

from pathlib import Path

from companion.sandwich.certificates import verify_certificate_file, write_certificate_file
from companion.sandwich.windows import FAMILIES

HEADS = Path("results/heads")

for name, spec in FAMILIES.items():
    real = verify_certificate_file(write_certificate_file(HEADS / f"{name}_lower_bound.json",
                                                          spec, "real"))
    assert real.passed and real.optimal, real.problems
    print(real.summary())
    path = HEADS / f"{name}_nonnegative_lower_bound.json"
    nonneg = verify_certificate_file(write_certificate_file(path, spec, "nonnegative"))
    assert nonneg.passed, nonneg.problems
    if nonneg.rank > real.rank:
        print(nonneg.summary())
    else:  # nonnegative features are real features: the real certificate is the stronger
        path.unlink()
        print(f"{name}: Lemma N proves {nonneg.rank} <= {real.rank}, no nonnegative file kept")
