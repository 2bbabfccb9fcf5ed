"""Argument checks shared by every module: one definition of each.

Each check returns the value in its canonical type (int, float, Fraction, int64 array) or
raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, outside the accepted
range) with a message that names the argument and the accepted range. Serves every chapter;
the paper's own parameters (eps, the length n, a total gap G, beta) are checked here too, so
:mod:`companion.bounds.gap_domination`, :mod:`companion.bounds.amplification` and the rest
agree on them.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping, Sequence
from fractions import Fraction
from numbers import Rational
from pathlib import Path

import numpy as np

__all__ = [
    "check_int", "check_positive_int", "check_int_sequence", "check_float", "check_fraction",
    "check_bool", "check_choice", "check_instance", "check_tokens", "check_token", "check_eps",
    "check_length", "check_gap", "check_beta", "checked_comb", "has_repeated_row", "check_array",
    "check_mapping", "check_path", "check_device", "read_json_file",
]


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return (isinstance(value, (Rational, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)))


def _check_spec(name, low=None, high=None, integer: bool = False) -> None:
    """The checks' own arguments: a non-empty name and ends that are numbers or None (a
    string end would otherwise fail later in a bare comparison that names nothing)."""
    if not isinstance(name, str) or not 0 < len(name) <= 200:
        raise TypeError(f"name must be a str of 1 to 200 characters (the checked argument's "
                        f"name), got {name!r:.60}")
    for which, bound in (("low", low), ("high", high)):
        if bound is not None and not _is_real(bound):
            raise TypeError(f"{which} (a bound for {name}) must be a number or None, got "
                            f"{type(bound).__name__}")


def check_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """`value` as an int in [low, high] (either end may be open-ended: None); bool refused."""
    _check_spec(name, low, high, integer=True)
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if (low is not None and value < low) or (high is not None and value > high):
        if high is None:
            accepted = f"an int >= {low}"
        elif low is None:
            accepted = f"an int <= {high}"
        else:
            accepted = f"an int in [{low}, {high}]"
        raise ValueError(f"{name} must be {accepted}, got {value}")
    return int(value)


def check_positive_int(value, name: str, upper: int | None = None) -> int:
    """`value` as an int in [1, upper] (upper None: no upper limit)."""
    return check_int(value, name, 1, upper)


#: Longest int sequence :func:`check_int_sequence` accepts (seeds, ranks, widths, ...): it is
#: checked entry by entry, so ``range(10**9)`` must be refused before the loop.
MAX_SEQUENCE_LENGTH = 10**6


def check_int_sequence(values, name: str, low: int | None = None, high: int | None = None,
                       allow_empty: bool = False) -> list[int]:
    """A sequence of ints, each in [low, high], as a list (entries named name[i]); non-empty
    unless `allow_empty`; at most 10**6 entries (:data:`MAX_SEQUENCE_LENGTH`)."""
    _check_spec(name, low, high, integer=True)
    if (isinstance(values, (str, bytes)) or not isinstance(values, Sequence)
            or (len(values) == 0 and not allow_empty)):
        kind = "a sequence" if allow_empty else "a non-empty sequence"
        raise TypeError(f"{name} must be {kind} of ints, got {values!r:.100}")
    if len(values) > MAX_SEQUENCE_LENGTH:
        raise ValueError(f"{name} must hold at most {MAX_SEQUENCE_LENGTH} entries, got "
                         f"{len(values)}")
    return [check_int(v, f"{name}[{i}]", low, high) for i, v in enumerate(values)]


def _range_text(low, high, low_open: bool, high_open: bool) -> str:
    """'be a finite number >= low', 'lie in (low, high]', ...: the accepted range in words."""
    if low is None and high is None:
        return "be a finite number"
    if high is None:
        return f"be a finite number {'>' if low_open else '>='} {low}"
    if low is None:
        return f"be a finite number {'<' if high_open else '<='} {high}"
    return f"lie in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def _in_range(v, low, high, low_open: bool, high_open: bool) -> bool:
    above = low is None or (v > low if low_open else v >= low)
    below = high is None or (v < high if high_open else v <= high)
    return above and below


def check_float(value, name: str, low: float | None = None, high: float | None = None, *,
                low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number (int, float, Fraction; bool refused) in the given range, as a float."""
    _check_spec(name, low, high)
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and _in_range(v, low, high, low_open, high_open)):
        raise ValueError(f"{name} must {_range_text(low, high, low_open, high_open)}, got {value}")
    return v


def check_fraction(value, name: str, low=None, high=None, *, low_open: bool = False,
                   high_open: bool = False) -> Fraction:
    """An exact rational (int, Fraction, or a finite float read exactly) in the range."""
    _check_spec(name, low, high)
    for which, bound in (("low", low), ("high", high)):
        if isinstance(bound, (float, np.floating)) and not math.isfinite(bound):
            raise ValueError(f"{which} must be a finite number or None, got {bound}")
    if not _is_real(value):
        raise TypeError(
            f"{name} must be a real number (int, Fraction or float), got {type(value).__name__}")
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    v = Fraction(value)
    if not _in_range(v, low, high, low_open, high_open):
        raise ValueError(f"{name} must {_range_text(low, high, low_open, high_open)}, got {value}")
    return v


