"""Hostile input for the fuzzing of everything that reads a cluster (the parser, ``POST /v1/plan``, the services'
handlers): a small valid cluster touching every kind's parser, and ``hostile_clusters``, a Hypothesis strategy
that makes one to three of its fields hostile (None, huge or negative numbers, NaN, odd strings, lists,
mappings). Pure."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

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

#: strings that look like quantities, durations, schedules or percentages and are not, or barely are
HOSTILE_STRINGS = ["1e30", "-4", "99999999999999999999", "1Ei", "0.0000001m", "", " ", "NaN", "inf", "-0",
                   "1e-30", "Never", "-1s", "99999999999h", "@daily", "* * *", "100%", "-10%", "1000%", "true",
                   "false"]
#: any value a field may be made
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


def valid_cluster() -> list[dict[str, Any]]:
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
    documents = valid_cluster()
    for _ in range(draw(st.integers(1, 3))):
        document = documents[draw(st.integers(0, len(documents) - 2))]
        path = draw(st.sampled_from(list(_paths(document))))
        target: Any = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = copy.deepcopy(draw(hostile_values))
    return documents
