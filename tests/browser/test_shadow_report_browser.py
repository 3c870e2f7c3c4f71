"""The shadow report's HTML page (``ebb shadow report --report``, docs/shadow.md) as a person sees it: a shadow
planner's record with known facts in a SQLite store, a real decisions-api serving it (tests/kit/shadow_api.py), the
real ``ebb shadow report --trace ... --report`` writing the page, and Debian's Chromium rendering it offline. Every
section is on the page with the values the facts make, worked out here by hand:

- Karpenter removed four nodes: n2 (ebb had approved s2 an hour before: *both*, 3600 s ahead), n3 (ebb: a PDB), n4
  (ebb: its stabilization window) and n6 (no pass of ebb's saw it): *Karpenter only*, one per category, each with
  ebb's reason, and a bar per category;
- ebb approved s1 on n1, which nobody removed: *ebb only*, 0.5/h from its approval at 02:00 to the end of the period
  at 10:00, 4.0;
- s3 was rejected at validation (counted, not listed), and a person removed n7 (an other removal);
- the timeline marks the three kinds; the back-test of an hour's recording has its figures table and its five
  charts, a line per policy.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page

from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb_cli.report import CHARTS
from ebb_cli.shadow_report import SECTIONS, TIMELINE
from tests.kit.builders import proposed
from tests.kit.offline_page import open_offline, screenshot
from tests.kit.shadow_api import recording, removal, served

TOKEN = "shadow-page-token"
T0 = datetime(2026, 11, 20, tzinfo=UTC)
END = T0 + timedelta(hours=10)
EBB = Path(sys.executable).parent / "ebb"


async def _fill(url: str) -> None:
    """The facts of the module's docstring, as a shadow planner keeps them."""
    await upgrade_async(url)
    store = DecisionStore.from_url(url, "c", shadow=True)
    try:
        hour = timedelta(hours=1)
        await store.propose(proposed("s1", ("n1", "general"), now=T0 + hour, savings=0.5, text="n1 is empty"))
        await store.approve("s1", node_pools={"n1": "general"}, reason="Empty", allowed={"general": 2}, counted=(),
                            now=T0 + 2 * hour)
        await store.propose(proposed("s2", ("n2", "general"), now=T0 + 3 * hour, savings=0.25))
        await store.approve("s2", node_pools={"n2": "general"}, reason="Empty", allowed={"general": 2}, counted=(),
                            now=T0 + 3 * hour)
        await store.propose(proposed("s3", ("n5", "batch"), now=T0 + 5 * hour))
        assert await store.reject("s3", "a pod arrived", now=T0 + 5 * hour + timedelta(minutes=1))
        for kept in (
                removal("n2", T0 + 4 * hour, nodepool="general", verdict="disrupt", verdict_text="n2: disrupt"),
                removal("n3", T0 + 5 * hour, nodepool="general", verdict="pdb-blocks",
                        verdict_text="n3: PodDisruptionBudget default/web allows no disruption"),
                removal("n4", T0 + 6 * hour, nodepool="batch", reason="Empty", verdict="stabilization-window",
                        verdict_text="n4: its NodePool's consolidateAfter (1h) has not passed"),
                removal("n6", T0 + 7 * hour, nodepool="batch", reason="Drifted"),
                removal("n7", T0 + 8 * hour, by="unknown", reason="", nodepool="batch")):
            assert await store.record_removal(kept)
    finally:
        await store.close()


def _in_a_thread(url: str) -> None:
    """``_fill`` on an event loop of its own: pytest-playwright's runs in this thread."""
    failed: list[BaseException] = []

    def fill() -> None:
        try:
            asyncio.run(_fill(url))
        except BaseException as exc:  # handed to the test's thread
            failed.append(exc)

    thread = threading.Thread(target=fill)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


