"""Write the lower-bound certificates of the three sandwich families beside their heads:
results/heads/<family>_lower_bound.json (the ladders, the shift c, the value and rank of the
sharper lemma), each re-checked before it is kept. Run from the repository root:

    python scripts/write_certificates.py
    python -m companion verify-head results/heads/*_lower_bound.json
"""

from __future__ import annotations

import json
from pathlib import Path

from companion.sandwich.certificates import verify_certificate_file, write_certificate_file

HEADS = Path("results/heads")

for name in ("e1_28", "paley_rows_23", "paley_code_46"):
    spec = json.loads((HEADS / f"{name}_signed.json").read_text())["family"]
    report = verify_certificate_file(write_certificate_file(HEADS / f"{name}_lower_bound.json",
                                                            spec))
    assert report.passed and report.optimal, report.problems
    print(report.summary())
