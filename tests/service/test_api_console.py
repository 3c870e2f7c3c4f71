"""The console (/ui) on the in-memory bus and SQLite: signing in with the API's tokens (the cookie, the roles, where
a sign-in may lead), the timeline's real and shadow decisions apart, a decision with its explanation and events,
the nodes' "why not" from the leader planner's pass (searched), a node's explanation, the budgets of every
NodePool, holds created and removed (write token and htmx only), the live rows of the event stream, and the
assets served from the package (no CDN). Playwright drives the same pages in tests/browser/test_console_browser.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_PLANNER_PASSES, DisruptionEvent, PlannerPass
from ebb.core.engine import run_pass
from ebb.core.findings import findings
from ebb.core.methods.base import EngineOptions
from ebb.core.snapshot import parse_documents
from ebb_decisions_api.app import create_app
from ebb_decisions_api.console import COOKIE, event_rows
from ebb_decisions_api.events import EventHub
from ebb_decisions_api.settings import Settings
from tests.kit.builders import proposed
from tests.kit.decisions_api import AUTH, TOKEN, documents, publish, running
from tests.kit.waiting import eventually

READ_TOKEN = "console-read-token"
T0 = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
HTMX = {"HX-Request": "true"}


def leader_pass(cluster: str) -> PlannerPass:
    """The pass a leader planner publishes over empty-node.yaml: ``idle`` deleted (Empty), ``busy`` left alone."""
    snapshot = parse_documents(documents("empty-node.yaml"), bundled_catalog=bundled_catalog)
    options = EngineOptions()
    view = options.view_of(snapshot, T0)
    return PlannerPass.of_pass(cluster=cluster, view=view, result=run_pass(view, options), found=findings(view),
                               revision=1, demand=())


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[DecisionStore, DecisionStore]]:
    """The API's store and a shadow planner's, on one database."""
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    api, shadow = DecisionStore.from_url(url, "embedded"), DecisionStore.from_url(url, "embedded", shadow=True)
    try:
        yield api, shadow
    finally:
        await api.close()
        await shadow.close()


@pytest.fixture
async def console(stores: tuple[DecisionStore, DecisionStore]) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The API on empty-node.yaml with a leader's pass published, a real decision with two events and a shadow
    one, ready; its client not signed in."""
    api, shadow = stores
    bus = InMemoryBus()
    await publish(bus, documents("empty-node.yaml"))
    await bus.publish(TOPIC_PLANNER_PASSES, leader_pass(api.cluster))
    await api.add_decision(decision_id="dec-real", method="emptiness", reason="Empty", action="delete",
                           nodes=[{"name": "idle", "nodePool": "default", "instanceType": "m5.large"}],
                           replacements=[], created_at=T0, savings=0.096, state="approved",
                           explanation={"text": "idle is empty <and costs $0.096/h>", "budgets": [{"allowed": 2}]})
    for at, phase in ((T0, "Proposed"), (T0 + timedelta(seconds=15), "Approved")):
        await api.add_decision_event(decision_id="dec-real", event_id=f"e-{phase}", type=phase, at=at, node="idle",
                                     detail={"message": f"{phase.lower()} by the planner"})
    await shadow.propose(proposed("dec-shadow", "busy", now=T0 - timedelta(minutes=5), text="shadow's reason"))
    settings = Settings(token=SecretStr(TOKEN), read_token=SecretStr(READ_TOKEN), database_url="sqlite://",
                        cluster=api.cluster)
    async with running(settings, api, bus) as (app, client):
        await eventually("ready", lambda: _ready(client, app))
        yield app, client


async def _ready(client: httpx.AsyncClient, app: FastAPI) -> bool:
    return (await client.get("/readyz")).status_code == 200 and app.state.passes.latest is not None


async def sign_in(client: httpx.AsyncClient, token: str = TOKEN) -> None:
    answer = await client.post("/ui/login", data={"token": token, "next": "/ui/nodes"})
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/nodes"


