"""When a pass over an unchanged snapshot could decide differently: the pass's "revisit at".

A pass is a function of its snapshot, its options and ``now``. Between two changes of the snapshot only ``now``
moves, and the pass reads it at a few places only. `revisit_at` is the earliest moment after ``view.now`` at
which one of them could give another answer; before it, a pass over the same snapshot makes the same commands,
the same findings and the same budgets (the planner reuses the last pass's answer until then,
``ebb_consolidation_planner.pass_inputs``). The moments, each as the rule that reads ``now`` has it:

- **consolidateAfter ripening**: a node's pods last changed (`ClusterView.last_pod_event`) plus its NodePool's
  consolidateAfter (`ClusterView.stable_for`: the node becomes consolidatable, and stops being unsettled as a
  destination);
- **expireAfter**: a node's launch (`ClusterView.launched`) plus its NodePool's expireAfter (expiration, the
  Expired finding);
- **do-not-disrupt durations**: an active pod's start plus its ``karpenter.sh/do-not-disrupt`` (or do-not-evict)
  duration (`ClusterView._do_not_disrupt`: the node stops being blocked, the pod becomes evictable soon; a finished
  pod blocks nothing);
- **pauses**: a hold's expiry and a stabilization window's end (the ``resume`` its `BlockCause` names); a pause
  of a kind this module does not know makes the answer ``view.now`` (nothing is reused);
- **demand windows**: a demand sample leaving its NodePool's ``demandWindow`` (`ClusterView.demand_peak` may
  fall with it, and the room consolidation has grow);
- **budget windows**: a scheduled budget's next cron fire (its window opens) and the end of the window it is in
  (`ebb.core.budgets.active_window`);
- **disruption cost**: Karpenter's disruption cost (`ClusterView.disruption_cost`) shrinks with the lifetime
  left before expireAfter, so the order the methods try candidates in (`ClusterView.order`) can change while
  the snapshot does not. The lifetime is measured on a grid (`ebb.core.cluster.lifetime_step`: an hour for the
  default expireAfter of 720h), so the costs move only at its points: each candidate's cost follows a straight
  line in time, sampled there, until it expires, and the moment two of them swap places is the first point of
  the grid at or after the first crossing of two neighbours in today's order. Costs within ``COST_TIE`` of each
  other that are not the same line make it the next point. A launch or an expiry bends a line at the next point
  after it.

terminationGracePeriod deadlines are the termination-executor's, not a pass's: the pass never reads them.
What the moments do not cover is wording that moves with time without changing any decision: a blocked node's
explanation may say how long ago something happened (a stabilization window's age); a reused answer keeps the
words of the pass it came from. None means nothing changes with time alone. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from itertools import chain, pairwise
from operator import attrgetter

from ebb.core.budgets import budget_error, last_fire, next_fire
from ebb.core.causes import Cause
from ebb.core.cluster import ClusterView
from ebb.core.model import ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_DO_NOT_EVICT, Hold
from ebb.core.quantity import parse_duration, positive_duration

#: two disruption costs closer than this (relative to their size) may be ordered by rounding, not by value: a
#: pass's answer is not reused when two candidates' costs are that close and not the same line
COST_TIE = 1e-9
#: a crossing of two disruption costs is revisited this much before the computed moment (rounding)
COST_MARGIN = timedelta(seconds=1)
_PROTECTION_ANNOTATED = attrgetter("protection_annotated")
_PROTECTED = attrgetter("protected")


def revisit_at(view: ClusterView) -> datetime | None:
    """The earliest moment after ``view.now`` at which a pass over ``view.snapshot`` could decide differently
    (``view.now`` itself when that cannot be ruled out), or None when nothing changes with time alone."""
    now = view.now
    moments: list[datetime] = []
    lifetime_at, step = view.lifetime_at, view.lifetime_step

    def after(moment: datetime | None) -> None:
        if moment is not None and moment > now:
            moments.append(moment)

    for node in view.snapshot.nodes:
        pool = view.pools.get(node.nodepool or "")
        if pool is None:
            continue
        if pool.consolidate_after:
            last = view.last_pod_event(node)
            if last is not None:
                after(last + timedelta(seconds=pool.consolidate_after))
        if pool.expire_after is not None:
            launched = view.launched(node)
            if launched is not None:
                expiry = launched + timedelta(seconds=pool.expire_after)
                after(launched)  # the lifetime left is counted from here
                after(expiry)
                if step is not None:  # the disruption cost bends at the grid points after them
                    for bend in (launched, expiry):
                        if bend > lifetime_at:
                            after(grid_point_from(bend, lifetime_at, step))
    # the active pods with such an annotation (a finished pod protects nothing): kept per node (`ebb.core.node_pods`),
    # and among the few on no node
    for pod in chain(chain.from_iterable(map(_PROTECTED, view.node_pods.values())),
                     filter(_PROTECTION_ANNOTATED, view.unbound)):
        if pod.start_time is None:
            continue
        for annotation in (ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_DO_NOT_EVICT):
            value = pod.annotations.get(annotation)
            seconds = positive_duration(value) if value is not None and value != "true" else None
            if seconds is not None:
                after(pod.start_time + timedelta(seconds=seconds))
    for hold in view.snapshot.holds:
        after(hold.expires)
    for cause in view.pause.values():
        resume = cause.values.get("resume")
        if cause.kind is Cause.STABILIZATION_WINDOW and isinstance(resume, datetime):
            after(resume)
        elif cause.kind is Cause.HOLD and isinstance(cause.values.get("hold"), Hold):
            pass  # its expiry is among the snapshot's holds
        else:
            return now
    for sample in view.snapshot.demand:
        window = view.demand_windows.get(sample.pool)
        if window is not None:
            after(sample.at + timedelta(seconds=window))
    for pool in view.snapshot.nodepools:
        for budget in pool.budgets:
            if budget.schedule is None or budget_error(budget) is not None:
                continue
            moments.extend(_window_edges(budget.schedule, budget.duration or "0s", now))
    crossing = _order_changes(view)
    if crossing is not None:
        moments.append(crossing)  # a point of the lifetime grid after now
    return min(moments, default=None)


def _window_edges(schedule: str, duration: str, now: datetime) -> list[datetime]:
    """The next moments a scheduled budget's window opens or closes (read in UTC, as `active_window` does)."""
    utc_now = now.astimezone(UTC) if now.tzinfo is not None else now
    seconds = parse_duration(duration) or 0.0
    if not seconds:
        return []  # a window of 0m never opens (Karpenter's Budget.IsActive): the budget changes nothing
    opens, started = next_fire(schedule, utc_now), last_fire(schedule, utc_now)
    if opens is None or started is None:
        return []  # a schedule that never fires is always active: it changes nothing
    edges = [opens]
    closes = started + timedelta(seconds=seconds)
    if closes > utc_now:
        edges.append(closes)
    return edges


