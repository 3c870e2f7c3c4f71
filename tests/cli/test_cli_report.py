"""ebb_cli.report: the backtest's single-file HTML report (data, table, escaped sources, offline)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

from ebb_cli.report import CHARTS, render_report


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
    found = re.search(rf"<tr><th>{re.escape(label)}</th>(.*?)</tr>", page)
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