async def test_signing_in_takes_a_token_of_the_api(console: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = console
    away = await client.get("/ui/holds")
    assert away.status_code == 303 and away.headers["location"] == "/ui/login?next=/ui/holds"
    # a fragment asked by htmx is told where to sign in, not redirected inside the page
    fragment = await client.get("/ui/fragments/decisions", headers=HTMX)
    assert fragment.status_code == 401 and fragment.headers["hx-redirect"] == "/ui/login?next=/ui/fragments/decisions"
    form = await client.get("/ui/login", params={"next": "/ui/holds"})
    assert form.status_code == 200 and 'name="next" value="/ui/holds"' in form.text
    wrong = await client.post("/ui/login", data={"token": "guess", "next": "/ui"})
    assert wrong.status_code == 401 and "not a token of this API" in wrong.text
    assert COOKIE not in wrong.cookies
    # a sign-in leads to a console page only, never to another site
    for target in ("https://elsewhere.example/", "//elsewhere.example/ui", "/v1/holds"):
        answer = await client.post("/ui/login", data={"token": TOKEN, "next": target})
        assert answer.status_code == 303 and answer.headers["location"] == "/ui", target
    cookie = answer.headers["set-cookie"].lower()
    assert f"{COOKIE}={TOKEN}".lower() in cookie
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
    page = await client.get("/ui")
    assert page.status_code == 200 and "read-write" in page.text and 'data-events="/ui/events"' in page.text
    out = await client.post("/ui/logout")
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert (await client.get("/ui")).status_code == 303


async def test_the_timeline_lists_real_and_shadow_decisions_apart(console: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = console
    await sign_in(client)
    real = (await client.get("/ui/fragments/decisions", params={"shadow": "false"}, headers=HTMX)).text
    shadow = (await client.get("/ui/fragments/decisions", params={"shadow": "true"}, headers=HTMX)).text
    assert 'data-id="dec-real"' in real and "dec-shadow" not in real
    assert 'class="decision shadow" data-id="dec-shadow"' in shadow and "dec-real" not in shadow
    assert 'href="/ui/nodes/idle"' in real and "approved" in real and "0.096" in real
    page = (await client.get("/ui")).text
    assert 'hx-get="/ui/fragments/decisions?shadow=false"' in page
    assert 'hx-get="/ui/fragments/decisions?shadow=true"' in page


async def test_a_decision_with_its_explanation_and_events(console: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = console
    await sign_in(client)
    page = (await client.get("/ui/decisions/dec-real")).text
    assert "idle is empty &lt;and costs $0.096/h&gt;" in page  # escaped
    assert "emptiness: delete (Empty)" in page and "(m5.large)" in page
    assert page.index("<td>Proposed</td>") < page.index("<td>Approved</td>")  # oldest first
    assert "proposed by the planner" in page
    assert 'data-events="/ui/events?decision=dec-real"' in page
    rows = (await client.get("/ui/decisions/dec-real/timeline", headers=HTMX)).text
    assert rows.count('<tr class="event') == 2
    shadow = (await client.get("/ui/decisions/dec-shadow")).text
    assert 'class="badge">shadow' in shadow and "shadow&#39;s reason" in shadow
    missing = await client.get("/ui/decisions/nope")
    assert missing.status_code == 404 and "no decision &#39;nope&#39;" in missing.text


async def test_nodes_are_searched_and_say_why_not(console: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = console
    await sign_in(client)
    latest: PlannerPass = app.state.passes.latest
    every = (await client.get("/ui/fragments/nodes", headers=HTMX)).text
    assert "2 of 2 nodes" in every
    [blocked] = latest.blocked
    busy = (await client.get("/ui/fragments/nodes", params={"q": "BUS"}, headers=HTMX)).text
    assert "1 of 2 nodes matching “BUS”" in busy
    assert 'href="/ui/nodes/busy"' in busy and "/ui/nodes/idle" not in busy and "left alone" in busy
    assert blocked.reason.replace("'", "&#39;") in busy
    by_reason = (await client.get("/ui/fragments/nodes", params={"q": "would delete"}, headers=HTMX)).text
    assert 'href="/ui/nodes/idle"' in by_reason and "/ui/nodes/busy" not in by_reason
    assert "0 of 2 nodes" in (await client.get("/ui/fragments/nodes", params={"q": "zzz"}, headers=HTMX)).text

    node = (await client.get("/ui/nodes/busy")).text
    assert f"not disrupted now: {blocked.reason}".replace("'", "&#39;") in node
    assert "the leader planner&#39;s pass" in node and "Expired" in node  # its pool's budgets
    idle = (await client.get("/ui/nodes/idle")).text
    # the pass would delete it; the store says dec-real (approved) is doing so
    assert "decision dec-real (approved) is disrupting it: emptiness, Empty, delete" in idle
    assert "<dt>Live decision</dt><dd><a href=\"/ui/decisions/dec-real\">dec-real</a> (approved)" in idle
    assert '"method": "emptiness"' in idle.replace("&#34;", '"')  # the pass's command
    missing = await client.get("/ui/nodes/nope")
    assert missing.status_code == 404 and "no node &#39;nope&#39; in the live cluster state" in missing.text


async def test_without_a_leader_pass_a_node_is_explained_now(stores: tuple[DecisionStore, DecisionStore]) -> None:
    """No planner has published a pass (or the pass is older than the node): the list says so, and a node's page is
    a pass the API evaluates now on the live state, which it says."""
    api, _ = stores
    bus = InMemoryBus()
    await publish(bus, documents("empty-node.yaml"))
    settings = Settings(token=SecretStr(TOKEN), database_url="sqlite://", cluster=api.cluster)
    async with running(settings, api, bus) as (_, client):
        await eventually("ready", lambda: _is_ready(client))
        await sign_in(client)
        rows = (await client.get("/ui/fragments/nodes", headers=HTMX)).text
        assert "The leader planner has not published a pass yet" in rows
        busy = await client.get("/ui/nodes/busy")
        assert busy.status_code == 200 and "evaluated now" in busy.text and "not disrupted now" in busy.text


async def _is_ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 200


async def test_budgets_of_every_nodepool(console: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = console
    await sign_in(client)
    page = (await client.get("/ui/budgets")).text
    pools = sorted(p.split('"')[0] for p in page.split('data-pool="')[1:])
    assert pools == ["default"]
    # dec-real (approved) holds idle: it counts against the pool's budget
    assert "2 nodes, 1 disrupting, 0 not ready" in page
    # nodes: 100% of 2, less the one disrupting
    assert page.count("<tr><td>Expired</td><td>1</td>") == 1
    assert "<td>nodes: 100%</td><td>all</td>" in page and "<td>2</td><td>1</td>" in page


async def test_holds_are_created_and_removed_with_the_write_token(
        console: tuple[FastAPI, httpx.AsyncClient], stores: tuple[DecisionStore, DecisionStore]) -> None:
    app, client = console
    api, _ = stores
    await sign_in(client)
    page = (await client.get("/ui/holds")).text
    assert 'hx-post="/ui/holds"' in page and "No holds in force." in page
    made = await client.post("/ui/holds", data={"scope": "nodePool", "target": "default", "reason": "freeze <x>",
                                                "for": "2h"}, headers=HTMX)
    assert made.status_code == 200 and "freeze &lt;x&gt;" in made.text and 'role="alert"' not in made.text
    [hold] = await api.list_holds(app.state.context.clock())
    assert (hold.scope_kind, hold.scope, hold.reason) == ("nodepool", "default", "freeze <x>")
    assert hold.expires_at is not None
    assert f'hx-delete="/ui/holds/{hold.id}"' in made.text
    # refused by the API: the console says why and keeps the list
    for form, why in (({"scope": "nodePool", "target": "nope", "reason": "r"}, "no NodePool &#39;nope&#39;"),
                      ({"scope": "node", "target": "", "reason": "r"}, "target: String should have at least"),
                      ({"scope": "cluster", "reason": "r", "for": "soon"}, "soon")):
        refused = await client.post("/ui/holds", data=form, headers=HTMX)
        assert refused.status_code == 200 and why in refused.text and 'role="alert"' in refused.text, refused.text
    assert len(await api.list_holds(app.state.context.clock())) == 1
    # a write must come from the console's own pages
    assert (await client.post("/ui/holds", data={"scope": "cluster", "reason": "r"})).status_code == 403
    assert (await client.delete(f"/ui/holds/{hold.id}")).status_code == 403
    removed = await client.delete(f"/ui/holds/{hold.id}", headers=HTMX)
    assert removed.status_code == 200 and "No holds in force." in removed.text
    assert await api.list_holds(app.state.context.clock()) == []
    again = await client.delete(f"/ui/holds/{hold.id}", headers=HTMX)
    assert f"no hold &#39;{hold.id}&#39;" in again.text


async def test_the_read_token_sees_holds_and_changes_none(
        console: tuple[FastAPI, httpx.AsyncClient], stores: tuple[DecisionStore, DecisionStore]) -> None:
    app, client = console
    api, _ = stores
    made = await api.create_hold(scope_kind="cluster", scope="", reason="kept", expires_at=None,
                                 now=app.state.context.clock(), created_by="test")
    await sign_in(client, READ_TOKEN)
    page = (await client.get("/ui/holds")).text
    assert "read-only" in page and "kept" in page
    assert "hx-post" not in page and "hx-delete" not in page
    create = await client.post("/ui/holds", data={"scope": "cluster", "reason": "r"}, headers=HTMX)
    assert create.status_code == 403 and "write token" in create.json()["detail"]
    assert (await client.delete(f"/ui/holds/{made.id}", headers=HTMX)).status_code == 403
    assert [h.id for h in await api.list_holds(app.state.context.clock())] == [made.id]


async def test_the_event_stream_sends_each_event_as_an_html_row() -> None:
    """The hub's frames, as the console sends them: one ``disruption`` event per disruption event, an HTML row with
    its message escaped; comments (keep-alive, the end) as they are."""
    hub = EventHub(8)
    sub = hub.subscribe()
    sent = DisruptionEvent(decision_id="dec-1", node="idle", phase="Evicted", message="pod <web> evicted",
                           at=T0)
    assert hub.publish(sent) == 1
    hub.close()
    frames = [f async for f in event_rows(hub.stream(sub))]
    assert [f.event for f in frames] == ["disruption", None]
    row = str(frames[0].data)
    assert frames[0].id == str(sent.id)
    assert row.startswith('<tr class="event Evicted"><td class="at">2026-11-23 18:30:00Z</td><td>Evicted</td>')
    assert "pod &lt;web&gt; evicted" in row and 'href="/ui/decisions/dec-1"' in row and "\n" not in row
    assert frames[1].comment is not None and "shutting down" in frames[1].comment


async def test_assets_come_from_the_package_and_the_pages_are_not_api(
        console: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = console
    htmx = await client.get("/ui/static/htmx.min.js")
    assert htmx.status_code == 200 and htmx.headers["content-type"].startswith("text/javascript")
    assert "htmx 2.0.11" in htmx.text[:200] and "Zero-Clause BSD" in htmx.text[:1000]
    assert (await client.get("/ui/static/console.css")).headers["content-type"].startswith("text/css")
    assert (await client.get("/ui/static/../__init__.py")).status_code == 404
    assert (await client.get("/ui/static/templates")).status_code == 404
    await sign_in(client)
    for path in ("/ui", "/ui/nodes", "/ui/holds", "/ui/budgets", "/ui/decisions/dec-real"):
        text = (await client.get(path)).text
        assert "http://" not in text and "https://" not in text, path  # nothing is fetched from elsewhere
    assert not [p for p in app.openapi()["paths"] if p.startswith("/ui")]


async def test_a_hold_expires_after_the_apis_now_even_a_simulated_one(
        stores: tuple[DecisionStore, DecisionStore]) -> None:
    """The embedded mode's API runs on simulated time: a hold "for 2h" made from the console ends two simulated hours
    after the simulated now, which may be long before the real one; one that ends before the API's now is refused,
    located at the field, as FastAPI words it."""
    api, _ = stores
    simulated = datetime(2020, 1, 1, tzinfo=UTC)
    app = create_app(Settings(token=SecretStr(TOKEN), database_url="sqlite://", cluster=api.cluster), api,
                     bus=InMemoryBus(), clock=lambda: simulated)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        await sign_in(client)
        made = await client.post("/ui/holds", data={"scope": "cluster", "reason": "simulated", "for": "2h"},
                                 headers=HTMX)
        assert made.status_code == 200 and 'role="alert"' not in made.text, made.text
        [hold] = await api.list_holds(simulated)
        assert hold.expires_at is not None and hold.expires_at.replace(tzinfo=UTC) == simulated + timedelta(hours=2)
        late = await client.post("/v1/holds", headers=AUTH, json={
            "scope": "cluster", "reason": "r", "expiresAt": (simulated - timedelta(seconds=1)).isoformat()})
        assert late.status_code == 422
        assert late.json()["detail"] == [{"loc": ["body", "expiresAt"], "msg": "Value error, must be in the future",
                                          "type": "value_error"}]
