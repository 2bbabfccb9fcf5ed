"""Live re-runs checked against committed results (chapters 6-8; training is chaotic in float
rounding): every model within a tolerance, and every verdict (value < threshold) the same
where the committed value is farther than the tolerance from the threshold."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from companion.checks import check_float, check_mapping

__all__ = ["ReferenceCheck", "check_against_reference"]


@dataclass(frozen=True)
class ReferenceCheck:
    """Outcome of :func:`check_against_reference` (see there)."""

    quantity: str
    tolerance: float
    threshold: float | None
    models: int
    beyond_tolerance: tuple  # keys whose live value moved more than the tolerance
    decided: int  # models whose committed value is farther than the tolerance from threshold
    verdicts_changed: tuple  # decided keys whose live verdict differs from the committed one
    largest_deviation: float  # volatile: for messages only, never printed in a compared cell

    @property
    def passed(self) -> bool:
        return not self.beyond_tolerance and not self.verdicts_changed

    def summary(self) -> str:
        """One line that is identical on every machine whenever the check passes."""
        line = (f"{self.models} models re-trained: {self.quantity} within ±{self.tolerance:g} "
                f"of the committed run for {self.models - len(self.beyond_tolerance)}/"
                f"{self.models}")
        if self.threshold is not None:
            line += (f"; verdict ({self.quantity} < {self.threshold:g}) unchanged for "
                     f"{self.decided - len(self.verdicts_changed)}/{self.decided} models whose "
                     f"committed value is farther than ±{self.tolerance:g} from "
                     f"{self.threshold:g}")
        return line

    def failure_message(self) -> str:
        return (f"live re-run differs from the committed results (largest deviation "
                f"{self.largest_deviation:.4f} > {self.tolerance:g}: {list(self.beyond_tolerance)}"
                f"; verdicts changed: {list(self.verdicts_changed)}): the code changed (rerun "
                "the CLI) or this platform drifts more than measured (book/reading.md)")


def check_against_reference(
    live: Mapping[Hashable, float],
    stored: Mapping[Hashable, float],
    *,
    quantity: str,
    tolerance: float,
    threshold: float | None = None,
) -> ReferenceCheck:
    """Compare live values with committed ones, model by model (same keys in both)."""
    check_mapping(live, "live"), check_mapping(stored, "stored")
    if not isinstance(quantity, str) or not quantity:
        raise TypeError("quantity must be a non-empty str naming what is compared")
    tolerance = check_float(tolerance, "tolerance", 0.0, math.inf, low_open=True)
    if threshold is not None:
        threshold = check_float(threshold, "threshold", -math.inf, math.inf)
    if set(live) != set(stored):
        raise ValueError(f"live and stored must hold the same model keys; missing from live: "
                         f"{sorted(map(str, set(stored) - set(live)))}, not in stored: "
                         f"{sorted(map(str, set(live) - set(stored)))}")
    if not live:
        raise ValueError("live and stored must hold at least one model")
    keys = sorted(stored, key=str)
    beyond, changed, decided, largest = [], [], 0, 0.0
    for key in keys:
        got, ref = float(live[key]), float(stored[key])
        if not (math.isfinite(got) and math.isfinite(ref)):
            raise ValueError(f"model {key!r} has a non-finite value (live {got}, stored {ref})")
        deviation = abs(got - ref)
        largest = max(largest, deviation)
        if deviation > tolerance:
            beyond.append(key)
        if threshold is not None and abs(ref - threshold) > tolerance:
            decided += 1
            if (got < threshold) != (ref < threshold):
                changed.append(key)
    return ReferenceCheck(quantity, tolerance, threshold, len(keys), tuple(beyond), decided,
                          tuple(changed), largest)
