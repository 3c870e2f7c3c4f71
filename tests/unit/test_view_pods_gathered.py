"""`ClusterView.build` takes the pods by node and the PDBs' allowances from the last view of the same pods tuple,
nodes and PDBs (a validation's snapshot often shares its pass's pods): what it takes must be what it would make."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta

import pytest

from ebb.core import cluster
from ebb.core.cluster import ClusterView
from ebb.core.model import Snapshot
from tests.kit.builders import NOW, node, nodepool, pdb, pod, snapshot


def _cluster() -> Snapshot:
    return snapshot(nodepool("default"),
                    node("a"), node("b"),
                    pod("web-1", "a", labels={"app": "web"}), pod("web-2", "b", labels={"app": "web"}),
                    pod("pending", None), pdb("web", {"app": "web"}, min_available=1))


def _gathered(view: ClusterView) -> tuple[object, ...]:
    return (view.pods_on, view.unbound, view.node_pods, view.movable, view._pdbs_of_class, view._pdb_bound)


def _fresh(snap: Snapshot) -> ClusterView:
    cluster._PODS_GATHERED.clear()
    return ClusterView.build(snap, NOW)


def _cordoned(snap: Snapshot) -> Snapshot:
    first = dataclasses.replace(snap.nodes[0], unschedulable=True)
    return dataclasses.replace(snap, nodes=(first, *snap.nodes[1:]))


def _without_first_node(snap: Snapshot) -> Snapshot:
    return dataclasses.replace(snap, nodes=snap.nodes[1:])


def _without_pdbs(snap: Snapshot) -> Snapshot:
    return dataclasses.replace(snap, pdbs=())


def _without_first_pod(snap: Snapshot) -> Snapshot:
    return dataclasses.replace(snap, pods=snap.pods[1:])


@pytest.mark.parametrize(("change", "reused"), [
    (_cordoned, True),  # the same pods, node names and PDBs: taken
    (_without_first_node, False),  # its pods are on no node now
    (_without_pdbs, False),
    (_without_first_pod, False),
])
def test_a_view_takes_what_the_last_view_of_its_pods_gathered(change: Callable[[Snapshot], Snapshot],
                                                             reused: bool) -> None:
    first = _cluster()
    before = _fresh(first)
    second = change(first)
    view = ClusterView.build(second, NOW)
    assert (view.pods_on is before.pods_on) is reused
    assert _gathered(view) == _gathered(_fresh(second))


def test_the_clock_is_not_taken_with_them() -> None:
    """What is taken reads no clock; what does (candidates, budgets) is made for the view's own moment."""
    first = _cluster()
    _fresh(first)
    later = ClusterView.build(_cordoned(first), NOW + timedelta(days=400))
    assert later.now == NOW + timedelta(days=400)
    assert _gathered(later) == _gathered(_fresh(_cordoned(first)))
