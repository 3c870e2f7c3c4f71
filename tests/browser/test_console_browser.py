"""The console (/ui) as a person uses it, in Debian's Chromium: a real ``ebb run --api-port`` (the embedded mode on
the bundled example, slowed to ten simulated seconds a second so that it still decides while the pages are open),
its SQLite database seeded with a shadow decision first. Signed in with the run's token, the timeline's event feed
and decision list fill while the page is open (server-sent events), the shadow decision is listed beside the real
ones, a decision shows its explanation and events, a node is found by search with its "why not", every NodePool's
budgets are shown, and a hold is created and removed through the form. Nothing is fetched from outside the API (the
console works offline). The screenshots are kept as artefacts (``$EBB_TEST_ARTIFACTS``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from tests.kit.builders import proposed
from tests.kit.embedded_run import EmbeddedRun, embedded_run

TOKEN = "console-browser-token"
#: the shadow decision the run's database holds before it starts (the embedded mode makes none)
SHADOW = "dec-shadow-seeded"
#: how long a page may take to show what the run does (a loaded 2-core machine)
WAIT_MS = 180_000


async def _seed(database: Path) -> None:
    """A shadow planner's proposal in the run's database (cluster ``embedded``, as ``ebb run``'s)."""
    url = f"sqlite:///{database}"
    await upgrade_async(url)
    store = DecisionStore.from_url(url, "embedded", shadow=True)
    try:
        await store.propose(proposed(SHADOW, "general-shadowed", pool="general", text="shadow: empty for 10m",
                                     now=datetime(2026, 11, 23, 18, 0, tzinfo=UTC)))
    finally:
        await store.close()


def _api(run: EmbeddedRun, path: str) -> Any:
    request = urllib.request.Request(f"{run.url}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _ready(run: EmbeddedRun) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(f"{run.url}/readyz", timeout=5) as response:
        return bool(response.status == 200)
    return False


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRun]:
    database = tmp_path_factory.mktemp("console") / "ebb.sqlite"
    # its own thread: pytest-playwright's event loop may already run in this one
    with ThreadPoolExecutor(1) as seeding:
        seeding.submit(asyncio.run, _seed(database)).result()
    with embedded_run(speed=10, duration="6h", token=TOKEN, database=database) as started:
        deadline = time.monotonic() + 120
        while not _ready(started):
            assert started.process.poll() is None, "ebb run ended"
            assert time.monotonic() < deadline, "the embedded run's API never became ready"
            time.sleep(0.5)
        yield started


@pytest.fixture
def console(page: Page, run: EmbeddedRun) -> Iterator[Page]:
    """A page signed in to the run's console; at the end, nothing was fetched from outside and no script failed."""
    outside: list[str] = []
    errors: list[str] = []

    def offline(route: Route) -> None:
        if route.request.url.startswith(run.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_viewport_size({"width": 1400, "height": 900})
    page.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    page.goto(f"{run.url}/ui")
    expect(page).to_have_url(f"{run.url}/ui/login?next=/ui")
    page.fill("input[name=token]", TOKEN)
    page.click("form.login button")
    expect(page).to_have_url(f"{run.url}/ui")
    try:
        yield page
    finally:
        expect.set_options(timeout=5_000)  # pytest-playwright's default, for the other tests
    assert outside == [] and errors == []


def test_the_timeline_fills_live_with_shadow_decisions_beside_the_real_ones(
        console: Page, run: EmbeddedRun, artifacts: Path) -> None:
    page = console
    expect(page.locator(".live .status")).to_have_text("live")
    # events arrive on the open page (server-sent events), and the decision list follows them without a reload
    expect(page.locator("#feed tr.event").first).to_be_visible()
    first_event = page.locator("#feed tr.event td:nth-child(4) a").first.get_attribute("title")
    assert first_event is not None and first_event.startswith("dec-")
    expect(page.locator(f'#real tr.decision[data-id="{first_event}"]')).to_be_visible()
    expect(page.locator("#shadow tr.decision.shadow")).to_have_count(1)
    expect(page.locator(f'#shadow tr[data-id="{SHADOW}"]')).to_contain_text("general-shadowed")
    assert page.locator(f'#real tr[data-id="{SHADOW}"]').count() == 0
    shown = page.locator("#real tr.decision").evaluate_all("rows => rows.map(r => r.dataset.id)")
    real = {d["id"] for d in _api(run, "/v1/decisions?shadow=false&limit=200")["items"]}
    assert shown and set(shown) <= real
    # a decision the list did not have comes in, the page never reloaded
    page.wait_for_function("before => [...document.querySelectorAll('#real tr.decision')]"
                           ".some(row => !before.includes(row.dataset.id))", arg=shown)
    page.wait_for_function("document.querySelectorAll('#feed tr.event').length >= 5")
    page.screenshot(path=str(artifacts / "console-timeline.png"), full_page=False)


def test_a_decision_with_its_explanation_and_events(console: Page, run: EmbeddedRun, artifacts: Path) -> None:
    page = console
    decision_id = page.locator("#real tr.decision td:nth-child(2) a").first.get_attribute("title")
    assert decision_id is not None
    # by its id: the list is rendered again at every event, so "the first row" may be a newer decision by now
    page.locator(f'#real tr.decision td:nth-child(2) a[title="{decision_id}"]').click()
    expect(page).to_have_url(f"{run.url}/ui/decisions/{decision_id}")
    stored = _api(run, f"/v1/decisions/{decision_id}")
    expect(page.locator("h1")).to_contain_text(decision_id)
    expect(page.locator(".explanation .summary")).to_have_text(stored["explanation"]["text"])
    expect(page.locator("#timeline tr.event").first).to_be_visible()
    assert page.locator("#timeline tr.event").count() >= len(stored["timeline"]) >= 1
    page.screenshot(path=str(artifacts / "console-decision.png"), full_page=True)


def test_a_node_is_found_by_search_with_its_why_not(console: Page, run: EmbeddedRun, artifacts: Path) -> None:
    page = console
    page.click("nav >> text=Nodes")
    left_alone = page.locator("#nodes tr.node:not(.disrupted)")
    expect(left_alone.first).to_be_visible()
    name = left_alone.first.locator("td").first.inner_text()
    page.fill("input[type=search]", name)
    expect(page.locator("#nodes .meta")).to_contain_text(f"matching “{name}”")
    rows = page.locator("#nodes tr.node")
    assert rows.count() >= 1
    assert all(name in text for text in rows.locator("td:first-child").all_inner_texts())
    page.screenshot(path=str(artifacts / "console-nodes.png"), full_page=False)
    page.click(f'#nodes a[href="/ui/nodes/{name}"]')
    expect(page.locator("h1")).to_contain_text(name)
    # the leader's latest pass, which may be newer than the list's: left alone, disrupted since, or about to be
    expect(page.locator(".summary")).to_have_text(re.compile(
        r"^(not disrupted now.*|decision dec-\w+ \(\w+\) is disrupting it: .+|[\w-]+ would \w+ it now .+)$"))
    expect(page.locator("h2", has_text="Budgets of its NodePool")).to_be_visible()


def test_the_budgets_of_every_nodepool(console: Page, run: EmbeddedRun, artifacts: Path) -> None:
    page = console
    page.click("nav >> text=Budgets")
    pools = page.locator("section.pool")
    expect(pools.first).to_be_visible()
    names = pools.evaluate_all("sections => sections.map(s => s.dataset.pool)")
    nodepools = {b["nodePool"] for b in (_api(run, f"/v1/nodepools/{n}/budgets") for n in names)}
    assert names == sorted(nodepools) and len(names) >= 2
    for index in range(pools.count()):
        assert pools.nth(index).locator("table.budgets tbody tr").count() >= 1
        assert pools.nth(index).locator("table.reasons tbody tr").count() == 4  # Expired, Drifted, Empty, Underutilized
    # a scheduled budget (the example's memory pool has one) says its window now, or not now, and its next one
    scheduled = [row for row in page.locator("table.budgets tbody tr").all()
                 if row.locator("td").nth(2).inner_text() != "always"]
    assert scheduled
    for row in scheduled:
        cells = row.locator("td").all_inner_texts()
        assert re.fullmatch(r"\S+ to \S+|not now", cells[5]) and re.fullmatch(r"\S+ to \S+", cells[6]), cells
    page.screenshot(path=str(artifacts / "console-budgets.png"), full_page=True)


def test_a_hold_is_created_and_removed_through_the_form(console: Page, run: EmbeddedRun, artifacts: Path) -> None:
    page = console
    page.click("nav >> text=Holds")
    page.select_option("form.hold select[name=scope]", "nodePool")
    page.fill("form.hold input[name=target]", "general")
    page.fill("form.hold input[name=reason]", "console browser test")
    page.click("form.hold button")
    row = page.locator("#holds tr.hold", has_text="console browser test")
    expect(row).to_be_visible()
    expect(page.locator("form.hold input[name=reason]")).to_have_value("")  # the form is reset once it succeeded
    [made] = [h for h in _api(run, "/v1/holds")["items"] if h["reason"] == "console browser test"]
    assert (made["scope"], made["target"], made["kind"]) == ("nodePool", "general", "manual")
    page.screenshot(path=str(artifacts / "console-holds.png"), full_page=True)
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button", has_text="Remove").click()
    expect(row).to_have_count(0)
    assert all(h["id"] != made["id"] for h in _api(run, "/v1/holds")["items"])
