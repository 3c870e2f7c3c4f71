"""ebb.core.causes and the events built from them: every kind of cause renders to its sentence, and the Event
of a node the pass leaves alone (``Unconsolidatable``, ``DisruptionBlocked`` or none) follows from the kind
of its cause alone, never from the sentence."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ebb.core import events as ev
from ebb.core.causes import NOTHING_TO_DO, BlockCause, Cause, Stale, StaleCause, render, short_of
from ebb.core.model import Hold

T = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
T2 = datetime(2026, 11, 23, 19, 0, tzinfo=UTC)
HOLD = Hold("freeze", "nodePool", "default", T2, "incident")
BUDGET_USED_UP = BlockCause(Cause.BUDGET_USED_UP, {"reason": "Underutilized", "pool": "default",
                                                   "source": "NodePool default",
                                                   "detail": "budget nodes=1 of NodePool default allows 1 of 3 nodes"})
BUDGET_ZERO = BlockCause(Cause.BUDGET_ZERO, {"reason": "Empty", "detail": "budget nodes=0 ..."})
DEMAND = BlockCause(Cause.DEMAND_WINDOW, {"source": "DisruptionPolicy default", "window": 3600.0,
                                          "action": "deleting it", "peak": "cpu 3000m, memory 4.00Gi",
                                          "after": "cpu 2000m, memory 8.00Gi"})
NOT_STABLE = BlockCause(Cause.NOT_STABLE, {"after": 300.0, "last": T, "ready": T2, "whose": ""})
DO_NOT_CONSOLIDATE = BlockCause(Cause.NODE_DO_NOT_CONSOLIDATE)
NO_CHEAPER = BlockCause(Cause.NO_CHEAPER_REPLACEMENT, {"needed": 0.096, "price": 0.0832})
PODS_FIT_NOWHERE = BlockCause(Cause.PODS_FIT_NOWHERE, {"pod": "default/web", "why": "no room"})
U, B = ev.UNCONSOLIDATABLE, ev.DISRUPTION_BLOCKED

# (cause, its sentence, its Event)
CAUSES: list[tuple[BlockCause, str, str | None]] = [
    (BlockCause(Cause.NOT_OWNED), "it is not owned by a NodePool (no karpenter.sh/nodepool label)", None),
    (BlockCause(Cause.NODEPOOL_MISSING, {"pool": "gone"}), "its NodePool gone is not in the snapshot", None),
    (BlockCause(Cause.NODEPOOL_UNMANAGED, {"pool": "bare"}),
     "its NodePool bare has no spec.template.spec.nodeClassRef, which Karpenter's CRD requires: Karpenter manages no "
     "NodePool without one", None),
    (BlockCause(Cause.DELETING), "it is already being deleted", None),
    (BlockCause(Cause.BEING_DISRUPTED, {"taint": "karpenter.sh/disrupted"}),
     "it is already being disrupted (tainted karpenter.sh/disrupted)", None),
    (BlockCause(Cause.BEING_DISRUPTED, {"taint": "ebb.sh/disrupted"}),
     "it is already being disrupted (tainted ebb.sh/disrupted)", None),
    (BlockCause(Cause.LAUNCHED_FOR, {"decision": "dec-1"}),
     "it was launched as a replacement for decision dec-1, which is still being carried out", None),
    (BlockCause(Cause.NO_NODECLAIM),
     "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim", None),
    (BlockCause(Cause.KARPENTER_CONFLICT, {"pool": "default", "conflict": "NodePool default still lets Karpenter "
                                                                          "disrupt its nodes"}),
     "ebb disrupts no node of NodePool default until this conflict is fixed: NodePool default still lets Karpenter "
     "disrupt its nodes", B),
    (BlockCause(Cause.NOT_INITIALIZED), "it is not initialized yet (karpenter.sh/initialized is not true)", B),
    (BlockCause(Cause.NODE_DO_NOT_DISRUPT), "the node is annotated karpenter.sh/do-not-disrupt=true", B),
    (BlockCause(Cause.POD_DO_NOT_DISRUPT, {"pod": "default/p", "annotation": "karpenter.sh/do-not-disrupt",
                                           "value": "true"}),
     "pod default/p has karpenter.sh/do-not-disrupt=true", B),
    (BlockCause(Cause.POD_PROTECTED_UNTIL, {"pod": "default/p", "annotation": "karpenter.sh/do-not-disrupt",
                                            "value": "1h", "until": T2}),
     "pod default/p has karpenter.sh/do-not-disrupt=1h (protected until 2026-11-23T19:00:00Z)", B),
    (BlockCause(Cause.POD_TWO_PDBS, {"pod": "default/p", "pdbs": ("default/a", "default/b")}),
     "pod default/p is covered by two PDBs (default/a and default/b); the Eviction API refuses to evict it", B),
    (BlockCause(Cause.PDB_BLOCKS, {"pdb": "default/a", "healthy": 1, "expected": 2}),
     "pdb default/a prevents pod evictions (0 disruptions allowed: 1 of 2 pods healthy)", B),
    (BlockCause(Cause.NODEPOOL_DO_NOT_DISRUPT, {"pool": "default"}),
     "NodePool default's template annotates its nodes karpenter.sh/do-not-disrupt=true", B),
    (DO_NOT_CONSOLIDATE, "the node is annotated karpenter.sh/do-not-consolidate=true", U),
    (BlockCause(Cause.CONSOLIDATION_POLICY, {"pool": "default", "source": "NodePool default", "policy": "WhenEmpty"}),
     "NodePool default's consolidationPolicy is WhenEmpty: only empty nodes are consolidated", U),
    (BlockCause(Cause.CONSOLIDATION_POLICY, {"pool": "default", "source": "DisruptionPolicy default",
                                             "policy": "WhenEmpty"}),
     "DisruptionPolicy default's consolidationPolicy is WhenEmpty: only empty nodes are consolidated", U),
    (BlockCause(Cause.CONSOLIDATE_AFTER_NEVER, {"pool": "default", "source": "NodePool default"}),
     "NodePool default's consolidateAfter is Never", U),
    (BlockCause(Cause.CONSOLIDATE_AFTER_NEVER, {"pool": "default", "source": "DisruptionPolicy default"}),
     "DisruptionPolicy default's consolidateAfter is Never", U),
    (BlockCause(Cause.PAUSED, inner=BlockCause(Cause.HOLD, {"hold": HOLD})),
     "consolidation is paused by hold freeze (nodePool default) until 2026-11-23T19:00:00Z: incident", B),
    (BlockCause(Cause.HOLD, {"hold": Hold("h", "cluster", None, None)}), "hold h (cluster)", B),
    (BlockCause(Cause.PRICE_IMPROVEMENT_TOO_SMALL, {"source": "DisruptionPolicy batch", "percent": 30,
                                                    "launched": "cheapest replacement costs", "best": 0.17,
                                                    "price": 0.192, "improvement": 11.458}),
     "DisruptionPolicy batch's minimumPriceImprovementPercent (30%) is not met: the cheapest replacement costs "
     "$0.1700/h against $0.1920/h, 11.5% less", U),
    (BlockCause(Cause.STABILIZATION_WINDOW, {"pool": "default", "source": "NodePool default", "window": 3600,
                                             "newest": "n9", "age": 300.0, "resume": T2}),
     "NodePool default's stabilizationWindow (1h), in effect since node n9 launched 5m ago; Empty and Underutilized "
     "disruptions resume at 2026-11-23T19:00:00Z", B),
    (BlockCause(Cause.STABILIZATION_WINDOW, {"pool": "default", "source": "NodePool default", "window": 600,
                                             "newest": "n9", "age": -300.0, "resume": T2}),  # created after now
     "NodePool default's stabilizationWindow (10m), in effect since node n9 launched 5m after now; Empty and "
     "Underutilized disruptions resume at 2026-11-23T19:00:00Z", B),
    (BlockCause(Cause.STABILIZATION_WINDOW, {"pool": "default", "source": "DisruptionPolicy default",
                                             "window": 3600, "newest": "n9", "age": 300.0, "resume": T2}),
     "DisruptionPolicy default's stabilizationWindow (1h), in effect since node n9 launched 5m ago; Empty and "
     "Underutilized disruptions resume at 2026-11-23T19:00:00Z", B),
    (DEMAND, "DisruptionPolicy default's demandWindow (1h) keeps capacity for what its pods requested at their peak "
             "within it (cpu 3000m, memory 4.00Gi); deleting it would leave its nodes cpu 2000m, memory 8.00Gi", B),
    (NOT_STABLE, "consolidateAfter (5m) has not passed since the node's pods last changed at 2026-11-23T18:30:00Z; "
                 "it becomes consolidatable at 2026-11-23T19:00:00Z", U),
    (BlockCause(Cause.NOT_STABLE, {"after": 300.0, "last": T, "ready": T2, "whose": "DisruptionPolicy default's "}),
     "DisruptionPolicy default's consolidateAfter (5m) has not passed since the node's pods last changed at "
     "2026-11-23T18:30:00Z; it becomes consolidatable at 2026-11-23T19:00:00Z", U),
    (BlockCause(Cause.BUDGET_INVALID, {"detail": "budget 0 of NodePool default is invalid (...)"}),
     "budget 0 of NodePool default is invalid (...)", B),
    (BUDGET_ZERO, "the Empty budget allows 0 disruptions now: budget nodes=0 ...", B),
    (BUDGET_USED_UP, "the Underutilized budget of NodePool default is used up by other disruptions this pass "
                     "(budget nodes=1 of NodePool default allows 1 of 3 nodes)", B),
    (BlockCause(Cause.BUDGET_USED_BY_CONSOLIDATIONS, {"reason": "Underutilized", "pool": "default",
                                                      "source": "NodePool default"}),
     "the Underutilized budget of NodePool default is used up by the other consolidations of this pass; it is "
     "considered again next pass", B),
    (BlockCause(Cause.BUDGET_FOR_WAITING_COMMANDS, {
        "reason": "Underutilized", "pool": "default", "source": "NodePool default", "acted": "expiration",
        "by": ("multi-node-consolidation", "single-node-consolidation"),
        "detail": "budget nodes=1 of NodePool default allows 1 of 3 nodes"}),
     "the Underutilized budget of NodePool default would be used up by the commands of multi-node-consolidation and "
     "single-node-consolidation, which wait because expiration acted this pass and only one method acts per pass "
     "(budget nodes=1 of NodePool default allows 1 of 3 nodes)", B),
    (BlockCause(Cause.BUDGET_USED_BY_CONSOLIDATIONS, {"reason": "Underutilized", "pool": "default",
                                                      "source": "DisruptionPolicy default"}),
     "the Underutilized budget of DisruptionPolicy default is used up by the other consolidations of this pass; "
     "it is considered again next pass", B),
    # emptiness: its inner cause decides
    (BlockCause(Cause.EMPTY_BUT, inner=DO_NOT_CONSOLIDATE),
     "empty, but the node is annotated karpenter.sh/do-not-consolidate=true", U),
    (BlockCause(Cause.EMPTY_BUT, inner=BUDGET_ZERO), "empty, but the Empty budget allows 0 disruptions now: "
                                                     "budget nodes=0 ...", B),
    (BlockCause(Cause.EMPTY_BUT, inner=NOT_STABLE), f"empty, but {NOT_STABLE.text}", U),
    (BlockCause(Cause.DUE_BUT, {"due": "expired: launched ..."}, BUDGET_ZERO),
     "expired: launched ..., but the Empty budget allows 0 disruptions now: budget nodes=0 ...", B),
    (BlockCause(Cause.DUE_BUT, {"due": "drifted: ..."}, BlockCause(Cause.POD_NOWHERE_TO_GO, {
        "pod": "default/web", "why": "no node has room"})),
     "drifted: ..., but pod default/web would have nowhere to go: no node has room", B),
    (BlockCause(Cause.POD_NOWHERE_TO_GO, {"pod": "default/web", "why": "no room"}),
     "pod default/web would have nowhere to go: no room", B),
    (PODS_FIT_NOWHERE, "its pods do not fit on the other nodes (pod default/web: no room), and not on one new node "
                       "either", U),
    (BlockCause(Cause.NO_REPLACEMENT, {"pod": "default/web", "why": "no room"}, NO_CHEAPER),
     "its pods do not fit on the other nodes (pod default/web: no room), and can't replace with a cheaper node: "
     "its pods need a node costing $0.0960/h or more, and it costs $0.0832/h", U),
    (NO_CHEAPER, "can't replace with a cheaper node: its pods need a node costing $0.0960/h or more, and it costs "
                 "$0.0832/h", U),
    (BlockCause(Cause.ONLY_SAME_TYPE_CHEAPER, {"type": "m5.2xlarge", "cheapest": 0.384, "price": 0.48, "node": "c"}),
     "can't replace with a cheaper node of another type: its pods fit type m5.2xlarge ($0.3840/h against "
     "$0.4800/h), the same type as c, which it would remove: keeping c and deleting the others does as well, so the "
     "option is left out, as Karpenter leaves it out", U),
    (BlockCause(Cause.STATIC_NODEPOOL, {"pool": "fixed", "replicas": 3}),
     "its NodePool fixed is static (spec.replicas 3): its nodes are not consolidated (Karpenter removes those over "
     "its replicas)", U),
    (BlockCause(Cause.NODECLAIM_NOT_INITIALIZED, {"claim": "default-abc12"}),
     "its NodeClaim default-abc12 is not Initialized yet: it is not consolidated until it is, as Karpenter's "
     "Consolidatable condition waits for it", U),
    (BlockCause(Cause.PRICE_UNKNOWN, {"label": "topology.kubernetes.io/zone"}),
     "it has no topology.kubernetes.io/zone label, so its price is unknown and consolidation cannot compare it", U),
    (BlockCause(Cause.TYPE_NOT_IN_CATALOG, {"type": "x9.mystery"}),
     "its instance type x9.mystery is not in the catalog, so its price is unknown and consolidation does not take it, "
     "as Karpenter's does not (only emptiness may)", U),
    (BlockCause(Cause.NO_NODEPOOL_LAUNCHES, {"pools": "NodePool default is not Ready; NodePool old is being deleted"}),
     "no NodePool can launch a node now (NodePool default is not Ready; NodePool old is being deleted), so no move of "
     "pods is simulated, as Karpenter's scheduler finds no NodePool", U),
    (BlockCause(Cause.SPOT_TO_SPOT_DISABLED),
     "spot-to-spot consolidation is disabled: spot nodes whose replacement may be spot are only deleted, replaced by "
     "spot when enabled (--spot-to-spot or NodePool annotation ebb.sh/spot-to-spot-consolidation)", U),
    (BlockCause(Cause.AFFINITY_TARGET_OF_A_MOVE, {"pod": "default/dep-0", "to": "a new node",
                                                  "target": "default/part-0"}),
     "pod default/dep-0, which a command of this pass moves to a new node, requires pod affinity to its pod "
     "default/part-0; moving both at once could leave default/dep-0 with nowhere to go, so it is considered again "
     "next pass", U),
    (BlockCause(Cause.NO_SPOT_OFFERING),
     "spot nodes whose replacement may be spot are replaced by spot only, and no spot offering holds their pods", U),
    (BlockCause(Cause.SPOT_TO_SPOT_TOO_FEW_TYPES, {"minimum": 15, "found": 3}),
     "spot-to-spot replacement needs at least 15 cheaper instance types to choose from; only 3 qualify", U),
    (BlockCause(Cause.NOMINATED, {"pod": "default/moving", "why": "no remaining node has room for its requests"}),
     "it is nominated for pod default/moving, pending or leaving a node being disrupted, which has nowhere else "
     "to go (no remaining node has room for its requests)", B),
    (BlockCause(Cause.STATIC_SCALING_DOWN, {"pool": "fixed", "count": 3, "replicas": 2}),
     "its NodePool fixed is static and runs more nodes (3) than its spec.replicas 2: its nodes are replaced one for "
     "one once Karpenter has scaled it down", B),
    (BlockCause(Cause.STATIC_AT_LIMIT, {"pool": "fixed", "limit": 5}),
     "its NodePool fixed is static and a replacement launched before it goes would pass its limits.nodes (5)", B),
    (BlockCause(Cause.STATIC_NOTHING_OFFERED, {"pool": "fixed"}),
     "its NodePool fixed is static and no instance type it allows is offered", B),
    (BlockCause(Cause.BALANCED_SCORE, {"source": "NodePool general", "action": "this replace", "pool": "general",
                                       "savings_percent": 4.1667, "disruption_percent": 10.0, "score": 0.41667,
                                       "threshold": 0.5, "k": 2}),
     "NodePool general's consolidationPolicy is Balanced and this replace is not worth its disruption: it would save "
     "4.2% of NodePool general's cost for 10.0% of its disruption cost (score 0.42, below 0.50, k=2)", U),
    (BlockCause(Cause.BALANCED_UNMEASURED, {"source": "NodePool general", "action": "deleting it", "pool": "general",
                                            "nothing": "cost nothing", "threshold": 0.5, "k": 2}),
     "NodePool general's consolidationPolicy is Balanced and deleting it scores 0: NodePool general's nodes cost "
     "nothing, so there is nothing to measure it against (score 0.00, below 0.50, k=2)", U),
    (BlockCause(Cause.EVICTIONS_NOT_WORTH, {"action": "this replace", "evictions": "40 pods", "pods": 40,
                                            "weighted": "", "savings": 0.05, "per_pod": 0.00125,
                                            "per": "per evicted pod",
                                            "source": ("DisruptionPolicy general",), "price": 0.01, "asked": 0.4}),
     "this replace would evict 40 pods to save $0.0500/h ($0.0013/h per evicted pod); DisruptionPolicy general's "
     "minimumSavingPerEvictedPod asks at least $0.0100/h per evicted pod, $0.4000/h for these", U),
    (BlockCause(Cause.MIN_VALUES_NOT_MET, {"labels": "[node.kubernetes.io/instance-type]",
                                           "options": "cheaper instance types",
                                           "found": "2 value(s) of node.kubernetes.io/instance-type where minValues "
                                                    "is 3"}),
     "minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type]): the cheaper "
     "instance types offer only 2 value(s) of node.kubernetes.io/instance-type where minValues is 3", U),
    (BlockCause(Cause.ANOTHER_METHOD_ACTED, {"method": "emptiness", "action": "delete", "acted": "drift"}),
     "it could be disrupted by emptiness (delete), but drift acted this pass and only one method acts per pass; "
     "it is considered again next pass", None),
    (BlockCause(Cause.BUDGET_WAIT, {"action": "replace", "savings": 0.04}, BUDGET_USED_UP),
     f"{BUDGET_USED_UP.text}; on its own it could be consolidated (replace, saving $0.0400/h)", B),
    (BlockCause(Cause.BUDGET_WAIT_UNCONSOLIDATABLE, {"alone": PODS_FIT_NOWHERE}, BUDGET_USED_UP),
     f"{PODS_FIT_NOWHERE.text} (and {BUDGET_USED_UP.text})", B),
    (NOTHING_TO_DO, "nothing to do: it is not expired, drifted or empty, and no consolidation makes the cluster "
                    "cheaper", U),
    # a merge refused, after single-node's verdict: the Event is the verdict's
    (BlockCause(Cause.NO_MERGE, {"size": 2, "into": "at most one new node", "merge": NO_CHEAPER}, PODS_FIT_NOWHERE),
     f"{PODS_FIT_NOWHERE.text}; a merge of the first 2 candidates, it included, into at most one new node was "
     f"considered too and refused: {NO_CHEAPER.text}", U),
    (BlockCause(Cause.ALONE_SAVES_MORE, {"alone": 0.0416, "savings": 0.0116}),
     "consolidated one at a time, its nodes would save $0.0416/h, no less than its $0.0116/h", U),
    (BlockCause(Cause.NO_MERGE, {"size": 3, "into": "at most 2 new nodes", "merge": PODS_FIT_NOWHERE}, DEMAND),
     f"{DEMAND.text}; a merge of the first 3 candidates, it included, into at most 2 new nodes was considered too "
     f"and refused: {PODS_FIT_NOWHERE.text}", B),
]


@pytest.mark.parametrize(("cause", "sentence", "event"), [pytest.param(*c, id=c[0].kind) for c in CAUSES])
def test_a_cause_renders_to_its_sentence_and_classifies_by_its_kind(cause: BlockCause, sentence: str,
                                                                      event: str | None) -> None:
    assert cause.text == sentence == str(cause) == render(cause)
    assert ev.classify(cause) == event


def test_every_kind_of_cause_has_a_sentence_an_event_and_a_case() -> None:
    assert {cause.kind for cause, _, _ in CAUSES} == set(Cause)
    # empty, but ...; a merge refused after a verdict: its inner cause's
    assert set(ev.EVENT_OF_CAUSE) == set(Cause) - {Cause.EMPTY_BUT, Cause.NO_MERGE}


MISLEADING: list[tuple[BlockCause, str, str]] = [
    (BlockCause(Cause.PAUSED, inner=BlockCause(Cause.HOLD, {"hold": Hold("h", "cluster", None, None,
                                                                          "until the drift acted this pass")})),
     "acted this pass", B),
    (BlockCause(Cause.CONSOLIDATE_AFTER_NEVER, {"pool": "budget", "source": "NodePool budget"}), "budget", U),
    (BlockCause(Cause.PODS_FIT_NOWHERE, {"pod": "default/budget-api", "why": "no room"}), "budget", U),
]


@pytest.mark.parametrize(("cause", "words", "event"), MISLEADING)
def test_the_event_does_not_depend_on_the_words(cause: BlockCause, words: str, event: str) -> None:
    """The sentence was once searched for "acted this pass" and "budget": a hold's reason, a NodePool or a
    pod named so, no longer change the Event."""
    assert words in cause.text
    assert ev.classify(cause) == event


@pytest.mark.parametrize(("cause", "waits"), [
    (BUDGET_USED_UP, True), (BUDGET_ZERO, True), (BlockCause(Cause.BUDGET_INVALID, {"detail": "x"}), True),
    (BlockCause(Cause.BUDGET_USED_BY_CONSOLIDATIONS, {"reason": "Underutilized", "pool": "p",
                                                      "source": "NodePool p"}), True),
    (BlockCause(Cause.BUDGET_FOR_WAITING_COMMANDS, {"reason": "Empty", "pool": "p", "source": "NodePool p",
                                                    "by": ("emptiness",), "acted": "drift", "detail": "x"}), True),
    (BlockCause(Cause.EMPTY_BUT, inner=BUDGET_ZERO), False),  # emptiness is not told what consolidation would do
    (BlockCause(Cause.DUE_BUT, {"due": "expired"}, BUDGET_ZERO), False),
    (NOT_STABLE, False),
])
def test_only_a_budget_cause_waits_for_the_budget(cause: BlockCause, waits: bool) -> None:
    assert cause.waits_for_budget is waits


CHANGED = BlockCause(Cause.NOT_STABLE, {"after": 60, "last": T, "ready": T2, "whose": ""})
STALE: list[tuple[StaleCause, str]] = [
    (StaleCause(Stale.NODE_GONE, {"node": "n1"}), "node n1 is gone"),
    (StaleCause(Stale.NO_LONGER_CANDIDATE, {"node": "n1"}, BlockCause(Cause.DELETING)),
     "node n1 is no longer a candidate: it is already being deleted"),
    (StaleCause(Stale.NO_LONGER_EXPIRED, {"node": "n1"}), "node n1 is no longer expired"),
    (StaleCause(Stale.NO_LONGER_DRIFTED, {"node": "n1"}), "node n1 is no longer drifted"),
    (StaleCause(Stale.CONSOLIDATION_PAUSED, {"node": "n1"}, BlockCause(Cause.HOLD, {"hold": HOLD})),
     "consolidation of node n1 is paused by hold freeze (nodePool default) until 2026-11-23T19:00:00Z: incident"),
    (StaleCause(Stale.CONSOLIDATE_AFTER_NOW_NEVER, {"pool": "default", "source": "NodePool default"}),
     "NodePool default's consolidateAfter is now Never"),
    (StaleCause(Stale.CONSOLIDATE_AFTER_NOW_NEVER, {"pool": "default", "source": "DisruptionPolicy default"}),
     "DisruptionPolicy default's consolidateAfter is now Never"),
    (StaleCause(Stale.NODE_CHANGED, {"node": "n1"}, CHANGED), f"node n1 changed: {CHANGED.text}"),
    (StaleCause(Stale.NO_LONGER_EMPTY, {"node": "n1", "arrived": 2}), "node n1 is no longer empty: 2 pods arrived"),
    (StaleCause(Stale.BUDGET_SHRANK, {"reason": "Empty", "pool": "default", "source": "NodePool default",
                                      "allowed": 0, "needed": 2}),
     "the Empty budget of NodePool default now allows 0 disruptions, the command needs 2"),
    (StaleCause(Stale.BUDGET_SHRANK, {"reason": "Empty", "pool": "default", "source": "DisruptionPolicy default",
                                      "allowed": 0, "needed": 2}),
     "the Empty budget of DisruptionPolicy default now allows 0 disruptions, the command needs 2"),
    (StaleCause(Stale.BELOW_DEMAND_PEAK, {}, DEMAND),
     "DisruptionPolicy default's demandWindow (1h) keeps capacity for what its pods requested at their peak within it "
     "(cpu 3000m, memory 4.00Gi); deleting it would leave its nodes cpu 2000m, memory 8.00Gi"),
    (StaleCause(Stale.EVICTIONS_NOW_NOT_WORTH, {}, BlockCause(Cause.EVICTIONS_NOT_WORTH, {
        "action": "this delete", "evictions": "12 pods", "pods": 12, "weighted": "", "savings": 0.096,
        "per_pod": 0.008, "per": "per evicted pod", "source": ("DisruptionPolicy default",), "price": 0.01,
        "asked": 0.12})),
     "its nodes have more pods now: this delete would evict 12 pods to save $0.0960/h ($0.0080/h per evicted pod); "
     "DisruptionPolicy default's minimumSavingPerEvictedPod asks at least $0.0100/h per evicted pod, $0.1200/h for "
     "these"),
    (StaleCause(Stale.POD_NO_LONGER_FITS, {"pod": "default/web", "why": "no room"}),
     "pod default/web would no longer fit: no room"),
    (StaleCause(Stale.REPLACEMENT_DEARER, {"price": 0.096, "approved": 0.0416}),
     "the replacement now costs $0.0960/h, more than the $0.0416/h the command was approved for"),
    (StaleCause(Stale.REPLACEMENT_NOT_NEEDED, {"needed": 1, "approved": 2}),
     "its pods now need 1 new node, fewer than the 2 new nodes the command would launch: a cheaper command is likely "
     "now"),
    (StaleCause(Stale.REPLACEMENT_CHANGED, {"types": ("c5.large", "t3.large")}),
     "its pods now need another replacement: the approved one may launch as c5.large and t3.large, which a new "
     "simulation no longer places them on"),
    (StaleCause(Stale.VIEW_BEHIND, {"node": "n1", "count": 2, "pods": ("default/a", "team/b")}),
     "the planner's view is behind the apiserver: 2 pods run on node n1 that it has not seen there yet "
     "(default/a and team/b)"),
    (StaleCause(Stale.VIEW_UNCHECKED, {"error": "TimeoutError()"}),
     "the apiserver could not be asked for the pods on the command's nodes: TimeoutError()"),
]


@pytest.mark.parametrize(("stale", "sentence"), [pytest.param(*c, id=c[0].kind) for c in STALE])
def test_a_stale_cause_renders_to_its_sentence(stale: StaleCause, sentence: str) -> None:
    assert stale.text == sentence == str(stale)


def test_every_kind_of_stale_cause_has_a_case() -> None:
    assert {stale.kind for stale, _ in STALE} == set(Stale)


# a figure refused for falling short of its threshold never prints as reaching it: more decimals when needed
SHORT_OF: list[tuple[BlockCause, str]] = [
    (BlockCause(Cause.PRICE_IMPROVEMENT_TOO_SMALL, {"source": "DisruptionPolicy a", "percent": 30,
                                                    "launched": "cheapest replacement costs", "best": 0.7001,
                                                    "price": 1.0, "improvement": 29.99}),
     "$0.7001/h against $1.0000/h, 29.99% less"),
    (BlockCause(Cause.PRICE_IMPROVEMENT_TOO_SMALL, {"source": "DisruptionPolicy a", "percent": 30,
                                                    "launched": "cheapest replacement costs", "best": 0.71,
                                                    "price": 1.0, "improvement": 29.0}),
     "$0.7100/h against $1.0000/h, 29.0% less"),  # one decimal when it tells them apart
    (BlockCause(Cause.BALANCED_SCORE, {"source": "NodePool a", "action": "deleting it", "pool": "a",
                                       "savings_percent": 4.995, "disruption_percent": 10.0, "score": 0.4995,
                                       "threshold": 0.5, "k": 2}),
     "(score 0.499, below 0.50, k=2)"),
    (BlockCause(Cause.EVICTIONS_NOT_WORTH, {"action": "this delete", "evictions": "1 pod", "pods": 1,
                                            "weighted": "", "savings": 0.009999, "per_pod": 0.009999,
                                            "per": "per evicted pod",
                                            "source": ("DisruptionPolicy a",), "price": 0.01, "asked": 0.01}),
     "to save $0.009999/h ($0.009999/h per evicted pod); DisruptionPolicy a's minimumSavingPerEvictedPod asks at "
     "least $0.0100/h per evicted pod, $0.0100/h for these"),
]


@pytest.mark.parametrize(("cause", "words"), SHORT_OF)
def test_a_refused_figure_never_reads_as_meeting_its_threshold(cause: BlockCause, words: str) -> None:
    assert words in cause.text


@pytest.mark.parametrize(("value", "bound", "decimals", "written"), [
    (29.99, 30, 1, "29.99"),
    (11.458, 30, 1, "11.5"),  # rounded up, still below
    (0.41667, 0.5, 2, "0.42"),
    (0.49999999999999994, 0.5, 2, "0.4999999999"),  # past the decimals it may add: rounded down
    (30.0, 30, 1, "30.0"),  # not short of it: as asked
])
def test_short_of(value: float, bound: float, decimals: int, written: str) -> None:
    assert short_of(value, bound, decimals) == written
