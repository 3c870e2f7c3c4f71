"""Pending pods keep their capacity: a consolidation never counts on room a waiting pod is about to take
(``ebb.core.methods.base.simulation``), while pods that fit nowhere do not block anything."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.causes import Stale
from ebb.core.cluster import ClusterView
from ebb.core.engine import run_pass
from ebb.core.validation import validate
from tests.kit.builders import NOW, daemonset, disrupted, node, nodepool, plan_dict, pod, snapshot


def base() -> list[dict[str, Any]]:
    # `a` (m5.large, 2 cpu) can go: its 500m fit on `b` (t3.medium, 2 cpu, the cheapest type) next to 500m
    return [nodepool(), node("a"), pod("web-a", "a", cpu="500m"),
            node("b", itype="t3.medium"), pod("web-b", "b", cpu="500m")]


def waiting(name: str, cpu: str, **kw: Any) -> dict[str, Any]:
    return pod(name, None, cpu=cpu, phase="Pending", **kw)


@pytest.mark.parametrize(("extra", "action"), [
    ([], "delete"),
    # 1200m waiting: it fits on a (1500m free) or b (1500m free); either way a's 500m no longer fit on what
    # is left, so a can only be replaced by a cheaper node, not deleted
    ([waiting("queued", "1200m")], "replace"),
    # a pod that fits on no node is the provisioner's: it does not keep a
    ([waiting("huge", "64")], "delete"),
    # a finished pod is not waiting
    ([pod("done", None, cpu="1200m", phase="Succeeded")], "delete"),
    # a DaemonSet pod waits for its own node, not for capacity anywhere
    ([daemonset("agent"), waiting("agent-x", "1200m", owner=("DaemonSet", "agent"))], "delete"),
    # 200m waiting: a's 500m and the 200m still fit on b
    ([waiting("small", "200m")], "delete"),
])
def test_pending_pods_keep_the_capacity_they_will_take(extra: list[dict[str, Any]], action: str) -> None:
    out = plan_dict(*base(), *extra)
    assert [(c["nodes"], c["action"]) for c in out["commands"]] == [(["a"], action)]
    assert disrupted(out) == {"a"}


def test_a_command_planned_before_a_pod_went_pending_is_rejected_by_validation() -> None:
    before = snapshot(*base())
    [command] = run_pass(ClusterView.build(before, NOW)).commands
    assert command.nodes == ("a",) and command.action == "delete"
    assert validate(command, before, NOW) is None
    after = snapshot(*base(), waiting("queued", "1200m"))
    why = validate(command, after, NOW)
    assert why is not None
    assert why.kind is Stale.POD_NO_LONGER_FITS


def test_the_pending_pods_are_found_among_the_active_pods_on_no_node() -> None:
    """A view gathers the active pods on no node of the snapshot as it sorts the others onto their nodes
    (`ClusterView.unbound`, in the snapshot's order), and the pending pods are read from those: the same as a
    look at every pod of the snapshot."""
    from ebb.core.methods.base import pending_pods

    docs = [*base(), waiting("queued", "1200m"), pod("done", None, cpu="1", phase="Succeeded"),
            pod("lost", "gone-node", cpu="1"), waiting("deleting", "1"), waiting("agent-x", "1",
                                                                                owner=("DaemonSet", "agent")),
            pod("failed", "a", cpu="1", phase="Failed"), waiting("another", "100m")]
    docs[8]["metadata"]["deletionTimestamp"] = NOW.isoformat()
    snap = snapshot(docs)
    view = ClusterView.build(snap, NOW)
    assert [p.name for p in view.unbound] == sorted(["queued", "lost", "deleting", "agent-x", "another"],
                                                    key=[p.name for p in snap.pods].index)
    every = [p for p in snap.pods
             if p.node_name is None and p.phase == "Pending" and p.needs_rescheduling and not p.deleting]
    assert pending_pods(view) == every
    assert sorted(p.name for p in every) == ["another", "queued"]
