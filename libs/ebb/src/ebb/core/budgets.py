"""Disruption budgets: how many of a NodePool's nodes may be disrupted now, for a given reason.

Karpenter v1 semantics (AKS disruption-policy page): `nodes` is a count or a percentage of the pool's
nodes (rounded up); allowed = that - deleting - NotReady, floored at 0; several budgets give the minimum
of those active; `schedule` (cron, UTC, @-macros) with `duration` makes a budget active only inside its
window (a `duration` is a Go duration; `0m` is a window never open, as Karpenter's ``Budget.IsActive`` reads
it); `reasons` limits a budget to some reasons (unset = all). No budgets means one
`nodes: 10%`.
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

from croniter import croniter

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
#: the @-macros a schedule may be (robfig/cron's descriptors that Karpenter's NodePool schema admits)
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
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


def _budget_error(budget: Budget) -> str | None:
    if not _NODES.match(budget.nodes.strip()):
        return f"nodes {budget.nodes!r} is not a count or a percentage like 10%"
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
        if not croniter.is_valid(budget.schedule):
            return f"schedule {budget.schedule!r} is not a cron expression or @-macro"
        refused = _standard_error(budget.schedule)
        if refused is not None:
            return f"schedule {budget.schedule!r}: {refused}"
    for reason in budget.reasons or ():
        if reason not in REASONS:
            return f"reason {reason!r} is not one of {', '.join(REASONS)}"
    return None


def _standard_error(schedule: str) -> str | None:
    """Why robfig/cron's standard parser, which Karpenter reads a schedule with (``cron.ParseStandard``), refuses
    ``schedule``, in its words; None when it reads it. croniter reads more, with other meanings: a sixth field (its
    seconds), ``L``, ``W`` and ``#``, 7 for Sunday, a range whose beginning is beyond its end (wrapped around).
    Karpenter refuses those, so the budget is invalid and fails closed."""
    if schedule.startswith("@"):
        return None if schedule in _DESCRIPTORS else f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != len(_FIELD_BOUNDS):
        return f"expected exactly {len(_FIELD_BOUNDS)} fields, found {len(fields)}: {fields}"
    for field, names, (minimum, maximum) in zip(fields, _FIELD_NAMES, _FIELD_BOUNDS, strict=True):
        for expr in field.split(","):
            refused = _range_error(expr, names, minimum, maximum)
            if refused is not None:
                return refused
    return None


def _range_error(expr: str, names: dict[str, int], minimum: int, maximum: int) -> str | None:
    """Why one comma-separated part of a cron field (``*``, ``?``, a value, ``a-b``, each with an optional ``/step``)
    is refused (robfig/cron's ``getRange``), or None."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    if low_and_high[0] in ("*", "?"):
        start, end = minimum, maximum
    else:
        if len(low_and_high) > 2:
            return f"too many hyphens: {expr}"
        bounds = [names.get(b.lower(), _go_uint(b)) for b in low_and_high]
        for bound, text in zip(bounds, low_and_high, strict=True):
            if isinstance(bound, str):
                return f"{bound} in {text!r}"
        start, end = int(bounds[0]), int(bounds[-1])
    if len(range_and_step) > 2:
        return f"too many slashes: {expr}"
    if len(range_and_step) == 2:
        step = _go_uint(range_and_step[1])
        if isinstance(step, str):
            return f"{step} in {range_and_step[1]!r}"
        if len(low_and_high) == 1:  # "N/step" is "N-max/step"
            end = maximum
        if step == 0:
            return f"step of range should be a positive number: {expr}"
    if start < minimum:
        return f"beginning of range ({start}) below minimum ({minimum}): {expr}"
    if end > maximum:
        return f"end of range ({end}) above maximum ({maximum}): {expr}"
    if start > end:
        return f"beginning of range ({start}) beyond end of range ({end}): {expr}"
    return None


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
    start = _last_fire(budget.schedule, now)
    end = start + timedelta(seconds=seconds)
    return (start, end) if start <= now < end else None


#: per schedule, a fire time and the next one after it (`_last_fire`)
_FIRES: Memo[str, tuple[datetime, datetime]] = Memo(256)


def _last_fire(schedule: str, now: datetime) -> datetime:
    """The schedule's latest fire time at or before ``now`` (UTC). Kept with the fire after it: every moment until
    then has the same one (a pass every few seconds; a schedule fires minutes or hours apart), so croniter, which
    parses the schedule again each time, is asked once per fire."""
    kept = _FIRES.get(schedule)
    if kept is not None and kept[0] <= now < kept[1]:
        return kept[0]
    last: datetime = croniter(schedule, now + timedelta(microseconds=1)).get_prev(datetime)
    _FIRES.keep(schedule, (last, croniter(schedule, last).get_next(datetime)))  # no fire between the two
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
        text = budget.nodes.strip()
        limit = math.ceil(total * int(text[:-1]) / 100) if text.endswith("%") else int(text)
        allowed = max(0, limit - deleting - not_ready)
        where = ""
        if budget.schedule is not None:
            where = (f" (schedule {budget.schedule!r}, active until {fmt_time(window[1])},"
                     f" for {format_duration((window[1] - window[0]).total_seconds())})")
        detail = (f"budget nodes={text}{where} of {pool.policy_source} allows {allowed} "
                  f"of {total} nodes ({deleting} deleting, {not_ready} NotReady)")
        if best is None or allowed < best.allowed:
            best = BudgetVerdict(allowed, detail, limit=limit, disrupting=deleting + not_ready)
    if best is None:  # no budget applies to this reason now: nothing limits it
        return BudgetVerdict(total, f"no budget of {pool.policy_source} applies to {reason} now", limit=total,
                             disrupting=deleting + not_ready)
    return best
