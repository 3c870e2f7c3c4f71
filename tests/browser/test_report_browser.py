"""The backtest's HTML report (``ebb backtest --report``) as a person sees it: a real short backtest writes it,
Debian's Chromium renders it offline, and every chart, the summary, the decisions that saved the most with their
explanations, and the policies are on the page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Page

from ebb_cli.report import CHARTS, UNITS, X_AXIS
from tests.kit.offline_page import open_offline, screenshot

REPO = Path(__file__).resolve().parents[2]
POLICIES = ("karpenter-default", "churn-control")


def _backtest_report(tmp_path: Path) -> Path:
    """A real ``ebb backtest`` of ten simulated minutes of batch-bursts under the two policies."""
    out = tmp_path / "report.html"
    ebb = Path(sys.executable).parent / "ebb"
    done = subprocess.run(
        [str(ebb), "backtest", "--trace", "batch-bursts",
         "--policy", str(REPO / "examples/backtest/churn-control.yaml"),
         "--duration", "10m", "--sample-every", "1m", "--report", str(out), "-o", "json"],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.exists()
    return out


def test_the_report_renders_every_chart_offline_in_chromium(page: Page, tmp_path: Path, artifacts: Path) -> None:
    report = _backtest_report(tmp_path)
    seen = open_offline(page, report)
    page.wait_for_selector(".chart .main-svg")
    page.wait_for_function(f"document.querySelectorAll('.chart .scatterlayer .trace').length >= {len(CHARTS) * 2}")

    charts = page.locator(".chart")
    assert charts.count() == len(CHARTS)
    for index, (label, field) in enumerate(CHARTS):
        chart = charts.nth(index)
        assert chart.locator("svg.main-svg").count() >= 1, label
        assert chart.locator(".gtitle").text_content() == label  # SVG text: no inner_text
        lines = chart.locator(".scatterlayer .trace path.js-line")
        assert lines.count() == len(POLICIES), label  # one line per policy
        for line in range(lines.count()):
            assert len(lines.nth(line).get_attribute("d") or "") > 10, label  # a drawn line, not an empty path
        legend = chart.locator(".legend .legendtext").all_text_contents()
        assert legend == list(POLICIES), label
        assert chart.locator(".ytitle").text_content() == UNITS[field], label  # every axis says its unit
        assert chart.locator(".xtitle").text_content() == X_AXIS, label

    (found,) = page.locator("div.verdict p").all_inner_texts()  # what the run found comes first, in one line
    assert found.startswith("churn-control: ") and "cost " in found and "churn " in found, found
    assert found.endswith("against karpenter-default (ebb's simulation of Karpenter's defaults)."), found
    against = page.locator("table.summary tr.against")
    assert [against.nth(i).locator("th").inner_text() for i in range(against.count())] == [
        "Cost against the baseline", "Churn against the baseline"]
    header = page.locator("table.summary tr").first.locator("th").all_inner_texts()
    assert header == ["Metric", *POLICIES]
    assert page.locator("table.summary tr").count() > 9  # the nine summary rows and the disruptions per method
    assert page.locator("h3").all_inner_texts() == [*POLICIES, *POLICIES]  # their top decisions, then their sources
    decisions = page.locator("table.decisions")
    assert decisions.count() == len(POLICIES)  # both policies disrupted nodes in these ten minutes
    for index in range(decisions.count()):
        rows = decisions.nth(index).locator("tr")
        assert rows.first.locator("th").all_inner_texts() == ["At", "Method", "Action", "Nodes", "Saves", "Why"]
        assert 2 <= rows.count() <= 6  # a header and at most the five that saved the most
        why = rows.nth(1).locator("td.why").inner_text()
        assert why and ("evicts" in why or "drifted" in why), why  # the planner's explanation, not a blank cell
    assert "kind: DisruptionPolicy" in page.locator("pre").nth(1).inner_text()

    image = screenshot(page, artifacts / "backtest-report.png")
    assert image.height > 5 * 320  # five charts of 320 px, the table and the policies
    assert seen.errors == []
    assert seen.outside == []