@dataclass(frozen=True)
class Written:
    page: Path
    answer: dict[str, Any]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    """The page, written by ``ebb shadow report`` as a user runs it, and the JSON it printed."""
    here = tmp_path_factory.mktemp("shadow-page")
    url = f"sqlite:///{here / 'ebb.db'}"
    _in_a_thread(url)
    trace = recording(here / "recorded.yaml")
    page = here / "shadow.html"
    with served(url, token=TOKEN, now=END) as api:
        done = subprocess.run([str(EBB), "shadow", "report", "--since", "1d", "--api", api, "--token", TOKEN,
                               "--trace", str(trace), "--report", str(page), "-o", "json"],
                              capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    yield Written(page, json.loads(done.stdout))


def _rows(section: Locator) -> list[list[str]]:
    """The rows of the section's first table, header first."""
    rows = section.locator("table").first.locator("tr")
    return [rows.nth(i).locator("th, td").all_inner_texts() for i in range(rows.count())]


def test_the_shadow_report_page_shows_each_list_with_the_facts_values(page: Page, written: Written,
                                                                      artifacts: Path) -> None:
    seen = open_offline(page, written.page)
    charts = 2 + len(CHARTS)  # ebb's reasons, the timeline, the back-test's
    page.wait_for_function(f"document.querySelectorAll('.chart .main-svg').length >= {charts}")
    assert page.locator(".chart").count() == charts
    assert written.page.read_text(encoding="utf-8").count("window.PlotlyConfig") == 1  # plotly inlined once

    assert page.locator("h1").inner_text() == "ebb shadow report: 2026-11-19 10:00:00Z to 2026-11-20 10:00:00Z"
    assert page.locator("#found p").all_inner_texts() == [
        "Karpenter removed 4 node(s): ebb would have disrupted 1 of them too, 3 not.",
        "ebb would have disrupted 1 decision(s)' nodes Karpenter kept, saving 0.5000/h, 4.0000 over the period.",
        "ebb's shadow decisions: 3 (2 approved, 0 still proposed, 1 rejected at validation); other removals (not "
        "Karpenter's): 1.",
        "why ebb would have left Karpenter's removals alone: window 1, pdb 1, unseen 1"]
    assert page.locator("section h2").all_inner_texts() == [heading for heading, _ in SECTIONS.values()]

    alone = page.locator("section#karpenter-only")
    assert _rows(alone) == [
        ["Node", "NodePool", "Removed at", "Karpenter's reason", "ebb", "ebb's reason"],
        ["n3", "general", "2026-11-20 05:00:00Z", "Underutilized", "pdb",
         "n3: PodDisruptionBudget default/web allows no disruption"],
        ["n4", "batch", "2026-11-20 06:00:00Z", "Empty", "window",
         "n4: its NodePool's consolidateAfter (1h) has not passed"],
        ["n6", "batch", "2026-11-20 07:00:00Z", "Drifted", "unseen", "no pass of ebb's saw the node"]]
    bars = alone.locator(".chart")
    assert bars.locator(".barlayer .point").count() == 3  # a bar per category
    assert bars.locator(".xtick text").all_text_contents() == ["window", "pdb", "unseen"]
    assert bars.locator(".ytitle").text_content() == "nodes removed by Karpenter"

    ours = page.locator("section#ebb-only")
    assert _rows(ours) == [["Decision", "Nodes", "Method", "Reason", "Approved at", "Saving/h", "Saved"],
                           ["s1", "n1", "emptiness", "Empty", "2026-11-20 02:00:00Z", "0.5000", "4.0000"]]
    assert ours.locator("p.total").inner_text() == "In all: saving 0.5000/h, 4.0000 over the period."

    both = page.locator("section#both")
    assert _rows(both) == [["Node", "Karpenter at", "Karpenter's reason", "ebb's decision", "ebb ahead"],
                           ["n2", "2026-11-20 04:00:00Z", "Underutilized", "s2 (approved)", "3600s"]]

    timeline = page.locator("section#timeline .chart")
    assert timeline.locator(".legend .legendtext").all_text_contents() == [legend for _, legend, _ in TIMELINE]
    markers = timeline.locator(".scatterlayer .trace")
    assert [markers.nth(i).locator("path.point").count() for i in range(markers.count())] == [3, 1, 1]

    tested = page.locator("section#backtest")
    policies = [p["name"] for p in written.answer["backtest"]["policies"]]
    assert policies == ["karpenter-default", "recorded policies"]
    table = _rows(tested)
    assert table[0] == ["Policy", "Cost", "Churn", "Evictions", "Pending pod-seconds", "Pending at end"]
    assert [row[0] for row in table[1:]] == policies
    for row, figures in zip(table[1:], written.answer["backtest"]["policies"], strict=True):  # the printed figures
        assert row[1:4] == [f"{figures['cost']:.4f}", str(figures["churn"]), str(figures["evictions"])], row
    assert tested.locator("h3").all_inner_texts()[:3] == ["What it found", "Summary (★ = best, lower is better)",
                                                          "Over time"]
    drawn = tested.locator(".chart")
    assert drawn.count() == len(CHARTS)
    for index in range(drawn.count()):  # a line per policy in each of the back-test's charts
        assert drawn.nth(index).locator(".scatterlayer .trace path.js-line").count() == len(policies)

    screenshot(page, artifacts / "shadow-report.png")
    assert seen.errors == []
    assert seen.outside == []
