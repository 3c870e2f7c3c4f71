"""Multi-node consolidation's optimizer search (``EngineOptions.search == "optimizer"``): which candidates to remove
together, chosen by a linear program over every candidate at once rather than grown greedily in candidate order.

The greedy runs of `multi_node` take candidates in disruption-cost order and keep each whose pods fit; a cheap node
early in that order can use the room a dearer one later needed, and the set found is the first that works, not the
one that saves most. The program here looks at every candidate together:

- one variable per candidate, ``x`` in [0, 1]: remove it (its value: what it costs an hour, less what its
  evictions ask where a NodePool prices them, less a hundredth of a cent per pod so that of two equal savings the
  one that moves fewer pods wins);
- one per (NodePool, instance type), ``y`` >= 0: launch that many new nodes of the type (its price: its cheapest
  offering), at most ``max_new`` in all (`EngineOptions.max_replacements`);
- per NodePool and resource: what the removed nodes take out of the NodePool (their pods' requests and, for an open
  node, its own free room) at most the free room of the NodePool's open nodes plus what the new nodes bring;
- per NodePool: at most its disruption budget's nodes.

It is a relaxation: room is summed over a NodePool's nodes (a pod needs it on one node), pods stay in their
NodePool, pod constraints (affinities, spreads, selectors, ports) and the replacement rules are left to the check
that follows. So what it returns is a proposal, never a command: `multi_node` simulates the set as validation
would, and when the whole set does not consolidate, the largest prefix (in the order returned: the most valuable
first) that does. The program is solved as a linear program, not an
integer one: on the 2,000-node benchmark cluster the rounded relaxation chose as well as the integer program and
solved in a tenth of its time (docs/decisions.md).

HiGHS (``highspy``) solves it, imported on first use. Pure: arrays in, candidate indices out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ebb.core.simulator.arrays import FloatArray, IntArray

#: what one evicted pod takes off a candidate's value in the program, dollars an hour: a tie-break toward fewer
#: evictions, far below any saving worth a command
PER_POD_TIE_BREAK = 1e-4
#: a candidate whose variable is above this is in the proposal
CHOSEN = 0.5


@dataclass(frozen=True)
class Group:
    """One NodePool's side of the program: its candidates' rows and what its nodes and new nodes hold."""

    #: the positions (into the candidates) of this NodePool's candidates
    members: IntArray
    #: R: the free room of the NodePool's open nodes, every resource (negative free counted as none)
    room: IntArray
    #: how many of its nodes the budgets still allow this pass
    budget: int
    #: T x R: what each instance type it may launch holds for pods; T: the cheapest price of each
    type_alloc: IntArray
    type_price: FloatArray


def choose(values: FloatArray, taken: IntArray, groups: Sequence[Group], max_new: int) -> list[int]:
    """The candidates the program removes, the most valuable first: positions into ``values``
    (each candidate's value, dollars an hour) and ``taken`` (N x R: what removing each takes out of its NodePool).
    Empty when nothing saves anything or the solver finds no optimum."""
    # the public highspy.Highs prints HiGHS's banner to stdout when made, which `ebb plan -o json` must not carry
    from highspy._core import HighsModelStatus, _Highs

    n = len(values)
    if n == 0:
        return []
    # columns: the candidates, then each group's instance types that have an offering (a contiguous run a group)
    offered = [np.flatnonzero(np.isfinite(group.type_price)) for group in groups]
    first_launch = n + np.concatenate([[0], np.cumsum([len(types) for types in offered])]).astype(np.int64)
    cols = int(first_launch[-1])
    cost = np.concatenate([-np.asarray(values, dtype=np.float64),
                           *[group.type_price[types] for group, types in zip(groups, offered, strict=True)]])
    upper = np.concatenate([np.ones(n), np.full(cols - n, float(max_new))])
    # rows, as compressed rows: per group and resource the room, per group the budget, then the launches in all
    lower_bounds: list[float] = []
    upper_bounds: list[float] = []
    starts: list[int] = []
    indices: list[int] = []
    entries: list[float] = []

    def row(bound: float, columns: IntArray, coefficients: FloatArray) -> None:
        starts.append(len(indices))
        lower_bounds.append(-np.inf)
        upper_bounds.append(bound)
        indices.extend(columns.tolist())
        entries.extend(coefficients.tolist())

    for g, (group, types) in enumerate(zip(groups, offered, strict=True)):
        if not len(group.members):
            continue
        launches = np.arange(first_launch[g], first_launch[g + 1], dtype=np.int64)
        for r in range(taken.shape[1]):
            removed = taken[group.members, r].astype(np.float64)
            if not removed.any():
                continue
            brought = group.type_alloc[types, r].astype(np.float64)
            # each resource's row scaled to its largest amount: bytes and millicores side by side stay well posed
            scale = max(float(removed.max()), float(brought.max()) if len(brought) else 0.0, 1.0)
            row(float(max(group.room[r], 0)) / scale, np.concatenate([group.members, launches]),
                np.concatenate([removed, -brought]) / scale)
        row(float(group.budget), group.members, np.ones(len(group.members)))
    if cols > n:
        row(float(max_new), np.arange(n, cols, dtype=np.int64), np.ones(cols - n))
    highs = _Highs()
    highs.setOptionValue("output_flag", False)
    highs.addVars(cols, np.zeros(cols), upper)
    highs.changeColsCost(cols, np.arange(cols, dtype=np.int32), cost)
    if starts:
        highs.addRows(len(starts), np.array(lower_bounds), np.array(upper_bounds), len(indices),
                      np.array(starts, dtype=np.int32), np.array(indices, dtype=np.int32), np.array(entries))
    highs.run()
    if highs.getModelStatus() != HighsModelStatus.kOptimal:
        return []
    solution = np.asarray(highs.getSolution().col_value[:n], dtype=np.float64)
    chosen = np.flatnonzero(solution > CHOSEN)
    order = np.argsort(-np.asarray(values)[chosen], kind="stable")
    return [int(i) for i in chosen[order]]
