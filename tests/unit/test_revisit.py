"""``PassResult.revisit_at`` (ebb.core.revisit): the first moment a pass over the same snapshot could decide
differently, one rule that reads ``now`` at a time, and that the pass indeed answers the same just before it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.plan import command_json
from ebb.core.revisit import revisit_at
from tests.kit.builders import NOW, OLD, ago, hold, later, node, nodepool, pod, snapshot, ts

E = 100 * 3600  # an expireAfter of 100 h, in seconds


def aged(fraction: float) -> str:
    """A creation time ``fraction`` of an expireAfter of 100 h before NOW."""
    return ago(seconds=fraction * E)


# (case, documents, the expected revisit_at)
CASES: list[tuple[str, list[Any], datetime | None]] = [
    ("nothing moves with time", [nodepool(expire_after="Never"), node("n1"), pod("a", "n1")], None),
    ("consolidateAfter ripens", [nodepool(consolidate_after="10m"), node("n1"), pod("a", "n1", started=ago(minutes=4))],
     NOW + timedelta(minutes=6)),
    ("consolidateAfter ripened long ago", [nodepool(consolidate_after="10m", expire_after="Never"), node("n1"),
                                           pod("a", "n1")], None),
    ("expireAfter", [nodepool(expire_after="720h"), node("n1", created=OLD), pod("a", "n1")],
     datetime(2026, 11, 20, tzinfo=UTC) + timedelta(hours=720)),
    ("no expireAfter: Karpenter's CRD default", [nodepool(), node("n1", created=OLD), pod("a", "n1")],
     datetime(2026, 11, 20, tzinfo=UTC) + timedelta(hours=720)),
    ("a do-not-disrupt duration", [nodepool(), node("n1"), pod("a", "n1", started=ago(minutes=10), annotations={
        "karpenter.sh/do-not-disrupt": "30m"})], NOW + timedelta(minutes=20)),
    ("a finished pod's do-not-disrupt protects nothing", [nodepool(expire_after="Never"), node("n1"), pod(
        "a", "n1", phase="Succeeded", started=ago(minutes=10), annotations={"karpenter.sh/do-not-disrupt": "30m"})],
     None),
    ("a pod on no node of the snapshot keeps its duration", [nodepool(), node("n1"), pod(
        "a", "gone", started=ago(minutes=10), annotations={"karpenter.sh/do-not-disrupt": "30m"})],
     NOW + timedelta(minutes=20)),
    ("do-not-disrupt true never ends", [nodepool(expire_after="Never"), node("n1"), pod("a", "n1", annotations={
        "karpenter.sh/do-not-disrupt": "true"})], None),
    ("a hold's expiry", [nodepool(), node("n1"), pod("a", "n1"), hold("h", expires_at=later(hours=1))],
     NOW + timedelta(hours=1)),
    ("an expired hold", [nodepool(expire_after="Never"), node("n1"), pod("a", "n1"),
                         hold("h", expires_at=ago(hours=1))], None),
    ("a stabilization window's end", [nodepool(stabilization_window="20m"), node("n1", created=ago(minutes=5)),
                                      pod("a", "n1")], NOW + timedelta(minutes=15)),
    # NOW is Monday 18:30 UTC: the window opened at 17:00 and closes at 20:00
    ("a budget window closes", [nodepool(budgets=[{"nodes": "10%"}, {"nodes": "0", "schedule": "0 17 * * 1-5",
                                                                     "duration": "3h"}]), node("n1"), pod("a", "n1")],
     NOW + timedelta(hours=1, minutes=30)),
    ("a budget window opens", [nodepool(budgets=[{"nodes": "0", "schedule": "0 19 * * *", "duration": "1h"}]),
                               node("n1"), pod("a", "n1")], NOW + timedelta(minutes=30)),
    ("a budget of 0m never opens", [nodepool(budgets=[{"nodes": "0", "schedule": "0 19 * * *", "duration": "0m"}],
                                    expire_after="Never"), node("n1"), pod("a", "n1")], None),
    ("an invalid budget never changes", [nodepool(budgets=[{"nodes": "0", "schedule": "not a cron",
                                                            "duration": "1h"}], expire_after="Never"),
                                         node("n1"), pod("a", "n1")], None),
    # b: 1 pod at half its life, cost 0.5 falling 1/E per s; a: 2 pods at 0.6 of its life, cost 0.8 falling 2/E:
    # a overtakes b after 0.3 E (expiries at 0.4 E and 0.5 E come later), at 2026-11-25 00:30; the lifetime is
    # measured on a grid of E / 720 = 500 s (NOW is 100 s past a point of it), so the costs swap at the next point
    ("two disruption costs cross", [
        nodepool(expire_after="100h"),
        node("a", created=aged(0.6)), pod("a1", "a"), pod("a2", "a"),
        node("b", created=aged(0.5)), pod("b1", "b")],
     datetime(2026, 11, 25, 0, 36, 40, tzinfo=UTC)),
]


@pytest.mark.parametrize(("docs", "expected"), [pytest.param(d, e, id=c) for c, d, e in CASES])
def test_revisit_at(docs: list[Any], expected: datetime | None) -> None:
    options = EngineOptions()
    view = options.view_of(snapshot(*docs), NOW)
    got = revisit_at(view)
    if expected is None or got is None:
        assert got == expected
    else:  # a crossing of two costs is computed in floating point
        assert abs((got - expected).total_seconds()) < 1e-3
    result = run_pass(view, options)
    assert result.revisit_at == got
    if got is not None and got > NOW:
        # just before it, the pass answers as at NOW
        before = run_pass(options.view_of(view.snapshot, got - timedelta(microseconds=1)), options)
        assert [command_json(c) for c in before.commands] == [command_json(c) for c in result.commands]
        assert before.budgets == result.budgets


def test_equal_costs_on_different_lines_swap_at_the_next_point_of_the_grid() -> None:
    """Two candidates with the same disruption cost at the grid point of NOW (100 s before it, on the grid of 500 s
    that an expireAfter of 100 h makes) but falling at different rates swap places at the next point: the answer
    is reused until then, and a pass just before it orders them as at NOW."""
    at = NOW - timedelta(seconds=100)
    docs = [nodepool(expire_after="100h"),
            node("a", created=ts(at - timedelta(seconds=0.5 * E))), pod("a1", "a"), pod("a2", "a"),  # 2 x 0.5
            node("b", created=ts(at)), pod("b1", "b")]  # 1 x 1.0
    view = EngineOptions().view_of(snapshot(*docs), NOW)
    assert view.lifetime_at == at and view.lifetime_step == 500
    assert view.disruption_cost(view.nodes["a"]) == view.disruption_cost(view.nodes["b"]) == 1.0
    assert revisit_at(view) == NOW + timedelta(seconds=400)
    before = EngineOptions().view_of(view.snapshot, NOW + timedelta(seconds=399))
    assert before.order(["a", "b"]) == view.order(["a", "b"])
    after = EngineOptions().view_of(view.snapshot, NOW + timedelta(seconds=400))
    assert after.order(["a", "b"]) == ["a", "b"] and view.order(["a", "b"]) == ["b", "a"]


@pytest.mark.parametrize(("expire_after", "step"), [
    ("720h", 3600),  # Karpenter's default: an hour
    ("100h", 500),
    ("10m", 1),  # never below a second
    ("Never", None),  # no lifetime to measure
])
def test_the_lifetime_grid_is_the_shortest_expire_after_over_720(expire_after: str, step: int | None) -> None:
    view = EngineOptions().view_of(snapshot(nodepool(expire_after=expire_after), node("n1"), pod("a", "n1")), NOW)
    assert view.lifetime_step == step
    assert view.lifetime_at == (NOW if step is None else NOW - timedelta(seconds=(NOW.timestamp() % step)))


def test_an_expiry_bends_the_disruption_cost_at_the_next_point_of_the_grid() -> None:
    """A node that expired 50 s ago, after the grid point of NOW (100 s ago), is still measured before its expiry;
    its cost falls to 0 at the next point, which is when the order may change (its expiration's explanation says
    how long ago it was launched, words a reused answer keeps)."""
    view = EngineOptions().view_of(snapshot(nodepool(expire_after="100h"), node("a", created=ago(seconds=E + 50)),
                                            pod("a1", "a")), NOW)
    assert view.disruption_cost(view.nodes["a"]) > 0
    assert revisit_at(view) == NOW + timedelta(seconds=400)
    assert EngineOptions().view_of(view.snapshot, NOW + timedelta(seconds=400)).disruption_cost(view.nodes["a"]) == 0
