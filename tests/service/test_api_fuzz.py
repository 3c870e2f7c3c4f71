"""The decisions-api against its own OpenAPI document, fuzzed by schemathesis (issue 13: fuzzing).

The app runs in process (schemathesis' ASGI transport, the FastAPI lifespan on: consumers running) on the
stores the service tests use: SQLite for the store (the embedded mode's database) and the InMemoryBus. Before
it serves, the lifespan seeds it with data, so the generated requests reach decisions, timelines,
explanations and budgets rather than only 404s: the ``empty-node`` cluster (NodePool ``default``, nodes
``idle`` and ``busy``) on ``ebb.cluster.objects``, a leader planner's pass over it on ``ebb.planner.passes``
(what node explanations are answered from), decisions in every state with timelines, and a hold.
Path parameters are drawn now and then from the seeded names (a ``flatmap_path_parameters`` hook), the rest
of the time schemathesis' own.

Every check schemathesis has runs on every response (no 5xx, status codes and content types documented,
responses conforming to their schemas, schema-valid requests accepted and invalid ones refused, ...). The
number of examples is bounded (``EXAMPLES`` per operation, ``STATEFUL_STEPS`` for the holds state machine) so
the module runs in well under a minute; ``EBB_FUZZ_EXAMPLES`` raises it for a longer run. The requests sent
are counted and printed (``pytest -s``)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from pydantic import SecretStr
from schemathesis.python.asgi import shutdown_lifespans

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_PLANNER_PASSES, PlannerPass
from ebb.core.decision import State
from ebb.core.engine import run_pass
from ebb.core.findings import findings
from ebb.core.methods.base import EngineOptions
from ebb.core.snapshot import parse_documents
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.decisions_api import documents
from tests.kit.messages import cluster_object

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: generated requests per operation (schemathesis' examples, coverage and fuzzing phases share it)
EXAMPLES = int(os.environ.get("EBB_FUZZ_EXAMPLES", "25"))
#: steps of the stateful run over the holds (create, list, delete) and the decisions (list, get)
STATEFUL_STEPS = int(os.environ.get("EBB_FUZZ_STATEFUL_STEPS", "15"))
SEEDED_AT = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)
#: the names the seeded data has, by path parameter
KNOWN: dict[str, list[str]] = {
    "decision_id": [f"dec-{s.value}" for s in State],
    "name": ["idle", "busy", "default"],
}
#: requests sent, by operation (printed at the end of the module)
SENT: Counter[str] = Counter()


async def _seed_store(store: DecisionStore) -> None:
    """A decision in every state (with a timeline) and a hold."""
    for i, state in enumerate(State):
        node = ("idle", "busy")[i % 2]
        decision_id = f"dec-{state.value}"
        await store.add_decision(
            decision_id=decision_id, method="emptiness", reason="Empty", action="delete",
            nodes=[{"name": node, "nodePool": "default", "instanceType": "m5.large"}], replacements=[],
            created_at=SEEDED_AT - timedelta(minutes=i), state=state, savings=0.096,
            explanation={"summary": f"{node} is empty"})
        await store.add_decision_event(decision_id=decision_id, event_id=f"{decision_id}-proposed",
                                       type="Proposed", at=SEEDED_AT - timedelta(minutes=i), node=node,
                                       detail={"message": "proposed"})
    await store.create_hold(scope_kind="nodepool", scope="default", reason="seeded", expires_at=None,
                            now=SEEDED_AT, created_by="fuzz")


def _leader_pass() -> PlannerPass:
    """The pass a leader planner would have published over the seeded cluster."""
    snapshot = parse_documents(documents("empty-node.yaml"), bundled_catalog=bundled_catalog)
    options = EngineOptions()
    view = options.view_of(snapshot, SEEDED_AT)
    return PlannerPass.of_pass(cluster="fuzz", view=view, result=run_pass(view, options), found=findings(view),
                               revision=1, demand=())


class SeededApi:
    """The ASGI app schemathesis calls: each lifespan (schemathesis ends it after every test) starts a new
    decisions-api on a new InMemoryBus with the cluster published, over the one seeded SQLite database, as a
    restarted service would (an app's consumers and event hub are not restartable)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "ebb.db"
        self.url = f"sqlite:///{self.path}"
        #: the holds table's rows as seeded (None until the first start seeds it)
        self.seeded_holds: list[tuple[Any, ...]] | None = None
        self.app = self._build(InMemoryBus(), DecisionStore.from_url(self.url, "fuzz"))
        self.starts = 0

    def restore_holds(self) -> None:
        """Put the holds back as seeded (nothing before the first start has seeded them)."""
        if self.seeded_holds is None:
            return
        with sqlite3.connect(self.path) as db:
            db.execute("DELETE FROM holds")
            for row in self.seeded_holds:
                db.execute(f"INSERT INTO holds VALUES ({', '.join('?' * len(row))})", row)

    @staticmethod
    def _build(bus: InMemoryBus, store: DecisionStore) -> FastAPI:
        return create_app(Settings(token=SecretStr(TOKEN), database_url="sqlite://", cluster="fuzz"), store, bus=bus)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        bus, store = InMemoryBus(), DecisionStore.from_url(self.url, "fuzz")
        # in the loop schemathesis runs the app on: the store and the bus are used from that loop only
        if self.starts == 0:
            await upgrade_async(self.url)
            await _seed_store(store)
            with sqlite3.connect(self.path) as db:
                self.seeded_holds = db.execute("SELECT * FROM holds").fetchall()
        self.starts += 1
        for doc in documents("empty-node.yaml"):
            await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))
        await bus.publish(TOPIC_PLANNER_PASSES, _leader_pass())
        self.app = app = self._build(bus, store)
        serve = app.router.lifespan_context

        @asynccontextmanager
        async def ready(application: FastAPI) -> AsyncIterator[Any]:
            async with serve(application) as state:
                await asyncio.wait_for(asyncio.gather(app.state.live.seeded.wait(), app.state.passes.seeded.wait(),
                                                      app.state.consumers.events_ready.wait()), 30)
                yield state
            await store.close()

        app.router.lifespan_context = ready
        await app(scope, receive, send)


