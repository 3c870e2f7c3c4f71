"""Disruption budgets: how many of a NodePool's nodes may be disrupted now, for a given reason.

Karpenter v1 semantics (AKS disruption-policy page): `nodes` is a count or a percentage of the pool's
nodes (rounded up); allowed = that - deleting - NotReady, floored at 0; several budgets give the minimum
of those active; `schedule` (cron, UTC, @-macros) with `duration` makes a budget active only inside its
window; `reasons` limits a budget to some reasons (unset = all). No budgets means one `nodes: 10%`.
The budgets are the NodePool's effective ones (its DisruptionPolicy's when it has one); the details name
where they come from (`NodePool.policy_source`).
An invalid budget fails closed (allows 0) and says why, rather than silently allowing disruption.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import croniter

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
    """Why a budget is invalid, or None."""
    if not _NODES.match(budget.nodes.strip()):
        return f"nodes {budget.nodes!r} is not a count or a percentage like 10%"
    if (budget.schedule is None) != (budget.duration is None):
        return "schedule and duration must be set together"
    if budget.duration is not None:
        try:
            seconds = parse_duration(budget.duration)
        except QuantityError as exc:
            return f"duration: {exc}"
        if seconds is None or seconds <= 0:
            return f"duration {budget.duration!r} must be a positive time"
    if budget.schedule is not None:
        if not croniter.is_valid(budget.schedule):
            return f"schedule {budget.schedule!r} is not a cron expression or @-macro"
        reversed_range = _reversed_range(budget.schedule)
        if reversed_range is not None:
            return f"schedule {budget.schedule!r}: {reversed_range}"
    for reason in budget.reasons or ():
        if reason not in REASONS:
            return f"reason {reason!r} is not one of {', '.join(REASONS)}"
    return None


def _reversed_range(schedule: str) -> str | None:
    """Why a five-field schedule has a range whose beginning is beyond its end (``tue-mon``), in robfig/cron's
    words, or None. croniter wraps such a range around; Karpenter's parser rejects it, so the budget is invalid."""
    fields = schedule.split()
    if len(fields) != len(_FIELD_NAMES):
        return None
    for field, names in zip(fields, _FIELD_NAMES, strict=True):
        for part in field.split(","):
            bounds = part.split("/", 1)[0].split("-")
            if len(bounds) != 2:
                continue
            low, high = (names.get(b.lower(), int(b) if b.isdigit() else -1) for b in bounds)
            if low > high >= 0:
                return f"beginning of range ({low}) beyond end of range ({high}): {part}"
    return None


def active_window(budget: Budget, now: datetime) -> tuple[datetime, datetime] | None:
    """The window the budget is active in at `now` (start, end, in UTC), or None when it is not active.
    The schedule is read in UTC whatever zone `now` is written in (Karpenter's ``IsActive``).
    A budget without a schedule is always active: returns (now, now) as a marker."""
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    if budget.schedule is None:
        return (now, now)
    seconds = parse_duration(budget.duration or "0s") or 0.0
    start = croniter(budget.schedule, now + timedelta(microseconds=1)).get_prev(datetime)
    end = start + timedelta(seconds=seconds)
    return (start, end) if start <= now < end else None


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
