"""Request and response bodies of the /v1 API (camelCase on the wire, as in the CLI's JSON)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from ebb.adapters.store.models import Decision, DecisionEvent, Hold
from ebb.core.decision import State

HoldScope = Literal["cluster", "nodePool", "node"]
#: API scope → the store's scope_kind
SCOPE_TO_STORE: dict[str, str] = {"cluster": "cluster", "nodePool": "nodepool", "node": "node"}
STORE_TO_SCOPE: dict[str, str] = {v: k for k, v in SCOPE_TO_STORE.items()}
#: a decision's state: the lifecycle's own enum (``ebb.core.decision.State``)
DecisionState = State


class Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class HoldCreate(Wire):
    """A consolidation hold: pauses Empty and Underutilized disruptions in its scope until it expires."""

    scope: HoldScope
    #: the NodePool or node name; must be absent (or empty) for scope cluster
    target: str | None = Field(default=None, max_length=253, validate_default=True)
    #: when the hold ends (RFC 3339 with an offset, in the future); absent: until deleted
    expires_at: AwareDatetime | None = None
    reason: str = Field(min_length=1, max_length=2000)

    @field_validator("target")
    @classmethod
    def _target_matches_scope(cls, target: str | None, info: ValidationInfo) -> str | None:
        scope = info.data.get("scope")
        if scope == "cluster":
            if target:
                raise ValueError("must be empty when scope is cluster")
            return None
        if scope is not None and not target:
            raise ValueError(f"is required when scope is {scope}")
        return target

    @field_validator("expires_at")
    @classmethod
    def _in_the_future(cls, expires_at: datetime | None) -> datetime | None:
        if expires_at is not None and expires_at <= utc_now():
            raise ValueError("must be in the future")
        return expires_at


class HoldOut(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    scope: str
    target: str | None
    reason: str
    kind: str
    created_by: str | None
    created_at: datetime
    expires_at: datetime | None
    active: bool

    @classmethod
    def of(cls, hold: Hold, now: datetime) -> HoldOut:
        return cls(
            id=hold.id,
            scope=STORE_TO_SCOPE.get(hold.scope_kind, hold.scope_kind),
            target=hold.scope or None,
            reason=hold.reason,
            kind=hold.kind,
            created_by=hold.created_by,
            created_at=hold.created_at,
            expires_at=hold.expires_at,
            active=hold.expires_at is None or hold.expires_at > now,
        )


class HoldList(Wire):
    items: list[HoldOut]


class DecisionOut(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    cluster: str
    method: str
    reason: str
    action: str
    nodes: list[Any]
    replacements: list[Any]
    savings_per_hour: float | None
    state: DecisionState
    explanation: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    approved_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def fields_of(cls, d: Decision) -> dict[str, Any]:
        return {
            "id": d.id,
            "cluster": d.cluster,
            "method": d.method,
            "reason": d.reason,
            "action": d.action,
            "nodes": d.nodes,
            "replacements": d.replacements,
            "savings_per_hour": None if d.savings is None else float(d.savings),
            "state": d.state,
            "explanation": d.explanation,
            "created_at": d.created_at,
            "updated_at": d.updated_at,
            "approved_at": d.approved_at,
            "started_at": d.started_at,
            "finished_at": d.finished_at,
        }

    @classmethod
    def of(cls, d: Decision) -> DecisionOut:
        return cls(**cls.fields_of(d))


class DecisionList(Wire):
    items: list[DecisionOut]
    #: pass as ?cursor= for the next page; null on the last page
    next_cursor: str | None


class TimelineEntry(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    type: str
    at: datetime
    node: str | None
    event_id: str
    detail: dict[str, Any]

    @classmethod
    def of(cls, e: DecisionEvent) -> TimelineEntry:
        return cls(type=e.type, at=e.at, node=e.node, event_id=e.event_id, detail=e.detail)


class DecisionDetail(DecisionOut):
    #: the decision's events, oldest first
    timeline: list[TimelineEntry]


def utc_now() -> datetime:
    return datetime.now(UTC)
