"""apis/v1/nodepool_budgets_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

Karpenter's cases call ``NodePool.GetAllowedDisruptionsByReason``, ``Budget.GetAllowedDisruptions`` and
``Budget.IsActive`` at a fake clock of 2000-06-15 12:30:30 UTC with 100 nodes; ebb's counterpart is
``ebb.core.budgets.allowed_disruptions`` (the minimum over the active budgets that apply to the reason), with the
budgets parsed from a NodePool document by the real parser. Every case is expressible; none differs in effect.
Karpenter answers MaxInt32 where no budget applies, ebb the pool's size ("nothing limits it"): the same number of
nodes may go. Karpenter's reasons are Empty, Underutilized and Drifted; ebb's add Expired (a budgeted reason in
ebb, docs/decisions.md, Differences: "Expiration is a disruption method with the reason Expired").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ebb.core.budgets import BudgetVerdict, active_window, allowed_disruptions, budget_error
from ebb.core.model import Budget, NodePool
from tests.kit.builders import nodepool, snapshot

CLOCK = datetime(2000, 6, 15, 12, 30, 30, tzinfo=UTC)  # "the middle of the year of 2000, the best year ever"
KARPENTER_REASONS = ("Empty", "Underutilized", "Drifted")
TOTAL = 100


def _budgets() -> list[dict[str, Any]]:
    """The suite's BeforeEach budgets (all on ``* * * * *`` for 1h except the last, ``@weekly``)."""
    every_minute = {"schedule": "* * * * *", "duration": "1h"}
    return [
        {"nodes": "10", **every_minute},
        {"nodes": "100", **every_minute},
        {"nodes": "100%", **every_minute},
        {"reasons": ["Drifted", "Underutilized"], "nodes": "15", **every_minute},
        {"reasons": ["Drifted"], "nodes": "5", **every_minute},
        {"reasons": ["Underutilized", "Drifted", "Empty"], "nodes": "0", "schedule": "@weekly", "duration": "1h"},
    ]


def _pool(budgets: list[dict[str, Any]]) -> NodePool:
    return snapshot(nodepool(budgets=budgets)).nodepools[0]


def _allowed(budgets: list[dict[str, Any]], reason: str, now: datetime = CLOCK) -> BudgetVerdict:
    return allowed_disruptions(_pool(budgets), reason, now, total=TOTAL, deleting=0, not_ready=0)


# -- Context("GetAllowedDisruptionsByReason") ---------------------------------------------------------------------

def _all_active() -> list[dict[str, Any]]:
    budgets = _budgets()
    budgets[5]["schedule"] = "* * * * *"
    return budgets


def _all_yearly() -> list[dict[str, Any]]:
    return [{**b, "schedule": "@yearly", "duration": "1h"} for b in _budgets()]


def _reasons_yearly() -> list[dict[str, Any]]:
    budgets = _budgets()
    budgets[3]["schedule"] = budgets[4]["schedule"] = "@yearly"
    return budgets


def _with_empty_4() -> list[dict[str, Any]]:
    return [*_budgets(), {"schedule": "* * * * *", "nodes": "4", "duration": "1h", "reasons": ["Empty"]}]


# (Karpenter's case, budgets, allowed per reason: None for "no budget applies")
BY_REASON = [
    ("should return 0 for all reasons if a budget is active for all reasons", _all_active(),
     {"Empty": 0, "Underutilized": 0, "Drifted": 0}),
    ("should return MaxInt32 for all reasons when there are no active budgets", _all_yearly(),
     {"Empty": None, "Underutilized": None, "Drifted": None}),
    ("should ignore reason-defined budgets when inactive", _reasons_yearly(),
     {"Empty": 10, "Underutilized": 10, "Drifted": 10}),
    ("should return the budget for all disruption reasons when undefined", _budgets()[:1],
     {"Empty": 10, "Underutilized": 10, "Drifted": 10, "Expired": 10}),
    ("should get the minimum budget for each reason", _with_empty_4(),
     {"Empty": 4, "Drifted": 5, "Underutilized": 10}),
]


