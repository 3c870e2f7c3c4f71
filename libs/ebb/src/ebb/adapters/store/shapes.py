"""A decision as the store keeps it, without the database: the JSON shapes of its nodes and replacements, and the
typed decision a stored one reads back as (``stored``). Both stores use it, the SQL one
(``ebb.adapters.store.decisions``, its rows) and the memory one (``ebb.adapters.store.memory``), so a decision read
back is the same from either: what the row does not keep (a replacement's hostname) is lost in both, the savings
are kept to a millionth, and the explanation is what its JSON gives back.

Rows hold nodes and replacements in one JSON shape, camelCase as on the wire and in ``ebb plan``:

- ``nodes``: ``[{"name": ..., "nodePool": ..., "instanceType": ... | null}]``
- ``replacements``: ``[{"nodePool": ..., "instanceTypes": [...], "capacityType": ..., "zones": [...],
  "price": ...}]``

``decision_node`` also reads rows written before the shape was one (a node as a bare name, a node without
``instanceType``). A replacement's price is kept as computed (validation compares prices to a billionth).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ebb.core.decision import Decision, DecisionNode, State
from ebb.core.methods.base import Replacement


def nodes_json(nodes: Iterable[DecisionNode]) -> list[dict[str, Any]]:
    return [{"name": n.name, "nodePool": n.nodepool, "instanceType": n.instance_type} for n in nodes]


def replacements_json(replacements: Iterable[Replacement]) -> list[dict[str, Any]]:
    return [{"nodePool": r.nodepool, "instanceTypes": list(r.instance_types), "capacityType": r.capacity_type,
             "zones": list(r.zones), "price": r.price, **({"labels": dict(r.labels)} if r.labels else {})}
            for r in replacements]


def decision_node(entry: Any) -> DecisionNode:
    """A node of a row's ``nodes`` (either shape)."""
    if isinstance(entry, dict):
        return DecisionNode(str(entry.get("name", "")), str(entry.get("nodePool") or ""), entry.get("instanceType"))
    return DecisionNode(str(entry), "")


def replacement_of(entry: dict[str, Any]) -> Replacement:
    return Replacement(nodepool=entry["nodePool"], instance_types=tuple(entry["instanceTypes"]),
                       capacity_type=entry["capacityType"], zones=tuple(entry["zones"]), price=float(entry["price"]),
                       labels=tuple(sorted((entry.get("labels") or {}).items())))


def node_names(nodes: Any) -> list[str]:
    """The names in a row's ``nodes`` (either shape)."""
    return [n.name for n in map(decision_node, nodes or []) if n.name]


def utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC time: SQLite hands back naive datetimes, and the store's times are all UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def stored_savings(savings: float) -> Decimal:
    """The savings as a row keeps them (``Numeric(14, 6)``)."""
    return Decimal(str(round(savings, 6)))


def stored_explanation(explanation: Mapping[str, Any]) -> dict[str, Any]:
    """The explanation as its JSON column gives it back."""
    loaded: dict[str, Any] = json.loads(json.dumps(dict(explanation)))
    return loaded


def stored(decision: Decision) -> Decision:
    """``decision`` as the store reads it back once written (``decisions.decision_of`` of its row)."""
    return dataclasses.replace(
        decision, nodes=tuple(decision_node(n) for n in nodes_json(decision.nodes)),
        replacements=tuple(replacement_of(r) for r in json.loads(json.dumps(replacements_json(decision.replacements)))),
        savings=float(stored_savings(decision.savings)), explanation=stored_explanation(decision.explanation))


#: the key of a decision's explanation under which it keeps the interruptions that came while it held their nodes
#: (approved or executing: ``DecisionStore.interrupt`` answered "busy"); if it ends without removing the nodes, its
#: ``finish`` writes each one's own decision, so no interruption is lost to a disruption that failed
INTERRUPTIONS_NOTED = "interruptionsNoted"


def noted_interruption(decision: Decision) -> dict[str, Any]:
    """The JSON entry that keeps an interruption's decision (handed over proposed, one node) on the decision that
    held its node."""
    [node] = decision.nodes
    return {"decisionId": decision.id, "node": node.name, "nodePool": node.nodepool,
            "instanceType": node.instance_type, "at": decision.created_at.isoformat(),
            "explanation": stored_explanation(decision.explanation)}


def noted_interruptions(explanation: Mapping[str, Any]) -> list[Decision]:
    """The interruptions' decisions kept on a decision (``noted_interruption``), proposed as they were handed over;
    an entry that does not read back is left out (a row edited by hand must not stop the decision's end)."""
    found: list[Decision] = []
    entries = explanation.get(INTERRUPTIONS_NOTED)
    for entry in entries if isinstance(entries, list) else []:
        try:
            at = utc(datetime.fromisoformat(entry["at"]))
            assert at is not None
            found.append(Decision(
                id=str(entry["decisionId"]), method="interruption", reason="Interrupted", action="delete",
                nodes=(DecisionNode(str(entry["node"]), str(entry.get("nodePool") or ""), entry.get("instanceType")),),
                replacements=(), savings=0.0, state=State.PROPOSED, created_at=at, updated_at=at,
                explanation=dict(entry.get("explanation") or {})))
        except (KeyError, TypeError, ValueError):
            continue
    return found


def with_noted(explanation: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
    """``explanation`` with the interruption's ``decision`` kept (once per decision id)."""
    entries = [e for e in explanation.get(INTERRUPTIONS_NOTED) or [] if isinstance(e, dict)]
    if any(e.get("decisionId") == decision.id for e in entries):
        return dict(explanation)
    return {**explanation, INTERRUPTIONS_NOTED: [*entries, noted_interruption(decision)]}


def interruptions_to_write(explanation: Mapping[str, Any]) -> list[Decision]:
    """The interruptions' decisions a holder that ended without removing its nodes writes (``noted_interruptions``):
    one per node, the first kept, each later one of its node kept on it (``with_noted``), so that two interruptions of
    one node never make two live decisions and a failure of the one written still writes the other."""
    first: dict[str, Decision] = {}
    for noted in noted_interruptions(explanation):
        [node] = noted.node_names
        kept = first.get(node)
        first[node] = noted if kept is None else dataclasses.replace(kept, explanation=with_noted(kept.explanation,
                                                                                                  noted))
    return list(first.values())