def check_bool(value, name: str) -> bool:
    _check_spec(name)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def check_choice(value, name: str, choices: Sequence):
    """`value` if it is one of `choices` (compared with ==)."""
    _check_spec(name)
    if not isinstance(choices, (Sequence, set, frozenset)) or isinstance(choices, (str, bytes)):
        raise TypeError(f"choices must be a sequence or set of the accepted values, got "
                        f"{type(choices).__name__}")
    try:
        found = not isinstance(value, (list, dict, set)) and value in choices
    except (TypeError, ValueError):  # an unhashable value and a set, an array's ==
        found = False
    if not found:
        shown = tuple(choices) if len(choices) <= 100 else f"{len(choices)} values"
        raise ValueError(f"{name} must be one of {shown}, got {value!r:.200}")
    return value


def check_instance(value, name: str, cls: type):
    """`value` if it is an instance of `cls`."""
    _check_spec(name)
    if not (isinstance(cls, type) or (isinstance(cls, tuple) and cls
                                      and all(isinstance(c, type) for c in cls))):
        raise TypeError(f"cls must be a class (or a tuple of classes), got {cls!r:.60}")
    if not isinstance(value, cls):
        kind = " or ".join(c.__name__ for c in cls) if isinstance(cls, tuple) else cls.__name__
        raise TypeError(f"{name} must be a {kind}, got {type(value).__name__}")
    return value


def check_array(values, name: str, ndim: int | None = None, *,
                allow_object: bool = False) -> np.ndarray:
    """`values` as a numpy array of real numbers (bool, int or float dtype; with
    `allow_object`, also an object array of Python ints and Fractions, for exact tables),
    with `ndim` dimensions when given. Refuses None, strings, ragged nested lists, complex,
    string and (unless allowed) object dtypes, naming `name`. Finiteness is the caller's."""
    _check_spec(name)
    ndim = None if ndim is None else check_int(ndim, "ndim", 0, 32)
    allow_object = check_bool(allow_object, "allow_object")
    if values is None or isinstance(values, (str, bytes, Mapping)):
        raise TypeError(f"{name} must be an array of real numbers, got {type(values).__name__}")
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular array of real numbers ({exc})") from exc
    if arr.dtype == object:
        if not allow_object or not all(_is_real(v) for v in arr.flat):
            raise TypeError(f"{name} must be an array of real numbers, got dtype object")
    elif not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_) or \
            np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    return arr


def check_mapping(value, name: str) -> Mapping:
    """`value` if it is a mapping (a dict of counts, a result record)."""
    _check_spec(name)
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict, got {type(value).__name__}")
    return value


def check_path(path, name: str) -> Path:
    """A file or folder path (str or os.PathLike) as a Path."""
    _check_spec(name)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike path, got {type(path).__name__}")
    return Path(path)


#: Largest JSON file any loader reads (results, head and certificate files); the largest
#: committed one is a few MB.
MAX_JSON_BYTES = 64 * 2**20


def _refuse_constant(word: str):
    raise ValueError(f"holds {word}, which JSON files here never contain")


def read_json_file(path, what: str = "results file"):
    """The one loader of every results, head and certificate file: the JSON content of a
    regular file at `path` of at most MAX_JSON_BYTES, without NaN or infinity; otherwise a
    one-line ValueError/TypeError naming the file. The file is only read."""
    path = check_path(path, "path")
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ValueError(f"path must be an existing {what}, got {str(path)!r:.200}") from None
    except OSError as exc:
        raise ValueError(f"path {str(path)!r:.200} cannot be read ({exc.strerror or exc})"
                         ) from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"path must be a regular file ({what}), got {str(path)!r:.200}, "
                         "which is a folder, device, pipe or socket")
    if info.st_size > MAX_JSON_BYTES:
        raise ValueError(f"path {str(path)!r:.200} has {info.st_size} bytes, above the "
                         f"{what} cap MAX_JSON_BYTES = {MAX_JSON_BYTES}")
    try:
        return json.loads(path.read_text(), parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"path {str(path)!r:.200} is not a JSON {what}: "
                         f"{str(exc).splitlines()[0]:.200}") from None
    except OSError as exc:
        raise ValueError(f"path {str(path)!r:.200} cannot be read "
                         f"({exc.strerror or exc})") from None


