"""Validation: a command decided earlier is re-checked against a fresher snapshot; a stale one is rejected with
why, as a `StaleCause` (its kind, and the sentence the planner records)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from ebb.core.causes import Cause, Stale
from ebb.core.methods.base import Command, EngineOptions
from ebb.core.validation import validate, view_behind
from tests.kit.builders import NOW, catalog, instance_type, node, nodepool, plan, pod, snapshot

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


# (case, fresher documents, the stale kind, the kind of the cause behind it or None, words of the sentence)
FRESHER: list[tuple[str, Callable[[], list[Any]], Stale, Cause | None, str]] = [
    ("do-not-disrupt-pod-arrived",
     lambda: _docs(guard=pod("guard", "src", annotations={"karpenter.sh/do-not-disrupt": "true"})),
     Stale.NO_LONGER_CANDIDATE, Cause.POD_DO_NOT_DISRUPT,
     "node src is no longer a candidate: pod default/guard has karpenter.sh/do-not-disrupt=true"),
    ("node-annotated-do-not-disrupt",
     lambda: _docs(src=node("src", itype="t3.medium", annotations={"karpenter.sh/do-not-disrupt": "true"})),
     Stale.NO_LONGER_CANDIDATE, Cause.NODE_DO_NOT_DISRUPT, "do-not-disrupt"),
    ("node-gone", lambda: _docs(src=None, p=None), Stale.NODE_GONE, None, "node src is gone"),
    ("node-deleting", lambda: _docs(src=node("src", itype="t3.medium", deleting=True)), Stale.NO_LONGER_CANDIDATE,
     Cause.DELETING, "being deleted"),
    ("budget-dropped-to-zero", lambda: _docs(pool={"budgets": [{"nodes": "0"}]}), Stale.BUDGET_SHRANK, None,
     "the Underutilized budget of NodePool default now allows 0 disruptions, the command needs 1"),
    ("budget-window-closed",
     lambda: _docs(pool={"budgets": [{"nodes": "0", "schedule": "30 18 * * *", "duration": "1h"},
                                     {"nodes": "100%"}]}), Stale.BUDGET_SHRANK, None, "allows 0"),
    ("pods-no-longer-fit", lambda: _docs(hog=pod("hog", "dst", cpu="1800m")), Stale.POD_NO_LONGER_FITS, None,
     "pod default/p would no longer fit"),
    ("destination-gone", lambda: _docs(dst=None, filler=None), Stale.POD_NO_LONGER_FITS, None,
     "would no longer fit"),
    ("consolidation-paused-by-a-hold",
     lambda: _docs(freeze={"apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": "freeze"},
                           "spec": {"scope": "cluster", "reason": "incident"}}), Stale.CONSOLIDATION_PAUSED,
     Cause.HOLD, "consolidation of node src is paused by hold freeze (cluster): incident"),
    ("pod-arrived-on-src", lambda: _docs(pool={"consolidate_after": "5m"},
                                         new=pod("new", "src", started=LATER.isoformat())), Stale.NODE_CHANGED,
     Cause.NOT_STABLE, "node src changed: consolidateAfter (5m) has not passed"),
]


@pytest.mark.parametrize(("make", "kind", "behind", "words"), [c[1:] for c in FRESHER], ids=[c[0] for c in FRESHER])
def test_stale_command_is_rejected_with_the_reason(command: Command, make: Callable[[], list[Any]], kind: Stale,
                                                   behind: Cause | None, words: str) -> None:
    stale = validate(command, snapshot(*make()), LATER)
    assert stale is not None
    assert (stale.kind, stale.inner.kind if stale.inner else None) == (kind, behind)
    assert words in stale.text


def test_expiration_command_no_longer_expired() -> None:
    docs = [nodepool(expire_after="24h"), node("a"), pod("web", "a")]
    [cmd] = plan(*docs).first.commands
    assert cmd.method == "expiration"
    assert validate(cmd, snapshot(*docs), LATER) is None
    fresher = snapshot(nodepool(expire_after="Never"), node("a"), pod("web", "a"))
    stale = validate(cmd, fresher, LATER)
    assert stale is not None
    assert (stale.kind, stale.text) == (Stale.NO_LONGER_EXPIRED, "node a is no longer expired")


def test_replacement_that_got_dearer_is_rejected() -> None:
    docs = [nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="500m")]
    [cmd] = plan(*docs).first.commands
    assert cmd.action == "replace"
    assert cmd.replacements[0].instance_types[0] == "t3.medium"
    # a new pod on the node now needs more than a t3.medium
    fresher = snapshot(*docs, pod("more", "big", cpu="500m", memory="6Gi"))
    stale = validate(cmd, fresher, LATER)
    assert stale is not None
    assert stale.kind is Stale.REPLACEMENT_DEARER
    assert "more than the $0.0416/h the command was approved for" in stale.text


def test_a_replacement_whose_types_no_longer_hold_the_pods_is_rejected() -> None:
    """Karpenter's ``instanceTypesAreSubset``: the replace approved ``cpuy`` (4 cpu, 4Gi) for a 3-cpu pod; that pod
    left and one asking 6Gi arrived, which ``memy`` (2 cpu, 8Gi, cheaper still) holds and ``cpuy`` does not. One new
    node, no dearer: only the types tell that the command could launch a node too small."""
    cat = catalog([instance_type("cpuy", "4", "4Gi", 29, 0.10), instance_type("memy", "2", "8Gi", 29, 0.08),
                   instance_type("big", "8", "32Gi", 58, 1.0)])
    docs = [cat, nodepool(), node("n", itype="big")]
    [cmd] = plan(*docs, pod("p", "n", cpu="3", memory="1Gi")).first.commands
    assert (cmd.action, cmd.replacements[0].instance_types) == ("replace", ("cpuy",))
    assert validate(cmd, snapshot(*docs, pod("p", "n", cpu="3", memory="1Gi")), LATER) is None
    stale = validate(cmd, snapshot(*docs, pod("q", "n", cpu="1", memory="6Gi")), LATER)
    assert stale is not None
    assert (stale.kind, stale.text) == (
        Stale.REPLACEMENT_CHANGED,
        "its pods now need another replacement: the approved one may launch as cpuy, which a new simulation no longer "
        "places them on")


def test_emptiness_command_no_longer_empty() -> None:
    docs = [nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"), node("idle")]
    [cmd] = plan(*docs).first.commands
    assert (cmd.method, cmd.nodes) == ("emptiness", ("idle",))
    assert validate(cmd, snapshot(*docs), LATER) is None
    stale = validate(cmd, snapshot(*docs, pod("arrived", "idle")), LATER)
    assert stale is not None
    assert (stale.kind, stale.text) == (Stale.NO_LONGER_EMPTY, "node idle is no longer empty: 1 pods arrived")


def test_drift_command_no_longer_drifted() -> None:
    docs = [nodepool(node_hash="h2"), node("a", node_hash="h1"), pod("web", "a")]
    [cmd] = plan(*docs).first.commands
    assert cmd.method == "drift"
    assert validate(cmd, snapshot(*docs), LATER) is None
    fresher = snapshot(nodepool(node_hash="h1"), node("a", node_hash="h1"), pod("web", "a"))
    stale = validate(cmd, fresher, LATER)
    assert stale is not None
    assert (stale.kind, stale.text) == (Stale.NO_LONGER_DRIFTED, "node a is no longer drifted")


def test_a_command_of_no_engine_method_is_refused(command: Command) -> None:
    with pytest.raises(ValueError, match="'interruption' is not a disruption method"):
        validate(replace(command, method="interruption"), snapshot(*_docs()), LATER)


def test_a_view_given_is_the_one_validated_and_must_be_the_snapshots_at_that_moment(command: Command) -> None:
    options = EngineOptions()
    fresher = snapshot(*_docs(guard=pod("guard", "src", annotations={"karpenter.sh/do-not-disrupt": "true"})))
    view = options.view_of(fresher, LATER)
    stale = validate(command, fresher, LATER, options, view=view)
    assert stale is not None and stale.kind is Stale.NO_LONGER_CANDIDATE
    with pytest.raises(ValueError, match="not the snapshot's at that moment"):
        validate(command, fresher, LATER + timedelta(seconds=1), options, view=view)
    with pytest.raises(ValueError, match="not the snapshot's at that moment"):
        validate(command, snapshot(*_docs()), LATER, options, view=view)


# The view may lag the cluster: the planner asks the apiserver for the pods bound to a command's nodes and
# `view_behind` compares them with the snapshot. (case, live pods per node, stale or not, words of the sentence)
VIEW_CASES: list[tuple[str, dict[str, set[str]], str | None]] = [
    ("what the view has", {"src": {"default/p"}, "dst": {"default/filler"}}, None),
    ("nothing on an empty node", {"idle": set()}, None),
    ("a pod the view no longer has left the node", {"src": set()}, None),
    ("a pod the view has not seen", {"src": {"default/p", "default/new"}},
     "the planner's view is behind the apiserver: 1 pods run on node src that it has not seen there yet "
     "(default/new)"),
    ("a pod the view places elsewhere", {"dst": {"default/filler", "default/p"}}, "node dst"),
    ("an empty node that is not", {"idle": {"default/a", "default/b", "default/c", "default/d"}},
     "4 pods run on node idle that it has not seen there yet (default/a and default/b and default/c)"),
    ("the first node by name", {"zeta": {"default/z"}, "idle": {"default/i"}}, "node idle"),
]


@pytest.mark.parametrize(("live", "words"), [case[1:] for case in VIEW_CASES], ids=[case[0] for case in VIEW_CASES])
def test_view_behind_the_apiserver(live: dict[str, set[str]], words: str | None) -> None:
    view = snapshot(*_docs(), node("idle"), node("zeta"))
    stale = view_behind(view, live)
    if words is None:
        assert stale is None
    else:
        assert stale is not None and stale.kind is Stale.VIEW_BEHIND
        assert words in stale.text


def test_replacement_the_pods_no_longer_need_is_rejected() -> None:
    """Karpenter's rule ("scheduling simulation produced new results"): a replace whose pods now fit on the nodes
    that stay launches a node for nothing; the command is stale and the next pass proposes the delete."""
    docs = [nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="500m")]
    [cmd] = plan(*docs).first.commands
    assert (cmd.action, len(cmd.replacements)) == ("replace", 1)
    assert validate(cmd, snapshot(*docs), LATER) is None
    # a node with room for the pod came meanwhile: the pod needs no new node now
    roomy = [*docs, node("roomy", itype="t3.medium")]
    stale = validate(cmd, snapshot(*roomy), LATER)
    assert stale is not None
    assert (stale.kind, stale.text) == (Stale.REPLACEMENT_NOT_NEEDED, (
        "its pods now need no new node, fewer than the 1 new node the command would launch: a cheaper command is "
        "likely now"))
    # the pod left the node meanwhile (a scale-down): nothing to move, nothing to launch
    emptied = snapshot(nodepool(), node("big", itype="m5.2xlarge"))
    stale = validate(cmd, emptied, LATER)
    assert stale is not None and stale.kind is Stale.REPLACEMENT_NOT_NEEDED
    # and the pass on that cluster deletes the node instead
    [delete] = plan(nodepool(), node("big", itype="m5.2xlarge")).first.commands
    assert (delete.action, delete.nodes) == ("delete", ("big",))
