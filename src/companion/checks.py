"""Argument checks shared by every module, the paper's parameters (eps, n, G, beta) included:
each returns the value in its canonical type or raises TypeError (wrong kind) / ValueError
(outside the range) naming the argument."""

from __future__ import annotations

import json
import math
import operator
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from numbers import Rational
from pathlib import Path

import numpy as np

__all__ = ["check_device"]


def _require(value, name: str, types, kind: str):
    """`value` if it is an instance of `types`, else a TypeError '{name} must be {kind}'."""
    if not isinstance(value, types):
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__}")
    return value


def check_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """`value` as a Python int in [low, high] (either end None: open); a numpy int of any
    width is read exactly (operator.index), bool refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = operator.index(value)
    if (low is not None and value < low) or (high is not None and value > high):
        accepted = (f"an int >= {low}" if high is None else f"an int <= {high}" if low is None
                    else f"an int in [{low}, {high}]")
        raise ValueError(f"{name} must be {accepted}, got {value}")
    return value


#: Longest int sequence :func:`check_int_sequence` checks entry by entry.
MAX_SEQUENCE_LENGTH = 10**6


def check_int_sequence(values, name: str, low: int | None = None, high: int | None = None,
                       allow_empty: bool = False) -> list[int]:
    """A sequence (or 1-d array) of at most 10**6 ints, each in [low, high], as a list of
    Python ints (entries named name[i]); non-empty unless `allow_empty`."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        values = list(values[:MAX_SEQUENCE_LENGTH + 1])  # a longer one is refused below
    if (isinstance(values, (str, bytes)) or not isinstance(values, Sequence)
            or (len(values) == 0 and not allow_empty)):
        kind = "a sequence" if allow_empty else "a non-empty sequence"
        raise TypeError(f"{name} must be {kind} of ints, got {values!r:.100}")
    if len(values) > MAX_SEQUENCE_LENGTH:
        raise ValueError(f"{name} must hold at most {MAX_SEQUENCE_LENGTH} entries, got "
                         f"{len(values)}")
    return [check_int(v, f"{name}[{i}]", low, high) for i, v in enumerate(values)]


def _range_error(value, name: str, low, high, low_open: bool, high_open: bool) -> ValueError:
    """'{name} must be a finite number >= low', '... must lie in (low, high]', ..."""
    if low is None and high is None:
        text = "be a finite number"
    elif high is None:
        text = f"be a finite number {'>' if low_open else '>='} {low}"
    elif low is None:
        text = f"be a finite number {'<' if high_open else '<='} {high}"
    else:
        text = f"lie in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    return ValueError(f"{name} must {text}, got {value}")


def _in_range(v, low, high, low_open: bool, high_open: bool) -> bool:
    above = low is None or (v > low if low_open else v >= low)
    below = high is None or (v < high if high_open else v <= high)
    return above and below


