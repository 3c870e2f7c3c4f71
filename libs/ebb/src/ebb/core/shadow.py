"""The shadow report's comparison (``ebb shadow report``, ``GET /v1/shadow/report``; docs/shadow.md): what a planner
in shadow mode would have disrupted set beside what the cluster's own disrupter (Karpenter) did, over a period.

Its inputs are what the shadow planner kept: its **shadow decisions** (``ebb.core.decision.Decision``: proposed at a
pass, approved or rejected when validated, never executed) and the **removals** it saw another disrupter make
(`Removal`: who and why, as ``ebb.core.recording`` tells them, with ebb's own verdict on the node at its last pass
before the removal began). Three lists come out:

- **Karpenter only**: a node Karpenter removed that ebb would not have disrupted: no shadow decision of ebb's, live
  (proposed or approved) when Karpenter removed it, held the node. Each comes with ebb's reason then, a cause kind
  (``ebb.core.causes.Cause``) and its sentence, and the reason's *category* (`category`): ``window`` (a
  stabilization, consolidateAfter or demand window), ``pdb``, ``price`` (no cheaper replacement, the price
  improvement or the saving per eviction too small), ``budget``, ``do-not-disrupt``, ``hold``, ``policy``, ``pods``
  (nowhere to go), ``not-candidate``, ``other``, or ``unseen`` (no pass saw the node).
- **ebb only**: a shadow decision ebb approved (it would have started disrupting) whose nodes Karpenter did not
  remove within the period, with its saving per hour and what that saving comes to from its approval until the
  end of the period or the node's removal by anyone (``saved``).
- **both**: a node Karpenter removed that an approved or proposed shadow decision held too, with how much earlier
  (or later) ebb decided.

A shadow decision rejected at validation is no disruption of ebb's; it is counted, not listed. Pure: the caller
reads the store and gives the period's bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from ebb.core.causes import BlockCause, Cause
from ebb.core.decision import Decision as ShadowDecision
from ebb.core.decision import State

#: the verdict of a node that was one of a pass's commands
DISRUPT: Final = "disrupt"
#: who Karpenter is in a removal's ``by`` (``ebb.core.recording``)
KARPENTER: Final = "karpenter"

#: the report's category of each cause that leaves a node alone
CATEGORY_OF_CAUSE: Final[Mapping[str, str]] = {
    **{str(c): "window" for c in (Cause.STABILIZATION_WINDOW, Cause.NOT_STABLE, Cause.DEMAND_WINDOW)},
    **{str(c): "pdb" for c in (Cause.PDB_BLOCKS, Cause.POD_TWO_PDBS)},
    **{str(c): "price" for c in (Cause.NO_CHEAPER_REPLACEMENT, Cause.ONLY_SAME_TYPE_CHEAPER,
                                 Cause.PRICE_IMPROVEMENT_TOO_SMALL, Cause.TYPE_NOT_IN_CATALOG,
                                 Cause.PRICE_UNKNOWN, Cause.EVICTIONS_NOT_WORTH, Cause.SPOT_TO_SPOT_DISABLED,
                                 Cause.SPOT_TO_SPOT_TOO_FEW_TYPES, Cause.NO_SPOT_OFFERING, Cause.MIN_VALUES_NOT_MET,
                                 Cause.BALANCED_SCORE, Cause.BALANCED_UNMEASURED, Cause.ALONE_SAVES_MORE)},
    **{str(c): "budget" for c in (Cause.BUDGET_INVALID, Cause.BUDGET_ZERO, Cause.BUDGET_USED_UP,
                                  Cause.BUDGET_USED_BY_CONSOLIDATIONS, Cause.BUDGET_FOR_WAITING_COMMANDS,
                                  Cause.BUDGET_WAIT, Cause.BUDGET_WAIT_UNCONSOLIDATABLE)},
    **{str(c): "do-not-disrupt" for c in (Cause.NODE_DO_NOT_DISRUPT, Cause.POD_DO_NOT_DISRUPT,
                                          Cause.POD_PROTECTED_UNTIL, Cause.NODEPOOL_DO_NOT_DISRUPT,
                                          Cause.NODE_DO_NOT_CONSOLIDATE)},
    str(Cause.HOLD): "hold",
    **{str(c): "policy" for c in (Cause.CONSOLIDATION_POLICY, Cause.CONSOLIDATE_AFTER_NEVER, Cause.STATIC_NODEPOOL,
                                  Cause.KARPENTER_CONFLICT, Cause.NO_NODEPOOL_LAUNCHES)},
    **{str(c): "pods" for c in (Cause.POD_NOWHERE_TO_GO, Cause.PODS_FIT_NOWHERE, Cause.NOMINATED,
                                Cause.AFFINITY_TARGET_OF_A_MOVE)},
    **{str(c): "not-candidate" for c in (Cause.NOT_OWNED, Cause.NODEPOOL_MISSING, Cause.NODEPOOL_UNMANAGED,
                                         Cause.NO_NODECLAIM,
                                         Cause.NOT_INITIALIZED, Cause.NODECLAIM_NOT_INITIALIZED,
                                         Cause.LAUNCHED_FOR, Cause.DELETING,
                                         Cause.BEING_DISRUPTED)},
}
#: causes that only qualify another (their inner cause says what stopped the node)
QUALIFYING: Final = frozenset({str(Cause.PAUSED), str(Cause.EMPTY_BUT), str(Cause.DUE_BUT), str(Cause.NO_REPLACEMENT),
                               str(Cause.NO_MERGE)})
#: the categories in the order the report lists their counts
CATEGORIES: Final = ("window", "pdb", "price", "budget", "do-not-disrupt", "hold", "policy", "pods", "not-candidate",
                     DISRUPT, "other", "unseen")


def deciding_inner(cause: BlockCause) -> str:
    """The inner cause a verdict's category is read from (``Removal.verdict_inner``): through every cause that only
    qualifies another ("empty, but consolidation is paused by a stabilization window": empty-but, paused, then the
    window), the first that is not one; empty when ``cause`` qualifies nothing."""
    inner = cause.inner
    while inner is not None and str(inner.kind) in QUALIFYING and inner.inner is not None:
        inner = inner.inner
    return str(inner.kind) if inner is not None else ""


def category(kind: str, inner: str = "") -> str:
    """The report's category of a verdict: the cause's own, or for a cause that qualifies another (paused, empty
    but, no replacement, ...) its inner cause's; ``disrupt`` for a command's node, ``unseen`` for no verdict."""
    if not kind:
        return "unseen"
    if kind == DISRUPT:
        return DISRUPT
    if kind in QUALIFYING and inner:
        return CATEGORY_OF_CAUSE.get(inner, "other")
    return CATEGORY_OF_CAUSE.get(kind, "other")


@dataclass(frozen=True, slots=True)
class Removal:
    """A node another disrupter removed, as the shadow planner saw it, with ebb's verdict before it began."""

    node: str
    at: datetime
    #: karpenter, ebb, unknown (``ebb.core.recording``)
    by: str
    reason: str = ""
    detail: str = ""
    nodepool: str = ""
    instance_type: str = ""
    #: ``disrupt`` or a ``Cause`` value; empty: no pass saw the node
    verdict: str = ""
    verdict_inner: str = ""
    verdict_text: str = ""
    verdict_at: datetime | None = None
    #: the node's price per hour (None: unknown)
    price: float | None = None

    @property
    def category(self) -> str:
        return category(self.verdict, self.verdict_inner)