def _order_changes(view: ClusterView) -> datetime | None:
    """The first moment two candidates' disruption costs could swap their order, or None when none do. The costs
    are measured on the lifetime grid (`ClusterView.lifetime_at`) and hold between two of its points, so the moment
    is a point of the grid after ``view.now``: the first at or after the first crossing of two neighbours in today's
    order (`COST_MARGIN` before it, for rounding), and the next one when two costs tie within `COST_TIE` on
    different lines."""
    lines: list[tuple[float, float, tuple[float, int, float, str]]] = []  # (cost now, per second, order key)
    at, step = view.lifetime_at, view.lifetime_step
    for name in view.nodes:
        if name in view.not_candidate:
            continue
        node = view.nodes[name]
        cost = view.disruption_cost(node)
        slope = 0.0
        pool = view.pools.get(node.nodepool or "")
        launched = view.launched(node)
        if pool is not None and pool.expire_after and launched is not None:
            age = (at - launched).total_seconds()
            if 0 <= age < pool.expire_after:
                slope = -view.eviction_cost_of(name) / pool.expire_after
        lines.append((cost, slope, (cost, len(view.movable[name]), -view.price[name], name)))
    if step is None or not any(slope for _cost, slope, _key in lines):
        return None
    lines.sort(key=lambda line: line[2])
    first: float | None = None
    for (cost_a, slope_a, _), (cost_b, slope_b, _) in pairwise(lines):
        if slope_a == slope_b:
            if cost_a != cost_b and abs(cost_b - cost_a) <= COST_TIE * max(1.0, abs(cost_a), abs(cost_b)):
                return at + timedelta(seconds=step)  # ordered by rounding: the next point may order them otherwise
            continue
        # cost_a + slope_a * t = cost_b + slope_b * t; a is not after b now
        t = (cost_b - cost_a) / (slope_a - slope_b)
        if t < 0:
            continue
        first = t if first is None else min(first, t)
    if first is None:
        return None
    return grid_point_from(at + timedelta(seconds=first) - COST_MARGIN, at, step)


def grid_point_from(moment: datetime, at: datetime, step: int) -> datetime:
    """The first point of the lifetime grid of ``step`` seconds through ``at`` that is at or after ``moment`` and
    after ``at``: where the disruption costs are measured next once ``moment`` has come."""
    steps = max(1, math.ceil((moment - at).total_seconds() / step))
    return at + timedelta(seconds=steps * step)
