"""Findings (ebb.core.findings): Drifted, Expired, Empty and Consolidatable from the engine's own rules,
the first-seen time of the ones whose start the snapshot does not tell, the ebb.sh/drifted value, and the
raised/cleared changes between two sets of findings."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from ebb.core import findings as found_in
from ebb.core.cluster import ClusterView
from ebb.core.findings import Change, Finding, Findings, diff, drifted_annotation, with_since
from ebb.core.model import Snapshot
from tests.kit.builders import NOW, OLD, ago, node, nodeclaim, nodepool, pod, snapshot

REQ_OD = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
REQ_SPOT = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
NEVER: dict[str, Any] = {"consolidate_after": "Never"}


def findings(snap: Snapshot, now: datetime) -> Findings:
    return found_in.findings(ClusterView.build(snap, now))


def kinds(snap: Snapshot, name: str = "n1") -> dict[str, Finding]:
    return {f.kind: f for f in findings(snap, NOW).get(name, [])}


@pytest.mark.parametrize(("label", "docs", "expected", "phrase"), [
    ("drift by hash", [nodepool(node_hash="new", **NEVER), node("n1", node_hash="old"), pod("p", "n1")],
     {"Drifted"}, "nodepool-hash old differs from NodePool default's new"),
    ("same hash: no drift", [nodepool(node_hash="h", **NEVER), node("n1", node_hash="h"), pod("p", "n1")],
     set(), ""),
    ("drift by requirements", [nodepool(requirements=REQ_SPOT, **NEVER), node("n1"), pod("p", "n1")],
     {"Drifted"}, "karpenter.sh/capacity-type=on-demand no longer satisfies"),
    ("requirements satisfied", [nodepool(requirements=REQ_OD, **NEVER), node("n1"), pod("p", "n1")], set(), ""),
    ("expired", [nodepool(expire_after="24h", **NEVER), node("n1"), pod("p", "n1")],
     {"Expired"}, "past NodePool default's expireAfter 24h"),
    ("not yet expired", [nodepool(expire_after="24h", **NEVER), node("n1", created=ago(hours=2)), pod("p", "n1")],
     set(), ""),
    ("empty", [nodepool(**NEVER), node("n1")], {"Empty"}, "no pods need rescheduling"),
    ("daemonset pods only: empty", [nodepool(**NEVER), node("n1"),
                                    pod("ds", "n1", owner=("DaemonSet", "agent"))], {"Empty"}, ""),
    ("consolidatable", [nodepool(consolidate_after="10m"), node("n1"), pod("p", "n1", started=ago(hours=1))],
     {"Consolidatable"}, "consolidateAfter (10m) has passed"),
    ("not stable long enough", [nodepool(consolidate_after="2h"), node("n1"),
                                pod("p", "n1", started=ago(hours=1))], set(), ""),
    ("empty and consolidatable", [nodepool(consolidate_after="10m"), node("n1")], {"Empty", "Consolidatable"}, ""),
    ("none", [nodepool(**NEVER), node("n1"), pod("p", "n1")], set(), ""),
    ("not owned by a NodePool", [nodepool(), node("n1", pool=None)], set(), ""),
    ("being deleted: not empty", [nodepool(**NEVER), node("n1", deleting=True)], set(), ""),
])
def test_findings(label: str, docs: list[Any], expected: set[str], phrase: str) -> None:
    found = kinds(snapshot(*docs))
    assert set(found) == expected, label
    if phrase:
        assert any(phrase in f.reason for f in found.values()), [f.reason for f in found.values()]


@pytest.mark.parametrize(("label", "left", "claim", "expected"), [
    ("a pod left 5 minutes ago: consolidateAfter 10m not passed", ago(minutes=5), False, set()),
    ("a pod left 15 minutes ago: passed", ago(minutes=15), False, {"Consolidatable"}),
    ("no pod left", None, False, {"Consolidatable"}),
    # a node with a NodeClaim: Karpenter's record is the claim's lastPodEventTime (none here), not the service's
    ("a pod left 5 minutes ago, the node has a NodeClaim", ago(minutes=5), True, {"Consolidatable"}),
])
def test_a_pod_that_left_a_node_without_a_nodeclaim_restarts_consolidate_after(
        label: str, left: str | None, claim: bool, expected: set[str]) -> None:
    docs = [nodepool(consolidate_after="10m"), node("n1"), pod("p", "n1", started=ago(hours=1)),
            *([nodeclaim("c1", "n1")] if claim else [])]
    snap = snapshot(*docs)
    if left is not None:
        snap = replace(snap, pod_events=(("n1", datetime.fromisoformat(left)),))
    found = kinds(snap)
    assert set(found) == expected, label
    view = ClusterView.build(snap, NOW)
    if expected:
        assert "consolidateAfter (10m) has passed" in found["Consolidatable"].reason
    else:
        assert view.stable_for(view.nodes["n1"], 600) is not None


def test_since_times() -> None:
    snap = snapshot(nodepool(expire_after="24h", consolidate_after="10m", node_hash="new"),
                    node("n1", node_hash="old"), node("n2", created=ago(hours=1)),
                    pod("p", "n2", started=ago(minutes=30)))
    n1, n2 = kinds(snap, "n1"), kinds(snap, "n2")
    created = NOW.replace(year=2026, month=11, day=20, hour=0, minute=0)
    assert OLD == "2026-11-20T00:00:00Z"
    assert n1["Expired"].since == created + timedelta(hours=24)
    assert n1["Drifted"].since is None  # a hash drift carries no time
    assert n1["Empty"].since == created
    assert n1["Consolidatable"].since == created + timedelta(minutes=10)
    assert set(n2) == {"Consolidatable"}
    assert n2["Consolidatable"].since == NOW - timedelta(minutes=20)


def test_findings_are_listed_in_method_order() -> None:
    snap = snapshot(nodepool(expire_after="1h", node_hash="new"), node("n1", node_hash="old"))
    assert [f.kind for f in findings(snap, NOW)["n1"]] == ["Expired", "Drifted", "Empty", "Consolidatable"]


F_DRIFT = Finding("a", "Drifted", "drifted: hash", None)
F_EMPTY = Finding("a", "Empty", "empty", NOW)


@pytest.mark.parametrize(("label", "previous", "current", "expected"), [
    ("nothing before: raised", {}, {"a": [F_DRIFT]}, [Change(F_DRIFT, False)]),
    ("unchanged: nothing", {"a": [F_DRIFT]}, {"a": [F_DRIFT]}, []),
    ("gone: cleared", {"a": [F_DRIFT, F_EMPTY]}, {"a": [F_EMPTY]}, [Change(F_DRIFT, True)]),
    ("node gone: all cleared", {"a": [F_DRIFT, F_EMPTY]}, {}, [Change(F_DRIFT, True), Change(F_EMPTY, True)]),
    ("drift reason changed: raised again", {"a": [F_DRIFT]},
     {"a": [Finding("a", "Drifted", "drifted: requirements", None)]},
     [Change(Finding("a", "Drifted", "drifted: requirements", None), False)]),
    ("since changed: raised again", {"a": [F_EMPTY]}, {"a": [Finding("a", "Empty", "empty", NOW + timedelta(1))]},
     [Change(Finding("a", "Empty", "empty", NOW + timedelta(1)), False)]),
    ("other reason text only: nothing", {"a": [F_EMPTY]}, {"a": [Finding("a", "Empty", "empty!", NOW)]}, []),
    ("clears before raises", {"b": [Finding("b", "Empty", "e", NOW)]}, {"a": [F_DRIFT]},
     [Change(Finding("b", "Empty", "e", NOW), True), Change(F_DRIFT, False)]),
])
def test_diff(label: str, previous: dict[str, list[Finding]], current: dict[str, list[Finding]],
              expected: list[Change]) -> None:
    assert diff(previous, current) == expected, label


def test_fixing_the_drift_clears_it() -> None:
    before = findings(snapshot(nodepool(node_hash="new", **NEVER), node("n1", node_hash="old"), pod("p", "n1")), NOW)
    after = findings(snapshot(nodepool(node_hash="new", **NEVER), node("n1", node_hash="new"), pod("p", "n1")), NOW)
    [change] = diff(before, after)
    assert change.cleared and change.finding.kind == "Drifted" and change.finding.node == "n1"


def test_time_passing_alone_raises_expiry() -> None:
    docs = [nodepool(expire_after="24h", **NEVER), node("n1", created=ago(hours=23)), pod("p", "n1")]
    early = findings(snapshot(*docs), NOW)
    late = findings(snapshot(*docs), NOW + timedelta(hours=2))
    assert early == {}
    assert [(c.finding.kind, c.cleared) for c in diff(early, late)] == [("Expired", False)]
    # the Expired reason names the age, which grows: not a change
    later = findings(snapshot(*docs), NOW + timedelta(hours=3))
    assert diff(late, later) == []


T1 = NOW + timedelta(minutes=5)
F_CLAIM = Finding("a", "Drifted", "drifted: claim", NOW - timedelta(hours=1))


@pytest.mark.parametrize(("label", "previous", "current", "now", "expected"), [
    ("first seen: now", {}, {"a": [F_DRIFT]}, NOW, {"a": [Finding("a", "Drifted", "drifted: hash", NOW)]}),
    ("seen before: kept", {"a": [Finding("a", "Drifted", "drifted: hash", NOW)]}, {"a": [F_DRIFT]}, T1,
     {"a": [Finding("a", "Drifted", "drifted: hash", NOW)]}),
    ("reason changed, still drifted: kept", {"a": [Finding("a", "Drifted", "drifted: hash", NOW)]},
     {"a": [Finding("a", "Drifted", "drifted: requirements", None)]}, T1,
     {"a": [Finding("a", "Drifted", "drifted: requirements", NOW)]}),
    ("cleared in between: seen anew", {}, {"a": [F_DRIFT]}, T1, {"a": [Finding("a", "Drifted", "drifted: hash", T1)]}),
    ("known since: the snapshot's", {"a": [Finding("a", "Drifted", "drifted: hash", NOW)]}, {"a": [F_CLAIM]}, T1,
     {"a": [F_CLAIM]}),
    ("another node's: not carried", {"b": [Finding("b", "Drifted", "drifted: hash", NOW)]}, {"a": [F_DRIFT]}, T1,
     {"a": [Finding("a", "Drifted", "drifted: hash", T1)]}),
    ("another kind's: not carried", {"a": [F_EMPTY]}, {"a": [F_DRIFT, F_EMPTY]}, T1,
     {"a": [Finding("a", "Drifted", "drifted: hash", T1), F_EMPTY]}),
])
def test_with_since(label: str, previous: Findings, current: Findings, now: datetime, expected: Findings) -> None:
    assert with_since(previous, current, now) == expected, label


@pytest.mark.parametrize(("label", "of_node", "expected"), [
    ("drifted: its reason", [F_EMPTY, F_DRIFT], "drifted: hash"),
    ("not drifted: none", [F_EMPTY], None),
    ("no findings: none", [], None),
])
def test_drifted_annotation(label: str, of_node: list[Finding], expected: str | None) -> None:
    assert drifted_annotation(of_node) == expected, label
