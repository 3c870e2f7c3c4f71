"""Which path a spot node's replacement takes, read from the replacement's own requirements as Karpenter reads its
NodeClaim's (``computeConsolidation``: ``allExistingAreSpot`` and the NodeClaim's capacity-type requirement has spot;
``FinalizeScheduling`` narrows a NodeClaim that takes a reserved offering to reserved).

Node ``x`` (spot, the dearest type) runs one pod; a cheaper type would hold it. Spot-to-spot is off unless a case
says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import blocked_of, catalog, node, nodepool, plan_dict, pod

ANY_CT = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand", "reserved"]}]


def _offerings(on_demand: float, spot: float, *, spot_available: bool = True,
               reserved: float | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for zone in ("us-east-1a", "us-east-1b"):
        out.append({"zone": zone, "capacityType": "on-demand", "price": on_demand})
        out.append({"zone": zone, "capacityType": "spot", "price": spot, "available": spot_available})
        if reserved is not None:
            out.append({"zone": zone, "capacityType": "reserved", "price": reserved})
    return out


def _catalog(*, spot_available: bool = True, reserved: float | None = None) -> dict[str, Any]:
    small = {"name": "small.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
             "offerings": _offerings(0.50, 0.30, spot_available=spot_available, reserved=reserved)}
    big = {"name": "big.xlarge", "capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"},
           "offerings": _offerings(1.60, 0.80, spot_available=spot_available)}
    return catalog([small, big])


def _cluster(pod_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [nodepool(requirements=ANY_CT, consolidate_after="0s", budgets=[{"nodes": "100%"}]),
            node("x", itype="big.xlarge", capacity_type="spot", cpu="8", memory="32Gi"),
            pod("p", "x", cpu="500m", memory="1Gi", **(pod_kwargs or {}))]


def _due(method: str) -> list[dict[str, Any]]:
    """`_cluster` with x an on-demand node that ``method`` (drift or expiration) takes."""
    docs = _cluster()
    if method == "drift":
        docs[0] = nodepool(requirements=ANY_CT, budgets=[{"nodes": "100%"}], node_hash="h1")
        docs[1] = node("x", itype="big.xlarge", capacity_type="on-demand", cpu="8", memory="32Gi", node_hash="h0")
    else:
        docs[0] = nodepool(requirements=ANY_CT, budgets=[{"nodes": "100%"}], expire_after="24h")
        docs[1] = node("x", itype="big.xlarge", capacity_type="on-demand", cpu="8", memory="32Gi")
    return docs


def test_a_spot_node_is_not_replaced_by_on_demand_when_no_spot_offering_is_available() -> None:
    """consolidation_test.go's spot rule reads the replacement's requirements, not what the catalog has available
    now: with every spot offering unavailable, a spot node whose replacement may be spot still takes the spot-to-spot
    path (off: it stays), where ebb replaced it by a cheaper on-demand node."""
    out = plan_dict(_catalog(spot_available=False), *_cluster())
    assert out["commands"] == []
    assert "spot-to-spot consolidation is disabled" in blocked_of(out, "x")["reason"]


def test_with_spot_to_spot_and_no_spot_offering_available_the_spot_node_stays() -> None:
    out = plan_dict(_catalog(spot_available=False), *_cluster(), spot_to_spot=True)
    assert out["commands"] == []


@pytest.mark.parametrize("pod_kwargs", [
    pytest.param({"node_selector": {"karpenter.sh/capacity-type": "on-demand"}}, id="nodeSelector"),
    pytest.param({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}]}}},
        id="preferred node affinity held as a requirement"),
])
def test_a_spot_node_whose_pods_need_on_demand_is_replaced_by_cheaper_on_demand(pod_kwargs: dict[str, Any]) -> None:
    """A replacement whose pods need (or prefer, a preference Karpenter holds while it can) on-demand cannot be spot:
    Karpenter's NodeClaim then has no spot in its capacity-type requirement, so the spot-to-spot path is not taken
    and the node is replaced by a cheaper on-demand node; ebb said "spot-to-spot consolidation is disabled"."""
    out = plan_dict(_catalog(), *_cluster(pod_kwargs))
    [command] = out["commands"]
    assert (command["action"], command["nodes"]) == ("replace", ["x"])
    [replacement] = command["replacements"]
    assert (replacement["capacityType"], replacement["price"]) == ("on-demand", 0.5)


@pytest.mark.parametrize("spot_to_spot", [False, True])
def test_a_spot_node_is_replaced_by_a_reserved_offering(spot_to_spot: bool) -> None:
    """consolidation_test.go, "can consolidate into reserved capacity for the same instance pool" (from spot): a
    NodeClaim that takes a reserved offering is narrowed to reserved, so it is no spot-to-spot replacement, with or
    without spot-to-spot."""
    out = plan_dict(_catalog(reserved=0.01), *_cluster(), spot_to_spot=spot_to_spot)
    [command] = out["commands"]
    assert (command["action"], command["nodes"]) == ("replace", ["x"])
    [replacement] = command["replacements"]
    assert (replacement["capacityType"], replacement["price"]) == ("reserved", 0.01)


@pytest.mark.parametrize("method", ["drift", "expiration"])
def test_a_drift_or_expiration_replacement_takes_a_reserved_offering_first(method: str) -> None:
    """provisioning/scheduling/nodeclaim.go, ``reserveOfferings`` and ``FinalizeScheduling``: a NodeClaim that can
    take a reserved offering is narrowed to reserved whatever it costs, whichever method launched it. The on-demand
    node x (big) drifts or expires; its replacement is small.large reserved ($0.60), not on-demand ($0.50)."""
    docs = _due(method)
    out = plan_dict(_catalog(reserved=0.60), *docs)
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [(method, ["x"])]
    replacement = out["commands"][0]["replacements"][0]
    assert (replacement["capacityType"], replacement["price"]) == ("reserved", 0.60)


def test_a_replacement_held_back_by_a_dear_reserved_offering_says_so() -> None:
    """The pods fit a small.large, whose reserved offering ($0.90) is dearer than the spot node ($0.80): the NodeClaim
    would be narrowed to reserved, so there is no cheaper replacement, though small.large costs $0.30 as spot. The
    reason names the reserved capacity, not only a price the pods do not need."""
    out = plan_dict(_catalog(reserved=0.90), *_cluster())
    assert out["commands"] == []
    reason = blocked_of(out, "x")["reason"]
    assert "its pods need a node costing $0.9000/h or more (as the reserved capacity that holds them" in reason, reason


@pytest.mark.parametrize("method", ["drift", "expiration"])
def test_a_replacement_whose_cheapest_option_is_reserved_lists_only_reserved_options(method: str) -> None:
    """``FinalizeScheduling`` narrows a NodeClaim that takes a reserved offering to reserved: its instance types are
    those with a reserved offering, even when its cheapest option was reserved already (small.large reserved at $0.01
    is the cheapest; big.xlarge has no reserved offering and is no option of the launch)."""
    docs = _due(method)
    out = plan_dict(_catalog(reserved=0.01), *docs)
    [replacement] = out["commands"][0]["replacements"]
    assert (replacement["capacityType"], replacement["instanceTypes"]) == ("reserved", ["small.large"])


@pytest.mark.parametrize(("method", "static"), [("drift", False), ("expiration", False), ("expiration", True)])
def test_a_spot_replacement_lists_only_types_offered_as_spot(method: str, static: bool) -> None:
    """A replacement is launched as the capacity type of its cheapest option alone (``launch_spec``, the NodeClaim's
    requirement): a drift or expiration replacement whose cheapest option is spot lists the types offered as spot,
    not medium.large, which fits the pods but is offered on-demand only; so does a static NodePool's replacement."""
    medium = {"name": "medium.large", "capacity": {"cpu": "4", "memory": "16Gi", "pods": "29"},
              "offerings": [{"zone": z, "capacityType": "on-demand", "price": 0.70}
                            for z in ("us-east-1a", "us-east-1b")]}
    types = [*_catalog()["spec"]["instanceTypes"], medium]
    docs = _due(method)
    if static:
        docs[0]["spec"]["replicas"] = 1
    out = plan_dict(catalog(types), *docs)
    [replacement] = out["commands"][0]["replacements"]
    assert (replacement["capacityType"], replacement["instanceTypes"]) == ("spot", ["small.large", "big.xlarge"])
    assert replacement["price"] == 0.30


