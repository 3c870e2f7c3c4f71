"""The consolidation-planner's conflict check with Karpenter (on the InMemoryBus and SQLite): a NodePool that
Karpenter still disrupts is not disrupted by ebb, and the planner says so at start (a log line per conflict, the
``ebb_conflicts`` gauge); once the NodePool is switched over, the conflict is logged as fixed, its series goes and
the pool's empty node is proposed. The embedded mode's setting (``check_conflicts=False``) checks nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.migrate import upgrade_async
from ebb.core.conflicts import ConflictKind
from ebb_consolidation_planner import planner as planner_module
from tests.kit.builders import disruption_policy, nodeclaim, nodepool
from tests.kit.planner import FakePolicyStatus, Running, cluster, publish
from tests.kit.waiting import eventually

#: Karpenter's voluntary disruption switched off on the NodePool (docs/karpenter.md)
SWITCHED_OFF: dict[str, Any] = {"budgets": [{"nodes": "0"}], "expire_after": "Never"}


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[str]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    yield url


def _claims() -> list[dict[str, Any]]:
    return [nodeclaim("claim-n1", "n1", expire_after="Never"), nodeclaim("claim-n2", "n2", expire_after="Never")]


@contextlib.contextmanager
def planner_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[MutableMapping[str, Any]]]:
    """The planner's log lines. Its module logger is replaced by a fresh one: ``ebb.adapters.logs.configure`` caches
    a logger on first use, so one another test of the session already used would never reach ``capture_logs``."""
    with capture_logs() as logged:
        monkeypatch.setattr(planner_module, "log", structlog.get_logger("ebb_consolidation_planner"))
        yield logged


async def _passes(svc: Running, count: int = 3) -> None:
    await eventually("the planner", lambda: svc.planner is not None)
    assert svc.planner is not None
    start = svc.planner.passes
    await eventually(f"{count} passes", lambda: svc.planner is not None and svc.planner.passes >= start + count)


async def test_a_conflicting_nodepool_is_refused_until_it_is_switched_over(database: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster(nodepool(budgets=[{"nodes": "100%"}], expire_after="Never")), *_claims())
    with planner_logs(monkeypatch) as logged:
        async with Running(bus, database, provider="karpenter") as svc:
            await _passes(svc)
            assert await svc.decisions() == []  # n1 is empty, but Karpenter would disrupt NodePool default too
            assert svc.planner is not None and svc.planner.conflicts is not None
            assert [(c.kind, c.nodepool) for c in svc.planner.conflicts] == [
                (ConflictKind.KARPENTER_BUDGETS, "default")]
            assert svc.metric("ebb_conflicts", kind="KarpenterBudgets", nodepool="default") == 1
            # switched over: Karpenter's budgets 0, ebb's in a DisruptionPolicy
            await publish(bus, nodepool(**SWITCHED_OFF), disruption_policy(budgets=[{"nodes": "100%"}]))
            [decision] = await eventually("n1 proposed", svc.decisions)
            assert [n["name"] for n in decision.nodes] == ["n1"]
            assert svc.planner.conflicts == ()
            sample = svc.metrics.registry.get_sample_value("ebb_conflicts",
                                                           {"kind": "KarpenterBudgets", "nodepool": "default"})
            assert sample is None  # the series is gone
    checks = [e for e in logged if e["event"] == "conflict check"]
    assert len(checks) == 1 and checks[0]["conflicts"] == 1 and checks[0]["enforce"] is True
    [raised] = [e for e in logged if e["event"] == "conflict with Karpenter"]  # once, not every pass
    assert raised["kind"] == "KarpenterBudgets" and raised["nodepool"] == "default" and raised["refused"] is True
    assert raised["log_level"] == "warning" and "set spec.disruption.budgets" in raised["message"]
    [fixed] = [e for e in logged if e["event"] == "conflict fixed"]
    assert fixed["kind"] == "KarpenterBudgets" and fixed["nodepool"] == "default"


async def test_a_clean_start_says_there_is_no_conflict_and_plans(database: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster(nodepool(**SWITCHED_OFF)), disruption_policy(budgets=[{"nodes": "100%"}]),
                  *_claims())
    with planner_logs(monkeypatch) as logged:
        async with Running(bus, database, provider="karpenter") as svc:
            [decision] = await eventually("n1 proposed", svc.decisions)
            assert [n["name"] for n in decision.nodes] == ["n1"]
    [check] = [e for e in logged if e["event"] == "conflict check"]
    assert check["conflicts"] == 0 and check["provider"] == "karpenter"
    assert not [e for e in logged if e["event"] == "conflict with Karpenter"]


async def test_nodeclaims_without_the_karpenter_provider_refuse_their_pool(database: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster(nodepool(**SWITCHED_OFF)), disruption_policy(budgets=[{"nodes": "100%"}]),
                  *_claims())
    async with Running(bus, database, provider="kwok") as svc:
        await _passes(svc)
        assert await svc.decisions() == []
        assert svc.metric("ebb_conflicts", kind="NodeClaimsWithoutKarpenterProvider", nodepool="default") == 1


async def test_a_policy_without_its_nodepool_only_warns(database: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster(nodepool(**SWITCHED_OFF)), disruption_policy(budgets=[{"nodes": "100%"}]),
                  disruption_policy("gone"), *_claims())
    async with Running(bus, database, provider="karpenter") as svc:
        [decision] = await eventually("n1 proposed", svc.decisions)  # nothing refused
        assert [n["name"] for n in decision.nodes] == ["n1"]
        assert svc.metric("ebb_conflicts", kind="PolicyWithoutNodePool", nodepool="") == 1


async def test_without_the_check_nothing_is_refused(database: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster(nodepool(budgets=[{"nodes": "100%"}])), *_claims())
    async with Running(bus, database, provider="karpenter", check_conflicts=False) as svc:
        [decision] = await eventually("n1 proposed", svc.decisions)
        assert [n["name"] for n in decision.nodes] == ["n1"]
        assert svc.planner is not None and svc.planner.conflicts is None


async def test_each_disruption_policy_gets_its_conflict_free_condition(database: str) -> None:
    """A DisruptionPolicy whose NodePool conflicts is ConflictFree False with the conflict's kind and sentence, one
    without a NodePool False as PolicyWithoutNodePool; once the NodePool is switched over its policy turns True, and
    an unchanged condition is not written again."""
    bus = InMemoryBus()
    status = FakePolicyStatus()
    await publish(bus, *cluster(nodepool(budgets=[{"nodes": "100%"}], expire_after="Never")), *_claims(),
                  disruption_policy(budgets=[{"nodes": "100%"}]), disruption_policy("gone"))
    async with Running(bus, database, provider="karpenter", policy_status=status) as svc:
        await eventually("both conditions", lambda: set(status.conditions) == {"default", "gone"})
        default, gone = status.conditions["default"], status.conditions["gone"]
        assert (default["type"], default["status"], default["reason"]) == ("ConflictFree", "False",
                                                                            "KarpenterBudgets")
        assert default["message"].startswith("NodePool default still lets Karpenter disrupt its nodes")
        assert (gone["status"], gone["reason"]) == ("False", "PolicyWithoutNodePool")
        await _passes(svc)
        assert len(status.calls) == 2  # written on change only
        await publish(bus, nodepool(**SWITCHED_OFF))
        await eventually("default conflict-free", lambda: status.conditions["default"]["status"] == "True")
        assert status.conditions["default"]["reason"] == "NoConflict"
        [decision] = await eventually("n1 proposed", svc.decisions)
        assert [n["name"] for n in decision.nodes] == ["n1"]
    assert [policy for policy, _ in status.calls] == ["default", "gone", "default"]
