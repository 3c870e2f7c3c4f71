"""`ebb backtest`'s table: each policy's figures side by side, the goal's churn (launches + disruption decisions)
and, beside the baseline, each other policy's churn and cost against it."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ebb_cli.backtest_cmd import _table


def _policy(name: str, cost: float, launches: int, disruptions: dict[str, int]) -> dict[str, Any]:
    return {"name": name, "summary": {
        "node_hours_cost": cost, "peak_nodes": 9, "mean_nodes": 6.5, "launches": launches,
        "disruptions": disruptions, "evictions": 12, "pods_evicted_more_than_once": 1,
        "pending_seconds_p50": 1.0, "pending_seconds_p95": 63.0, "churn_cost": 0.5}}


def _rows(result: dict[str, Any]) -> dict[str, list[str]]:
    console = Console(width=200, record=True)
    console.print(_table(result))
    rows: dict[str, list[str]] = {}
    for line in console.export_text().splitlines():
        cells = [c.strip() for c in line.strip("│").split("│")]
        if len(cells) > 1 and cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def _result(*policies: dict[str, Any]) -> dict[str, Any]:
    return {"trace": "batch-bursts", "duration_seconds": 3600.0, "start": "2026-11-23T18:30:00Z", "seed": 0,
            "policies": list(policies)}


def test_the_table_gives_churn_and_each_policy_against_the_baseline() -> None:
    rows = _rows(_result(_policy("karpenter-default", 100.0, 30, {"emptiness": 8, "drift": 2}),
                         _policy("calm", 108.0, 12, {"emptiness": 3}),
                         _policy("idle", 100.0, 40, {})))
    assert rows["disruptions"] == ["10", "3", "0"]
    assert rows["launches + disruptions"] == ["40", "15", "40"]
    assert rows["churn against the baseline"] == ["(baseline)", "-62.5%", "+0.0%"]
    assert rows["cost against the baseline"] == ["(baseline)", "+8.0%", "+0.0%"]


def test_one_policy_alone_has_no_baseline_rows() -> None:
    rows = _rows(_result(_policy("karpenter-default", 100.0, 30, {"emptiness": 8})))
    assert rows["launches + disruptions"] == ["38"]
    assert "churn against the baseline" not in rows and "cost against the baseline" not in rows


def test_a_baseline_without_churn_gives_no_ratio() -> None:
    rows = _rows(_result(_policy("karpenter-default", 100.0, 0, {}), _policy("busy", 90.0, 2, {"emptiness": 1})))
    assert rows["churn against the baseline"] == ["(baseline)", "-"]  # 3 against 0: no percentage
    assert rows["cost against the baseline"] == ["(baseline)", "-10.0%"]
