"""The rules tests/kit/kube_audit.py checks ebb's requests against next to a real Karpenter (the check of
tests/integration/test_karpenter_system.py): each audited request of ebb's, on a Node at a known version, is
accepted or named as a violation. A table of what ebb does send (accepted) and of what would break Karpenter
(caught), so the integration test's empty list of violations means something."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.kube_audit import AuditEvent, AuditLog, ebb_violations

RUN_TAINT = {"key": "ebb.sh/karpenter-test", "value": "r1", "effect": "NoSchedule"}
EBB_TAINT = {"key": "ebb.sh/disrupted", "effect": "NoSchedule"}
KARPENTER_TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
EXECUTOR = "ebb-termination-executor/0.1.0"
PLANNER = "ebb-consolidation-planner/0.1.0"


class Versions:
    """n1 at 5: the test's taint only; n2 at 7: Karpenter is terminating it (its taint and finalizer); n3 at 8:
    tainted by ebb, out of load balancers."""

    nodes = {
        ("n1", "5"): {"metadata": {"name": "n1", "resourceVersion": "5"}, "spec": {"taints": [RUN_TAINT]}},
        ("n1", "6"): {"metadata": {"name": "n1", "resourceVersion": "6"}, "spec": {"taints": [RUN_TAINT, EBB_TAINT]}},
        ("n2", "7"): {"metadata": {"name": "n2", "resourceVersion": "7", "finalizers": ["karpenter.sh/termination"]},
                      "spec": {"taints": [RUN_TAINT, KARPENTER_TAINT]}},
        ("n3", "8"): {"metadata": {"name": "n3", "resourceVersion": "8", "labels": {
            "team": "web", "node.kubernetes.io/exclude-from-external-load-balancers": "ebb"}},
                      "spec": {"taints": [RUN_TAINT, EBB_TAINT]}},
    }

    def at(self, name: str, resource_version: str) -> dict[str, Any] | None:
        return self.nodes.get((name, resource_version))


def request(verb: str, resource: str, name: str, body: Any = None, *, agent: str = EXECUTOR, code: int = 200,
            subresource: str = "") -> AuditEvent:
    ref = {"resource": resource, "name": name, **({"subresource": subresource} if subresource else {})}
    return AuditEvent.parse({"stage": "ResponseComplete", "verb": verb, "objectRef": ref, "userAgent": agent,
                             "responseStatus": {"code": code}, "requestObject": body})


def taints(version: str, value: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The drainer's patch: a resourceVersion test and the whole taints list."""
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/spec/taints", "value": value}]


def claim(annotations: dict[str, str], finalizers: list[str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "pool-abc", "annotations": annotations, **({"finalizers": finalizers}
                                                                           if finalizers else {})}}


DECISION = {"ebb.sh/decision-id": "d1"}

