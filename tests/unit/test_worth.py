"""ebb.core.worth: a consolidation is made only when it saves at least ``minimumSavingPerEvictedPod`` per pod it
evicts (each pod weighted by its priority and pod-deletion-cost, as Karpenter's eviction cost), in single- and
multi-node consolidation, delete and replace; a refused move's node says why, an accepted command's explanation
says what it evicts against what it saves; 0 (a NodePool's own default) is Karpenter's rule."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core import worth
from ebb.core.causes import Cause, Stale
from ebb.core.cluster import ClusterView
from ebb.core.model import DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD
from ebb.core.validation import validate
from tests.kit.builders import NOW, blocked_of, disruption_policy, node, nodepool, plan, plan_dict, pod, snapshot

M5_2XLARGE, M5_LARGE, T3_MEDIUM = 0.384, 0.096, 0.0416
#: a replace of an m5.2xlarge by a t3.medium saves this much
REPLACE_SAVES = M5_2XLARGE - T3_MEDIUM
PRIORITY_FOUR = 4 * 2**25  # an eviction cost of 1 + 4
DELETION_COST_MINUS_ONE = str(-(2**27))  # an eviction cost of 1 - 1: free to evict


def _policy(price: float | str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"budgets": [{"nodes": "100%"}]}
    if price is not None:
        spec["minimumSavingPerEvictedPod"] = price
    return disruption_policy(**spec)


def _big(pods: int, **pod_args: Any) -> list[dict[str, Any]]:
    """An m5.2xlarge alone with ``pods`` small pods: no delete, a replace by a t3.medium."""
    return [node("big", itype="m5.2xlarge"), *[pod(f"web-{i}", "big", **pod_args) for i in range(pods)]]


def _outcome(out: dict[str, Any]) -> tuple[str, tuple[str, ...]] | str:
    """(action, nodes) of the plan's one command, or "none"."""
    if out["commands"]:
        (command,) = out["commands"]
        return command["action"], tuple(command["nodes"])
    return "none"


SINGLE: list[tuple[str, list[Any], tuple[str, tuple[str, ...]] | str, str | None]] = [
    ("no price set: Karpenter's rule, any saving goes", [nodepool(), _policy(0), *_big(10)],
     ("replace", ("big",)), None),
    ("the saving pays for its 10 pods", [nodepool(), _policy(0.03), *_big(10)], ("replace", ("big",)), None),
    ("10 pods cost more than the replace saves", [nodepool(), _policy(0.05), *_big(10)], "none",
     f"this replace would evict 10 pods to save ${REPLACE_SAVES:.4f}/h (${REPLACE_SAVES / 10:.4f}/h per evicted "
     "pod); DisruptionPolicy default's minimumSavingPerEvictedPod asks at least $0.0500/h per evicted pod, "
     "$0.5000/h for these"),
    ("a quoted price reads the same", [nodepool(), _policy("0.05"), *_big(10)], "none",
     "DisruptionPolicy default's minimumSavingPerEvictedPod asks at least $0.0500/h"),
    ("plain pods are cheap enough", [nodepool(), _policy(0.02), *_big(4)], ("replace", ("big",)), None),
    ("high-priority pods count five times", [nodepool(), _policy(0.02), *_big(4, priority=PRIORITY_FOUR)], "none",
     f"this replace would evict 4 pods (counted as 20.00 by their priority and pod-deletion-cost) to save "
     f"${REPLACE_SAVES:.4f}/h (${REPLACE_SAVES / 20:.4f}/h per evicted pod as counted)"),
    ("pods their owner marked free to delete count nothing",
     [nodepool(), _policy(1), *_big(10, annotations={"controller.kubernetes.io/pod-deletion-cost":
                                                     DELETION_COST_MINUS_ONE})],
     ("replace", ("big",)), None),
    ("the NodePool's own spec.disruption may set it",
     [nodepool(disruption={"minimumSavingPerEvictedPod": 0.05}), *_big(10)], "none",
     "NodePool default's minimumSavingPerEvictedPod asks at least $0.0500/h per evicted pod, $0.5000/h"),
    ("a NodePool that sets none is judged by Karpenter's rule", [nodepool(), *_big(40)], ("replace", ("big",)), None),
]