def check_float(value, name: str, low: float | None = None, high: float | None = None, *,
                low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number (int, float, Fraction; bool refused) in the given range, as a float."""
    if not isinstance(value, (Rational, float, np.integer, np.floating)) or isinstance(
            value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:  # an int or Fraction beyond float64
        v = math.inf
    if not (math.isfinite(v) and _in_range(v, low, high, low_open, high_open)):
        raise _range_error(value, name, low, high, low_open, high_open)
    return v


def check_exact(value, name: str) -> int | Fraction:
    """The one conversion rule for exact inputs: an int (Python or numpy, any width) as a
    Python int (operator.index); a rational with numerator and denominator so read; a finite
    float (Python or numpy, any width) as the Fraction it equals. NaN and infinity are a
    ValueError, bool and anything else a TypeError, each naming the argument."""
    if type(value) is int or (type(value) is Fraction
                              and type(value.numerator) is int is type(value.denominator)):
        return value  # the common case, first: exact evaluations convert every table entry
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a number (int, Fraction or finite float), got bool")
    if isinstance(value, (int, np.integer)):
        return operator.index(value)
    if isinstance(value, Rational):  # Fraction(np.int64(...)) keeps an int64 numerator
        return Fraction(operator.index(value.numerator), operator.index(value.denominator))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value}")
        return Fraction(*value.as_integer_ratio())  # exact for float16 ... longdouble
    raise TypeError(f"{name} must be a number (int, Fraction or finite float), got "
                    f"{type(value).__name__}")


def check_fraction(value, name: str, low=None, high=None, *, low_open: bool = False,
                   high_open: bool = False) -> Fraction:
    """:func:`check_exact`'s value as a Fraction in the range."""
    v = Fraction(check_exact(value, name))
    if not _in_range(v, low, high, low_open, high_open):
        raise _range_error(value, name, low, high, low_open, high_open)
    return v


#: Most entries :func:`check_exact_array` converts (one Python object each, ~1 s).
MAX_EXACT_ENTRIES = 2**21


def check_exact_array(values, name: str, ndim: int | None = None,
                      max_entries: int = MAX_EXACT_ENTRIES) -> np.ndarray:
    """`values` (a numpy array of any int or float dtype, an object array, nested lists) as an
    object array of Python ints and Fractions, entry by entry by :func:`check_exact` (a list
    never passes through float64; a ragged one has list entries, refused there); of `ndim`
    dimensions when given, at most `max_entries`."""
    if values is None or isinstance(values, (str, bytes, Mapping)):
        raise TypeError(f"{name} must be an array of numbers, got {type(values).__name__}")
    if isinstance(values, np.ndarray) and values.dtype.kind not in "biufO":  # bool: below
        raise TypeError(f"{name} must be an array of numbers, got dtype {values.dtype}")
    size = values.size if isinstance(values, np.ndarray) else None
    try:
        arr = np.asarray(values, dtype=object) if size is None or size <= max_entries else None
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{name} must be a rectangular array of numbers ({exc})") from None
    if arr is None or arr.size > max_entries:
        raise ValueError(f"{name} must have at most {max_entries} entries, got "
                         f"{size if arr is None else arr.size}")
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = [check_exact(v, name) for v in arr.flat]
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    return out


def check_bool(value, name: str) -> bool:
    return bool(_require(value, name, (bool, np.bool_), "a bool"))


def check_choice(value, name: str, choices: Sequence):
    """`value` if it is one of `choices` (compared with ==)."""
    try:
        found = not isinstance(value, (list, dict, set)) and value in choices
    except (TypeError, ValueError):  # an unhashable value and a set, an array's ==
        found = False
    if not found:
        shown = tuple(choices) if len(choices) <= 100 else f"{len(choices)} values"
        raise ValueError(f"{name} must be one of {shown}, got {value!r:.200}")
    return value


def check_instance(value, name: str, cls: type):
    """`value` if it is an instance of `cls` (a class or a tuple of classes)."""
    kind = " or ".join(c.__name__ for c in cls) if isinstance(cls, tuple) else cls.__name__
    return _require(value, name, cls, f"a {kind}")


def check_array(values, name: str, ndim: int | None = None, objects: bool = False) -> np.ndarray:
    """`values` as a numpy array of real numbers (bool included; with `objects` an object
    array too), of `ndim` dimensions when given; finiteness is the caller's (exact inputs:
    :func:`check_exact_array`)."""
    if values is None or isinstance(values, (str, bytes, Mapping)):
        raise TypeError(f"{name} must be an array of real numbers, got {type(values).__name__}")
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular array of real numbers ({exc})") from exc
    if arr.dtype.kind not in ("biufO" if objects else "biuf"):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    return arr


def check_mapping(value, name: str) -> Mapping:
    """`value` if it is a mapping (a dict of counts, a result record)."""
    return _require(value, name, Mapping, "a dict")


def check_json_data(value, name: str):
    """`value` if JSON holds it as it is (str keys, finite numbers, no numpy scalars): what is
    written as given is refused before any file is touched."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be JSON data (str keys, finite numbers): {exc}") from None
    return value


def check_path(path, name: str) -> Path:
    """A file or folder path (str or os.PathLike) as a Path."""
    return Path(_require(path, name, (str, os.PathLike), "a str or os.PathLike path"))


def check_device(device, name: str = "device"):
    """`device` (a str such as 'cpu', 'cuda:0', 'mps', or a torch.device) once torch knows it
    and this machine has it."""
    import torch  # here, not at the top: the theory modules do not need torch

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
    arr = check_array(x, name, objects=True)
    if arr.dtype == object:  # numpy scalars, Fractions: each read by check_exact
        arr = check_exact_array(arr, name)
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions (..., n, m), got shape {arr.shape}")
    if 0 in arr.shape[-min_ndim:]:
        raise ValueError(f"{name} must have n >= 1 tokens of width m >= 1, got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries; tokens must be 0/1")
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must contain only 0 and 1, found other values")
    return arr.astype(np.int64)


def has_repeated_row(arr: np.ndarray) -> bool:
    """Whether a 2-d 0/1 array repeats a row (packed rows in a set: linear, unlike np.unique)."""
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
    """Error level eps in (0, 1/2] as a Fraction (1/2: valid for every head with error < 1/2)."""
    return check_fraction(eps, "eps", 0, Fraction(1, 2), low_open=True)


def check_length(n) -> int:
    """Sequence length n >= 3, where gap domination (Lemma B) starts to bite."""
    return check_int(n, "n (sequence length)", 3)


#: Largest inverse temperature: beta times an overlap must stay finite in float64.
MAX_BETA = 1e100


def check_beta(beta) -> float:
    """Inverse temperature beta in [0, MAX_BETA] as a float (Proposition F)."""
    return check_float(beta, "beta", 0, MAX_BETA)


#: Most bits of a binomial coefficient computed exactly (~0.1 s).
MAX_BINOMIAL_BITS = 2**18


def checked_comb(n: int, k: int, what: str) -> int:
    """C(n, k), 0 <= k <= n, once lgamma says it has at most MAX_BINOMIAL_BITS bits."""
    k = min(k, n - k)
    if k > 0:
        bits = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(2)
        if bits > MAX_BINOMIAL_BITS:
            raise ValueError(f"{what}: the count C({n}, {k}) has ~{bits:.3g} bits, above "
                             f"MAX_BINOMIAL_BITS = {MAX_BINOMIAL_BITS}")
    return math.comb(n, k) if k >= 0 else 0
