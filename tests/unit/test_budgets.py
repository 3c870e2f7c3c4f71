"""Disruption budgets (ebb.core.budgets.allowed_disruptions and the budgets of `ebb plan`)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from ebb.core.budgets import active_window, allowed_disruptions, budget_error, last_fire, next_fire
from ebb.core.methods.base import EngineOptions
from ebb.core.model import REASONS, Budget, NodePool
from tests.kit.builders import (
    NOW,
    blocked_of,
    budget_of,
    disrupted,
    disruption_policy,
    node,
    nodeclaim,
    nodepool,
    plan_dict,
    pod,
    snapshot,
)


def _pool(budgets: Any) -> NodePool:
    return snapshot(nodepool(budgets=budgets)).nodepools[0]


def _at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 23, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(("budgets", "total", "deleting", "not_ready", "allowed"), [
    ([{"nodes": "3"}], 10, 0, 0, 3),
    ([{"nodes": "3"}], 2, 0, 0, 3),  # a count is not capped by the pool size
    ([{"nodes": "10%"}], 15, 0, 0, 2),  # 1.5 rounded up
    ([{"nodes": "10%"}], 10, 0, 0, 1),
    ([{"nodes": "10%"}], 1, 0, 0, 1),
    ([{"nodes": "0%"}], 10, 0, 0, 0),
    ([{"nodes": "100%"}], 7, 0, 0, 7),
    ([{"nodes": "50%"}], 10, 2, 1, 2),  # minus deleting and NotReady
    ([{"nodes": "2"}], 10, 3, 0, 0),  # floored at 0
    ([{"nodes": "2"}], 10, 1, 2, 0),
    ([{"nodes": "0"}], 10, 0, 0, 0),
    ([{"nodes": "50%"}, {"nodes": "3"}], 10, 0, 0, 3),  # the minimum of several
    ([{"nodes": "3"}, {"nodes": "50%"}, {"nodes": "20%"}], 10, 0, 0, 2),
    ([{"nodes": "3"}, {"nodes": "20%"}], 10, 1, 0, 1),
    # Karpenter keeps a count in 32 bits (strconv.Atoi, then intstr.FromInt): 2^32 is 0, 2^31 negative, 2^32+2 is 2
    ([{"nodes": "4294967296"}], 10, 0, 0, 0),
    ([{"nodes": "2147483648"}], 10, 0, 0, 0),
    ([{"nodes": "4294967298"}], 10, 0, 0, 2),
    ([{"nodes": "2147483647"}], 10, 0, 0, 2147483647),
], ids=lambda v: str(v) if not isinstance(v, list) else "+".join(b["nodes"] for b in v))
def test_count_and_percent(budgets: list[dict[str, Any]], total: int, deleting: int, not_ready: int,
                           allowed: int) -> None:
    verdict = allowed_disruptions(_pool(budgets), "Underutilized", NOW, total=total, deleting=deleting,
                                  not_ready=not_ready)
    assert verdict.allowed == allowed
    assert not verdict.invalid


# Karpenter's karpenter_nodepools_allowed_disruptions is the deciding budget's nodes before the disrupting ones
# are taken off, and karpenter_nodepools_nodes_consuming_budgets the nodes counted against it
# (pkg/controllers/disruption/helpers.go BuildDisruptionBudgetMapping)
@pytest.mark.parametrize(("budgets", "reason", "total", "deleting", "not_ready", "limit", "disrupting", "allowed"), [
    ([{"nodes": "50%"}], "Underutilized", 10, 2, 1, 5, 3, 2),
    ([{"nodes": "2"}], "Underutilized", 10, 3, 0, 2, 3, 0),  # the limit stays, the allowance floors at 0
    ([{"nodes": "3"}, {"nodes": "20%"}], "Underutilized", 10, 1, 0, 2, 1, 1),  # the minimum's
    ([{"nodes": "0", "reasons": ["Drifted"]}], "Empty", 4, 1, 0, 4, 1, 4),  # no budget applies: the pool's
    ([{"nodes": "x"}], "Empty", 4, 1, 1, 0, 2, 0),  # invalid: fails closed, still counts its disrupting nodes
], ids=["percent", "floored", "minimum", "no-budget", "invalid"])
def test_the_limit_and_the_disrupting_nodes_karpenters_gauges_show(
        budgets: list[dict[str, Any]], reason: str, total: int, deleting: int, not_ready: int, limit: int,
        disrupting: int, allowed: int) -> None:
    verdict = allowed_disruptions(_pool(budgets), reason, NOW, total=total, deleting=deleting, not_ready=not_ready)
    assert (verdict.limit, verdict.disrupting, verdict.allowed) == (limit, disrupting, allowed)


def test_no_budgets_means_ten_percent() -> None:
    pool = _pool(None)
    assert allowed_disruptions(pool, "Empty", NOW, total=20, deleting=0, not_ready=0).allowed == 2
    assert allowed_disruptions(pool, "Drifted", NOW, total=5, deleting=0, not_ready=0).allowed == 1


MAINTENANCE_FREEZE = [{"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"}, {"nodes": "100%"}]
DAILY = [{"nodes": "0", "schedule": "@daily", "duration": "1h"}, {"nodes": "100%"}]
ONLY_IN_WINDOW = [{"nodes": "5", "schedule": "0 9 * * mon-fri", "duration": "8h"}]


@pytest.mark.parametrize(("budgets", "now", "allowed"), [
    (MAINTENANCE_FREEZE, _at(18, 30), 0),  # inside 18:00-19:00
    (MAINTENANCE_FREEZE, _at(18, 0), 0),  # the window starts at its first second
    (MAINTENANCE_FREEZE, _at(19, 0), 10),  # ... and has ended at 19:00
    (MAINTENANCE_FREEZE, _at(17, 59), 10),
    (DAILY, _at(0, 30), 0),
    (DAILY, _at(18, 30), 10),
    (ONLY_IN_WINDOW, _at(10, 0), 5),  # Monday 2026-11-23, inside 09:00-17:00
    (ONLY_IN_WINDOW, _at(18, 30), 10),  # no budget active: nothing limits it
], ids=["freeze-inside", "freeze-start", "freeze-end", "freeze-before", "daily-inside", "daily-outside",
        "weekday-inside", "weekday-outside"])
def test_schedule_windows(budgets: list[dict[str, Any]], now: datetime, allowed: int) -> None:
    verdict = allowed_disruptions(_pool(budgets), "Underutilized", now, total=10, deleting=0, not_ready=0)
    assert verdict.allowed == allowed


@pytest.mark.parametrize(("reason", "allowed"), [("Drifted", 0), ("Empty", 10), ("Expired", 10),
                                                 ("Underutilized", 10)])
def test_reasons_filter(reason: str, allowed: int) -> None:
    pool = _pool([{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "100%"}])
    assert allowed_disruptions(pool, reason, NOW, total=10, deleting=0, not_ready=0).allowed == allowed


@pytest.mark.parametrize("budget", [
    {"nodes": "abc"},
    {"nodes": "10.5%"},
    {"nodes": "150%"},
    {"nodes": "-1"},
    {"nodes": "1", "schedule": "@daily"},  # schedule without duration
    {"nodes": "1", "duration": "1h"},  # duration without schedule
    {"nodes": "1", "schedule": "not a cron", "duration": "1h"},
    {"nodes": "1", "schedule": "0 25 * * *", "duration": "1h"},
    {"nodes": "1", "schedule": "@daily", "duration": "soon"},
    {"nodes": "1", "reasons": ["Bored"]},
    {"nodes": "1", "schedule": "0 0 * * tue-mon", "duration": "1h"},  # croniter wraps it around; robfig/cron rejects
    {"nodes": "1", "schedule": "0 22-2 * * *", "duration": "1h"},
    {"nodes": "1", "schedule": "0 0 1 dec-jan/2 *", "duration": "1h"},
    # croniter reads these (a sixth field of seconds, Sunday as 7, L, #, W); robfig/cron's standard parser does not
    {"nodes": "1", "schedule": "0 0 9 * * 1-5", "duration": "8h"},
    {"nodes": "1", "schedule": "0 9 * * 7", "duration": "1h"},
    {"nodes": "1", "schedule": "0 9 L * *", "duration": "1h"},
    {"nodes": "1", "schedule": "0 9 * * 1#2", "duration": "1h"},
    {"nodes": "1", "schedule": "0 9 15W * *", "duration": "1h"},
    {"nodes": "1", "schedule": "*/0 * * * *", "duration": "1h"},
    {"nodes": "1", "schedule": "@daily", "duration": "Never"},
    {"nodes": "99999999999999999999"},  # beyond strconv.Atoi, and no percentage: Karpenter fails closed
], ids=["nodes-abc", "fraction", "over-100", "negative", "schedule-only", "duration-only", "bad-cron",
        "bad-hour", "bad-duration", "bad-reason", "reversed-weekdays", "reversed-hours", "reversed-months",
        "six-fields", "sunday-as-7", "last-day", "nth-weekday", "nearest-weekday", "zero-step", "never",
        "beyond-64-bits"])
def test_invalid_budget_fails_closed(budget: dict[str, Any]) -> None:
    pool = _pool([{"nodes": "100%"}, budget])
    for reason in REASONS:
        verdict = allowed_disruptions(pool, reason, NOW, total=10, deleting=0, not_ready=0)
        assert verdict.allowed == 0
        assert verdict.invalid
        assert "invalid" in verdict.detail


# the CRDs' hours and minutes, and Go durations to the second, which ebb's back-test holds a budget to
@pytest.mark.parametrize("duration", ["30m", "8h", "1h30m", "1h30m0s", "2h0s", "0m", "0h", "150s", "1.5h"])
def test_a_duration_the_crds_admit_is_valid(duration: str) -> None:
    assert budget_error(Budget(nodes="1", schedule="@daily", duration=duration)) is None


@pytest.mark.parametrize("now", [_at(0, 0), _at(0, 0) + timedelta(microseconds=1), _at(18, 30)])
def test_a_window_of_0m_is_never_active(now: datetime) -> None:
    """Karpenter's ``Budget.IsActive`` looks for a schedule hit after now - 0: none is, so the budget never
    applies (it is not a misconfiguration that stops the pool)."""
    pool = _pool([{"nodes": "0", "schedule": "@daily", "duration": "0m"}, {"nodes": "100%"}])
    verdict = allowed_disruptions(pool, "Drifted", now, total=10, deleting=0, not_ready=0)
    assert (verdict.allowed, verdict.invalid) == (10, False)


def test_a_budget_is_judged_alike_in_a_nodepool_and_in_its_disruption_policy() -> None:
    budgets = [{"nodes": "100%"}, {"nodes": "0", "schedule": "@daily", "duration": "Never"}]
    for pool in (_pool(budgets), snapshot(nodepool(), disruption_policy(budgets=budgets)).nodepools[0]):
        verdict = allowed_disruptions(pool, "Empty", NOW, total=10, deleting=0, not_ready=0)
        assert (verdict.allowed, verdict.invalid) == (0, True)
        assert "duration 'Never' is not a time" in verdict.detail


@pytest.mark.parametrize("schedule", [
    "0 9 * * MON-FRI", "*/15 9-17 ? * *", "0 0 1 jan,jul *", "30 2 */2 * sun", "5/15 * * * *", "0 0 * * 0-6",
    "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
])
def test_a_schedule_robfig_cron_reads_is_valid(schedule: str) -> None:
    assert budget_error(Budget(nodes="1", schedule=schedule, duration="1h")) is None


def test_a_six_field_schedule_fails_closed_and_says_why() -> None:
    """croniter would read ``0 0 9 * * 1-5`` as midnight on the 9th (its first field the seconds): a budget of 0
    meant for working hours would never be active. Karpenter's parser refuses it, and the pool allows nothing."""
    pool = _pool([{"nodes": "100%"}, {"nodes": "0", "schedule": "0 0 9 * * 1-5", "duration": "8h"}])
    verdict = allowed_disruptions(pool, "Empty", NOW, total=10, deleting=0, not_ready=0)
    assert (verdict.allowed, verdict.invalid) == (0, True)
    assert "expected exactly 5 fields, found 6" in verdict.detail