def _app_schema() -> Any:
    """schemathesis' schema of the app's OpenAPI document, built at import without starting anything
    (``from_asgi`` would start the lifespan while pytest collects)."""
    api = SeededApi(Path(_WORKDIR.name))
    config = schemathesis.Config.from_dict({
        # the bearer token as the schema's security scheme: schemathesis sends it, and leaves it out (expecting
        # a 401) where it tests the authentication
        "auth": {"openapi": {"HTTPBearer": {"bearer": TOKEN}}},
        # an answer's time limit, generous for a loaded machine (the one event stream has its own, below: it never
        # ends, and is read for a fraction of a second or up to its first events)
        "request-timeout": 10,
        "max-stream-events": 3,
        # where a schema-valid request can still be invalid in ways JSON Schema cannot say, a 422 for it is
        # no contract failure: every string is a schema-valid plan body, and only a kubectl dump is a
        # snapshot; a hold's expiresAt must be in the future and its NodePool one the live state has; a
        # page cursor is base64url, but only the ones the API made decode to a position
        "operations": [{"include-name": name, "checks": {"positive_data_acceptance": {
            "expected-statuses": ["2xx", "401", "404", "422", "503"]}}}
            for name in ("POST /v1/plan", "POST /v1/holds", "GET /v1/decisions")] + [
            # a stream's headers and first keep-alive are there at once; nothing is published meanwhile
            {"include-name": "GET /v1/events", "request-timeout": 0.2}],
    })
    loaded = schemathesis.openapi.from_dict(api.app.openapi(), config=config)
    loaded.app = api

    @loaded.hook
    def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
        known = {k: KNOWN[k] for k in path_parameters or {} if k in KNOWN}
        if not known:
            return st.just(path_parameters)
        return st.one_of(st.just(path_parameters),
                         st.fixed_dictionaries({k: st.sampled_from(v) for k, v in known.items()}).map(
                             lambda chosen: {**path_parameters, **chosen}))

    @loaded.hook
    def after_call(context: Any, case: Any, response: Any) -> None:
        SENT[f"{case.method} {case.path}"] += 1

    return loaded


_WORKDIR = tempfile.TemporaryDirectory(prefix="ebb-fuzz-")
schema = _app_schema()


