"""Validation: a command decided earlier is re-checked against a fresher snapshot (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from builders import NOW, node, nodepool, plan, pod, snapshot

from ebb.core.methods.base import Command
from ebb.core.validation import validate

LATER = NOW + timedelta(seconds=15)


def _docs(**changes: Any) -> list[Any]:
    """`src` (t3.medium) runs a small pod that fits on `dst` (m5.large, kept by a 5Gi pod)."""
    docs: dict[str, Any] = {
        "pool": nodepool(**changes.pop("pool", {})),
        "src": node("src", itype="t3.medium"),
        "dst": node("dst", zone="us-east-1b"),
        "filler": pod("filler", "dst", memory="5Gi"),
        "p": pod("p", "src", cpu="300m", memory="256Mi"),
    }
    docs.update(changes)
    return [d for d in docs.values() if d is not None]


@pytest.fixture(scope="module")
def command() -> Command:
    [cmd] = plan(*_docs()).first.commands
    assert (cmd.method, cmd.action, cmd.nodes) == ("single-node-consolidation", "delete", ("src",))
    return cmd


def test_still_valid(command: Command) -> None:
    assert validate(command, snapshot(*_docs()), LATER) is None


def test_still_valid_when_unrelated_pods_change(command: Command) -> None:
    fresher = snapshot(*_docs(), pod("new", "dst", cpu="200m", started=LATER.isoformat()))
    assert validate(command, fresher, LATER) is None


FRESHER: list[tuple[str, Callable[[], list[Any]], str]] = [
    ("do-not-disrupt-pod-arrived",
     lambda: _docs(guard=pod("guard", "src", annotations={"karpenter.sh/do-not-disrupt": "true"})),
     "do-not-disrupt"),
    ("node-annotated-do-not-disrupt",
     lambda: _docs(src=node("src", itype="t3.medium", annotations={"karpenter.sh/do-not-disrupt": "true"})),
     "do-not-disrupt"),
    ("node-gone", lambda: _docs(src=None, p=None), "src is gone"),
    ("node-deleting", lambda: _docs(src=node("src", itype="t3.medium", deleting=True)), "being deleted"),
    ("budget-dropped-to-zero", lambda: _docs(pool={"budgets": [{"nodes": "0"}]}), "budget"),
    ("budget-window-closed",
     lambda: _docs(pool={"budgets": [{"nodes": "0", "schedule": "30 18 * * *", "duration": "1h"},
                                     {"nodes": "100%"}]}), "allows 0"),
    ("pods-no-longer-fit", lambda: _docs(hog=pod("hog", "dst", cpu="1800m")), "would no longer fit"),
    ("destination-gone", lambda: _docs(dst=None, filler=None), "would no longer fit"),
    ("consolidation-paused-by-a-hold",
     lambda: _docs(freeze={"apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": "freeze"},
                           "spec": {"scope": "cluster", "reason": "incident"}}), "hold freeze"),
    ("pod-arrived-on-src", lambda: _docs(pool={"consolidate_after": "5m"},
                                         new=pod("new", "src", started=LATER.isoformat())), "consolidateAfter"),
]


@pytest.mark.parametrize(("make", "phrase"), [c[1:] for c in FRESHER], ids=[c[0] for c in FRESHER])
def test_stale_command_is_rejected_with_the_reason(command: Command, make: Callable[[], list[Any]],
                                                   phrase: str) -> None:
    reason = validate(command, snapshot(*make()), LATER)
    assert reason is not None
    assert phrase in reason


def test_expiration_command_no_longer_expired() -> None:
    docs = [nodepool(expire_after="24h"), node("a"), pod("web", "a")]
    [cmd] = plan(*docs).first.commands
    assert cmd.method == "expiration"
    assert validate(cmd, snapshot(*docs), LATER) is None
    fresher = snapshot(nodepool(expire_after="Never"), node("a"), pod("web", "a"))
    reason = validate(cmd, fresher, LATER)
    assert reason is not None
    assert "no longer expired" in reason


def test_replacement_that_got_dearer_is_rejected() -> None:
    docs = [nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="500m")]
    [cmd] = plan(*docs).first.commands
    assert cmd.action == "replace"
    assert cmd.replacements[0].instance_types[0] == "t3.medium"
    # a new pod on the node now needs more than a t3.medium
    fresher = snapshot(*docs, pod("more", "big", cpu="500m", memory="6Gi"))
    reason = validate(cmd, fresher, LATER)
    assert reason is not None
    assert "more than" in reason


def test_emptiness_command_no_longer_empty() -> None:
    docs = [nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"), node("idle")]
    [cmd] = plan(*docs).first.commands
    assert (cmd.method, cmd.nodes) == ("emptiness", ("idle",))
    assert validate(cmd, snapshot(*docs), LATER) is None
    reason = validate(cmd, snapshot(*docs, pod("arrived", "idle")), LATER)
    assert reason is not None
    assert "no longer empty" in reason
