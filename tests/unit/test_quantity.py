"""Kubernetes quantities and Go durations (ebb.core.quantity)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from ebb.core.quantity import (
    MAX_AMOUNT,
    QuantityError,
    dollars,
    fmt_time,
    format_duration,
    parse_cpu_millis,
    parse_duration,
    parse_quantity,
    parse_resource,
    parse_resource_nanos,
    parse_time,
    positive_duration,
)


@pytest.mark.parametrize(("text", "millis"), [
    ("250m", 250),
    ("1", 1000),
    ("1.5", 1500),
    ("0.1", 100),
    ("2000m", 2000),
    (2, 2000),
    (0.5, 500),
    ("1.0005", 1001),  # rounded up, as the kubelet does
])
def test_cpu_in_millicores(text: object, millis: int) -> None:
    assert parse_cpu_millis(text) == millis
    assert parse_resource("cpu", text) == millis


@pytest.mark.parametrize(("text", "amount"), [
    ("1Gi", 2**30),
    ("512Mi", 512 * 2**20),
    ("1G", 10**9),
    ("100M", 10**8),
    ("1Ki", 1024),
    ("1k", 1000),
    ("1.5Gi", 3 * 2**29),
    ("128974848", 128974848),
    ("1e3", 1000),
    (1024, 1024),
])
def test_memory_in_bytes(text: object, amount: int) -> None:
    assert parse_quantity(text) == amount
    assert parse_resource("memory", text) == amount


def test_pods_and_extended_resources_are_plain_counts() -> None:
    assert parse_resource("pods", "110") == 110
    assert parse_resource("nvidia.com/gpu", 1) == 1


@pytest.mark.parametrize("bad", ["abc", "", "1.5.5", "1Gb", "Gi", "1 Gi", "ten", ".", True, "1mi"])
def test_bad_quantities_raise(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)
    with pytest.raises(QuantityError):
        parse_cpu_millis(bad)


# apimachinery v0.35.1's resource.ParseQuantity (Karpenter v1.14.1's) on each, checked with it: a signed decimal number
# and at most one suffix, binary SI, decimal SI or a decimal exponent; its value in nanocores and its MilliValue
@pytest.mark.parametrize(("text", "nanos", "millis"), [
    ("5e2", 500 * 10**9, 500_000),
    ("1e+3", 10**12, 1_000_000),
    ("1E-3", 10**6, 1),
    ("1e03", 10**12, 1_000_000),
    ("1.5e3", 1500 * 10**9, 1_500_000),
    ("1.", 10**9, 1000),
    (".5", 5 * 10**8, 500),
    ("1.G", 10**18, 10**12),
    ("+1", 10**9, 1000),
    ("01", 10**9, 1000),
    ("1e-10", 1, 1),  # a fraction finer than a nanocore is rounded up, then to a millicore
    ("0.4m", 400_000, 1),
    ("1.0005", 1_000_500_000, 1001),
])
def test_quantity_grammar_accepted(text: str, nanos: int, millis: int) -> None:
    assert parse_resource_nanos("cpu", text) == nanos
    assert parse_cpu_millis(text) == millis


def test_e_alone_is_exa_not_an_exponent() -> None:
    """"1E" is 10^18 (exa, a decimal SI suffix): a quantity, too large for ebb, not a malformed one."""
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity("1E")
    assert parse_quantity("1E-3") == 1


@pytest.mark.parametrize("bad", [
    "5e2m", "5E2m", "1e2Ki", "1e-3k",  # an exponent and an SI suffix together (ErrFormatWrong)
    "1.5.2", "1.2.3m", "1e3.5", "1e2e3",  # a second dot or exponent (ErrFormatWrong)
    "1Ki2", "5m2", "1Mi1",  # digits after an SI suffix (ErrSuffix)
    "+-1", "--1", "1e", "1e+", "1E-", "1ee3", "1EE", "1em", "1ki", "1K",  # ErrSuffix
    "0x10", "1_000",  # Python's Decimal takes 1_000; Kubernetes does not
    "e3", "E3", "m", "+", "Ki",  # no digits: Kubernetes reads these as 0, ebb refuses them
])
def test_quantity_grammar_refused(bad: str) -> None:
    for name in ("cpu", "memory"):
        with pytest.raises(QuantityError, match="is not a quantity"):
            parse_resource(name, bad)


@pytest.mark.parametrize("huge", ["1e999999999999", "1e-99999999999999999999999", "1e99999999999999999999999"])
def test_an_exponent_out_of_range_is_a_quantity_error(huge: str) -> None:
    """An exponent past what decimal arithmetic holds is refused as input (a decimal.Overflow traceback before)."""
    with pytest.raises(QuantityError):
        parse_resource("cpu", huge)


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30.0),
    ("1h30m", 5400.0),
    ("720h", 2592000.0),
    ("10m", 600.0),
    ("1.5h", 5400.0),
    ("0s", 0.0),
    ("0", 0.0),
    ("500ms", 0.5),
    ("1h0m5s", 3605.0),
    (45, 45.0),
    ("1.h", 3600.0),  # Go's time.ParseDuration takes digits on either side of the point
    (".5h", 1800.0),
    ("1000000h", 3.6e9),  # over 100 years, which Karpenter's CRDs admit
    ("2562047h", 2562047 * 3600.0),  # Go's longest duration, to the hour
])
def test_durations_in_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_never_is_no_duration() -> None:
    assert parse_duration("Never") is None


@pytest.mark.parametrize("bad", ["abc", "30", "1d", "", "h", "-5s", "1h 30m", "30 s", "never", None, -1, ".h",
                                 "2562048h"])  # no digit; past Go's longest duration
def test_bad_durations_raise(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_duration(bad)


@pytest.mark.parametrize(("seconds", "text"), [(90, "1m30s"), (7200, "2h"), (5400, "1h30m"), (0, "0s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("seconds", "text"), [(-300, "-5m"), (-5400, "-1h30m"), (-0.4, "0s"), (-61, "-1m1s")])
def test_a_negative_duration_has_a_sign(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("bad", ["1e30", "99999999999999999999", "2Pi", "-4", "-1m", "-1Gi", float("inf"),
                                 float("nan"), -1, 10**30])
def test_negative_non_finite_and_absurd_amounts_raise(bad: object) -> None:
    """Kubernetes refuses negative requests; amounts beyond MAX_AMOUNT would overflow the simulator's arrays
    (an OverflowError traceback before)."""
    for name in ("cpu", "memory", "pods"):
        with pytest.raises(QuantityError):
            parse_resource(name, bad)


def test_the_largest_accepted_amount() -> None:
    assert parse_quantity(MAX_AMOUNT) == MAX_AMOUNT
    assert parse_resource("memory", "1Pi") == 2**50
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity(MAX_AMOUNT + 1)


@pytest.mark.parametrize(("text", "utc"), [
    ("2026-11-23T18:30:00Z", datetime(2026, 11, 23, 18, 30, tzinfo=UTC)),
    ("2026-11-23T18:30:00z", datetime(2026, 11, 23, 18, 30, tzinfo=UTC)),
    ("2026-11-23T00:15:00+01:00", datetime(2026, 11, 22, 23, 15, tzinfo=UTC)),  # the offset is kept, not dropped
    ("2026-11-23T18:30:00-05:30", datetime(2026, 11, 24, 0, 0, tzinfo=UTC)),
    ("2026-11-23T18:30:00", datetime(2026, 11, 23, 18, 30, tzinfo=UTC)),  # no offset: UTC
    (" 2026-11-23T18:30:00.5Z ", datetime(2026, 11, 23, 18, 30, 0, 500000, tzinfo=UTC)),
])
def test_parse_time_converts_to_utc(text: str, utc: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == utc and parsed.tzinfo is UTC


@pytest.mark.parametrize("bad", [
    "yesterday", "", "2026-13-01T00:00:00Z", "18:30",
    # ISO 8601 forms that are no RFC 3339 time: a week date, a date alone, a time without minutes or seconds (it would
    # silently mean 18:00), the basic format
    "2026-W48-1", "2026-11-23", "2026-11-23T18", "2026-11-23T18:30Z", "20261123T183000Z",
    # instants outside 1970..2262, and offsets that take a time past what a datetime holds (an OverflowError before)
    "1969-12-31T23:59:59Z", "2262-04-12T00:00:00Z", "9999-12-31T23:00:00Z", "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
])
def test_parse_time_refuses_what_is_no_time(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_time(bad)


@pytest.mark.parametrize(("moment", "text"), [
    (datetime(2026, 11, 23, 18, 30, tzinfo=UTC), "2026-11-23T18:30:00Z"),
    (datetime(2026, 11, 23, 0, 15, tzinfo=timezone(timedelta(hours=1))), "2026-11-22T23:15:00Z"),
    (datetime(2026, 11, 23, 18, 30), "2026-11-23T18:30:00Z"),  # noqa: DTZ001 (a naive moment is taken as UTC)
])
def test_fmt_time_writes_utc(moment: datetime, text: str) -> None:
    assert fmt_time(moment) == text


@pytest.mark.parametrize(("amount", "written"), [
    (0.0, "0.0000"), (0.096, "0.0960"), (12.5, "12.5000"), (0.00005, "0.0001"),
    (9.6e-08, "0.000000096"),  # a reservation's price (a ten-millionth of on-demand) keeps two significant digits
    (1.92e-07, "0.00000019"), (-2.9e-07, "-0.00000029"), (4e-05, "0.000040"),
])
def test_dollars_keep_two_significant_digits_of_an_amount_too_small_for_four_decimals(amount: float,
                                                                                     written: str) -> None:
    assert dollars(amount) == written


@pytest.mark.parametrize(("value", "seconds"), [
    ("1h", 3600.0), ("+10m", 600.0), ("1.h", 3600.0), ("1000000h", 3.6e9),
    ("1h ", None), (" 1h", None),  # Go's time.ParseDuration reads no space: Karpenter ignores the annotation
    ("0s", None), ("-5m", None), ("Never", None), ("true", None),
])
def test_a_positive_duration_is_what_go_reads_as_one(value: str, seconds: float | None) -> None:
    """A pod's do-not-disrupt duration, as Karpenter reads it with Go's ``time.ParseDuration``: ebb ignored "1.h" and
    "1000000h" (unprotecting the pod) and read "1h " (Karpenter ignores it)."""
    assert positive_duration(value) == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize(("text", "seconds"), [("0.5ns", None), ("0.0001ns", None), ("1.9ns", 1e-9),
                                               ("0.0000000019s", 1e-9), ("1.5us", 1.5e-6)])
def test_a_duration_is_whole_nanoseconds_as_go_reads_it(text: str, seconds: float | None) -> None:
    """Go's ``time.ParseDuration`` cuts each part's fraction down to whole nanoseconds, so "0.5ns" is 0: a
    do-not-disrupt of it is not positive, and Karpenter ignores it (utils/pod ``parseDoNotDisrupt``)."""
    assert positive_duration(text) == seconds