@dataclass(frozen=True, slots=True)
class KarpenterOnly:
    """A node Karpenter removed that ebb would have left alone."""

    removal: Removal


@dataclass(frozen=True, slots=True)
class EbbOnly:
    """A shadow decision ebb approved whose nodes (``kept``) Karpenter did not remove in the period."""

    decision: ShadowDecision
    #: its nodes Karpenter did not remove (all of them, unless ``partial``)
    kept: tuple[str, ...]
    #: savings per hour (the decision's)
    savings: float
    #: what the saving comes to from the approval until the end of the period or the nodes' removal by anyone
    saved: float
    partial: bool = False


@dataclass(frozen=True, slots=True)
class Both:
    """A node Karpenter removed that a shadow decision of ebb's held too."""

    removal: Removal
    decision: ShadowDecision
    #: seconds ebb decided before Karpenter removed the node (negative: after)
    ebb_ahead: float


@dataclass(frozen=True, slots=True)
class Counts:
    karpenter_removals: int = 0
    other_removals: int = 0
    shadow_decisions: int = 0
    approved: int = 0
    rejected: int = 0
    proposed: int = 0
    both: int = 0
    karpenter_only: int = 0
    ebb_only: int = 0
    ebb_only_savings_per_hour: float = 0.0
    ebb_only_saved: float = 0.0
    #: category -> the Karpenter-only removals ebb would have left alone for it
    karpenter_only_by_category: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShadowReport:
    since: datetime
    until: datetime
    karpenter_only: tuple[KarpenterOnly, ...]
    ebb_only: tuple[EbbOnly, ...]
    both: tuple[Both, ...]
    counts: Counts


def _holds(decision: ShadowDecision, node: str, at: datetime) -> bool:
    """Whether ``decision`` held ``node`` when it was removed at ``at``: made before, and proposed or approved then
    (a rejection after ``at`` came too late to matter)."""
    if node not in decision.node_names or decision.created_at > at:
        return False
    if decision.state is State.REJECTED:
        return (decision.finished_at or decision.updated_at) > at
    return True


def _approved(decision: ShadowDecision) -> bool:
    return decision.approved_at is not None and decision.state is not State.REJECTED


