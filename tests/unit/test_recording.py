"""``ebb.core.recording``: observed changes of a cluster become trace events, table-driven; redaction and
anonymization keep out what must stay out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ebb.core.recording import Anonymizer, Recorder, arrival, redacted
from ebb.core.traces import Trace

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def pod(name: str, *, node: str | None = None, owner: tuple[str, str] | None = ("ReplicaSet", "web"),
        phase: str = "Running", deleting: bool = False, cpu: str = "500m", namespace: str = "shop") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": "web"}, "uid": f"uid-{name}",
                            "annotations": {"karpenter.sh/do-not-disrupt": "true", "secret.example/token": "s3cr3t"}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": "o",
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T12:00:00Z"
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "registry.example/secret-app:1",
                        "env": [{"name": "PASSWORD", "value": "hunter2"}], "command": ["run"],
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        "nodeSelector": {"team": "data"}, "volumes": [{"name": "v", "secret": {"secretName": "db"}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def node(name: str, *, taints: tuple[str, ...] = (), deleting: bool = False, decision: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"karpenter.sh/nodepool": "general",
                                                     "node.kubernetes.io/instance-type": "m5.large",
                                                     "karpenter.sh/capacity-type": "on-demand",
                                                     "kubernetes.io/hostname": name}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T12:00:00Z"
    if decision:
        meta["annotations"] = {"ebb.sh/decision-id": decision}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "spec": {"taints": [{"key": t, "effect": "NoSchedule"} for t in taints]}}


def claim(name: str, node_name: str, condition: str, reason: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
            "status": {"nodeName": node_name,
                       "conditions": [{"type": condition, "status": "True", "reason": reason}]}}


def event(reason: str, kind: str, name: str, message: str, component: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.1", "namespace": "default"},
            "reason": reason, "message": message, "involvedObject": {"kind": kind, "name": name},
            "source": {"component": component}}


def ref(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def play(start: list[dict[str, Any]], changes: list[tuple[float, Any]], end: float = 600.0,
         anonymizer: Anonymizer | None = None) -> Trace:
    """Feed a recorder ``changes``: (seconds, object) for an upsert, (seconds, ("delete", kind, ns, name))."""
    recorder = Recorder(start=T0, documents=start, anonymizer=anonymizer)
    for at, change in changes:
        when = T0 + timedelta(seconds=at)
        if isinstance(change, tuple):
            _, kind, namespace, name = change
            recorder.observe(when, kind, namespace, name, None)
        else:
            recorder.observe(when, *ref(change), change)
    return recorder.trace(T0 + timedelta(seconds=end), name="recorded")


def actions(trace: Trace) -> list[tuple[float, str, str]]:
    """(at, arrive/depart, pod name) of a trace's events."""
    out = []
    for e in trace.events:
        if e.create is not None:
            out.append((e.at, "arrive", e.create.objects[0]["metadata"]["name"]))
        elif e.depart is not None:
            out.append((e.at, "depart", e.depart.name))
    return out


