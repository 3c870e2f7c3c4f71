"""A decision to test the lifecycle and its mappings with: a replace of one node by a cheaper one, proposed at
``T0`` (``T1`` is fifteen seconds later). Shared by the lifecycle's unit tests and the tests of its rows. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ebb.core.decision import Decision, DecisionNode, State
from ebb.core.methods.base import Replacement

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(seconds=15)


def decision(state: State = State.PROPOSED, **changes: object) -> Decision:
    """The replace decision in ``state``, with ``changes`` to its fields."""
    base = Decision(
        id="d-1", method="single-node-consolidation", reason="Underutilized", action="replace",
        nodes=(DecisionNode("n1", "general", "m5.xlarge"),),
        replacements=(Replacement("general", ("m5.large", "m5a.large"), "on-demand", ("us-east-1a",), 0.096),),
        savings=0.096, state=state, created_at=T0, updated_at=T0, explanation={"text": "cheaper"})
    return Decision(**{**{f: getattr(base, f) for f in base.__slots__}, **changes})  # type: ignore[arg-type]
