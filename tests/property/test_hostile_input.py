"""Bad input never crashes and nothing is silent: a small valid cluster (a NodePool with budgets, Nodes,
Pods, a PodDisruptionBudget, a catalog) with one to three of its fields replaced by hostile values (None,
bools, huge or negative integers, NaN and infinite floats, odd strings, lists, mappings) either parses
and plans without an exception, or is refused with a SnapshotError naming the document and the field,
which `ebb plan` reports with exit 2 and POST /v1/plan with 422. Anything else (a TypeError from a
field whose shape the parser trusted, a 500) is a defect the table in
tests/unit/test_snapshot_parser.py then pins by example.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.core.plan import make_plan
from ebb.core.snapshot import SnapshotError, parse_documents
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.builders import (
    catalog,
    daemonset,
    disruption_policy,
    ds_pod,
    hold,
    node,
    nodeclaim,
    nodepool,
    pdb,
    pod,
)

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
TOKEN = "hostile-input-token"

HOSTILE_STRINGS = ["1e30", "-4", "99999999999999999999", "1Ei", "0.0000001m", "", " ", "NaN", "inf", "-0",
                   "1e-30", "Never", "-1s", "99999999999h", "@daily", "* * *", "100%", "-10%", "1000%", "true",
                   "false"]
hostile_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(HOSTILE_STRINGS),
    st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))


_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]},
    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}]},
}
_SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "minDomains": 2, "labelSelector": {"matchLabels": {"app": "x"}}}]


def _cluster() -> list[dict[str, Any]]:
    """A small valid cluster touching every kind's parser: budgets with a schedule, taints, a NodeClaim, a
    DaemonSet and its pod, a hold, PDBs, a pod with affinities, spread, tolerations, a host port and a
    limit, and a second NodePool governed by a DisruptionPolicy. The catalog comes last and is left alone
    (its own parser is a table of instance types). A deep copy: the builders keep references to the module's
    affinity and spread, which the mutations must not reach."""
    return copy.deepcopy([
        nodepool(budgets=[{"nodes": "10%"}, {"nodes": "1", "schedule": "@daily", "duration": "1h"}],
                 expire_after="720h"),
        node("a"), node("b", itype="t3.medium"), pod("p1", "a", cpu="500m"), pod("p2", "b", cpu="1"),
        node("c", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        pod("p3", "c", labels={"app": "x"}, affinity=_AFFINITY, spread=_SPREAD, host_port=8080, priority=10,
            tolerations=[{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
            limits={"memory": "1Gi"}),
        nodeclaim("claim-c", "c"), daemonset("agent"), ds_pod("agent-c", "c"),
        hold("h1", "nodePool", "default", expires_at="2026-11-24T00:00:00Z"),
        pdb("pdb", {"app": "x"}, min_available=1), pdb("pdb-half", {"app": "x"}, min_available="50%"),
        nodepool("other", budgets=[{"nodes": "0"}], expire_after="Never"), node("d", pool="other"),
        disruption_policy("other", consolidationPolicy="WhenEmpty", consolidateAfter="5m", expireAfter="720h",
                          stabilizationWindow="10m", budgets=[{"nodes": "20%"}, {
                              "nodes": "1", "schedule": "@daily", "duration": "1h", "reasons": ["Expired"]}]),
        catalog(),
    ])


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every field and list item under `value`, as key paths."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from _paths(item, (*prefix, index))


@st.composite
def hostile_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """The valid cluster with one to three fields (of any document but the catalog) made hostile."""
    documents = _cluster()
    for _ in range(draw(st.integers(1, 3))):
        document = documents[draw(st.integers(0, len(documents) - 2))]
        path = draw(st.sampled_from(list(_paths(document))))
        target: Any = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = copy.deepcopy(draw(hostile_values))
    return documents


def test_the_unmutated_cluster_plans() -> None:
    """The generator's starting point is valid, so the refusals below come from the hostile fields."""
    make_plan(parse_documents(_cluster()), NOW, until_stable=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_clusters())
def test_the_parser_refuses_or_the_plan_runs(documents: list[dict[str, Any]]) -> None:
    try:
        snapshot = parse_documents(documents)
    except SnapshotError as exc:
        assert exc.document and exc.field, exc  # the document and the field are named
        return
    make_plan(snapshot, NOW, until_stable=True)


async def _post_plan(body: str) -> httpx.Response:
    """The plan endpoint of an app without lifespan (no consumers): an uploaded snapshot needs no store."""
    store = DecisionStore.from_url("sqlite://")
    app = create_app(Settings(token=SecretStr(TOKEN), database_url="sqlite://"), store, bus=InMemoryBus())
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
            return await client.post("/v1/plan", params={"now": "2026-11-23T18:30:00Z"}, content=body, headers={
                "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    finally:
        await store.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_clusters())
def test_post_plan_answers_200_or_422(documents: list[dict[str, Any]]) -> None:
    # json.dumps writes NaN and Infinity, which the API's JSON reader accepts like Python's
    response = asyncio.run(_post_plan(json.dumps(documents)))
    assert response.status_code in (200, 422), response.text