def test_a_schedule_is_read_in_utc_whatever_the_zone_of_now() -> None:
    """18:30 at +05:00 is 13:30 UTC: a window from 18:00 UTC is not open, one from 13:00 UTC is."""
    now = datetime(2026, 11, 23, 18, 30, tzinfo=timezone(timedelta(hours=5)))
    evening = _pool([{"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"}, {"nodes": "100%"}])
    afternoon = _pool([{"nodes": "0", "schedule": "0 13 * * *", "duration": "1h"}, {"nodes": "100%"}])
    assert allowed_disruptions(evening, "Empty", now, total=10, deleting=0, not_ready=0).allowed == 10
    assert allowed_disruptions(afternoon, "Empty", now, total=10, deleting=0, not_ready=0).allowed == 0


def test_invalid_budget_blocks_the_pool_in_the_plan() -> None:
    out = plan_dict(nodepool(budgets=[{"nodes": "abc"}]), node("busy"), pod("web", "busy", cpu="1500m"),
                    node("idle"))
    assert out["commands"] == []
    assert all(b["allowed"] == 0 for b in out["budgets"])
    reason = blocked_of(out, "idle")["reason"]
    assert "invalid" in reason
    assert "'abc'" in reason


@pytest.mark.parametrize(("budgets", "allowed"), [
    ([{"nodes": "3"}], 1),  # 3 - 1 deleting - 1 NotReady
    ([{"nodes": "50%"}], 1),  # ceil(5 * 50%) = 3 - 2
    ([{"nodes": "2"}], 0),
])
def test_plan_budgets_count_deleting_and_not_ready_nodes(budgets: list[dict[str, Any]], allowed: int) -> None:
    out = plan_dict(nodepool(budgets=budgets), node("a"), node("b"), node("c"), node("gone", deleting=True),
                    node("sick", ready=False))
    for reason in REASONS:
        assert budget_of(out, "default", reason) == allowed