@pytest.mark.parametrize(("case", "docs", "expected", "sentence"), SINGLE, ids=[c[0] for c in SINGLE])
def test_single_node_consolidation_weighs_evictions(case: str, docs: list[Any],
                                                    expected: tuple[str, tuple[str, ...]] | str,
                                                    sentence: str | None) -> None:
    out = plan_dict(*docs)
    assert _outcome(out) == expected
    if sentence is None:
        (command,) = out["commands"]
        assert f"to save ${command['savingsPerHour']:.4f}/h" in command["explanation"]
    else:
        assert sentence in blocked_of(out, "big")["reason"]


def _three_small(price: float) -> list[Any]:
    """Three m5.large nodes with one pod each, and a kept m5.xlarge with room for all three pods: multi-node
    consolidation deletes the three together when each one's $0.096/h pays for its pod."""
    return [nodepool(), _policy(price),
            node("keep", itype="m5.xlarge", annotations={"karpenter.sh/do-not-disrupt": "true"}),
            pod("base", "keep", cpu="1"),
            *[x for i in (1, 2, 3) for x in (node(f"n{i}"), pod(f"p{i}", f"n{i}"))]]


@pytest.mark.parametrize(("price", "deleted"), [(0, {"n1", "n2", "n3"}), (0.05, {"n1", "n2", "n3"}), (0.1, set())])
def test_multi_node_consolidation_takes_a_node_only_when_it_pays_for_its_pods(price: float,
                                                                            deleted: set[str]) -> None:
    out = plan_dict(*_three_small(price))
    assert {n for c in out["commands"] for n in c["nodes"]} == deleted
    if deleted:
        (command,) = out["commands"]
        assert command["method"] == "multi-node-consolidation"
        words = f"it evicts 3 pods to save ${3 * M5_LARGE:.4f}/h, ${M5_LARGE:.4f}/h per evicted pod"
        assert words in command["explanation"]
        assert ("minimumSavingPerEvictedPod" in command["explanation"]) == (price > 0)
    else:
        for name in ("n1", "n2", "n3"):
            # the node's own verdict first (a merge the search tried and refused may follow it)
            assert blocked_of(out, name)["reason"].startswith(
                f"this delete would evict 1 pod to save ${M5_LARGE:.4f}/h (${M5_LARGE:.4f}/h per evicted pod); "
                "DisruptionPolicy default's minimumSavingPerEvictedPod asks at least $0.1000/h per evicted pod, "
                "$0.1000/h for these")


#: the lowest pod-deletion-cost: Karpenter's eviction cost of such a pod is below 0, counted as 0
LEAST_COST = {"controller.kubernetes.io/pod-deletion-cost": "-2147483647"}
WORDS: list[tuple[str, list[Any], list[str], float, str]] = [
    ("no pods", [nodepool(), node("a")], ["a"], 0.096, "; it evicts no pods and saves $0.0960/h"),
    ("plain pods, no price", [nodepool(), node("a"), pod("x", "a"), pod("y", "a")], ["a"], 0.096,
     "; it evicts 2 pods to save $0.0960/h, $0.0480/h per evicted pod"),
    ("a priced NodePool is named", [nodepool(), _policy(0.01), node("a"), pod("x", "a")], ["a"], 0.096,
     "; it evicts 1 pod to save $0.0960/h, $0.0960/h per evicted pod (at least $0.0100/h asked by "
     "DisruptionPolicy default's minimumSavingPerEvictedPod)"),
    ("weighted pods", [nodepool(), node("a"), pod("x", "a", priority=PRIORITY_FOUR)], ["a"], 0.1,
     "; it evicts 1 pod (counted as 5.00 by their priority and pod-deletion-cost) to save $0.1000/h, "
     "$0.0200/h per evicted pod as counted"),
    # a priority just above the lowest weighs a pod at 3e-8: no per-pod figure of millions of dollars
    ("pods that weigh almost nothing", [nodepool(), node("a"), pod("x", "a", priority=-33554431)], ["a"], 0.096,
     "; it evicts 1 pod (counted as 0.00 by their priority and pod-deletion-cost) to save $0.0960/h, and no "
     "eviction weighs against it"),
    ("pods that weigh nothing", [nodepool(), _policy(1000.0), node("a"),
                                 *(pod(n, "a", annotations=LEAST_COST) for n in ("x", "y"))], ["a"], 0.15,
     "; it evicts 2 pods (counted as 0.00 by their priority and pod-deletion-cost) to save $0.1500/h, and no eviction "
     "weighs against it"),
    ("the price met exactly reads as met", [nodepool(), _policy(0.00055), node("a"), pod("x", "a")], ["a"],
     0.00055 - 1e-12, "; it evicts 1 pod to save $0.0005/h, $0.0006/h per evicted pod (at least $0.0006/h asked by "
     "DisruptionPolicy default's minimumSavingPerEvictedPod)"),
    ("DaemonSet pods are not evicted", [nodepool(), node("a"), pod("ds", "a", owner=("DaemonSet", "ds"))], ["a"],
     0.096, "; it evicts no pods and saves $0.0960/h"),
]


