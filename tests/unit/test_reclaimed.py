"""A spot interruption takes its offering back for three minutes (``ebb.core.reclaimed``): no replacement launches in
the spot pool being reclaimed meanwhile, as Karpenter's AWS provider marks it unavailable; existing nodes keep their
prices, and nothing else changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ebb.core.plan import make_plan, plan_json
from ebb.core.reclaimed import RECLAIMED_FOR, active, reclaimed_offering, without_reclaimed
from tests.kit.builders import NOW, node, nodepool, pod, snapshot

SPOT_AND_ON_DEMAND = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def cluster() -> list[Any]:
    """m5.2xlarge with a small pod, replaced by the cheapest type that holds it: t3.medium spot."""
    return [nodepool(requirements=SPOT_AND_ON_DEMAND), node("big", itype="m5.2xlarge"),
            pod("web", "big", cpu="500m", memory="1Gi"), node("full", itype="t3.medium"),
            pod("hog", "full", cpu="1800m")]


LABELS = {"node.kubernetes.io/instance-type": "t3.medium", "topology.kubernetes.io/zone": "us-east-1a"}


@pytest.mark.parametrize(("kind", "labels", "taken"), [
    ("spot-interruption", LABELS, ("t3.medium", "us-east-1a", "spot")),
    # a capacity reservation's instances are its own: Karpenter marks the reservation, not a spot pool
    ("capacity-reservation-interruption", LABELS, None),
    ("scheduled-change", LABELS, None),
    ("state-change", LABELS, None),
    ("rebalance", LABELS, None),
    ("spot-interruption", {"node.kubernetes.io/instance-type": "t3.medium"}, None),  # no zone: nothing known
    ("spot-interruption", {"topology.kubernetes.io/zone": "us-east-1a"}, None),
])
def test_only_a_spot_interruption_takes_its_offering_back(kind: str, labels: dict[str, str],
                                                          taken: tuple[str, str, str] | None) -> None:
    assert reclaimed_offering(kind, labels) == taken


def test_a_mark_holds_until_its_time_and_not_at_it() -> None:
    key = ("t3.medium", "us-east-1a", "spot")
    marks = {key: NOW + RECLAIMED_FOR}
    assert active(marks, NOW) == {key}
    assert active(marks, NOW + RECLAIMED_FOR - timedelta(microseconds=1)) == {key}
    assert active(marks, NOW + RECLAIMED_FOR) == frozenset()


def test_the_marked_offering_alone_is_unavailable_and_no_mark_changes_nothing() -> None:
    base = snapshot(*cluster())
    assert without_reclaimed(base, {}, NOW) is base
    assert without_reclaimed(base, {("t3.medium", "us-east-1a", "spot"): NOW}, NOW) is base  # run out
    marked = without_reclaimed(base, {("t3.medium", "us-east-1a", "spot"): NOW + RECLAIMED_FOR}, NOW)
    offerings = {(it.name, o.zone, o.capacity_type): o.available for it in marked.instance_types for o in it.offerings}
    assert offerings.pop(("t3.medium", "us-east-1a", "spot")) is False
    assert all(offerings.values())
    assert marked.nodes == base.nodes and marked.pods == base.pods


def test_no_replacement_launches_in_the_pool_being_reclaimed_and_existing_nodes_keep_their_price() -> None:
    base = snapshot(*cluster())
    before = plan_json(make_plan(base, NOW))
    assert {r["instanceTypes"][0] for c in before["commands"] for r in c["replacements"]} == {"t3.medium"}
    marks = {("t3.medium", zone, "spot"): NOW + RECLAIMED_FOR for zone in ZONES}
    after = plan_json(make_plan(without_reclaimed(base, marks, NOW), NOW))
    replacements = [r for c in after["commands"] for r in c["replacements"]]
    assert replacements, after
    assert all(not (r["capacityType"] == "spot" and "t3.medium" in r["instanceTypes"]) for r in replacements)
    assert after["cost"]["before"] == before["cost"]["before"]  # the running nodes keep their prices
    # three minutes later the pool is a choice again
    later = plan_json(make_plan(without_reclaimed(base, marks, NOW + RECLAIMED_FOR), NOW + RECLAIMED_FOR))
    assert {r["instanceTypes"][0] for c in later["commands"] for r in c["replacements"]} == {"t3.medium"}