def _unreported(name: str) -> dict[str, Any]:
    """A node whose status has no Ready condition at all."""
    doc = node(name)
    doc["status"]["conditions"] = [c for c in doc["status"]["conditions"] if c["type"] != "Ready"]
    return doc


DISRUPTED = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("others", "allowed"), [
    ([], 3),
    ([node("sick", ready=False)], 2),  # NotReady
    ([_unreported("mute")], 2),  # no Ready condition: Karpenter's GetCondition gives "", not True
    ([node("going", ready=False, taints=DISRUPTED)], 2),  # NotReady and being disrupted: counted once
    ([node("gone", ready=False, deleting=True)], 2),  # NotReady and deleting: counted once
])
def test_plan_budgets_count_each_disrupting_node_once(others: list[dict[str, Any]], allowed: int) -> None:
    """Karpenter's budget mapping subtracts a node whose Ready condition is not True (none at all included) or that
    is marked for deletion, once whichever of them it is."""
    out = plan_dict(nodepool(budgets=[{"nodes": "3"}]), node("a"), node("b"), *others)
    assert budget_of(out, "default", "Underutilized") == allowed


def test_node_tainted_disrupted_counts_as_deleting() -> None:
    out = plan_dict(nodepool(budgets=[{"nodes": "2"}]), node("a"),
                    node("b", taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]))
    assert budget_of(out, "default", "Empty") == 1


