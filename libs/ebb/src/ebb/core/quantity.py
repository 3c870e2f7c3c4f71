"""Kubernetes quantities, Go-style durations and integers, parsed exactly; durations and times written as ebb
writes them.

Quantities follow apimachinery's grammar (``resource.ParseQuantity``: a number and at most one suffix). CPU is kept
in millicores and every other resource in its base unit (bytes, counts), as integers, so sums and comparisons in the
simulator are exact; a pod's requests are summed in billionths of those units first (`parse_resource_nanos`, what
Kubernetes keeps), and rounded up once. Durations follow Go's `time.ParseDuration`, which is
what Karpenter's `consolidateAfter`, `expireAfter` and budget `duration` fields use; `Never` is None.
Integers in label values and in the values of the `Gt`, `Lt`, `Gte` and `Lte` operators follow Go's
`strconv.Atoi` (`parse_go_int`), which is how kube-scheduler and Karpenter read them.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import UTC, datetime
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, DivisionByZero, InvalidOperation, Overflow
from typing import Final

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
#: apimachinery's quantity grammar (``resource.ParseQuantity``): a signed decimal number, then at most ONE suffix, a
#: binary SI one (Ki), a decimal SI one (m, k, M) or a decimal exponent (e3, E-2), never two ("5e2m", "1e2Ki")
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                       r"(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?")
#: exact decimal arithmetic for quantities: no rounding of long numbers, no overflow of large exponents
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation, DivisionByZero, Overflow])
#: a number and its unit, as Go's ``time.ParseDuration`` reads them: digits on either side of the point ("1.h", ".5h")
_DURATION_PART = re.compile(r"((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(ns|us|µs|ms|s|m|h)")
#: a duration unit's nanoseconds
_DURATION_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_GO_INT = re.compile(r"[+-]?[0-9]+")
#: the range of Go's int on 64-bit platforms (what strconv.Atoi accepts)
GO_INT_MIN, GO_INT_MAX = -(2**63), 2**63 - 1


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity or a Go duration."""


def _decimal(value: object) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = str(value).strip()
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise QuantityError(f"{value!r} is not a quantity")
    number, exponent, suffix = match.group(1), match.group(2), match.group(3) or ""
    if exponent:
        number += exponent  # Decimal reads the exponent: "5e2" -> 5E+2
    try:
        base = Decimal(number)
        if suffix in _BINARY:
            return _EXACT.multiply(base, Decimal(_BINARY[suffix]))
        return _EXACT.multiply(base, _DECIMAL[suffix])
    except ArithmeticError as exc:  # an exponent beyond even the exact context's: far out of range either way
        raise QuantityError(f"{value!r} is out of range") from exc


#: the largest amount ebb accepts, in its integer unit (bytes, millicores, a count): 2**50, a pebibyte of
#: memory or a million million cores, far above any machine. The simulator keeps amounts in int64 arrays
#: and sums thousands of them; a bound here keeps every sum exact instead of overflowing.
MAX_AMOUNT = 2**50


#: Kubernetes keeps a quantity to a billionth of its unit (``resource.ParseQuantity`` rounds a finer fraction up), and
#: adds quantities exactly: ebb does as much in `parse_resource_nanos`, and rounds up to its own unit once
#: (`nanos_to_amount`), after a pod's containers are summed
NANOS = 10**9
#: a resource's ebb unit in billionths of its base unit: a millicore is a million nanocores, a byte a billion
_CPU_UNIT_NANOS, _UNIT_NANOS = 10**6, 10**9


def _in_range(value: object, scaled: Decimal) -> None:
    """Refuse ``value`` (``scaled``: in ebb's unit for it) unless it is finite, not negative and at most MAX_AMOUNT."""
    if not scaled.is_finite():
        raise QuantityError(f"{value!r} is not a finite quantity")
    if scaled < 0:
        raise QuantityError(f"{value!r} is negative")
    if scaled > MAX_AMOUNT:
        raise QuantityError(f"{value!r} is too large (more than {MAX_AMOUNT} in ebb's unit for it)")


