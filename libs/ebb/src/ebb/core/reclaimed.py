"""Offerings the cloud is taking back: after a spot interruption, no replacement is launched in the same pool.

Karpenter's AWS provider marks the interrupted node's spot offering (its instance type in its zone) unavailable for
three minutes when a spot interruption warning comes (``markUnavailableOfferings``, ``UnavailableOfferingsTTL``):
the pool that is being reclaimed would likely reclaim a new node too, so the pods' next node goes elsewhere. ebb's
planner does the same for its own replacements: ``reclaimed_offering`` names the offering a warning takes back, and
``without_reclaimed`` gives a snapshot whose instance types have it unavailable until the mark runs out, for the
passes and validations in between. Only launches read it: an existing node keeps its price, and an offering that is
only unavailable does not drift a node (``ebb.core.methods.drift``). Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Final

from ebb.core.model import CAPACITY_SPOT, LABEL_INSTANCE_TYPE, LABEL_ZONE, Snapshot

#: how long a reclaimed spot offering stays unavailable (Karpenter's AWS provider's ``UnavailableOfferingsTTL``)
RECLAIMED_FOR: Final = timedelta(minutes=3)

#: (instance type, zone, capacity type) of an offering
OfferingKey = tuple[str, str, str]


def reclaimed_offering(kind: str, node_labels: Mapping[str, str]) -> OfferingKey | None:
    """The offering an interruption of a node with ``node_labels`` takes back: a spot interruption warning's, of the
    node's instance type in its zone (as Karpenter reads them on the NodeClaim); None for the other kinds, or a node
    whose type or zone is not known."""
    if kind != "spot-interruption":
        return None
    itype, zone = node_labels.get(LABEL_INSTANCE_TYPE), node_labels.get(LABEL_ZONE)
    if not itype or not zone:
        return None
    return (itype, zone, CAPACITY_SPOT)


def active(marks: Mapping[OfferingKey, datetime], now: datetime) -> frozenset[OfferingKey]:
    """The offerings whose mark has not run out at ``now`` (a mark holds until its time, not at it)."""
    return frozenset(key for key, until in marks.items() if now < until)


def without_reclaimed(snapshot: Snapshot, marks: Mapping[OfferingKey, datetime], now: datetime) -> Snapshot:
    """``snapshot`` with every offering marked in ``marks`` (until a time after ``now``) unavailable; the snapshot
    itself when no mark holds or no instance type has such an offering."""
    gone = active(marks, now)
    if not gone:
        return snapshot
    types = []
    changed = False
    for itype in snapshot.instance_types:
        offerings = tuple(replace(o, available=False) if o.available and (itype.name, o.zone, o.capacity_type) in gone
                          else o for o in itype.offerings)
        if offerings != itype.offerings:
            changed = True
            types.append(replace(itype, offerings=offerings))
        else:
            types.append(itype)
    return replace(snapshot, instance_types=tuple(types)) if changed else snapshot