def test_plan_budgets_one_entry_per_nodepool_and_reason() -> None:
    out = plan_dict(nodepool("a", budgets=None), nodepool("b", budgets=[{"nodes": "0", "reasons": ["Empty"]}]),
                    *[node(f"a{i}", pool="a") for i in range(3)], node("b0", pool="b"))
    rows = [(b["nodePool"], b["reason"]) for b in out["budgets"]]
    assert len(rows) == len(set(rows)) == 8
    assert set(rows) == set(itertools.product(["a", "b"], REASONS))
    assert budget_of(out, "a", "Empty") == 1  # default 10% of 3, rounded up
    assert budget_of(out, "b", "Empty") == 0
    assert budget_of(out, "b", "Drifted") == 1  # no budget applies to Drifted: all of the pool's 1 node


@pytest.mark.parametrize(("require_nodeclaim", "allowed"), [
    (True, 1),  # next to Karpenter: 20% of the 5 nodes it manages (a NodeClaim each)
    (False, 2),  # standalone every owned node counts, the one without a NodeClaim too: 20% of 6, rounded up
])
def test_next_to_karpenter_only_nodes_with_a_nodeclaim_count_in_a_budget(require_nodeclaim: bool,
                                                                         allowed: int) -> None:
    """Karpenter's ``BuildDisruptionBudgetMapping`` skips a node that is not ``Managed`` (no NodeClaim): a Node of the
    NodePool without one is in no budget's total next to Karpenter."""
    docs: list[Any] = [nodepool(budgets=[{"nodes": "20%"}])]
    for i in range(5):
        docs += [node(f"e{i}"), nodeclaim(f"claim-{i}", f"e{i}")]
    docs.append(node("orphan"))
    view = EngineOptions(require_nodeclaim=require_nodeclaim).view_of(snapshot(*docs), NOW)
    assert view.budgets[("default", "Empty")].allowed == allowed
    out = plan_dict(*docs, require_nodeclaim=require_nodeclaim)
    assert len(disrupted(out)) == allowed


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["0 17 * * 1-5", "*/5 * * * *", "0 0 1 * *", "30 9 * * *", "@daily", "@hourly"]),
       st.lists(st.sampled_from([timedelta(microseconds=1), timedelta(seconds=1), timedelta(seconds=15),
                                 timedelta(minutes=5), timedelta(hours=7), timedelta(days=3)]), min_size=1,
                max_size=30))
def test_a_schedule_fire_kept_between_moments_is_the_one_croniter_finds(schedule: str,
                                                                          steps: list[timedelta]) -> None:
    """A budget's last fire time is kept until the next fire (`last_fire`): moments that walk across fires, a
    microsecond before one included, get what croniter finds for each of them afresh."""
    moment = datetime(2026, 11, 23, 16, 59, 59, 999_999, tzinfo=UTC)  # a microsecond before a fire of most
    for step in steps:
        assert last_fire(schedule, moment) == croniter(schedule, moment + timedelta(microseconds=1)).get_prev(datetime)
        moment += step


