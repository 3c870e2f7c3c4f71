"""The consolidation-planner next to Karpenter (on the InMemoryBus and SQLite): with
``EBB_CONSOLIDATION_PLANNER_PROVIDER=karpenter`` a node without a NodeClaim is never proposed (the executor
retires nodes by deleting their NodeClaim), a DisruptionPolicy among the cluster objects is the policy the
planner decides by, not the NodePool's own disruption block (Karpenter's, switched off), and the node of a
replacement NodeClaim a live decision launched is left alone until that decision ends."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import DisruptionCommand
from ebb.core.decision import State
from ebb.core.launch import replacement_name
from ebb.core.methods.base import Replacement
from ebb_consolidation_planner.settings import Settings
from tests.kit import builders
from tests.kit.builders import disruption_policy, nodeclaim, nodepool
from tests.kit.planner import Running, cluster, publish
from tests.kit.waiting import eventually


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[str]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    yield url


def test_the_provider_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_CONSOLIDATION_PLANNER_PROVIDER", "karpenter")
    assert Settings().provider == "karpenter"
    assert Settings(provider="kwok").provider == "kwok"
    monkeypatch.setenv("EBB_CONSOLIDATION_PLANNER_PROVIDER", "aws")
    with pytest.raises(ValueError, match="provider"):
        Settings()


async def _decided(svc: Running, passes: int = 3) -> list[Any]:
    """The decisions after ``passes`` more passes."""
    await eventually("the planner", lambda: svc.planner is not None)
    assert svc.planner is not None
    start = svc.planner.passes
    await eventually(f"{passes} passes", lambda: svc.planner is not None and svc.planner.passes >= start + passes)
    return await svc.decisions()


# (provider, a NodeClaim for the empty node n1, n1 proposed)
CASES: list[tuple[str, bool, bool]] = [
    ("none", False, True),
    ("kwok", False, True),
    ("karpenter", False, False),
    ("karpenter", True, True),
]


#: NodePool default switched over to ebb (docs/karpenter.md): Karpenter disrupts nothing, ebb's policy allows all;
#: with the karpenter provider anything else is a conflict that refuses the pool (test_planner_conflicts.py)
SWITCHED_OVER = [nodepool(budgets=[{"nodes": "0"}], expire_after="Never"),
                 disruption_policy(budgets=[{"nodes": "100%"}])]


@pytest.mark.parametrize(("provider", "claimed", "proposed"), CASES)
async def test_with_the_karpenter_provider_only_nodes_with_a_nodeclaim_are_proposed(
        database: str, provider: str, claimed: bool, proposed: bool) -> None:
    bus = InMemoryBus()
    claims = [nodeclaim("claim-n1", "n1")] if claimed else []
    await publish(bus, *cluster(SWITCHED_OVER[0]), SWITCHED_OVER[1], *claims)
    async with Running(bus, database, provider=provider) as svc:
        decisions = await _decided(svc)
    assert [d.nodes[0]["name"] for d in decisions] == (["n1"] if proposed else [])


async def test_the_disruption_policy_decides_not_the_nodepools_switched_off_block(database: str) -> None:
    off = nodepool(budgets=[{"nodes": "0"}], expire_after="Never")
    bus = InMemoryBus()
    await publish(bus, *cluster(off), nodeclaim("claim-n1", "n1"))
    async with Running(bus, database, provider="karpenter") as svc:
        assert await _decided(svc) == []  # Karpenter's budget 0, read from the NodePool: nothing
        await publish(bus, disruption_policy(budgets=[{"nodes": "1"}]))
        [decision] = await eventually("a decision once the policy arrives", svc.decisions)
    assert decision.nodes[0]["name"] == "n1" and decision.reason == "Empty"


# (the state of decision d1, which launched the NodeClaim of node "new", "new" proposed once it is empty)
REPLACEMENT_CASES = [("executing", False), ("approved", False), ("succeeded", True)]


@pytest.mark.parametrize(("state", "proposed"), REPLACEMENT_CASES)
async def test_a_replacement_waiting_for_its_decisions_pods_is_not_proposed(database: str, state: str,
                                                                             proposed: bool) -> None:
    """Decision d1 replaces ``old``: its replacement NodeClaim's node ``new`` is empty while d1 drains ``old``
    (a PDB may hold that for long). While d1 is live the planner leaves ``new`` alone, as Karpenter leaves the
    nodes it nominated for a command's pods (it was seen proposing it as empty against the real Karpenter, and
    validation rejecting that, pass after pass); once d1 ended and ``old`` is gone, ``new`` is a node like any
    other."""
    store = DecisionStore.from_url(database, "unit")
    replacement = Replacement("default", ("m5.large",), "on-demand", ("us-east-1a",), 0.096)
    decision = dataclasses.replace(
        builders.proposed("d1", "old", now=builders.NOW, method="single-node-consolidation", reason="Underutilized"),
        action="replace", replacements=(replacement,))
    await store.propose(decision)
    approval = await store.approve("d1", node_pools={"old": "default"}, reason="Underutilized",
                                   allowed={"default": 10}, counted=(), now=builders.NOW)
    assert approval.decision is not None
    command = DisruptionCommand.of_decision(approval.decision)
    if state != "approved":
        await store.start(command, builders.NOW)
    if state == "succeeded":
        await store.finish(command, State.SUCCEEDED, builders.NOW)
    await store.close()
    claim = replacement_name("d1", 0, "default")
    bus = InMemoryBus()
    draining = [builders.node("old", taints=[{"key": "ebb.sh/disrupted", "effect": "NoSchedule"}]),
                builders.pod("web", "old"), nodeclaim("claim-old", "old")]
    await publish(bus, builders.catalog(), *SWITCHED_OVER, builders.node("new"), nodeclaim(claim, "new"),
                  *(draining if state != "succeeded" else []))
    async with Running(bus, database, provider="karpenter") as svc:
        decisions = await _decided(svc)
    assert [d.nodes[0]["name"] for d in decisions if d.id != "d1"] == (["new"] if proposed else [])