@pytest.mark.parametrize(("zone", "price"), [("us-east-1a", 1.60), ("us-east-1c", 1.60)])
def test_a_reserved_node_whose_reservation_is_gone_is_priced_as_on_demand(zone: str, price: float) -> None:
    """A reserved node whose type has no reserved offering left costs what AWS demotes it to, on-demand (in its zone,
    or the type's cheapest on-demand offering where its zone has none), not the type's cheapest offering of any
    capacity type (spot)."""
    out = plan_dict(_catalog(), nodepool(requirements=ANY_CT),
                    node("x", itype="big.xlarge", capacity_type="reserved", zone=zone, cpu="8", memory="32Gi"),
                    pod("p", "x", cpu="6", memory="1Gi"))
    assert out["cost"]["before"] == price


def test_a_pod_only_unavailable_offerings_would_take_is_told_so() -> None:
    """Every reserved offering the pod asks for is unavailable (the reservation is full): the verdict names them, not
    only "no NodePool can launch a node it tolerates and matches", which reads as taints or selectors."""
    reserved_only = {"karpenter.sh/capacity-type": "reserved"}
    types = _catalog(reserved=0.01)
    for it in types["spec"]["instanceTypes"]:
        for offering in it["offerings"]:
            if offering["capacityType"] == "reserved":
                offering["available"] = False
    out = plan_dict(types, nodepool(requirements=ANY_CT),
                    node("x", itype="big.xlarge", capacity_type="on-demand", cpu="8", memory="32Gi"),
                    pod("p", "x", cpu="500m", memory="1Gi", node_selector=reserved_only))
    reason = blocked_of(out, "x")["reason"]
    assert ("no NodePool can launch a node it tolerates and matches (the catalog marks unavailable offerings it would "
            "take: reserved small.large in us-east-1a, reserved small.large in us-east-1b)") in reason, reason