@pytest.fixture(scope="module", autouse=True)
def _stop_the_app() -> Iterator[None]:
    """Stops the app's lifespan (consumers, store) once the module's tests are done, and prints the counts."""
    try:
        yield
    finally:
        shutdown_lifespans()
        _WORKDIR.cleanup()
        print(f"\ndecisions-api fuzzing: {sum(SENT.values())} requests", dict(sorted(SENT.items())))


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_keeps_its_contract(case: Any) -> None:
    case.call_and_validate()


def test_the_seeded_data_is_reachable() -> None:
    """The fuzzing reaches real objects: the seed is visible through the API the fuzzer calls."""
    decision = schema["/v1/decisions/{decision_id}"]["GET"]
    response = decision.Case(path_parameters={"decision_id": "dec-executing"}).call(headers=AUTH)
    assert response.status_code == 200 and response.json()["timeline"][0]["type"] == "Proposed"
    budgets = schema["/v1/nodepools/{name}/budgets"]["GET"].Case(path_parameters={"name": "default"})
    body = budgets.call(headers=AUTH).json()
    assert body["nodes"]["total"] == 2 and "seeded" in [h["reason"] for h in body["holds"]]
    explain = schema["/v1/nodes/{name}/explain"]["GET"].Case(path_parameters={"name": "busy"})
    answer = explain.call(headers=AUTH).json()
    assert answer["liveDecision"]["id"] in KNOWN["decision_id"]
    assert answer["source"] == "planner-pass" and answer["pass"]["at"] == "2026-11-23T18:00:00Z"


#: the operations the stateful run chained, each as "previous -> next" (printed at the end)
CHAINED: Counter[str] = Counter()


class HoldsAndDecisions(schema.as_state_machine()):  # type: ignore[misc]
    """Sequences of calls linked by what the responses carry (links schemathesis infers from the
    schemas: a created hold's id to its deletion, a listed decision's id to its detail, ...)."""

    def setup(self) -> None:
        self.previous: str | None = None
        # every sequence starts from the seeded holds: one that deleted the seeded hold, or created others, would
        # otherwise change what the next one's links resolve to (the holds a GET lists, which a DELETE takes its
        # id from), and hypothesis requires a sequence's data to depend on its draws only
        schema.app.restore_holds()

    def after_call(self, response: Any, case: Any) -> None:
        step = f"{case.method} {case.operation.path}"
        if self.previous is not None:
            CHAINED[f"{self.previous} -> {step}"] += 1
        self.previous = step


# derandomized: the same sequences on every run, so the chains asserted below are there every time (at random,
# 15 sequences sometimes never went from a page to a decision)
HoldsAndDecisions.TestCase.settings = settings(
    max_examples=STATEFUL_STEPS, stateful_step_count=6, deadline=None, suppress_health_check=list(HealthCheck),
    derandomize=True)


def test_stateful_runs_chain_holds_and_decisions() -> None:
    """The state machine runs and its links lead from creating a hold to deleting it (no unlinked run)."""
    HoldsAndDecisions.run()
    print("\nstateful chains:", dict(CHAINED.most_common()))
    assert CHAINED["POST /v1/holds -> DELETE /v1/holds/{hold_id}"] > 0, CHAINED
    assert CHAINED["GET /v1/decisions -> GET /v1/decisions/{decision_id}"] > 0, CHAINED


# -- the contract failures the fuzzing found, pinned ---------------------------------------------------------


@pytest.fixture
async def client(store: DecisionStore) -> AsyncIterator[httpx.AsyncClient]:
    """The API on a migrated SQLite store, its lifespan not run (no live state: the store paths only)."""
    app = create_app(Settings(token=SecretStr(TOKEN), database_url="sqlite://"), store, bus=InMemoryBus())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                                 headers=AUTH) as c:
        yield c


async def test_an_empty_cursor_is_the_first_page(client: httpx.AsyncClient, store: DecisionStore) -> None:
    await _seed_store(store)
    first = await client.get("/v1/decisions", params={"cursor": ""})
    assert first.status_code == 200, first.text
    assert [d["id"] for d in first.json()["items"]] == [f"dec-{s.value}" for s in State]
    for cursor in ("budgets", "not base64!"):
        refused = await client.get("/v1/decisions", params={"cursor": cursor})
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["query", "cursor"], cursor
    spec = (await client.get("/openapi.json")).json()
    (cursor_param,) = [p for p in spec["paths"]["/v1/decisions"]["get"]["parameters"] if p["name"] == "cursor"]
    assert cursor_param["schema"]["anyOf"][0]["pattern"] == "^[A-Za-z0-9_-]*$"