@pytest.mark.parametrize(("case", "docs", "nodes", "savings", "expected"), WORDS, ids=[c[0] for c in WORDS])
def test_an_accepted_commands_explanation_states_evictions_against_saving(case: str, docs: list[Any],
                                                                          nodes: list[str], savings: float,
                                                                          expected: str) -> None:
    view = ClusterView.build(snapshot(*docs), NOW)
    assert worth.words(view, nodes, savings) == expected


RULE: list[tuple[str, float, int, float, bool]] = [
    # (case, price, plain pods, savings, refused)
    ("no price", 0.0, 40, 0.05, False),
    ("40 pods for $0.05/h", 0.01, 40, 0.05, True),
    ("exactly what it asks", 0.01, 5, 0.05, False),
    ("just short of it", 0.01, 5, 0.0499, True),
    ("no pods: nothing to ask", 0.01, 0, 0.001, False),
]


@pytest.mark.parametrize(("case", "price", "pods", "savings", "refused"), RULE, ids=[c[0] for c in RULE])
def test_the_rule(case: str, price: float, pods: int, savings: float, refused: bool) -> None:
    view = ClusterView.build(snapshot(nodepool(), _policy(price), node("a"),
                                      *[pod(f"p{i}", "a") for i in range(pods)]), NOW)
    found = worth.evictions(view, ["a"])
    assert (found.pods, found.weight) == (pods, float(pods))
    assert found.asked == pytest.approx(price * pods)
    assert (worth.refusal(view, ["a"], savings, "this delete") is not None) == refused
    assert worth.net(view, ["a"], savings) == pytest.approx(savings - price * pods)


def test_a_move_across_nodepools_asks_each_ones_price_for_its_own_pods() -> None:
    view = ClusterView.build(snapshot(nodepool("a"), nodepool("b"), _policy(None) | {"metadata": {"name": "a"}},
                                      disruption_policy("b", minimumSavingPerEvictedPod=0.02),
                                      node("x", pool="a"), pod("p", "x"), pod("q", "x"),
                                      node("y", pool="b"), pod("r", "y")), NOW)
    found = worth.evictions(view, ["x", "y"])
    priced_a = [price for source, price in found.sources if source == "DisruptionPolicy a"]
    assert found.pods == 3
    assert found.asked == pytest.approx(2 * DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD + 0.02)
    assert priced_a == ([DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD] if DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD else [])


@pytest.mark.parametrize(("more_pods", "stale"), [(0, False), (5, True)])
def test_validation_rejects_a_command_whose_nodes_no_longer_pay_for_their_pods(more_pods: int, stale: bool) -> None:
    """Decided at $0.03/h a pod for 10 pods ($0.30/h asked, $0.3424/h saved); 5 more pods ask $0.45/h."""
    docs = [nodepool(), _policy(0.03), *_big(10)]
    (command,) = plan(*docs).first.commands
    later = snapshot(*docs, *[pod(f"late-{i}", "big") for i in range(more_pods)])
    found = validate(command, later, NOW)
    if not stale:
        assert found is None
        return
    assert found is not None and found.kind is Stale.EVICTIONS_NOW_NOT_WORTH
    assert found.inner is not None and found.inner.kind is Cause.EVICTIONS_NOT_WORTH
    assert found.text.startswith("its nodes have more pods now: this replace would evict 15 pods to save $0.3424/h")