def check_device(device, name: str = "device"):
    """`device` (a str such as 'cpu', 'cuda', 'cuda:0', 'mps', or a torch.device) after
    checking that torch knows it and that this machine has it; returned as given."""
    import torch  # here, not at the top: the theory modules do not need torch

    _check_spec(name)
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{name} must be a str such as 'cpu' or 'cuda:0', or a torch.device, "
                        f"got {type(device).__name__}")
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"{name} must name a torch device such as 'cpu' or 'cuda:0', got "
                         f"{device!r:.80}") from exc
    if parsed.type == "mps" and torch.backends.mps.is_available():
        return device  # Apple GPUs
    if parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} must be 'cpu' or 'cuda[:i]' (or 'mps' where available), got "
                         f"{device!r:.80}")
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (parsed.index is not None and parsed.index >= count):
            raise ValueError(f"{name}={device!r}: this machine has {count} CUDA device(s); "
                             "use 'cpu'" + (f" or cuda:0 ... cuda:{count - 1}" if count else ""))
    return device


# --------------------------------------------------------------------------- tokens


def check_tokens(x, name: str = "sequences", min_ndim: int = 2) -> np.ndarray:
    """`x` as an int64 array after checking it holds 0/1 tokens of positive width."""
    _check_spec(name)
    min_ndim = check_int(min_ndim, "min_ndim", 1, 32)
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of 0/1 integers, got {type(x).__name__}")
    try:
        arr = np.asarray(x)
    except ValueError as exc:  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular array of 0/1 entries ({exc})") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.integer)
        or np.issubdtype(arr.dtype, np.bool_)
        or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(f"{name} must be a numeric array of 0/1 entries, got dtype {arr.dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions (..., n, m), got shape {arr.shape}"
        )
    if 0 in arr.shape[-min_ndim:]:
        raise ValueError(f"{name} must have n >= 1 tokens of width m >= 1, got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be a real array of 0/1 entries, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries; tokens must be 0/1")
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must contain only 0 and 1, found other values")
    return arr.astype(np.int64)


def has_repeated_row(arr: np.ndarray) -> bool:
    """Whether a 2-d 0/1 array repeats a row. Rows packed to bytes go into a set: linear in the
    array's size (``np.unique(arr, axis=0)`` takes ~30 s on 3 rows of width 10**6)."""
    arr = check_tokens(arr, "arr", min_ndim=2)
    if arr.ndim != 2:
        raise ValueError(f"arr must be a 2-d array of rows (tokens), got shape {arr.shape}")
    packed = np.packbits(arr.astype(np.uint8), axis=1)
    return len({row.tobytes() for row in packed}) != len(packed)


def check_token(token, name: str, m: int | None = None) -> np.ndarray:
    """One 0/1 token of shape (m,) as int64 (width m checked when given)."""
    arr = check_tokens(token, name, min_ndim=1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one token of shape (m,), got shape {arr.shape}")
    if m is not None and arr.shape[0] != m:
        raise ValueError(f"{name} must have width m = {m} like the query, got {arr.shape[0]}")
    return arr


# --------------------------------------------------------------------------- the paper's parameters


def check_eps(eps) -> Fraction:
    """Error level eps in (0, 1/2] as a Fraction; eps = 1/2 is the limit valid for every
    head with error < 1/2 (Lemma B's factor decreases in eps)."""
    value = check_fraction(eps, "eps")
    if not 0 < value <= Fraction(1, 2):
        raise ValueError(f"eps must lie in (0, 1/2] (exact means error < 1/2), got {eps}")
    return value


def check_length(n) -> int:
    """Sequence length n >= 3, where gap domination (Lemma B) starts to bite."""
    if not _is_int(n):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 3:
        raise ValueError(f"n (sequence length) must be >= 3 for gap domination, got {n}")
    return int(n)


def check_gap(G, name: str = "G") -> int:
    """A total gap G as an int >= 1 (a chain needs at least one unit of overlap)."""
    _check_spec(name)
    return check_int(G, f"{name} (total gap)", 1)


#: Largest inverse temperature: beta times an overlap must stay finite in float64 (at
#: 1.7e308 the logits overflow and softmax gives NaN); far past saturation.
MAX_BETA = 1e100


def check_beta(beta) -> float:
    """Inverse temperature beta in [0, MAX_BETA] as a float (Proposition F)."""
    return check_float(beta, "beta", 0, MAX_BETA)


#: Most bits of a binomial coefficient computed exactly (~0.1 s; C(2*10**6, 10**6) has two
#: million bits and takes seconds).
MAX_BINOMIAL_BITS = 2**18


def checked_comb(n: int, k: int, what: str) -> int:
    """C(n, k) for ints 0 <= k <= n, after checking that it has at most MAX_BINOMIAL_BITS bits
    (estimated with lgamma, before computing it); `what` names the caller's arguments."""
    k = min(k, n - k)
    if k > 0:
        bits = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(2)
        if bits > MAX_BINOMIAL_BITS:
            raise ValueError(f"{what}: the count C({n}, {k}) has ~{bits:.3g} bits, above "
                             f"MAX_BINOMIAL_BITS = {MAX_BINOMIAL_BITS}")
    return math.comb(n, k) if k >= 0 else 0
