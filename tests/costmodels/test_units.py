"""Quantities with units in cluster files."""

from __future__ import annotations

import pytest

from costmodels.units import format_quantity, parse_quantity


@pytest.mark.parametrize(
    "text, unit, value",
    [
        ("450GB/s", "bytes/s", 450e9),
        ("450 GB/s", "bytes/s", 450e9),
        ("400Gb/s", "bytes/s", 50e9),
        ("1GiB/s", "bytes/s", 2**30),
        ("25e9", "bytes/s", 25e9),
        (100e9, "bytes/s", 100e9),
        ("5us", "s", 5e-6),
        ("5µs", "s", 5e-6),
        ("5 μs", "s", 5e-6),
        ("0.5ms", "s", 5e-4),
        ("800ns", "s", 8e-7),
        ("2s", "s", 2.0),
        ("5e-6", "s", 5e-6),
        (0, "s", 0.0),
        ("80GiB", "bytes", 80 * 2**30),
        ("80GB", "bytes", 80e9),
        ("16KiB", "bytes", 16384),
        ("512B", "bytes", 512),
        ("989TFLOP/s", "FLOP/s", 989e12),
        ("989 TFLOPS", "FLOP/s", 989e12),
        ("1.2Pflop/s", "FLOP/s", 1.2e15),
        ("312 Tflops", "FLOP/s", 312e12),
    ],
)
def test_parse_quantity_reads_human_units(text, unit, value):
    assert parse_quantity(text, unit) == pytest.approx(value, rel=1e-15)


def test_microseconds_parse_to_the_nearest_float():
    assert parse_quantity("5us", "s") == 5e-6
    assert parse_quantity("3us", "s") == 3e-6


@pytest.mark.parametrize(
    "text, unit",
    [
        ("450GB", "bytes/s"),  # bytes, not bytes/s
        ("5GB/s", "s"),
        ("fast", "bytes/s"),
        ("80 GiFLOP/s", "FLOP/s"),  # no binary prefixes for FLOP/s
        ("5 Mus", "s"),
        ("80Gib/s", "bytes/s"),  # no binary prefixes for bits
        (True, "bytes"),
        (None, "bytes"),
        ([1], "bytes"),
    ],
)
def test_parse_quantity_rejects_other_units_and_says_what_to_write(text, unit):
    with pytest.raises(ValueError, match=f"is not a quantity in {unit}; write a number of {unit} or e.g."):
        parse_quantity(text, unit)


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (450e9, "bytes/s", "450GB/s"),
        (50e9, "bytes/s", "50GB/s"),
        (3e-6, "s", "3us"),
        (1e-5, "s", "10us"),
        (2.5e-3, "s", "2.5ms"),
        (0.0, "s", "0s"),
        (80 * 2**30, "bytes", "80GiB"),
        (80e9, "bytes", "80GB"),
        (12, "bytes", "12B"),
        (989e12, "FLOP/s", "989TFLOP/s"),
    ],
)
def test_format_quantity_is_compact_and_parses_back(value, unit, text):
    assert format_quantity(value, unit) == text
    assert parse_quantity(text, unit) == pytest.approx(value)
