"""Emptiness and the pods the pass's base simulation places first (pending pods, pods leaving nodes being
disrupted): an empty node they have nowhere else to go than is not deleted, so the pass never proposes what its
own validation rejects on the same snapshot (found by the load benchmark's waves: every emptiness command after
an approved replace was rejected, and the emptied nodes got no command)."""

from __future__ import annotations

from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.validation import validate
from tests.kit.builders import NOW, blocked_of, disrupted, node, nodepool, plan_dict, pod, snapshot

DISRUPTED = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]


def _cluster(moving_memory: str) -> list[object]:
    """Three m5.large (8Gi): ``replaced`` is being disrupted with a pod of ``moving_memory``, ``empty`` has
    nothing, ``full`` has a 6Gi pod."""
    return [nodepool(), node("replaced", taints=DISRUPTED), node("empty"), node("full"),
            pod("moving", "replaced", memory=moving_memory), pod("big", "full", memory="6Gi")]


def test_an_empty_node_a_leaving_pod_needs_is_not_deleted() -> None:
    out = plan_dict(*_cluster("5Gi"))
    assert "empty" not in disrupted(out)
    reason = blocked_of(out, "empty")["reason"]
    assert "nominated for pod default/moving" in reason


def test_an_empty_node_is_deleted_when_the_leaving_pod_fits_elsewhere() -> None:
    out = plan_dict(*_cluster("1Gi"))  # fits beside the 6Gi pod on `full`
    assert disrupted(out) == {"empty"}


def test_every_command_of_the_pass_validates() -> None:
    for memory in ("5Gi", "1Gi"):
        snap = snapshot(*_cluster(memory))
        options = EngineOptions()
        for command in run_pass(options.view_of(snap, NOW), options).commands:
            assert validate(command, snap, NOW, options) is None, (memory, command)
