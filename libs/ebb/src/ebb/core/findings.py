"""Node findings (DESIGN §2, ebb.node.findings): which nodes are Drifted, Expired, Empty or Consolidatable.

The drift-detector publishes these facts for the planner; they come from the engine's own rules, not a
copy of them: Drifted is `drift_reason` (via `drifted_nodes`), Expired is `expired_nodes`, Empty is the
emptiness method's test (no pods that need a home, on a node that is a candidate at all) and
Consolidatable is the consolidation gate's timing (`ClusterView.stable_for` with the NodePool's
`consolidateAfter`). Budgets, holds and blocking annotations are the planner's business and do not
suppress a finding.

`diff(previous, current)` gives the changes to publish: a finding that appears (or whose `since`
changes, or, for Drifted, whose reason changes) is raised; one that disappears is cleared. The reason
of the other kinds only describes (Expired names the node's age, which grows every pass), so a new
reason alone does not raise them again. Pure: snapshot + now in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from ebb.core.cluster import ClusterView, fmt_time
from ebb.core.methods.base import EngineOptions, PassContext, simulation
from ebb.core.methods.drift import drifted_nodes
from ebb.core.methods.expiration import expired_nodes
from ebb.core.model import Snapshot
from ebb.core.quantity import format_duration

FindingKind = Literal["Drifted", "Expired", "Empty", "Consolidatable"]
#: the order findings of one node are listed in (the engine's method order)
KINDS: tuple[FindingKind, ...] = ("Expired", "Drifted", "Empty", "Consolidatable")


@dataclass(frozen=True, slots=True)
class Finding:
    node: str
    kind: FindingKind
    reason: str
    #: when the finding started to hold, when the snapshot tells (None: unknown, e.g. a hash drift)
    since: datetime | None

    def same_as(self, other: Finding) -> bool:
        """Whether ``other`` is this finding unchanged (nothing to publish)."""
        if (self.node, self.kind, self.since) != (other.node, other.kind, other.since):
            return False
        return self.kind != "Drifted" or self.reason == other.reason


@dataclass(frozen=True, slots=True)
class Change:
    """A finding raised (``cleared`` False) or cleared."""

    finding: Finding
    cleared: bool


Findings = dict[str, list[Finding]]


def context(snapshot: Snapshot, now: datetime) -> PassContext:
    """The pass context of the engine (`ebb.core.engine`) over ``snapshot`` at ``now``."""
    view = ClusterView.build(snapshot, now)
    sched, state = simulation(view)
    return PassContext(view, EngineOptions(), sched, state, {k: v.allowed for k, v in view.budgets.items()})


def findings(snapshot: Snapshot, now: datetime) -> Findings:
    """The findings of every node that has at least one, by node name (kinds in `KINDS` order)."""
    ctx = context(snapshot, now)
    view = ctx.view
    out: Findings = {}

    def add(finding: Finding) -> None:
        out.setdefault(finding.node, []).append(finding)

    expired = expired_nodes(ctx)
    drifted = drifted_nodes(ctx)
    for node in snapshot.nodes:
        name = node.name
        pool = view.pools.get(node.nodepool or "")
        if pool is None:
            continue
        if name in expired:
            since = None
            if node.creation_time is not None and pool.expire_after is not None:
                since = node.creation_time + timedelta(seconds=pool.expire_after)
            add(Finding(name, "Expired", expired[name], since))
        if name in drifted:
            claim = view.claims.get(name)
            condition = claim.conditions.get("Drifted") if claim is not None else None
            since = condition[1] if condition is not None and condition[0] == "True" else None
            add(Finding(name, "Drifted", drifted[name], since))
        if name in view.not_candidate:
            continue
        last = view.last_pod_event(node)
        if not view.movable[name]:
            shown = f" since {fmt_time(last)}" if last is not None else ""
            add(Finding(name, "Empty", f"empty{shown}: no pods need rescheduling", last))
        after = pool.consolidate_after
        if after is not None and view.stable_for(node, after) is None:
            since = last + timedelta(seconds=after) if last is not None else None
            changed = f"its pods last changed at {fmt_time(last)}; " if last is not None else ""
            add(Finding(name, "Consolidatable", f"consolidatable: {changed}NodePool {pool.name}'s "
                        f"consolidateAfter ({format_duration(after)}) has passed", since))
    for node_findings in out.values():
        node_findings.sort(key=lambda f: KINDS.index(f.kind))
    return out


def _index(found: Findings) -> dict[tuple[str, str], Finding]:
    return {(f.node, f.kind): f for fs in found.values() for f in fs}


def diff(previous: Findings, current: Findings) -> list[Change]:
    """What to publish to go from ``previous`` to ``current``: clears first, then raises, by node and kind."""
    before, after = _index(previous), _index(current)
    cleared = [Change(f, True) for key, f in before.items() if key not in after]
    raised = [Change(f, False) for key, f in after.items() if key not in before or not before[key].same_as(f)]

    def order(change: Change) -> tuple[str, int]:
        return change.finding.node, KINDS.index(change.finding.kind)

    return sorted(cleared, key=order) + sorted(raised, key=order)
