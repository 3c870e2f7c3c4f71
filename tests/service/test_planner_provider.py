"""The consolidation-planner next to Karpenter (on the InMemoryBus and SQLite): with
``EBB_CONSOLIDATION_PLANNER_PROVIDER=karpenter`` a node without a NodeClaim is never proposed (the executor
retires nodes by deleting their NodeClaim), and a DisruptionPolicy among the cluster objects is the policy the
planner decides by, not the NodePool's own disruption block (Karpenter's, switched off)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.migrate import upgrade_async
from ebb_consolidation_planner.settings import Settings
from tests.service.test_planner import Running, cluster, eventually, publish
from tests.unit.builders import disruption_policy, nodeclaim, nodepool


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


@pytest.mark.parametrize(("provider", "claimed", "proposed"), CASES)
async def test_with_the_karpenter_provider_only_nodes_with_a_nodeclaim_are_proposed(
        database: str, provider: str, claimed: bool, proposed: bool) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster(), *([nodeclaim("claim-n1", "n1")] if claimed else []))
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