CASES: list[tuple[str, AuditEvent, str | None]] = [
    ("ebb taints a node", request("patch", "nodes", "n1", taints("5", [RUN_TAINT, EBB_TAINT])), None),
    ("ebb takes its taint off again", request("patch", "nodes", "n1", taints("6", [RUN_TAINT])), None),
    ("ebb taints a node Karpenter is terminating, keeping its marks",
     request("patch", "nodes", "n2", taints("7", [RUN_TAINT, KARPENTER_TAINT, EBB_TAINT])), None),
    ("ebb taints a node and takes it out of load balancers",
     request("patch", "nodes", "n1", [*taints("5", [RUN_TAINT, EBB_TAINT]), {"op": "add", "path": "/metadata/labels",
                                      "value": {"node.kubernetes.io/exclude-from-external-load-balancers": "ebb"}}]),
     None),
    ("ebb's untaint takes its label off", request("patch", "nodes", "n3", [*taints("8", [RUN_TAINT]), {
        "op": "add", "path": "/metadata/labels", "value": {"team": "web"}}]), None),
    ("the planner's ebb.sh/drifted", request("patch", "nodes", "n1", {"metadata": {"annotations": {
        "ebb.sh/drifted": "drifted: ..."}}}, agent=PLANNER), None),
    ("the planner removes ebb.sh/drifted", request("patch", "nodes", "n1", {"metadata": {"annotations": {
        "ebb.sh/drifted": None}}}, agent=PLANNER), None),
    ("a replacement NodeClaim", request("create", "nodeclaims", "", claim(DECISION), code=201), None),
    ("a resumed create answered 409", request("create", "nodeclaims", "", claim(DECISION), code=409), None),
    ("a NodeClaim deleted", request("delete", "nodeclaims", "pool-abc"), None),
    ("an eviction", request("create", "pods", "web-1", subresource="eviction", code=429), None),
    ("a patch that lost the race changed nothing",
     request("patch", "nodes", "n1", taints("4", [EBB_TAINT]), code=422), None),
    ("Karpenter's own marks are Karpenter's business",
     request("patch", "nodes", "n2", [{"op": "remove", "path": "/metadata/finalizers/0"}],
             agent="karpenter/v1.14.1"), None),
    # what ebb must never send
    ("ebb drops karpenter.sh/disrupted", request("patch", "nodes", "n2", taints("7", [RUN_TAINT, EBB_TAINT])),
     "karpenter.sh/ taint"),
    ("ebb adds karpenter.sh/disrupted",
     request("patch", "nodes", "n1", taints("5", [RUN_TAINT, KARPENTER_TAINT])), "karpenter.sh/ taint"),
    ("ebb drops another taint", request("patch", "nodes", "n1", taints("5", [EBB_TAINT])),
     "not ebb's own"),
    ("ebb changes another label with its taint",
     request("patch", "nodes", "n1", [*taints("5", [RUN_TAINT, EBB_TAINT]), {"op": "add", "path": "/metadata/labels",
                                      "value": {"karpenter.sh/nodepool": "other"}}]), "changed labels"),
    ("an unguarded write of the taints",
     request("patch", "nodes", "n1", [{"op": "add", "path": "/spec/taints", "value": [EBB_TAINT]}]),
     "not a guarded write"),
    ("ebb removes Karpenter's finalizer",
     request("patch", "nodes", "n2", [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                                      {"op": "remove", "path": "/metadata/finalizers/0"}]), "not a guarded write"),
    ("a merge patch of the finalizers", request("patch", "nodes", "n2", {"metadata": {"finalizers": []}}),
     "not only ebb.sh/ annotations"),
    ("a merge patch of Karpenter's annotation", request("patch", "nodes", "n1", {"metadata": {"annotations": {
        "karpenter.sh/do-not-disrupt": "true"}}}, agent=PLANNER), "not only ebb.sh/ annotations"),
    ("a patch of a version never seen", request("patch", "nodes", "n1", taints("99", [RUN_TAINT, EBB_TAINT])),
     "never seen"),
    ("ebb deletes a Node", request("delete", "nodes", "n1"), "may only patch Nodes"),
    ("ebb creates a Node", request("create", "nodes", "n3", {"metadata": {"name": "n3"}}, code=201),
     "may only patch Nodes"),
    ("a NodeClaim without the decision", request("create", "nodeclaims", "", claim({}), code=201),
     "without ebb.sh/decision-id"),
    ("a NodeClaim with Karpenter's finalizer",
     request("create", "nodeclaims", "", claim(DECISION, ["karpenter.sh/termination"]), code=201),
     "karpenter.sh/ finalizer"),
    ("a NodeClaim patched", request("patch", "nodeclaims", "pool-abc", {"metadata": {"finalizers": None}}),
     "only create and delete NodeClaims"),
]


@pytest.mark.parametrize(("event", "expected"), [(e, x) for _, e, x in CASES], ids=[c[0] for c in CASES])
def test_each_request_of_ebbs_is_accepted_or_named(event: AuditEvent, expected: str | None) -> None:
    found = ebb_violations([event], Versions())
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0], found


def test_the_log_is_read_from_a_mark_and_a_half_written_line_is_left(tmp_path: Any) -> None:
    path = tmp_path / "audit.log"
    line = ('{"stage": "%s", "verb": "delete", "objectRef": {"resource": "nodes", "name": "%s"}, '
            '"userAgent": "ebb-termination-executor/0.1.0", "responseStatus": {"code": 200}}\n')
    path.write_text(line % ("ResponseComplete", "old"))
    log = AuditLog(path)
    mark = log.mark()
    with path.open("a") as f:
        f.write(line % ("ResponseStarted", "new") + line % ("ResponseComplete", "new") + '{"stage": "Resp')
    [event] = log.events(mark)
    assert (event.verb, event.name, event.component, event.by_ebb) == ("delete", "new", "ebb-termination-executor",
                                                                        True)
    assert [e.name for e in log.events()] == ["old", "new"]