def parse_resource_nanos(name: str, value: object) -> int:
    """A resource amount exactly as Kubernetes holds it, in billionths of its base unit (nanocores for cpu), a finer
    fraction rounded up ("0.4m" cpu -> 400000); a negative or absurdly large amount is a QuantityError. Sums of
    these are Kubernetes' sums (``Quantity.Add``); `nanos_to_amount` turns one into ebb's unit."""
    amount = _decimal(value)
    try:
        _in_range(value, _EXACT.multiply(amount, Decimal(NANOS // _unit_nanos(name))))
        return math.ceil(_EXACT.multiply(amount, Decimal(NANOS)))
    except ArithmeticError as exc:  # beyond even the exact context's exponents: far out of range either way
        raise QuantityError(f"{value!r} is out of range") from exc


def _unit_nanos(name: str) -> int:
    return _CPU_UNIT_NANOS if name == "cpu" else _UNIT_NANOS


def nanos_to_amount(name: str, nanos: int) -> int:
    """``nanos`` (`parse_resource_nanos`) in ebb's integer unit for resource ``name``, rounded up: millicores for cpu
    (Kubernetes' ``MilliValue``), the base unit otherwise (``Value``)."""
    return -(-nanos // _unit_nanos(name))


def parse_cpu_millis(value: object) -> int:
    """CPU as integer millicores, rounded up as the kubelet does ("250m" -> 250, "1.5" -> 1500); a negative
    or absurdly large amount is a QuantityError."""
    return parse_resource("cpu", value)


def parse_quantity(value: object) -> int:
    """Any non-CPU quantity in its base unit, rounded up ("1Gi" -> 1073741824, "100M" -> 10**8); a negative
    or absurdly large amount is a QuantityError."""
    return parse_resource("", value)


def parse_resource(name: str, value: object) -> int:
    """A resource amount in ebb's integer unit for that resource (millicores for cpu)."""
    return nanos_to_amount(name, parse_resource_nanos(name, value))


def parse_go_int(text: str) -> int | None:
    """The integer Go's ``strconv.Atoi`` reads from ``text``, or None where it fails: an optional sign and ASCII
    digits only (no spaces, underscores or other digits, which Python's ``int`` would take), within int64.
    Karpenter compares a label with a ``Gt``/``Lt``/``Gte``/``Lte`` bound this way (``withinBounds`` in
    ``pkg/scheduling/requirement.go``), and kube-scheduler reads ``Gt``/``Lt`` labels with ``ParseInt`` alike."""
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if GO_INT_MIN <= value <= GO_INT_MAX else None


def parse_duration(value: object) -> float | None:
    """A Go duration in seconds; None for "Never". Accepts "30s", "1h30m", "720h", "0s" and bare 0."""
    if value is None:
        raise QuantityError("a duration is required")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise QuantityError(f"{value!r} is negative")
        return _bounded_duration(value, float(value))
    text = str(value).strip()
    if text == "Never":
        return None
    if text == "0":
        return 0.0
    pos, nanoseconds = 0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        # as Go's time.ParseDuration: whole nanoseconds, each part's fraction cut down to them ("0.5ns" is 0)
        whole, _, fraction = match.group(1).partition(".")
        unit = _DURATION_UNITS[match.group(2)]
        nanoseconds += int(whole or 0) * unit + (int(fraction) * unit // 10 ** len(fraction) if fraction else 0)
        pos = match.end()
    if pos != len(text) or not text:
        raise QuantityError(f"{value!r} is not a duration like 30s, 10m, 1h30m or Never")
    return _bounded_duration(value, nanoseconds / 1e9)


def positive_duration(value: str) -> float | None:
    """The seconds of a positive duration ("90s", "1h30m", "+10m"), or None when ``value`` is not one: not a
    duration, "Never", zero or negative ("-5m"). Karpenter reads a pod's do-not-disrupt duration with Go's
    ``time.ParseDuration``, which takes a sign before the number (and ``μs`` as well as ``µs``), and ignores the
    annotation when it is not positive."""
    text = str(value).replace("\u03bcs", "µs")  # Go's two spellings of microseconds
    if text != text.strip() or text[:1] == "-":  # Go reads no space around it ("1h " is no duration)
        return None  # negative, or zero: never positive
    try:
        seconds = parse_duration(text[1:] if text[:1] == "+" else text)  # a second sign is no duration: refused
    except QuantityError:
        return None
    return seconds if seconds is not None and seconds > 0 else None


#: the longest duration read: Go's (an int64 of nanoseconds, about 292 years, ``time.ParseDuration`` refuses longer),
#: so every date computed from one exists
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


def _bounded_duration(value: object, seconds: float) -> float:
    """`seconds` unless it is NaN, infinite or longer than Go's longest duration (`MAX_DURATION_SECONDS`)."""
    if not math.isfinite(seconds):
        raise QuantityError(f"{value!r} is not a finite duration")
    if seconds > MAX_DURATION_SECONDS:
        raise QuantityError(f"{value!r} is longer than Go's longest duration, 2562047h47m16s")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human duration: 90 -> "1m30s", 7200 -> "2h"; a negative one has a sign: -300 -> "-5m"."""
    whole = round(seconds)
    if whole < 0:
        return "-" + format_duration(-whole)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def dollars(amount: float) -> str:
    """A price or saving in dollars as the explanations write it: four decimals (``0.0960``), and an amount too small
    for them two significant digits (``0.000000096``: a capacity reservation's price, which Karpenter's AWS provider
    puts at a ten-millionth of on-demand), so two such amounts do not both read ``0.0000``."""
    if amount == 0 or not math.isfinite(amount) or abs(amount) >= 0.00005:
        return f"{amount:.4f}"
    return f"{amount:.{1 - math.floor(math.log10(abs(amount)))}f}"


@functools.lru_cache(maxsize=4096)
def fmt_time(moment: datetime) -> str:
    """A moment as ebb writes it in reasons and JSON: RFC 3339 in UTC to the second (2026-11-23T18:30:00Z).
    An aware moment in another zone is converted (00:15+01:00 is 23:15Z the day before); a naive one is UTC."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


TIME_EXAMPLE = "2026-11-23T18:30:00Z"


#: an RFC 3339 date-time (the offset may be left out: the time is then UTC), and nothing else ISO 8601 allows
_RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")
#: the times ebb takes: from the Unix epoch to the last second Go's ``time.Time.UnixNano`` holds (Kubernetes and
#: Karpenter count durations in int64 nanoseconds); an instant beyond them is a typo, and durations added to it would
#: leave what a datetime holds
EARLIEST_TIME: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME: Final = datetime(2262, 4, 11, 23, 47, 16, tzinfo=UTC)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as the user gives it (``--now``, ``?now=``, an object's timestamps): ``Z`` or an offset,
    converted to UTC; a time without an offset is taken as UTC. ValueError for anything else (a week date, a date
    alone, a time without seconds) and for a time before 1970 or after 2262 (`in_time_range`)."""
    written = text.strip()
    if not _RFC3339.fullmatch(written):
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    moment = datetime.fromisoformat(written.replace("Z", "+00:00").replace("z", "+00:00"))
    return in_time_range(moment)


def in_time_range(moment: datetime) -> datetime:
    """``moment`` in UTC (a naive one is taken as UTC); ValueError when it is before 1970 or after 2262."""
    try:
        moment = moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    except OverflowError as exc:  # an offset that takes it past year 1 or 9999
        raise ValueError(f"{moment.isoformat()} is out of range") from exc
    if not EARLIEST_TIME <= moment <= LATEST_TIME:
        raise ValueError(f"{fmt_time(moment)} is before 1970 or after 2262")
    return moment