def compare(decisions: Iterable[ShadowDecision], removals: Iterable[Removal], *, since: datetime,
            until: datetime) -> ShadowReport:
    """The shadow report of the period from ``since`` to ``until`` (see the module) from the shadow decisions and
    removals the store kept for it."""
    decided = sorted((d for d in decisions if since <= d.created_at <= until), key=lambda d: (d.created_at, d.id))
    seen = sorted((r for r in removals if since <= r.at <= until), key=lambda r: (r.at, r.node))
    karpenter = [r for r in seen if r.by == KARPENTER]
    both: list[Both] = []
    alone: list[KarpenterOnly] = []
    for removal in karpenter:
        holder = next((d for d in reversed(decided) if _holds(d, removal.node, removal.at)), None)
        if holder is None:
            alone.append(KarpenterOnly(removal))
            continue
        decided_at = holder.approved_at or holder.created_at
        both.append(Both(removal, holder, round((removal.at - decided_at).total_seconds(), 3)))
    removed_by_karpenter = {r.node for r in karpenter}
    first_removal: dict[str, datetime] = {}
    for removal in seen:
        first_removal.setdefault(removal.node, removal.at)
    ebb_only: list[EbbOnly] = []
    for decision in decided:
        if not _approved(decision):
            continue
        kept = tuple(n for n in decision.node_names if n not in removed_by_karpenter)
        if not kept:
            continue
        assert decision.approved_at is not None
        ends = [first_removal[n] for n in decision.node_names
                if n in first_removal and first_removal[n] >= decision.approved_at]
        end = min([until, *ends])
        hours = max(0.0, (end - decision.approved_at).total_seconds() / 3600)
        ebb_only.append(EbbOnly(decision, kept, decision.savings, round(decision.savings * hours, 6),
                                partial=len(kept) < len(decision.node_names)))
    by_category: dict[str, int] = {}
    for entry in alone:
        by_category[entry.removal.category] = by_category.get(entry.removal.category, 0) + 1
    counts = Counts(
        karpenter_removals=len(karpenter), other_removals=len(seen) - len(karpenter), shadow_decisions=len(decided),
        approved=sum(1 for d in decided if _approved(d)), rejected=sum(1 for d in decided if d.state is State.REJECTED),
        proposed=sum(1 for d in decided if d.state is State.PROPOSED), both=len(both), karpenter_only=len(alone),
        ebb_only=len(ebb_only), ebb_only_savings_per_hour=round(sum(e.savings for e in ebb_only), 6),
        ebb_only_saved=round(sum(e.saved for e in ebb_only), 6),
        karpenter_only_by_category={c: by_category[c] for c in sorted(by_category, key=_category_order)})
    return ShadowReport(since, until, tuple(alone), tuple(ebb_only), tuple(both), counts)


def _category_order(name: str) -> int:
    return CATEGORIES.index(name) if name in CATEGORIES else len(CATEGORIES)


def _time(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _removal_json(removal: Removal) -> dict[str, Any]:
    return {"node": removal.node, "nodePool": removal.nodepool, "instanceType": removal.instance_type,
            "removedAt": _time(removal.at), "removedBy": removal.by, "reason": removal.reason,
            "detail": removal.detail, "price": removal.price,
            "ebb": {"verdict": removal.verdict or None, "inner": removal.verdict_inner or None,
                    "category": removal.category, "reason": removal.verdict_text or None,
                    "at": _time(removal.verdict_at)}}


def _decision_json(decision: ShadowDecision) -> dict[str, Any]:
    return {"id": decision.id, "method": decision.method, "reason": decision.reason, "action": decision.action,
            "nodes": list(decision.node_names), "nodePools": sorted({n.nodepool for n in decision.nodes}),
            "state": decision.state.value, "createdAt": _time(decision.created_at),
            "approvedAt": _time(decision.approved_at), "savingsPerHour": decision.savings,
            "explanation": str(decision.explanation.get("text", ""))}


def as_json(report: ShadowReport) -> dict[str, Any]:
    """The report as ``GET /v1/shadow/report`` serves it and ``ebb shadow report -o json`` prints it."""
    c = report.counts
    return {
        "since": _time(report.since), "until": _time(report.until),
        "counts": {"karpenterRemovals": c.karpenter_removals, "otherRemovals": c.other_removals,
                   "shadowDecisions": c.shadow_decisions, "approved": c.approved, "rejected": c.rejected,
                   "proposed": c.proposed, "both": c.both, "karpenterOnly": c.karpenter_only, "ebbOnly": c.ebb_only,
                   "ebbOnlySavingsPerHour": c.ebb_only_savings_per_hour, "ebbOnlySaved": c.ebb_only_saved,
                   "karpenterOnlyByCategory": dict(c.karpenter_only_by_category)},
        "karpenterOnly": [_removal_json(e.removal) for e in report.karpenter_only],
        "ebbOnly": [{**_decision_json(e.decision), "kept": list(e.kept), "saved": e.saved, "partial": e.partial}
                    for e in report.ebb_only],
        "both": [{**_removal_json(b.removal), "decision": _decision_json(b.decision), "ebbAheadSeconds": b.ebb_ahead}
                 for b in report.both],
    }


def parse_period(text: str) -> float:
    """Seconds of a period such as ``7d``, ``12h``, ``90m``, ``30s`` or ``1w`` (a bare number: seconds); ValueError
    when it is none."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    value = text.strip().lower()
    if not value:
        raise ValueError("an empty period")
    unit = units.get(value[-1])
    number = value[:-1] if unit is not None else value
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        raise ValueError(f"not a period: {text!r} (e.g. 7d, 12h, 90m)") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"a period must be positive: {text!r}")
    return seconds

