"""Human-readable quantities in cluster files: ``"450GB/s"``, ``"5us"``, ``"80GiB"``, ``"989TFLOP/s"``.

Every quantity has one base unit, the one in the field's name: bytes/s, seconds,
bytes, FLOP/s, FLOP. A plain number (or a string holding only a number, which is how
PyYAML reads ``5e-6``) is taken in that base unit. Decimal prefixes ``k K M G T P``
are powers of 1000; binary prefixes ``Ki Mi Gi Ti Pi`` (bytes and bytes/s only) are
powers of 1024. ``B`` is a byte and ``b`` a bit, so ``"400Gb/s"`` is 50 GB/s.

>>> parse_quantity("450GB/s", "bytes/s")
450000000000.0
>>> parse_quantity("400 Gb/s", "bytes/s")
50000000000.0
>>> parse_quantity("5us", "s")
5e-06
>>> parse_quantity("80GiB", "bytes")
85899345920.0
>>> parse_quantity("989TFLOP/s", "FLOP/s")
989000000000000.0
>>> parse_quantity("1GFLOP", "FLOP")
1000000000.0
>>> format_quantity(450e9, "bytes/s"), format_quantity(3e-6, "s"), format_quantity(80 * 2**30, "bytes")
('450GB/s', '3us', '80GiB')
"""

from __future__ import annotations

import operator
import re
from fractions import Fraction
from typing import Sequence

from planner.errors import CostModelError, quote

__all__ = ["UNITS", "format_bytes", "format_quantity", "format_seconds", "nonnegative_int", "parse_quantity"]

# Factors are exact fractions so that "5us" is the float nearest 5e-6, not 5 * 1e-6.
_DECIMAL = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_TIME = {
    "s": Fraction(1),
    "ms": Fraction(1, 10**3),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),  # micro sign
    "μs": Fraction(1, 10**6),  # Greek mu
    "ns": Fraction(1, 10**9),
}

# base unit -> ((suffix, factor to the base unit, allowed prefixes), ...), and an example.
_SUFFIXES = {
    "bytes/s": ((("B/s", Fraction(1), {**_DECIMAL, **_BINARY}), ("b/s", Fraction(1, 8), _DECIMAL)), "450GB/s"),
    "bytes": ((("B", Fraction(1), {**_DECIMAL, **_BINARY}),), "80GiB"),
    "FLOP/s": (
        tuple((suffix, Fraction(1), _DECIMAL) for suffix in ("FLOP/s", "FLOPS", "flop/s", "flops")),
        "989TFLOP/s",
    ),
    "s": (tuple((name, factor, {"": 1}) for name, factor in _TIME.items()), "5us"),
    "FLOP": (tuple((suffix, Fraction(1), _DECIMAL) for suffix in ("FLOP", "flop")), "1GFLOP"),
}
UNITS = tuple(_SUFFIXES)
"""The base units :func:`parse_quantity` understands."""

_QUANTITY = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")


def parse_quantity(value: object, unit: str) -> float:
    """``value`` (a number in ``unit``, or a string such as ``"450GB/s"``) in the base ``unit``.

    Raises :class:`~planner.errors.CostModelError` (also a ``ValueError``) saying which
    forms are accepted; callers turn it into their own error with the location.

    >>> parse_quantity(8, "bytes"), parse_quantity("5e-6", "s"), parse_quantity("1.5 ms", "s")
    (8.0, 5e-06, 0.0015)
    >>> parse_quantity("450GB", "bytes/s")
    Traceback (most recent call last):
    ...
    planner.errors.CostModelError: '450GB' is not a quantity in bytes/s; write a number of bytes/s or e.g. '450GB/s'
    """
    suffixes, example = _SUFFIXES[unit]
    hint = f"write a number of {unit} or e.g. {quote(example)}"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CostModelError(f"{quote(value)} is not a quantity in {unit}; {hint}")
    if not isinstance(value, str):
        return float(value)
    match = _QUANTITY.match(value)
    if match is None:
        raise CostModelError(f"{quote(value)} is not a quantity in {unit}; {hint}")
    number, text = float(match.group(1)), match.group(2)
    if not text:
        return number
    for suffix, factor, prefixes in suffixes:
        if text.endswith(suffix):
            prefix = text[: -len(suffix)].strip()
            if prefix in prefixes:
                scale = prefixes[prefix] * factor
                return number * scale.numerator / scale.denominator
    raise CostModelError(f"{quote(value)} is not a quantity in {unit}; {hint}")


