"""Karpenter's dashboards with the prefix swapped, rendered with data from a running ebb: Grafana is not packaged
for Debian (nor buildable from the Go module proxy without its frontend), so a real Prometheus (Debian's) scrapes
``ebb run --api-port`` and its own graph page, in Debian's Chromium, draws panels' queries of both dashboards.
The screenshots are kept as artefacts (``$EBB_TEST_ARTIFACTS``)."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.kit.embedded_run import embedded_run, prometheus_scraping, query

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"


def _panel(dashboard: str, title: str) -> str:
    """The first query of the panel ``title`` of a dashboard in deploy/grafana/, variables at their "All" value."""
    panels = json.loads((GRAFANA / dashboard).read_text())["panels"]
    [expression] = [p["targets"][0]["expr"] for p in panels if p.get("title") == title]
    for variable in ("nodepool", "zone", "arch", "capacity_type", "instance_type"):
        expression = expression.replace(f"${variable}", ".*")
    return expression.replace("$__rate_interval", "1m").replace("$distribution_filter", "nodepool")


#: (dashboard, panel title, screenshot name): panels of both of Karpenter's dashboards
PANELS = [
    ("karpenter-performance.json", "Node Termination Latency", "termination-latency"),
    ("karpenter-performance.json", "Pod Startup Latency", "pod-startup-latency"),
    ("karpenter-capacity.json", "Nodes Terminated by nodepool", "nodes-terminated"),
    ("karpenter-capacity.json", 'Pod Distribution by "$distribution_filter"', "pod-distribution"),
    ("karpenter-capacity.json", 'Nodes Eligible for Disruptions by "reason"', "eligible-nodes"),
]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prometheus scraping a run slow enough (30 simulated seconds a second) that nodes are still terminated
    while it scrapes (the termination summary's window is 10 simulated minutes)."""
    with embedded_run(speed=30, duration="6h") as run, \
            prometheus_scraping(run, tmp_path_factory.mktemp("prometheus"), scrapes=10) as base:
        yield base


@pytest.mark.parametrize(("dashboard", "title", "name"), PANELS, ids=[p[2] for p in PANELS])
def test_a_karpenter_panel_draws_ebbs_data(page: Page, prometheus: str, artifacts: Path, dashboard: str, title: str,
                                            name: str) -> None:
    expression = _panel(dashboard, title)
    assert query(prometheus, expression), f"{title}: no series"
    page.set_viewport_size({"width": 1280, "height": 800})
    # Debian's Prometheus 2 ships the classic web UI (its React UI needs a JavaScript build Debian does not make)
    page.goto(f"{prometheus}/classic/graph?" + urllib.parse.urlencode(
        {"g0.expr": expression, "g0.tab": "0", "g0.range_input": "1m"}))
    page.wait_for_selector(".rickshaw_legend .line", timeout=60_000)
    # a series of every one the query has now (and of those the last minute had: a pod may have gone since)
    assert page.locator(".rickshaw_legend .line").count() >= len(query(prometheus, expression))
    assert page.locator(".rickshaw_graph path.path").count() >= 1  # a line is drawn
    assert not page.locator(".alert-danger").is_visible()
    page.screenshot(path=str(artifacts / f"karpenter-dashboard-{name}.png"), full_page=True)
