"""One valid message of each wire contract (ebb.contracts.messages), keyed by a short name with its topic, and the
time they carry, shared by the contract tests (round trips, AsyncAPI coverage) and the fuzzing of records, which
mutates them; and ``cluster_object``, the ``ebb.cluster.objects`` message of a document, as the cluster-watcher
publishes it, for every test that feeds a service a cluster; ``planner_pass``, a real pass of the engine as the
planner publishes it. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ebb.contracts import (
    ClusterObject,
    DeadLetter,
    DisruptionCommand,
    DisruptionEvent,
    Interruption,
    KindSynced,
    Message,
    PlannerPass,
    Replacement,
)
from ebb.core.engine import PassResult, run_pass
from ebb.core.findings import findings
from ebb.core.methods.base import EngineOptions
from ebb.core.model import DemandSample
from tests.kit.builders import node, nodepool, pod, snapshot

#: the time every message here carries
T0 = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


def disruption_command() -> DisruptionCommand:
    """An approved replace command: one node for a cheaper on-demand replacement."""
    return DisruptionCommand(
        decision_id="d-42",
        node_pool="general",
        method="single-node-consolidation",
        reason="Underutilized",
        action="replace",
        nodes=("node-a",),
        replacements=(
            Replacement(
                node_pool="general",
                instance_types=("m5.large", "m5a.large"),
                capacity_type="on-demand",
                zones=("us-east-1a",),
                price=0.096,
            ),
        ),
        savings_per_hour=0.096,
        explanation="its pods fit on a cheaper node",
        approved_at=T0,
    )


#: the demand peak that keeps ``idle`` in ``planner_pass``'s cluster
PEAK = DemandSample("default", T0 - timedelta(minutes=30), 3000, 0)


def planner_pass() -> tuple[PlannerPass, PassResult]:
    """A real pass: ``idle`` (empty) kept by its pool's demand window, ``spare`` (empty, another pool) deleted."""
    cluster = replace(snapshot(nodepool(disruption={"demandWindow": "1h"}), nodepool("other"), node("idle"),
                               node("busy"), node("spare", pool="other"), pod("web", "busy", cpu="1500m")),
                      demand=(PEAK,))
    options = EngineOptions()
    view = options.view_of(cluster, T0)
    result = run_pass(view, options)
    return PlannerPass.of_pass(cluster="prod-eu", view=view, result=result, found=findings(view), revision=7,
                               demand=cluster.demand), result


#: one message of each type: name → (topic, message)
MESSAGES: dict[str, tuple[str, Message]] = {
    "object upserted": (
        "ebb.cluster.objects",
        ClusterObject(
            kind="Pod",
            namespace="default",
            name="web-1",
            resource_version="1234",
            object={"metadata": {"name": "web-1", "labels": {"app": "web"}}, "spec": {"nodeName": "node-a"}},
        ),
    ),
    "kind synced": ("ebb.cluster.objects", KindSynced(kind="Pod", watched=("Node", "Pod", "PodDisruptionBudget"))),
    "object deleted (tombstone)": (
        "ebb.cluster.objects",
        ClusterObject(kind="Node", namespace="", name="node-a", resource_version="99", object=None),
    ),
    "interruption": (
        "ebb.interruptions",
        Interruption(node="node-a", kind="spot-interruption", instance_id="i-0abc", deadline=T0, detail=""),
    ),
    "command": ("ebb.disruption.commands", disruption_command()),
    "event": (
        "ebb.disruption.events",
        DisruptionEvent(decision_id="d-42", node="node-a", phase="WaitingReadiness", message="1 of 1 ready", at=T0),
    ),
    "planner pass": ("ebb.planner.passes", planner_pass()[0]),
    "dead letter": (
        "ebb.interruptions.dlq",
        DeadLetter.of_record(
            topic="ebb.interruptions",
            partition=2,
            offset=17,
            key=b"node-a",
            value=b"\xff\xfe not json",
            headers=[("ce_type", b"sh.ebb.interruption.received.v1"), ("x", None)],
            cause="malformed",
            error="value is not valid JSON",
            group="planner",
            failed_at=T0,
        ),
    ),
}


def cluster_object(doc: dict[str, Any]) -> ClusterObject:
    """The ``ebb.cluster.objects`` message of the kubectl-shaped ``doc`` (resourceVersion 1)."""
    meta = doc["metadata"]
    return ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                         resource_version="1", object=doc)