def deleted(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    return ("delete", *ref(obj))


BUSY = node("n1")
CASES: list[tuple[str, list[dict[str, Any]], list[tuple[float, Any]], list[tuple[float, str, str]]]] = [
    ("a new pod arrives; bound later it is still one arrival",
     [BUSY], [(10, pod("a")), (12, pod("a", node="n1"))], [(10, "arrive", "a")]),
    ("a pod deleted departs when it is deleted",
     [BUSY, pod("a", node="n1")], [(30, deleted(pod("a")))], [(30, "depart", "a")]),
    ("a pod departs when its deletion starts, not when it is gone",
     [BUSY, pod("a", node="n1")], [(30, pod("a", node="n1", deleting=True)), (40, deleted(pod("a")))],
     [(30, "depart", "a")]),
    ("a finished pod departs when it finishes",
     [BUSY], [(5, pod("j", owner=("Job", "j"))), (6, pod("j", owner=("Job", "j"), node="n1")),
              (100, pod("j", owner=("Job", "j"), node="n1", phase="Succeeded"))],
     [(5, "arrive", "j"), (100, "depart", "j")]),
    ("a pod evicted from a disrupted node and made again is the same replica: no event; its later departure "
     "names the first pod",
     [BUSY, pod("a", node="n1")],
     [(50, node("n1", taints=("karpenter.sh/disrupted",))), (51, deleted(pod("a", node="n1"))), (52, pod("a2")),
      (300, deleted(pod("a2")))],
     [(300, "depart", "a")]),
    ("ebb's taint is a disruption too",
     [BUSY, pod("a", node="n1")],
     [(50, node("n1", taints=("ebb.sh/disrupted",))), (51, deleted(pod("a", node="n1"))), (52, pod("a2"))], []),
    ("a pod deleted from a node that is not disrupted is the workload's own departure",
     [BUSY, pod("a", node="n1")], [(51, deleted(pod("a", node="n1"))), (52, pod("a2"))],
     [(51, "depart", "a"), (52, "arrive", "a2")]),
    ("an evicted replica that is never made again departs at its eviction",
     [BUSY, pod("a", node="n1")], [(50, node("n1", deleting=True)), (51, deleted(pod("a", node="n1")))],
     [(51, "depart", "a")]),
    ("a bare pod on a disrupted node departs (nothing makes it again)",
     [BUSY, pod("b", node="n1", owner=None)],
     [(50, node("n1", taints=("karpenter.sh/disrupted",))), (51, deleted(pod("b", node="n1", owner=None)))],
     [(51, "depart", "b")]),
    ("a pod seen only on its way out neither arrives nor departs",
     [BUSY], [(5, pod("c", node="n1", phase="Succeeded")), (6, deleted(pod("c")))], []),
    ("a DaemonSet's pods follow the nodes: neither arrivals nor departures",
     [BUSY], [(5, pod("ds-x", owner=("DaemonSet", "agent"))), (9, deleted(pod("ds-x", owner=("DaemonSet", "agent"))))],
     []),
    ("times never go backwards (a late watch event)",
     [BUSY], [(20, pod("a")), (10, pod("b"))], [(20, "arrive", "a"), (20, "arrive", "b")]),
]


@pytest.mark.parametrize(("start", "changes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pod_arrivals_and_departures(start: list[dict[str, Any]], changes: list[tuple[float, Any]],
                                     expected: list[tuple[float, str, str]]) -> None:
    assert actions(play(start, changes)) == expected


NODE_CASES: list[tuple[str, list[dict[str, Any]], list[tuple[float, Any]], list[tuple[float, str, str, str, str]]]] = [
    ("a node that appears is the provisioner's launch", [],
     [(10, node("n2"))], [(10, "n2", "launched", "karpenter", "provisioning")]),
    ("a node whose NodeClaim Karpenter launched for a disruption is its replacement, the Event seen first",
     [], [(8, event("DisruptionLaunching", "NodeClaim", "c9", "Launching NodeClaim: Underutilized", "karpenter")),
          (10, node("n9")), (11, claim("c9", "n9", "Ready", ""))],
     [(10, "n9", "launched", "karpenter", "replacement")]),
    ("a node with ebb's decision is ebb's replacement", [],
     [(10, node("n3", decision="d-1"))], [(10, "n3", "launched", "ebb", "replacement")]),
    ("Karpenter's removal: its taint and the NodeClaim's reason", [BUSY],
     [(5, claim("c1", "n1", "DisruptionReason", "Underutilized")),
      (20, node("n1", taints=("karpenter.sh/disrupted",))), (30, node("n1", deleting=True)),
      (31, deleted(BUSY))],
     [(30, "n1", "removed", "karpenter", "Underutilized")]),
    ("ebb's removal: its taint and its Event", [BUSY],
     [(20, node("n1", taints=("ebb.sh/disrupted",))),
      (21, event("DisruptionTerminating", "Node", "n1", "Disrupting Node: Empty/Delete", "ebb-termination-executor")),
      (40, deleted(BUSY))],
     [(40, "n1", "removed", "ebb", "Empty")]),
    ("Karpenter's Event on the NodeClaim names the node's reason", [BUSY, claim("c1", "n1", "Ready", "")],
     [(21, event("DisruptionTerminating", "NodeClaim", "c1", "Disrupting NodeClaim: Drifted/Replace",
                 "karpenter")), (40, deleted(BUSY))],
     [(40, "n1", "removed", "karpenter", "Drifted")]),
    ("a candidate's condition (Consolidatable) is no reason; Karpenter's DisruptionReason seen after the Node's "
     "deletion still names it", [BUSY, claim("c1", "n1", "Consolidatable", "Consolidatable")],
     [(20, node("n1", taints=("karpenter.sh/disrupted",))), (30, node("n1", deleting=True)),
      (31, claim("c1", "n1", "DisruptionReason", "Empty")), (32, deleted(BUSY))],
     [(30, "n1", "removed", "karpenter", "Empty")]),
    ("a drifted NodeClaim that Karpenter removes without saying why: Drifted",
     [BUSY, claim("c1", "n1", "Drifted", "Drifted")],
     [(20, node("n1", taints=("karpenter.sh/disrupted",))), (32, deleted(BUSY))],
     [(32, "n1", "removed", "karpenter", "Drifted")]),
    ("a node deleted without a disruption: by someone unknown", [BUSY],
     [(40, deleted(BUSY))], [(40, "n1", "removed", "unknown", "deleted")]),
]


@pytest.mark.parametrize(("start", "changes", "expected"), [c[1:] for c in NODE_CASES],
                         ids=[c[0] for c in NODE_CASES])
def test_node_launches_and_removals_are_observed(start: list[dict[str, Any]], changes: list[tuple[float, Any]],
                                                 expected: list[tuple[float, str, str, str, str]]) -> None:
    trace = play(start, changes)
    assert [(c.at, c.node, c.change, c.by, c.reason) for c in trace.observed] == expected
    assert all(c.nodepool == "general" and c.instance_type == "m5.large" for c in trace.observed)
    assert not [e for e in trace.events if e.create or e.depart]  # node changes are no workload events


def test_writing_the_trace_so_far_moves_no_later_change() -> None:
    recorder = Recorder(start=T0, documents=[BUSY])
    recorder.observe(T0 + timedelta(seconds=5), "Pod", "shop", "a", pod("a"))
    assert recorder.trace(T0 + timedelta(seconds=60), name="saved").duration == 60.0
    recorder.observe(T0 + timedelta(seconds=58), "Pod", "shop", "b", pod("b"))  # held back, handed over late
    assert actions(recorder.trace(T0 + timedelta(seconds=61), name="saved")) == [(5, "arrive", "a"),
                                                                                  (58, "arrive", "b")]


def test_the_trace_holds_its_start_duration_and_starting_cluster() -> None:
    trace = play([BUSY, pod("a", node="n1")], [(10, pod("b"))], end=125.5)
    assert (trace.start, trace.duration) == (T0, 125.5)
    assert [(d["kind"], d["metadata"]["name"]) for d in trace.cluster or []] == [("Node", "n1"), ("Pod", "a")]
    again = Trace.model_validate(trace.model_dump(by_alias=True, mode="json"))  # the file round trip
    assert again == trace


def test_an_arrival_is_the_pod_as_its_controller_made_it_with_only_what_decisions_read() -> None:
    arrived = arrival(pod("a", node="n1"))
    assert arrived["status"] == {"phase": "Pending"}
    assert "nodeName" not in arrived["spec"]
    assert arrived["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert arrived["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert arrived["spec"]["containers"] == [{"name": "app", "resources": {"requests": {"cpu": "500m",
                                                                                       "memory": "1Gi"}}}]
    assert arrived["spec"]["nodeSelector"] == {"team": "data"}
    text = repr(arrived)
    for secret in ("hunter2", "PASSWORD", "s3cr3t", "secret-app", "secretName", "run"):
        assert secret not in text


def test_redaction_keeps_karpenter_and_ebb_annotations_on_other_kinds() -> None:
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general", "annotations": {"karpenter.sh/nodepool-hash": "1", "owner": "bob"}},
            "spec": {"template": {}}}
    assert redacted(pool)["metadata"]["annotations"] == {"karpenter.sh/nodepool-hash": "1"}


def test_anonymized_names_are_hashed_consistently_and_pools_keep_theirs() -> None:
    secret = Anonymizer(b"key")
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}}
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"}, "spec": {}}
    trace = play([BUSY, pod("a", node="n1"), pdb, pool],
                 [(10, pod("b")), (20, deleted(pod("a"))), (30, node("n2"))], anonymizer=secret)
    text = trace.model_dump_json()
    for name in ('"shop"', '"a"', '"b"', '"n1"', '"n2"', '"web"'):
        assert name not in text
    cluster = {d["kind"]: d for d in trace.cluster or []}
    assert cluster["NodePool"]["metadata"]["name"] == "general"
    hashed_web = secret.hashed("web")
    assert cluster["Pod"]["metadata"]["labels"] == {"app": hashed_web}
    assert cluster["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == {"app": hashed_web}
    assert cluster["Pod"]["metadata"]["ownerReferences"][0]["name"] == hashed_web
    assert cluster["Pod"]["spec"]["nodeName"] == cluster["Node"]["metadata"]["name"] == secret.hashed("n1")
    assert cluster["Node"]["metadata"]["labels"]["kubernetes.io/hostname"] == secret.hashed("n1")
    depart = next(e.depart for e in trace.events if e.depart is not None)
    assert (depart.namespace, depart.name) == (secret.hashed("shop"), secret.hashed("a"))
    assert trace.observed[0].node == secret.hashed("n2")
    assert Anonymizer(b"other").hashed("web") != hashed_web  # another recording's key: another hash
