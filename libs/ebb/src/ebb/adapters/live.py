"""The live snapshot: the cluster objects' snapshot plus what the store knows (holds, live decisions).

The planner plans on it and the decisions-api explains and dry-runs on it, so both see the same state:
the store's active holds become the core's ``Hold`` values (namespace and workload holds are not modelled
by the engine and are left out), and the nodes of live decisions are marked as being disrupted (tainted
``karpenter.sh/disrupted``, as the executor will): they are neither candidates nor destinations and count
against their pool's budget; the replacements live decisions launch are named in ``Snapshot.launched_for``
(no candidates until their decision ends). Pure functions over values; the callers read the store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from ebb.adapters.store.port import HoldRow
from ebb.core.model import TAINT_DISRUPTED, Hold, Snapshot, Taint

#: the store's hold scopes -> the core's
HOLD_SCOPES = {"cluster": "cluster", "nodepool": "nodePool", "node": "node"}


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def core_holds(rows: Iterable[HoldRow]) -> tuple[Hold, ...]:
    """The engine's holds for the store's hold rows (cluster, NodePool and node scopes)."""
    return tuple(
        Hold(name=h.id, scope=HOLD_SCOPES[h.scope_kind],
             target=(h.scope or None) if h.scope_kind != "cluster" else None,
             expires=_aware(h.expires_at), reason=h.reason)
        for h in rows if h.scope_kind in HOLD_SCOPES
    )


def live_snapshot(snapshot: Snapshot, *, holds: Iterable[HoldRow] = (), busy: Iterable[str] = (),
                  launched: Mapping[str, str] | None = None) -> Snapshot:
    """``snapshot`` with the store's ``holds`` merged in, the ``busy`` nodes (those of live decisions)
    tainted ``karpenter.sh/disrupted:NoSchedule``, and the replacements live decisions launch (``launched``:
    replacement name -> decision id) in ``launched_for``."""
    marked = set(busy)
    if marked:
        snapshot = dataclasses.replace(snapshot, nodes=tuple(
            dataclasses.replace(n, taints=(*n.taints, Taint(TAINT_DISRUPTED)))
            if n.name in marked and not n.being_disrupted else n
            for n in snapshot.nodes))
    if launched:
        snapshot = dataclasses.replace(snapshot, launched_for=(*snapshot.launched_for, *sorted(launched.items())))
    extra = core_holds(holds)
    return dataclasses.replace(snapshot, holds=snapshot.holds + extra) if extra else snapshot
