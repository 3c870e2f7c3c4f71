"""Expiration of a static NodePool's nodes (ebb.core.methods.rotation.one_for_one).

A static NodePool (``spec.replicas``) keeps its node count: as drift does (Karpenter's StaticDrift,
tests/unit/karpenter/test_static_drift.py), expiration replaces each of its expired nodes by one node of the same
pool, in a command of its own, up to the Expired budget, and not while the pool has more nodes than its replicas.
The nodes of a static pool are never rotated together with others: their pods would go to any NodePool and the
pool would shrink. The suite's nodes were created long ago (``OLD``); an ``expireAfter`` of 24h expires them all.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import blocked_of, nodepool, plan_dict, pod
from tests.kit.builders import node as make_node


def _static(name: str, replicas: int, budget: str = "100%") -> dict[str, Any]:
    pool = nodepool(name, expire_after="24h", budgets=[{"nodes": budget}])
    pool["spec"]["replicas"] = replicas
    return pool


def _nodes(pool: str, count: int, *, with_pods: bool) -> list[Any]:
    docs: list[Any] = []
    for i in range(count):
        name = f"{pool}-{i}"
        docs.append(make_node(name, pool=pool, itype="m5.xlarge"))
        if with_pods:
            docs.append(pod(f"{name}-web", name, cpu="500m"))
    return docs


def _taken(out: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(method, replaced node, the replacement's NodePool) of each command, after checking each replaces one node by
    one node."""
    taken = []
    for command in out["commands"]:
        assert (command["action"], len(command["nodes"]), len(command["replacements"])) == ("replace", 1, 1), command
        taken.append((command["method"], command["nodes"][0], command["replacements"][0]["nodePool"]))
    return taken


# (case, the documents, the commands expected: (method, node, the replacement's NodePool))
CASES = [
    ("each expired node of two static pools is replaced by one node of its own pool, idle or busy",
     [_static("idle", 2), *_nodes("idle", 2, with_pods=False), _static("busy", 2), *_nodes("busy", 2, with_pods=True)],
     [("expiration", "busy-0", "busy"), ("expiration", "busy-1", "busy"), ("expiration", "idle-0", "idle"),
      ("expiration", "idle-1", "idle")]),
    ("the Expired budget caps the one-for-one replacements",
     [_static("fixed", 3, budget="1"), *_nodes("fixed", 3, with_pods=True)],
     [("expiration", "fixed-0", "fixed")]),
]


@pytest.mark.parametrize(("docs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_static_expiration_replaces_one_for_one(docs: list[Any], expected: list[tuple[str, str, str]]) -> None:
    out = plan_dict(*docs)
    assert sorted(_taken(out)) == sorted(expected)


def test_a_static_pools_expired_nodes_are_not_rotated_with_other_expired_nodes() -> None:
    """A dynamic pool's expired nodes are rotated together as ever; the static pool's node is replaced on its own,
    by a node of its pool, and none of its pods go to the other pool's replacement."""
    dynamic = nodepool("dynamic", expire_after="24h", budgets=[{"nodes": "100%"}])
    out = plan_dict(_static("fixed", 1), *_nodes("fixed", 1, with_pods=True), dynamic,
                    *_nodes("dynamic", 2, with_pods=True))
    by_node = {tuple(c["nodes"]): c for c in out["commands"]}
    assert set(by_node) == {("fixed-0",), ("dynamic-0", "dynamic-1")}, list(by_node)
    assert [r["nodePool"] for r in by_node[("fixed-0",)]["replacements"]] == ["fixed"]
    assert "is static" in by_node[("fixed-0",)]["explanation"]
    assert all(r["nodePool"] == "dynamic" for r in by_node[("dynamic-0", "dynamic-1")].get("replacements", []))


def test_a_static_pool_above_its_replicas_waits_for_its_scale_down() -> None:
    """Two nodes for one replica: the pool is scaling down, and its expired nodes wait (as its drifted ones do)."""
    out = plan_dict(_static("fixed", 1), *_nodes("fixed", 2, with_pods=True))
    assert out["commands"] == []
    assert "than its spec.replicas 1: its nodes are replaced one for one once Karpenter has scaled it down" \
        in blocked_of(out, "fixed-0")["reason"]


def _unexpiring_static(name: str, replicas: int) -> dict[str, Any]:
    pool = nodepool(name)
    pool["spec"]["replicas"] = replicas
    return pool


# (case, the documents, the commands expected): provisioning/provisioner.go, NewScheduler drops every static NodePool
# before a simulation (``nodepoolutils.IsStatic``), so a dynamic pool's consolidation, drift or expiration never
# launches its replacement there, however cheap; a static pool's own one-for-one replacement still does
STATIC_NO_DESTINATION = [
    ("consolidation replaces a dynamic node in its own pool, not in a static pool that sorts first",
     [nodepool("dyn"), make_node("d-0", pool="dyn", itype="m5.xlarge"), pod("d-0-web", "d-0", cpu="500m"),
      _unexpiring_static("st", 1), make_node("st-0", pool="st", itype="t3.medium"),
      pod("st-0-web", "st-0", cpu="1600m")],
     [("single-node-consolidation", "d-0", "dyn")]),
    ("drift of a dynamic node whose pod fits only a static pool's types is refused, not launched there",
     [nodepool("dyn", requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                     "values": ["m5.large"]}]),
      make_node("d-0", pool="dyn", itype="m5.xlarge"), pod("d-0-web", "d-0", cpu="3"), _unexpiring_static("st", 0)],
     []),
]


@pytest.mark.parametrize(("docs", "expected"), [c[1:] for c in STATIC_NO_DESTINATION],
                         ids=[c[0] for c in STATIC_NO_DESTINATION])
def test_a_static_pool_takes_no_other_pools_replacement(docs: list[Any], expected: list[tuple[str, str, str]]) -> None:
    out = plan_dict(*docs)
    assert _taken(out) == expected, out["blocked"]
