"""A topology spread or pod affinity term without a ``labelSelector`` selects no pod.

``metav1.LabelSelectorAsSelector(nil)`` is ``labels.Nothing()`` (kube-scheduler; Karpenter's topology groups match
no pod they place by it, though they count every existing pod of the namespace: a difference, docs/decisions.md),
where an empty selector, ``{}``, selects every pod. Read as "every pod", a hostname spread without a selector kept two
one-pod nodes apart that nothing keeps apart, and an existing pod's anti-affinity without a selector kept every pod
off its node.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.model import SELECTS_NOTHING
from tests.kit.builders import node, nodepool, plan_dict, pod, snapshot

HOSTNAME = "kubernetes.io/hostname"
KEEP = {"karpenter.sh/do-not-disrupt": "true"}


def _spread(selector: dict[str, Any] | None) -> list[dict[str, Any]]:
    spread: dict[str, Any] = {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule"}
    if selector is not None:
        spread["labelSelector"] = selector
    return [spread]


def test_a_missing_selector_is_read_as_selecting_nothing_and_an_empty_one_as_everything() -> None:
    snap = snapshot(nodepool(), node("a"), pod("none", "a", spread=_spread(None)), pod("all", "a", spread=_spread({})))
    by_name = {p.name: p for p in snap.pods}
    assert by_name["none"].spec.spread[0].selector == SELECTS_NOTHING
    assert by_name["all"].spec.spread[0].selector.match_labels == ()
    assert by_name["all"].spec.spread[0].selector.match_expressions == ()


@pytest.mark.parametrize(("selector", "merged"), [(None, True), ({}, False), ({"matchLabels": {"app": "w"}}, False)])
def test_a_hostname_spread_without_a_selector_keeps_no_pods_apart(selector: dict[str, Any] | None,
                                                                   merged: bool) -> None:
    # two one-pod t3.medium nodes: with a spread that selects the pods, each pod keeps its own host
    docs = [nodepool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
            pod("w-0", "a", labels={"app": "w"}, spread=_spread(selector)),
            pod("w-1", "b", labels={"app": "w"}, spread=_spread(selector))]
    out = plan_dict(*docs)
    assert bool(out["commands"]) is merged, out["commands"]


def test_an_existing_pods_anti_affinity_without_a_selector_keeps_no_pod_off_its_node() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": HOSTNAME}]}}
    docs = [nodepool(), node("e1", annotations=KEEP), pod("guard", "e1", affinity=anti),
            node("n1", itype="t3.medium"), pod("p", "n1")]
    out = plan_dict(*docs)
    assert [(c["nodes"], c["action"]) for c in out["commands"]] == [(["n1"], "delete")]
