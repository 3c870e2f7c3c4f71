"""What a Scheduler takes from the last build of its kind (`ebb.core.simulator.noderows`): rows are made only for the
nodes that changed, each kind of build (its own derived pods) takes its own kind's rows, and the label table's columns
come renumbered as a table made from nothing numbers them. That every build's rows equal a build from nothing is the
property test's (tests/property/test_simulator_properties.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from ebb.core import node_pods
from ebb.core.memo import Memo
from ebb.core.model import Node, Snapshot
from ebb.core.simulator import noderows
from ebb.core.simulator.labeltable import LabelTable
from tests.kit.builders import node, pod, snapshot


@pytest.fixture(autouse=True)
def _no_rows_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noderows, "_LAST", Memo(8))


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many nodes' rows and pods' rows were made (not taken from a last build)."""
    counts = {"nodes": 0, "pods": 0}
    of_nodes, of_pods = noderows._of_nodes, noderows._of_pods

    def count_nodes(resources: tuple[str, ...], daemonsets: tuple[object, ...], nodes: list[Node]) -> object:
        counts["nodes"] += len(nodes)
        return of_nodes(resources, daemonsets, nodes)  # type: ignore[arg-type]

    def count_pods(resources: tuple[str, ...], daemonsets: tuple[object, ...], derived: list[object]) -> object:
        counts["pods"] += len(derived)
        return of_pods(resources, daemonsets, derived)  # type: ignore[arg-type]

    monkeypatch.setattr(noderows, "_of_nodes", count_nodes)
    monkeypatch.setattr(noderows, "_of_pods", count_pods)
    yield counts


def _cluster() -> Snapshot:
    return snapshot([node(f"n{i}", zone=f"us-east-1{'ab'[i % 2]}") for i in range(4)],
                    [pod(f"p{i}", f"n{i % 4}", cpu="500m") for i in range(8)])


def _rows(snap: Snapshot, memo: Memo[str, node_pods.NodePods], order: list[int] | None = None
          ) -> noderows.NodeRows:
    derived, _ = node_pods.of_snapshot([n.name for n in snap.nodes], snap.pods, memo)
    nodes = [snap.nodes[i] for i in (order or range(len(snap.nodes)))]
    return noderows.rows_of(("cpu", "memory", "pods"), snap.daemonsets, nodes, [derived[n.name] for n in nodes])


def test_a_build_makes_rows_only_for_the_node_that_changed_and_the_pods_that_moved(made: dict[str, int]) -> None:
    snap, memo = _cluster(), Memo[str, node_pods.NodePods](100)
    first = _rows(snap, memo)
    assert made == {"nodes": 4, "pods": 4}
    cordoned = replace(snap.nodes[2], unschedulable=True)
    moved = replace(snap.pods[0], node_name="n1")  # p0 goes from n0 to n1
    second = _rows(replace(snap, nodes=(*snap.nodes[:2], cordoned, snap.nodes[3]), pods=(moved, *snap.pods[1:])),
                   memo, order=[3, 2, 1, 0])
    assert made == {"nodes": 4 + 1, "pods": 4 + 3}  # n2's own rows; the pods of n0, n1 and n2 (a new node object)
    assert second.ready_open.tolist() == [True, False, True, True]
    assert second.used[:, 0].tolist() == [1000, 1000, 1500, 500]  # n3, n2, n1, n0 in millicores
    assert np.array_equal(second.alloc, first.alloc[[3, 2, 1, 0]])


def test_each_kind_of_build_takes_the_rows_of_its_own_kind(made: dict[str, int]) -> None:
    snap = _cluster()
    passes, binder = Memo[str, node_pods.NodePods](100), Memo[str, node_pods.NodePods](100)
    _rows(snap, passes)
    _rows(snap, binder)  # other derived pods: the rows of its nodes taken, its pods' rows made
    assert made == {"nodes": 4, "pods": 8}
    _rows(snap, passes)
    _rows(snap, binder)
    assert made == {"nodes": 4, "pods": 8}  # each took its own kind's


def test_other_daemonsets_make_every_row_again(made: dict[str, int]) -> None:
    snap, memo = _cluster(), Memo[str, node_pods.NodePods](100)
    _rows(snap, memo)
    other = snapshot(node("n0"), {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                  "metadata": {"name": "agent", "namespace": "kube-system"},
                                  "spec": {"template": {"spec": {"containers": [
                                      {"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}}}})
    rows = _rows(replace(snap, daemonsets=other.daemonsets), memo)
    assert made == {"nodes": 8, "pods": 8}
    assert rows.daemons_wanted is not None and rows.daemons_wanted[:, 0].tolist() == [100] * 4


@pytest.mark.parametrize(("before", "after", "codes", "values"), [
    # the same values in another order: numbered in the order they first come now
    (["a", "b", "a", None], ["b", "a", None, "a"], [0, 1, -1, 1], ["b", "a"]),
    # a value gone, one new (the new object's), one object without the label
    (["a", "b", "c"], ["c", "d", None], [0, 1, -1], ["c", "d"]),
])
def test_a_label_column_taken_from_another_table_is_numbered_as_made_from_nothing(
        before: list[str | None], after: list[str | None], codes: list[int], values: list[str]) -> None:
    def labels(values: list[str | None]) -> list[dict[str, str]]:
        return [{} if v is None else {"zone": v} for v in values]

    old = LabelTable(labels(before))
    old.column("zone")
    # each object's row in the old table, the objects that are none of its rows last
    rows = [before.index(v) if v in before else 0 for v in after]
    new = [i for i, v in enumerate(after) if v not in before]
    taken = LabelTable(labels(after), like=(old, np.array(rows, dtype=np.int64), new))
    fresh = LabelTable(labels(after))
    for table in (taken, fresh):
        got, lookup, names = table.column("zone")
        assert got.tolist() == codes and names == values and list(lookup) == values