@pytest.mark.parametrize(("budgets", "expected"), [c[1:] for c in BY_REASON], ids=[c[0] for c in BY_REASON])
def test_get_allowed_disruptions_by_reason(budgets: list[dict[str, Any]], expected: dict[str, int | None]) -> None:
    """nodepool_budgets_test.go, Describe("Budgets"), Context("GetAllowedDisruptionsByReason")."""
    for reason, allowed in expected.items():
        verdict = _allowed(budgets, reason)
        assert not verdict.invalid
        if allowed is None:  # Karpenter: MaxInt32; ebb: every node of the pool, and says no budget applies
            assert verdict.allowed == TOTAL
            assert "no budget of NodePool default applies" in verdict.detail
        else:
            assert verdict.allowed == allowed, (reason, verdict.detail)


# -- Context("AllowedDisruptions") ------------------------------------------------------------------------------------

# (Karpenter's case, budget 0 changed so, allowed, invalid)
ALLOWED = [
    ("should return zero values if a schedule is invalid", {"schedule": "@wrongly"}, 0, True),
    ("should return zero values if a nodes value is invalid", {"nodes": "1000a%"}, 0, True),
    ("should return MaxInt32 when a budget is inactive", {"schedule": "@yearly", "duration": "1h"}, TOTAL, False),
    ("should return the int value when a budget is active", {}, 10, False),
    ("should return the string value when a budget is active", {"nodes": "100%"}, 100, False),
]


@pytest.mark.parametrize(("change", "allowed", "invalid"), [c[1:] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_allowed_disruptions(change: dict[str, str], allowed: int, invalid: bool) -> None:
    """nodepool_budgets_test.go, Describe("Budgets"), Context("AllowedDisruptions"): one budget on its own. An
    invalid one allows nothing (ebb: for the whole pool, and says why); an inactive one limits nothing."""
    verdict = _allowed([{**_budgets()[0], **change}], "Empty")
    assert (verdict.allowed, verdict.invalid) == (allowed, invalid)
    if invalid:
        assert "is invalid" in verdict.detail


# -- Context("IsActive") ----------------------------------------------------------------------------------------------

# (Karpenter's case, clock, schedule, duration, active)
IS_ACTIVE = [
    # June 0 of 2000 at midnight one hour ahead of UTC is 2000-05-30 23:00 UTC: the daily 00:00 UTC window of 30m
    # is over (read in the clock's own zone, 00:00 would be a hit)
    ("should always consider a schedule and time in UTC",
     datetime(2000, 5, 31, 0, 0, tzinfo=timezone(timedelta(hours=1))), "@daily", "30m", False),
    ("should return that a schedule is active when schedule and duration are nil", CLOCK, None, None, True),
    ("should return that a schedule is active", CLOCK, "* * * * *", "1h", True),
    ("should return that a schedule is inactive", CLOCK, "@yearly", "1h", False),
    ("should return that a schedule is active when the schedule hit is in the middle of the duration",
     datetime(1000, 1, 1, 12, 0, tzinfo=UTC), "@yearly", "24h", True),
    ("should return that a schedule is active when the duration is longer than the recurrence",
     datetime(2024, 1, 7, tzinfo=UTC), "@daily", "48h", True),
    ("should return that a schedule is inactive when the schedule hit is after the duration",
     datetime(2024, 1, 7, tzinfo=UTC), "30 6 * * SUN", "6h", False),
]


@pytest.mark.parametrize(("now", "schedule", "duration", "active"), [c[1:] for c in IS_ACTIVE],
                         ids=[c[0] for c in IS_ACTIVE])
def test_is_active(now: datetime, schedule: str | None, duration: str | None, active: bool) -> None:
    """nodepool_budgets_test.go, Describe("Budgets"), Context("IsActive"): ``active_window`` is Budget.IsActive."""
    budget = Budget(nodes="10", schedule=schedule, duration=duration)
    assert budget_error(budget) is None
    assert (active_window(budget, now) is not None) is active


def test_is_active_should_return_an_error_indicating_why_the_cron_fails_to_parse() -> None:
    """nodepool_budgets_test.go, Describe("Budgets"), Context("IsActive"), It("should return an error indicating why
    the cron fails to parse"): ``0 0 * * tue-mon`` is a range whose beginning (2) is beyond its end (1); the budget
    is invalid, so the pool allows nothing and says why."""
    budgets = [{"nodes": "10", "schedule": "0 0 * * tue-mon", "duration": "6h"}]
    verdict = _allowed(budgets, "Empty", datetime(2024, 1, 7, tzinfo=UTC))
    assert (verdict.allowed, verdict.invalid) == (0, True)
    assert "beginning of range (2) beyond end of range (1)" in verdict.detail
