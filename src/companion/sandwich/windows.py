"""The sandwich's windows (Chapter 3, {prf:ref}`cor-narrowed-sandwich`): for each witness
family and feature class, the smallest feature rank of an exact head lies in [lower, upper],
each end a committed file under results/heads/ that this module re-verifies before it reports
it. The chapters, the index, the claims page and the ledger quote this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from companion.checks import check_path
from companion.sandwich.certificates import verify_certificate_file
from companion.sandwich.head_files import verify_head_file

__all__ = ["FAMILIES", "sandwich_windows"]


def _spec(a: int, b: int) -> dict:
    return {"code": "paley_subset", "q": 23, "a": a, "b": b, "n": 3, "eps": "1/2",
            "convention": "bidirectional"}


#: The three families of the sandwich: (label, the family's spec in the files).
FAMILIES = {"e1_28": _spec(23, 5), "paley_rows_23": _spec(23, 0),
            "paley_code_46": _spec(23, 23)}
LABELS = {"e1_28": "E1 (28 queries)", "paley_rows_23": "23 Paley rows",
          "paley_code_46": "46-word Paley code"}
#: Short names in the keys the pages quote a window by (``window-e1-nonnegative``).
SHORT = {"e1_28": "e1", "paley_rows_23": "rows23", "paley_code_46": "code46"}
#: How a certificate's lemma is named in the table.
LEMMA_NAMES = {"real": "sharper trace lemma", "nonnegative": "Lemma N"}


@dataclass(frozen=True)
class Window:
    """lower <= r_min <= upper for one family and feature class ('real': any real features,
    kernel >= 0; 'nonnegative'), how each end is known and the file that proves it."""

    family: str
    label: str
    features: str
    lower: int
    lower_how: str
    lower_file: str
    upper: int
    upper_how: str
    upper_file: str

    @property
    def closed(self) -> bool:
        return self.lower == self.upper

    @property
    def key(self) -> str:
        """The name the book's pages quote this window by: window-<family>-<features>."""
        return f"window-{SHORT[self.family]}-{self.features}"

    @property
    def text(self) -> str:
        """'exactly 26' for a closed window, '[30, 36]' otherwise."""
        return f"exactly {self.lower}" if self.closed else f"[{self.lower}, {self.upper}]"

    def row(self) -> dict:
        """One line of Chapter 3's table: the window and how each end is known (the files
        are `lower_file` and `upper_file`)."""
        return {"family": self.label, "features": self.features, "window": self.text,
                "lower end": self.lower_how, "upper end": self.upper_how}


def sandwich_windows(folder="results/heads") -> list[Window]:
    """The six windows (family x {real, nonnegative}) from the files in `folder`, each file
    re-checked exactly first (seconds; ValueError if one fails): lower ends from
    <family>_lower_bound.json (real features) and, if present,
    <family>_nonnegative_lower_bound.json; upper ends from <family>_signed.json and
    <family>_nonnegative.json (a nonnegative head is a real-features head too)."""
    folder = check_path(folder, "folder")
    out = []
    for name in FAMILIES:
        certs, heads = {}, {}
        for features, stem in (("real", "lower_bound"), ("nonnegative", "nonnegative_lower_bound")):
            path = folder / f"{name}_{stem}.json"
            if path.exists() or features == "real":
                report = verify_certificate_file(path)
                if not report.passed or report.features != features:
                    raise ValueError(f"{path} does not verify: {report.problems[:2]}")
                certs[features] = (report.rank, LEMMA_NAMES[features], path.name)
        for variant in ("signed", "nonnegative"):
            path = folder / f"{name}_{variant}.json"
            report = verify_head_file(path)
            if not report.passed or report.variant != variant:
                raise ValueError(f"{path} does not verify: {report.problems[:2]}")
            heads[variant] = (report.rank, f"exact {variant} head", path.name)
        for features in ("real", "nonnegative"):
            lows = [certs["real"]] + ([certs["nonnegative"]] if features == "nonnegative"
                                      and "nonnegative" in certs else [])
            ups = [heads["nonnegative"]] + ([heads["signed"]] if features == "real" else [])
            (lo, lo_how, lo_file), (up, up_how, up_file) = max(lows), min(ups)
            out.append(Window(name, LABELS[name], features, lo, lo_how, lo_file, up, up_how,
                              up_file))
    return out
