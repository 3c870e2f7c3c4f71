"""A topology spread's ``matchLabelKeys`` narrows its selector to the pod's own values of those keys.

kube-scheduler and Karpenter's topology (``newForTopologies``) add ``key In (the pod's value)`` to the spread's
selector for every key the pod has a label of, so a Deployment's spread with ``matchLabelKeys: [pod-template-hash]``
counts the pods of its own revision only. Read without it, a rollout's two revisions count as one: a move that
stacks one revision in one zone passes, and a node whose pods' own revision is balanced is kept for the other's.
"""

from __future__ import annotations

from typing import Any

from ebb.core.model import Requirement
from tests.kit.builders import node, nodepool, plan_dict, pod, snapshot

ZONE = "topology.kubernetes.io/zone"
KEEP = {"karpenter.sh/do-not-disrupt": "true"}


def _spread(*keys: str) -> list[dict[str, Any]]:
    return [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "w"}}, "matchLabelKeys": list(keys)}]


def _w(name: str, on: str, revision: str, *keys: str) -> dict[str, Any]:
    return pod(name, on, cpu="1200m", memory="1Gi", labels={"app": "w", "pod-template-hash": revision},
               spread=_spread(*keys))


def test_the_selector_gains_the_pods_own_values_and_skips_keys_it_has_no_label_of() -> None:
    snap = snapshot(nodepool(), node("a"), _w("w-1", "a", "h1", "pod-template-hash", "no-such-label"))
    [spread] = snap.pods[0].spec.spread
    assert spread.selector.match_labels == (("app", "w"),)
    assert spread.selector.match_expressions == (Requirement("pod-template-hash", "In", ("h1",)),)


def _rollout(*keys: str) -> list[dict[str, Any]]:
    # revision h1: one pod in zone a on the small node, one on A2 (zone a); revision h2: three in zone b, on B2 (full
    # for another 1200m pod), both kept (only na1 is in question). Moving v1a onto A2 leaves h1 at a=2, b=0.
    return [nodepool(requirements=[{"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}],
                     disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                 "budgets": [{"nodes": "100%"}]}),
            node("na1", itype="t3.medium"), node("A2", itype="m5.xlarge", annotations=KEEP),
            node("B2", itype="m5.xlarge", zone="us-east-1b", annotations=KEEP),
            _w("v1a", "na1", "h1", *keys), _w("v1b", "A2", "h1", *keys),
            _w("v2a", "B2", "h2", *keys), _w("v2b", "B2", "h2", *keys), _w("v2c", "B2", "h2", *keys)]


def test_a_move_that_would_stack_one_revision_in_one_zone_is_refused() -> None:
    # v1a may not join v1b in zone a: it goes to a new node in zone b
    [command] = plan_dict(*_rollout("pod-template-hash"))["commands"]
    assert (command["nodes"], command["action"]) == (["na1"], "replace")
    assert [r["zones"] for r in command["replacements"]] == [["us-east-1b"]]
    # the control: without matchLabelKeys the five pods are one group (a=2, b=3) and the small node is deleted
    [command] = plan_dict(*_rollout())["commands"]
    assert (command["nodes"], command["action"]) == (["na1"], "delete")
