"""``ebb.core.shadow``: the shadow report's comparison of ebb's shadow decisions with the removals Karpenter made,
case by case; the category of each verdict; the period's parsing."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from ebb.core.causes import BlockCause, Cause
from ebb.core.decision import Decision, DecisionNode, State
from ebb.core.shadow import Removal, as_json, category, compare, deciding_inner, parse_period

T0 = datetime(2026, 1, 5, tzinfo=UTC)
SINCE, UNTIL = T0, T0 + timedelta(hours=10)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def decision(id_: str, *nodes: str, created: float, state: State = State.APPROVED, approved: float | None = None,
             rejected: float | None = None, savings: float = 0.5) -> Decision:
    approved_at = at(approved if approved is not None else created) if state is State.APPROVED else None
    updated = at(rejected) if rejected is not None else approved_at or at(created)
    return Decision(id=id_, method="emptiness", reason="Empty", action="delete",
                    nodes=tuple(DecisionNode(n, "default", "m5.large") for n in nodes), replacements=(),
                    savings=savings, state=state, created_at=at(created), updated_at=updated,
                    approved_at=approved_at, finished_at=at(rejected) if rejected is not None else None)


def removal(node: str, hours: float, *, by: str = "karpenter", verdict: str = "no-replacement",
            inner: str = "no-cheaper-replacement") -> Removal:
    return Removal(node=node, at=at(hours), by=by, reason="Underutilized", nodepool="default", verdict=verdict,
                   verdict_inner=inner, verdict_text="why", verdict_at=at(hours - 0.01))


@dataclass
class Case:
    name: str
    decisions: list[Decision]
    removals: list[Removal]
    karpenter_only: list[str] = field(default_factory=list)
    #: (decision id, kept nodes, saved)
    ebb_only: list[tuple[str, tuple[str, ...], float]] = field(default_factory=list)
    #: (node, decision id, seconds ebb was ahead)
    both: list[tuple[str, str, float]] = field(default_factory=list)
    other_removals: int = 0


CASES = [
    Case("nothing happened", [], []),
    Case("Karpenter removed a node ebb left alone", [], [removal("a", 2)], karpenter_only=["a"]),
    Case("ebb would have removed a node Karpenter kept: saved until the period's end",
         [decision("d1", "a", created=1, approved=2, savings=0.5)], [], ebb_only=[("d1", ("a",), 0.5 * 8)]),
    Case("both removed it, ebb an hour earlier",
         [decision("d1", "a", created=1, approved=2)], [removal("a", 3)], both=[("a", "d1", 3600.0)]),
    Case("a proposal still pending when Karpenter removed the node counts as both, from its proposal",
         [decision("d1", "a", created=2.5, state=State.PROPOSED)], [removal("a", 3)], both=[("a", "d1", 1800.0)]),
    Case("a proposal rejected before the removal is no disruption of ebb's",
         [decision("d1", "a", created=1, state=State.REJECTED, rejected=1.5)], [removal("a", 3)],
         karpenter_only=["a"]),
    Case("a proposal rejected after the removal held the node when it went",
         [decision("d1", "a", created=1, state=State.REJECTED, rejected=4)], [removal("a", 3)],
         both=[("a", "d1", 7200.0)]),
    Case("a decision made after the removal does not match it",
         [decision("d1", "a", created=5)], [removal("a", 3)], karpenter_only=["a"]),
    Case("a multi-node decision Karpenter half-followed: both for one, ebb-only for the other",
         [decision("d1", "a", "b", created=1, savings=1.0)], [removal("a", 2)],
         both=[("a", "d1", 3600.0)], ebb_only=[("d1", ("b",), 1.0 * 1)]),
    Case("a removal by someone else ends the saving and is not Karpenter's",
         [decision("d1", "a", created=1, savings=2.0)], [removal("a", 4, by="unknown")],
         ebb_only=[("d1", ("a",), 2.0 * 3)], other_removals=1),
    Case("outside the period: neither the decision nor the removal",
         [decision("d1", "a", created=-1)], [removal("b", 11)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_compare(case: Case) -> None:
    report = compare(case.decisions, case.removals, since=SINCE, until=UNTIL)
    assert [e.removal.node for e in report.karpenter_only] == case.karpenter_only
    assert [(e.decision.id, e.kept) for e in report.ebb_only] == [(d, kept) for d, kept, _ in case.ebb_only]
    assert [e.saved for e in report.ebb_only] == pytest.approx([saved for _, _, saved in case.ebb_only])
    assert [(b.removal.node, b.decision.id, b.ebb_ahead) for b in report.both] == case.both
    counts = report.counts
    assert counts.karpenter_only == len(case.karpenter_only) and counts.both == len(case.both)
    assert counts.ebb_only == len(case.ebb_only) and counts.other_removals == case.other_removals
    assert counts.karpenter_removals == len(case.karpenter_only) + len(case.both)
    assert counts.ebb_only_saved == pytest.approx(sum(e[2] for e in case.ebb_only))
    assert sum(counts.karpenter_only_by_category.values()) == len(case.karpenter_only)


def test_the_counts_name_each_decision_state_and_group_karpenters_removals_by_ebbs_reason() -> None:
    decisions = [decision("d1", "x", created=1), decision("d2", "y", created=1, state=State.PROPOSED),
                 decision("d3", "z", created=1, state=State.REJECTED, rejected=2)]
    removals = [removal("a", 2, verdict="paused", inner="stabilization-window"), removal("b", 2, verdict="pdb-blocks"),
                removal("c", 3, verdict="budget-used-up", inner=""), removal("d", 4, verdict="", inner=""),
                removal("e", 5, verdict="pdb-blocks")]
    report = compare(decisions, removals, since=SINCE, until=UNTIL)
    c = report.counts
    assert (c.shadow_decisions, c.approved, c.proposed, c.rejected) == (3, 1, 1, 1)
    assert c.karpenter_only_by_category == {"window": 1, "pdb": 2, "budget": 1, "unseen": 1}
    assert list(c.karpenter_only_by_category) == ["window", "pdb", "budget", "unseen"]
    served = as_json(report)
    assert served["counts"]["karpenterOnly"] == 5 and served["counts"]["ebbOnly"] == 1
    assert [e["ebb"]["category"] for e in served["karpenterOnly"]] == ["window", "pdb", "budget", "unseen", "pdb"]
    assert served["ebbOnly"][0]["id"] == "d1" and served["ebbOnly"][0]["kept"] == ["x"]


@pytest.mark.parametrize(("kind", "inner", "expected"), [
    ("stabilization-window", "", "window"),
    ("paused", "stabilization-window", "window"),
    ("paused", "hold", "hold"),
    ("demand-window", "", "window"),
    ("not-stable", "", "window"),
    ("pdb-blocks", "", "pdb"),
    ("pod-two-pdbs", "", "pdb"),
    ("no-replacement", "price-improvement-too-small", "price"),
    ("evictions-not-worth", "", "price"),
    ("budget-zero", "", "budget"),
    ("budget-wait", "budget-used-up", "budget"),
    ("pod-do-not-disrupt", "", "do-not-disrupt"),
    ("consolidation-policy", "", "policy"),
    ("pods-fit-nowhere", "", "pods"),
    ("no-nodeclaim", "", "not-candidate"),
    ("disrupt", "", "disrupt"),
    ("something-new", "", "other"),
    ("", "", "unseen"),
])
def test_category(kind: str, inner: str, expected: str) -> None:
    assert category(kind, inner) == expected


@pytest.mark.parametrize(("text", "seconds"), [("7d", 604800), ("12h", 43200), ("90m", 5400), ("30s", 30),
                                               ("1w", 604800), ("3600", 3600), ("1.5h", 5400)])
def test_parse_period(text: str, seconds: float) -> None:
    assert parse_period(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "7x", "-1h", "0s", "nan", "inf"])
def test_parse_period_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_period(text)


@pytest.mark.parametrize(("cause", "inner", "expected"), [
    # an empty node in a NodePool whose stabilization window is in effect: two qualifiers, then the window
    (BlockCause(Cause.EMPTY_BUT, inner=BlockCause(Cause.PAUSED, inner=BlockCause(Cause.STABILIZATION_WINDOW))),
     "stabilization-window", "window"),
    (BlockCause(Cause.EMPTY_BUT, inner=BlockCause(Cause.PDB_BLOCKS)), "pdb-blocks", "pdb"),
    (BlockCause(Cause.PAUSED, inner=BlockCause(Cause.HOLD)), "hold", "hold"),
    (BlockCause(Cause.BUDGET_ZERO), "", "budget"),
    # a qualifier with nothing inside is its own inner
    (BlockCause(Cause.EMPTY_BUT, inner=BlockCause(Cause.PAUSED)), "paused", "other"),
])
def test_a_verdicts_category_is_read_through_every_qualifying_cause(cause: BlockCause, inner: str,
                                                                     expected: str) -> None:
    assert deciding_inner(cause) == inner
    assert category(str(cause.kind), deciding_inner(cause)) == expected
