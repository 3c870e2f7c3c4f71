"""ebb_cli.report: the backtest's single-file HTML report (data, table, escaped sources, offline)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

from ebb_cli.report import CHARTS, UNITS, X_AXIS, BacktestResult, render_report, verdict


def _result(policy_count: int) -> dict[str, Any]:
    start = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)
    policies = []
    for index in range(policy_count):
        policies.append(
            {
                "name": f"policy-{index}<b>",
                "source": f"name: p{index}\nnote: </pre><script>alert({index})</script>",
                "summary": {
                    "node_hours_cost": 10.5 + index,
                    "peak_nodes": 7 + index,
                    "mean_nodes": 5.25,
                    "launches": 3,
                    "disruptions": {"consolidation": index, "drift": 1},
                    "evictions": 4,
                    "pods_evicted_more_than_once": 0,
                    "pending_seconds_p50": 1.5,
                    "pending_seconds_p95": 12.0,
                    "churn_cost": 2.0,
                },
                "series": [
                    {
                        "t": (start + timedelta(minutes=minute)).isoformat(),
                        "cost_per_hour": 1.125 * (minute + 1) + index,
                        "nodes": minute + index,
                        "pending_pods": minute % 3,
                        "disruptions": minute % 2,
                        "launches": 1,
                    }
                    for minute in range(5)
                ],
            }
        )
    return {
        "trace": "trace.jsonl",
        "start": start.isoformat(),
        "duration_seconds": 300.0,
        "seed": 7,
        "policies": policies,
    }


@pytest.mark.parametrize("policy_count", [1, 3])
def test_report_holds_data_table_escaped_sources_and_no_external_url(policy_count: int) -> None:
    page = render_report(_result(policy_count))
    assert page.startswith("<!DOCTYPE html>")
    assert 'src="http' not in page
    assert page.count('class="plotly-graph-div"') == len(CHARTS)
    assert "<script>alert(" not in page
    for index in range(policy_count):
        assert f"policy-{index}&lt;b&gt;" in page
        assert f"&lt;/pre&gt;&lt;script&gt;alert({index})&lt;/script&gt;" in page
    assert "Node-hours cost ($)" in page and "Disruptions: consolidation" in page
    assert "1.125" in page  # a series value reaches the chart data
    best_cells = re.findall(r'<td class="best">([^<]*)</td>', page)
    if policy_count == 1:
        assert best_cells == []
    else:
        assert "10.5 ★" in best_cells  # lowest cost marked, the others not
        assert "11.5 ★" not in best_cells
    # the goal's churn: launches (3 each) and disruption decisions (1 drift and ``index`` consolidations)
    assert _row(page, "Disruptions") == (["1"] if policy_count == 1 else ["1 ★", "2", "3"])
    assert _row(page, "Launches + disruptions") == (["4"] if policy_count == 1 else ["4 ★", "5", "6"])


def _row(page: str, label: str) -> list[str]:
    """The cells of the summary row headed ``label``."""
    found = re.search(rf"<tr[^>]*><th>{re.escape(label)}</th>(.*?)</tr>", page)
    assert found is not None, label
    return re.findall(r"<td[^>]*>([^<]*)</td>", found.group(1))


def test_interruptions_and_events_not_applied_are_shown_when_there_are_any() -> None:
    plain = render_report(_result(2))
    assert "Interruptions" not in plain and "not applied" not in plain
    result = _result(2)
    for index, policy in enumerate(result["policies"]):
        policy["summary"] |= {"interruptions": 3, "pods_lost": 2 - index}
    result["policies"][1]["trace_errors"] = ["at 60s: patch: no NodePool <genral>"]
    page = render_report(result)
    assert _row(page, "Interruptions") == ["3", "3"] and _row(page, "Pods lost") == ["2", "1 ★"]
    assert "policy-1&lt;b&gt;: 1 trace event(s) not applied" in page
    assert "<li>at 60s: patch: no NodePool &lt;genral&gt;</li>" in page and "policy-0&lt;b&gt;: " not in page


def test_malformed_result_is_a_validation_error() -> None:
    result = _result(1)
    del result["policies"][0]["summary"]["peak_nodes"]
    with pytest.raises(pydantic.ValidationError, match="peak_nodes"):
        render_report(result)


def test_a_report_of_the_baseline_alone_says_it_compares_nothing() -> None:
    result = _result(1)
    result["policies"][0]["name"] = "karpenter-default"
    page = render_report(result)
    banner = re.search(r'<div class="banner"><p>(.*?)</p></div>', page)
    assert banner is not None
    assert banner.group(1) == ("Only the baseline, karpenter-default (ebb&#x27;s simulation of Karpenter&#x27;s "
                               "defaults), ran: this report compares nothing. Add a policy (ebb backtest --policy "
                               "FILE) to see what it changes.")
    assert 'class="verdict"' not in page and "against the baseline" not in page


@pytest.mark.parametrize(("cost", "launches", "word", "cost_change", "churn_change"), [
    # the baseline (policy-0): $10.50, 3 launches + 1 disruption = churn 4
    (9.45, 1, "better on both", "-10.0%", "-50.0%"),
    (9.45, 5, "cheaper, with more churn", "-10.0%", "+50.0%"),
    (11.55, 1, "less churn, at a higher cost", "+10.0%", "-50.0%"),
    (11.55, 5, "worse on both", "+10.0%", "+50.0%"),
    (10.5, 3, "better on both", "±0%", "±0%"),
])
def test_the_verdict_sets_each_policy_against_the_baseline(cost: float, launches: int, word: str, cost_change: str,
                                                           churn_change: str) -> None:
    result = _result(2)
    other = result["policies"][1]
    other["summary"] |= {"node_hours_cost": cost, "launches": launches, "disruptions": {"drift": 1},
                         "evictions": 9}
    parsed = BacktestResult.model_validate(result)
    churn_ = launches + 1
    assert verdict(parsed) == [
        f"policy-1<b>: {word}: cost {cost_change} (${cost:,.2f} against $10.50), churn {churn_change} ({churn_} "
        f"launches + disruptions against 4), evictions 9 against 4, against policy-0<b>."]
    page = render_report(result)
    assert _row(page, "Cost against the baseline") == ["(baseline)", cost_change]
    assert _row(page, "Churn against the baseline") == ["(baseline)", churn_change]
    assert '<div class="verdict"><p>policy-1&lt;b&gt;: ' in page


def test_every_chart_has_its_units() -> None:
    page = render_report(_result(2))
    for _label, field in CHARTS:
        assert json.dumps({"text": UNITS[field]}, separators=(",", ":")) in page, field
    assert page.count(json.dumps({"text": X_AXIS}, separators=(",", ":"))) == len(CHARTS)


def test_each_policys_top_decisions_are_listed_with_their_explanations_escaped() -> None:
    result = _result(2)
    result["policies"][0]["decisions"] = [
        {"id": "dec-1", "at": "2026-11-23T18:30:30+00:00", "method": "multi-node-consolidation",
         "reason": "Underutilized", "action": "delete", "nodes": ["n-1", "n-2<x>"], "replacements": [],
         "savings_per_hour": 1.2972,
         "explanation": "2 nodes costing $1.2972/h deleted; it evicts 10 pods to save $1.2972/h <b>"}]
    page = render_report(result)
    table = re.search(r'<table class="decisions">(.*?)</table>', page)
    assert table is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table.group(1))
    assert cells == ["2026-11-23 18:30:30", "multi-node-consolidation", "delete", "n-1, n-2&lt;x&gt;", "$1.2972/h",
                     "2 nodes costing $1.2972/h deleted; it evicts 10 pods to save $1.2972/h &lt;b&gt;"]
    assert page.count('<table class="decisions">') == 1  # the second policy disrupted nothing, and says so
    assert "<h3>policy-1&lt;b&gt;</h3><p>No node was disrupted.</p>" in page