# (schedule, now, active): what Karpenter v1.14.1's Budget.IsActive answers, run with robfig/cron v3.0.1 for a window
# of 1h. robfig matches a day on both day fields when either is written as "any" (``*``, ``?``, ``*/1``), on either
# of them otherwise (``dayMatches``), whatever values the fields hold; a schedule that never fires (a day that does not
# exist) gives the zero time, which IsActive reads as active; spaces around a descriptor are trimmed, empty parts of a
# field dropped, and ``+5`` is 5 (Go's Atoi). 2026-11-23 is a Monday.
KARPENTER_IS_ACTIVE = [
    ('0 0 30 2 *', "2026-11-24T10:00:00Z", True),
    ('0 22 31 nov *', "2026-11-24T10:00:00Z", True),
    ('0 22 */2 * 0-6', "2026-11-24T22:30:00Z", True),
    ('0 22 */2 * 0-6', "2026-11-23T22:30:00Z", True),
    ('0 9 1-31 * */2', "2026-11-24T09:30:00Z", True),
    ('0 9 1-31 * */2', "2026-11-23T09:30:00Z", True),
    ('0 0 */1 * mon', "2026-11-24T00:30:00Z", False),
    ('0 0 */1 * mon', "2026-11-23T00:30:00Z", True),
    ('0 0 * * 1-1', "2026-11-24T00:30:00Z", False),
    ('0 0 * * 1-1', "2026-11-23T00:30:00Z", True),
    ('0 0 15 * mon', "2026-11-16T00:30:00Z", True),
    ('0 0 15 * mon', "2026-11-15T00:30:00Z", True),
    ('0 0 15 * mon', "2026-11-17T00:30:00Z", False),
    ('@daily ', "2026-11-24T00:30:00Z", True),
    ('+5 9 * * *', "2026-11-24T09:30:00Z", True),
    ('0 0 * * ,1', "2026-11-23T00:30:00Z", True),
    ('0 0 * * ,1', "2026-11-24T00:30:00Z", False),
    ('0 9 ?/1 * *', "2026-11-24T09:30:00Z", True),
    ('0 9 */2 * *', "2026-11-24T09:30:00Z", False),
    ('0 9 */2 * *', "2026-11-25T09:30:00Z", True),
]


@pytest.mark.parametrize(("schedule", "now", "active"), KARPENTER_IS_ACTIVE,
                         ids=[f"{s.strip()} at {n}" for s, n, _ in KARPENTER_IS_ACTIVE])
def test_a_schedule_is_active_when_karpenters_is(schedule: str, now: str, active: bool) -> None:
    budget = Budget(nodes="0", schedule=schedule, duration="1h")
    assert budget_error(budget) is None
    at = datetime.fromisoformat(now)
    assert (active_window(budget, at) is not None) == active
    pool = _pool([{"nodes": "0", "schedule": schedule, "duration": "1h"}, {"nodes": "100%"}])
    verdict = allowed_disruptions(pool, "Empty", at, total=10, deleting=0, not_ready=0)
    assert verdict.allowed == (0 if active else 10)


def test_a_schedule_that_never_fires_is_always_active_and_says_so() -> None:
    """robfig's Next gives up after five years and answers the zero time: Karpenter's IsActive reads a budget of
    ``0 0 30 2 *`` as active at every moment, so a ``nodes: 0`` budget of that schedule stops its reasons for good."""
    pool = _pool([{"nodes": "0", "schedule": "0 0 30 2 *", "duration": "1h"}, {"nodes": "100%"}])
    verdict = allowed_disruptions(pool, "Empty", NOW, total=10, deleting=0, not_ready=0)
    assert (verdict.allowed, verdict.invalid) == (0, False)
    assert "never fires" in verdict.detail
    assert next_fire("0 0 30 2 *", NOW) is None


@pytest.mark.parametrize("nodes", [" 50%", "50% ", " 3"])
def test_a_nodes_value_with_spaces_fails_closed(nodes: str) -> None:
    """The CRDs' pattern refuses spaces in ``nodes``, and Karpenter's GetAllowedDisruptionsByReason fails closed on a
    value it cannot read: the budget allows nothing."""
    verdict = allowed_disruptions(_pool([{"nodes": nodes}]), "Empty", NOW, total=10, deleting=0, not_ready=0)
    assert (verdict.allowed, verdict.invalid) == (0, True)
