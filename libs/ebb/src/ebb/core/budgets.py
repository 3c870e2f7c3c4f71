"""Disruption budgets: how many of a NodePool's nodes may be disrupted now, for a given reason.

Karpenter v1 semantics (AKS disruption-policy page): `nodes` is a count or a percentage of the pool's
nodes (rounded up); allowed = that - deleting - NotReady, floored at 0; several budgets give the minimum
of those active; `schedule` (cron, UTC, @-macros, read as robfig/cron reads it: `parse_schedule`) with
`duration` makes a budget active only inside its window (a `duration` is a Go duration; `0m` is a window never
open, as Karpenter's ``Budget.IsActive`` reads it); `reasons` limits a budget to some reasons (unset = all). No
budgets means one `nodes: 10%`.
The budgets are the NodePool's effective ones (its DisruptionPolicy's when it has one); the details name
where they come from (`NodePool.policy_source`).
An invalid budget fails closed (allows 0) and says why, rather than silently allowing disruption.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from croniter import CroniterBadDateError, croniter

from ebb.core.memo import Memo
from ebb.core.model import REASONS, Budget, NodePool
from ebb.core.quantity import QuantityError, fmt_time, format_duration, parse_duration

_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
#: the names a cron field may use for its values (robfig/cron's, which Karpenter parses schedules with)
_FIELD_NAMES: tuple[dict[str, int], ...] = (
    {}, {}, {},
    {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                     "dec"))},
    {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))},
)
#: each field's smallest and largest value (minute, hour, day of month, month, day of week: robfig/cron's)
_FIELD_BOUNDS: tuple[tuple[int, int], ...] = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_GO_INT = re.compile(r"^[+-]?[0-9]+$")


@dataclass(frozen=True, slots=True)
class BudgetVerdict:
    allowed: int
    detail: str  # which budget decided, in words
    invalid: bool = False
    #: the deciding budget's number of nodes before the disrupting ones are taken off (Karpenter's
    #: karpenter_nodepools_allowed_disruptions); the pool's node count when no budget applies, 0 when invalid
    limit: int = 0
    #: the pool's nodes counted against it: deleting, being disrupted or NotReady (Karpenter's
    #: karpenter_nodepools_nodes_consuming_budgets)
    disrupting: int = 0


def budget_error(budget: Budget) -> str | None:
    """Why a budget is invalid, or None. Found once per budget as written (every pass asks of every budget, and
    croniter parses a schedule again each time)."""
    known = _ERRORS.get(budget, _UNSEEN)
    if known is _UNSEEN:
        known = _ERRORS.keep(budget, _budget_error(budget))
    return cast(str | None, known)


#: `budget_error`'s answers, by budget (a frozen value: the same budget written the same way)
_ERRORS: Memo[Budget, object] = Memo(1024)
#: a value `budget_error` never answers: not found yet
_UNSEEN = object()


def _as_int32(count: int) -> int:
    """A budget's count of nodes as Karpenter holds it: ``strconv.Atoi`` then ``intstr.FromInt``, which keeps the
    low 32 bits (2^32 is 0; 2^31 is negative, so nothing is allowed; 2^32 + 2 is 2)."""
    return (count + 2**31) % 2**32 - 2**31


def _budget_error(budget: Budget) -> str | None:
    if not _NODES.match(budget.nodes):  # the CRDs' pattern, spaces refused: Karpenter fails closed on " 50%"
        return f"nodes {budget.nodes!r} is not a count or a percentage like 10%"
    if not budget.nodes.endswith("%") and int(budget.nodes) >= 2**63:
        # strconv.Atoi fails, and the text is no percentage: Karpenter fails closed (GetScaledValueFromIntOrPercent)
        return f"nodes {budget.nodes!r} is beyond a 64-bit count"
    if (budget.schedule is None) != (budget.duration is None):
        return "schedule and duration must be set together"
    if budget.duration is not None:
        # Go's durations are read (seconds too, which the CRDs' pattern refuses: ebb's own back-test holds a budget to
        # the second), Never is not one
        try:
            seconds = parse_duration(budget.duration)
        except QuantityError as exc:
            return f"duration: {exc}"
        if seconds is None:
            return f"duration {budget.duration!r} is not a time like 30m, 8h or 1h30m"
    if budget.schedule is not None:
        spec = parse_schedule(budget.schedule)
        if isinstance(spec, str):
            return f"schedule {budget.schedule!r} is not a cron expression or @-macro Karpenter reads ({spec})"
    for reason in budget.reasons or ():
        if reason not in REASONS:
            return f"reason {reason!r} is not one of {', '.join(REASONS)}"
    return None


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A schedule as robfig/cron's standard parser reads it (Karpenter's ``cron.ParseStandard``): the values of each
    field, and whether the day-of-month and day-of-week fields were written as "any" (``*`` or ``?``, with no step
    above 1; robfig's ``starBit``). When either is, a day must match both; when neither is, either (``dayMatches``).
    croniter decides that from the values instead (``0-6`` is "any" to it), and reads ``1-1`` as another range, so
    the fire times are found from this value, not from the text (`_fire`)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]
    any_day: bool
    any_weekday: bool


#: robfig/cron's descriptors as the fields they stand for (``parseDescriptor``: every "all" is a star)
_DESCRIPTOR_FIELDS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                      "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


def parse_schedule(schedule: str) -> CronSpec | str:
    """``schedule`` as robfig/cron's standard parser reads it after Karpenter's ``TZ=UTC `` prefix (spaces around a
    descriptor trimmed, fields split on any whitespace, empty comma-separated parts dropped), or why it refuses it, in
    its words. croniter reads more, with other meanings: a sixth field (its seconds), ``L``, ``W`` and ``#``, 7 for
    Sunday, a range whose beginning is beyond its end (wrapped around). Karpenter refuses those, so such a budget is
    invalid and fails closed. Parsed once per schedule (`_SPECS`): every pass asks of every scheduled budget."""
    known = _SPECS.get(schedule)
    if known is None:
        known = _SPECS.keep(schedule, _parsed_schedule(schedule))
    return known


#: `parse_schedule`'s answers, by schedule
_SPECS: Memo[str, CronSpec | str] = Memo(256)


def _parsed_schedule(schedule: str) -> CronSpec | str:
    text = schedule.strip()
    if text.startswith("@"):
        if text not in _DESCRIPTOR_FIELDS:
            return f"unrecognized descriptor: {text}"
        text = _DESCRIPTOR_FIELDS[text]
    fields = text.split()
    if len(fields) != len(_FIELD_BOUNDS):
        return f"expected exactly {len(_FIELD_BOUNDS)} fields, found {len(fields)}: {fields}"
    values: list[tuple[int, ...]] = []
    stars: list[bool] = []
    for field, names, (minimum, maximum) in zip(fields, _FIELD_NAMES, _FIELD_BOUNDS, strict=True):
        seen: set[int] = set()
        star = False
        for expr in filter(None, field.split(",")):
            got = _range(expr, names, minimum, maximum)
            if isinstance(got, str):
                return got
            seen.update(got[0])
            star = star or got[1]
        values.append(tuple(sorted(seen)))
        stars.append(star)
    minutes, hours, days, months, weekdays = values
    return CronSpec(minutes, hours, days, months, weekdays, any_day=stars[2], any_weekday=stars[4])


def _range(expr: str, names: dict[str, int], minimum: int, maximum: int) -> tuple[range, bool] | str:
    """The values of one comma-separated part of a cron field (``*``, ``?``, a value, ``a-b``, each with an optional
    ``/step``) and whether it is a star (robfig/cron's ``getRange``), or why it is refused."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = minimum, maximum
    else:
        if len(low_and_high) > 2:
            return f"too many hyphens: {expr}"
        bounds = [names.get(b.lower(), _go_uint(b)) for b in low_and_high]
        for bound, text in zip(bounds, low_and_high, strict=True):
            if isinstance(bound, str):
                return f"{bound} in {text!r}"
        start, end = int(bounds[0]), int(bounds[-1])
    step = 1
    if len(range_and_step) > 2:
        return f"too many slashes: {expr}"
    if len(range_and_step) == 2:
        parsed = _go_uint(range_and_step[1])
        if isinstance(parsed, str):
            return f"{parsed} in {range_and_step[1]!r}"
        step = parsed
        if len(low_and_high) == 1:  # "N/step" is "N-max/step"
            end = maximum
        if step == 0:
            return f"step of range should be a positive number: {expr}"
        star = star and step == 1
    if start < minimum:
        return f"beginning of range ({start}) below minimum ({minimum}): {expr}"
    if end > maximum:
        return f"end of range ({end}) above maximum ({maximum}): {expr}"
    if start > end:
        return f"beginning of range ({start}) beyond end of range ({end}): {expr}"
    return range(start, end + 1, step), star


def _croniter_forms(spec: CronSpec) -> tuple[str, ...]:
    """Cron expressions, every field a list of values, whose fire times together are ``spec``'s (each read with
    croniter's ``day_or=False``, a day matching both day fields): one when a day field is "any" (both must match), two
    when neither is (either may: one with the days of the month, one with the days of the week)."""
    def listed(values: tuple[int, ...]) -> str:
        return ",".join(map(str, values))

    clock = f"{listed(spec.minutes)} {listed(spec.hours)}"
    months = listed(spec.months)
    if spec.any_day or spec.any_weekday:
        return (f"{clock} {listed(spec.days)} {months} {listed(spec.weekdays)}",)
    return f"{clock} {listed(spec.days)} {months} *", f"{clock} * {months} {listed(spec.weekdays)}"


def _fire(schedule: str, at: datetime, *, before: bool) -> datetime | None:
    """The schedule's latest fire time before ``at`` (``before``) or its first after it, as robfig/cron reads the
    schedule (`parse_schedule`); None when it never fires (a day that does not exist, as ``0 0 30 2 *``: robfig's
    ``Next`` gives up after five years and answers the zero time). ``schedule`` must be valid."""
    spec = parse_schedule(schedule)
    if isinstance(spec, str):
        raise ValueError(spec)
    found: list[datetime] = []
    for form in _croniter_forms(spec):
        try:
            moment = croniter(form, at, day_or=False, max_years_between_matches=5)
            found.append(moment.get_prev(datetime) if before else moment.get_next(datetime))
        except CroniterBadDateError:
            continue  # this form never fires
    if not found:
        return None
    return max(found) if before else min(found)


def next_fire(schedule: str, after: datetime) -> datetime | None:
    """The schedule's first fire time after ``after`` (UTC), read as Karpenter reads it; None when it never fires."""
    return _fire(schedule, after, before=False)


def _go_uint(text: str) -> int | str:
    """``text`` as Go's ``strconv.Atoi`` reads it, when it is 0 or more; else why not."""
    if not _GO_INT.match(text):
        return "not an integer"
    value = int(text)
    return value if value >= 0 else f"negative number ({value}) not allowed"


def active_window(budget: Budget, now: datetime) -> tuple[datetime, datetime] | None:
    """The window the budget is active in at `now` (start, end, in UTC), or None when it is not active.
    The schedule is read in UTC whatever zone `now` is written in (Karpenter's ``IsActive``).
    A budget without a schedule is always active: returns (now, now) as a marker."""
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    if budget.schedule is None:
        return (now, now)
    seconds = parse_duration(budget.duration or "0s") or 0.0
    start = last_fire(budget.schedule, now)
    if start is None:
        # never fires: robfig's Next answers the zero time, which Karpenter's IsActive reads as "not after now"
        return (now, now)
    end = start + timedelta(seconds=seconds)
    return (start, end) if start <= now < end else None


#: per schedule, a fire time and the next one after it (`last_fire`)
_FIRES: Memo[str, tuple[datetime, datetime]] = Memo(256)
#: the schedules that never fire (`_fire` answers None)
_NEVER: Memo[str, bool] = Memo(64)


def last_fire(schedule: str, now: datetime) -> datetime | None:
    """The schedule's latest fire time at or before ``now`` (UTC), None when it never fires. Kept with the fire after
    it: every moment until then has the same one (a pass every few seconds; a schedule fires minutes or hours apart),
    so croniter, which parses the schedule again each time, is asked once per fire."""
    kept = _FIRES.get(schedule)
    if kept is not None and kept[0] <= now < kept[1]:
        return kept[0]
    if _NEVER.get(schedule):
        return None
    last = _fire(schedule, now + timedelta(microseconds=1), before=True)
    following = None if last is None else _fire(schedule, last, before=False)
    if last is None or following is None:
        _NEVER.keep(schedule, True)
        return None
    _FIRES.keep(schedule, (last, following))  # no fire between the two
    return last


def allowed_disruptions(pool: NodePool, reason: str, now: datetime, *, total: int, deleting: int,
                        not_ready: int) -> BudgetVerdict:
    """How many more of `pool`'s nodes may be disrupted for `reason` at `now`."""
    best: BudgetVerdict | None = None
    for index, budget in enumerate(pool.budgets):
        error = budget_error(budget)
        if error is not None:
            return BudgetVerdict(0, f"budget {index} of {pool.policy_source} is invalid ({error}); "
                                    "ebb fails closed and disrupts nothing in this pool", invalid=True,
                                disrupting=deleting + not_ready)
        if budget.reasons is not None and reason not in budget.reasons:
            continue
        window = active_window(budget, now)
        if window is None:
            continue
        text = budget.nodes
        limit = math.ceil(total * int(text[:-1]) / 100) if text.endswith("%") else _as_int32(int(text))
        allowed = max(0, limit - deleting - not_ready)
        where = ""
        if not text.endswith("%") and limit != int(text):
            where = f" (read as {limit}: Karpenter keeps the count in 32 bits, intstr.FromInt)"
        if budget.schedule is not None and window[0] == window[1]:
            where += f" (schedule {budget.schedule!r} never fires: always active, as Karpenter reads it)"
        elif budget.schedule is not None:
            where += (f" (schedule {budget.schedule!r}, active until {fmt_time(window[1])},"
                     f" for {format_duration((window[1] - window[0]).total_seconds())})")
        detail = (f"budget nodes={text}{where} of {pool.policy_source} allows {allowed} "
                  f"of {total} nodes ({deleting} deleting, {not_ready} NotReady)")
        if best is None or allowed < best.allowed:
            best = BudgetVerdict(allowed, detail, limit=limit, disrupting=deleting + not_ready)
    if best is None:  # no budget applies to this reason now: nothing limits it
        return BudgetVerdict(total, f"no budget of {pool.policy_source} applies to {reason} now", limit=total,
                             disrupting=deleting + not_ready)
    return best
