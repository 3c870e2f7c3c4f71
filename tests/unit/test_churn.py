"""Churn control: stabilizationWindow and ebb.sh/v1 Hold documents (docs/decisions.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import (
    ago,
    blocked_of,
    disrupted,
    disruption_policy,
    hold,
    later,
    node,
    nodeclaim,
    nodepool,
    plan_dict,
    pod,
)


def _empty_and_underutilized(pool: dict[str, Any], *extra: Any) -> dict[str, Any]:
    """`idle` is empty; `big` (m5.2xlarge) is underutilized and would be replaced by a t3.medium."""
    return plan_dict(pool, node("idle"), node("big", itype="m5.2xlarge"), pod("web", "big"), *extra)


# -- stabilizationWindow ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("newest", "paused"), [
    (ago(minutes=5), True),
    (ago(minutes=29), True),
    (ago(minutes=31), False),
    (ago(days=1), False),
])
def test_stabilization_window_pauses_empty_and_underutilized(newest: str, paused: bool) -> None:
    pool = nodepool(stabilization_window="30m")
    fresh = [node("fresh", itype="t3.medium", created=newest), pod("job", "fresh", cpu="1500m", started=newest)]
    # emptiness first: the empty node
    out = _empty_and_underutilized(pool, *fresh)
    if paused:
        assert out["commands"] == []
        for name in ("idle", "big"):
            reason = blocked_of(out, name)["reason"]
            assert "stabilizationWindow (30m)" in reason
            assert "fresh" in reason  # names the node that was launched
    else:
        assert "idle" in disrupted(out)
    # then consolidation alone: the underutilized node
    out = plan_dict(pool, node("big", itype="m5.2xlarge"), pod("web", "big"), *fresh)
    if paused:
        assert out["commands"] == []
        assert "stabilizationWindow" in blocked_of(out, "big")["reason"]
    else:
        assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("single-node-consolidation", ["big"])]


def test_stabilization_window_watches_nodes_of_every_pool() -> None:
    out = plan_dict(nodepool(stabilization_window="1h"), nodepool("other"), node("idle"),
                    node("fresh", pool="other", itype="t3.medium", created=ago(minutes=10)),
                    pod("job", "fresh", cpu="1500m"))
    assert "idle" not in disrupted(out)
    assert "stabilizationWindow (1h)" in blocked_of(out, "idle")["reason"]


def test_stabilization_window_only_pauses_its_own_pool() -> None:
    out = plan_dict(nodepool("calm", stabilization_window="1h"), nodepool("busy"),
                    node("idle-calm", pool="calm"), node("idle-busy", pool="busy"),
                    node("fresh", pool="busy", itype="t3.medium", created=ago(minutes=10)),
                    pod("job", "fresh", cpu="1500m"))
    assert disrupted(out) == {"idle-busy"}
    assert "stabilizationWindow" in blocked_of(out, "idle-calm")["reason"]


def _claim_annotated(name: str, node_name: str, decision: str) -> dict[str, Any]:
    claim = nodeclaim(name, node_name, created=ago(minutes=5))
    claim["metadata"]["annotations"] = {"ebb.sh/decision-id": decision}
    return claim


# (case, the fresh node's documents, whether it pauses the window)
FRESH = [
    ("launched for pending pods", [node("fresh", itype="t3.medium", created=ago(minutes=5))], True),
    ("a replacement, its Node annotated", [node("fresh", itype="t3.medium", created=ago(minutes=5),
                                                annotations={"ebb.sh/decision-id": "dec-1"})], False),
    ("a replacement, its NodeClaim annotated", [node("fresh", itype="t3.medium", created=ago(minutes=5)),
                                                _claim_annotated("claim-fresh", "fresh", "dec-1")], False),
]


@pytest.mark.parametrize(("docs", "paused"), [c[1:] for c in FRESH], ids=[c[0] for c in FRESH])
def test_a_replacement_does_not_restart_the_stabilization_window(docs: list[Any], paused: bool) -> None:
    """A node launched for a disruption decision (``ebb.sh/decision-id`` on it or its NodeClaim) is not new load:
    counting it would pause consolidation again after every replace ebb carries out."""
    out = plan_dict(nodepool(stabilization_window="30m"), node("idle"), *docs, pod("job", "fresh", cpu="1500m"))
    if paused:
        assert "idle" not in disrupted(out)
        assert "node fresh launched" in blocked_of(out, "idle")["reason"]
    else:
        assert "idle" in disrupted(out)


def test_the_window_runs_from_the_newest_node_that_is_not_a_replacement() -> None:
    """A replacement launched 2 minutes ago and a node launched for pods 20 minutes ago: the window (30m) runs
    from the latter, and the reason names it."""
    out = plan_dict(nodepool(stabilization_window="30m"), node("idle"),
                    node("burst", itype="t3.medium", created=ago(minutes=20)), pod("job", "burst", cpu="1500m"),
                    node("swap", itype="t3.medium", created=ago(minutes=2), annotations={"ebb.sh/decision-id": "d"}),
                    pod("moved", "swap", cpu="1500m"))
    reason = blocked_of(out, "idle")["reason"]
    assert "node burst launched 20m ago" in reason


@pytest.mark.parametrize(("pool_kwargs", "method"), [
    ({"expire_after": "24h"}, "expiration"),
    ({"node_hash": "h2"}, "drift"),
])
def test_stabilization_window_does_not_pause_expiration_or_drift(pool_kwargs: dict[str, Any], method: str) -> None:
    out = plan_dict(nodepool(stabilization_window="1h", **pool_kwargs), node("old", node_hash="h1"),
                    pod("web", "old"), node("fresh", itype="t3.medium", node_hash="h2", created=ago(minutes=5)),
                    pod("job", "fresh", cpu="1500m"))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [(method, ["old"])]


# -- holds ------------------------------------------------------------------------------------------------

HOLDS = [
    ("cluster", hold("freeze", "cluster", reason="incident 42"), True),
    ("cluster-until-later", hold("freeze", "cluster", expires_at=later(hours=2)), True),
    ("nodepool", hold("np", "nodePool", "default", reason="incident 42"), True),
    ("other-nodepool", hold("np", "nodePool", "other"), False),
    ("expired", hold("freeze", "cluster", expires_at=ago(minutes=1)), False),
    ("expires-now", hold("freeze", "cluster", expires_at=ago(seconds=0)), False),
]


@pytest.mark.parametrize(("doc", "paused"), [c[1:] for c in HOLDS], ids=[c[0] for c in HOLDS])
def test_hold_pauses_empty_and_underutilized(doc: dict[str, Any], paused: bool) -> None:
    out = _empty_and_underutilized(nodepool(), nodepool("other"), doc)
    if paused:
        assert out["commands"] == []
        for name in ("idle", "big"):
            reason = blocked_of(out, name)["reason"]
            assert f"hold {doc['metadata']['name']}" in reason
            if doc["spec"].get("reason"):
                assert "incident 42" in reason
    else:
        assert "idle" in disrupted(out)
    if paused:  # consolidation too, with no empty node to go first
        out = plan_dict(nodepool(), nodepool("other"), node("big", itype="m5.2xlarge"), pod("web", "big"), doc)
        assert out["commands"] == []
        assert "hold" in blocked_of(out, "big")["reason"]


def test_node_hold_pauses_only_that_node() -> None:
    out = plan_dict(nodepool(), node("idle-1"), node("idle-2"), hold("keep-1", "node", "idle-1", reason="debug"))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("emptiness", ["idle-2"])]
    reason = blocked_of(out, "idle-1")["reason"]
    assert "hold keep-1" in reason
    assert "debug" in reason


@pytest.mark.parametrize(("pool_kwargs", "method"), [
    ({"expire_after": "24h"}, "expiration"),
    ({"node_hash": "h2"}, "drift"),
])
@pytest.mark.parametrize("doc", [hold("freeze", "cluster"), hold("np", "nodePool", "default"),
                                 hold("one", "node", "old")], ids=["cluster", "nodepool", "node"])
def test_holds_do_not_pause_expiration_or_drift(pool_kwargs: dict[str, Any], method: str,
                                                doc: dict[str, Any]) -> None:
    out = plan_dict(nodepool(**pool_kwargs), node("old", node_hash="h1"), pod("web", "old"), doc)
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [(method, ["old"])]


# -- minimumPriceImprovementPercent -------------------------------------------------------------------------
# The catalog's on-demand prices (tests/kit/builders.py): t3.medium $0.0416, m5.large $0.096, m5.xlarge $0.192,
# m5.2xlarge $0.384. A replacement of an m5.2xlarge by a t3.medium is 89.2% cheaper.


def _threshold(percent: int | None) -> dict[str, Any]:
    return nodepool(disruption={} if percent is None else {"minimumPriceImprovementPercent": percent})


def _commands(out: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(c["method"], c["action"], c["nodes"]) for c in out["commands"]]


@pytest.mark.parametrize(("percent", "replaced"), [(None, True), (0, True), (50, True), (89, True), (90, False),
                                                   (100, False)])
def test_a_replacement_must_be_cheaper_by_the_minimum(percent: int | None, replaced: bool) -> None:
    out = plan_dict(_threshold(percent), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="750m"))
    if replaced:
        assert _commands(out) == [("single-node-consolidation", "replace", ["big"])]
        assert out["commands"][0]["replacements"][0]["instanceTypes"][0] == "t3.medium"
    else:
        assert out["commands"] == []
        reason = blocked_of(out, "big")["reason"]
        assert f"NodePool default's minimumPriceImprovementPercent ({percent}%) is not met" in reason
        assert "costs $0.0416/h against $0.3840/h, 89.2% less" in reason


def test_only_the_options_cheap_enough_are_offered() -> None:
    # 3Gi + 3Gi: m5.large ($0.096) is the cheapest that fits an m5.xlarge's ($0.192) pods: exactly 50% less
    docs = [node("xl", itype="m5.xlarge"), pod("a", "xl", cpu="500m", memory="3Gi"),
            pod("b", "xl", cpu="500m", memory="3Gi")]
    [command] = plan_dict(_threshold(50), *docs)["commands"]
    assert command["replacements"][0]["instanceTypes"] == ["m5.large"]  # c5.xlarge ($0.17) is only 11% less
    without = plan_dict(_threshold(0), *docs)["commands"][0]["replacements"][0]["instanceTypes"]
    assert without[:2] == ["m5.large", "r5.large"] and "c5.xlarge" in without
    assert plan_dict(_threshold(51), *docs)["commands"] == []


def test_deletes_are_not_held_back_by_the_minimum() -> None:
    out = plan_dict(_threshold(100), node("a"), pod("web-a", "a", cpu="500m"),
                    node("b", itype="t3.medium"), pod("web-b", "b", cpu="500m"))
    assert _commands(out) == [("single-node-consolidation", "delete", ["a"])]
    out = plan_dict(_threshold(100), node("idle"))
    assert _commands(out) == [("emptiness", "delete", ["idle"])]


def test_multi_node_replacements_are_held_to_the_minimum_too() -> None:
    # two m5.large ($0.192) by one t3.medium ($0.0416): 78.3% less; one m5.large by a t3.medium: 56.7% less
    docs = [node("a"), node("b"), pod("web-a", "a", cpu="700m"), pod("web-b", "b", cpu="700m")]
    assert _commands(plan_dict(_threshold(75), *docs)) == [("multi-node-consolidation", "replace", ["a", "b"])]
    # at 80% neither replacement qualifies; what is left is the delete of one of them (its pod fits on the other)
    assert _commands(plan_dict(_threshold(80), *docs)) == [("single-node-consolidation", "delete", ["a"])]
    out = plan_dict(_threshold(80), node("a"), node("b"), pod("web-a", "a", cpu="1500m"),
                    pod("web-b", "b", cpu="1500m"))  # neither pod fits beside the other: a replace or nothing
    assert out["commands"] == []
    assert "minimumPriceImprovementPercent (80%)" in blocked_of(out, "a")["reason"]


def test_the_minimum_comes_from_the_disruption_policy() -> None:
    out = plan_dict(nodepool(), disruption_policy(minimumPriceImprovementPercent=95),
                    node("big", itype="m5.2xlarge"), pod("web", "big", cpu="750m"))
    assert out["commands"] == []
    assert "DisruptionPolicy default's minimumPriceImprovementPercent (95%)" in blocked_of(out, "big")["reason"]


@pytest.mark.parametrize(("decision", "paused"), [(None, True), ("dec-1", False)])
def test_a_nodeclaim_launched_whose_node_has_not_registered_starts_the_window(decision: str | None,
                                                                              paused: bool) -> None:
    """Karpenter's provisioner launched ``claim-burst`` two minutes ago for new load; its Node has not registered yet.
    It is a node launched (Karpenter's cluster state counts it as one, and ebb prices it): the window is in effect.
    A NodeClaim launched for a disruption decision is not new load."""
    claim = nodeclaim("claim-burst", "", created=ago(minutes=2))
    if decision is not None:
        claim["metadata"]["annotations"] = {"ebb.sh/decision-id": decision}
    out = plan_dict(nodepool(stabilization_window="10m"), node("idle"), claim)
    if paused:
        assert "idle" not in disrupted(out)
        reason = blocked_of(out, "idle")["reason"]
        assert "since node claim-burst (a NodeClaim whose Node has not registered yet) launched 2m ago" in reason
    else:
        assert "idle" in disrupted(out)