def format_quantity(value: float, unit: str) -> str:
    """The compact form users read: a decimal prefix (binary for whole GiB/MiB of bytes).

    >>> format_quantity(989e12, "FLOP/s"), format_quantity(80e9, "bytes"), format_quantity(0.0, "s")
    ('989TFLOP/s', '80GB', '0s')
    """
    if unit == "s":
        for name in ("s", "ms", "us", "ns"):
            if value == 0 or abs(value) >= _TIME[name] or name == "ns":
                return f"{value * _TIME[name].denominator:g}{name}"
    suffix = _SUFFIXES[unit][0][0][0]
    if unit == "bytes":
        for prefix in ("Ti", "Gi", "Mi"):
            if value and value % _BINARY[prefix] == 0:
                return f"{value / _BINARY[prefix]:g}{prefix}{suffix}"
    for prefix in ("P", "T", "G", "M", "k"):
        if abs(value) >= _DECIMAL[prefix]:
            return f"{value / _DECIMAL[prefix]:g}{prefix}{suffix}"
    return f"{value:g}{suffix}"


# -- the one style of every report (tables, summaries, warnings, progress) -------------------------------
# Decimal (SI) prefixes, as in the cluster files' bandwidths: 1 MB = 10**6 B, 1 GB = 10**9 B.
_BYTE_PREFIXES = (("MB", 10**6), ("GB", 10**9), ("TB", 10**12), ("PB", 10**15))
_SECOND_UNITS = (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0))


def _three_digits(value: float) -> str:
    """``value`` (``0 < value < 1000``) to three significant digits, trailing zeros kept: ``12.0``, ``1.50``."""
    text = f"{value:#.3g}"
    return text.rstrip(".") if "e" not in text else f"{value:.0f}"


def _scaled(value: float, units: Sequence[tuple[str, float]]) -> str:
    """``value`` in the largest of ``units`` (name, size; increasing) that keeps it >= 1, to three digits."""
    magnitude = abs(value)
    for k, (name, size) in enumerate(units):
        last = k == len(units) - 1
        if not last and magnitude >= units[k + 1][1]:
            continue
        rounded = float(f"{magnitude / size:.3g}")
        if rounded >= 1000 and not last:  # 999.96 MB rounds to 1000 MB: that is 1.00 GB
            continue
        digits = _three_digits(rounded) if rounded < 1000 else f"{rounded:,.0f}"
        return f"{'-' if value < 0 else ''}{digits} {name}"
    raise AssertionError("unreachable")  # the last unit always returns


def format_bytes(count: float, *, exact: bool = False) -> str:
    """A byte count as every report prints it: exact below a megabyte, else three digits in SI units.

    ``exact=True`` prints every digit (for two counts that differ by less than the
    rounding). JSON keeps integers of bytes; this is for people.

    >>> format_bytes(6144), format_bytes(0), format_bytes(786_432)
    ('6,144 B', '0 B', '786,432 B')
    >>> format_bytes(12_345_678), format_bytes(2_621_440), format_bytes(80 * 2**30)
    ('12.3 MB', '2.62 MB', '85.9 GB')
    >>> format_bytes(999_999_999), format_bytes(100_000_000), format_bytes(2_621_440, exact=True)
    ('1.00 GB', '100 MB', '2,621,440 B')
    """
    if exact or abs(count) < _BYTE_PREFIXES[0][1]:
        return f"{round(count):,} B"
    return _scaled(float(count), _BYTE_PREFIXES)


def format_seconds(seconds: float) -> str:
    """A time as every report prints it: three significant digits in ns, us, ms or s.

    JSON keeps seconds as floats; this is for people.

    >>> format_seconds(17.0614e-6), format_seconds(1.32608e-9), format_seconds(0.0116184)
    ('17.1 us', '1.33 ns', '11.6 ms')
    >>> format_seconds(0.0), format_seconds(3.18491), format_seconds(4.2e-10), format_seconds(9.9996e-4)
    ('0 s', '3.18 s', '0.420 ns', '1.00 ms')
    >>> format_seconds(1234.5)
    '1,234 s'
    """
    if seconds == 0:
        return "0 s"
    if abs(seconds) >= 1000:
        return f"{seconds:,.0f} s"
    return _scaled(float(seconds), _SECOND_UNITS)


def nonnegative_int(value: object, name: str) -> int:
    """``value`` as an ``int`` (numpy integers too), checked ``>= 0``; byte counts are exact.

    >>> nonnegative_int(3, "shard_bytes")
    3
    >>> nonnegative_int(2.5, "shard_bytes")
    Traceback (most recent call last):
    ...
    TypeError: shard_bytes must be an integer, got 2.5
    >>> nonnegative_int(-1, "shard_bytes")
    Traceback (most recent call last):
    ...
    planner.errors.CostModelError: shard_bytes must be >= 0, got -1
    """
    try:
        count = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {quote(value)}") from None
    if count < 0:
        raise CostModelError(f"{name} must be >= 0, got {count}")
    return count
