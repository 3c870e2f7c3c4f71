"""What a Scheduler reads per existing node, taken from the last Scheduler's rows for the nodes that did not change.

A Scheduler starts from a row per existing node: its allocatable and capacity, what its pods request (all of them,
and its DaemonSet pods), what the DaemonSets that would run there request, whether it is open to pods (ready, not
cordoned, deleting or being disrupted), its labels and how many of its pods would need a new home. Schedulers are built
snapshot after snapshot (a pass, its validation, the simulated kube-scheduler's binds, the provisioner) over clusters
that differ in a node or two: ``ebb.adapters.snapshot_store`` gives an unchanged node as the same ``Node`` object,
and ``ebb.core.node_pods`` an unchanged node's pods as the same ``NodePods``. So the rows of the last build of each
kind are kept per resource names (`rows_of`), and a build takes the rows of every node that is the same object (and
those of its pods while they are the same derived pods), gathered with one index array, and makes rows only for the
others; its label table takes the columns the last one coded. The rows are integers and flags computed from those
very objects, so they are the rows a build from nothing makes. A cache, not state: it holds the objects its rows were
made from, so an object's id found in it is that object; safe across threads, as an entry is a value replaced whole
(a race only makes rows again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from ebb.core import node_pods
from ebb.core.labels import daemonset_runs_on_node
from ebb.core.memo import Memo
from ebb.core.model import DaemonSet, Node
from ebb.core.simulator.arrays import BoolArray, IntArray
from ebb.core.simulator.constraints import kept_rows, node_labels, rows
from ebb.core.simulator.labeltable import LabelTable

__all__ = ["NodeRows", "daemons_wanted", "ready_open", "rows_of"]

_MOVABLE = attrgetter("movable")


@dataclass(frozen=True, slots=True)
class NodeRows:
    """One row per node of ``nodes`` (in that order), made from those nodes and ``derived`` (each node's pods) for
    ``resources``; the arrays are read-only (the next build gathers from them)."""

    resources: tuple[str, ...]
    daemonsets: tuple[DaemonSet, ...]
    nodes: Sequence[Node]
    derived: Sequence[node_pods.NodePods]
    #: id of each node -> its row
    index: dict[int, int]
    #: id of each node's derived pods -> its row
    by_derived: dict[int, int]
    #: allocatable, per resource
    alloc: IntArray
    #: capacity, per resource (what the node counts against its NodePool's limits)
    capacity: IntArray
    #: what the node's pods request, per resource
    used: IntArray
    #: what the node's DaemonSet pods request (None: the snapshot has no DaemonSets)
    daemons_used: IntArray | None
    #: what the DaemonSets that would run on the node request (None: the snapshot has no DaemonSets)
    daemons_wanted: IntArray | None
    #: ready, and neither unschedulable, deleting nor being disrupted
    ready_open: BoolArray
    #: the node's labels, with its hostname label (`constraints.node_labels`)
    labels: list[Mapping[str, str]]
    #: the labels as a table (the Scheduler's: the columns it makes are there for the next build to take)
    table: LabelTable
    #: how many of the node's pods would need a new home (`NodePods.movable`)
    movable: IntArray


#: the rows of the last builds, by resource names: one per kind of build, newest last (`_LAST_KINDS`)
_LAST: Memo[tuple[str, ...], tuple[NodeRows, ...]] = Memo(8)
#: how many builds' rows are kept per resource names. The kinds of Scheduler (a pass's and its validation's, the
#: simulated kube-scheduler's, the provisioner's) each derive the nodes' pods in a memo of their own, so each takes
#: the rows of the last build of its kind: the one whose derived pods are those it is given
_LAST_KINDS = 4


def daemons_wanted(resources: tuple[str, ...], daemonsets: tuple[DaemonSet, ...], nodes: Sequence[Node]) -> IntArray:
    """What the pods of the DaemonSets that would run on each node request (`daemonset_runs_on_node`), one row per
    node (Karpenter's ``ExistingNode`` keeps that room for the DaemonSet pods not there yet)."""
    wanted = np.zeros((len(nodes), len(resources)), dtype=np.int64)
    if not daemonsets:
        return wanted
    requests = rows(resources, [ds.spec.requests for ds in daemonsets])
    for i, node in enumerate(nodes):
        runs = [daemonset_runs_on_node(ds, node.labels, node.taints) for ds in daemonsets]
        if any(runs):
            wanted[i] = requests[np.array(runs, dtype=bool)].sum(axis=0)
    return wanted


def ready_open(nodes: Sequence[Node]) -> BoolArray:
    """Whether each node takes pods: ready, and neither unschedulable, deleting nor being disrupted."""
    return np.array([not (n.unschedulable or n.deleting or not n.ready or n.being_disrupted) for n in nodes],
                    dtype=bool)


def _of_nodes(resources: tuple[str, ...], daemonsets: tuple[DaemonSet, ...], nodes: Sequence[Node]
              ) -> tuple[IntArray, IntArray | None, BoolArray, list[Mapping[str, str]], IntArray]:
    """The rows made from the nodes alone: allocatable, what the DaemonSets that would run there request (None
    without DaemonSets), open or not, labels, capacity."""
    alloc = kept_rows(resources, [n.allocatable for n in nodes])
    wanted = daemons_wanted(resources, daemonsets, nodes) if daemonsets else None
    capacity = kept_rows(resources, [n.capacity for n in nodes])
    return alloc, wanted, ready_open(nodes), [node_labels(n) for n in nodes], capacity


def _of_pods(resources: tuple[str, ...], daemonsets: tuple[DaemonSet, ...], derived: Sequence[node_pods.NodePods]
             ) -> tuple[IntArray, IntArray | None, IntArray]:
    """The rows made from the nodes' pods: what they request, what the DaemonSet pods of them request (None without
    DaemonSets), how many would need a new home."""
    shape = (len(derived), len(resources))
    used = np.array([d.requested(resources) for d in derived], dtype=np.int64).reshape(shape)
    daemons_used = np.array([d.requested(resources, daemons=True) for d in derived],
                            dtype=np.int64).reshape(shape) if daemonsets else None
    movable = np.fromiter(map(len, map(_MOVABLE, derived)), dtype=np.int64, count=len(derived))
    return used, daemons_used, movable


def rows_of(resources: tuple[str, ...], daemonsets: tuple[DaemonSet, ...], nodes: Sequence[Node],
            derived: Sequence[node_pods.NodePods]) -> NodeRows:
    """The rows of ``nodes``, each with its pods ``derived`` (in the same order), for ``resources``: taken from the
    last build of the same kind (`_closest`; else the newest kept) with the same DaemonSets where the node is the same
    object (the rows of the node) and its derived pods too (the rows of its pods), the others made."""
    kept = _LAST.get(resources, ())
    # the last build of this kind; else the newest of another (its nodes' rows hold for any kind: only the pods
    # derived differ), which this build's rows then do not replace
    same_kind = _closest(kept, derived)
    last = same_kind if same_kind is not None else kept[-1] if kept else None
    if last is None or not last.nodes or not (last.daemonsets is daemonsets or last.daemonsets == daemonsets):
        alloc, wanted, ready_open, labels, capacity = _of_nodes(resources, daemonsets, nodes)
        used, daemons_used, movable = _of_pods(resources, daemonsets, derived)
        table = LabelTable(labels, names=lambda: [node.name for node in nodes])
    else:
        at = last.index.get
        found = [at(id(node), -1) for node in nodes]
        last_derived = last.derived
        new_nodes = [i for i, j in enumerate(found) if j < 0]
        new_pods = [i for i, (j, d) in enumerate(zip(found, derived, strict=True)) if j < 0 or last_derived[j] is not d]
        take = np.array(found, dtype=np.int64)
        if new_nodes:
            take[new_nodes] = 0  # any row: made again below
        alloc, ready_open, capacity = last.alloc[take], last.ready_open[take], last.capacity[take]
        wanted = last.daemons_wanted[take] if last.daemons_wanted is not None else None
        labels = [last.labels[j] for j in take.tolist()]
        used, movable = last.used[take], last.movable[take]
        daemons_used = last.daemons_used[take] if last.daemons_used is not None else None
        if new_nodes:
            of_nodes = _of_nodes(resources, daemonsets, [nodes[i] for i in new_nodes])
            alloc[new_nodes], ready_open[new_nodes], capacity[new_nodes] = of_nodes[0], of_nodes[2], of_nodes[4]
            if wanted is not None and of_nodes[1] is not None:
                wanted[new_nodes] = of_nodes[1]
            for i, row in zip(new_nodes, of_nodes[3], strict=True):
                labels[i] = row
        if new_pods:
            of_pods = _of_pods(resources, daemonsets, [derived[i] for i in new_pods])
            used[new_pods], movable[new_pods] = of_pods[0], of_pods[2]
            if daemons_used is not None and of_pods[1] is not None:
                daemons_used[new_pods] = of_pods[1]
        table = LabelTable(labels, like=(last.table, take, new_nodes), names=lambda: [node.name for node in nodes])
    for array in (alloc, capacity, used, daemons_used, wanted, ready_open, movable):
        if array is not None:
            array.flags.writeable = False
    rows_now = NodeRows(resources, daemonsets, list(nodes), list(derived),
                        {id(node): i for i, node in enumerate(nodes)}, {id(d): i for i, d in enumerate(derived)},
                        alloc, capacity, used, daemons_used, wanted, ready_open, labels, table, movable)
    # this build's rows in place of its kind's last (else of the oldest kind's), newest last
    others = tuple(entry for entry in kept if entry is not same_kind)[-(_LAST_KINDS - 1):]
    _LAST.keep(resources, (*others, rows_now))
    return rows_now


def _closest(kept: Sequence[NodeRows], derived: Sequence[node_pods.NodePods]) -> NodeRows | None:
    """The kept rows of the build of the same kind: the one that holds most of a few of ``derived`` (the first,
    middle and last node's), None when none holds any."""
    if not kept or not derived:
        return None
    sample = [id(derived[0]), id(derived[len(derived) // 2]), id(derived[-1])]
    best, held = None, 0
    for entry in kept:
        hits = sum(key in entry.by_derived for key in sample)
        if hits > held:
            best, held = entry, hits
    return best