def test_a_reservations_tiny_price_is_written_with_its_significant_digits() -> None:
    """Karpenter's AWS provider prices a reserved offering at a ten-millionth of on-demand: four decimals would write
    it $0.0000/h, as if it cost nothing, and two such prices would read equal."""
    out = plan_dict(_catalog(reserved=5e-08), *_cluster())
    [command] = out["commands"]
    assert "at $0.000000050/h instead of $0.8000/h" in command["explanation"], command["explanation"]


def test_a_launch_takes_the_reservation_its_nodepool_admits() -> None:
    """Two reservations of one type and zone at the same price: the node launched takes the one the NodePool's
    ``capacity-reservation-id`` requirement admits. ``--until-stable`` (and a launcher) took the first, labelled the
    node with a reservation its NodePool no longer admits, and drift replaced it again, a thousand passes on."""
    from ebb.core.launch import offering_for
    from tests.kit.builders import snapshot

    reservation = "karpenter.k8s.aws/capacity-reservation-id"
    offerings = [{"zone": "us-east-1a", "capacityType": "reserved", "price": 0.01, "labels": {reservation: cr}}
                 for cr in ("cr-old", "cr-new")]
    snap = snapshot(nodepool(requirements=[*ANY_CT, {"key": reservation, "operator": "In", "values": ["cr-new"]}]),
                    catalog([{"name": "small.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                              "overhead": {"cpu": "0", "memory": "0"}, "offerings": offerings}]))
    [pool], [itype] = snap.nodepools, snap.instance_types
    chosen = offering_for(itype, pool, "reserved", ["us-east-1a"])
    assert chosen is not None and dict(chosen.labels) == {reservation: "cr-new"}
    assert offering_for(itype, pool, "spot", ["us-east-1a"]) is None
    # end to end: the node a drift of cr-old launches is of cr-new, and the plan settles after it
    drifted = node("x", itype="small.large", capacity_type="reserved", labels={reservation: "cr-old"})
    out = plan_dict(nodepool(requirements=[*ANY_CT, {"key": reservation, "operator": "In", "values": ["cr-new"]}]),
                    catalog([{"name": "small.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                              "overhead": {"cpu": "0", "memory": "0"}, "offerings": offerings}]),
                    drifted, pod("web", "x"), until_stable=True)
    assert [[c["method"] for c in step["commands"]] for step in out["steps"]] == [["drift"], []]
