"""Findings: which nodes are Drifted, Expired, Empty or Consolidatable, and since when.

The consolidation-planner computes them after each pass from the pass's own ``ClusterView`` (no second
evaluation of the cluster), puts them into the explanation of every decision on a node, and mirrors the
Drifted finding on the Node as the ``ebb.sh/drifted`` annotation (docs/services/consolidation-planner.md).
They come from the engine's own rules, not a copy of them: Drifted is `drift_reason` (via
`drifted_nodes`), Expired is `expired_nodes`, Empty is the emptiness method's test (no pods that need a
home, on a node that is a candidate at all) and Consolidatable is the consolidation gate's timing
(`ClusterView.stable_for` with the NodePool's `consolidateAfter`). Budgets, holds and blocking
annotations are the planner's business and do not suppress a finding.

`with_since(previous, current, now)` fills in the start the snapshot does not tell (a hash drift) with the
time the finding was first seen, carried from pass to pass while it holds. `diff(previous, current)` gives
the changes between two passes (the planner logs them): a finding that appears (or whose `since` changes,
or, for Drifted, whose reason changes) is raised; one that disappears is cleared. The reason of the other
kinds only describes (Expired names the node's age, which grows every pass), so a new reason alone does
not raise them again. Pure: a view in, values out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from ebb.core.cluster import ClusterView
from ebb.core.memo import Memo
from ebb.core.methods.drift import drifted_nodes
from ebb.core.methods.expiration import expired_nodes
from ebb.core.quantity import fmt_time, format_duration

#: the annotation that shows a node's Drifted finding (its reason) with kubectl; absent when not drifted
ANNOTATION_DRIFTED = "ebb.sh/drifted"

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
        """Whether ``other`` is this finding unchanged (not raised again)."""
        if (self.node, self.kind, self.since) != (other.node, other.kind, other.since):
            return False
        return self.kind != "Drifted" or self.reason == other.reason


@dataclass(frozen=True, slots=True)
class Change:
    """A finding raised (``cleared`` False) or cleared."""

    finding: Finding
    cleared: bool


Findings = dict[str, list[Finding]]


def findings(view: ClusterView) -> Findings:
    """The findings of every node that has at least one at ``view.now``, by node name (kinds in `KINDS`
    order); ``since`` is None where the snapshot does not tell (see `with_since`)."""
    out: Findings = {}

    def add(finding: Finding) -> None:
        out.setdefault(finding.node, []).append(finding)

    expired = expired_nodes(view)
    drifted = drifted_nodes(view)
    for node in view.snapshot.nodes:
        name = node.name
        pool = view.pools.get(node.nodepool or "")
        if pool is None:
            continue
        if name in expired:
            since = None
            launched = view.launched(node)
            if launched is not None and pool.expire_after is not None:
                since = launched + timedelta(seconds=pool.expire_after)
            add(Finding(name, "Expired", expired[name], since))
        if name in drifted:
            claim = view.claim_of(node)
            condition = claim.conditions.get("Drifted") if claim is not None else None
            since = condition[1] if condition is not None and condition[0] == "True" else None
            add(Finding(name, "Drifted", drifted[name], since))
        if name in view.not_candidate:
            continue
        last = view.last_pod_event(node)
        if not view.movable[name]:
            add(_empty(name, last))
        after = pool.consolidate_after
        if after is not None and view.stable_for(node, after) is None:
            add(_consolidatable(name, last, after, pool.policy_source))
    for of_node in out.values():
        if len(of_node) > 1:
            of_node.sort(key=lambda f: KINDS.index(f.kind))
    return out


#: the Empty and Consolidatable findings last made, by node name, with what they were made from: a pass after a
#: change finds most nodes' the same (frozen values, so the same finding is the same object)
_MADE: Memo[tuple[str, str], tuple[tuple[object, ...], Finding]] = Memo(20_000)


def _empty(name: str, last: datetime | None) -> Finding:
    def make() -> Finding:
        shown = f" since {fmt_time(last)}" if last is not None else ""
        return Finding(name, "Empty", f"empty{shown}: no pods need rescheduling", last)
    return _kept(name, "Empty", (last, None if last is None else last.tzinfo), make)


def _consolidatable(name: str, last: datetime | None, after: float, source: str) -> Finding:
    def make() -> Finding:
        since = last + timedelta(seconds=after) if last is not None else None
        changed = f"its pods last changed at {fmt_time(last)}; " if last is not None else ""
        return Finding(name, "Consolidatable", f"consolidatable: {changed}{source}'s consolidateAfter "
                       f"({format_duration(after)}) has passed", since)
    return _kept(name, "Consolidatable", (last, None if last is None else last.tzinfo, after, source), make)


def _kept(name: str, kind: FindingKind, facts: tuple[object, ...], make: Callable[[], Finding]) -> Finding:
    """The ``kind`` finding of node ``name`` last made from ``facts`` (the moment with its zone: an equal moment may be
    written otherwise), else ``make``'s, kept for the next pass."""
    made = _MADE.get((name, kind))
    if made is not None and made[0] == facts:
        return made[1]
    return _MADE.keep((name, kind), (facts, make()))[1]


def with_since(previous: Findings, current: Findings, now: datetime) -> Findings:
    """``current`` with every unknown ``since`` filled in: the one the same finding (node and kind) had in
    ``previous`` (the last pass's, already filled in), else ``now``, when it is first seen."""
    before = _index(previous)

    def filled(f: Finding) -> Finding:
        if f.since is not None:
            return f
        held = before.get((f.node, f.kind))
        return replace(f, since=held.since if held is not None and held.since is not None else now)

    return {node: [filled(f) for f in of_node] for node, of_node in current.items()}


def drifted_annotation(of_node: list[Finding]) -> str | None:
    """The value of ``ebb.sh/drifted`` a node with these findings should carry: its drift reason, or None
    (no annotation) when it has not drifted."""
    return next((f.reason for f in of_node if f.kind == "Drifted"), None)


def _index(found: Findings) -> dict[tuple[str, str], Finding]:
    return {(f.node, f.kind): f for fs in found.values() for f in fs}


def diff(previous: Findings, current: Findings) -> list[Change]:
    """What changed from ``previous`` to ``current``: clears first, then raises, by node and kind."""
    before, after = _index(previous), _index(current)
    cleared = [Change(f, True) for key, f in before.items() if key not in after]
    raised = [Change(f, False) for key, f in after.items() if key not in before or not before[key].same_as(f)]

    def order(change: Change) -> tuple[str, int]:
        return change.finding.node, KINDS.index(change.finding.kind)

    return sorted(cleared, key=order) + sorted(raised, key=order)
