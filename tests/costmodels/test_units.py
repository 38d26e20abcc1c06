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


# -- the reports' unit style: format_bytes, format_seconds -------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from costmodels.units import format_bytes, format_seconds  # noqa: E402


@pytest.mark.parametrize("count, text", [
    (0, "0 B"), (1, "1 B"), (6144, "6,144 B"), (999_999, "999,999 B"),   # exact below a megabyte
    (10**6, "1.00 MB"), (12_345_678, "12.3 MB"), (2_621_440, "2.62 MB"),  # 3 digits, 1 MB = 10**6 B (SI)
    (999_999_999, "1.00 GB"),  # 999.999999 MB rounds to 1000 MB: that is the next prefix
    (80 * 2**30, "85.9 GB"), (5 * 10**12, "5.00 TB"),
])
def test_format_bytes_is_exact_below_a_megabyte_and_three_si_digits_above(count, text):
    assert format_bytes(count) == text


@pytest.mark.parametrize("seconds, text", [
    (0.0, "0 s"), (17.0614e-6, "17.1 us"), (1.32608e-9, "1.33 ns"), (4e-10, "0.400 ns"),
    (0.0116184, "11.6 ms"), (3.18491, "3.18 s"), (9.9996e-4, "1.00 ms"), (2500.4, "2,500 s"),
])
def test_format_seconds_has_three_significant_digits_in_ns_us_ms_or_s(seconds, text):
    assert format_seconds(seconds) == text


@given(st.integers(min_value=0, max_value=10**18))
def test_formatted_bytes_read_back_within_the_rounding(count):
    text = format_bytes(count)
    back = parse_quantity(text.replace(",", "").replace(" ", ""), "bytes")
    # exact below 1 MB; above, three significant digits are within half a unit of the third digit
    assert back == count if count < 10**6 else abs(back - count) <= 0.005 * count


@given(st.floats(min_value=1e-12, max_value=999.0, allow_nan=False))
def test_formatted_seconds_read_back_within_the_rounding(seconds):
    back = parse_quantity(format_seconds(seconds).replace(" ", ""), "s")
    assert abs(back - seconds) <= 0.005 * seconds + 1e-15