async def test_hold_scopes_are_a_discriminated_union(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    body = spec["paths"]["/v1/holds"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["discriminator"]["propertyName"] == "scope"
    schemas = spec["components"]["schemas"]
    assert {scope: "target" in schemas[ref.rsplit("/", 1)[1]].get("required", [])
            for scope, ref in body["discriminator"]["mapping"].items()} == {
        "cluster": False, "nodePool": True, "node": True}
    assert 400 in map(int, spec["paths"]["/v1/holds"]["post"]["responses"])
    # errors are located by field whatever the scope, as before the union
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"scope": "node", "reason": "r"}, ["body", "target"]),
        ({"scope": "nodePool", "target": "", "reason": "r"}, ["body", "target"]),
        ({"scope": "cluster", "target": "x", "reason": "r"}, ["body", "target"]),
        ({"scope": "pool", "target": "x", "reason": "r"}, ["body", "scope"]),
        ({"reason": "r"}, ["body", "scope"]),
        ({"scope": "node", "target": "n", "reason": "r", "expiresAt": 4102444800}, ["body", "expiresAt"]),
        ({"scope": "node", "target": "n", "reason": "r", "expiresAt": "2100-01-01"}, ["body", "expiresAt"]),
    ]
    for hold, loc in cases:
        response = await client.post("/v1/holds", json=hold)
        assert response.status_code == 422 and [e["loc"] for e in response.json()["detail"]] == [loc], hold
    for hold in ({"scope": "node", "target": "n", "reason": "r"}, {"scope": "cluster", "target": "", "reason": "r"},
                 {"scope": "cluster", "reason": "r", "expiresAt": "2100-01-01T00:00:00Z"}):
        created = await client.post("/v1/holds", json=hold)
        assert created.status_code == 201, created.text
        assert created.json()["target"] == (hold.get("target") or None)


async def test_a_yaml_plan_body_is_a_document_or_nothing(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    content = spec["paths"]["/v1/plan"]["post"]["requestBody"]["content"]
    assert {s["type"] for s in content["application/yaml"]["schema"]["oneOf"]} == {"object", "array", "null"}
    yaml_body = {"Content-Type": "application/yaml"}
    # the YAML of an empty string (what the schema allowed when it said "string") is no document
    empty_string = await client.post("/v1/plan", content="''\n", headers=yaml_body)
    assert empty_string.status_code == 422 and "not a mapping" in empty_string.json()["detail"][0]["msg"]
    # a top-level sequence is one document (yaml-rs gave it as several; planned as an empty snapshot)
    nulls = await client.post("/v1/plan", content="- null\n- null\n", headers=yaml_body)
    assert nulls.status_code == 422 and "not a mapping" in nulls.json()["detail"][0]["msg"]
    # no body: the live state, not loaded here
    assert (await client.post("/v1/plan", content=b"", headers=yaml_body)).status_code == 503


async def test_405_names_every_method_of_the_path(client: httpx.AsyncClient) -> None:
    for method, path, allowed in (("OPTIONS", "/v1/holds", "GET, POST"),
                                  ("PUT", "/v1/holds/h1", "DELETE"),
                                  ("DELETE", "/v1/decisions", "GET"),
                                  ("POST", "/healthz", "GET")):
        response = await client.request(method, path)
        assert (response.status_code, response.headers["allow"]) == (405, allowed), (method, path)


@pytest.mark.parametrize(("path", "param"), [("/v1/decisions", "since"), ("/v1/nodes/idle/explain", "now"),
                                             ("/v1/nodepools/default/budgets", "now"), ("/v1/plan", "now")])
@pytest.mark.parametrize("value", ["0.5", "1700000000", "2026-11-23", "soon"])
async def test_a_time_is_rfc_3339_text(client: httpx.AsyncClient, path: str, param: str, value: str) -> None:
    """pydantic alone read a number as seconds since 1970 and a bare date as its midnight."""
    method = "POST" if path == "/v1/plan" else "GET"
    response = await client.request(method, path, params={param: value})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", param]
